"""Correlation with human judgments at three levels, with bootstrap resamples that metrics share.

- ``segment``: every judged output is a unit (WMT segment level; MoverScore's Tables 1 and 4).
- ``system``: the per-system mean metric score against the per-system mean human score (WMT system level).
- ``summary``: for each input (document, source item), the correlation across the systems' outputs for that
  input, averaged over inputs (the "summary-level" correlation of REALSumm, Bhandari et al. 2020, and
  SummEval, Fabbri et al. 2021).

95% percentile bootstrap intervals resample segments at the segment level and *inputs* (all outputs for an
input together) at the system and summary levels, within groups. The resamples depend only on the layout
(groups, inputs, which records have a human score) and the seed, never on the scores, so two metrics scored
on the same records get the same resamples: subtracting their distributions gives a paired interval.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = ["LEVELS", "STATISTICS", "Layout", "LevelResult", "level_correlations", "rowwise"]

LEVELS = ("segment", "system", "summary")
STATISTICS = ("pearson", "spearman", "kendall")


@dataclass(frozen=True)
class Layout:
    """Where each record sits: its group, and at the system and summary levels its system and input."""
    level: str = "segment"
    groups: Sequence[str] | None = None   # None: one group
    systems: Sequence[str] | None = None  # needed by the system level
    inputs: Sequence[str] | None = None   # needed by the system and summary levels (the resampled unit)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"correlation: unknown level {self.level!r}; choose one of {list(LEVELS)}.")
        if self.level == "system" and self.systems is None:
            raise ValueError("correlation: the system level needs each record's system.")
        if self.level in ("system", "summary") and self.inputs is None:
            raise ValueError(f"correlation: the {self.level} level needs each record's input (document, source item).")


@dataclass(frozen=True)
class LevelResult:
    """One metric's correlations with one human criterion at one level."""
    level: str
    point: dict[str, float]                       # statistic -> value (averaged over groups)
    boot: dict[str, np.ndarray]                   # statistic -> [n_boot] distribution (averaged over groups)
    per_group: dict[str, dict[str, float]]        # group -> statistic -> value
    units: dict[str, int]                         # group -> correlated units (segments, systems, inputs)
    resampled: dict[str, int]                     # group -> resampled units (segments or inputs)
    skipped: int                                  # records without a human score
    undefined: int = 0                            # summary level: inputs without a defined correlation
    points: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """group -> (metric, human) of the correlated units: segments, system means, or (summary level) the
    per-input Pearson r in both slots' first array and the input's number of outputs in the second."""

    def interval(self, statistic: str) -> tuple[float, float, float]:
        """(value, 2.5th, 97.5th percentile of the bootstrap distribution)."""
        dist = self.boot[statistic]
        return (self.point[statistic], float(np.nanpercentile(dist, 2.5)), float(np.nanpercentile(dist, 97.5)))


