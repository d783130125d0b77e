"""movers.integrations.harnesses.lighteval in real LightEval runs (offline, CPU).

LightEval 0.13 needs huggingface-hub < 1, which the test extra's transformers 5 excludes (pyproject.toml), so the
tests that import LightEval run in an environment of its own: .ci/run installs ``movers[lighteval]`` alone, runs
the page's commands there (.ci/harness_pages.py), then this file; in the test environment they are skipped, and
the rest (the missing extra's message, ``movers lighteval tasks``, the task file's text) runs.

LightEval's ``Pipeline`` on a tiny local GPT-2 (built in the test) and the shipped task file, on docs with two
references and ΔBLEU weights each: every metric's corpus value equals a direct ``movers.<slug>`` call on the
generations and golds LightEval saved in its details (to 1e-9), each sample's details hold its score in that call,
and each metric is scored once (no bootstrap). Bad input goes through a stand-in model with fixed generations
(a LightEval ``DummyModel``) and through LightEval's metric interfaces (``compute_sample``, ``compute_corpus``).
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import movers
from movers.integrations.harnesses import LIGHTEVAL_TASKS

from .helpers import REPO, check_missing_extra
from .support.tiny_lm import build_tiny_lm

HAS_LIGHTEVAL = importlib.util.find_spec("lighteval") is not None
needs_lighteval = pytest.mark.skipif(not HAS_LIGHTEVAL, reason=(
    "LightEval 0.13 needs huggingface-hub<1, which the test extra's transformers 5 excludes: .ci/run runs this file "
    "in an environment with movers[lighteval] alone"))

DOCS = [  # (prompt, references, ΔBLEU's weights of the references)
    ("The cat", ["The cat sat on the mat.", "A cat was on the mat."], [1.0, 0.4]),
    ("A dog", ["A dog barked at the postman.", "The dog barked."], [0.9, -0.2]),
    ("The weather", ["The weather is nice today.", "It is sunny today."], [1.0, 0.5]),
    ("My friend", ["My friend came home late.", "He came back late."], [0.8, 0.6]),
    ("The train", ["The train left the station early.", "The train left."], [1.0, 0.1]),
    ("She said", ["She said the meeting was over.", "The meeting ended."], [0.7, 0.7]),
]
SIX = ("twmd", "moverscore", "sms", "s_wms", "lazy_emd", "delta_bleu")
OPTIONS = {"moverscore": {"idf": True}}  # the task file's options
ATOL = 1e-9  # every metric of a task sees the same texts: the cache holds the vectors a direct call makes


def _write(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


def _records(docs=DOCS) -> list[dict]:
    return [{"source": s, "references": refs, "reference_weights": w} for s, refs, w in docs]


@pytest.fixture(autouse=True)
def offline_task_list(monkeypatch):
    """LightEval 0.13 imports every built-in task file when it loads its task list, and tiny_benchmarks.py downloads
    a file from GitHub at import (docs/harnesses.md: offline); here that one module is an empty one instead."""
    if HAS_LIGHTEVAL:
        monkeypatch.setitem(sys.modules, "lighteval.tasks.tasks.tiny_benchmarks",
                            types.ModuleType("lighteval.tasks.tasks.tiny_benchmarks"))


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    """Each test starts with the harness's in-memory embedding cache empty: a corpus call then embeds its texts in
    the batches a direct call makes, bit for bit (vectors cached by another test's call, in other batches, agree
    to float32 rounding only: movers.core.result.REGROUPING_ATOL)."""
    from movers.integrations.harnesses import common

    monkeypatch.setattr(common._HOLDER, "_movers_cache", None)


def _pipeline(tmp_path: Path, tasks: str, custom_tasks, *, model=None, model_config=None, **parameters):
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    tracker = EvaluationTracker(output_dir=str(tmp_path / "results"), save_details=True)
    parameters = PipelineParameters(launcher_type=ParallelismManager.ACCELERATE if model is None else
                                    ParallelismManager.NONE, custom_tasks_directory=custom_tasks, **parameters)
    pipeline = Pipeline(tasks=tasks, pipeline_parameters=parameters, evaluation_tracker=tracker,
                        model_config=model_config, model=model)
    pipeline.evaluate()
    pipeline.save_and_push_results()
    results = json.loads(next((tmp_path / "results").rglob("results_*.json")).read_text())["results"]
    return results, _details(tmp_path / "results")


def _details(folder: Path) -> list[dict]:
    """The rows of LightEval's saved details (one parquet file per task), in the order it scored them."""
    import datasets

    (path,) = folder.rglob("details_*.parquet")
    return list(datasets.load_dataset("parquet", data_files=str(path), split="train"))


