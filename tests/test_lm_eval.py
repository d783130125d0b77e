"""movers.integrations.harnesses.lm_eval in real lm-evaluation-harness runs (offline, CPU).

``simple_evaluate`` on a tiny local GPT-2 (built in the test) and a 6-row local JSONL task with two movers
metrics, then the ``lm-eval`` command of docs/harnesses.md on the shipped task template. Expected values are
direct ``movers.<slug>`` calls on the generations and references lm-eval logged; the corpus number differs from the
mean of the pairs scored one by one where the metric's corpus rule says it must (TWMD's batch centring,
MoverScore's per-call IDF). Bad input, empty generations and the embedding cache go through a stand-in
model that returns fixed generations (an ``lm_eval.api.model.LM``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import lm_eval  # in the test extra: a missing harness fails here, it is not skipped
import numpy as np
import pytest
from lm_eval.api.model import LM

import movers
import movers.integrations.harnesses.lm_eval as integration
from movers.core.result import REGROUPING_ATOL

from .helpers import REPO, check_missing_extra
from .support.tiny_lm import build_tiny_lm

PAIRS = [
    ("The cat", "The cat sat on the mat."),
    ("A dog", "A dog barked at the postman."),
    ("The weather", "The weather is nice today."),
    ("My friend", "My friend came home late."),
    ("The train", "The train left the station early."),
    ("She said", "She said the meeting was over."),
]
ATOL = REGROUPING_ATOL  # the harness's in-memory cache holds vectors of earlier calls: other batches


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-gpt2"), [t for pair in PAIRS for t in pair])


def _data(folder: Path, name: str = "data.jsonl", pairs=PAIRS) -> Path:
    path = folder / name
    path.write_text("".join(json.dumps({"source": s, "reference": r}) + "\n" for s, r in pairs), encoding="utf-8")
    return path


def _task(data: Path, metric_list: list[dict], name: str = "movers_test") -> dict:
    return {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
            "test_split": "test", "output_type": "generate_until", "doc_to_text": "{{source}}",
            "doc_to_target": "{{reference}}", "metric_list": metric_list,
            "generation_kwargs": {"until": ["\n"], "max_gen_toks": 16, "do_sample": False}}


def _manager():
    """A task manager without lm-eval's built-in tasks: indexing their ~14,000 YAML files takes 9 s per call."""
    return lm_eval.tasks.TaskManager(include_defaults=False)


def _logged(samples: list[dict]) -> tuple[list[str], list[str]]:
    """The generations and references lm-eval logged, in document order."""
    samples = sorted(samples, key=lambda s: s["doc_id"])
    return [s["filtered_resps"][0] for s in samples], [s["target"] for s in samples]


