"""The formula layer, movers.explain and its heatmap; the transport API's ragged batching;
the explicit encoder cache; and an import that writes nothing when registration is current."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import movers
from movers.core.explanation import Explanation
from movers.core.histogram import Histogram
from movers.metrics.lazy_emd import lazy_emd_from_embeddings
from movers.metrics.moverscore import moverscore_from_embeddings
from movers.metrics.sms import sms_from_embeddings
from movers.core.references import ReferenceGroups
from movers.core.transport import buckets, unbalanced_sinkhorn_batch

# ------------------------------------------------------------------ a 2x3 problem solved by hand
# Prediction: x1 = (0, 0), x2 = (10, 0), mass 1/2 each. Reference: y1 = (0, 1), y2 = (0, -2), y3 = (10, 0),
# mass 1/3 each. x2 fills y3 at cost 0 and has 1/6 left; x1 fills y1 (cost 1) and has 1/6 left. The two
# remainders go to y2: x1 -> y2 costs 2, x2 -> y2 costs sqrt(104) (sending x2's rest to y1 instead, and
# x1's to y2, costs 1/6 + 2/3 + sqrt(101)/6, which is more). So the unique optimum is
#   P = [[1/3, 1/6, 0], [0, 1/6, 1/3]],  d = 1/3 + 2/6 + sqrt(104)/6.
X = np.array([[0.0, 0.0], [10.0, 0.0]])
Y = np.array([[0.0, 1.0], [0.0, -2.0], [10.0, 0.0]])
HAND_PLAN = np.array([[1 / 3, 1 / 6, 0.0], [0.0, 1 / 6, 1 / 3]])
HAND_D = 1 / 3 + 2 / 6 + math.sqrt(104) / 6


def test_sms_formula_solves_the_hand_problem():
    pred = Histogram(["x1", "x2"], np.array([1.0, 1.0]), X)       # masses are renormalised by the metric
    ref = Histogram(["y1", "y2", "y3"], np.array([2.0, 2.0, 2.0]), Y)
    out = sms_from_embeddings(pred, ref, return_plan=True)
    assert out.distance == pytest.approx(HAND_D, abs=1e-12)
    assert out.score == pytest.approx(math.exp(-HAND_D), abs=1e-12)
    np.testing.assert_allclose(out.plan, HAND_PLAN, atol=1e-12)
    np.testing.assert_allclose(out.cost, [[1, 2, 10], [math.sqrt(101), math.sqrt(104), 0]], atol=1e-12)
    e = Explanation.of("sms", pred, ref, out, cost_label="euclidean")
    assert e.prediction_labels == ["x1", "x2"] and e.reference_labels == ["y1", "y2", "y3"]
    assert e.to_dict()["plan"][0][1] == pytest.approx(1 / 6)


def test_moverscore_formula_on_unit_vectors_by_hand():
    """Two unit vectors e1, e2 (1/2 each) against e1, e2 and (e1+e2)/sqrt2 (1/3 each): each side keeps
    1/3 in place; the remaining 1/6 + 1/6 both go to the diagonal point, at distance sqrt(2 - sqrt2)."""
    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    diag = (e1 + e2) / math.sqrt(2)
    pred = Histogram(["a", "b"], np.array([0.5, 0.5]), np.stack([e1, e2]))
    ref = Histogram(["a", "b", "ab"], np.full(3, 1 / 3), np.stack([e1, e2, diag]))
    out = moverscore_from_embeddings(pred, ref, cost="euclidean", transform="1/(1+d)", return_plan=True)
    d = 2 * (1 / 6) * math.sqrt(2 - math.sqrt(2))
    assert out.distance == pytest.approx(d, abs=1e-12)
    assert out.score == pytest.approx(1 / (1 + d), abs=1e-12)
    np.testing.assert_allclose(out.plan, [[1 / 3, 0, 1 / 6], [0, 1 / 3, 1 / 6]], atol=1e-12)
    assert moverscore_from_embeddings(pred, ref, cost="euclidean", transform="1-d").score == pytest.approx(1 - d)


def test_empty_sides_follow_each_metric_rule():
    none = Histogram([], np.zeros(0), np.zeros((0, 2)))
    one = Histogram(["a"], np.ones(1), np.ones((1, 2)) / math.sqrt(2))
    assert moverscore_from_embeddings(none, none).distance == 2.0  # worst, not the original's perfect d = 0
    assert sms_from_embeddings(none, none).distance == math.inf  # the same rule in SMS
    assert moverscore_from_embeddings(none, one, cost="euclidean").distance == 2.0
    assert moverscore_from_embeddings(none, one).empty
    assert sms_from_embeddings(one, none).distance == math.inf and sms_from_embeddings(one, none).score == 0.0


def test_lazy_emd_formula_with_infinite_strengths_is_the_exact_emd():
    """λc = λr = ∞ and small ε: the balanced entropic plan -> the exact EMD plan of the hand problem
    (cosine cost of unit vectors this time), within the entropic blur."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(2, 4)), rng.normal(size=(3, 4))
    pred = Histogram(["a", "b"], np.array([0.5, 0.5]), torch.from_numpy(x))
    ref = Histogram(["c", "d", "e"], np.full(3, 1 / 3), torch.from_numpy(y))
    (sink,) = lazy_emd_from_embeddings([(pred, ref)], reg=1e-3, reg_candidate=math.inf, reg_reference=math.inf,
                                       mask=None, max_iter=100_000, tol=1e-12, return_plans=True)
    (exact,) = lazy_emd_from_embeddings([(pred, ref)], solver="emd", mask=None, return_plans=True)
    assert sink.distance == pytest.approx(exact.distance, abs=5e-3)
    np.testing.assert_allclose(sink.plan, exact.plan, atol=2e-2)
    np.testing.assert_allclose(exact.plan.sum(1), [0.5, 0.5], atol=1e-12)