def _logged(rows: list[dict]) -> tuple[list[str], list, list | None]:
    """Generations, golds and weights as LightEval saved them (the oracle's inputs: not the integration's)."""
    preds = [row["model_response"]["text"][0] for row in rows]
    golds = []
    for row in rows:
        index = row["doc"]["gold_index"]
        chosen = [row["doc"]["choices"][i] for i in (index if isinstance(index, list) else [index])]
        golds.append(chosen[0] if len(chosen) == 1 else chosen)
    weights = [(row["doc"]["specific"] or {}).get("reference_weights") for row in rows]
    return preds, golds, (None if any(w is None for w in weights) else weights)


def _one_by_one(slug: str, preds, refs, **options) -> float:
    """What a harness averaging per-sample scores would report."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single-pair calls warn about their per-call statistics
        alone = [getattr(movers, slug)([p], [r], **options).score for p, r in zip(preds, refs, strict=True)]
    return float(np.mean(alone))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-gpt2"), [s for s, refs, _ in DOCS for s in (s, *refs)])


@pytest.mark.slow
@needs_lighteval
def test_the_task_file_through_the_pipeline_reports_one_movers_call_per_metric(tiny_model, tmp_path, monkeypatch):
    """The shipped task file (references and weights read by its prompt function) on a tiny GPT-2: LightEval's
    corpus values are the direct calls on what its details logged, and each metric is scored exactly once."""
    from lighteval.models.transformers.transformers_model import TransformersModelConfig

    from movers.integrations.harnesses import common

    calls: list[str] = []
    score = common.CorpusMetric.score
    monkeypatch.setattr(common.CorpusMetric, "score", lambda self, *a, **k: calls.append(self.spec.slug)
                        or score(self, *a, **k))
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "movers_template", _records())
    config = TransformersModelConfig(model_name=str(tiny_model), device="cpu")
    results, rows = _pipeline(tmp_path, "movers_template|0", str(LIGHTEVAL_TASKS), model_config=config)
    got = results["movers_template|0"]

    preds, golds, weights = _logged(rows)
    assert sorted(golds) == sorted(refs for _, refs, _ in DOCS) and weights is not None
    assert sum(bool(p.strip()) for p in preds) >= 4 and len(set(preds)) > 2  # real words (and an empty one)
    assert sorted(calls) == sorted(SIX)  # one call per metric: LightEval bootstrapped none of them
    assert not [key for key in got if key.endswith("_stderr")]
    for slug in SIX:
        direct = getattr(movers, slug)(preds, golds, **({"reference_weights": weights} if slug == "delta_bleu"
                                                         else OPTIONS.get(slug, {})))
        assert abs(got[f"movers_{slug}"] - direct.score) <= ATOL, slug
        samples = [row["metric"][f"movers_{slug}"] for row in rows]  # each sample: its score in that call
        assert [s["score"] for s in samples] == pytest.approx(direct.scores, abs=ATOL, rel=0), slug
        assert {s["signature"] for s in samples} == {str(direct.signature)}
    assert "|w:rated|" in rows[0]["metric"]["movers_delta_bleu"]["signature"]  # the docs' weights reached ΔBLEU
    assert "|idf:call|" in rows[0]["metric"]["movers_moverscore"]["signature"]
    # a corpus statistic, not a mean of pairs scored alone (TWMD centres on the set, IDF is per call)
    assert abs(got["movers_twmd"] - _one_by_one("twmd", preds, golds)) > 1e-3
    assert abs(got["movers_moverscore"] - _one_by_one("moverscore", preds, golds, idf=True)) > 1e-3


def _fixed(generations: dict, tmp_path: Path):
    """A stand-in model whose generation for each prompt is given (None and numbers included)."""
    from lighteval.models.dummy.dummy_model import DummyModel, DummyModelConfig
    from lighteval.models.model_output import ModelResponse

    class Fixed(DummyModel):
        def greedy_until(self, docs):
            return [ModelResponse(text=[generations[doc.query]]) for doc in docs]

    return Fixed(DummyModelConfig(model_name="fixed", cache_dir=str(tmp_path / "cache")))


def _task(tmp_path: Path, metrics, records=None, name: str = "movers_test"):
    from lighteval.tasks.lighteval_task import LightevalTaskConfig

    from movers.integrations.harnesses.lighteval import doc_from_record

    data = _write(tmp_path / name, records if records is not None else _records())
    module = types.ModuleType(f"{name}_tasks")
    module.TASKS_TABLE = [LightevalTaskConfig(  # type: ignore[attr-defined]
        name=name, prompt_function=doc_from_record, hf_repo=str(data), hf_subset="default",
        hf_avail_splits=["test"], evaluation_splits=["test"], generation_size=16, metrics=metrics)]
    return module


GENERATIONS = {"The cat": "A cat sat on a mat.", "A dog": "", "The weather": "It is nice today.",
               "My friend": "My friend came back late.", "The train": "The train left.", "She said": "It ended."}


@needs_lighteval
def test_options_as_lighteval_sample_params_reach_the_call_under_lighteval_names(tmp_path):
    from movers.integrations.harnesses.lighteval import metric

    base = metric("delta_bleu")
    two = base(sample_params={"max_ngram_order": 2})
    assert two.metric_name == "movers_delta_bleu:max_ngram_order=2" and base.metric_name == "movers_delta_bleu"
    assert base.sample_level_fn.options == {}  # the metric called is left as it was (as LightEval's Metrics enum)
    results, rows = _pipeline(tmp_path, "movers_test|0", _task(tmp_path, [base, two]), model=_fixed(GENERATIONS,
                                                                                                     tmp_path))
    preds, golds, weights = _logged(rows)
    got = results["movers_test|0"]
    assert got["movers_delta_bleu"] == movers.delta_bleu(preds, golds, reference_weights=weights).score
    assert got["movers_delta_bleu:max_ngram_order=2"] == movers.delta_bleu(preds, golds, reference_weights=weights,
                                                                           max_ngram_order=2).score
    assert got["movers_delta_bleu"] != got["movers_delta_bleu:max_ngram_order=2"]
    with pytest.raises(TypeError, match=r"delta_bleu\(\) got an unexpected keyword argument 'idf'"):
        base(sample_params={"idf": True})
    with pytest.raises(ValueError, match=r"`max_ngram_order` must be >= 1"):
        base(sample_params={"max_ngram_order": 0})
    with pytest.raises(TypeError, match="unexpected keyword argument 'idf'"):
        metric("twmd", idf=True)
    with pytest.raises(TypeError, match="`references` is an input, not an option"):
        metric("twmd", references=["a"])


@needs_lighteval
def test_lighteval_interfaces_give_the_direct_call():
    """compute_sample per doc, then the corpus computation and the aggregation LightEval's pipeline calls."""
    from lighteval.models.model_output import ModelResponse

    from movers.integrations.harnesses.lighteval import MoversSample, doc_from_record, metric

    m = metric("delta_bleu", lowercase=True)
    docs = [doc_from_record(r, "t|0") for r in _records()]
    preds = [GENERATIONS[s] for s, _, _ in DOCS]
    items = [m.compute_sample(doc=d, model_response=ModelResponse(text=[p]))["movers_delta_bleu"]
             for d, p in zip(docs, preds, strict=True)]
    assert all(isinstance(x, MoversSample) for x in items) and items[0].references == DOCS[0][1]
    direct = movers.delta_bleu(preds, [refs for _, refs, _ in DOCS], reference_weights=[w for *_, w in DOCS],
                               lowercase=True)
    assert m.corpus_level_fn.compute_corpus(items) == direct.score
    assert m.get_corpus_aggregations()["movers_delta_bleu"](items) == {"movers_delta_bleu": direct.score}
    assert [x.score for x in items] == [float(s) for s in direct.scores]
    assert m.higher_is_better is True and metric("lazy_emd").higher_is_better is False


