"""Every shipped evaluate module, checked like evaluate's own common test (tests/test_metric_common.py):
load by path, no ``**kwargs`` in ``_compute``, its doctests pass (at least two lines), plus movers' rules:
the four files exist, README.md is cards/<slug>.md made for its folder, the class name gives the slug, defaults of
``_compute`` match the core function's, and the bare name loads offline after registration.
"""
from __future__ import annotations

import doctest
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import evaluate
import pytest

import movers

from .helpers import REPO, regrouped

MODULES = movers.module_names()
EXPECTED = {"moverscore", "sms", "s_wms", "delta_bleu", "twmd", "lazy_emd"}


def test_module_folders_are_discovered():
    assert "moverscore" in MODULES
    assert set(MODULES) <= EXPECTED, f"unexpected module folders: {set(MODULES) - EXPECTED}"


@pytest.mark.parametrize("name", MODULES)
def test_module_folder_layout(name):
    folder = REPO / "metrics" / name
    for f in (f"{name}.py", "README.md", "app.py", "requirements.txt"):
        assert (folder / f).is_file(), f"metrics/{name}/{f} is missing"
    card = REPO / "cards" / f"{name}.md"
    assert card.is_file(), f"cards/{name}.md is missing"
    from shared.bench.cards import module_readme

    assert (folder / "README.md").read_text(encoding="utf-8") == module_readme(
        card.read_text(encoding="utf-8"), name, REPO), (
        f"metrics/{name}/README.md is not cards/{name}.md made for its folder; run "
        f"`python -m shared.bench cards --write`")
    header = card.read_text(encoding="utf-8").split("---")[1]
    for key in ("title:", "emoji:", "colorFrom:", "colorTo:", "sdk:", "sdk_version:", "app_file:", "pinned:",
                "tags:", "description:"):
        assert key in header, f"cards/{name}.md YAML header lacks {key}"


def _load_module(name):
    factory = evaluate.loading.evaluation_module_factory(movers.module_dir(name))
    module = importlib.import_module(factory.module_path)
    return module, evaluate.loading.import_main_class(factory.module_path)


@pytest.mark.parametrize("name", MODULES)
def test_module_loads_and_has_no_var_kwargs(name):
    _, cls = _load_module(name)
    metric = cls()
    assert metric.name == name, f"class name gives metric.name {metric.name!r}, not {name!r}"
    params = inspect.signature(metric._compute).parameters.values()
    assert not any(p.kind is p.VAR_KEYWORD for p in params), f"{name}._compute takes **kwargs"


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name, monkeypatch):
    """As evaluate's own tests/test_metric_common.py runs them: ELLIPSIS_MARKER "[...]" but no option
    flags (an elided line needs its own ``# doctest: +ELLIPSIS``), raise_on_error=True, evaluate.load
    patched to load ``metrics/<name>`` by relative path from the repository root."""
    monkeypatch.chdir(REPO)
    module = importlib.import_module(
        evaluate.loading.evaluation_module_factory(os.path.join("metrics", name), module_type="metric").module_path)
    real_load = evaluate.load

    def load_local_metric(evaluation_module_name, *args, **kwargs):
        return real_load(os.path.join("metrics", evaluation_module_name), *args, **kwargs)

    old_marker = doctest.ELLIPSIS_MARKER
    doctest.ELLIPSIS_MARKER = "[...]"
    try:
        with mock.patch("evaluate.load") as mock_load:
            mock_load.side_effect = load_local_metric
            try:
                results = doctest.testmod(module, verbose=False, raise_on_error=True)
            except doctest.UnexpectedException as e:
                raise e.exc_info[1]
    finally:
        doctest.ELLIPSIS_MARKER = old_marker
    assert results.failed == 0
    assert results.attempted > 1, f"{name}: fewer than two doctest lines"


