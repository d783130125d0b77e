"""The statistics of ``movers correlate`` at any magnitude and size, and the protocols of WMT24-25 and SacreROUGE.

Every expectation comes from outside movers: scipy.stats; the published test values of mt-metrics-eval and
SacreROUGE, each cited by repository, file and commit; formulas worked out here (the Williams test, the
tie-aware Kendall variants, soft pairwise accuracy); exact enumeration of every permutation of small inputs; and
numpy's own draws, replayed here, for the resamples.
"""
from __future__ import annotations

import itertools
import json
import os
import warnings

import numpy as np
import pytest
from scipy import stats

import movers
from movers.core import agreement as core
from movers.core.agreement import Layout, level_correlations

from .support.cli_process import run_movers

MTME = "google-research/mt-metrics-eval@68a481aea1a787392d55af8f76ac8ef40c5f4664"
"""The commit of mt-metrics-eval whose test values are taken (mt_metrics_eval/stats_test.py, data_test.py)."""
SACREROUGE = "danieldeutsch/sacrerouge@0ca5202424aca64f0f27993638d6ac0078d9ded8"
"""The commit of SacreROUGE whose test values are taken (sacrerouge/tests/stats_test.py)."""
EXACT = 1e-9


def _records(metric, human, **fields):
    """Records for movers.correlate: the metric's scores in the field `metric` (``column:metric``)."""
    return [{"prediction": "p", "references": ["r"], "human": float(h), "metric": float(m),
             **{k: v[i] for k, v in fields.items()}} for i, (m, h) in enumerate(zip(metric, human, strict=True))]


def _strict_json(text):
    """JSON that must not hold NaN or Infinity (json accepts them unless told)."""
    def refuse(name):
        raise AssertionError(f"{name} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def _env():
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")


def _pair(seed=0, n=40):
    rng = np.random.default_rng(seed)
    human = rng.normal(size=n)
    return np.round(human + rng.normal(size=n), 3), human


# ------------------------------------------------------------------ 1. any magnitude, scipy as the oracle


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e160, 1e300, -1e300, "mixed"])
@pytest.mark.parametrize("side", ["metric", "human"])
def test_the_segment_level_equals_scipy_at_any_magnitude(scale, side):
    metric, human = _pair(1)
    if scale == "mixed":  # signs and magnitudes from 1e-300 to 1e300 at once
        factor = np.where(np.arange(40) % 2, 1e300, -1e-300)
        values = (metric if side == "metric" else human) * factor
    else:
        values = (metric if side == "metric" else human) * scale
    m, h = (values, human) if side == "metric" else (metric, values)
    out = _strict_json(movers.correlate(_records(m, h), "column:metric", resamples=30).to_json())
    got = out["metrics"]["column:metric"]
    assert got["pearson"]["value"] == pytest.approx(stats.pearsonr(m, h)[0], abs=EXACT)
    assert got["spearman"]["value"] == pytest.approx(stats.spearmanr(m, h)[0], abs=EXACT)
    assert got["kendall"]["value"] == pytest.approx(stats.kendalltau(m, h)[0], abs=EXACT)
    assert got["pearson"]["ci"][0] <= got["pearson"]["value"] <= got["pearson"]["ci"][1]


def test_pearson_at_the_ends_of_the_float_range():
    # the closed form overflowed: a column near 1e160 printed 0.000, scores near 1e-200 printed inf
    metric, human = _pair(2)
    for m in (metric * 1e160, metric * 1e-200, metric / np.abs(metric).max() * 1.7e308):
        got = level_correlations(m, human, n_boot=10).point["pearson"]
        # scipy's pearsonr on the scores times a power of two (exact), where its own mean would overflow
        assert got == pytest.approx(stats.pearsonr(np.ldexp(m, -int(np.frexp(np.abs(m).max())[1])), human)[0],
                                    abs=EXACT)
    # one human score of 1e308 among ordinary ones: a number (dominated by that record), not n/a
    h = human.copy()
    h[5] = 1e308
    out = _strict_json(movers.correlate(_records(metric, h), "column:metric", resamples=10).to_json())
    assert out["metrics"]["column:metric"]["pearson"]["value"] == pytest.approx(stats.pearsonr(metric, h)[0],
                                                                                abs=EXACT)