def rowwise(x: np.ndarray, y: np.ndarray, statistic: str) -> np.ndarray:
    """Pearson, Spearman or Kendall (tau-b) of each row pair of [B, n] arrays; NaN cells are left out of their row,
    and a row with fewer than two cells or a constant side gives NaN."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    holes = np.isnan(x) | np.isnan(y)
    if holes.any():
        return np.array([rowwise(a[~m], b[~m], statistic)[0] if (~m).sum() else np.nan
                         for a, b, m in zip(x, y, holes, strict=True)])
    if statistic == "kendall":
        return np.array([_kendall(a, b) for a, b in zip(x, y, strict=True)])
    if statistic == "spearman":
        x, y = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    elif statistic != "pearson":
        raise ValueError(f"correlation: unknown statistic {statistic!r}; choose one of {list(STATISTICS)}.")
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(-1) / np.sqrt((xc ** 2).sum(-1) * (yc ** 2).sum(-1))


def _kendall(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b; NaN (no warning) when a side is constant."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(a, b)[0])


def _input_counts(rng: np.random.Generator, n_inputs: int, n_boot: int) -> np.ndarray:
    """[n_boot, n_inputs]: how often each input is drawn in each resample of the inputs with replacement."""
    draws = rng.integers(0, n_inputs, size=(n_boot, n_inputs))
    counts = np.zeros((n_boot, n_inputs))
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1.0)
    return counts


def _segment(m: np.ndarray, h: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple:
    sample = rng.integers(0, len(m), size=(n_boot, len(m)))
    point = {s: float(rowwise(m, h, s)[0]) for s in STATISTICS}
    boot = {s: rowwise(m[sample], h[sample], s) for s in STATISTICS}
    return point, boot, len(m), len(m), 0, (m, h)


def _system(m: np.ndarray, h: np.ndarray, systems: np.ndarray, inputs: np.ndarray, n_boot: int,
            rng: np.random.Generator) -> tuple:
    _, s_idx = np.unique(systems, return_inverse=True)
    _, j_idx = np.unique(inputs, return_inverse=True)
    shape = (int(j_idx.max()) + 1, int(s_idx.max()) + 1)  # [inputs, systems]
    sum_m, sum_h, count = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    np.add.at(sum_m, (j_idx, s_idx), m)
    np.add.at(sum_h, (j_idx, s_idx), h)
    np.add.at(count, (j_idx, s_idx), 1.0)

    def means(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # weights [B, inputs] -> [B, systems] twice
        with np.errstate(invalid="ignore", divide="ignore"):
            n = weights @ count
            return (weights @ sum_m) / n, (weights @ sum_h) / n

    pm, ph = means(np.ones((1, shape[0])))
    bm, bh = means(_input_counts(rng, shape[0], n_boot))
    point = {s: float(rowwise(pm, ph, s)[0]) for s in STATISTICS}
    boot = {s: rowwise(bm, bh, s) for s in STATISTICS}
    return point, boot, shape[1], shape[0], 0, (pm[0], ph[0])


def _summary(m: np.ndarray, h: np.ndarray, inputs: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple:
    _, j_idx = np.unique(inputs, return_inverse=True)
    n_inputs = int(j_idx.max()) + 1
    per_input = {s: np.array([rowwise(m[j_idx == j], h[j_idx == j], s)[0] for j in range(n_inputs)])
                 for s in STATISTICS}
    counts = _input_counts(rng, n_inputs, n_boot)
    point, boot = {}, {}
    for s, r in per_input.items():
        ok = ~np.isnan(r)
        point[s] = float(r[ok].mean()) if ok.any() else float("nan")
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[s] = (counts @ np.where(ok, r, 0.0)) / (counts @ ok)
    undefined = int(np.isnan(per_input["pearson"]).sum())
    sizes = np.bincount(j_idx).astype(float)
    return point, boot, n_inputs - undefined, n_inputs, undefined, (per_input["pearson"], sizes)


def level_correlations(metric: Sequence[float], human: Sequence[float], layout: Layout | None = None, *,
                       n_boot: int = 1000, seed: int = 0) -> LevelResult:
    """Pearson, Spearman and Kendall of `metric` with `human` at ``layout.level``, with bootstrap distributions.

    Records whose human score is NaN (none given for this criterion) are skipped, and counted. With groups,
    each group is correlated (and resampled) on its own and the values are averaged, as WMT averages over
    language pairs. At the summary level an input whose correlation is undefined (one output, or constant
    scores) is left out of the average and counted in ``undefined``.
    """
    layout = layout or Layout()
    m, h = np.asarray(metric, float), np.asarray(human, float)
    if m.shape != h.shape or m.ndim != 1:
        raise ValueError(f"correlation: `metric` and `human` must be 1-D of equal length, got {m.shape} and {h.shape}.")
    n = len(m)
    groups = np.asarray(layout.groups if layout.groups is not None else ["all"] * n).astype(str)
    systems = np.asarray(layout.systems).astype(str) if layout.systems is not None else None
    inputs = np.asarray(layout.inputs).astype(str) if layout.inputs is not None else None
    keep = ~np.isnan(h)
    rng = np.random.default_rng(seed)
    points: dict[str, list[float]] = {s: [] for s in STATISTICS}
    boots: dict[str, list[np.ndarray]] = {s: [] for s in STATISTICS}
    per_group, units, resampled, unit_points = {}, {}, {}, {}
    undefined = 0
    for name in sorted(set(groups[keep])):
        idx = np.flatnonzero(keep & (groups == name))
        if layout.level == "segment":
            out = _segment(m[idx], h[idx], n_boot, rng)
        elif layout.level == "system":
            assert systems is not None and inputs is not None  # Layout checked it
            out = _system(m[idx], h[idx], systems[idx], inputs[idx], n_boot, rng)
        else:
            assert inputs is not None
            out = _summary(m[idx], h[idx], inputs[idx], n_boot, rng)
        point, boot, units[name], resampled[name], lost, unit_points[name] = out
        undefined += lost
        per_group[name] = point
        for s in STATISTICS:
            points[s].append(point[s])
            boots[s].append(boot[s])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (e.g. a constant group) stay NaN
        point_all = {s: float(np.nanmean(points[s])) if points[s] else float("nan") for s in STATISTICS}
        boot_all = {s: np.nanmean(np.stack(boots[s]), 0) if boots[s] else np.full(n_boot, np.nan)
                    for s in STATISTICS}
    return LevelResult(layout.level, point_all, boot_all, per_group, units, resampled, int((~keep).sum()),
                       undefined, unit_points)
