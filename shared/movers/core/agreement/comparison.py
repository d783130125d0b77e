"""Is one metric's agreement with the human scores better than another's? Williams' test, the paired
bootstrap, permutation tests and significance clusters.

- Williams (1959), as Graham & Baldwin (2014) and the WMT metrics tasks use it: Pearson r only.
- The paired bootstrap: the same resamples for both metrics (:mod:`.levels`), an interval of the difference.
- Permutation tests (Deutsch, Dror and Roth 2021, SacreROUGE's ``permutation_diff_test``; mt-metrics-eval's
  ``PermutationSigDiff``): each metric's scores z-scored within each group, then the two metrics' scores
  exchanged at random, per output (PERM-BOTH), per input (PERM-INPUTS) or per system (PERM-SYSTEMS); or each
  pair's comparison exchanged, each metric with its own tie threshold (mt-metrics-eval's
  ``PairwisePermutationSigDiff``, PERM-PAIRS). One-sided: p = (c + 1) / (k + 1), c the permutations whose
  difference (metric − base) is at least the observed one, k the permutations.
- Significance clusters: mt-metrics-eval's ``AssignRanks`` over the metrics sorted by their value.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .declarations import ALPHA, CHUNK_CELLS, RESAMPLES, SEED, Protocol, protocol
from .labels import factorize
from .levels import GroupStatistics, Layout, LevelResult, Progress, interval, label_codes, rowwise, scaled
from .spa import Signs
from .units import POOLED, Evaluation, from_counts, pooled_value
from .weighted import Counts, Pairs, Segments

__all__ = ["williams_test", "paired_difference", "williams_by_group", "Permutations", "permutations",
           "permutation_test", "assign_ranks", "clusters"]

TIE = 1e-12
"""Permuted differences within this (relative to max(1, |observed|)) of the observed one count as at least as
large: recomputing the observed arrangement gives it again, whatever the rounding."""


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t for H1: r12 > r13, where r12 = corr(human, metric A), r13 = corr(human, metric B) and
    r23 = corr(A, B) on the same n units. Returns (t, one-sided p), t with n - 3 degrees of freedom:

        t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 K (n - 1)/(n - 3) + (r12 + r13)^2 / 4 (1 - r23)^3),
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23

    (Williams 1959; Graham & Baldwin 2014, section 3, as the WMT metrics tasks use it). A metric worse than the
    other gets p > 0.5. NaN when n < 4, a correlation is undefined, or the two metrics correlate perfectly.
    """
    if n < 4 or any(math.isnan(r) for r in (r12, r13, r23)):
        return float("nan"), float("nan")
    k = 1 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2 * r12 * r13 * r23
    den = 2 * k * (n - 1) / (n - 3) + (r12 + r13) ** 2 / 4 * (1 - r23) ** 3
    if den <= 0:  # identical metrics (r23 = 1): no difference to test
        return float("nan"), float("nan")
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(den)
    from scipy import stats  # here, not at import: `movers correlate --help` reads the declarations
    return t, float(stats.t.sf(t, n - 3))


def paired_difference(result: LevelResult, base: LevelResult) -> dict[str, tuple[float, float, float]]:
    """statistic -> (result - base, low, high): the interval of the per-resample differences.

    The two results must come from the same records, layout, resamples and seed (then their resamples are the
    same ones), as :func:`~movers.core.agreement.level_correlations` gives them for one human score.
    """
    same = {g: r.resampled for g, r in result.groups.items()} == {g: r.resampled for g, r in base.groups.items()}
    if result.level != base.level or not same or set(result.boot) != set(base.boot) or \
            len(next(iter(result.boot.values()))) != len(next(iter(base.boot.values()))):
        raise ValueError("correlate: a paired difference needs two results on the same records, level, statistics "
                         "and bootstrap resamples.")
    return {s: (result.point[s] - base.point[s], *interval(result.boot[s] - base.boot[s])) for s in result.boot}


