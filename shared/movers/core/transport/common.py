"""The result type shared by every solver of :mod:`movers.core.transport`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["Transport", "log_mass"]


@dataclass(frozen=True)
class Transport:
    """The result of every solver: one problem (scalars, ``plan`` [n, m]) or a batch (``[B]`` fields,
    ``plan`` [B, n, m]), in the input's array type.

    ``cost`` is ``<plan, cost matrix>``; ``plan`` is None unless asked for; ``converged`` and
    ``iterations`` report the solver's stopping (the exact solver always converges and reports 0
    iterations); ``error`` is the last value of the stopping rule (0 for the exact solver).
    """

    cost: Any
    plan: Any | None
    converged: Any
    iterations: Any
    error: Any = 0.0


def log_mass(x: Tensor) -> Tensor:
    """log of masses with log(0) = -inf (padding), never NaN."""
    return torch.where(x > 0, x.clamp_min(torch.finfo(x.dtype).tiny).log(), torch.full_like(x, -torch.inf))
