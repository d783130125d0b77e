"""Agreement of metric scores with human judgments: correlations at three levels, bootstrap intervals that every
metric shares, pairwise accuracy, paired differences and the Williams test. Pure numpy and scipy; the statistics
of ``movers.correlate`` (:mod:`movers.api.agreement`).

- ``segment``: every judged output is a unit (WMT's segment level).
- ``system``: each system's mean metric score against its mean human score, within each group (WMT's system
  level); pairwise accuracy counts the system pairs that the metric orders as the humans do (Kocmi et al. 2021).
- ``summary``: for each input (document, source item), the correlation across the systems' outputs for it,
  averaged over inputs (the summary level of REALSumm, Bhandari et al. 2020, and SummEval, Fabbri et al. 2021).

Pearson, Spearman and Kendall's tau-b follow scipy.stats' definitions. With groups (language pairs), each group
is correlated and resampled on its own and the values are averaged, as WMT averages over language pairs. The 95%
percentile bootstrap resamples segments (segment level) or inputs with all their outputs (system and summary
levels) within each group. The resamples depend only on the layout (groups, systems, inputs) and the seed, never
on the scores or on which records have a human score, so two metrics scored on the same records get the same
resamples and subtracting their distributions gives a paired interval.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LEVELS", "STATISTICS", "ACCURACY", "RESAMPLES", "SEED", "CONFIDENCE", "MIN_POINTS", "Layout",
           "GroupResult", "LevelResult", "level_correlations", "rowwise", "pairwise_accuracy", "interval",
           "williams_test", "paired_difference", "williams_by_group", "statistics_of"]

LEVELS = ("segment", "system", "summary")
"""The levels; the first is the default."""
STATISTICS = ("pearson", "spearman", "kendall")
"""The correlations every level reports."""
ACCURACY = "pairwise_accuracy"
"""The system level's fourth statistic: the share of system pairs ordered as the human scores order them."""
RESAMPLES = 1000
"""Bootstrap resamples of an interval (and of a paired difference)."""
SEED = 0
"""The bootstrap's numpy seed."""
CONFIDENCE = 0.95
"""The intervals' coverage: the 2.5th and 97.5th percentiles of the resampled values."""
MIN_POINTS = 3
"""The fewest units a correlation is computed on (segments, systems, or an input's outputs): two points
always correlate perfectly."""


def statistics_of(level: str) -> tuple[str, ...]:
    """The statistics reported at `level`: the three correlations, and at the system level pairwise accuracy."""
    return (*STATISTICS, ACCURACY) if level == "system" else STATISTICS


@dataclass(frozen=True)
class Layout:
    """Where each record sits: its group, and at the system and summary levels its system and input."""

    level: str = LEVELS[0]
    groups: Sequence[str] | None = None   # None: one group
    systems: Sequence[str] | None = None  # needed by the system level
    inputs: Sequence[str] | None = None   # needed by the system and summary levels (the resampled unit)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"correlate: unknown level {self.level!r}; choose one of {list(LEVELS)}.")
        if self.level == "system" and self.systems is None:
            raise ValueError("correlate: the system level needs each record's system.")
        if self.level in ("system", "summary") and self.inputs is None:
            raise ValueError(f"correlate: the {self.level} level needs each record's input (document, source item).")


@dataclass(frozen=True)
class GroupResult:
    """One group's statistics: point values (NaN where undefined), bootstrap distributions ``[resamples]``, the
    units correlated and resampled, and the units' values."""

    point: dict[str, float]
    boot: dict[str, np.ndarray]
    units: int        # correlated units: segments, systems, or inputs with a defined correlation
    resampled: int    # resampled units: segments or inputs
    undefined: int    # summary level: inputs without a defined correlation (constant scores)
    values: tuple[np.ndarray, np.ndarray]
    """(metric, human) of the correlated units: segments or system means; at the summary level each input's
    Pearson r and its number of outputs."""


@dataclass(frozen=True)
class LevelResult:
    """One metric's agreement with one human score at one level: per group, and averaged over groups."""

    level: str
    point: dict[str, float]            # statistic -> value averaged over the groups where it is defined
    boot: dict[str, np.ndarray]        # statistic -> [resamples], averaged over groups resample by resample
    groups: dict[str, GroupResult]
    skipped: int                       # records without a human score

    def interval(self, statistic: str) -> tuple[float, float, float]:
        """(value, low, high): the value and the percentile interval of its bootstrap distribution."""
        return (self.point[statistic], *interval(self.boot[statistic]))


