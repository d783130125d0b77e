"""Exact optimal transport (network simplex, POT's C++ solver, float64): MoverScore, SMS, WMD; and its partial form
for histograms of unequal total mass."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from . import pot
from .common import Transport

__all__ = ["emd", "partial_emd", "network_simplex", "simplex"]


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
    a64, b64, c64 = _float64_inputs("emd", a, b, cost)
    sa, sb = a64.sum(), b64.sum()
    if not (sa > 0 and abs(sa - sb) <= 1e-9 * max(sa, sb)):
        raise ValueError(f"emd: masses `a` and `b` must have the same positive total, got {sa!r} and {sb!r}; "
                         f"renormalise them first.")
    plan, _ = network_simplex(a64, b64, c64, max_iter=max_iter)
    return _result(plan, c64, cost, return_plan)


def network_simplex(a: np.ndarray, b: np.ndarray, cost: np.ndarray, *, max_iter: int = 1_000_000
                    ) -> tuple[np.ndarray, float]:
    """POT's network simplex (``ot.lp.emd_wrap.emd_c``, the C++ solver behind ``ot.emd``) on checked float64
    inputs, without ``ot.emd``'s backend conversions and checks (a quarter of its time on small problems):
    ``(plan, <plan, cost>)``. Rows and columns without mass are left out of the solve, as ``ot.emd`` does, and
    `b` is scaled to `a`'s total. It releases the GIL, so threads solve independent problems at once.

    Raises:
        RuntimeError: If the solver stops before optimality (infeasible, unbounded, or `max_iter` reached).
    """
    b = b * (a.sum() / b.sum())
    rows, cols = a > 0, b > 0
    if rows.all() and cols.all():
        return simplex(np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(cost), max_iter=max_iter)
    plan, value = simplex(np.ascontiguousarray(a[rows]), np.ascontiguousarray(b[cols]),
                          np.ascontiguousarray(cost[np.ix_(rows, cols)]), max_iter=max_iter)
    full = np.zeros(cost.shape, dtype=np.float64)
    full[np.ix_(rows, cols)] = plan
    return full, value


def simplex(a: np.ndarray, b: np.ndarray, cost: np.ndarray, *, max_iter: int = 1_000_000) -> tuple[np.ndarray, float]:
    """:func:`network_simplex` of a problem that is ready as it is: positive masses with equal totals, C-contiguous
    float64 arrays (the inner loop of a metric that built them so; nothing is checked or copied)."""
    plan, value, code = _emd_c(a, b, cost, max_iter)
    if code != 1:
        raise RuntimeError(f"emd: solver stopped before optimality: {_SIMPLEX_CODES.get(code, code)}")
    return plan, float(value)


_SIMPLEX_CODES = {0: "the problem is infeasible", 2: "the problem is unbounded",
                  3: "the iteration limit was reached (numItermax); raise `max_iter`"}
_SOLVER: list[Any] = []


def _emd_c(a: np.ndarray, b: np.ndarray, cost: np.ndarray, max_iter: int) -> tuple[np.ndarray, float, int]:
    """``emd_c`` under either of its signatures (POT 0.9.7 added two warm-start arguments), found on first use."""
    if not _SOLVER:
        emd_c = pot.emd_c()  # POT's solver without POT's package import (scikit-learn, networkx: seconds)

        try:
            emd_c(np.ones(1), np.ones(1), np.zeros((1, 1)), 10, 1, None, None)
            _SOLVER.append(lambda a, b, m, it: emd_c(a, b, m, it, 1, None, None))
        except TypeError:
            _SOLVER.append(lambda a, b, m, it: emd_c(a, b, m, it, 1))
    plan, value, _, _, code = _SOLVER[0](a, b, cost, max_iter)
    return plan, value, int(code)


def partial_emd(a, b, cost, *, max_iter: int = 1_000_000, return_plan: bool = True) -> Transport:
    """Exact partial transport: the lighter side's whole mass moved into the heavier side, each point of
    which takes at most its own mass (Rubner, Tomasi and Guibas 2000's EMD for histograms of unequal mass)::

        min <P, cost>  s.t.  P >= 0,  P 1 <= a,  Pᵀ 1 <= b,  sum P = f = min(sum a, sum b)

    ``cost`` of the result is ``<P*, cost> / f``, the mean cost per unit of mass moved, and ``plan`` is
    ``P* / f`` (total 1), so equal totals give :func:`emd` of the normalised masses. Solved by POT's
    ``ot.partial.partial_wasserstein`` (the balanced network simplex with a dummy point that takes the
    heavier side's surplus at no cost), float64 on CPU, returned in the input's type.

    Raises:
        ValueError: On a shape mismatch, negative or non-finite masses, a side with no mass, or a non-finite
            cost. RuntimeError: If the solver stops before optimality.
    """
    import ot

    a64, b64, c64 = _float64_inputs("partial_emd", a, b, cost)
    flow = float(min(a64.sum(), b64.sum()))
    if not flow > 0:
        raise ValueError("partial_emd: both sides must have a positive total mass.")
    try:
        plan = ot.partial.partial_wasserstein(a64, b64, c64, m=flow, numItermax=max_iter, numThreads=1)
    except ValueError as err:  # POT reports a stopped solver this way
        raise RuntimeError(f"partial_emd: solver stopped before optimality: {err}") from None
    plan /= flow
    return _result(plan, c64, cost, return_plan)


def _float64_inputs(name: str, a, b, cost) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a``, ``b`` and ``cost`` as contiguous float64 arrays, checked (shapes, finite, non-negative masses)."""
    nx = pot.get_backend(a, b, cost)
    a64, b64, c64 = (np.ascontiguousarray(nx.to_numpy(x), dtype=np.float64) for x in (a, b, cost))
    if a64.ndim != 1 or b64.ndim != 1 or c64.shape != (a64.shape[0], b64.shape[0]):
        raise ValueError(f"{name}: shapes must be a [n], b [m], cost [n, m], got {a64.shape}, {b64.shape}, "
                         f"{c64.shape}.")
    if (a64 < 0).any() or (b64 < 0).any() or not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        raise ValueError(f"{name}: masses `a` and `b` must be finite and non-negative.")
    if not np.isfinite(c64).all():
        raise ValueError(f"{name}: `cost` must be finite.")
    return a64, b64, c64


def _result(plan: np.ndarray, c64: np.ndarray, cost, return_plan: bool) -> Transport:
    """The plan's cost (and the plan, if asked) in the type of the input ``cost``."""
    value = float((plan * c64).sum())
    if isinstance(cost, Tensor):
        return Transport(cost=torch.tensor(value, dtype=torch.float64, device=cost.device),
                         plan=torch.from_numpy(plan).to(cost.device) if return_plan else None,
                         converged=True, iterations=0)
    return Transport(cost=np.float64(value), plan=plan if return_plan else None, converged=True, iterations=0)