def test_the_system_and_summary_levels_at_the_ends_of_the_float_range():
    metric, human = _pair(3, 48)
    systems, inputs = [f"s{i % 6}" for i in range(48)], [f"d{i // 6}" for i in range(48)]
    for scale in (1e-300, 1e300, 1.7e308 / np.abs(metric).max()):
        m = metric * scale
        # the system means, from scores scaled by a power of two first (exact), as the formula means them
        k = int(np.frexp(np.abs(m).max())[1])
        means_m = [np.mean(np.ldexp(m, -k)[i::6]) for i in range(6)]
        means_h = [np.mean(human[i::6]) for i in range(6)]
        out = _strict_json(movers.correlate(_records(m, human, system=systems, doc=inputs), "column:metric",
                                            level="system", input_field="doc", resamples=20).to_json())
        got = out["metrics"]["column:metric"]
        assert got["pearson"]["value"] == pytest.approx(stats.pearsonr(means_m, means_h)[0], abs=EXACT)
        assert got["kendall"]["value"] == pytest.approx(stats.kendalltau(means_m, means_h)[0], abs=EXACT)
        assert not any("all equal" in n for n in out["notes"])
        summary = level_correlations(m, human, Layout("summary", inputs=inputs), n_boot=10)
        scaled = np.ldexp(m, -k)
        per_input = [stats.pearsonr(scaled[j * 6:(j + 1) * 6], human[j * 6:(j + 1) * 6])[0] for j in range(8)]
        assert summary.point["pearson"] == pytest.approx(np.mean(per_input), abs=EXACT)


def test_nearly_constant_scores_are_named_as_scipy_names_them():
    metric, _ = _pair(4)
    human = np.full(40, 3.0)
    human[7] = 3.000000000000001  # passes "all equal": chrF got a "significant" correlation with this noise
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats.pearsonr(metric, human)
    assert any(issubclass(w.category, stats.NearConstantInputWarning) for w in caught)  # the oracle's verdict
    result = movers.correlate(_records(metric, human), "column:metric", resamples=50)
    out = _strict_json(result.to_json())
    for s in ("pearson", "spearman", "kendall"):
        assert out["metrics"]["column:metric"][s] == {"value": None, "ci": None}
    assert any("human scores nearly constant" in n for n in out["notes"])
    assert any("NearConstantInputWarning" in n for n in out["notes"])
    from movers.cli.correlate import render_text

    assert "n/a (human scores nearly constant)" in render_text(result)
    # the metric's side too; and just above scipy's bound (no warning there) the value is scipy's
    out = movers.correlate(_records(human * 1e5, metric), "column:metric", resamples=10).to_dict()
    assert out["metrics"]["column:metric"]["pearson"]["value"] is None
    assert any("metric scores nearly constant" in n for n in out["notes"])
    above = 3 + 1e-10 * _pair(5)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = stats.pearsonr(metric, above)[0]  # no NearConstantInputWarning
    got = level_correlations(metric, above, n_boot=10).point["pearson"]
    assert got == pytest.approx(want, abs=1e-6)


def test_a_statistic_without_a_value_says_why_in_notes_table_and_json():
    from movers.cli.correlate import render_text

    metric, human = _pair(6)
    records = _records(metric, human, lp=["a" if i < 20 else "b" for i in range(40)])
    for r in records[20:]:
        r["metric"] = 0.5
    result = movers.correlate(records, "column:metric", group_by="lp", resamples=20)
    assert any("all equal in group 'b'" in n and "1 of 2 groups" in n for n in result.notes())
    flat = movers.correlate(_records(np.ones(40), human), "column:metric", resamples=20)
    assert "n/a (metric scores all equal)" in render_text(flat)
    assert any("its scores are all equal" in n for n in flat.notes())
    _strict_json(flat.to_json())


# ------------------------------------------------------------------ labels


def test_labels_are_compared_as_themselves_tuples_included():
    metric, human = _pair(7, 60)
    # two different groups whose parts joined with '.' would read the same
    groups = [("x.y", "z") if i % 2 else ("x", "y.z") for i in range(60)]
    got = level_correlations(metric, human, Layout(groups=groups), n_boot=10)
    assert set(got.groups) == {("x.y", "z"), ("x", "y.z")}
    for g in got.groups:
        idx = [i for i in range(60) if groups[i] == g]
        assert got.groups[g].point["pearson"] == pytest.approx(stats.pearsonr(metric[idx], human[idx])[0], abs=EXACT)
    assert core.label_texts(list(got.groups)) == {("x.y", "z"): '["x.y", "z"]', ("x", "y.z"): '["x", "y.z"]'}
    # numbers and texts that print alike stay apart
    mixed = [1 if i % 3 == 0 else "1" if i % 3 == 1 else 2 for i in range(60)]
    assert len(level_correlations(metric, human, Layout(groups=mixed), n_boot=5).groups) == 3
    assert core.label_texts([1, "1", 2, ("de-en",)]) == {1: "1", "1": '"1"', 2: "2", ("de-en",): "de-en"}


# ------------------------------------------------------------------ 2. the resamples: numpy's draws, a block at a time