@pytest.mark.system
def test_registered_bare_name_loads_offline_in_a_new_process(tmp_path):
    """`import movers` registers the modules; a process that never imports movers then loads by name. Four fresh
    processes, three of them importing evaluate (a minute of CPU): a system test; a plain run checks the load in
    this process (below)."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_EVALUATE_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("MOVERS_NO_AUTOREGISTER", None)
    env.pop("HF_MODULES_CACHE", None)
    code = "import evaluate; evaluate.load('moverscore')"
    # what docs/evaluate.md states (and each card links to): without the import, in a fresh cache, evaluate's own
    # error, which does not name movers
    before = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert before.returncode == 1 and "Couldn't find a module script" in before.stderr, before.stderr[-2000:]
    assert "doesn't exist on the Hugging Face Hub either" in before.stderr
    subprocess.run([sys.executable, "-c", "import movers"], check=True, env=env, cwd=tmp_path)
    code = ("import evaluate; m = evaluate.load('moverscore'); "
            "print(m.name, type(m).__module__.split('.')[-1])")
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.stdout.split() == ["moverscore", "moverscore"], out.stdout + out.stderr
    # offline, with movers imported: the load is silent (no "Using the latest cached version of the module"
    # notice for movers' own modules), evaluate's notice for another module is kept
    code = ("import movers, evaluate, logging; evaluate.load('moverscore'); evaluate.load('twmd'); "
            "logging.getLogger('evaluate.loading').warning('Using the latest cached version of the module from "
            "x/evaluate-metric--bleu/y since it could not be found'); print('done')")
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.stdout.strip() == "done"
    notices = [line for line in out.stderr.splitlines() if "Using the latest cached version" in line]
    assert len(notices) == 1 and "evaluate-metric--bleu" in notices[0], out.stderr


def test_registered_bare_names_load_here_silently_and_other_notices_pass(caplog):
    """In this process (movers imported, offline, the suite's fresh HF_HOME, where `import movers` registered the
    modules): a bare name loads movers' module without evaluate's "Using the latest cached version" notice, which
    still passes for another module. The fresh processes, and evaluate's error before registration, are the system
    test above."""
    import logging

    with caplog.at_level(logging.INFO, logger="evaluate.loading"):
        module = evaluate.load("moverscore")
        evaluate.load("twmd")
        logging.getLogger("evaluate.loading").warning("Using the latest cached version of the module from "
                                                      "x/evaluate-metric--bleu/y since it could not be found")
    assert module.name == "moverscore" and type(module).__module__.split(".")[-1] == "moverscore"
    notices = [r.getMessage() for r in caplog.records if "Using the latest cached version" in r.getMessage()]
    assert len(notices) == 1 and "evaluate-metric--bleu" in notices[0], notices


@pytest.mark.parametrize("name", MODULES)
def test_every_card_links_to_the_line_the_bare_name_needs(name):
    """Said once, on the evaluate page; each card's example imports movers and links there."""
    page = (REPO / "docs" / "evaluate.md").read_text(encoding="utf-8")
    section = page[page.index("## Offline and the bare name"):].split("\n## ", 1)[0]
    assert "**The bare name needs" in section and "`import movers`" in section
    assert "fails with\nevaluate's \"Couldn't find a module script ... doesn't exist on the Hugging Face Hub either\"" \
        in section
    card = (REPO / "cards" / f"{name}.md").read_text(encoding="utf-8")
    assert "import movers  # registers the modules" in card
    assert "(../docs/evaluate.md#offline-and-the-bare-name)" in card


def test_register_is_idempotent_and_refreshes(tmp_path):
    first = movers.register(["moverscore"], modules_cache=tmp_path)
    second = movers.register(["moverscore"], modules_cache=tmp_path)
    assert first == second and len(first) == 2
    for path in first:
        assert Path(path).read_bytes() == (Path(movers.module_dir("moverscore")) / "moverscore.py").read_bytes()


ADD_BATCH_KWARGS = {"twmd": {"centering": "none"}}  # batch centring would make 1-pair batches degenerate


@pytest.mark.parametrize("name", MODULES)
def test_add_batch_then_compute_equals_one_compute(name):
    """The incremental path used by a Trainer's batch_eval_metrics: add_batch twice, then compute."""
    preds = ["The cat sat on the mat. It was happy.", "A quick brown fox jumps over the lazy dog.",
             "He went to the store to buy milk."]
    refs = [["A cat was sitting on the mat. The cat was glad."], ["The fast brown fox leaped over a lazy dog."],
            ["She stayed at home and read a book."]]
    kwargs = ADD_BATCH_KWARGS.get(name, {})
    once = movers.load(name).compute(predictions=preds, references=refs, **kwargs)
    metric = movers.load(name)
    metric.add_batch(predictions=preds[:2], references=refs[:2])
    metric.add_batch(predictions=preds[2:], references=refs[2:])
    incremental = metric.compute(**kwargs)
    assert incremental["signature"] == once["signature"]
    assert incremental["scores"] == pytest.approx(once["scores"], abs=1e-6)
    assert incremental["score"] == pytest.approx(once["score"], abs=1e-6)


