"""Multiple references per prediction: flatten, remember the owner of each reference, aggregate back.

Every embedding metric scores (prediction, reference) pairs and then reduces each segment's values over
its references with a named reduction; this module is the one place that does both.

    >>> groups = ReferenceGroups.of([["a", "b"], ["c"]])
    >>> groups.flat, groups.owner
    (['a', 'b', 'c'], [0, 0, 1])
    >>> groups.aggregate([0.2, 0.6, 0.5], "max"), groups.aggregate([0.2, 0.6, 0.5], "mean")
    ([0.6, 0.5], [0.4, 0.5])
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ReferenceGroups", "REDUCTIONS", "Reduction", "CHUNK", "segment_chunks"]

CHUNK = 2048
"""Segments the token-level metrics embed and score at a time, so a call's memory is bounded by this,
not by the corpus (per-call statistics still cover the whole call)."""


def segment_chunks(n: int, size: int, multiple: int = 1) -> list[range]:
    """Consecutive ranges over ``range(n)`` of `size` segments, rounded down to whole batches of `multiple`
    (at least one batch), so that batch centring never straddles two chunks.

    >>> segment_chunks(5, 2), segment_chunks(70, 50, multiple=32)
    ([range(0, 2), range(2, 4), range(4, 5)], [range(0, 32), range(32, 64), range(64, 70)])
    """
    step = max(multiple, size // multiple * multiple)
    return [range(start, min(start + step, n)) for start in range(0, n, step)]

Reduction = Literal["mean", "max", "min"]


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values))


REDUCTIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": _mean,
    "max": lambda values: float(max(values)),
    "min": lambda values: float(min(values)),
}
"""The reductions over a segment's references, by name (the name goes into the signature)."""


@dataclass(frozen=True)
class ReferenceGroups:
    """References of each segment, flattened: ``flat[k]`` belongs to segment ``owner[k]``."""

    flat: list[Any]
    owner: list[int]
    counts: list[int]

    @classmethod
    def of(cls, references: Sequence[Sequence[Any]]) -> ReferenceGroups:
        flat = [r for group in references for r in group]
        owner = [i for i, group in enumerate(references) for _ in group]
        return cls(flat=flat, owner=owner, counts=[len(group) for group in references])

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def multiple(self) -> bool:
        """Whether any segment has more than one reference (then results report `per_reference`)."""
        return any(c > 1 for c in self.counts)

    def split(self, values: Sequence[Any]) -> list[list[Any]]:
        """Values per flat reference -> one list per segment."""
        if len(values) != len(self.flat):
            raise ValueError(f"ReferenceGroups.split: expected {len(self.flat)} values, got {len(values)}.")
        out, k = [], 0
        for c in self.counts:
            out.append(list(values[k:k + c]))
            k += c
        return out

    def aggregate(self, values: Sequence[float], reduction: Reduction) -> list[float]:
        """Reduce the values per flat reference to one value per segment with `reduction`."""
        reduce = REDUCTIONS[reduction]
        return [reduce(group) for group in self.split(values)]
