"""empty_predictions, baseline rescaling and the progress bar: the options every embedding metric shares.

Worst values are the metrics' definitions worked by hand (largest ground cost between unit vectors,
exp(-inf), the lowest cosine); the non-empty segments must score exactly as a call without the
empty ones; rescaling is checked against (s - b) / (1 - b) computed here from unrescaled calls.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

import movers
from movers.pipeline.call import bundled_baselines

from .helpers import data_path

PREDS = ["The cat sat on the mat.", "  ", "It is raining today.", ""]
REFS = ["A cat was sitting on the mat.", "The dog barked.", "It rains today.", "He went home."]
KEEP = [0, 2]

WORST = [  # metric, options, worst score (by hand), worst extras
    ("moverscore", {}, 1 - 2, {"distances": 2.0}),                     # |u - v| <= 2 for unit vectors
    ("moverscore", {"preset": "github"}, 1 / (1 + 2), {"distances": 2.0}),
    ("moverscore", {"preset": "paper"}, 1 - 4, {"distances": 4.0}),    # squared Euclidean <= 4
    ("sms", {}, 0.0, {"distances": math.inf}),                         # exp(-inf)
    ("s_wms", {}, 0.0, {"distances": math.inf}),
    ("twmd", {}, -1.0, {"precision": -1.0, "recall": -1.0, "f1": -1.0}),  # the lowest cosine similarity
    ("lazy_emd", {}, 2.0, {"similarities": -1.0}),                    # all mass at the largest 1 - cos = 2
]


@pytest.mark.parametrize("metric, options, worst, extras", WORST)
def test_empty_predictions_score_the_worst_value_and_the_rest_as_without_them(metric, options, worst, extras):
    fn = getattr(movers, metric)
    with pytest.warns(RuntimeWarning, match=r"predictions \[1, 3\] are empty"):
        got = fn(PREDS, REFS, **options)
    alone = fn([PREDS[i] for i in KEEP], [REFS[i] for i in KEEP], **options)
    assert [got.scores[1], got.scores[3]] == [worst, worst]
    assert [got.scores[i] for i in KEEP] == pytest.approx(alone.scores, abs=1e-12)
    assert got.score == pytest.approx(np.mean(got.scores), abs=1e-12)
    for key, value in extras.items():
        assert got.extra[key][1] == value and got.extra[key][3] == value
        assert [got.extra[key][i] for i in KEEP] == pytest.approx(alone.extra[key], abs=1e-12)
    assert got.extra["empty_predictions"] == [1, 3]
    assert got.signature == alone.signature and "|unicode:nfc|empty:worst|" in got.signature
    if metric == "lazy_emd":
        assert got.extra["similarity"] == pytest.approx(np.mean(got.extra["similarities"]), abs=1e-12)


@pytest.mark.parametrize("metric", ["moverscore", "sms", "s_wms", "twmd", "lazy_emd"])
def test_error_mode_and_empty_references(metric):
    fn = getattr(movers, metric)
    with pytest.raises(ValueError, match=r"`predictions\[1\]` must be a non-empty text"):
        fn(PREDS, REFS, empty_predictions="error")
    with pytest.raises(ValueError, match=r"`references\[1\]\[0\]` must be a non-empty text"):
        fn(["A cat.", "  "], ["A cat.", " "])  # empty references stay an error under the default
    with pytest.raises(ValueError, match=r"`empty_predictions` must be one of \['worst', 'error'\]"):
        fn(["A cat."], ["A cat."], empty_predictions="zero")
    assert "|unicode:nfc|empty:error|" in fn(["A cat sat."], ["A cat sat."], empty_predictions="error").signature


def test_all_empty_and_multiple_references():
    refs = [["A cat sat.", "The cat was sitting."], ["A dog.", "Dogs bark."]]
    with pytest.warns(RuntimeWarning):
        got = movers.moverscore(["", " "], refs)
    normal = movers.moverscore(["A cat.", "A dog."], refs)
    assert got.scores == [-1.0, -1.0] and got.extra["per_reference"] == [[-1.0, -1.0]] * 2  # 1 - 2 (preset 1.0.3)
    assert got.signature == normal.signature and "|nrefs:2|" in got.signature
    with pytest.warns(RuntimeWarning):
        mixed = movers.moverscore(["A cat.", ""], [refs[0], ["Only one."]])
    assert "|nrefs:var|" in mixed.signature and mixed.extra["per_reference"][1] == [-1.0]


def test_pre_segmented_sms_documents_and_plans():
    with pytest.warns(RuntimeWarning):
        got = movers.sms([["A cat sat.", "It purred."], ["", " "]], [["A cat sat."], ["A dog.", "It barked."]],
                         return_plans=True)
    assert got.scores[1] == 0.0 and got.extra["alignments"][1] is None
    assert got.extra["alignments"][0][0].score == pytest.approx(got.scores[0], abs=1e-12)


def test_evaluate_module_passes_the_options():
    module = movers.load("moverscore")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = module.compute(predictions=["", "A cat sat."], references=["A dog.", "A cat sat."])
    assert out["scores"][0] == -1.0 and out["scores"][1] == pytest.approx(1.0, abs=1e-12)  # 1 - 2: the worst
    with pytest.raises(ValueError, match="non-empty text"):
        module.compute(predictions=[""], references=["A dog."], empty_predictions="error")
    rescaled = module.compute(predictions=["A cat sat."], references=["A cat sat."], baseline=0.5)
    assert rescaled["score"] == pytest.approx(1.0, abs=1e-12) and "|baseline:0.5|" in rescaled["signature"]


# ----------------------------------------------------------------------------- baseline rescaling

HYPS = ["The cat sat on the mat.", "It is raining today.", "He went home early.", "Stocks fell sharply."]
GOLD = ["A cat was sitting on the mat.", "It rains today.", "He left for home early.", "Markets dropped."]


@pytest.mark.parametrize("metric", ["moverscore", "sms", "s_wms", "twmd"])
def test_a_given_baseline_rescales_every_score(metric):
    fn = getattr(movers, metric)
    raw = fn(HYPS, GOLD)
    got = fn(HYPS, GOLD, baseline=0.4)
    assert got.scores == pytest.approx([(s - 0.4) / 0.6 for s in raw.scores], abs=1e-12)
    assert got.score == pytest.approx((raw.score - 0.4) / 0.6, abs=1e-12)
    assert got.extra["raw_scores"] == raw.scores and "|baseline:0.4|" in got.signature


def test_fit_pairs_each_prediction_with_another_segments_reference():
    got = movers.moverscore(HYPS, GOLD, baseline="fit")
    # the documented pairing, by hand: a random cyclic order from default_rng(0); i meets its successor's refs
    order = list(np.random.default_rng(0).permutation(4))
    partner = {order[k]: order[(k + 1) % 4] for k in range(4)}
    assert all(partner[i] != i for i in range(4))
    unrelated = movers.moverscore(HYPS, [GOLD[partner[i]] for i in range(4)]).scores
    b = np.mean(unrelated)
    raw = movers.moverscore(HYPS, GOLD).scores
    assert got.scores == pytest.approx([(s - b) / (1 - b) for s in raw], abs=1e-12)
    assert f"|baseline:fit[n=4,seed=0,b={format(b, 'g')}]|" in got.signature
    # what rescaling is for: the unrelated pairing now averages 0, the maximum stays 1
    assert np.mean([(s - b) / (1 - b) for s in unrelated]) == pytest.approx(0.0, abs=1e-12)
    assert got.score > 0 and max(got.scores) <= 1.0


def test_bundled_baseline_matches_its_settings_only():
    shipped = bundled_baselines()
    assert set(shipped) == {"moverscore", "sms", "s_wms", "twmd"}
    got = movers.moverscore(HYPS, GOLD, baseline="bundled")
    b = shipped["moverscore"]["baseline"]
    raw = movers.moverscore(HYPS, GOLD).scores
    assert got.scores == pytest.approx([(s - b) / (1 - b) for s in raw], abs=1e-12)
    assert f"|baseline:bundled[wmt15-16-refs,b={format(b, 'g')}]|" in got.signature
    with pytest.raises(ValueError, match="`baseline='bundled'` was computed with"):
        movers.moverscore(HYPS, GOLD, baseline="bundled", preset="github")
    with pytest.raises(ValueError, match="`baseline='bundled'` was computed with"):
        movers.twmd(HYPS, GOLD, baseline="bundled", centering="none")
    # WMS ships no baseline: say so (not "computed with None")
    with pytest.raises(ValueError, match=r"wms: no baseline is bundled for wms \(bundled: moverscore, s_wms, sms, "
                                         r"twmd\); pass baseline='fit'"):
        movers.wms(HYPS, GOLD, baseline="bundled")


def test_bad_baselines():
    with pytest.raises(TypeError, match="`baseline` is only for the similarity metrics"):
        movers.lazy_emd(HYPS, GOLD, baseline=0.2)
    for bad in (1.0, "corpus", float("nan"), True):
        with pytest.raises(ValueError, match="`baseline` must be None, 'fit', 'bundled' or a"):
            movers.moverscore(HYPS, GOLD, baseline=bad)
    with pytest.raises(ValueError, match="needs at least 2 non-empty predictions"):
        movers.moverscore(HYPS[:1], GOLD[:1], baseline="fit")
    with pytest.raises(ValueError, match="transform='d' gives distances"):
        movers.moverscore(HYPS, GOLD, baseline=0.3, transform="d")


@pytest.mark.slow
def test_shipped_baselines_are_reproduced_from_the_public_corpus():
    """The documented procedure (corpus, pairing, seed, mean) reproduces the shipped numbers; SMS and
    S+WMS (GloVe, seconds) stand for all four: the procedure is the same code, only the metric differs."""
    data_path("wmt15_16_da_seg_toen")  # the corpus the shipped baselines were computed on
    from shared.bench.baselines import compute

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a few references have no kept word
        got = compute(pairs=1000, seed=0, metrics=("sms", "s_wms"))
    for metric in ("sms", "s_wms"):
        shipped = bundled_baselines()[metric]
        assert got[metric]["settings"] == shipped["settings"]
        assert got[metric]["baseline"] == pytest.approx(shipped["baseline"], abs=1e-12)


# ----------------------------------------------------------------------------- progress


def test_one_progress_bar_per_call_by_pairs_and_silence_otherwise(capsys):
    refs = [[r, r + " Indeed."] for r in GOLD]
    movers.moverscore(HYPS, refs, verbose=True, batch_size=2)  # 4 encoder batches, 8 pairs
    err = capsys.readouterr().err
    frames = [f for f in err.replace("\n", "\r").split("\r") if f.strip()]
    assert frames and all(f.startswith("movers: moverscore:") for f in frames)  # one bar, no per-chunk bars
    assert "8/8" in frames[-1] and "pair" in frames[-1]
    assert any("encoding batch" in f for f in frames) and "transport" in frames[-1]
    movers.moverscore(HYPS, refs)
    movers.twmd(HYPS, GOLD)
    assert capsys.readouterr().err == ""


def test_json_safe_worst_values_in_the_cli_output(tmp_path):
    """The CLI's JSON holds score/scores only: SMS's infinite worst distance never reaches it."""
    from movers.cli import main

    (tmp_path / "h.txt").write_text("A cat sat.\n\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("A cat sat.\nA dog.\n", encoding="utf-8")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["score", "-m", "sms", "-r", str(tmp_path / "r.txt"), "-c", str(tmp_path / "h.txt"),
                     "-f", "json", "--per-segment"]) == 0
    out = json.loads(buf.getvalue())["sms"]
    assert out["scores"] == [1.0, 0.0] and out["score"] == 0.5
