"""Ragged problems (lists of ``[n_k, m_k]``) padded and masked into size buckets of bounded memory,
solved by a batched solver and cut back: written once, here."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .. import parallel
from .common import Transport

__all__ = ["pad", "buckets", "shape_classes", "padded_size", "solve_ragged"]

_CPU = torch.device("cpu")


def pad(items: Sequence[Tensor], *, value: float = 0.0) -> tuple[Tensor, Tensor]:
    """Stack tensors of equal rank (``[n_k]``, ``[n_k, d]``, ``[n_k, m_k]``) into one ``[B, max n, ...]``
    tensor, every dimension padded to its largest size with `value`, and a bool mask ``[B, max n]`` of
    the real leading positions."""
    shape = [max(x.shape[i] for x in items) for i in range(items[0].dim())]
    first = items[0]
    out = torch.full((len(items), *shape), value, dtype=first.dtype, device=first.device)
    mask = torch.zeros(len(items), shape[0], dtype=torch.bool, device=first.device)
    for k, x in enumerate(items):
        index: tuple[Any, ...] = (k, *(slice(0, n) for n in x.shape))
        out[index] = x
        mask[k, : x.shape[0]] = True
    return out, mask


def buckets(shapes: Sequence[tuple[int, int]], *, budget: int, max_size: int | None = None,
            waste: float = 2.0, row_width: int = 0) -> Iterator[list[int]]:
    """Group problems of shapes ``(n_k, m_k)`` into padded batches: sorted by size, each bucket at most
    `budget` padded entries (``B * max n * max m``, plus ``B * (max n + max m) * row_width`` for problems whose
    rows are vectors of `row_width` values) and `max_size` problems, and no problem padded to more than `waste`
    times its own size (+256 entries). Yields lists of problem indices; a problem larger than the budget gets a
    bucket of its own."""
    sizes = np.asarray(shapes, dtype=np.int64).reshape(-1, 2)
    area = sizes[:, 0] * sizes[:, 1]
    order = np.lexsort((np.arange(len(sizes)), sizes[:, 1], sizes[:, 0], area)).tolist()
    start = 0
    while start < len(order):
        stop, rows, cols = start, 0, 0
        smallest = int(area[order[start]])
        while stop < len(order):
            n, m = int(sizes[order[stop], 0]), int(sizes[order[stop], 1])
            r, c = max(rows, n), max(cols, m)
            count = stop - start + 1
            if stop > start and (count * (r * c + row_width * (r + c)) > budget or r * c > waste * smallest + 256
                                 or (max_size is not None and count > max_size)):
                break
            rows, cols, stop = r, c, stop + 1
        yield order[start:stop]
        start = stop


def padded_size(n: int) -> int:
    """The size a problem dimension of `n` is padded to in :func:`shape_classes`: 8 at least, then the powers of
    two and the midpoints between them (8, 12, 16, 24, 32, 48, 64, 96, ...): at most half again as large, so
    that a call's pairs fall into few classes (few batched operations) at little padding."""
    if n <= 8:
        return 8
    step = 1 << max(0, (n - 1).bit_length() - 2)
    return -(-n // step) * step


def shape_classes(shapes: Sequence[tuple[int, int]], *, budget: int) -> Iterator[tuple[list[int], tuple[int, int]]]:
    """Group problems of shapes ``(n_k, m_k)`` by their padded shape (:func:`padded_size` of each dimension): each
    problem is padded to its class's shape whatever else is in its batch, so its batched products see the same
    shapes in any company (a call split into parts gives the same bits). Yields (problem indices, padded shape),
    at most `budget` padded entries per batch (at least one problem), smallest classes first."""
    classes: dict[tuple[int, int], list[int]] = {}
    for k, (n, m) in enumerate(shapes):
        classes.setdefault((padded_size(int(n)), padded_size(int(m))), []).append(k)
    for shape in sorted(classes, key=lambda s: (s[0] * s[1], s)):
        members, step = classes[shape], max(1, budget // (shape[0] * shape[1]))
        for start in range(0, len(members), step):
            yield members[start:start + step], shape


def solve_ragged(solver: Callable[..., Transport], a: Sequence, b: Sequence, costs: Sequence, *,
                 budget: int = 1 << 22, device: torch.device | str | None = None, threads: int = 1,
                 **options: Any) -> list[Transport]:
    """Solve problems of different sizes with a batched solver: bucketed by :func:`buckets`, padded with
    zero mass (`valid_a`/`valid_b` masks mark the real rows and columns), solved, and cut back.

    Args:
        solver: A batched solver taking ``(a [B, n], b [B, m], cost [B, n, m], valid_a=, valid_b=, **options)``,
            e.g. :func:`unbalanced_sinkhorn_batch`.
        a, b, costs: Per problem masses [n_k], [m_k] and costs [n_k, m_k] (torch tensors, float64).
        budget: Padded entries per solver call (bounds memory; other buckets change a result by float64
            rounding at most).
        device: Where to solve (default: the inputs' device).
        threads: Buckets solved at once (:mod:`movers.core.parallel`); each is solved as it would be alone,
            so the count never changes a number. On a GPU buckets run one after another.
    Returns:
        One :class:`Transport` per problem, in input order, on the CPU: scalar fields and ``plan`` [n_k, m_k].
    """
    out: list[Transport | None] = [None] * len(costs)

    def solve(chunk: list[int]) -> None:
        cost_b, _ = pad([costs[k] for k in chunk])
        a_b, valid_a = pad([a[k] for k in chunk])
        b_b, valid_b = pad([b[k] for k in chunk])
        if device is not None:
            a_b, b_b, cost_b, valid_a, valid_b = (x.to(device) for x in (a_b, b_b, cost_b, valid_a, valid_b))
        res = solver(a_b, b_b, cost_b, valid_a=valid_a, valid_b=valid_b, **options)
        plan = None if res.plan is None else res.plan.cpu()
        for row, k in enumerate(chunk):
            n, m = costs[k].shape
            out[k] = Transport(cost=float(res.cost[row]),
                               plan=None if plan is None else plan[row, :n, :m].clone(),
                               converged=bool(res.converged[row]), iterations=int(res.iterations[row]),
                               error=float(res.error[row]))

    plan_of = list(buckets([tuple(costs[k].shape) for k in range(len(costs))], budget=budget))
    where = {torch.device(device).type} if device is not None else {getattr(c, "device", _CPU).type for c in costs}
    on_cpu = where <= {"cpu"}
    with parallel.solver(threads if on_cpu else 1) as pool:
        pool.map(solve, plan_of)
    return out  # type: ignore[return-value]
