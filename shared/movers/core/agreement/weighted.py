"""The statistics of many rows at once: each row a weighted set of units (a resample: a unit drawn k times has
weight k) cut into segments (inputs, systems, or one), computed per row and segment.

Arrays are ``[R, u]``: R rows (resamples, permutations; a ``[1, u]`` row is shared by all), u units sorted by
segment; a weight of 0 leaves a unit out. A statistic of a weighted row equals scipy's on the row's units
repeated by their weights. Pearson r is centred and scaled before any product (each segment of each row
divided by a power of two that brings its largest magnitude to [0.5, 1), exactly), so any finite scores give
the right value; ranks and pair comparisons use the values as they are.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .declarations import NEAR_CONSTANT

__all__ = ["Segments", "Moments", "moments", "pearson", "Ties", "ties", "Counts", "counts", "Pairs",
           "pair_counts", "acc_eq", "OK", "TOO_FEW", "CONSTANT", "NEAR"]

OK, TOO_FEW, CONSTANT, NEAR = 0, 1, 2, 3
"""Why a row's segment has no value: fewer than two units, all equal, nearly constant (scipy's criterion)."""


@dataclass(frozen=True)
class Segments:
    """Units sorted by segment: each unit's segment and where each segment starts (no segment is empty)."""

    of: np.ndarray       # [u] segment of each unit, non-decreasing 0..G-1
    starts: np.ndarray   # [G]

    @classmethod
    def of_codes(cls, codes: np.ndarray) -> Segments:
        codes = np.asarray(codes, dtype=np.int64)
        if len(codes) and np.any(np.diff(codes) < 0):
            raise ValueError("units must be sorted by segment")
        _, starts = np.unique(codes, return_index=True)
        dense = np.cumsum(np.r_[0, np.diff(codes) != 0]) if len(codes) else codes
        return cls(dense.astype(np.int64), starts.astype(np.int64))

    @classmethod
    def one(cls, u: int) -> Segments:
        return cls(np.zeros(u, dtype=np.int64), np.zeros(1 if u else 0, dtype=np.int64))

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def ends(self) -> np.ndarray:
        return np.r_[self.starts[1:], len(self.of)].astype(np.int64)


def _sum(a: np.ndarray, seg: Segments) -> np.ndarray:
    """[R, u] -> [R, G]: the sum of each segment."""
    return np.add.reduceat(a, seg.starts, axis=1)


def _rows(*arrays: np.ndarray) -> int:
    return max(a.shape[0] for a in arrays)


@dataclass(frozen=True)
class Moments:
    """A side's weighted moments per row and segment, on its values scaled per segment by 2^-exponent."""

    centred: np.ndarray  # [R, u] scaled value minus its segment's mean (0 where the weight is 0)
    total: np.ndarray    # [R, G] sum of the weights
    mean: np.ndarray     # [R, G] scaled mean
    norm: np.ndarray     # [R, G] sqrt(sum w (x - mean)^2), scaled
    code: np.ndarray     # [R, G] OK, TOO_FEW, CONSTANT or NEAR


