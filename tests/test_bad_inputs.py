"""One table over all six metrics x both APIs (``movers.<metric>`` and the evaluate module's ``compute``)
x the bad-input cases: every cell asserts its documented outcome, a named error or a defined
value (the cards say which). No cell may give a silent score.

Rules asserted here (each card states its own):
* malformed input (None, non-strings, dicts, bare strings, empty lists, length mismatches, empty
  reference lists): the same TypeError/ValueError naming the argument and position in both APIs;
* empty or whitespace-only texts: a ValueError in the embedding metrics; ΔBLEU scores them as
  sacreBLEU does (0 for an empty hypothesis);
* texts with no content token (emoji-only -> [UNK]; zero-width, control, NUL -> nothing):
  MoverScore, Lazy-EMD and TWMD raise a ValueError (a MoverScore text whose real tokens its filters all
  remove, e.g. punctuation-only, keeps the original's [CLS]/[SEP] score with a RuntimeWarning);
  SMS/S+WMS give the worst score 0 with a RuntimeWarning (also for documents of only words GloVe does
  not know, e.g. CJK or Arabic); ΔBLEU counts n-grams of whatever sacreBLEU's tokenizer yields;
* lone surrogates, and texts over movers.core.validation.MAX_TEXT_CHARS characters: a ValueError naming
  the position (one check for both APIs and the command line);
* identical texts: the best score (Lazy-EMD: the measured bound of its entropic plan);
* invalid or unknown options, unknown models, CUDA on a machine without it: named errors;
* huge texts: a ValueError naming movers.text.guards.MAX_TRANSPORT_ENTRIES before the model runs, or a
  score within a memory limit (subprocess under RLIMIT_AS).
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import torch

import movers
from movers.core.validation import MAX_TEXT_CHARS

from .helpers import REPO

METRICS = ["moverscore", "lazy_emd", "twmd", "sms", "s_wms", "delta_bleu"]
CONTEXTUAL = {"moverscore", "lazy_emd", "twmd"}  # MiniLM tokens: no-content texts are errors
STATIC = {"sms", "s_wms"}                          # GloVe words: no-content documents score 0 with a warning

R, R2, P2 = "The cat sat on the mat.", "A dog was running.", "A dog ran in the park."


@dataclass(frozen=True)
class Error:
    exc: type
    pattern: str


@dataclass(frozen=True)
class Value:
    """A score for segment 0 satisfying `check`; with `warns`, a RuntimeWarning matching it."""
    check: Callable[[float], bool]
    why: str
    warns: str | None = None


def error(exc, pattern):
    return Error(exc, pattern)


FINITE = Value(lambda s: math.isfinite(s), "a finite score")
WORST_STATIC = Value(lambda s: s == 0.0, "0.0, the worst", warns="have a document with no kept word")
NO_CONTENT = Error(ValueError, r"predictions\[0\] has no content token")
BLEU_ZERO = Value(lambda s: s == 0.0, "BLEU 0 (no n-gram shared with the references)")


EMPTY_WARNS = "are empty; scored as the metric's worst value"
WORST_EMPTY = {  # hand values: MoverScore 1 - 2 (preset 1.0.3; all mass at the largest unit-vector distance 2), SMS exp(-inf),
    # TWMD -1 (the lowest cosine), Lazy-EMD distance 2 (all mass at 1 - cos = 2); ΔBLEU: sacreBLEU's 0
    "moverscore": Value(lambda s: s == -1.0, "-1 = 1 - 2, the worst of the default 1.0.3 preset", warns=EMPTY_WARNS),
    "sms": Value(lambda s: s == 0.0, "0.0, the worst", warns=EMPTY_WARNS),
    "s_wms": Value(lambda s: s == 0.0, "0.0, the worst", warns=EMPTY_WARNS),
    "twmd": Value(lambda s: s == -1.0, "-1, the worst", warns=EMPTY_WARNS),
    "lazy_emd": Value(lambda s: s == 2.0, "distance 2, the worst", warns=EMPTY_WARNS),
    "delta_bleu": Value(lambda s: s == 0.0, "BLEU 0 (no n-gram shared with the references)"),
}


def by_kind(contextual, static, bleu):
    return {**{m: contextual for m in CONTEXTUAL}, **{m: static for m in STATIC}, "delta_bleu": bleu}


def same(outcome):
    return {m: outcome for m in METRICS}


NOT_AN_OPTION = {"delta_bleu"}  # ΔBLEU has no model and no device: Python's TypeError names the keyword
INVALID_OPTION = {
    "moverscore": ({"preset": "nope"}, r"`preset` must be one of"),
    "lazy_emd": ({"reg": -1.0}, r"`reg` must be > 0"),
    "twmd": ({"variant": "nope"}, r"`variant` must be one of"),
    "sms": ({"variant": "nope"}, r"`variant` must be one of"),
    "s_wms": ({"reference_aggregation": "nope"}, r"`reference_aggregation` must be one of"),
    "delta_bleu": ({"tokenize": "nope"}, r"`tokenize` must be one of"),
}
IDENTICAL = {
    "moverscore": Value(lambda s: s == 1.0, "exactly 1 (exact EMD in float64)"),
    "lazy_emd": Value(lambda s: 0.0 <= s <= 0.009 * math.log(7), "a distance in [0, ε ln L] (card: entropic plan)"),
    "twmd": Value(lambda s: abs(s - 1.0) <= 1e-12, "1 (no centring)"),
    "sms": Value(lambda s: s == 1.0, "exactly 1"),
    "s_wms": Value(lambda s: s == 1.0, "exactly 1"),
    "delta_bleu": Value(lambda s: abs(s - 100.0) <= 1e-9, "BLEU 100"),
}
NO_CUDA = {m: Error(ValueError, r"`device` 'cuda' asks for CUDA") for m in METRICS}
NO_CUDA["delta_bleu"] = Error(TypeError, r"unexpected keyword argument 'device'")
UNKNOWN_MODEL = {m: Error(OSError, r"`model` \(SMS: `embedding`\) 'no-such-org/no-such-model' is not in the "
                                   r"local Hugging Face cache") for m in METRICS}
UNKNOWN_MODEL["delta_bleu"] = Error(TypeError, r"unexpected keyword argument 'model'")
BAD_BATCH = tuple({**{m: Error(exc, rf"{m}: `batch_size` must be {what}") for m in METRICS},
                    "delta_bleu": Error(TypeError, r"unexpected keyword argument 'batch_size'")}
                   for exc, what in ((ValueError, ">= 1"), (TypeError, "an integer")))


def two(text):
    return [text, P2], [R, R2]


# (case, predictions, references, options per metric or None, outcome per metric)
CASES: list[tuple[str, Any, Any, Callable[[str], dict] | None, dict]] = [
    ("empty list", [], [], None, same(error(ValueError, r"`predictions` must be a non-empty list"))),
    ("None", None, [R], None, same(error(TypeError, r"`predictions` must be .*got None"))),
    ("int", [R, 5], [R, R2], None, same(error(TypeError, r"`predictions\[1\]` must be a string, got int 5"))),
    ("dict", {"p0": R}, [R], None, same(error(TypeError, r"`predictions` must be .*got a dict"))),
    ("bare string", R, R2, None, same(error(TypeError, r"`predictions` must be .*got a single str"))),
    ("length mismatch", [R, P2], [R], None, same(error(ValueError, r"must have the same length, got 2 and 1"))),
    ("empty reference list", [R], [[]], None,
     same(error(ValueError, r"`references\[0\]` must hold at least one reference"))),
    ("None reference", [R], [None], None, same(error(TypeError, r"`references\[0\]` must be .*got None"))),
    ("ragged", [R, P2], [[R], [R2, R]], None, same(FINITE)),
    ("tuple/numpy", (R, P2), np.array([R, R2]), None, same(FINITE)),
    # Empty predictions: the metric's worst value with a warning (empty_predictions="worst", the default,
    # so that a training loop survives a model that generates nothing), or an error when asked for.
    ("empty text", *two(""), None, WORST_EMPTY),
    ("whitespace text", *two(" \n\t "), None, WORST_EMPTY),
    ("empty text, empty_predictions='error'", *two(""), lambda m: {} if m == "delta_bleu" else {"empty_predictions": "error"},
     by_kind(Error(ValueError, r"`predictions\[0\]` must be a non-empty text"),
             Error(ValueError, r"`predictions\[0\]` must be a non-empty text"), BLEU_ZERO)),
    ("empty reference", [R], [""], None,
     by_kind(Error(ValueError, r"`references\[0\]\[0\]` must be a non-empty text"),
             Error(ValueError, r"`references\[0\]\[0\]` must be a non-empty text"), BLEU_ZERO)),
    ("CJK", *two("猫がマットの上に座った。"), None, by_kind(FINITE, WORST_STATIC, BLEU_ZERO)),
    ("RTL", *two("القطة جلست على الحصيرة"), None, by_kind(FINITE, WORST_STATIC, BLEU_ZERO)),
    # Decomposed accents: composed first (unicode="nfc", the default), so SMS/S+WMS find "café" in GloVe; with
    # unicode="none" (the originals) the decomposed words fail str.isalpha and the document keeps no word.
    ("combining", *two("e\u0301a\u0300 cafe\u0301"), None,
     by_kind(FINITE, Value(lambda s: 0.0 < s < 1.0, "a score: NFC 'café' is a GloVe word"), BLEU_ZERO)),
    ("combining, unicode='none'", *two("e\u0301a\u0300 cafe\u0301"), lambda m: {"unicode": "none"},
     by_kind(FINITE, WORST_STATIC, BLEU_ZERO)),
    ("emoji-only", *two("\U0001F600\U0001F600\U0001F600"), None, by_kind(NO_CONTENT, WORST_STATIC, BLEU_ZERO)),
    ("zero-width-only", *two("\u200b\u200b"), None, by_kind(NO_CONTENT, WORST_STATIC, BLEU_ZERO)),
    ("control-only", *two("\x01\x02\x07"), None, by_kind(NO_CONTENT, WORST_STATIC, BLEU_ZERO)),
    ("NUL", *two("\x00"), None, by_kind(NO_CONTENT, WORST_STATIC, BLEU_ZERO)),
    ("emoji reference", [R], [["A cat sat.", "\U0001F436\U0001F389"]], None,
     by_kind(Error(ValueError, r"references\[0\]\[1\] has no content token"), Value(
         lambda s: 0.0 < s <= 1.0, "the best reference's score (max; the emoji one scores 0)",
         warns="have a document with no kept word"), FINITE)),
    ("stop-word-only", *two("the of and a"), None,
     {**by_kind(FINITE, WORST_STATIC, Value(lambda s: s > 0, "BLEU > 0 (shares 'the')"))}),
    ("punctuation-only", *two("!!! ... ,"), None,
     {**by_kind(FINITE, WORST_STATIC, Value(lambda s: s > 0, "BLEU > 0 (shares '.')")),
      "moverscore": Value(math.isfinite, "the original's [CLS]/[SEP] score, with a warning",
                          warns=r"keep only \[CLS\]/\[SEP\] after the filters")}),
    # One text check for every metric and both APIs (movers.core.validation.check_text): valid code points, and
    # at most max_text_chars() characters, checked before tokenisation (test_reliability times it and the CLI).
    ("lone surrogate", *two("a\ud800b"), None,
     same(error(ValueError, r"`predictions\[0\]` must be valid Unicode text, got the lone surrogate U\+D800 at "
                            r"character 1"))),
    ("lone surrogate reference", [R], [["x\udfff"]], None,
     same(error(ValueError, r"`references\[0\]\[0\]` must be valid Unicode text, got the lone surrogate U\+DFFF"))),
    ("text over the size limit", *two("x" * (MAX_TEXT_CHARS + 1)), None,
     same(error(ValueError, rf"`predictions\[0\]` has {MAX_TEXT_CHARS + 1:,} characters, above the limit of "
                            rf"{MAX_TEXT_CHARS:,}; .* MOVERS_MAX_TEXT_CHARS"))),
    ("identical", [R, P2], [R, R2], lambda m: {"centering": "none"} if m == "twmd" else {}, IDENTICAL),
    ("invalid option", [R, P2], [R, R2], lambda m: INVALID_OPTION[m][0],
     {m: Error(ValueError, INVALID_OPTION[m][1]) for m in METRICS}),
    ("unknown option", [R, P2], [R, R2], lambda m: {"colour": "red"},
     same(error(TypeError, r"unexpected keyword argument 'colour'"))),
    ("unknown model", [R, P2], [R, R2],
     lambda m: {"embedding" if m in STATIC else "model": "no-such-org/no-such-model"}, UNKNOWN_MODEL),
    ("missing CUDA", [R, P2], [R, R2], lambda m: {"device": "cuda"}, NO_CUDA),
    ("batch_size 0", [R, P2], [R, R2], lambda m: {"batch_size": 0}, BAD_BATCH[0]),
    ("batch_size 2.5", [R, P2], [R, R2], lambda m: {"batch_size": 2.5}, BAD_BATCH[1]),
    ("batch_size 'x'", [R, P2], [R, R2], lambda m: {"batch_size": "x"}, BAD_BATCH[1]),
]


@pytest.fixture(scope="module")
def modules():
    return {m: movers.load(m) for m in METRICS}


def _run(api: str, metric: str, modules, predictions, references, options) -> dict:
    if api == "core":
        return getattr(movers, metric)(predictions, references, **options).to_dict()
    return modules[metric].compute(predictions=predictions, references=references, **options)


@pytest.mark.parametrize("api", ["core", "module"])
@pytest.mark.parametrize("metric", METRICS)
def test_bad_input_table(metric, api, modules):
    """All cases for one metric and API; a failure lists every cell that broke its documented outcome."""
    failures = []
    for case, predictions, references, options, outcomes in CASES:
        if case == "missing CUDA" and torch.cuda.is_available():
            continue
        outcome = outcomes[metric]
        opts = options(metric) if options else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = _run(api, metric, modules, predictions, references, opts)
            except Exception as err:  # noqa: BLE001 - the table says which errors are expected
                got = f"{type(err).__name__}: {err}"
                if not (isinstance(outcome, Error) and isinstance(err, outcome.exc)
                        and re.search(outcome.pattern, str(err))):
                    failures.append(f"{case}: expected {outcome}, got {got[:300]}")
                continue
        if isinstance(outcome, Error):
            failures.append(f"{case}: expected {outcome.exc.__name__} /{outcome.pattern}/, got a score {out}")
            continue
        score = out["scores"][0] if out.get("scores") else out["score"]
        if not outcome.check(score):
            failures.append(f"{case}: expected {outcome.why}, got {score!r}")
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        if outcome.warns and not any(re.search(outcome.warns, m) for m in messages):
            failures.append(f"{case}: expected a RuntimeWarning /{outcome.warns}/, got {messages}")
    assert not failures, f"{metric} ({api}):\n" + "\n".join(failures)


@pytest.mark.parametrize("metric", METRICS)
def test_both_apis_agree_and_sequences_are_not_recast(metric, modules):
    """tuple/numpy inputs score as the lists; the module gives the core's numbers."""
    lists = getattr(movers, metric)([R, P2], [R, R2]).scores
    other = getattr(movers, metric)((R, P2), np.array([R, R2])).scores
    module = modules[metric].compute(predictions=np.array([R, P2]), references=(R, R2))["scores"]
    assert other == lists and module == pytest.approx(lists, abs=1e-12)


