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

from .declarations import NEAR_CONSTANT

__all__ = ["Segments", "Moments", "moments", "pearson", "Ties", "ties", "Sorted", "sorted_values", "Counts", "counts",
           "Pairs",
           "Discordance", "pair_counts", "acc_eq", "OK", "TOO_FEW", "CONSTANT", "NEAR"]

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
    if seg.count == 1:
        return a.sum(1, keepdims=True)
    return np.add.reduceat(a, seg.starts, axis=1)


def _spread(a: np.ndarray, seg: Segments) -> np.ndarray:
    """[R, G] -> [R, u] (or [R, 1] for one segment): each unit's segment value."""
    return a if seg.count == 1 else a[:, seg.of]


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


def moments(x: np.ndarray, w: np.ndarray, seg: Segments, exact: bool = True) -> Moments:
    """Centre and scale: each segment of each row is multiplied by 2^-e (e the exponent of its largest magnitude,
    so that no sum of squares overflows or underflows), then centred on its weighted mean; the code says which
    segments have fewer than two units, all values equal, or ‖x − x̄‖ < ε^0.75·|x̄| (scipy's
    NearConstantInputWarning). Without `exact` a row's segment that is constant or nearly so is coded NEAR
    (one test, for resamples of a correlation)."""
    x, w = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(w, float))
    present = w > 0
    r, u = _rows(x, w), x.shape[1]
    if x.shape[0] == 1:  # the same values in every row: scaled once, by the segment's largest magnitude
        top = np.maximum.reduceat(np.abs(x), seg.starts, axis=1) if u else np.zeros((1, 0))
        exponent = np.frexp(np.where(top > 0, top, 1.0))[1]
        xs = np.ldexp(x, -_spread(exponent, seg))
        weighted = w * xs
    else:
        xs = np.where(present, x, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            top = np.maximum.reduceat(np.abs(xs), seg.starts, axis=1)
        exponent = np.frexp(np.where(top > 0, top, 1.0))[1]
        xs = np.ldexp(xs, -_spread(exponent, seg))
        weighted = w * xs
    total = _sum(np.broadcast_to(w, (r, u)), seg)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = _sum(weighted, seg) / total
        centred = xs - _spread(mean, seg)
        norm = np.sqrt(_sum(w * centred * centred, seg))
    code = np.full(total.shape, OK, dtype=np.int8)
    if not exact:
        code[~(norm > NEAR_CONSTANT * np.abs(mean))] = NEAR
        return Moments(centred, total, mean, norm, code)
    lo = np.minimum.reduceat(np.where(present, x, np.inf), seg.starts, axis=1)
    hi = np.maximum.reduceat(np.where(present, x, -np.inf), seg.starts, axis=1)
    units = _sum(np.broadcast_to(present, (r, u)).astype(float), seg)
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


class Sorted:
    """The value groups of fixed values (the same in every row), sorted once: each row of weights then costs a
    few sums and gathers."""

    def __init__(self, v: np.ndarray, seg: Segments) -> None:
        u = len(v)
        self.order = np.lexsort((v, seg.of))
        vs, ss = v[self.order], seg.of[self.order]
        self.new = np.ones(u, dtype=bool)
        self.new[1:] = (vs[1:] != vs[:-1]) | (ss[1:] != ss[:-1])
        positions = np.arange(u)
        self.start = np.maximum.accumulate(np.where(self.new, positions, 0))
        last = np.r_[self.new[1:], True]
        self.end_next = np.minimum.accumulate(np.where(last, positions, u)[::-1])[::-1] + 1
        self.segment_start = seg.starts[ss]
        self.group = np.empty(u, dtype=np.int64)
        self.group[self.order] = np.cumsum(self.new) - 1
        self.seg = seg

    def __call__(self, w: np.ndarray) -> Ties:
        w = np.atleast_2d(np.asarray(w, float))
        r, u = w.shape[0], len(self.order)
        before = np.zeros((r, u + 1))
        np.cumsum(w[:, self.order], axis=1, out=before[:, 1:])
        at_start = before[:, self.start]
        weight = before[:, self.end_next] - at_start
        rank = np.empty((r, u))
        below = at_start if self.seg.count == 1 else at_start - before[:, self.segment_start]
        rank[:, self.order] = below + (weight + 1) / 2
        tied = _sum(np.where(self.new, weight * (weight - 1) / 2, 0.0), self.seg)
        distinct = _sum((self.new & (weight > 0)).astype(float), self.seg)
        return Ties(rank, np.broadcast_to(self.group, (r, u)), tied, distinct)


def ties(v: np.ndarray, w: np.ndarray, seg: Segments, structure: Sorted | None = None) -> Ties:
    """The value groups of `v` under weights `w`, per row and segment (a value absent from a row, weight 0, adds
    nothing); `structure`: the sorted groups of `v` when it is the same in every row."""
    v, w = np.atleast_2d(np.asarray(v, float)), np.atleast_2d(np.asarray(w, float))
    r, u = _rows(v, w), v.shape[1]
    if v.shape[0] == 1:
        return (structure or Sorted(v[0], seg))(np.broadcast_to(w, (r, u)))
    order2 = np.argsort(v, axis=1, kind="stable")
    order2 = np.take_along_axis(order2, np.argsort(seg.of[order2], axis=1, kind="stable"), axis=1)
    vs2 = np.take_along_axis(v, order2, axis=1)
    ws = np.take_along_axis(np.broadcast_to(w, (r, u)), order2, axis=1)
    ss2 = seg.of[order2]
    new2 = np.ones((r, u), dtype=bool)
    new2[:, 1:] = (vs2[:, 1:] != vs2[:, :-1]) | (ss2[:, 1:] != ss2[:, :-1])
    last2 = np.ones((r, u), dtype=bool)
    last2[:, :-1] = new2[:, 1:]
    positions2 = np.arange(u)
    start2 = np.maximum.accumulate(np.where(new2, positions2, 0), axis=1)
    end2 = np.minimum.accumulate(np.where(last2, positions2, u)[:, ::-1], axis=1)[:, ::-1]
    before2 = np.zeros((r, u + 1))
    np.cumsum(ws, axis=1, out=before2[:, 1:])
    weight2 = np.take_along_axis(before2, end2 + 1, axis=1) - np.take_along_axis(before2, start2, axis=1)
    below = np.take_along_axis(before2, start2, axis=1) - np.take_along_axis(before2, seg.starts[ss2], axis=1)
    rank2 = np.empty((r, u))
    np.put_along_axis(rank2, order2, below + (weight2 + 1) / 2, axis=1)
    group2 = np.empty((r, u), dtype=np.int64)
    np.put_along_axis(group2, order2, np.cumsum(new2, axis=1) - 1, axis=1)
    return Ties(rank2, group2, _sum(np.where(new2, weight2 * (weight2 - 1) / 2, 0.0), seg),
                _sum((new2 & (weight2 > 0)).astype(float), seg))


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
    with np.errstate(over="ignore"):  # a difference beyond the float range is inf: its sign stays right
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


def sorted_values(cache: dict[str, object], key: str, v: np.ndarray, seg: Segments) -> Sorted | None:
    """The cached :class:`Sorted` of fixed values `v` ([1, u]) under `key`, made on first use; None for values
    that vary by row."""
    if v.shape[0] != 1:
        return None
    if key not in cache:
        cache[key] = Sorted(v[0], seg)
    found = cache[key]
    assert isinstance(found, Sorted)
    return found


class Discordance:
    """The weighted discordant pairs of fixed values under any weights, by a bottom-up merge sort whose
    structure (which blocks merge, where each unit lands) depends only on the values and is built once: then a
    row of weights costs O(u log u) sums, no sort.

    Units are ordered by (segment, metric, human); a discordant pair is one whose later unit has a smaller human
    score (strictly), counted within segments only (the human key carries the segment).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, seg: Segments) -> None:
        u = len(x)
        self.order = np.lexsort((y, x, seg.of))
        ranks = np.unique(y, return_inverse=True)[1].astype(np.int64)
        key = seg.of[self.order] * (int(ranks.max(initial=0)) + 1) + ranks[self.order]
        self.u = u
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        positions = np.arange(u)
        perm = positions  # each block of the current size sorted by key (stable)
        size = 1
        kind = np.int32 if u < 2 ** 31 else np.int64
        while size < u:
            merged = np.lexsort((key, positions // (2 * size)))
            where_merged = np.empty(u, dtype=np.int64)
            where_merged[merged] = positions
            where_now = np.empty(u, dtype=np.int64)
            where_now[perm] = positions
            right = positions[(positions // size) % 2 == 1]  # units of a right block, in position order
            block = right // size
            inside_right = where_now[right] - block * size
            inside_merged = where_merged[right] - (block - 1) * size
            at_most = inside_merged - inside_right  # left units with key <= the unit's
            self.levels.append((perm.astype(kind), right.astype(kind), ((block - 1) * size + at_most).astype(kind),
                                (block * size).astype(kind)))
            perm = merged
            size *= 2
        self.segment_of_position = seg.of[self.order]
        self.bounds = [np.searchsorted(self.segment_of_position[r], np.arange(seg.count + 1))
                       for _, r, _, _ in self.levels]
        self.count = seg.count
        xs, ys, ss = x[self.order], y[self.order], self.segment_of_position
        new_x = np.r_[True, (xs[1:] != xs[:-1]) | (ss[1:] != ss[:-1])] if u else np.zeros(0, dtype=bool)
        new_xy = new_x | np.r_[True, ys[1:] != ys[:-1]] if u else new_x
        self.groups = [np.flatnonzero(new_x), np.flatnonzero(new_xy)]  # starts of the x and (x, y) groups
        self.group_segment = [ss[g] for g in self.groups]
        self.seg = seg

    def ties(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """([R, G] pairs tied in the metric, [R, G] pairs tied in both, [R, G] distinct metric values) of rows of
        weights already in this structure's order."""
        out = []
        for starts, segs in zip(self.groups, self.group_segment, strict=True):
            weight = np.add.reduceat(w, starts, axis=1)
            tied = weight * (weight - 1) / 2
            out.append(tied.sum(1, keepdims=True) if self.count == 1 else
                       np.stack([np.bincount(segs, t, minlength=self.count) for t in tied]))
            if len(out) == 1:
                present = (weight > 0).astype(float)
                distinct = present.sum(1, keepdims=True) if self.count == 1 else \
                    np.stack([np.bincount(segs, p, minlength=self.count) for p in present])
        return out[0], out[1], distinct

    def __call__(self, w: np.ndarray) -> np.ndarray:
        """[R, G] the weighted discordant pairs of each row of weights [R, u]."""
        return self.count_all(w)[0]

    def count_all(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """([R, G] discordant pairs, pairs tied in the metric, tied in both, distinct metric values)."""
        w = np.atleast_2d(np.asarray(w, float))[:, self.order]
        tie_x, tie_xy, distinct = self.ties(w)
        r = w.shape[0]
        out = np.zeros((r, self.count))
        before = np.zeros((r, self.u + 1))
        for (perm, right, left_at_most, left_end), bounds in zip(self.levels, self.bounds, strict=True):
            np.cumsum(w[:, perm], axis=1, out=before[:, 1:])
            contrib = w[:, right] * (before[:, left_end] - before[:, left_at_most])
            if self.count == 1:
                out[:, 0] += contrib.sum(1)
            else:
                summed = np.zeros((r, contrib.shape[1] + 1))
                np.cumsum(contrib, axis=1, out=summed[:, 1:])
                out += summed[:, bounds[1:]] - summed[:, bounds[:-1]]
        return out, tie_x, tie_xy, distinct


def counts(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments,
           cache: dict[str, object] | None = None) -> Counts:
    """:class:`Counts` without a tie threshold for segments too large to compare pair by pair: the ties from the
    value groups; the discordant pairs by :class:`Discordance` where the values are the same in every row, else
    concordant minus discordant from scipy's Kendall tau-b of each row's units repeated by their weights
    (O(n log n) either way; exact in integers up to about 10^7 units). `cache` keeps the sorted structures of
    fixed values from one block of rows to the next."""
    from scipy import stats  # here, not at import: `movers correlate --help` reads the declarations

    x, y, w = (np.atleast_2d(np.asarray(a, float)) for a in (x, y, w))
    r = _rows(x, y, w)
    fixed = x.shape[0] == 1 and y.shape[0] == 1
    cache = cache if cache is not None and fixed else {}
    n = _sum(np.broadcast_to(w, (r, w.shape[1])), seg)
    total = n * (n - 1) / 2
    ty = ties(y, w, seg, sorted_values(cache, "y", y, seg))
    if fixed:
        if "discordance" not in cache:
            cache["discordance"] = Discordance(x[0], y[0], seg)
        discordance = cache["discordance"]
        assert isinstance(discordance, Discordance)
        dis, tie_x, txy, distinct_x = discordance.count_all(np.broadcast_to(w, (r, w.shape[1])))
        same = total - tie_x - ty.tied + txy  # concordant + discordant
        return Counts(same - dis, dis, tie_x - txy, ty.tied - txy, txy, n, distinct_x, ty.distinct)
    tx = ties(x, w, seg)
    joint = (tx.group * (x.shape[1] + 1.0) + ty.group)
    txy = ties(joint, w, seg).tied
    same = total - tx.tied - ty.tied + txy  # concordant + discordant
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
    con, dis = (same + diff) / 2, (same - diff) / 2
    return Counts(con, dis, tx.tied - txy, ty.tied - txy, txy, n, tx.distinct, ty.distinct)


def acc_eq(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments, pairs: Pairs,
           weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """([R] value, [R] threshold): acc23 with the metric tie threshold that maximises it, the threshold searched
    over 0 and every pair's |x_i − x_j| (Deutsch et al. 2023's tie calibration; mt-metrics-eval
    ``tau_optimization``), one threshold for all segments, whose acc23 are averaged with `weights` ([R, G],
    default 1; segments without a pair left out). Of equal maxima the smallest threshold wins."""
    x, y, w = (np.atleast_2d(np.asarray(a, float)) for a in (x, y, w))
    r, p = max(_rows(x, y, w), 1 if weights is None else np.atleast_2d(weights).shape[0]), pairs.count
    w = np.broadcast_to(w, (r, w.shape[1]))
    n = _sum(w, seg)
    total = n * (n - 1) / 2
    share = np.ones_like(total) if weights is None else np.broadcast_to(weights, total.shape).astype(float)
    share = np.where(total > 0, share, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = share / np.where(total > 0, total, 1.0) / share.sum(1, keepdims=True)
    with np.errstate(over="ignore"):  # a gap beyond the float range is inf: a threshold of its own
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