@needs_lighteval
def test_bad_generations_are_named_by_sample_before_anything_is_scored(tmp_path):
    from movers.integrations.harnesses.lighteval import SampleError, SampleTypeError, metric

    for bad in (None, 123):  # LightEval's removal of reasoning tags (on by default) would stop at them first
        generations = {**GENERATIONS, "My friend": bad}
        with pytest.raises(SampleTypeError, match=rf"movers_twmd: sample '3' of task 'movers_test\|0': the "
                                                  rf"generation must be a string, got {type(bad).__name__} {bad}\."):
            _pipeline(tmp_path / str(bad), "movers_test|0", _task(tmp_path / str(bad), [metric("twmd")]),
                      model=_fixed(generations, tmp_path), remove_reasoning_tags=False)
    assert issubclass(SampleTypeError, TypeError) and issubclass(SampleTypeError, ValueError)
    records = _records()
    records[2]["references"] = []
    with pytest.raises(SampleError, match=r"movers_delta_bleu: sample '2' of task 'movers_test\|0' has no gold "
                                          r"reference"):
        _pipeline(tmp_path / "nogold", "movers_test|0", _task(tmp_path / "nogold", [metric("delta_bleu")], records),
                  model=_fixed(GENERATIONS, tmp_path))


@needs_lighteval
def test_samples_the_corpus_cannot_take_together_are_named():
    from lighteval.models.model_output import ModelResponse

    from movers.integrations.harnesses.lighteval import SampleError, doc_from_record, metric

    m = metric("delta_bleu")
    records = _records()

    def item(metric_, k, record=None):
        doc = doc_from_record(record or records[k], "t|0")
        doc.id = str(k)
        return metric_.compute_sample(doc=doc, model_response=ModelResponse(text=[GENERATIONS[DOCS[k][0]]]))
    other = m(sample_params={"max_ngram_order": 2})
    items = [item(m, 0)["movers_delta_bleu"], item(other, 1)["movers_delta_bleu:max_ngram_order=2"]]
    with pytest.raises(SampleError, match=r"sample '1' of task 't\|0' was prepared with the options "
                                          r"\{\"max_ngram_order\": 2\}, sample '0' of task 't\|0' with \{\}"):
        m.corpus_level_fn.compute_corpus(items)
    unweighted = {**records[1], "reference_weights": None}
    items = [item(m, 0)["movers_delta_bleu"], item(m, 1, unweighted)["movers_delta_bleu"]]
    with pytest.raises(SampleError, match=r"sample '1' of task 't\|0' has no `reference_weights` in doc.specific"):
        m.corpus_level_fn.compute_corpus(items)
    out_of_range = {**records[1], "reference_weights": [2.0, 0.5]}
    items = [item(m, 0)["movers_delta_bleu"], item(m, 1, out_of_range)["movers_delta_bleu"]]
    with pytest.raises(ValueError, match=r"`reference_weights\[1\]\[0\]` must be a number in \[-1, 1\], got 2.0\. "
                                         r"\(reference_weights\[1\] is sample '1' of task 't\|0'\.\)"):
        m.corpus_level_fn.compute_corpus(items)
    with pytest.raises(SampleError, match=r"needs the samples that movers_delta_bleu's preparator makes"):
        m.corpus_level_fn.compute_corpus([0.5, 0.25])