@pytest.mark.parametrize("metric", METRICS)
def test_module_object_stays_usable_after_errors(metric, modules):
    """A failed call (type error, bad option, failed compute) leaves no writer behind."""
    module = modules[metric]
    with pytest.raises(TypeError):
        module.compute(predictions=[R, 5], references=[R, R2])
    with pytest.raises(TypeError):
        module.add_batch(predictions=R, references=R2)
    module.add_batch(predictions=[R], references=[R])
    with pytest.raises(TypeError):  # compute fails after data was added: the data is discarded
        module.compute(colour="red")
    ragged = module.compute(predictions=[R, P2], references=[[R], [R2, R]])  # flat then ragged: fine
    assert len(ragged["scores"]) == 2
    module.add(prediction=R, reference=R)
    module.add_batch(predictions=[P2], references=[[R2, R]])
    assert module.compute()["scores"] == pytest.approx(ragged["scores"], abs=1e-12)
    with pytest.raises(TypeError, match=r"`prediction` must be a string, got NoneType"):
        module.add(prediction=None, reference=R)


def test_a_failed_compute_never_touches_another_objects_cache_file():
    """evaluate keeps the paths of a finished compute; a later failure of that object must not delete the
    cache file another object (or process) now holds at the same default path."""
    first, second = movers.load("delta_bleu"), movers.load("delta_bleu")
    first.compute(predictions=[R], references=[R])       # done: its default cache path is free again
    second.add_batch(predictions=[R], references=[R])    # takes that path
    with pytest.raises(TypeError):
        first.compute(predictions=[R, 5], references=[R, R])
    with pytest.raises(TypeError):
        first.compute(predictions=[R], references=[R], colour="red")
    assert second.compute()["score"] == pytest.approx(100.0, abs=1e-9)


