"""The statistics of a level's units (segments, or system means) in many rows at once: each row a resample (the
units' multiplicities) or a permutation (their scores), cut into segments (one, or the inputs or systems averaged
over), every statistic of the protocol computed per segment and averaged with the segments' multiplicities; a
pooled statistic keeps its sums of pair counts; the point row says why a statistic has no value.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .declarations import ACCURACY, CHUNK_CELLS, PAIRWISE, Protocol
from .weighted import (
    CONSTANT,
    NEAR,
    OK,
    TOO_FEW,
    Counts,
    Pairs,
    Segments,
    acc_eq,
    counts,
    moments,
    pair_counts,
    pearson,
    sorted_values,
    ties,
)

__all__ = ["PAIR_ROUTE_SEGMENT", "Evaluation", "unit_statistics", "from_counts", "POOLED", "pooled_value", "why"]

PAIR_ROUTE_SEGMENT = 256
"""Segments of at most this many units (on average) are counted pair by pair; larger ones by scipy's Kendall
tau-b per resample (O(n log n))."""


_CODES = {TOO_FEW: "fewer than 2 units", CONSTANT: "{side} scores all equal", NEAR: "{side} scores nearly constant"}
"""Why a statistic has no value (``nearly constant``: scipy's criterion, :data:`NEAR_CONSTANT`)."""


def why(cx: int, cy: int) -> str:
    for code in (TOO_FEW, CONSTANT, NEAR):
        for side, c in (("metric", cx), ("human", cy)):
            if c == code:
                return _CODES[code].format(side=side)
    return "undefined"


def _counts(x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments, epsilon: float,
            cache: dict[str, object] | None = None) -> Counts:
    """Pair counts per row and segment, by the cheaper route: pair by pair for small segments (and any tie
    threshold), blocks of segments at a time; else by sorting (:func:`~.weighted.counts`; `cache` keeps the
    sorted structure of values that stay the same from block to block)."""
    sizes = seg.ends - seg.starts
    if epsilon == 0 and len(sizes) and sizes.mean() > PAIR_ROUTE_SEGMENT:
        return counts(x, y, w, seg, cache)
    parts: list[Counts] = []
    pairs_per = sizes * (sizes - 1) // 2
    first = 0
    while first < seg.count:
        last, total = first, 0
        while last < seg.count and (last == first or total + pairs_per[last] <= CHUNK_CELLS):
            total += int(pairs_per[last])
            last += 1
        b, e = int(seg.starts[first]), int(seg.ends[last - 1])
        sub = Segments(seg.of[b:e] - first, seg.starts[first:last] - b)
        parts.append(pair_counts(x[:, b:e], y[:, b:e], w[:, b:e], sub, Pairs(sub), epsilon))
        first = last
    return Counts(*(np.concatenate([getattr(p, f) for p in parts], axis=1) for f in Counts.__dataclass_fields__))


def from_counts(c: Counts, statistic: str) -> np.ndarray:
    total = c.pairs
    tx, ty = c.tie_metric + c.tie_both, c.tie_human + c.tie_both
    cd = c.con - c.dis
    with np.errstate(invalid="ignore", divide="ignore"):
        if statistic == "kendall":
            v = cd / np.sqrt(total - tx) / np.sqrt(total - ty)
        elif statistic == "kendall_c":
            m = np.minimum(c.distinct_metric, c.distinct_human)
            v = 2 * cd / (c.n ** 2 * (m - 1) / m)
        elif statistic == "tau_23":
            v = (c.con + c.tie_both - c.dis - c.tie_metric - c.tie_human) / total
        else:  # acc23, pairwise_accuracy
            v = (c.con + c.tie_both) / total
    if statistic in ("kendall", "kendall_c"):
        v = np.where((tx == total) | (ty == total), np.nan, np.clip(v, -1.0, 1.0))
    return np.where(total > 0, v, np.nan)


POOLED = {"kendall": lambda c: (c.con - c.dis, c.pairs - c.tie_metric - c.tie_both, c.pairs - c.tie_human - c.tie_both),
         "tau_23": lambda c: (c.con + c.tie_both - c.dis - c.tie_metric - c.tie_human, c.pairs),
         "acc23": lambda c: (c.con + c.tie_both, c.pairs), ACCURACY: lambda c: (c.con + c.tie_both, c.pairs)}
"""A pooled statistic's sums: numerator and denominator(s), added over groups."""


def pooled_value(statistic: str, parts: Sequence[np.ndarray]) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        if statistic == "kendall":
            return np.clip(parts[0] / np.sqrt(parts[1]) / np.sqrt(parts[2]), -1.0, 1.0)
        if statistic == "spa":
            return 1 - parts[0] / parts[1]
        return parts[0] / parts[1]


@dataclass
class Evaluation:
    """Per row: each statistic's value; acc_eq's threshold; a pooled statistic's sums; at the point (one row)
    why a statistic has no value, and per-unit values where units are averaged."""

    values: dict[str, np.ndarray]
    threshold: np.ndarray | None = None
    pooled: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    per_unit: np.ndarray | None = None  # [G] Pearson r of each averaged unit (point only)


def unit_statistics(proto: Protocol, x: np.ndarray, y: np.ndarray, w: np.ndarray, seg: Segments,
                     seg_weight: np.ndarray | None, x_exp: int, point: bool,
                     cache: dict[str, object] | None = None) -> Evaluation:
    """The statistics of weighted units (segments or system means) cut into segments (one, or the inputs or
    systems averaged over), each row averaged over its segments with `seg_weight` (how often each was drawn).
    `x_exp`: the metric's values are its scores times 2^-x_exp (thresholds are given and reported in scores)."""
    r = max(x.shape[0], y.shape[0], w.shape[0], 1 if seg_weight is None else seg_weight.shape[0])
    wanted = set(proto.statistics)
    exact = point or bool(wanted & {"tau_23", "acc23", "acc_eq", ACCURACY})  # a constant side is fine for these
    mx, my = moments(x, w, seg, exact), moments(y, w, seg, exact)
    corr_ok = (mx.code == OK) & (my.code == OK)
    noise = (mx.code == NEAR) | (my.code == NEAR)
    out = Evaluation({})
    per_seg: dict[str, np.ndarray] = {}
    if "pearson" in wanted or point:
        per_seg["pearson"] = pearson(mx, my, w, seg)
    if "spearman" in wanted:
        memo = cache if cache is not None else {}
        tx, ty = ties(x, w, seg, sorted_values(memo, "x", x, seg)), ties(y, w, seg, sorted_values(memo, "y", y, seg))
        rho = pearson(moments(tx.rank, w, seg, False), moments(ty.rank, w, seg, False), w, seg)
        per_seg["spearman"] = np.where(corr_ok, rho, np.nan)
    base_needed = wanted & {"kendall", "kendall_c", ACCURACY} or (wanted & {"tau_23", "acc23"} and not proto.epsilon)
    base = _counts(x, y, w, seg, 0.0, cache) if base_needed else None
    tied = _counts(x, y, w, seg, math.ldexp(proto.epsilon, -x_exp)) if proto.epsilon and \
        wanted & {"tau_23", "acc23"} else base
    for s in ("kendall", "kendall_c", "tau_23", "acc23", ACCURACY):
        if s in wanted:
            c = tied if s in ("tau_23", "acc23") else base
            assert c is not None
            v = from_counts(c, s)
            per_seg[s] = np.where(corr_ok if s in ("kendall", "kendall_c") else ~noise, v, np.nan)
            if proto.average == "pooled":
                keep = ~noise
                out.pooled[s] = tuple(np.where(keep, p, 0.0).sum(1) for p in POOLED[s](c))
    weights = np.ones((r, seg.count)) if seg_weight is None else np.broadcast_to(seg_weight, (r, seg.count))
    for s, v in per_seg.items():
        if s not in wanted:
            continue
        ok = ~np.isnan(v) & (weights > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.values[s] = np.where(ok, v * weights, 0.0).sum(1) / np.where(ok, weights, 0.0).sum(1)
    if "acc_eq" in wanted:
        value, threshold = acc_eq(x, y, w, seg, Pairs(seg), np.where(noise, 0.0, weights))
        out.values["acc_eq"] = value
        out.threshold = np.ldexp(threshold, x_exp)
    if point:
        codes = list(zip(mx.code[0], my.code[0], strict=True))
        for s in proto.statistics:
            if s in out.values and math.isnan(out.values[s][0]):
                if seg.count == 1:
                    cx, cy = codes[0]
                    pair_stat = s in PAIRWISE and s not in ("kendall", "kendall_c")
                    out.reasons[s] = why(cx if not pair_stat or cx != CONSTANT else OK,
                                          cy if not pair_stat or cy != CONSTANT else OK)
                else:
                    whys = [why(cx, cy) for cx, cy in codes]
                    common = max(set(whys), key=whys.count)
                    unit = "system" if proto.average == "sys" else "input"
                    out.reasons[s] = f"no {unit} with a value (most: {common})"
        out.per_unit = per_seg["pearson"][0]
    return out