@needs_lighteval
def test_the_preparation_names_the_sample_it_refuses():
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    from movers.integrations.harnesses.lighteval import SampleError, SampleTypeError, doc_from_record, metric

    m = metric("twmd", name="twmd_plain", centering="none")
    assert m.metric_name == "twmd_plain" and m.sample_level_fn.centering == "none"
    doc = Doc(query="q", choices=["A cat.", None], gold_index=[0, 1], id="7", task_name="t|0")
    with pytest.raises(SampleTypeError, match=r"twmd: sample '7' of task 't\|0': each gold reference must be a "
                                              r"string, got NoneType None\."):
        m.compute_sample(doc=doc, model_response=ModelResponse(text=["A cat."]))
    doc = Doc(query="q", choices=["A cat."], gold_index=3, id="7", task_name="t|0")
    with pytest.raises(SampleError, match=r"sample '7' of task 't\|0' has no gold reference.*gold_index=3"):
        m.compute_sample(doc=doc, model_response=ModelResponse(text=["A cat."]))
    doc = Doc(query="q", choices=["A cat."], gold_index=0, id="7", task_name="t|0")
    with pytest.raises(SampleError, match=r"sample '7' of task 't\|0' has no generation"):
        m.compute_sample(doc=doc, model_response=ModelResponse(text=[]))
    with pytest.raises(ValueError, match=r"movers LightEval task 't': row 4 has no `source` \(the prompt\); its "
                                         r"fields are \['prompt', 'reference'\]"):
        doc_from_record({"prompt": "q", "reference": "r", "__index": 4, "__few_shots": False}, "t")