def test_the_resamples_are_numpys_draws_whatever_the_block(monkeypatch):
    metric, human = _pair(8, 50)
    human[3] = np.nan  # an unrated record stays in the draws
    seed, b = 5, 40
    draws = np.random.default_rng(seed).integers(0, 50, size=(b, 50))  # the draws, replayed
    want = []
    for row in draws:
        keep = ~np.isnan(human[row])
        want.append(stats.kendalltau(metric[row][keep], human[row][keep])[0])
    whole = level_correlations(metric, human, n_boot=b, seed=seed, statistics=["pearson", "kendall", "acc23"])
    np.testing.assert_allclose(whole.boot["kendall"], want, atol=EXACT)
    monkeypatch.setattr("movers.core.agreement.levels.CHUNK_CELLS", 64)  # blocks of one or two resamples
    small = level_correlations(metric, human, n_boot=b, seed=seed, statistics=["pearson", "kendall", "acc23"])
    for s in whole.boot:
        np.testing.assert_allclose(small.boot[s], whole.boot[s], atol=1e-15)


def test_the_input_resamples_of_the_system_level_are_numpys_draws(monkeypatch):
    rng = np.random.default_rng(9)
    metric, human = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))  # 5 systems x 7 inputs
    layout = Layout("system", systems=[s for s in range(5) for _ in range(7)], inputs=list(range(7)) * 5)
    counts = np.random.default_rng(2).integers(0, 7, size=(30, 7))
    want = []
    for row in counts:
        w = np.bincount(row, minlength=7)
        want.append(stats.pearsonr(metric @ w / w.sum(), human @ w / w.sum())[0])
    got = level_correlations(metric.ravel(), human.ravel(), layout, n_boot=30, seed=2)
    np.testing.assert_allclose(got.boot["pearson"], want, atol=EXACT)
    monkeypatch.setattr("movers.core.agreement.levels.CHUNK_CELLS", 8)
    again = level_correlations(metric.ravel(), human.ravel(), layout, n_boot=30, seed=2)
    np.testing.assert_allclose(again.boot["pearson"], want, atol=EXACT)


def test_boot_systems_and_boot_both_are_sacrerouges_samples():
    """BOOT-SYSTEMS and BOOT-BOTH as SacreROUGE draws them (sacrerouge/stats.py, bootstrap_system_sample and
    bootstrap_both_sample: rows, then columns, of the systems x inputs matrix), with numpy's Generator."""
    rng = np.random.default_rng(10)
    x, y = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    layout = Layout("system", systems=[s for s in range(6) for _ in range(5)], inputs=list(range(5)) * 6)
    draw = np.random.default_rng(4)
    rows = draw.integers(0, 6, size=(25, 6))
    want = [stats.pearsonr(x[r].mean(1), y[r].mean(1))[0] for r in rows]
    got = level_correlations(x.ravel(), y.ravel(), layout, n_boot=25, seed=4, resample="systems")
    np.testing.assert_allclose(got.boot["pearson"], want, atol=EXACT)
    draw = np.random.default_rng(4)
    want = []
    for _ in range(25):
        r, c = draw.integers(0, 6, size=6), draw.integers(0, 5, size=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want.append(stats.pearsonr(x[r][:, c].mean(1), y[r][:, c].mean(1))[0])
    got = level_correlations(x.ravel(), y.ravel(), layout, n_boot=25, seed=4, resample="both")
    np.testing.assert_allclose(got.boot["pearson"], want, atol=EXACT)


def test_a_block_never_holds_more_cells_than_the_bound(monkeypatch):
    from movers.core.agreement import levels

    seen = []
    evaluate = levels.GroupStatistics.evaluate

    def watched(self, ra, rs, rr, point=False, metric_rows=None):
        rows = max([1, *(a.shape[0] for a in (ra, rs, rr, metric_rows) if a is not None)])
        seen.append(rows * self.width)
        return evaluate(self, ra, rs, rr, point, metric_rows)

    monkeypatch.setattr(levels.GroupStatistics, "evaluate", watched)
    monkeypatch.setattr(levels, "CHUNK_CELLS", 5000)
    metric, human = _pair(11, 2000)
    level_correlations(metric, human, n_boot=30)
    assert max(seen) <= 5000 and len(seen) == 1 + 30 // 2  # the point, then blocks of 2 resamples x 2,000


def test_resamples_above_the_bound_are_refused_in_words(tmp_path, capsys):
    from movers.cli.correlate import main

    metric, human = _pair(12)
    with pytest.raises(ValueError, match=f"from 1 to {core.MAX_RESAMPLES:,}"):
        movers.correlate(_records(metric, human), "column:metric", resamples=core.MAX_RESAMPLES + 1)
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(metric, human)), encoding="utf-8")
    assert main([str(path), "-m", "column:metric", "--bootstrap", "1000000000"]) == 2  # was numpy's 298 GiB error
    out = capsys.readouterr()
    assert out.out == "" and out.err == (f"movers correlate: error: --bootstrap must be from 1 to "
                                         f"{core.MAX_RESAMPLES:,} (every resample's value is kept), got 1000000000.\n")