def williams_by_group(result: LevelResult, base: LevelResult) -> dict[Hashable, dict[str, float]]:
    """group -> {"t", "df", "p", "n", "r12", "r13", "r23"}: the Williams test of result's Pearson r > base's on the
    correlated units (segments, or system means). Empty where units are averaged per input or system (an average
    of correlations has no such test)."""
    proto = result.protocol
    if result.level == "summary" or (proto is not None and proto.average in ("item", "sys")):
        return {}
    out = {}
    for name, group in result.groups.items():
        (m, h), b = group.values, base.groups[name].values[0]
        r12, r13, r23 = (float(rowwise(x, y, "pearson")[0]) for x, y in ((m, h), (b, h), (m, b)))
        t, p = williams_test(r12, r13, r23, len(m))
        out[name] = {"t": t, "df": len(m) - 3, "p": p, "n": len(m), "r12": r12, "r13": r13, "r23": r23}
    return out


# ---------------------------------------------------------------------------------------------- permutations

@dataclass(frozen=True)
class Permutations:
    """Per statistic: the observed difference (metric − base, averaged or pooled over groups as the level does)
    and the difference under each permutation ([k]); :meth:`p` is the one-sided p-value either way."""

    observed: dict[str, float]
    permuted: dict[str, np.ndarray]

    def p(self, statistic: str, reverse: bool = False) -> float:
        """p = (c + 1) / (k + 1): H1 the metric agrees better than the base (`reverse`: the base better)."""
        delta, null = self.observed[statistic], self.permuted[statistic]
        if math.isnan(delta):
            return float("nan")
        slack = TIE * max(1.0, abs(delta))
        hits = (null <= delta + slack) if reverse else (null >= delta - slack)
        return float((hits.sum() + 1) / (len(null) + 1))


def _zscored(v: np.ndarray, rated: np.ndarray) -> np.ndarray:
    """(v − mean) / std over the rated records (population std; SacreROUGE's ``standardize``, scipy's
    ``zscore``), scaled first so that any finite scores give finite z-scores; a constant vector stays 0."""
    values, _ = scaled(v)
    mean = values[rated].mean() if rated.any() else 0.0
    std = values[rated].std() if rated.any() else 0.0
    return (values - mean) / std if std > 0 else values - mean


def _combine(proto: Protocol, per_group: list[Evaluation], statistic: str) -> np.ndarray:
    """[rows] a statistic over groups: the mean of the groups where it is defined, or the pooled sums."""
    if proto.average == "pooled" and statistic in per_group[0].pooled:
        parts = [np.stack(ev.pooled[statistic]) for ev in per_group]
        return pooled_value(statistic, np.sum(parts, axis=0))
    values = np.stack([ev.values[statistic] for ev in per_group])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row undefined in every group stays NaN
        return np.nanmean(values, 0)


def _pair_statistics(proto: Protocol, signs: np.ndarray, human: np.ndarray, pairs: Pairs,
                     seg: Segments) -> Evaluation:
    """The pairwise statistics of rows of metric comparisons ([R, P] signs, 0 a tie) against the human ones."""
    both = signs * human
    size = (seg.ends - seg.starts).astype(float)[None]
    c = Counts(pairs.sum(both > 0), pairs.sum(both < 0), pairs.sum((signs == 0) & (human != 0)),
               pairs.sum((signs != 0) & (human == 0)), pairs.sum((signs == 0) & (human == 0)), size, size, size)
    out = Evaluation({})
    for s in proto.statistics:
        v = from_counts(c, "acc23" if s == "acc_eq" else s)
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = ~np.isnan(v)
            out.values[s] = np.where(ok, v, 0.0).sum(1) / ok.sum(1)
        if proto.average == "pooled" and s != "acc_eq":
            out.pooled[s] = tuple(p.sum(1) for p in POOLED[s](c))
    return out


