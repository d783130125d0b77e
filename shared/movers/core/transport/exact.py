"""Exact optimal transport (network simplex, POT's C++ solver, float64): MoverScore, SMS, WMD."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .common import Transport

__all__ = ["emd"]


def emd(a, b, cost, *, max_iter: int = 1_000_000, return_plan: bool = True) -> Transport:
    """Exact optimal transport: ``min_P <P, cost>`` s.t. ``P 1 = a``, ``P^T 1 = b``, ``P >= 0``.

    Runs POT's network simplex in float64 on CPU and returns in the input's type (numpy or torch, on
    the input's device, float64). The masses must have equal totals (to 1e-9 relative): renormalising
    is the caller's rule.

    Args:
        a, b: Non-negative masses, shapes [n] and [m], equal positive totals.
        cost: Ground cost, shape [n, m], finite.
        max_iter: Simplex iteration cap; reaching it raises (POT only warns).
        return_plan: Keep the plan in the result (default) or only its cost.
    Raises:
        ValueError: On a shape mismatch, negative, non-finite or unequal masses, or a non-finite cost.
        RuntimeError: If the solver stops before optimality.
    """
    import ot  # here, not at import: POT's package import pulls scikit-learn (~160 MB) for solvers TWMD never uses

    nx = ot.backend.get_backend(a, b, cost)
    a64, b64, c64 = (np.ascontiguousarray(nx.to_numpy(x), dtype=np.float64) for x in (a, b, cost))
    if a64.ndim != 1 or b64.ndim != 1 or c64.shape != (a64.shape[0], b64.shape[0]):
        raise ValueError(f"emd: shapes must be a [n], b [m], cost [n, m], got {a64.shape}, {b64.shape}, "
                         f"{c64.shape}.")
    if (a64 < 0).any() or (b64 < 0).any() or not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        raise ValueError("emd: masses `a` and `b` must be finite and non-negative.")
    if not np.isfinite(c64).all():
        raise ValueError("emd: `cost` must be finite.")
    sa, sb = a64.sum(), b64.sum()
    if not (sa > 0 and abs(sa - sb) <= 1e-9 * max(sa, sb)):
        raise ValueError(f"emd: masses `a` and `b` must have the same positive total, got {sa!r} and {sb!r}; "
                         f"renormalise them first.")
    # The totals agree to rounding; POT's own marginal check would only re-test that.
    plan, log = ot.emd(a64, b64 * (sa / sb), c64, numItermax=max_iter, log=True, center_dual=True, numThreads=1,
                       check_marginals=False)
    if log["warning"] is not None:
        raise RuntimeError(f"emd: solver stopped before optimality: {log['warning']}")
    value = float((plan * c64).sum())
    if isinstance(cost, Tensor):
        return Transport(cost=torch.tensor(value, dtype=torch.float64, device=cost.device),
                         plan=torch.from_numpy(plan).to(cost.device) if return_plan else None,
                         converged=True, iterations=0)
    return Transport(cost=np.float64(value), plan=plan if return_plan else None, converged=True, iterations=0)
