"""Ragged problems (shapes ``[n_k, m_k]``) grouped into padded batches of bounded memory: size buckets
(:func:`buckets`) and size classes (:func:`shape_classes`), written once, here; the metrics gather each batch
(:mod:`movers.core.pairs`)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np

__all__ = ["buckets", "shape_classes", "padded_size", "grouped"]

T = TypeVar("T")


def buckets(shapes: Sequence[tuple[int, int]], *, budget: int, waste: float = 2.0) -> Iterator[list[int]]:
    """Group problems of shapes ``(n_k, m_k)`` into padded batches: sorted by size, each bucket at most
    `budget` padded entries (``B * max n * max m``), and no problem padded to more than `waste` times its own
    size (+256 entries). Yields lists of problem indices; a problem larger than the budget gets a bucket of its
    own."""
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
            if stop > start and (count * r * c > budget or r * c > waste * smallest + 256):
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


def grouped(batches: Sequence[T], entries: Callable[[T], int], *, budget: int) -> list[list[T]]:
    """Consecutive `batches` joined into groups of at most `budget` padded entries (``entries(batch)``), the
    batches a call holds at once (a batch larger than that is a group of its own); the batches themselves are
    kept as they are, so the numbers do not depend on the budget."""
    groups: list[list[T]] = []
    size = budget + 1
    for batch in batches:
        padded = entries(batch)
        if size + padded > budget:
            groups.append([])
            size = 0
        groups[-1].append(batch)
        size += padded
    return groups