def permutations(metric: Sequence[float] | np.ndarray, base: Sequence[float] | np.ndarray,
                 human: Sequence[float] | np.ndarray, layout: Layout | None = None, *, test: str = "perm-both",
                 statistics: Sequence[str] | None = None, average: str | None = None, epsilon: float = 0.0,
                 n_perm: int = RESAMPLES, seed: int = SEED, progress: Progress | None = None,
                 masks: Callable[[int, int], np.ndarray] | None = None) -> Permutations:
    """The permutation test of `metric` against `base` on the same records: the observed difference of each
    statistic and its distribution under H0 (the two metrics exchangeable), `n_perm` permutations drawn with
    numpy's ``default_rng(seed)`` group after group, a block at a time.

    Args:
        test: ``perm-both`` (per output), ``perm-inputs``, ``perm-systems`` or ``perm-pairs``.
        masks: For checks: ``masks(group, k)`` returns the next k rows of booleans (True: exchange) over the
            group's outputs, inputs, systems or pairs instead of random ones.
    """
    layout = layout or Layout()
    proto = protocol(layout.level, statistics, average, None, (test,), epsilon)
    a, b, h = (np.asarray(v, float) for v in (metric, base, human))
    codes, labels = factorize(list(layout.groups) if layout.groups is not None else ["all"] * len(h))
    rng = np.random.default_rng(seed)
    observed_a, observed_b, permuted_a, permuted_b = [], [], [], []
    for g in range(len(labels)):
        idx = np.flatnonzero(codes == g)
        systems, inputs = label_codes(layout.systems, idx), label_codes(layout.inputs, idx)
        rated = ~np.isnan(h[idx])
        if test == "perm-pairs":  # comparisons, each metric in its own units (its tie threshold)
            za, zb = a[idx], b[idx]
        else:
            za, zb = _zscored(a[idx], rated), _zscored(b[idx], rated)
        ga = GroupStatistics(za, h[idx], systems, inputs, proto)
        gb = GroupStatistics(zb, h[idx], systems, inputs, proto)
        if "spa" in proto.statistics:
            ga.sign = gb.sign = Signs(ga.n_inputs, np.random.SeedSequence(seed, spawn_key=(1, g)))
        pa, pb = ga.evaluate(None, None, None), gb.evaluate(None, None, None)
        if test == "perm-pairs":
            pa, pb, chunks = _pair_rows(ga, gb, pa, pb, proto, rng, n_perm, g, masks, progress)
        else:
            unit = {"perm-both": np.arange(len(idx)), "perm-inputs": inputs, "perm-systems": systems}[test]
            assert unit is not None
            n_units = int(unit.max()) + 1 if len(unit) else 0
            chunks = []
            step = max(1, CHUNK_CELLS // max(ga.width, 1))
            done = 0
            while done < n_perm:
                k = min(step, n_perm - done)
                swap = (masks(g, k) if masks is not None else rng.random((k, n_units)) < 0.5)[:, unit]
                ea = ga.evaluate(None, None, None, metric_rows=np.where(swap, zb, za))
                eb = ga.evaluate(None, None, None, metric_rows=np.where(swap, za, zb))
                chunks.append((ea, eb))
                done += k
                if progress is not None:
                    progress(k)
        observed_a.append(pa)
        observed_b.append(pb)
        permuted_a.append(_rows([c[0] for c in chunks]))
        permuted_b.append(_rows([c[1] for c in chunks]))
    observed = {s: float((_combine(proto, observed_a, s) - _combine(proto, observed_b, s))[0])
                for s in proto.statistics}
    permuted = {s: _combine(proto, permuted_a, s) - _combine(proto, permuted_b, s) for s in proto.statistics}
    return Permutations(observed, permuted)


def _rows(blocks: list[Evaluation]) -> Evaluation:
    """The blocks of one group's permutations as one evaluation of all its rows."""
    out = Evaluation({s: np.concatenate([b.values[s] for b in blocks]) for s in blocks[0].values})
    out.pooled = {s: tuple(np.concatenate([b.pooled[s][i] for b in blocks]) for i in range(len(blocks[0].pooled[s])))
                  for s in blocks[0].pooled}
    return out


def _pair_rows(ga: GroupStatistics, gb: GroupStatistics, pa: Evaluation, pb: Evaluation, proto: Protocol,
               rng: np.random.Generator, n_perm: int, g: int, masks: Callable[[int, int], np.ndarray] | None,
               progress: Progress | None) -> tuple[Evaluation, Evaluation, list[tuple[Evaluation, Evaluation]]]:
    """PERM-PAIRS: each pair of units compared by each metric (its own tie threshold: acc_eq's calibrated one,
    --epsilon for tau_23 and acc23, none otherwise), the two comparisons exchanged at random."""
    if proto.level == "system":
        xa, y, w = ga._means(None, None)
        xb = gb._means(None, None)[0]
        keep = w[0] > 0
        xa, xb, y = xa[:, keep], xb[:, keep], y[:, keep]
        seg = Segments.one(int(keep.sum()))
    else:
        idx = ga.unit_idx
        xa, xb, y = ga.m[idx][None], gb.m[idx][None], ga.h[idx][None]
        seg = ga.seg
    pairs = Pairs(seg)
    hy = np.sign(y[:, pairs.i] - y[:, pairs.j])

    def compared(x: np.ndarray, group: GroupStatistics, point: Evaluation, statistic: str) -> np.ndarray:
        d = x[:, pairs.i] - x[:, pairs.j]
        s = np.sign(d)
        eps = point.threshold[0] if statistic == "acc_eq" and point.threshold is not None else \
            (proto.epsilon if statistic in ("tau_23", "acc23") else 0.0)
        eps = math.ldexp(eps, -group.m_exp) if proto.level == "system" else eps
        if eps > 0:
            s[np.abs(d) <= eps] = 0
        return s

    chunks: list[tuple[Evaluation, Evaluation]] = []
    observed = []
    for which in (0, 1):
        x, group, point = (xa, ga, pa) if which == 0 else (xb, gb, pb)
        observed.append(_merge([_pair_statistics(_only(proto, s), compared(x, group, point, s), hy, pairs, seg)
                                for s in proto.statistics]))
    step = max(1, CHUNK_CELLS // max(pairs.count, 1))
    done = 0
    sa = {s: compared(xa, ga, pa, s) for s in proto.statistics}
    sb = {s: compared(xb, gb, pb, s) for s in proto.statistics}
    while done < n_perm:
        k = min(step, n_perm - done)
        swap = masks(g, k) if masks is not None else rng.random((k, pairs.count)) < 0.5
        ea = _merge([_pair_statistics(_only(proto, s), np.where(swap, sb[s], sa[s]), hy, pairs, seg)
                     for s in proto.statistics])
        eb = _merge([_pair_statistics(_only(proto, s), np.where(swap, sa[s], sb[s]), hy, pairs, seg)
                     for s in proto.statistics])
        chunks.append((ea, eb))
        done += k
        if progress is not None:
            progress(k)
    return observed[0], observed[1], chunks


def _only(proto: Protocol, statistic: str) -> Protocol:
    return Protocol(proto.level, (statistic,), proto.average, proto.resample, proto.tests, proto.epsilon)


def _merge(parts: list[Evaluation]) -> Evaluation:
    out = Evaluation({})
    for p in parts:
        out.values.update(p.values)
        out.pooled.update(p.pooled)
    return out


def permutation_test(metric: Sequence[float] | np.ndarray, base: Sequence[float] | np.ndarray,
                     human: Sequence[float] | np.ndarray, layout: Layout | None = None, **kwargs: object
                     ) -> dict[str, tuple[float, float]]:
    """statistic -> (one-sided p that `metric` agrees better than `base`, the observed difference);
    :func:`permutations`' arguments."""
    perm = permutations(metric, base, human, layout, **kwargs)  # type: ignore[arg-type]
    return {s: (perm.p(s), perm.observed[s]) for s in perm.observed}


# ---------------------------------------------------------------------------------------------- clusters

def assign_ranks(significance: np.ndarray, alpha: float = ALPHA) -> list[int]:
    """The rank of each metric, its rows and columns sorted by decreasing value: ``significance[i, j]`` (i < j)
    is the p-value that metric i agrees better than metric j. A metric starts a new rank when some metric of the
    current rank (from where it began) is significantly better (p <= alpha); mt-metrics-eval's ``AssignRanks``
    (data.py), as WMT ranks its metrics."""
    n = significance.shape[0]
    ranks, rank, start = [0] * n, 1, 0
    for i in range(n):
        if np.any(significance[start:i, i] <= alpha):
            rank += 1
            start = i
        ranks[i] = rank
    return ranks


def clusters(values: dict[Hashable, float], p_better: Callable[[Hashable, Hashable], float],
             alpha: float = ALPHA, key: Callable[[Hashable], object] = str) -> list[list[Hashable]]:
    """The significance clusters of metrics with a value: sorted by decreasing value (then by `key`),
    ``p_better(a, b)`` the p-value that a agrees better than b; a list of rank groups, best first."""
    named = sorted((m for m, v in values.items() if not math.isnan(v)), key=lambda m: (-values[m], key(m)))
    sig = np.ones((len(named), len(named)))
    for i in range(len(named)):
        for j in range(i + 1, len(named)):
            sig[i, j] = p_better(named[i], named[j])
    ranks = assign_ranks(sig, alpha)
    out: list[list[Hashable]] = []
    for metric, rank in zip(named, ranks, strict=True):
        if len(out) < rank:
            out.append([])
        out[-1].append(metric)
    return out