def test_delta_bleu_weighted_configuration_checks_weights_first():
    module = movers.load("delta_bleu", "weighted")
    with pytest.raises(ValueError, match=r"`reference_weights\[0\]\[1\]` must be a number in \[-1, 1\], got 3"):
        module.add_batch(predictions=[R], references=[[R, R2]], reference_weights=[[0.5, 3]])
    with pytest.raises(TypeError, match=r"`reference_weights` is required"):
        module.add_batch(predictions=[R], references=[R])
    out = module.compute(predictions=[R, P2], references=[R, [R2, R]], reference_weights=[0.5, [1.0, -0.5]])
    assert out["scores"][0] == pytest.approx(100.0, abs=1e-9)


# ------------------------------------------------------------------ huge texts, under a memory limit

HUGE = textwrap.dedent("""
    import json, resource, sys, time
    limit = int(sys.argv[1]) * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import movers
    words = []
    for line in open(sys.argv[2], encoding="utf-8"):
        words += json.loads(line)["source"].split()
        if len(words) > 40_010:
            break
    a, b = " ".join(words[:20_000]), " ".join(words[20_000:40_000])
    out = {}
    whole = {"long_texts": "window"}  # the whole text: the default reads the first window only
    for name, (p, r, options) in [("moverscore", (a, b, whole)), ("lazy_emd", (a, b, whole)),
                                  ("twmd", (a, "The cat sat.", whole)), ("moverscore:truncate", (a, b, {})),
                                  ("sms", (a, b, {})), ("s_wms", (a, b, {})), ("delta_bleu", (a, b, {}))]:
        metric = name.split(":")[0]
        start = time.perf_counter()
        try:
            res = getattr(movers, metric)([p], [r], **options)
            out[name] = ["score", res.scores[0] if res.scores else res.score]
        except Exception as err:
            out[name] = [type(err).__name__, str(err)[:400]]
        out[name].append(round(time.perf_counter() - start, 1))
    print(json.dumps(out))
""")