# ------------------------------------------------------------------ 4. mt-metrics-eval's published values


def test_kendall_variants_of_mt_metrics_eval():
    # MTME mt_metrics_eval/stats_test.py, testKendallVariants and testKendallWithTiesOpt
    gold, metric = [1, 2, 2, 3, 4], [2, 1, 1.5, 5, 3]
    names = ["kendall", "kendall_c", "tau_23", "acc23", "acc_eq"]
    got = level_correlations(metric, gold, n_boot=5, statistics=names)
    assert got.point["kendall"] == pytest.approx(0.316227766, abs=1e-9)
    assert got.point["kendall_c"] == pytest.approx(0.32, abs=1e-12)
    assert got.point["tau_23"] == pytest.approx(0.2, abs=1e-12)
    assert got.point["acc23"] == pytest.approx(0.6, abs=1e-12)
    assert got.point["acc_eq"] == pytest.approx(0.7, abs=1e-12)
    tied = level_correlations(metric, gold, n_boot=5, statistics=["acc23"], epsilon=2)
    assert tied.point["acc23"] == pytest.approx(0.4, abs=1e-12)
    # the same vectors in scipy: tau-b and tau-c
    assert got.point["kendall"] == pytest.approx(stats.kendalltau(metric, gold)[0], abs=1e-15)
    assert got.point["kendall_c"] == pytest.approx(stats.kendalltau(metric, gold, variant="c")[0], abs=1e-15)


def test_tau_23_with_a_tie_threshold_of_mt_metrics_eval():
    # MTME mt_metrics_eval/stats_test.py, testKendallVariants_23 and testKendallVariantsWithPositiveEpsilon:
    # 21 pairs; 13 concordant, 2 discordant, ties 3 (gold only), 2 (metric only), 1 (both): tau_23 = 7/21,
    # acc23 = 14/21; with epsilon 1, 7 concordant, 1 discordant, 10 + 0 + 3 tied: tau_23 = -1/21
    gold, metric = [1, 1, 1, 2, 2, 3, 4], [1, 1, 2, 2, 4, 3, 3]
    for eps, tau in ((0.0, 7 / 21), (0.1, 7 / 21), (1.0, -1 / 21)):
        got = level_correlations(metric, gold, n_boot=5, statistics=["tau_23", "acc23"], epsilon=eps)
        assert got.point["tau_23"] == pytest.approx(tau, abs=1e-12)
    assert level_correlations(metric, gold, n_boot=5, statistics=["acc23"]).point["acc23"] == pytest.approx(14 / 21)


def _acc23(gold, metric, eps):
    """acc23 from the definition: (concordant + tied in both) / pairs, metric pairs within eps tied."""
    agree = total = 0
    for i, j in itertools.combinations(range(len(gold)), 2):
        dm = metric[i] - metric[j]
        sm = 0 if abs(dm) <= eps else np.sign(dm)
        agree += sm == np.sign(gold[i] - gold[j])
        total += 1
    return agree / total


@pytest.mark.parametrize("average", ["none", "sys", "item"])
def test_acc_eq_is_acc23_at_the_best_threshold(average):
    # MTME stats_test.py, KendallWithTiesOpt on gold [1, 2, 2, 3, 3, 4], metric [2, 1, 1.5, 5, 3, 2]: its
    # value is acc23 at the threshold it returns; here every candidate threshold is tried by definition
    gold, metric = np.array([1, 2, 2, 3, 3, 4.0]), np.array([2, 1, 1.5, 5, 3, 2.0])
    systems, items = ["a"] * 3 + ["b"] * 3, [0, 1, 2] * 2
    units = {"none": [np.arange(6)], "sys": [np.arange(3), np.arange(3, 6)],
             "item": [np.array([0, 3]), np.array([1, 4]), np.array([2, 5])]}[average]
    candidates = [0.0, *sorted({abs(a - b) for a, b in itertools.combinations(metric, 2)})]
    best = max(np.mean([_acc23(gold[u], metric[u], e) for u in units]) for e in candidates)
    got = level_correlations(metric, gold, Layout(systems=systems, inputs=items), n_boot=5, statistics=["acc_eq"],
                             average=average)
    assert got.point["acc_eq"] == pytest.approx(best, abs=1e-12)
    threshold = got.groups["all"].threshold
    assert np.mean([_acc23(gold[u], metric[u], threshold) for u in units]) == pytest.approx(best, abs=1e-12)
    assert threshold == min(e for e in candidates
                            if np.mean([_acc23(gold[u], metric[u], e) for u in units]) == pytest.approx(best))


