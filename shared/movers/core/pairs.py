"""Point sets of many texts and their pairs in padded batches: the one data path of the token metrics.

A metric compares two *sides*, each a set of points with masses (a text's kept tokens, its n-grams, its
sentences). :class:`PointSets` holds the sides of many texts as index arrays on the host into one packed tensor of
vectors on the device; a metric's (prediction side, reference side) pairs are grouped by size into buckets
(:func:`~movers.core.transport.buckets`, :func:`~movers.core.transport.shape_classes`), and :func:`pairwise` builds
one bucket's [B, n, m] matrix on the device: each side gathered as padded float64 points (:func:`gather`: one
index, the centring means subtracted), then their cosines (:func:`cosines`: one batched product over the norms) or
unit distances (:func:`unit_distances`). A bucket's host arrays reach the device in one copy (:func:`stage`), and
its results come back in one, so the work per chunk of texts is a few operations per bucket, whatever the number
of texts.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .histogram import Histogram, unit_rows
from .packed import padded_index, sides_of

__all__ = ["PointSets", "Scratch", "gather", "cosines", "unit_distances", "pairwise", "NEAR", "GATHER", "stage",
           "histogram_points"]


@dataclass(frozen=True, eq=False)
class PointSets:
    """The points of many sides, packed: side s has points ``start[s] : start[s] + count[s]``.

    Point q is ``sum_j weights[q, j] * vectors[index[q, j]]`` (an n-gram: the weighted sum of its tokens) or, with
    `weights` None, ``vectors[index[q, 0]]`` (a token); ``mass[q]`` is its mass. `vectors` is the packed tensor the
    caller gathers from.
    """

    index: np.ndarray
    weights: np.ndarray | None
    mass: np.ndarray
    start: np.ndarray
    count: np.ndarray

    @classmethod
    def of_tokens(cls, tokens: np.ndarray, side: np.ndarray, n_sides: int, mass: np.ndarray) -> PointSets:
        """Sides of single tokens: token `tokens[q]` (an index into the vectors) belongs to side `side[q]`, in
        side order, with mass ``mass[q]``."""
        count = np.bincount(side, minlength=n_sides).astype(np.int64)
        return cls(np.asarray(tokens, dtype=np.int64)[:, None], None, np.asarray(mass, dtype=np.float64),
                   np.cumsum(count) - count, count)

    def side_mass(self, s: int) -> np.ndarray:
        return self.mass[self.start[s]:self.start[s] + self.count[s]]

    def padded(self, sides: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """Host arrays of `sides` padded to `width` points: token index [B, width, g], weights [B, width, g] (or
        None), masses [B, width] (0 on padding) and the mask [B, width] of real points."""
        where, mask = padded_index(self.start[sides], self.count[sides], width)
        mass = np.where(mask, self.mass[where], 0.0)
        index = self.index[where]
        weights = None if self.weights is None else np.where(mask[..., None], self.weights[where], 0.0)
        return index, weights, mass, mask


def histogram_points(pairs: Sequence[tuple[Histogram, Histogram]]) -> tuple[Tensor, PointSets, np.ndarray, np.ndarray]:
    """Aligned (prediction, reference) histograms as packed points, each distinct histogram (the same object: the
    same text) once: its points as float64 vectors (:meth:`Histogram.vectors`, centred by their origin) and its
    masses. Returns the vectors [T, d] on the CPU, the point sets, and each pair's prediction and reference side
    (the formula functions of the token metrics read their histograms this way)."""
    side_of: dict[int, int] = {}
    distinct: list[Histogram] = []
    for pair in pairs:
        for h in pair:
            if id(h) not in side_of:
                side_of[id(h)] = len(distinct)
                distinct.append(h)
    counts = np.array([len(h) for h in distinct], dtype=np.int64)
    if distinct:
        vectors = torch.cat([torch.as_tensor(np.asarray(h.vectors(), dtype=np.float64)).reshape(len(h), -1)
                             for h in distinct])
        mass = np.concatenate([np.asarray(h.mass, dtype=np.float64).reshape(-1) for h in distinct])
    else:
        vectors, mass = torch.zeros(0, 1, dtype=torch.float64), np.zeros(0)
    points = PointSets.of_tokens(np.arange(len(mass)), sides_of(counts), len(distinct), mass)
    sides = np.array([side_of[id(h)] for pair in pairs for h in pair], dtype=np.int64).reshape(-1, 2)
    return vectors, points, sides[:, 0], sides[:, 1]


class Scratch:
    """Memory that a loop over buckets reuses for its large temporaries (the gathered vectors): one flat buffer per
    slot and dtype, made once at the size of the largest request (at least `reserve` entries; memory reserved but
    never written is never touched).

    On a CPU a fresh tensor of megabytes is fresh pages from the operating system, one page fault per 4 KiB on first
    write, which costs more than the gather that fills it; a buffer kept across the buckets is faulted in once per
    loop. The views from :meth:`take` are valid until the same slot is taken again; one thread uses a Scratch at a
    time.
    """

    def __init__(self, reserve: int = 0) -> None:
        self.reserve = reserve
        self._held: dict[tuple[str, torch.dtype, torch.device], Tensor] = {}

    def take(self, slot: str, shapes: Sequence[Sequence[int]], dtype: torch.dtype, device: torch.device
             ) -> list[Tensor]:
        """Uninitialised contiguous tensors of `shapes`, consecutive views of slot `slot`'s buffer."""
        sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
        key = (slot, dtype, torch.device(device))
        held = self._held.get(key)
        if held is None or held.numel() < sum(sizes):
            held = self._held[key] = torch.empty(max(sum(sizes), self.reserve), dtype=dtype, device=device)
        starts = np.cumsum([0, *sizes]).tolist()
        return [held[a:b].view(tuple(shape)) for a, b, shape in zip(starts, starts[1:], shapes, strict=False)]

    def points(self, indexes: Sequence[Tensor], vectors: Tensor) -> list[tuple[Tensor, Tensor]]:
        """:func:`gather`'s `out` for each index [B, width, g] of `indexes`, one after the other in two buffers: the
        rows as read (slot "rows", the vectors' dtype) and the float64 points (slot "points")."""
        dim = int(vectors.shape[1])
        read = self.take("rows", [(x.numel(), dim) for x in indexes], vectors.dtype, vectors.device)
        wide = self.take("points", [(*x.shape, dim) for x in indexes], torch.float64, vectors.device)
        return list(zip(read, wide, strict=True))


