"""movers.integrations.harnesses.inspect_ai in real Inspect runs (offline, CPU).

``inspect_ai.eval`` with ``mockllm/model`` (fixed generations, one empty, one sample with two references) and
once with the tiny local GPT-2 through the ``hf/`` provider; the corpus metric equals a direct
``movers.<slug>`` call on the logged answers and targets, and differs from the mean of the samples' values
where the corpus rule says it must. From a wheel installed in a fresh environment, ``movers/moverscore``
resolves by name through the entry point, and ``inspect score`` re-scores a saved log with it.
"""
from __future__ import annotations

import os
import subprocess
import warnings

import inspect_ai  # in the test extra: a missing harness fails here, it is not skipped
import numpy as np
import pytest
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model

import movers
import movers.integrations.harnesses.inspect_ai as integration
from movers.core.result import REGROUPING_ATOL

from .helpers import venv_with_our_dependencies
from .support.tiny_lm import build_tiny_lm

ATOL = REGROUPING_ATOL  # the harness's in-memory cache holds vectors of earlier calls: other batches
SAMPLES = [  # (prompt, generation, target)
    ("Describe the cat.", "The cat sat on the mat.", "A cat was sitting on the mat."),
    ("What did the dog do?", "A dog barked loudly at the postman.", "The dog was barking at the mailman."),
    ("How is the weather?", "", "The weather is nice today."),
    ("When did your friend come?", "My friend came home late.", ["My friend returned late.", "He came late."]),
    ("Where did the train go?", "The train left the station.", "The train departed from the station early."),
]


def _mockllm():
    generations = {prompt: generation for prompt, generation, _ in SAMPLES}

    def reply(messages, tools, tool_choice, config):  # usage given: mockllm counts no tokens (no tiktoken file)
        out = ModelOutput.from_content(model="mockllm", content=generations[messages[-1].text])
        return out.model_copy(update={"usage": ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)})

    return get_model("mockllm/model", custom_outputs=reply)


def _task(scorers):
    return inspect_ai.Task(dataset=[Sample(input=p, target=t, id=i) for i, (p, _, t) in enumerate(SAMPLES)],
                           scorer=scorers)


def _logged(log) -> tuple[list[str], list]:
    samples = sorted(log.samples, key=lambda s: s.id)
    return [s.output.completion for s in samples], [s.target for s in samples]


def _corpus(log, scorer: str) -> float:
    (score,) = [s for s in log.results.scores if s.name == scorer]
    return score.metrics["corpus"].value