def test_averages_of_mt_metrics_eval():
    # MTME stats_test.py, testPearson / testKendall / testKendallC: Correlation(2, gold [1..6], metric
    # [2, 1, 4, 3, 3, 7]) (two systems of three items) gives, by average_by none / sys / item (3 places):
    gold, metric = [1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 3, 7]
    layout = Layout(systems=["a"] * 3 + ["b"] * 3, inputs=[0, 1, 2] * 2)
    published = {"none": (0.776, 0.552, 0.556), "sys": (0.760, 0.575, 0.611), "item": (1.0, 1.0, 1.0)}
    for average, (r, tau, tau_c) in published.items():
        got = level_correlations(metric, gold, layout, n_boot=5, average=average,
                                 statistics=["pearson", "kendall", "kendall_c"]).point
        assert (round(got["pearson"], 3), round(got["kendall"], 3), round(got["kendall_c"], 3)) == (r, tau, tau_c)
    # testNaNHandling: a system whose metric scores are constant has no correlation and is left out: 1.0
    got = level_correlations([2, 2, 2, 4, 5, 6], gold, layout, n_boot=5, average="sys", statistics=["pearson"])
    assert got.point["pearson"] == pytest.approx(1.0) and got.groups["all"].undefined == 1


def test_soft_pairwise_accuracy_by_enumeration():
    # MTME stats_test.py, testPairwiseConfidenceError: Correlation(2, [1, 2, 3, 2, 3, 4], [2, 2, 4, 1, 3, 5])
    # gives 0.872 (3 places) from 1,000 random sign vectors. All 8 by hand: human differences (-1, -1, -1)
    # give p = 1 (every permuted sum >= -3); metric differences (1, -1, -1) give P(sum >= -1) = 7/8; so
    # SPA = 1 - |1 - 7/8| = 0.875, which 1,000 draws estimate within 0.0105 (one standard error).
    layout = Layout("system", systems=["a"] * 3 + ["b"] * 3, inputs=[0, 1, 2] * 2)
    got = level_correlations([2, 2, 4, 1, 3, 5], [1, 2, 3, 2, 3, 4], layout, n_boot=5, statistics=["spa"])
    assert got.point["spa"] == 0.875 and abs(got.point["spa"] - 0.872) < 0.0105


def test_soft_pairwise_accuracy_equals_its_formula():
    """Thompson et al. (2024): 1 - mean over system pairs of |p_human - p_metric|, each p the share of all
    2^n sign vectors with a permuted difference at least the observed one (enumerated here)."""
    rng = np.random.default_rng(13)
    human, metric = rng.normal(size=(4, 5)), rng.normal(size=(4, 5))  # 4 systems x 5 inputs

    def p(scores, a, b):
        d = scores[a] - scores[b]
        return np.mean([np.dot(s, d) >= d.sum() - 1e-12 for s in itertools.product((1, -1), repeat=5)])

    pairs = list(itertools.combinations(range(4), 2))
    want = 1 - np.mean([abs(p(human, a, b) - p(metric, a, b)) for a, b in pairs])
    layout = Layout("system", systems=[s for s in range(4) for _ in range(5)], inputs=list(range(5)) * 4)
    got = level_correlations(metric.ravel(), human.ravel(), layout, n_boot=5, statistics=["spa"])
    assert got.point["spa"] == pytest.approx(want, abs=1e-12)


def test_significance_clusters_of_mt_metrics_eval():
    # MTME mt_metrics_eval/data_test.py, testAssignRanks
    a = np.array([0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0]).reshape(4, 4)
    assert core.assign_ranks(a, 0.5) == [1, 1, 1, 1] and core.assign_ranks(a, 1.0) == [1, 2, 3, 4]
    b = np.array([0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0]).reshape(4, 4)
    assert core.assign_ranks(b, 0.5) == [1, 1, 2, 2]
    c = np.array([0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]).reshape(4, 4)
    assert core.assign_ranks(c, 0.5) == [1, 2, 2, 3]


def test_williams_of_mt_metrics_eval_and_sacrerouge():
    # MTME stats_test.py, WilliamsSigDiffTest.testSigDiff: p 0.019, r1 0.999, r2 0.987 (3 places)
    gold, m1, m2 = [1, 2, 3, 4, 5], [1.1, 2, 3.1, 4, 5.1], [1.5, 2, 3.1, 4, 5.5]
    out = movers.correlate(_records(m1, gold, other=m2), ["column:metric", "column:other"],
                           compare_to="column:other", resamples=10).to_dict()
    assert round(out["williams"]["column:metric"]["p"], 3) == 0.019
    # SACREROUGE sacrerouge/tests/stats_test.py, test_williams_diff_test: 0.2716978 (psych's r.test) for
    # X, Y, Z = np.random.seed(12); random((9, 5)) x 3, global Pearson, n = 45; SacreROUGE (like WMT's scripts)
    # feeds the absolute correlations
    np.random.seed(12)
    x, y, z = (np.random.random((9, 5)).ravel() for _ in range(3))
    r12, r13, r23 = (abs(stats.pearsonr(u, v)[0]) for u, v in ((x, z), (y, z), (x, y)))
    assert core.williams_test(r12, r13, r23, 45)[1] == pytest.approx(0.2716978, abs=1e-6)