# ------------------------------------------------------------------ transport API: ragged batching

def test_buckets():
    shapes = [(3, 3), (50, 50), (3, 4), (49, 50), (2, 2)]
    groups = list(buckets(shapes, budget=10_000))
    assert sorted(k for g in groups for k in g) == list(range(5))
    for g in groups:
        rows, cols = max(shapes[k][0] for k in g), max(shapes[k][1] for k in g)
        assert len(g) == 1 or len(g) * rows * cols <= 10_000
        assert all(rows * cols <= 2 * shapes[k][0] * shapes[k][1] + 256 for k in g)


def test_grouped_joins_consecutive_batches_up_to_the_budget():
    """By hand: 3 + 5 fit in 8; 2 would make 10; 9 alone exceeds 8 (a group of its own); 1 then starts anew."""
    from movers.core.transport import grouped

    assert grouped([3, 5, 2, 9, 1], lambda x: x, budget=8) == [[3, 5], [2], [9], [1]]
    assert grouped([], lambda x: x, budget=8) == []


def test_ragged_pairs_solved_together_equal_one_pair_at_a_time():
    """Lazy-EMD pads pairs of other sizes into one bucket: each pair's plan, iterations and distance are those of
    the pair solved alone (its own unbalanced problem, no padding)."""
    from movers.core.histogram import Histogram
    from movers.metrics.lazy_emd import lazy_emd_from_embeddings

    rng = np.random.default_rng(0)
    sizes = [(3, 5), (7, 2), (4, 4), (9, 8)]

    def side(n):
        return Histogram([str(i) for i in range(n)], np.full(n, 1 / n), torch.from_numpy(rng.normal(size=(n, 6))))

    pairs = [(side(n), side(m)) for n, m in sizes]
    together = lazy_emd_from_embeddings(pairs, reg=0.05, reg_candidate=1.0, reg_reference=1.0, mask=None,
                                        return_plans=True)
    for (h, r), pair in zip(pairs, together, strict=True):
        alone, = lazy_emd_from_embeddings([(h, r)], reg=0.05, reg_candidate=1.0, reg_reference=1.0, mask=None,
                                          return_plans=True)
        assert pair.plan.shape == (len(h), len(r))
        np.testing.assert_allclose(pair.plan, alone.plan, atol=1e-12, rtol=0)
        assert pair.values["iterations"] == alone.values["iterations"] and pair.values["converged"]
        assert pair.distance == pytest.approx(alone.distance, abs=1e-12)


def test_unbalanced_solver_returns_numpy_for_numpy():
    rng = np.random.default_rng(1)
    c = rng.random((2, 3, 4))
    a, b = np.full((2, 3), 1 / 3), np.full((2, 4), 1 / 4)
    out = unbalanced_sinkhorn_batch(a, b, c, reg=0.05, reg_a=1.0, reg_b=1.0)
    ref = unbalanced_sinkhorn_batch(*(torch.from_numpy(x) for x in (a, b, c)), reg=0.05, reg_a=1.0, reg_b=1.0)
    assert isinstance(out.plan, np.ndarray) and isinstance(out.cost, np.ndarray)
    np.testing.assert_array_equal(out.plan, ref.plan.numpy())
    assert out.converged.dtype == bool and out.iterations.shape == (2,)


