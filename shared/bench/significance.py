"""Is one metric closer to the human judgments than another? Paired bootstrap differences and the Williams test.

Both compare two metrics scored on the same records against the same human scores, so their correlations are
dependent: an interval for each correlation alone says little about their difference. The paired bootstrap
takes the difference in every resample (the same resamples for both, :mod:`shared.bench.levels`); the
Williams test (Williams 1959; Graham & Baldwin 2014, as in the WMT metrics tasks) is the t-test for the
difference of two Pearson correlations that share the human variable.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .levels import STATISTICS, LevelResult, rowwise

__all__ = ["williams_test", "paired_difference", "williams_by_group"]


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t for H1: r12 > r13, where r12 = corr(human, metric A), r13 = corr(human, metric B) and
    r23 = corr(A, B) on the same n units. Returns (t, one-sided p), t with n - 3 degrees of freedom:

        t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 K (n - 1)/(n - 3) + (r12 + r13)^2 / 4 (1 - r23)^3),
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23

    (Graham & Baldwin 2014, section 3). A metric worse than the other gets p > 0.5. NaN when n < 4.
    """
    if n < 4 or any(math.isnan(r) for r in (r12, r13, r23)):
        return float("nan"), float("nan")
    k = 1 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2 * r12 * r13 * r23
    den = 2 * k * (n - 1) / (n - 3) + (r12 + r13) ** 2 / 4 * (1 - r23) ** 3
    if den <= 0:  # identical metrics (r23 = 1): no difference to test
        return float("nan"), float("nan")
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(den)
    return t, float(stats.t.sf(t, n - 3))


def paired_difference(result: LevelResult, base: LevelResult) -> dict[str, tuple[float, float, float]]:
    """statistic -> (result - base, 2.5th, 97.5th percentile of the per-resample differences).

    The two results must come from the same records, layout, bootstrap size and seed (then their resamples are
    the same ones), which :func:`shared.bench.levels.level_correlations` guarantees for one criterion.
    """
    if result.level != base.level or result.resampled != base.resampled or \
            len(result.boot["pearson"]) != len(base.boot["pearson"]):
        raise ValueError("correlation: a paired difference needs two results on the same records, level and "
                         "bootstrap resamples.")
    out = {}
    for s in STATISTICS:
        diff = result.boot[s] - base.boot[s]
        out[s] = (result.point[s] - base.point[s], float(np.nanpercentile(diff, 2.5)),
                  float(np.nanpercentile(diff, 97.5)))
    return out


def williams_by_group(result: LevelResult, base: LevelResult) -> dict[str, dict[str, float]]:
    """group -> {"t", "df", "p", "n"}: the Williams test of result's Pearson r > base's, on the correlated units
    (segments, or system means). Not defined at the summary level (an average of per-input correlations)."""
    if result.level == "summary":
        return {}
    out = {}
    for name, (m, h) in result.points.items():
        b = base.points[name][0]
        r12, r13, r23 = (float(rowwise(x, y, "pearson")[0]) for x, y in ((m, h), (b, h), (m, b)))
        t, p = williams_test(r12, r13, r23, len(m))
        out[name] = {"t": t, "df": len(m) - 3, "p": p, "n": len(m), "r12": r12, "r13": r13, "r23": r23}
    return out