def test_readme_trainer_compute_metrics_pattern():
    """The docs' compute_metrics (docs/evaluate.md): -100 in gathered predictions and labels, batch_decode, compute."""
    import numpy as np
    import transformers

    from movers.text.models import resolve_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_model(None)[0])
    ids = np.array(tokenizer(["the cat sat on the mat .", "a dog ran ."], padding=True)["input_ids"])
    labels = np.where(ids == tokenizer.pad_token_id, -100, ids)
    preds = labels.copy()  # perfect generations, padded with -100 as after a multi-process gather
    from .test_trainer import readme_trainer_snippet

    namespace = {"tokenizer": tokenizer}
    exec(compile(readme_trainer_snippet(), "docs/evaluate.md:Trainer", "exec"), namespace)
    compute_metrics = namespace["compute_metrics"]
    assert compute_metrics((preds, labels)) == {"moverscore": 1.0, "twmd": pytest.approx(1.0, abs=1e-6)}


BOOT_PREDS = ["The cat sat on the mat.", "A dog ran in the park.", "It rained all day long.", "She plays the violin.",
              "Prices went up again.", "The train was late.", "He fixed his bike.", "The museum opened."]
BOOT_REFS = ["A cat sat on a mat.", "The dog was running in the park.", "Rain fell all day.", "She is a violinist.",
             "Prices rose again.", "The train came late.", "He repaired the bicycle.", "A new museum wing opened."]


@pytest.mark.invariance
@pytest.mark.parametrize("name", MODULES)
def test_corpus_configuration_works_with_evaluates_bootstrap(name):
    """evaluate's evaluator resamples every key compute returns (strategy="bootstrap"); the "corpus"
    configuration returns only float scalars, so it works, and its interval is scipy's bootstrap of the
    same statistic computed by the core function (ΔBLEU: by sacreBLEU itself)."""
    from scipy.stats import bootstrap

    evaluator = importlib.import_module("evaluate.evaluator.base").Evaluator
    module = movers.load(name, "corpus")
    out = module.compute(predictions=BOOT_PREDS, references=BOOT_REFS)
    full = getattr(movers, name)(BOOT_PREDS, BOOT_REFS)
    assert out["score"] == full.score and all(isinstance(v, float) for v in out.values())
    assert module.last_signature == full.signature
    got = evaluator._compute_confidence_interval(module, {"predictions": BOOT_PREDS, "references": BOOT_REFS},
                                                 list(out), n_resamples=15, random_state=0)
    if name == "delta_bleu":
        import sacrebleu

        def statistic(p, r):
            return sacrebleu.corpus_bleu(list(p), [list(r)]).score
    else:
        def statistic(p, r):
            return getattr(movers, name)(list(p), list(r)).score
    want = bootstrap([BOOT_PREDS, BOOT_REFS], statistic, paired=True, vectorized=False, n_resamples=15,
                     random_state=0)
    low, high = got["score"]["confidence_interval"]
    # the module reads every resample's vectors from its own cache, the direct calls encode each resample's
    # texts anew: other batches, so the reproducibility rule (ΔBLEU's counts: bit for bit)
    close = (lambda x: pytest.approx(x, rel=0, abs=1e-9)) if name == "delta_bleu" else regrouped
    assert low == close(want.confidence_interval.low) and high == close(want.confidence_interval.high)
    assert got["score"]["standard_error"] == close(want.standard_error)
    assert low <= out["score"] <= high


def test_corpus_twin_of_every_configuration():
    plain = movers.delta_bleu(BOOT_PREDS, BOOT_REFS)  # weights of 1 are plain BLEU
    assert movers.load("delta_bleu", "weighted-corpus").compute(
        predictions=BOOT_PREDS, references=[[r] for r in BOOT_REFS], reference_weights=[[1.0]] * 8) == \
        {"score": plain.score, "bp": plain.extra["bp"]}
    with pytest.raises(ValueError, match=r"unknown configuration 'corpus-weighted'; choose one of "
                                         r"\['default', 'weighted', 'corpus', 'weighted-corpus'\]"):
        movers.load("delta_bleu", "corpus-weighted")
