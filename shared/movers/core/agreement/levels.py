"""The statistics of one metric against the human scores at a level, per group and averaged, with bootstrap
distributions drawn a block of resamples at a time (memory flat in the number of resamples).

A resample is a weight per record: how often its segment, its input, its system (or its input and its
system) was drawn. Every statistic is computed on the weighted units of the level (segments, or system means),
so no resample is ever copied out; the draws are numpy's ``default_rng(seed)``, group after group in label
order, each group's resamples in order, a block at a time: the same draws whatever the block size.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .declarations import (
    ACCURACY,
    CHUNK_CELLS,
    CONFIDENCE,
    LEVELS,
    MAX_PAIRS,
    MAX_RESAMPLES,
    RESAMPLES,
    SEED,
    Protocol,
    protocol,
)
from .labels import factorize
from .spa import Signs, spa
from .units import PAIR_ROUTE_SEGMENT, Evaluation, pooled_value, unit_statistics, why
from .weighted import (
    NEAR,
    OK,
    Segments,
    moments,
)

__all__ = ["Layout", "GroupResult", "LevelResult", "level_correlations", "interval", "rowwise", "pairwise_accuracy",
           "check_size", "Progress", "GroupStatistics", "scaled", "label_codes"]

Progress = Callable[[int], None]
"""Told how many resamples a block finished (a progress bar's ``update``)."""



@dataclass(frozen=True)
class Layout:
    """Where each record sits: its group, and where the level needs them its system and input. A label is any
    hashable value (a text, a number, a tuple of several fields): labels are compared as themselves."""

    level: str = LEVELS[0]
    groups: Sequence[Hashable] | None = None   # None: one group
    systems: Sequence[Hashable] | None = None  # needed by the system level
    inputs: Sequence[Hashable] | None = None   # needed by the system and summary levels (the resampled unit)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"correlate: unknown level {self.level!r}; choose one of {list(LEVELS)}.")
        if self.level == "system" and self.systems is None:
            raise ValueError("correlate: the system level needs each record's system.")
        if self.level in ("system", "summary") and self.inputs is None:
            raise ValueError(f"correlate: the {self.level} level needs each record's input (document, source item).")


@dataclass(frozen=True)
class GroupResult:
    """One group's statistics: point values (NaN where undefined, with the reason), bootstrap distributions
    ``[resamples]``, the units correlated and resampled, and the units' values."""

    point: dict[str, float]
    boot: dict[str, np.ndarray]
    units: int        # correlated units: segments, systems, or inputs (systems) with a defined correlation
    resampled: int    # resampled units: segments, inputs, systems, or systems x inputs
    undefined: int    # per input (system): units without a defined correlation
    values: tuple[np.ndarray, np.ndarray]
    """(metric, human) of the correlated units: segments or system means; averaged per input (per system), each
    unit's Pearson r and its number of outputs."""
    reasons: dict[str, str] = field(default_factory=dict)
    """statistic -> why it has no value here (only for NaN point values)."""
    threshold: float = math.nan
    """acc_eq's calibrated tie threshold, in the metric's units."""


@dataclass(frozen=True)
class LevelResult:
    """One metric's agreement with one human score at one level: per group, and averaged (or pooled) over
    groups."""

    level: str
    point: dict[str, float]            # statistic -> value averaged over the groups where it is defined
    boot: dict[str, np.ndarray]        # statistic -> [resamples], averaged over groups resample by resample
    groups: dict[Hashable, GroupResult]
    skipped: int                       # records without a human score
    reasons: dict[str, str] = field(default_factory=dict)
    protocol: Protocol | None = None

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


# ---------------------------------------------------------------------------------------------- one group

def scaled(v: np.ndarray) -> tuple[np.ndarray, int]:
    """v times 2^-e, e the exponent of its largest finite magnitude (exact): sums of it cannot overflow."""
    finite = v[np.isfinite(v)]
    top = float(np.abs(finite).max()) if len(finite) else 0.0
    e = int(np.frexp(top)[1]) if top > 0 else 0
    return np.ldexp(v, -e), e


def _counts_per_row(draws: np.ndarray, size: int) -> np.ndarray:
    """[k, draws] indices -> [k, size] how often each index was drawn."""
    k = draws.shape[0]
    flat = (draws + (np.arange(k) * size)[:, None]).ravel()
    return np.bincount(flat, minlength=k * size).reshape(k, size).astype(float)


class GroupStatistics:
    """One group's records, their units at the protocol's level, and the statistics of any resample."""

    def __init__(self, m: np.ndarray, h: np.ndarray, systems: np.ndarray | None, inputs: np.ndarray | None,
                 proto: Protocol) -> None:
        self.proto = proto
        self.m, self.h = m, h
        self.rated = ~np.isnan(h)
        self.n = len(m)
        self.s = np.unique(systems, return_inverse=True)[1] if systems is not None else None
        self.a = np.unique(inputs, return_inverse=True)[1] if inputs is not None else None
        self.n_systems = int(self.s.max()) + 1 if self.s is not None and self.n else 0
        self.n_inputs = int(self.a.max()) + 1 if self.a is not None and self.n else 0
        idx = np.flatnonzero(self.rated)
        if proto.level == "system":
            assert self.s is not None and self.a is not None
            self.ms, self.m_exp = scaled(m)
            self.hs, _ = scaled(h)
            shape = (self.n_inputs, self.n_systems)
            self.cells = [np.zeros(shape) for _ in range(3)]  # metric sums, human sums, counts per input x system
            np.add.at(self.cells[0], (self.a[idx], self.s[idx]), self.ms[idx])
            np.add.at(self.cells[1], (self.a[idx], self.s[idx]), self.hs[idx])
            np.add.at(self.cells[2], (self.a[idx], self.s[idx]), 1.0)
            self.by_system = idx[np.argsort(self.s[idx], kind="stable")]
            self.system_seg = Segments.of_codes(self.s[self.by_system])
            present = np.unique(self.s[idx])
            self.present = present
            self.seg = Segments.one(len(present))
            self.unit_idx = idx
        else:
            self.m_exp = 0
            if proto.average == "item":
                assert self.a is not None
                idx = idx[np.argsort(self.a[idx], kind="stable")]
                self.seg = Segments.of_codes(self.a[idx])
                self.seg_of = self.a[idx][self.seg.starts]
            elif proto.average == "sys":
                assert self.s is not None
                idx = idx[np.argsort(self.s[idx], kind="stable")]
                self.seg = Segments.of_codes(self.s[idx])
                self.seg_of = self.s[idx][self.seg.starts]
            else:
                self.seg = Segments.one(len(idx))
            self.unit_idx = idx
        self.sign: Signs | None = None
        self.cache: dict[str, object] = {}  # sorted structures of this group's fixed values

    @property
    def resampled(self) -> int:
        """The units one resample draws."""
        return {"segments": self.n, "inputs": self.n_inputs, "systems": self.n_systems,
                "both": self.n_systems * self.n_inputs}[self.proto.resample]

    @property
    def width(self) -> int:
        """The widest row a resample is evaluated on: records, units, or pairs where they are compared one by
        one."""
        sizes = self.seg.ends - self.seg.starts
        pairs = int((sizes * (sizes - 1) // 2).sum())
        by_pair = "acc_eq" in self.proto.statistics or self.proto.epsilon > 0 or (
            len(sizes) and sizes.mean() <= PAIR_ROUTE_SEGMENT)
        return max(self.n, pairs if by_pair else 0, 1)

    def draws(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray | None, np.ndarray | None,
                                                              np.ndarray | None]:
        """(per input, per system, per record) multiplicities [k, ...] of the next `k` resamples."""
        kind = self.proto.resample
        if kind == "segments":
            return None, None, _counts_per_row(rng.integers(0, self.n, size=(k, self.n)), self.n)
        if kind == "inputs":
            return _counts_per_row(rng.integers(0, self.n_inputs, size=(k, self.n_inputs)), self.n_inputs), None, None
        if kind == "systems":
            return None, _counts_per_row(rng.integers(0, self.n_systems, size=(k, self.n_systems)),
                                         self.n_systems), None
        ra, rs = np.zeros((k, self.n_inputs)), np.zeros((k, self.n_systems))
        for row in range(k):  # a resample's systems, then its inputs (BOOT-BOTH: the rows, then the columns)
            rs[row] = np.bincount(rng.integers(0, self.n_systems, size=self.n_systems), minlength=self.n_systems)
            ra[row] = np.bincount(rng.integers(0, self.n_inputs, size=self.n_inputs), minlength=self.n_inputs)
        return ra, rs, None

    def evaluate(self, ra: np.ndarray | None, rs: np.ndarray | None, rr: np.ndarray | None,
                 point: bool = False, metric_rows: np.ndarray | None = None) -> Evaluation:
        """The statistics of each row: a resample (input, system or record multiplicities), or one row of metric
        scores per row of `metric_rows` ([R, records], a permutation test's exchanged scores)."""
        proto = self.proto
        if proto.level == "system":
            x, y, w = self._means(ra, rr, metric_rows)
            if rs is not None:
                w = w * rs[:, self.present]
            out = unit_statistics(proto, x, y, w, self.seg, None, self.m_exp, point)
            if "spa" in proto.statistics:
                self._spa(out, ra, rs, point, metric_rows)
            return out
        idx = self.unit_idx
        unit_w: np.ndarray = np.ones((1, len(idx)))
        seg_w = None
        if ra is not None:
            assert self.a is not None
            if proto.average == "item":
                seg_w = ra[:, self.seg_of]
            else:
                unit_w = unit_w * ra[:, self.a[idx]]
        if rs is not None:
            assert self.s is not None
            if proto.average == "sys":
                seg_w = rs[:, self.seg_of]
            else:
                unit_w = unit_w * rs[:, self.s[idx]]
        if rr is not None:
            unit_w = unit_w * rr[:, idx]
        if metric_rows is None:
            return unit_statistics(proto, self.m[idx][None], self.h[idx][None], unit_w, self.seg, seg_w, 0, point,
                                    self.cache)
        return unit_statistics(proto, metric_rows[:, idx], self.h[idx][None], unit_w, self.seg, seg_w, 0, point)

    def _means(self, ra: np.ndarray | None, rr: np.ndarray | None,
               metric_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each present system's mean metric and human score (scaled; per row of input or record weights, or of
        metric scores) and whether it is in the row (its weight)."""
        if rr is None and metric_rows is None:
            weights = np.ones((1, self.n_inputs)) if ra is None else ra
            n = (weights @ self.cells[2])[:, self.present]
            sm, sh = (weights @ self.cells[0])[:, self.present], (weights @ self.cells[1])[:, self.present]
        else:
            order, starts = self.by_system, self.system_seg.starts
            wr = np.ones((1, len(order))) if rr is None else rr[:, order]
            values = self.ms[order][None] if metric_rows is None else scaled(metric_rows)[0][:, order]
            n = np.add.reduceat(wr, starts, axis=1)
            sm = np.add.reduceat(wr * values, starts, axis=1)
            sh = np.add.reduceat(wr * self.hs[order], starts, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            x, y = np.clip(sm / n, -1.0, 1.0), np.clip(sh / n, -1.0, 1.0)
        return np.where(n > 0, x, 0.0), np.where(n > 0, y, 0.0), (n > 0).astype(float)

    def _spa(self, out: Evaluation, ra: np.ndarray | None, rs: np.ndarray | None, point: bool,
             metric_rows: np.ndarray | None = None) -> None:
        """Soft pairwise accuracy of each row (the group's cells: each system's mean score per input)."""
        assert self.sign is not None
        hc = self._cells(self.hs)
        mc = self._cells(self.ms) if metric_rows is None else None
        rows = max([1, *(a.shape[0] for a in (ra, rs, metric_rows) if a is not None)])
        errors, pairs = np.zeros(rows), np.zeros(rows)
        for row in range(rows):
            cols = np.arange(self.n_inputs) if ra is None else np.repeat(np.arange(self.n_inputs),
                                                                         ra[row].astype(np.int64))
            chosen = None if rs is None else np.repeat(np.arange(self.n_systems), rs[row].astype(np.int64))
            cells = mc if mc is not None else self._cells(scaled(metric_rows[row])[0])  # type: ignore[index]
            errors[row], pairs[row] = spa(hc[:, cols], cells[:, cols], self.sign, chosen)
        noisy = self._spa_noise()
        with np.errstate(invalid="ignore", divide="ignore"):
            out.values["spa"] = np.where(noisy or pairs == 0, np.nan, 1 - errors / pairs)
        if self.proto.average == "pooled":
            out.pooled["spa"] = (np.where(noisy, 0.0, errors), np.where(noisy, 0.0, pairs))
        if point and math.isnan(out.values["spa"][0]):
            out.reasons["spa"] = self._spa_why or "fewer than 2 systems"

    def _cells(self, values: np.ndarray) -> np.ndarray:
        """[systems, inputs]: each system's mean of `values` over its rated records of each input (NaN: none)."""
        idx = self.unit_idx
        assert self.a is not None and self.s is not None
        flat = self.s[idx] * self.n_inputs + self.a[idx]
        size = self.n_systems * self.n_inputs
        total = np.bincount(flat, weights=values[idx], minlength=size)
        n = np.bincount(flat, minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (total / n).reshape(self.n_systems, self.n_inputs)

    def _spa_noise(self) -> bool:
        if not hasattr(self, "_noise"):
            idx = self.unit_idx
            one = Segments.one(len(idx))
            cx, cy = (int(moments(v[idx][None], np.ones((1, len(idx))), one).code[0, 0]) for v in (self.m, self.h))
            self._noise = NEAR in (cx, cy)
            self._spa_why = why(cx if cx == NEAR else OK, cy if cy == NEAR else OK) if self._noise else ""
        return self._noise


# ---------------------------------------------------------------------------------------------- the level

def check_size(layout: Layout, proto: Protocol, n: int) -> None:
    """Refuse, before anything is scored, a call of `n` records whose pairs (acc_eq, a tie threshold,
    perm-pairs) exceed :data:`MAX_PAIRS` in a group."""
    if not ({"acc_eq"} & set(proto.statistics) or (proto.epsilon and {"tau_23", "acc23"} & set(proto.statistics))
            or "perm-pairs" in proto.tests):
        return
    codes, labels = factorize(list(layout.groups) if layout.groups is not None else [0] * n)
    for g, label in enumerate(labels):
        idx = np.flatnonzero(codes == g)
        systems = label_codes(layout.systems, idx)
        key = label_codes(layout.inputs if proto.average == "item" else layout.systems, idx)
        if proto.level == "system" and systems is not None:
            units = [len(np.unique(systems))]
        elif proto.average in ("item", "sys") and key is not None:
            units = np.bincount(key).tolist()
        else:
            units = [len(idx)]
        pairs = sum(u * (u - 1) // 2 for u in units)
        if pairs > MAX_PAIRS:
            where = "" if layout.groups is None else f" in group {label!r}"
            raise ValueError(f"correlate: acc_eq, a tie threshold and perm-pairs compare every pair of units: "
                             f"{pairs:,} pairs{where}, above the bound of {MAX_PAIRS:,}; average per input "
                             f"('item', WMT's protocol) or per system, or use fewer records.")


def _needed(layout: Layout, proto: Protocol) -> None:
    for need, labels in (("system", layout.systems), ("input", layout.inputs)):
        if need in proto.needs and labels is None:
            raise ValueError(f"correlate: this protocol (level {proto.level}, average {proto.average}, resample "
                             f"{proto.resample}, tests {list(proto.tests)}, statistics {list(proto.statistics)}) "
                             f"needs each record's {need}.")


def level_correlations(metric: Sequence[float] | np.ndarray, human: Sequence[float] | np.ndarray,
                       layout: Layout | None = None, *, n_boot: int = RESAMPLES, seed: int = SEED,
                       statistics: Sequence[str] | None = None, average: str | None = None,
                       resample: str | None = None, epsilon: float = 0.0,
                       progress: Progress | None = None) -> LevelResult:
    """The statistics of `metric` against `human` at ``layout.level``, per group and averaged, with bootstrap
    distributions.

    Records whose human score is NaN are left out of every statistic and counted (``skipped``); they stay in the
    layout, so the resamples do not depend on them. A group's statistic that is undefined (a constant or nearly
    constant side, too few units) is NaN with its reason and left out of the average; averaged per input (the
    summary level) an input without a defined correlation is left out of its group's average and counted in
    ``undefined``.

    Args:
        metric, human: One value per record (any finite floats; human NaN: no score).
        layout: Groups, systems and inputs (default: the segment level, one group).
        n_boot: Bootstrap resamples (at most :data:`~movers.core.agreement.MAX_RESAMPLES`).
        seed: numpy ``default_rng`` seed; the groups draw from one generator in label order.
        statistics, average, resample, epsilon: The protocol (:func:`~movers.core.agreement.protocol`); default
            the level's statistics, averaging and resampling.
        progress: Told the resamples of each block as it finishes.
    """
    layout = layout or Layout()
    proto = protocol(layout.level, statistics, average, resample, (), epsilon)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 1 <= n_boot <= MAX_RESAMPLES:
        raise ValueError(f"correlate: resamples must be an integer from 1 to {MAX_RESAMPLES:,}, got {n_boot!r}.")
    m, h = np.asarray(metric, float), np.asarray(human, float)
    if m.shape != h.shape or m.ndim != 1:
        raise ValueError(f"correlate: `metric` and `human` must be 1-D of equal length, got {m.shape} and {h.shape}.")
    if not np.isfinite(m).all() or np.isinf(h).any():
        raise ValueError("correlate: every metric score must be a finite number (a human score finite, or NaN for "
                         "none).")
    _needed(layout, proto)
    codes, labels = factorize(list(layout.groups) if layout.groups is not None else ["all"] * len(m))
    rng = np.random.default_rng(seed)
    out: dict[Hashable, GroupResult] = {}
    pooled_boot: dict[str, list[np.ndarray]] = {}
    pooled_point: dict[str, list[np.ndarray]] = {}
    for g, label in enumerate(labels):
        idx = np.flatnonzero(codes == g)
        systems, inputs = label_codes(layout.systems, idx), label_codes(layout.inputs, idx)
        group = GroupStatistics(m[idx], h[idx], systems, inputs, proto)
        if "spa" in proto.statistics:
            group.sign = Signs(group.n_inputs, np.random.SeedSequence(seed, spawn_key=(1, g)))
        first = group.evaluate(None, None, None, point=True)
        boot = {s: np.empty(n_boot) for s in proto.statistics}
        sums: dict[str, list[np.ndarray]] = {s: [] for s in first.pooled}
        step = max(1, CHUNK_CELLS // group.width)
        done = 0
        while done < n_boot:
            k = min(step, n_boot - done)
            ev = group.evaluate(*group.draws(rng, k))
            for s in proto.statistics:
                boot[s][done:done + k] = ev.values[s]
            for s, parts in ev.pooled.items():
                sums[s].append(np.stack(parts))
            done += k
            if progress is not None:
                progress(k)
        for s, chunks in sums.items():
            pooled_boot.setdefault(s, []).append(np.concatenate(chunks, axis=1))
            pooled_point.setdefault(s, []).append(np.stack(first.pooled[s]))
        out[label] = _result(group, first, boot)
    return _combine(proto, out, pooled_point, pooled_boot, int(np.isnan(h).sum()))


def label_codes(labels: Sequence[Hashable] | None, idx: np.ndarray) -> np.ndarray | None:
    """The codes of the labels of records `idx` (None without labels)."""
    return None if labels is None else factorize([labels[int(i)] for i in idx])[0]


def _result(group: GroupStatistics, first: Evaluation, boot: dict[str, np.ndarray]) -> GroupResult:
    proto = group.proto
    point = {s: float(first.values[s][0]) for s in proto.statistics}
    threshold = float(first.threshold[0]) if first.threshold is not None else math.nan
    reasons = dict(first.reasons)
    if "acc_eq" in point and not math.isnan(point["acc_eq"]) and not math.isfinite(threshold):
        reasons["acc_eq threshold"] = "beyond the float range (every pair tied)"
    idx = group.unit_idx
    if proto.level == "system":
        x, y, w = group._means(None, None)
        keep = w[0] > 0
        values = (np.ldexp(x[0][keep], group.m_exp), np.ldexp(y[0][keep], scaled(group.h)[1]))
        units, undefined = int(keep.sum()), 0
    elif proto.average in ("item", "sys"):
        assert first.per_unit is not None
        r = first.per_unit
        sizes = (group.seg.ends - group.seg.starts).astype(float)
        key = group.a if proto.average == "item" else group.s
        assert key is not None
        n_keys = group.n_inputs if proto.average == "item" else group.n_systems
        full_r, full_n = np.full(n_keys, np.nan), np.zeros(n_keys)
        full_r[group.seg_of], full_n[group.seg_of] = r, sizes
        values = (full_r, full_n)
        undefined = int(np.isnan(full_r).sum())
        units = n_keys - undefined
    else:
        values = (group.m[idx], group.h[idx])
        units, undefined = len(idx), 0
    return GroupResult(point, boot, units, group.resampled, undefined, values, reasons, threshold)


def _combine(proto: Protocol, out: dict[Hashable, GroupResult], pooled_point: dict[str, list[np.ndarray]],
             pooled_boot: dict[str, list[np.ndarray]], skipped: int) -> LevelResult:
    point: dict[str, float] = {}
    boot: dict[str, np.ndarray] = {}
    reasons: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (every group undefined) stay NaN
        for s in proto.statistics:
            if s in pooled_point:
                point[s] = float(pooled_value(s, np.sum(pooled_point[s], axis=0))[0])
                boot[s] = pooled_value(s, np.sum(pooled_boot[s], axis=0))
            else:
                point[s] = float(np.nanmean([g.point[s] for g in out.values()]))
                boot[s] = np.nanmean(np.stack([g.boot[s] for g in out.values()]), 0)
            if math.isnan(point[s]):
                whys = {g.reasons.get(s, "undefined") for g in out.values()}
                reasons[s] = whys.pop() if len(whys) == 1 else "undefined in every group"
    return LevelResult(proto.level, point, boot, out, skipped, reasons, proto)


# ---------------------------------------------------------------------------------------------- row helpers

def rowwise(x: np.ndarray, y: np.ndarray, statistic: str) -> np.ndarray:
    """The statistic (pearson, spearman, kendall, pairwise_accuracy) of each row pair of ``[B, n]`` arrays; NaN
    cells are left out of their row, and a row with fewer than two cells or a constant (or nearly constant) side
    gives NaN."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    if statistic not in ("pearson", "spearman", "kendall", ACCURACY):
        raise ValueError(f"correlate: unknown statistic {statistic!r}; choose from "
                         f"{['pearson', 'spearman', 'kendall', ACCURACY]}.")
    w = (~(np.isnan(x) | np.isnan(y))).astype(float)
    x, y = np.where(w > 0, x, 0.0), np.where(w > 0, y, 0.0)
    proto = protocol("segment", (statistic,))
    seg = Segments.one(x.shape[1])
    return unit_statistics(proto, x, y, w, seg, None, 0, False).values[statistic]


def pairwise_accuracy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of ``[B, n]`` arrays: the share of the pairs (i < j) of cells with ``sign(x_i - x_j) == sign(y_i -
    y_j)`` (a tie agrees only with a tie), pairs with a NaN cell left out; NaN for a row without a pair."""
    return rowwise(x, y, ACCURACY)