def _one_by_one(metric: str, preds: list[str], refs: list[str], **options) -> float:
    """What a harness averaging per-document scores would report."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single-pair calls warn about their per-call statistics
        alone = [getattr(movers, metric)([p], [r], **options).score for p, r in zip(preds, refs, strict=True)]
    return float(np.mean(alone))


@pytest.mark.slow
def test_simple_evaluate_reports_the_corpus_score_of_the_logged_generations(tiny_model, tmp_path):
    metric_list = [{"metric": "movers_twmd"}, {"metric": "movers_moverscore", "idf": True}]
    out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={tiny_model},device=cpu",
                                  tasks=[_task(_data(tmp_path), metric_list)], log_samples=True,
                                  task_manager=_manager())
    results = out["results"]["movers_test"]
    preds, refs = _logged(out["samples"]["movers_test"])
    assert refs == [r for _, r in PAIRS] and all(p.strip() for p in preds) and len(set(preds)) > 2

    twmd, moverscore = movers.twmd(preds, refs), movers.moverscore(preds, refs, idf=True)
    assert results["movers_twmd,none"] == pytest.approx(twmd.score, abs=ATOL)
    assert results["movers_moverscore,none"] == pytest.approx(moverscore.score, abs=ATOL)
    # the options of the metric_list entry reached the call, and the signature sits beside the number
    assert results["movers_twmd_signature,none"] == str(twmd.signature)
    assert results["movers_moverscore_signature,none"] == str(moverscore.signature)
    assert "|idf:call|" in results["movers_moverscore_signature,none"]
    # a corpus statistic, not a mean of pairs scored alone (TWMD centres on the batch, IDF is per call)
    assert abs(twmd.score - _one_by_one("twmd", preds, refs)) > 1e-3
    assert abs(moverscore.score - _one_by_one("moverscore", preds, refs, idf=True)) > 1e-3
    # not bootstrapped (lm-eval's default bootstrap_iters=100000 would re-score the corpus 100000 times)
    assert results["movers_twmd_stderr,none"] == "N/A"
    assert out["higher_is_better"]["movers_test"]["movers_twmd"] is True


def readme_lm_eval_command() -> str:
    section = (REPO / "docs" / "harnesses.md").read_text(encoding="utf-8")
    return " ".join(re.search(r"```bash\n(lm-eval run .*?)```", section, re.S).group(1).replace("\\\n", " ").split())


@pytest.mark.system
@pytest.mark.slow
def test_the_readme_command_runs_the_shipped_task_template(tiny_model, tmp_path):
    """`lm-eval run ... --include_path "$(movers lm-eval tasks)"`: the template's `!function utils.movers_<slug>`
    entries import movers' task folder shim, which registers the metrics; no Python written by the user. The
    harness's own command end to end (a minute of CPU): a system test; in a plain run the template and its shim run
    in this process (test_a_copied_task_reads_its_data_beside_it_from_any_working_directory)."""
    _data(tmp_path, "movers_template.jsonl")
    command = readme_lm_eval_command().replace("MODEL", str(tiny_model)) + " --device cpu"
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(next((tmp_path / "results").rglob("results_*.json")).read_text())["results"]
    samples = [json.loads(line) for line in next((tmp_path / "results").rglob("samples_*.jsonl")).open()]
    preds, refs = _logged(samples)
    got = results["movers_template"]
    assert got["movers_twmd,none"] == pytest.approx(movers.twmd(preds, refs).score, abs=ATOL)
    assert got["movers_moverscore,none"] == pytest.approx(movers.moverscore(preds, refs, idf=True).score, abs=ATOL)
    assert got["movers_moverscore_signature,none"].startswith("MoverScore|preset:1.0.3|nrefs:1|")
    assert "movers_twmd_signature" in run.stdout  # the results table shows the signature beside the number
    # the template names each metric's aggregation and direction: lm-eval has nothing to warn about
    assert "is defined, but" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]


def test_a_copied_task_reads_its_data_beside_it_from_any_working_directory(tmp_path, monkeypatch):
    """The template and utils.py copied into a task folder beside its data, run from another folder: the data file
    is found beside the YAML (lm-eval's own `dataset_path: json` would look in the working directory)."""
    folder = tmp_path / "my_task"
    folder.mkdir()
    for name in ("movers_template.yaml", "utils.py"):
        (folder / name).write_text((integration.TASKS / name).read_text(encoding="utf-8"), encoding="utf-8")
    _data(folder, "movers_template.jsonl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    generations = {source: f"{reference} Indeed." for source, reference in PAIRS}  # none empty: the harness
    out = lm_eval.simple_evaluate(model=Fixed(generations), tasks=["movers_template"], log_samples=True,  # warns once
                                  task_manager=lm_eval.tasks.TaskManager(include_path=str(folder),
                                                                         include_defaults=False))
    preds, refs = _logged(out["samples"]["movers_template"])
    assert refs == [r for _, r in PAIRS]
    got = out["results"]["movers_template"]["movers_twmd,none"]
    assert got == pytest.approx(movers.twmd(preds, refs).score, abs=ATOL)
    with pytest.raises(FileNotFoundError, match="found neither beside the task"):
        integration.local_json(tmp_path / "nowhere", data_files={"test": "missing.jsonl"})


def test_the_template_states_each_metrics_aggregation_and_direction():
    text = (integration.TASKS / "movers_template.yaml").read_text(encoding="utf-8")
    entries = re.findall(r"- metric: !function utils\.(movers_\w+)\n\s+aggregation: (\S+)\n\s+higher_is_better: (\w+)",
                         text)
    assert [e[0] for e in entries] == ["movers_twmd", "movers_moverscore"]
    for name, aggregation, higher in entries:
        assert aggregation == name and higher == str(movers.metrics.get(name[len("movers_"):]).higher_is_better).lower()


def test_without_lm_eval_the_error_quotes_the_extras_requirement():
    check_missing_extra("movers.integrations.harnesses.lm_eval", "lm-eval", "lm-eval", "lm_eval")


def test_movers_lm_eval_tasks_prints_the_folder_with_the_shim_and_the_template():
    out = subprocess.run([sys.executable, "-m", "movers", "lm-eval", "tasks"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    assert folder == integration.TASKS and (folder / "utils.py").is_file()
    assert (folder / "movers_template.yaml").is_file()
    usage = subprocess.run([sys.executable, "-m", "movers", "lm-eval"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr == ("movers lm-eval: error: the following arguments are required: "
                                                      "tasks (see movers lm-eval --help)\n")


def test_every_registered_metric_has_a_metric_and_an_aggregation():
    from lm_eval.api import registry as lm_registry

    for spec in movers.metrics.specs():
        name = f"movers_{spec.slug}"
        assert lm_registry.get_metric(name) is integration.document_metric(spec.slug)
        assert lm_registry.get_metric_aggregation(name) is integration.aggregation(spec.slug)
        assert lm_registry.is_higher_better(name) is spec.higher_is_better
    assert lm_registry.get_metric("bleu") is not None  # lm-eval's own metrics are still there
    assert integration.register() == [f"movers_{s}" for s in movers.metrics.slugs()]  # idempotent


class Fixed(LM):
    """A stand-in model: each prompt's generation is given."""

    def __init__(self, generations: dict[str, str]) -> None:
        super().__init__()
        self.generations = generations

    def generate_until(self, requests, disable_tqdm: bool = False):
        return [self.generations[r.arguments[0]] for r in requests]

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError


GENERATIONS = {"The cat": "A cat sat on a mat.", "A dog": "", "The weather": "It is nice today.",
               "My friend": "My friend came back late.", "The train": "   ", "She said": "The meeting ended."}


def _fixed_run(tmp_path, metric_list, generations=GENERATIONS, pairs=PAIRS):
    return lm_eval.simple_evaluate(model=Fixed(generations), tasks=[_task(_data(tmp_path, pairs=pairs), metric_list)],
                                   log_samples=True, task_manager=_manager())


@pytest.mark.slow
def test_empty_generations_get_the_worst_value_with_one_warning_and_the_cache_serves_a_second_run(tmp_path,
                                                                                                 monkeypatch):
    from movers.integrations.harnesses import common as harness
    from movers.text import models

    loads = []
    load = models._load_backbone
    monkeypatch.setattr(models, "_load_backbone", lambda *a: loads.append(a) or load(*a))
    movers.clear_encoder_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _fixed_run(tmp_path, [{"metric": "movers_sms"}, {"metric": "movers_twmd"}])
    empty = [w for w in caught if "are empty" in str(w.message)]
    assert [str(w.message).split(":")[0] for w in empty] == ["sms", "twmd"]  # one warning per metric
    assert all("predictions [1, 4] are empty" in str(w.message) for w in empty)
    results = out["results"]["movers_test"]
    preds, refs = _logged(out["samples"]["movers_test"])
    assert preds[1] == "" and preds[4] == "   "
    direct = movers.twmd(preds, refs)
    assert direct.scores[1] == direct.scores[4] == -1.0  # the worst value
    assert results["movers_twmd,none"] == pytest.approx(direct.score, abs=ATOL)
    assert results["movers_sms,none"] == pytest.approx(movers.sms(preds, refs).score, abs=ATOL)
    assert movers.sms(preds, refs).scores[1] == 0.0
    assert len(loads) == 1  # one encoder load for the whole run (and the direct calls; SMS reads GloVe)

    cache = harness._HOLDER._movers_cache
    before = cache.info()
    again = _fixed_run(tmp_path, [{"metric": "movers_twmd"}], {**GENERATIONS, "The cat": "The cat sat."})
    assert cache.info().hits - before.hits >= len(PAIRS)  # the references (and 4 generations) were not re-embedded
    assert len(loads) == 1
    preds2, _ = _logged(again["samples"]["movers_test"])
    assert again["results"]["movers_test"]["movers_twmd,none"] == pytest.approx(movers.twmd(preds2, refs).score,
                                                                                abs=ATOL)


@pytest.mark.slow
def test_bad_input_gets_movers_named_error(tmp_path):
    with pytest.raises(ValueError, match=r"twmd\(\) got an unexpected keyword argument 'idf'.*metric_list"):
        _fixed_run(tmp_path, [{"metric": "movers_twmd", "idf": True}])
    with pytest.raises(ValueError, match=r"moverscore: `n_gram` must be"):  # movers' ValueError as it is
        integration.document_metric("moverscore")(references=["a"], predictions=["b"], n_gram=0)
    # several references per document: lm-eval scores each target alone and keeps any(); refused, with the reason
    task = _task(_data(tmp_path), [{"metric": "movers_twmd"}])
    task["doc_to_target"] = "{{[reference, source]}}"
    with pytest.raises(ValueError, match=r"movers_twmd: the aggregation needs the \(reference, generation\) pairs"):
        lm_eval.simple_evaluate(model=Fixed(GENERATIONS), tasks=[task], task_manager=_manager())


def test_the_aggregation_refuses_what_is_not_its_pairs():
    agg = integration.aggregation("twmd")
    with pytest.raises(ValueError, match="give one reference per document"):
        agg([1.0, 1.0])
    document = integration.document_metric("twmd")
    items = document(references=["A cat sat."], predictions=["The cat sat."])
    assert set(items) == {"movers_twmd", "movers_twmd_signature"}
    other = integration.document_metric("twmd")(references=["b"], predictions=["c"], temperature=0.5)
    with pytest.raises(ValueError, match="different options"):
        agg([items["movers_twmd"], other["movers_twmd"]])