def moments(x: np.ndarray, w: np.ndarray, seg: Segments) -> Moments:
    """Centre and scale: each segment of each row is multiplied by 2^-e (e the exponent of its largest magnitude,
    so that no sum of squares overflows or underflows), then centred on its weighted mean; the code says which
    segments have fewer than two units, all values equal, or ‖x − x̄‖ < ε^0.75·|x̄| (scipy's
    NearConstantInputWarning)."""
    x, w = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(w, float))
    present = w > 0
    r = _rows(x, w)
    xs = np.where(present, x, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.maximum.reduceat(np.abs(xs), seg.starts, axis=1)
    exponent = np.frexp(np.where(top > 0, top, 1.0))[1]
    xs = np.ldexp(np.broadcast_to(xs, (r, xs.shape[1])), -np.broadcast_to(exponent, (r, seg.count))[:, seg.of])
    total = _sum(np.broadcast_to(w, (r, w.shape[1])), seg)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = _sum(w * xs, seg) / total
        centred = np.where(present, xs - mean[:, seg.of], 0.0)
        norm = np.sqrt(_sum(w * centred * centred, seg))
    lo = np.minimum.reduceat(np.where(present, x, np.inf), seg.starts, axis=1)
    hi = np.maximum.reduceat(np.where(present, x, -np.inf), seg.starts, axis=1)
    units = _sum(np.broadcast_to(present, (r, w.shape[1])).astype(float), seg)
    code = np.full(total.shape, OK, dtype=np.int8)
    code[norm < NEAR_CONSTANT * np.abs(mean)] = NEAR
    code[lo == hi] = CONSTANT
    code[units < 2] = TOO_FEW
    return Moments(centred, total, mean, norm, code)


def pearson(mx: Moments, my: Moments, w: np.ndarray, seg: Segments) -> np.ndarray:
    """[R, G] weighted Pearson r from two sides' moments (NaN where a side has a code)."""
    w = np.atleast_2d(np.asarray(w, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = _sum(w * mx.centred * my.centred, seg) / mx.norm / my.norm
    r = np.clip(r, -1.0, 1.0)
    return np.where((mx.code == OK) & (my.code == OK), r, np.nan)


@dataclass(frozen=True)
class Ties:
    """A side's value groups per row: each unit's average rank within its segment (ties share the mean of their
    positions, as scipy.stats.rankdata), each unit's group index, and per segment the tied pairs
    Σ W_g (W_g − 1) / 2 and the number of distinct values."""

    rank: np.ndarray      # [R, u]
    group: np.ndarray     # [R, u] dense index of the unit's value group within its row
    tied: np.ndarray      # [R, G]
    distinct: np.ndarray  # [R, G]


def ties(v: np.ndarray, w: np.ndarray, seg: Segments) -> Ties:
    """The value groups of `v` under weights `w`, per row and segment (a value absent from a row, weight 0, adds
    nothing)."""
    v, w = np.atleast_2d(np.asarray(v, float)), np.atleast_2d(np.asarray(w, float))
    r, u = _rows(v, w), v.shape[1]
    if v.shape[0] == 1:
        order = np.broadcast_to(np.lexsort((v[0], seg.of)), (r, u))
    else:
        order = np.argsort(v, axis=1, kind="stable")
        order = np.take_along_axis(order, np.argsort(seg.of[order], axis=1, kind="stable"), axis=1)
    vs = np.take_along_axis(np.broadcast_to(v, (r, u)), order, axis=1)
    ws = np.take_along_axis(np.broadcast_to(w, (r, u)), order, axis=1)
    ss = seg.of[order]
    new = np.ones((r, u), dtype=bool)
    new[:, 1:] = (vs[:, 1:] != vs[:, :-1]) | (ss[:, 1:] != ss[:, :-1])
    last = np.ones((r, u), dtype=bool)
    last[:, :-1] = new[:, 1:]
    positions = np.arange(u)
    start = np.maximum.accumulate(np.where(new, positions, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, positions, u)[:, ::-1], axis=1)[:, ::-1]
    before = np.zeros((r, u + 1))
    np.cumsum(ws, axis=1, out=before[:, 1:])
    weight = np.take_along_axis(before, end + 1, axis=1) - np.take_along_axis(before, start, axis=1)
    below = np.take_along_axis(before, start, axis=1) - np.take_along_axis(before, seg.starts[ss], axis=1)
    rank_sorted = below + (weight + 1) / 2
    head = new & (weight > 0)
    tied = _sum(np.where(new, weight * (weight - 1) / 2, 0.0), seg)
    distinct = _sum(head.astype(float), seg)
    rank = np.empty((r, u))
    np.put_along_axis(rank, order, rank_sorted, axis=1)
    group = np.empty((r, u), dtype=np.int64)
    np.put_along_axis(group, order, np.cumsum(new, axis=1) - 1, axis=1)
    return Ties(rank, group, tied, distinct)


@dataclass(frozen=True)
class Counts:
    """Pair counts per row and segment of the multiset of units (a unit of weight k makes k(k−1)/2 pairs tied on
    both sides): concordant, discordant, tied in the metric only, in the human only, in both; the units N and
    the distinct values of each side (Kendall's tau-c)."""

    con: np.ndarray
    dis: np.ndarray
    tie_metric: np.ndarray
    tie_human: np.ndarray
    tie_both: np.ndarray
    n: np.ndarray
    distinct_metric: np.ndarray
    distinct_human: np.ndarray

    @property
    def pairs(self) -> np.ndarray:
        return self.n * (self.n - 1) / 2


class Pairs:
    """Every pair (i < j) of units within a segment, sorted by segment."""

    def __init__(self, seg: Segments) -> None:
        firsts, seconds, owners = [], [], []
        for g, (b, e) in enumerate(zip(seg.starts, seg.ends, strict=True)):
            i, j = np.triu_indices(int(e - b), 1)
            firsts.append(i + b)
            seconds.append(j + b)
            owners.append(np.full(len(i), g, dtype=np.int64))
        self.i = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
        self.j = np.concatenate(seconds) if seconds else np.zeros(0, dtype=np.int64)
        self.segment = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        bounds = np.searchsorted(self.segment, np.arange(seg.count + 1))
        self.bounds = bounds
        self.count = len(self.i)

    @staticmethod
    def number(seg: Segments) -> int:
        sizes = seg.ends - seg.starts
        return int((sizes * (sizes - 1) // 2).sum())

    def sum(self, a: np.ndarray) -> np.ndarray:
        """[R, P] -> [R, G]: the sum over each segment's pairs (0 for a segment without pairs)."""
        before = np.zeros((a.shape[0], a.shape[1] + 1))
        np.cumsum(a, axis=1, out=before[:, 1:])
        return before[:, self.bounds[1:]] - before[:, self.bounds[:-1]]


def _signs(v: np.ndarray, pairs: Pairs, epsilon: float = 0.0) -> np.ndarray:
    d = v[:, pairs.i] - v[:, pairs.j]
    s = np.sign(d)
    if epsilon > 0:
        s[np.abs(d) <= epsilon] = 0
    return s


def pair_counts(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments, pairs: Pairs,
                epsilon: float = 0.0) -> Counts:
    """:class:`Counts` by comparing every pair; metric differences of at most `epsilon` count as ties (Deutsch et
    al. 2023's tie threshold; mt-metrics-eval's ``|m_i − m_j| <= epsilon``)."""
    x, y, w = (np.atleast_2d(np.asarray(a, float)) for a in (x, y, w))
    sx, sy = _signs(x, pairs, epsilon), _signs(y, pairs)
    pw = w[:, pairs.i] * w[:, pairs.j]
    both = sx * sy
    self_tied = _sum(w * (w - 1) / 2, seg)
    con = pairs.sum(pw * (both > 0))
    dis = pairs.sum(pw * (both < 0))
    tie_metric = pairs.sum(pw * ((sx == 0) & (sy != 0)))
    tie_human = pairs.sum(pw * ((sx != 0) & (sy == 0)))
    tie_both = pairs.sum(pw * ((sx == 0) & (sy == 0))) + self_tied
    n = _sum(np.broadcast_to(w, (_rows(x, y, w), w.shape[1])), seg)
    return Counts(con, dis, tie_metric, tie_human, tie_both, n, ties(x, w, seg).distinct, ties(y, w, seg).distinct)


def counts(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments) -> Counts:
    """:class:`Counts` without a tie threshold for segments too large to compare pair by pair: the ties from the
    value groups, concordant minus discordant from scipy's Kendall tau-b of each row's units repeated by their
    weights (O(n log n); exact in integers, as scipy's count is, up to about 10^7 units)."""
    x, y, w = (np.atleast_2d(np.asarray(a, float)) for a in (x, y, w))
    r = _rows(x, y, w)
    tx, ty = ties(x, w, seg), ties(y, w, seg)
    joint = np.broadcast_to(tx.group, (r, x.shape[1])) * (x.shape[1] + 1.0) + ty.group
    txy = ties(joint, w, seg).tied
    n = _sum(np.broadcast_to(w, (r, w.shape[1])), seg)
    total = n * (n - 1) / 2
    diff = np.zeros_like(total)
    xb, yb, wb = (np.broadcast_to(a, (r, x.shape[1])) for a in (x, y, w))
    for row in range(r):
        for g, (b, e) in enumerate(zip(seg.starts, seg.ends, strict=True)):
            if tx.tied[row, g] == total[row, g] or ty.tied[row, g] == total[row, g]:
                continue  # every pair tied on one side: as many concordant as discordant pairs (none)
            k = wb[row, b:e].astype(np.int64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tau = stats.kendalltau(np.repeat(xb[row, b:e], k), np.repeat(yb[row, b:e], k))[0]
            diff[row, g] = np.rint(tau * np.sqrt(total[row, g] - tx.tied[row, g]) *
                                   np.sqrt(total[row, g] - ty.tied[row, g]))
    same = total - tx.tied - ty.tied + txy  # concordant + discordant
    con, dis = (same + diff) / 2, (same - diff) / 2
    return Counts(con, dis, tx.tied - txy, ty.tied - txy, txy, n, tx.distinct, ty.distinct)


def acc_eq(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments, pairs: Pairs,
           weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """([R] value, [R] threshold): acc23 with the metric tie threshold that maximises it, the threshold searched
    over 0 and every pair's |x_i − x_j| (Deutsch et al. 2023's tie calibration; mt-metrics-eval
    ``tau_optimization``), one threshold for all segments, whose acc23 are averaged with `weights` ([R, G],
    default 1; segments without a pair left out). Of equal maxima the smallest threshold wins."""
    x, y, w = (np.atleast_2d(np.asarray(a, float)) for a in (x, y, w))
    r, p = _rows(x, y, w), pairs.count
    n = _sum(np.broadcast_to(w, (r, w.shape[1])), seg)
    total = n * (n - 1) / 2
    share = np.ones_like(total) if weights is None else np.broadcast_to(weights, total.shape).astype(float)
    share = np.where(total > 0, share, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = share / np.where(total > 0, total, 1.0) / share.sum(1, keepdims=True)
    d = x[:, pairs.i] - x[:, pairs.j]  # [1 or R, P]
    sy = _signs(y, pairs)
    pw = w[:, pairs.i] * w[:, pairs.j]
    agree = np.sign(d) == sy
    start = ((pairs.sum(np.broadcast_to(pw * agree, (r, p))) + _sum(w * (w - 1) / 2, seg)) * scale).sum(1)
    delta = np.broadcast_to(pw * ((sy == 0).astype(float) - agree) * scale[:, pairs.segment], (r, p))
    gap = np.abs(d)
    if gap.shape[0] == 1:  # the same order of gaps in every row
        order = np.argsort(gap[0], kind="stable")
        gaps = np.broadcast_to(gap[0, order], (r, p))
        path = np.cumsum(delta[:, order], axis=1)
    else:
        order2 = np.argsort(gap, axis=1, kind="stable")
        gaps = np.take_along_axis(gap, order2, axis=1)
        path = np.cumsum(np.take_along_axis(delta, order2, axis=1), axis=1)
    path += start[:, None]
    end = np.ones((r, p), dtype=bool)
    end[:, :-1] = gaps[:, 1:] != gaps[:, :-1]
    path = np.where(end, path, -np.inf)  # a threshold ties every pair whose gap is at most it
    value = np.full(r, np.nan)
    threshold = np.full(r, np.nan)
    for row in range(r):
        if not np.isfinite(start[row]):
            continue
        best = max(start[row], path[row].max()) if p else start[row]
        slack = 1e-12 * max(1.0, abs(best))
        if start[row] >= best - slack:
            value[row], threshold[row] = start[row], 0.0
        else:
            k = int(np.argmax(path[row] >= best - slack))
            value[row], threshold[row] = path[row, k], gaps[row, k]
    return value, threshold