@pytest.mark.system
@pytest.mark.slow
def test_huge_texts_fail_early_or_fit_in_memory(tmp_path):
    """20,000-word texts in a subprocess limited to 6 GiB of address space: read whole, the three token-level
    metrics refuse before the model runs (they would need 5+ GiB per matrix); the others, and MoverScore at its
    default (the first window), score. A fresh process under a memory limit: a system test; a plain run checks the
    refusal in this process (below)."""
    from .helpers import data_path

    docs = data_path("summeval/summeval_docs.jsonl")
    env = {**os.environ, "PYTHONPATH": str(REPO / "shared"), "OMP_NUM_THREADS": "1", "MOVERS_NO_AUTOREGISTER": "1"}
    proc = subprocess.run([sys.executable, "-c", HUGE, "6", str(docs)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for metric in ("moverscore", "lazy_emd", "twmd"):
        kind, message, seconds = out[metric]
        assert kind == "ValueError" and "MAX_TRANSPORT_ENTRIES" in message, out[metric]
        assert seconds < 30, out[metric]  # from the tokenizer alone, not after embedding 20k words
    for metric in ("sms", "s_wms", "delta_bleu", "moverscore:truncate"):
        kind, value, _ = out[metric]
        assert kind == "score" and math.isfinite(value), out[metric]


def test_huge_texts_are_refused_before_the_model_runs(monkeypatch, embedded):
    """The refusal of the test above in this process, at a four-hundredth of the limit and a twentieth of the
    words (the same ratio of a pair's transport entries to the limit): the three token-level metrics name the limit
    before the encoder sees a text. The memory limit and the metrics that score are the system test above."""
    from movers.text import guards

    from .helpers import real_pairs

    monkeypatch.setattr(guards, "MAX_TRANSPORT_ENTRIES", guards.MAX_TRANSPORT_ENTRIES // 400)
    hyps, refs = real_pairs("summeval")
    words = " ".join(hyps + refs).split()
    assert len(words) > 2_000
    a, b = " ".join(words[:1_000]), " ".join(words[1_000:2_000])
    for metric, (p, r) in (("moverscore", (a, b)), ("lazy_emd", (a, b)), ("twmd", (a, "The cat sat."))):
        with pytest.raises(ValueError, match=r"above the limit movers\.text\.guards\.MAX_TRANSPORT_ENTRIES"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TWMD's batch centring on one segment: not this test
            getattr(movers, metric)([p], [r], long_texts="window")
    assert embedded == []


@pytest.mark.parametrize("slug", ["moverscore", "twmd"])
def test_beside_an_empty_prediction_a_text_is_named_by_its_place_in_the_call(slug):
    """Empty predictions are left out of the scoring (empty_predictions='worst'); what the rest warns about or refuses
    names each text by its place in the call, not in the part that was scored (segment 2 is the second scored)."""
    score = getattr(movers, slug)
    with pytest.raises(ValueError, match=rf"^{slug}: references\[2\] has no content token"):
        score(["", "a cat", "b"], [["a"], ["a dog"], ["🙂🙃"]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = score(["", "a cat", "..."], [["a"], ["a dog"], ["b"]], preset="1.0.3") if slug == "moverscore" else None
    if out is not None:
        messages = [str(w.message) for w in caught]
        assert any(m.startswith("moverscore: predictions[2] keep only") for m in messages), messages
        assert not any("predictions[1]" in m for m in messages), messages