def gather(vectors: Tensor, index: Tensor, weights: Tensor | None, mean: Tensor | None, *,
           out: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """A bucket's points as float64 ``[B, width, d]`` (not normalised: :func:`cosines` divides by the norms).

    Args:
        vectors: The packed vectors [T, d] (float32 or float64) on the device.
        index: [B, width, g] rows of `vectors` per point (:meth:`PointSets.padded`).
        weights: [B, width, g] float64 weights of an n-gram's tokens, or None (single tokens, weight 1).
        mean: [B, d] float64 centring mean of each side, or None; a point's tokens are centred before they are
            summed (``sum_j w_j (v_j - mean)``).
        out: Memory to gather single-token points into instead of new memory (the result is a view of it; the
            same numbers): the rows as read ``[B·width·g, d]`` in the vectors' dtype, and ``[B, width, g, d]``
            float64.
    """
    b, width, g = index.shape
    rows, shape = index.reshape(-1), (b, width, g, vectors.shape[1])
    if out is None or weights is not None:
        x = vectors.index_select(0, rows).reshape(shape).to(torch.float64)  # new memory, widened exactly
        if mean is not None:  # in place (a subtraction that promotes float32 makes a float64 temporary of it)
            x.sub_(mean[:, None, None, :])
        return x[:, :, 0] if weights is None else (x * weights[..., None]).sum(2)
    read, wide = out
    if vectors.dtype == torch.float64:
        x = torch.index_select(vectors, 0, rows, out=wide.view(-1, shape[3])).view(shape)
    else:  # widened in the copy: no float64 temporary
        x = wide.copy_(torch.index_select(vectors, 0, rows, out=read).view(shape))
    return (x if mean is None else x.sub_(mean[:, None, None, :]))[:, :, 0]


def cosines(x: Tensor, y: Tensor) -> Tensor:
    """[B, n, m] cosine similarities of the rows of x [B, n, d] and y [B, m, d] (float64): one batched product
    over the norms (a zero row has cosine 0 with everything, as a zero unit row would)."""
    norms = torch.linalg.vector_norm(x, dim=-1)[:, :, None] * torch.linalg.vector_norm(y, dim=-1)[:, None, :]
    return torch.bmm(x, y.transpose(1, 2)).div_(norms.clamp_min_(1e-300))


NEAR = 1e-8
"""Squared unit-vector distances below this are recomputed from direct differences (:func:`unit_distances`)."""


def unit_distances(x: Tensor, y: Tensor, x_mask: Tensor, y_mask: Tensor) -> Tensor:
    """[B, n, m] squared distances between the unit rows of x [B, n, d] and y [B, m, d] (float64), ``2 - 2 cos``
    from :func:`cosines`; entries between real rows (`x_mask` [B, n], `y_mask` [B, m]) below :data:`NEAR` are
    recomputed as direct differences of the unit rows, so identical points are at distance exactly 0 and near
    ones are exact to float64 rounding (the product alone leaves ~1e-16 where it should give 0)."""
    sq = (2.0 - 2.0 * cosines(x, y)).clamp_min_(0.0)
    near = torch.nonzero((sq < NEAR) & x_mask[:, :, None] & y_mask[:, None, :])
    if len(near):
        b, i, j = near.unbind(1)
        u, v = unit_rows(x[b, i]), unit_rows(y[b, j])
        sq[b, i, j] = (u - v).square().sum(-1)
    return sq


GATHER = 1 << 21
"""Float64 entries of gathered vectors held at once while a bucket's pairwise matrix is computed (16 MiB)."""


def pairwise(fn: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor], vectors: Tensor,
             index: tuple[Tensor, Tensor | None], mask: tuple[Tensor, Tensor | None], *,
             weights: tuple[Tensor | None, Tensor | None] = (None, None),
             mean: tuple[Tensor | None, Tensor | None] = (None, None), scratch: Scratch | None = None) -> Tensor:
    """``fn(x, y, x_mask, y_mask)`` [B, n, m] of a bucket's two sides (:func:`gather` of ``index[0]`` and
    ``index[1]``, with their `weights` and centring `mean`; ``index[1]`` None: each side met with itself, gathered
    once), computed a slice of the bucket at a time so that at most :data:`GATHER` float64 vector entries are held
    at once; one [B, n, m] result. The gathered vectors live in `scratch` (a loop over buckets passes one; by default
    one for this bucket's slices): `fn` must return new memory, not its inputs or views of them."""
    index_l, index_r = index
    same = index_r is None
    b, n = index_l.shape[0], index_l.shape[1]
    m = n if index_r is None else index_r.shape[1]
    width = n * index_l.shape[2] + (0 if index_r is None else m * index_r.shape[2])
    step = max(1, GATHER // max(1, width * int(vectors.shape[1])))
    scratch = Scratch(GATHER) if scratch is None else scratch

    def part(rows: slice) -> Tensor:
        w_l, w_r = (None if w is None else w[rows] for w in weights)
        c_l, c_r = (None if c is None else c[rows] for c in mean)
        sides = [index_l[rows]] + ([] if index_r is None else [index_r[rows]])
        out = scratch.points(sides, vectors)  # both sides in one buffer: at most GATHER float64 entries
        x = gather(vectors, sides[0], w_l, c_l, out=out[0])
        mask_l = mask[0][rows]
        if same:
            return fn(x, x, mask_l, mask_l)
        assert mask[1] is not None
        return fn(x, gather(vectors, sides[1], w_r, c_r, out=out[1]), mask_l, mask[1][rows])

    if step >= b:
        return part(slice(0, b))
    out = torch.empty((b, n, m), dtype=torch.float64, device=vectors.device)
    for start in range(0, b, step):
        out[start:start + step] = part(slice(start, start + step))
    return out


def stage(arrays: Sequence[np.ndarray], device: torch.device, *, one_buffer: bool | None = None) -> list[Tensor]:
    """Host arrays as tensors on `device`: on the CPU views of the arrays themselves; elsewhere views of one
    buffer that holds them all, copied in one transfer (`one_buffer` forces either way, for tests)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if not (device.type != "cpu" if one_buffer is None else one_buffer):
        return [torch.from_numpy(a) for a in arrays]
    sizes = [a.nbytes for a in arrays]
    starts = np.concatenate([[0], np.cumsum([-(-n // 8) * 8 for n in sizes])]).astype(np.int64)
    buffer = np.zeros(int(starts[-1]), dtype=np.uint8)
    for a, s, n in zip(arrays, starts, sizes, strict=False):
        buffer[s:s + n] = a.reshape(-1).view(np.uint8)
    moved = torch.from_numpy(buffer).to(device)
    out = []
    for a, s, n in zip(arrays, starts, sizes, strict=False):
        dtype = torch.from_numpy(np.zeros(0, dtype=a.dtype)).dtype
        out.append(moved[int(s):int(s) + n].view(dtype).reshape(a.shape))
    return out