# ------------------------------------------------------------------ SacreROUGE's published values


def _matrix_records(x, y):
    """Records of a systems x inputs matrix pair (NaN: no record), SacreROUGE's layout."""
    m, h, s, i = [], [], [], []
    for a in range(x.shape[0]):
        for b in range(x.shape[1]):
            if not np.isnan(x[a, b]):
                m.append(x[a, b]), h.append(y[a, b]), s.append(a), i.append(b)
    return m, h, s, i


def test_levels_of_sacrerouge():
    # SACREROUGE sacrerouge/tests/stats_test.py, test_summary_level_corr / test_system_level_corr /
    # test_global_corr (Pearson; the summary level's last column is constant and left out)
    x = np.array([[1, 9, 2], [4, 5, 2], [6, 7, 2]], float)
    y = np.array([[11, 12, 13], [14, 15, 16], [17, 18, 19]], float)
    nan = np.nan
    cases = [("summary", x, y, 0.2466996339),
             ("summary", np.array([[1, 9, 2], [nan, 5, 4], [6, 7, 7]]), np.array([[11, 12, 13], [nan, 15, 16],
                                                                                 [17, 18, 19]]), 0.4977997559),
             ("system", x, y, 0.7205766921),
             ("system", np.array([[1, 9, 2], [4, 5, nan], [6, nan, 2]]), np.array([[11, 12, 13], [14, 15, nan],
                                                                                  [17, nan, 19]]), -0.09578262852),
             ("segment", x, y, 0.06691496051),
             ("segment", np.array([[1, 9, 2], [nan, 5, 2], [6, 7, nan]]), np.array([[11, 12, 13], [nan, 15, 16],
                                                                                   [17, 18, nan]]), 0.2897249422)]
    for level, a, b, want in cases:
        m, h, s, i = _matrix_records(a, b)
        got = level_correlations(m, h, Layout(level, systems=s, inputs=i), n_boot=5).point["pearson"]
        assert got == pytest.approx(want, abs=1e-9), level


def test_perm_both_of_sacrerouge():
    # SACREROUGE sacrerouge/tests/stats_test.py, test_permutation_diff_test: X, Y, Z from np.random.seed(12),
    # random((9, 5)) each; np.random.seed(2), then 1,000 masks rand(9, 5) > 0.5 (random_bool_mask): p of
    # corr(X, Z) > corr(Y, Z) = 0.97002997002997, and of Y over X 0.030969030969030968. The masks are replayed.
    np.random.seed(12)
    x, y, z = (np.random.random((9, 5)).ravel() for _ in range(3))

    def replay():
        legacy = np.random.RandomState(2)
        return lambda group, k: np.stack([legacy.rand(9, 5).ravel() > 0.5 for _ in range(k)])

    there = core.permutations(x, y, z, test="perm-both", statistics=["pearson"], masks=replay())
    back = core.permutations(y, x, z, test="perm-both", statistics=["pearson"], masks=replay())
    assert there.p("pearson") == pytest.approx(0.97002997002997, abs=1e-12)
    assert back.p("pearson") == pytest.approx(0.030969030969030968, abs=1e-12)


# ------------------------------------------------------------------ permutation tests by exact enumeration


def _z(v):
    return (v - v.mean()) / v.std()


def _every_mask(n):
    masks = np.array(list(itertools.product((False, True), repeat=n)))
    rows = iter(masks)
    return masks, (lambda group, k: np.stack([next(rows) for _ in range(k)]))