@pytest.mark.slow
def test_eval_with_mockllm_reports_the_corpus_score(tmp_path, caplog):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (log,) = inspect_ai.eval(_task([integration.twmd(), integration.moverscore(idf=True)]), model=_mockllm(),
                                 log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    # Inspect asks each metric for its value on zero samples: movers/corpus answers without raising
    assert not [r for r in caplog.records if "empty sample set" in r.getMessage()]
    assert integration.corpus()([]) == {}
    preds, refs = _logged(log)
    assert preds == [g for _, g, _ in SAMPLES] and refs == [t for _, _, t in SAMPLES]
    twmd, moverscore = movers.twmd(preds, refs), movers.moverscore(preds, refs, idf=True)
    assert _corpus(log, "twmd") == pytest.approx(twmd.score, abs=ATOL)
    assert _corpus(log, "moverscore") == pytest.approx(moverscore.score, abs=ATOL)
    by_name = {s.name: s for s in log.results.scores}
    assert by_name["moverscore"].params == {"idf": True} and by_name["moverscore"].scorer == "moverscore"

    sample = sorted(log.samples, key=lambda s: s.id)
    values = [s.scores["twmd"].value for s in sample]
    for s, (_, generation, target) in zip(sample, SAMPLES, strict=True):
        score = s.scores["twmd"]
        assert score.answer == generation and score.metadata["reference"] == target
    # a sample's value is its pair scored alone; the corpus score is not their mean (TWMD centres per call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = movers.twmd([preds[0]], [refs[0]])
    assert values[0] == pytest.approx(alone.scores[0], abs=ATOL)
    first = sample[0].scores["twmd"]
    assert first.metadata["signature"] == str(alone.signature) == first.explanation
    assert abs(twmd.score - float(np.mean(values))) > 1e-3
    assert abs(moverscore.score - float(np.mean([s.scores["moverscore"].value for s in sample]))) > 1e-3
    # the empty generation: the worst value, one warning per scorer, none from the corpus calls
    assert values[2] == -1.0 and sample[2].scores["moverscore"].value == -1.0
    empty = [str(w.message) for w in caught if "generated nothing" in str(w.message) or "are empty" in str(w.message)]
    assert sorted(m.split(":")[0] for m in empty) == ["movers/moverscore", "movers/twmd"], empty


@pytest.mark.slow
def test_every_epoch_generation_is_a_segment_of_the_corpus_call(tmp_path):
    (log,) = inspect_ai.eval(_task(integration.twmd()), model=_mockllm(), epochs=2, log_dir=str(tmp_path),
                             display="none")
    preds, refs = _logged(log)
    assert len(preds) == 2 * len(SAMPLES)  # one logged sample per sample and epoch
    assert _corpus(log, "twmd") == pytest.approx(movers.twmd(preds, refs).score, abs=ATOL)


@pytest.mark.slow
def test_eval_with_the_local_hf_model(tmp_path):
    folder = build_tiny_lm(tmp_path / "tiny", [t for _, g, ts in SAMPLES for t in [g, *np.atleast_1d(ts)]])
    model = get_model("hf/tiny", config=GenerateConfig(max_tokens=12), model_path=str(folder), device="cpu",
                      do_sample=False, use_chat_template=False)
    (log,) = inspect_ai.eval(_task(integration.twmd()), model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    preds, refs = _logged(log)
    assert sum(bool(p.strip()) for p in preds) >= 3 and len(set(preds)) > 1
    assert _corpus(log, "twmd") == pytest.approx(movers.twmd(preds, refs).score, abs=ATOL)


def test_scorers_for_every_metric_and_movers_errors():
    from inspect_ai._util.registry import registry_info, registry_lookup

    for slug in movers.metrics.slugs():
        factory = registry_lookup("scorer", f"movers/{slug}")
        assert factory is getattr(integration, slug)
        assert list(__import__("inspect").signature(factory).parameters) == [f.name for f in
                                                                             movers.metrics.get(slug).options]
    assert registry_info(registry_lookup("metric", "movers/corpus")).name == "movers/corpus"
    with pytest.raises(TypeError, match=r"twmd\(\) got an unexpected keyword argument 'idf'"):
        integration.twmd(idf=True)
    with pytest.raises(ValueError, match=r"moverscore: `n_gram` must be"):
        integration.moverscore(n_gram=0)


@pytest.mark.system
@pytest.mark.slow
def test_inspect_score_rescores_a_log_with_the_scorer_found_by_name_in_a_wheel_install(wheel, tmp_path):
    """A fresh environment with only the built wheel installed (its dependencies: this environment's, through a
    .pth line): Inspect finds movers/moverscore through movers' `inspect_ai` entry point, and `inspect score`
    re-scores a log written without any movers scorer."""
    (log,) = inspect_ai.eval(_task([]), model=_mockllm(), log_dir=str(tmp_path / "logs"), display="none")
    python = venv_with_our_dependencies(tmp_path / ".venv")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--ignore-installed", "--quiet", str(wheel)],
                   check=True, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import movers; print(movers.__file__)"], env=env, check=True,
                           capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(tmp_path / ".venv"))
    out = tmp_path / "rescored.eval"
    run = subprocess.run([str(python), "-m", "inspect_ai", "score", log.location, "--scorer", "movers/moverscore",
                          "-S", "idf=true", "--action", "append", "--output-file", str(out), "--display", "none"],
                         env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rescored = read_eval_log(str(out))
    preds, refs = _logged(rescored)
    (score,) = rescored.results.scores
    assert (score.name, score.params) == ("moverscore", {"idf": True})
    assert score.metrics["corpus"].value == pytest.approx(movers.moverscore(preds, refs, idf=True).score, abs=1e-7)