@pytest.mark.slow
@needs_lighteval
def test_an_empty_generation_gets_the_worst_value_with_movers_warning(tmp_path):
    from movers.integrations.harnesses.lighteval import metric

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results, rows = _pipeline(tmp_path, "movers_test|0", _task(tmp_path, [metric("twmd")]),
                                  model=_fixed(GENERATIONS, tmp_path))
    preds, golds, _ = _logged(rows)
    direct = movers.twmd(preds, golds)
    assert results["movers_test|0"]["movers_twmd"] == pytest.approx(direct.score, abs=ATOL)
    empty = preds.index("")
    assert rows[empty]["metric"]["movers_twmd"]["score"] == direct.scores[empty] == -1.0
    assert [str(w.message).split(":")[0] for w in caught if "are empty" in str(w.message)] == ["twmd"]


@needs_lighteval
def test_the_task_file_reads_its_data_folder_beside_it_or_in_the_working_directory(tmp_path, monkeypatch):
    from movers.integrations.harnesses.lighteval import local_data

    copy = tmp_path / "mine" / "task.py"
    copy.parent.mkdir()
    copy.write_text(LIGHTEVAL_TASKS.read_text(encoding="utf-8"), encoding="utf-8")
    _write(tmp_path / "mine" / "movers_template", _records())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert local_data(copy, "movers_template") == str(tmp_path / "mine" / "movers_template")
    _write(elsewhere / "movers_template", _records())
    assert local_data(LIGHTEVAL_TASKS, "movers_template") == str(elsewhere / "movers_template")
    with pytest.raises(FileNotFoundError, match="movers LightEval task: data folder 'nowhere' was found neither"):
        local_data(copy, "nowhere")
    spec = importlib.util.spec_from_file_location("movers_template_copy", copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (config,) = module.TASKS_TABLE
    assert config.hf_repo == str(tmp_path / "mine" / "movers_template")
    assert [m.metric_name for m in config.metrics] == [f"movers_{s}" for s in SIX]


def test_the_task_file_names_the_six_metrics_and_the_command():
    text = LIGHTEVAL_TASKS.read_text(encoding="utf-8")
    assert re.findall(r"^ +(\w+)\((?:idf=True)?\),$", text, re.M) == list(SIX)
    assert "moverscore(idf=True)" in text
    page = (REPO / "docs" / "harnesses.md").read_text(encoding="utf-8")
    assert '--custom-tasks "$(movers lighteval tasks)"' in page and '--custom-tasks "$(movers lighteval tasks)"' in text


def test_movers_lighteval_tasks_prints_the_task_file_or_names_the_extra():
    out = subprocess.run([sys.executable, "-m", "movers", "lighteval", "tasks"], capture_output=True, text=True)
    if HAS_LIGHTEVAL:
        assert out.returncode == 0, out.stderr
        assert Path(out.stdout.strip()) == LIGHTEVAL_TASKS and LIGHTEVAL_TASKS.is_file()
    else:
        assert out.returncode == 2 and "pip install 'movers[lighteval]'" in out.stderr, out.stderr
    usage = subprocess.run([sys.executable, "-m", "movers", "lighteval"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr == ("movers lighteval: error: the following arguments are required: "
                                                      "tasks (see movers lighteval --help)\n")


def test_without_lighteval_the_error_quotes_the_extras_requirement():
    check_missing_extra("movers.integrations.harnesses.lighteval", "lighteval", "lighteval", "lighteval")