@pytest.mark.parametrize("test, level, unit_of", [
    ("perm-inputs", "segment", lambda s, i: i),   # 6 inputs x 3 systems: all 2^6 exchanges of inputs
    ("perm-systems", "system", lambda s, i: s),   # 6 systems x 3 inputs: all 2^6 exchanges of systems
    ("perm-both", "segment", lambda s, i: None),  # 6 records: all 2^6 exchanges of outputs
])
def test_permutation_tests_against_every_permutation(test, level, unit_of):
    rng = np.random.default_rng(14)
    n_sys, n_in = (3, 6) if test == "perm-inputs" else (6, 3) if test == "perm-systems" else (6, 1)
    systems = np.repeat(np.arange(n_sys), n_in)
    inputs = np.tile(np.arange(n_in), n_sys)
    human = rng.normal(size=n_sys * n_in)
    a, b = human + rng.normal(size=len(human)), 3 * human + 5 * rng.normal(size=len(human)) + 100
    unit = unit_of(systems, inputs)
    unit = np.arange(len(human)) if unit is None else unit
    masks, replay = _every_mask(6)
    layout = Layout(level, systems=systems.tolist(), inputs=inputs.tolist())
    got = core.permutations(a, b, human, layout, test=test, statistics=["pearson", "kendall"], n_perm=64,
                            masks=replay)

    def value(m, s):
        if level == "system":
            m = [m[systems == k].mean() for k in range(n_sys)]
            hh = [human[systems == k].mean() for k in range(n_sys)]
        else:
            hh = human
        return (stats.pearsonr if s == "pearson" else stats.kendalltau)(m, hh)[0]

    za, zb = _z(a), _z(b)
    for s in ("pearson", "kendall"):
        observed = value(za, s) - value(zb, s)
        deltas = np.array([value(np.where(mask[unit], zb, za), s) - value(np.where(mask[unit], za, zb), s)
                           for mask in masks])
        np.testing.assert_allclose(got.permuted[s], deltas, atol=1e-12)
        assert got.observed[s] == pytest.approx(observed, abs=1e-12)
        assert got.p(s) == pytest.approx((np.sum(deltas >= observed - 1e-12) + 1) / 65, abs=1e-15)


def test_perm_pairs_against_every_permutation():
    """mt-metrics-eval's PairwisePermutationSigDiff: each pair's comparison by metric a (its own tie threshold)
    or by metric b exchanged; 5 units, 10 pairs, all 2^10 exchanges."""
    rng = np.random.default_rng(15)
    human = np.round(rng.normal(size=5), 1)
    a, b = np.round(human + rng.normal(size=5), 1), np.round(rng.normal(size=5) * 10, 0)
    masks, replay = _every_mask(10)
    got = core.permutations(a, b, human, test="perm-pairs", statistics=["acc23", "kendall"], epsilon=0.25,
                            n_perm=1024, masks=replay)
    pairs = list(itertools.combinations(range(5), 2))

    def signs(v, eps):
        return np.array([0 if abs(v[i] - v[j]) <= eps else np.sign(v[i] - v[j]) for i, j in pairs])

    hs = np.array([np.sign(human[i] - human[j]) for i, j in pairs])

    def acc23(sg):
        return np.mean(sg == hs)

    def tau_b(sg):
        return np.sum(sg * hs) / np.sqrt(np.sum(sg != 0) * np.sum(hs != 0))

    for s, f, eps in (("acc23", acc23, 0.25), ("kendall", tau_b, 0.0)):
        sa, sb = signs(a, eps), signs(b, eps)
        deltas = np.array([f(np.where(m, sb, sa)) - f(np.where(m, sa, sb)) for m in masks])
        np.testing.assert_allclose(got.permuted[s], deltas, atol=1e-12)
        assert got.p(s) == pytest.approx((np.sum(deltas >= f(sa) - f(sb) - 1e-12) + 1) / 1025, abs=1e-15)


def test_random_permutations_are_seeded_and_bounded():
    metric, human = _pair(16)
    other = human + 3 * np.random.default_rng(1).normal(size=40)
    one = core.permutation_test(metric, other, human, n_perm=99, seed=3)
    assert one == core.permutation_test(metric, other, human, n_perm=99, seed=3)
    for p, _ in one.values():
        assert 1 / 100 <= p <= 1
    # the metric is the human score itself: only the identity among 99 random exchanges is as good (p = 1/100)
    assert core.permutation_test(human, other, human, n_perm=99, statistics=["pearson"])["pearson"][0] == 0.01


# ------------------------------------------------------------------ averages, pooling, the call


def test_pooled_pairwise_accuracy_is_wmt22s_global_accuracy():
    """Kocmi et al. (2021) / WMT22: the agreeing system pairs of every language pair over all their pairs."""
    # group a: 3 systems, metric means (1, 2, 3), human (1, 3, 2): 2 of 3 pairs agree;
    # group b: 5 systems in the same order on both sides: 10 of 10 agree. Pooled 12 / 13; averaged (2/3 + 1) / 2
    metric = [1, 2, 3] + [1, 2, 3, 4, 5]
    human = [1, 3, 2] + [5, 6, 7, 8, 9]
    layout = Layout("system", groups=["a"] * 3 + ["b"] * 5, systems=list("abc") + list("vwxyz"), inputs=[0] * 8)
    pooled = level_correlations(metric, human, layout, n_boot=5, statistics=["pairwise_accuracy", "kendall"],
                                average="pooled")
    assert pooled.point["pairwise_accuracy"] == pytest.approx(12 / 13)
    assert pooled.point["kendall"] == pytest.approx((1 + 10) / 13)  # (C - D) / pairs, no ties
    plain = level_correlations(metric, human, layout, n_boot=5, statistics=["pairwise_accuracy"])
    assert plain.point["pairwise_accuracy"] == pytest.approx((2 / 3 + 1) / 2)
    with pytest.raises(ValueError, match="'pooled' counts pairs across groups; 'pearson'"):
        level_correlations(metric, human, layout, statistics=["pearson"], average="pooled")


