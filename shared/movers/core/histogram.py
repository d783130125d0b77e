"""The inputs and outputs of the formula layer: histograms in, an alignment out.

A :class:`Histogram` is one side of a transport problem (labelled points with masses); every metric's
formula function maps a prediction histogram and a reference histogram (or batches of them) to an
:class:`Alignment` (score, distance and, on request, the cost matrix and the plan). Rows are always the
prediction's points and columns the reference's.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["Histogram", "Alignment", "unit_rows"]


@dataclass(frozen=True)
class Histogram:
    """Labelled points with masses: ``labels[k]`` (token, word or sentence text), ``mass`` [k] (float64,
    not necessarily normalised), ``points`` [k, d] (numpy or torch)."""

    labels: list[str]
    mass: Any
    points: Any
    origin: Any = None
    """A point every point is measured from (a centring mean, float64 [d]), or None; :meth:`vectors` applies
    it (the formula functions read the points through it)."""

    def __len__(self) -> int:
        return len(self.labels)

    def vectors(self) -> Any:
        """The points as the formula compares them: float64, minus `origin` when one is set."""
        if isinstance(self.points, torch.Tensor):
            t = self.points.to(torch.float64)
            return t if self.origin is None else t - self.origin
        a = np.asarray(self.points, dtype=np.float64)
        return a if self.origin is None else a - np.asarray(self.origin, dtype=np.float64)


@dataclass(frozen=True)
class Alignment:
    """One (prediction, reference) pair as the formula computed it.

    ``score`` is the metric's value, ``distance`` the transport cost when the metric has one; ``cost``
    and ``plan`` ([n, m] float64 numpy, prediction rows) are kept only on request. ``empty`` marks a
    pair with a side without points, scored by the metric's documented rule (its worst value).
    """

    score: float
    distance: float | None = None
    cost: np.ndarray | None = None
    plan: np.ndarray | None = None
    empty: bool = False
    values: Mapping[str, Any] = field(default_factory=dict)
    """Other per-pair outputs of the formula (TWMD's precision and recall, Lazy-EMD's iterations)."""


def unit_rows(x):
    """Rows scaled to unit L2 length (numpy or torch); a zero row stays zero instead of NaN.

    The one normalisation of the metrics: in float64 a vector's distance to itself is then 0 to 1e-16.
    """
    if isinstance(x, torch.Tensor):
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-300)