def test_reference_groups():
    g = ReferenceGroups.of([["a"], ["b", "c", "d"], ["e"]])
    assert g.flat == list("abcde") and g.owner == [0, 1, 1, 1, 2] and g.multiple
    assert g.aggregate([1.0, 0.2, 0.9, 0.4, 3.0], "max") == [1.0, 0.9, 3.0]
    assert g.aggregate([1.0, 0.2, 0.9, 0.4, 3.0], "min") == [1.0, 0.2, 3.0]
    assert g.aggregate([1.0, 0.3, 0.9, 0.3, 3.0], "mean") == pytest.approx([1.0, 0.5, 3.0])
    with pytest.raises(ValueError, match="expected 5 values"):
        g.split([1.0])


# ------------------------------------------------------------------ explain = score, for every OT metric

PRED = "The young man in a coat sat down. He was on the mat."
REF = "A young man wearing a slicker was sitting. The mat was under him."


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["moverscore", "sms", "s_wms", "twmd", "lazy_emd"])
def test_explain_returns_the_scored_pair(metric, tmp_path):
    options = {"centering": "none"} if metric == "twmd" else {}
    e = movers.explain(metric, PRED, REF, **options)
    scored = getattr(movers, metric)([PRED], [REF], **options)
    assert e.score == scored.scores[0]
    assert e.signature == scored.signature
    n, m = len(e.prediction_labels), len(e.reference_labels)
    assert e.plan.shape == e.cost.shape == (n, m) and n > 1 and m > 1
    assert (e.plan >= 0).all() and e.plan.sum() > 0
    if metric in ("moverscore", "sms", "s_wms"):  # balanced EMD: the plan has the normalised masses as marginals
        np.testing.assert_allclose(e.plan.sum(1), e.prediction_mass / e.prediction_mass.sum(), atol=1e-9)
        np.testing.assert_allclose(e.plan.sum(0), e.reference_mass / e.reference_mass.sum(), atol=1e-9)
        assert float((e.plan * e.cost).sum()) == pytest.approx(e.distance, abs=1e-12)
    if metric == "lazy_emd":
        assert float((e.plan * e.cost).sum()) == pytest.approx(e.score, abs=1e-12)
    # the heatmap renders and is not blank
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    ax = e.plot()
    path = tmp_path / f"{metric}.png"
    ax.figure.savefig(path, dpi=60)
    plt.close(ax.figure)
    image = mpimg.imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.shape[0] > 100 and image.shape[1] > 100
    assert float(image[..., :3].std()) > 0.05
    assert [t.get_text() for t in ax.get_yticklabels()]  # token labels are drawn


def test_explain_rejects_unknown_metrics_and_its_own_option():
    with pytest.raises(ValueError, match="`metric` must be one of"):
        movers.explain("delta_bleu", "a", "b")
    with pytest.raises(ValueError, match="return_plans"):
        movers.explain("moverscore", "a", "b", return_plans=True)


# ------------------------------------------------------------------ explicit caches

def test_encoder_cache_is_explicit_and_clearable():
    first = movers.load_encoder()
    assert movers.load_encoder() is first
    assert movers.load_encoder(layer=3) is not first
    movers.clear_encoder_cache()
    assert movers.load_encoder() is not first


def test_idf_records_and_checks_its_tokenizer():
    table = movers.Idf.fit(["a cat", "a dog"])
    assert table.tokenizer == movers.load_encoder().name
    foreign = movers.text.idf.idf_from_ids([[1, 2]], tokenizer="some-other-model@local")
    with pytest.raises(ValueError, match="fitted with the tokenizer of some-other-model"):
        movers.moverscore(["a cat"], ["a dog"], idf=foreign)
    with pytest.raises(ValueError, match="fitted with the tokenizer of some-other-model"):
        movers.lazy_emd(["a cat"], ["a dog"], idf=foreign)


# ------------------------------------------------------------------ import writes nothing when current

def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


def test_import_writes_nothing_when_registration_is_current(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MOVERS_NO_AUTOREGISTER"}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_MODULES_CACHE=str(tmp_path / "hf" / "modules"))
    subprocess.run([sys.executable, "-c", "import movers"], env=env, check=True, timeout=120)
    before = _tree(tmp_path / "hf")
    assert any(p.endswith("moverscore.py") for p in before) and any(".movers-registered" in p for p in before)
    for cmd in ([sys.executable, "-X", "importtime", "-c", "import movers"], [sys.executable, "-c", "import movers"]):
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert _tree(tmp_path / "hf") == before
    # a changed script is registered again (the stamp no longer matches)
    assert not movers.integrations.hub.loading.is_registered(modules_cache=tmp_path / "other")