def test_protocols_that_cannot_be_are_refused_in_words():
    metric, human = _pair(17)
    records = _records(metric, human, system=[f"s{i % 4}" for i in range(40)])
    for kwargs, match in [
        ({"statistics": ["spa"]}, "spa .* compares systems: use it at the system level"),
        ({"statistics": ["nope"]}, r"unknown statistic 'nope'; choose one of \['pearson'"),
        ({"average": "mean"}, r"unknown average 'mean'; choose one of \['none', 'sys', 'item', 'pooled'\]"),
        ({"resample": "records"}, r"unknown resample 'records'"),
        ({"test": "perm-everything"}, r"unknown test 'perm-everything'"),
        ({"test": ["perm-both", "perm-inputs"]}, "name one permutation test per call"),
        ({"statistics": ["acc23"], "epsilon": 0.1, "test": "perm-both"}, "perm-pairs"),
        ({"statistics": ["pearson"], "test": "perm-pairs"}, "perm-pairs swaps pairwise comparisons"),
        ({"epsilon": -1}, "finite number >= 0"),
        ({"average": "item"}, r"need each output's input .* --input-field"),
        ({"level": "system", "average": "item", "input_field": "system"}, "the system level correlates one mean"),
    ]:
        with pytest.raises(ValueError, match=match):
            movers.correlate(records, "column:metric", resamples=10, **kwargs)


def test_the_call_reports_the_protocol_tests_and_clusters_in_json():
    metric, human = _pair(18)
    records = _records(human, human, bad=-human, twice=2 * human + 1)
    result = movers.correlate(records, ["column:metric", "column:bad", "column:twice"], compare_to="column:bad",
                              statistics=["pearson", "acc_eq"], test="perm-both", resamples=50)
    out = _strict_json(result.to_json())
    assert out["protocol"] == {"statistics": ["pearson", "acc_eq"], "average": "none", "resample": "segments",
                               "tests": ["perm-both"], "epsilon": 0.0}
    assert set(out["metrics"]["column:metric"]["acc_eq"]) == {"value", "ci", "threshold", "thresholds"}
    assert set(out["permutation"]["column:metric"]["pearson"]) == {"p", "delta"}
    # the human score against its negation: only the identity of 50 exchanges is as good, p = 1/51
    assert out["permutation"]["column:metric"]["pearson"] == {"p": 1 / 51, "delta": pytest.approx(2.0)}
    # the same scores up to an affine map are one cluster; the negation another
    assert out["clusters"]["pearson"] == [["column:metric", "column:twice"], ["column:bad"]]
    assert "differences" not in out and "williams" not in out  # the tests named replace the defaults


def test_the_command_prints_the_new_tables():
    from .helpers import REPO

    example = REPO / "docs" / "examples" / "judgments.jsonl"
    run = run_movers(["correlate", str(example), "-m", "sentbleu", "-m", "chrf", "--compare-to", "sentbleu",
                      "--stat", "kendall", "--stat", "acc_eq", "--test", "perm-both", "--test", "bootstrap",
                      "--bootstrap", "30"], env=_env())
    assert run.returncode == 0, run.stderr
    assert "acc_eq's tie threshold" in run.stdout and "permutation test (perm-both, 30 permutations" in run.stdout
    assert "significance clusters (perm-both" in run.stdout and "difference to sentbleu" in run.stdout


def test_the_declarations_are_the_help_and_the_page():
    from movers.cli.correlate import _parser

    from .helpers import REPO

    text = " ".join(_parser().format_help().split())
    page = (REPO / "docs" / "human-judgments.md").read_text(encoding="utf-8")
    for name in [*core.STATS, *core.AVERAGES, *core.RESAMPLINGS, *core.TESTS]:
        assert name in text, name
        assert f"`{name}`" in page, name
    assert f"{core.MAX_RESAMPLES:,}" in text and f"{core.MAX_RESAMPLES:,}" in page
    assert f"{core.MAX_PAIRS:,}" in page and f"{core.SPA_PERMUTATIONS:,}" in page and f"{core.CHUNK_CELLS:,}" in page


def test_a_progress_bar_while_the_statistics_resample(capsys):
    metric, human = _pair(19)
    records = _records(metric, human, other=human[::-1].copy())
    movers.correlate(records, ["column:metric", "column:other"], resamples=40, test="perm-both", progress=True)
    err = capsys.readouterr().err
    # 40 resamples for each of 2 metrics, and 40 permutations of the one pair of metrics
    assert "movers: resampling" in err and "120/120" in err
