"""The one result type of every movers metric."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .signature import Signature

__all__ = ["Scores"]


@dataclass(frozen=True)
class Scores:
    """Corpus score, per-segment scores (input order) and the reproducibility signature.

    `signature` is a :class:`~movers.core.signature.Signature`: its text, with its fields (``.fields``).
    `extra` holds metric-specific outputs (e.g. ``precision``/``recall`` for TWMD, ``distances`` for SMS,
    ``precisions``/``bp`` for ΔBLEU); `to_dict()` flattens them next to the three common keys, with the
    signature rendered: the shape the evaluate modules return.

    `statistics` is set by a metric whose corpus score is not the mean of its segment scores (ΔBLEU):
    per segment, the sufficient statistics ``[n, k]`` that :meth:`movers.core.spec.MetricSpec.corpus_from_statistics`
    turns, summed, into the corpus score (what resampling tests resample). Not part of `to_dict()`.
    """

    score: float
    scores: list[float]
    signature: Signature
    extra: Mapping[str, Any] = field(default_factory=dict)
    statistics: Sequence[Sequence[float]] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "scores": list(self.scores)}
        out.update(self.extra)
        out["signature"] = str(self.signature)
        return out

    def __str__(self) -> str:
        return f"{self.score:.4f} ({self.signature})"