def interval(distribution: np.ndarray) -> tuple[float, float]:
    """The :data:`CONFIDENCE` percentile interval of a bootstrap distribution, NaN resamples left out (NaN, NaN
    when all are NaN)."""
    values = np.asarray(distribution, float)
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = (100 - 100 * CONFIDENCE) / 2  # 2.5 exactly (100 * (1 - 0.95) / 2 is 2.5000000000000022)
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def rowwise(x: np.ndarray, y: np.ndarray, statistic: str) -> np.ndarray:
    """The statistic of each row pair of ``[B, n]`` arrays; NaN cells are left out of their row, and a row with
    fewer than two cells or a constant side gives NaN. Pearson and Spearman are computed in closed form (scipy's
    definitions: Spearman is Pearson on average ranks), Kendall by scipy (tau-b)."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    if statistic == ACCURACY:
        return pairwise_accuracy(x, y)
    holes = np.isnan(x) | np.isnan(y)
    if holes.any():
        return np.array([rowwise(a[~m], b[~m], statistic)[0] if (~m).sum() else np.nan
                         for a, b, m in zip(x, y, holes, strict=True)])
    if statistic == "kendall":
        return np.array([_kendall(a, b) for a, b in zip(x, y, strict=True)])
    if statistic == "spearman":
        from scipy import stats  # here: `movers correlate --help` reads this module's constants

        x, y = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    elif statistic != "pearson":
        raise ValueError(f"correlate: unknown statistic {statistic!r}; choose from {[*STATISTICS, ACCURACY]}.")
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(-1) / np.sqrt((xc ** 2).sum(-1) * (yc ** 2).sum(-1))


def _kendall(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b; NaN (no warning) when a side is constant."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(a, b)[0])


def pairwise_accuracy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of ``[B, n]`` arrays: the share of the pairs (i < j) of cells with ``sign(x_i - x_j) == sign(y_i -
    y_j)`` (a tie agrees only with a tie), pairs with a NaN cell left out; NaN for a row without a pair."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    i, j = np.triu_indices(x.shape[-1], 1)
    dx, dy = x[:, i] - x[:, j], y[:, i] - y[:, j]
    valid = ~(np.isnan(dx) | np.isnan(dy))
    agree = (np.sign(dx) == np.sign(dy)) & valid
    with np.errstate(invalid="ignore", divide="ignore"):
        return agree.sum(-1) / valid.sum(-1)


def _input_counts(rng: np.random.Generator, n_inputs: int, n_boot: int) -> np.ndarray:
    """[n_boot, n_inputs]: how often each input is drawn in each resample of the inputs with replacement."""
    draws = rng.integers(0, n_inputs, size=(n_boot, n_inputs))
    counts = np.zeros((n_boot, n_inputs))
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1.0)
    return counts


def _segment(m: np.ndarray, h: np.ndarray, statistics: Sequence[str], n_boot: int,
             rng: np.random.Generator) -> GroupResult:
    sample = rng.integers(0, len(m), size=(n_boot, len(m)))  # every record of the group; unrated ones drop out
    point = {s: float(rowwise(m, h, s)[0]) for s in statistics}
    boot = {s: rowwise(m[sample], h[sample], s) for s in statistics}
    rated = ~np.isnan(h)
    return GroupResult(point, boot, int(rated.sum()), len(m), 0, (m[rated], h[rated]))


def _system(m: np.ndarray, h: np.ndarray, systems: np.ndarray, inputs: np.ndarray, statistics: Sequence[str],
            n_boot: int, rng: np.random.Generator) -> GroupResult:
    rated = ~np.isnan(h)
    _, s_idx = np.unique(systems, return_inverse=True)
    _, j_idx = np.unique(inputs, return_inverse=True)
    shape = (int(j_idx.max()) + 1, int(s_idx.max()) + 1)  # [inputs, systems]
    sum_m, sum_h, count = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    np.add.at(sum_m, (j_idx[rated], s_idx[rated]), m[rated])  # an unrated record leaves both means
    np.add.at(sum_h, (j_idx[rated], s_idx[rated]), h[rated])
    np.add.at(count, (j_idx[rated], s_idx[rated]), 1.0)

    def means(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # weights [B, inputs] -> [B, systems] twice
        with np.errstate(invalid="ignore", divide="ignore"):
            n = weights @ count
            return (weights @ sum_m) / n, (weights @ sum_h) / n

    pm, ph = means(np.ones((1, shape[0])))
    bm, bh = means(_input_counts(rng, shape[0], n_boot))
    point = {s: float(rowwise(pm, ph, s)[0]) for s in statistics}
    boot = {s: rowwise(bm, bh, s) for s in statistics}
    kept = ~np.isnan(pm[0])
    return GroupResult(point, boot, int(kept.sum()), shape[0], 0, (pm[0][kept], ph[0][kept]))


def _summary(m: np.ndarray, h: np.ndarray, inputs: np.ndarray, statistics: Sequence[str], n_boot: int,
             rng: np.random.Generator) -> GroupResult:
    _, j_idx = np.unique(inputs, return_inverse=True)
    n_inputs = int(j_idx.max()) + 1
    per_input = {s: np.array([rowwise(m[j_idx == j], h[j_idx == j], s)[0] for j in range(n_inputs)])
                 for s in {*statistics, "pearson"}}
    counts = _input_counts(rng, n_inputs, n_boot)
    point, boot = {}, {}
    for s in statistics:
        r = per_input[s]
        ok = ~np.isnan(r)
        point[s] = float(r[ok].mean()) if ok.any() else float("nan")
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[s] = (counts @ np.where(ok, r, 0.0)) / (counts @ ok)
    undefined = int(np.isnan(per_input["pearson"]).sum())
    sizes = np.bincount(j_idx, weights=(~np.isnan(h)).astype(float), minlength=n_inputs)
    return GroupResult(point, boot, n_inputs - undefined, n_inputs, undefined, (per_input["pearson"], sizes))


def level_correlations(metric: Sequence[float] | np.ndarray, human: Sequence[float] | np.ndarray,
                       layout: Layout | None = None, *, n_boot: int = RESAMPLES, seed: int = SEED,
                       statistics: Sequence[str] | None = None) -> LevelResult:
    """The statistics of `metric` against `human` at ``layout.level``, per group and averaged, with bootstrap
    distributions.

    Records whose human score is NaN are left out of every statistic and counted (``skipped``); they stay in the
    layout, so the resamples do not depend on them. A group's statistic that is undefined (a constant side) is NaN
    and left out of the average; at the summary level an input without a defined correlation is left out of its
    group's average and counted in ``undefined``.

    Args:
        metric, human: One value per record.
        layout: Groups, systems and inputs (default: the segment level, one group).
        n_boot: Bootstrap resamples.
        seed: numpy ``default_rng`` seed; the groups draw from one generator in sorted order.
        statistics: Which to compute (default: :func:`statistics_of` the level).
    """
    layout = layout or Layout()
    statistics = tuple(statistics or statistics_of(layout.level))
    m, h = np.asarray(metric, float), np.asarray(human, float)
    if m.shape != h.shape or m.ndim != 1:
        raise ValueError(f"correlate: `metric` and `human` must be 1-D of equal length, got {m.shape} and {h.shape}.")
    groups = np.asarray(layout.groups if layout.groups is not None else ["all"] * len(m)).astype(str)
    systems = np.asarray(layout.systems).astype(str) if layout.systems is not None else None
    inputs = np.asarray(layout.inputs).astype(str) if layout.inputs is not None else None
    rng = np.random.default_rng(seed)
    out: dict[str, GroupResult] = {}
    for name in sorted(set(groups.tolist())):
        idx = np.flatnonzero(groups == name)
        if layout.level == "segment":
            out[name] = _segment(m[idx], h[idx], statistics, n_boot, rng)
        elif layout.level == "system":
            assert systems is not None and inputs is not None  # Layout checked it
            out[name] = _system(m[idx], h[idx], systems[idx], inputs[idx], statistics, n_boot, rng)
        else:
            assert inputs is not None
            out[name] = _summary(m[idx], h[idx], inputs[idx], statistics, n_boot, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (every group undefined) stay NaN
        point = {s: float(np.nanmean([g.point[s] for g in out.values()])) for s in statistics}
        boot = {s: np.nanmean(np.stack([g.boot[s] for g in out.values()]), 0) for s in statistics}
    return LevelResult(layout.level, point, boot, out, int(np.isnan(h).sum()))


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
    from scipy import stats

    return t, float(stats.t.sf(t, n - 3))


def paired_difference(result: LevelResult, base: LevelResult) -> dict[str, tuple[float, float, float]]:
    """statistic -> (result - base, low, high): the interval of the per-resample differences.

    The two results must come from the same records, layout, resamples and seed (then their resamples are the
    same ones), as :func:`level_correlations` gives them for one human score.
    """
    same = {g: r.resampled for g, r in result.groups.items()} == {g: r.resampled for g, r in base.groups.items()}
    if result.level != base.level or not same or set(result.boot) != set(base.boot) or \
            len(next(iter(result.boot.values()))) != len(next(iter(base.boot.values()))):
        raise ValueError("correlate: a paired difference needs two results on the same records, level, statistics "
                         "and bootstrap resamples.")
    return {s: (result.point[s] - base.point[s], *interval(result.boot[s] - base.boot[s])) for s in result.boot}


def williams_by_group(result: LevelResult, base: LevelResult) -> dict[str, dict[str, float]]:
    """group -> {"t", "df", "p", "n", "r12", "r13", "r23"}: the Williams test of result's Pearson r > base's on the
    correlated units (segments, or system means). Empty at the summary level (an average of per-input
    correlations has no such test)."""
    if result.level == "summary":
        return {}
    out = {}
    for name, group in result.groups.items():
        (m, h), b = group.values, base.groups[name].values[0]
        r12, r13, r23 = (float(rowwise(x, y, "pearson")[0]) for x, y in ((m, h), (b, h), (m, b)))
        t, p = williams_test(r12, r13, r23, len(m))
        out[name] = {"t": t, "df": len(m) - 3, "p": p, "n": len(m), "r12": r12, "r13": r13, "r23": r23}
    return out
