"""Optimal-transport solvers shared by the metrics.

* :func:`emd` — exact OT (network simplex, POT's C++ solver) in float64 on CPU; MoverScore, SMS, WMD.
* :func:`sinkhorn_batch` — entropic OT, log domain, batched on torch ``[B, n, m]``; TWMD with more iterations.
* :func:`unbalanced_sinkhorn_batch` — entropic OT with two KL-relaxed marginals, log domain, batched; Lazy-EMD.

Every POT argument that can change a result is passed explicitly (POT's defaults have changed across
releases). Batched solvers take zero masses for padding and keep the inputs' device and dtype.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import ot
import torch
from torch import Tensor

__all__ = ["Transport", "BatchTransport", "emd", "sinkhorn_batch", "unbalanced_sinkhorn_batch"]


@dataclass(frozen=True)
class Transport:
    """Optimal plan and its cost ``<plan, cost_matrix>`` for one problem (float64, CPU)."""

    cost: float
    plan: np.ndarray  # [n, m]


@dataclass(frozen=True)
class BatchTransport:
    """Plans for a batch of problems, their costs ``<P_b, C_b>``, and convergence diagnostics."""

    cost: Tensor  # [B]
    plan: Tensor  # [B, n, m]
    n_iter: int
    converged: bool
    error: float  # last marginal/potential change measured


def emd(a: np.ndarray, b: np.ndarray, cost: np.ndarray, *, max_iter: int = 1_000_000) -> Transport:
    """Exact optimal transport: ``min_P <P, cost>`` s.t. ``P 1 = a``, ``P^T 1 = b``, ``P >= 0``.

    Runs POT's network simplex in float64. Masses are renormalised to sum to 1 on each side when both
    sides are non-empty (as the originals do before calling their solvers).

    Args:
        a, b: Non-negative masses, shapes [n] and [m].
        cost: Ground cost, shape [n, m].
        max_iter: Simplex iteration cap; reaching it raises (POT only warns).
    Returns:
        A :class:`Transport`; an empty side (total mass 0) gives cost 0.0 and an all-zero plan, since
        nothing is transported (the original MoverScore's behaviour for fully filtered texts).
    Raises:
        ValueError: On a shape mismatch, negative or non-finite masses or costs.
        RuntimeError: If the solver stops before optimality.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or cost.shape != (a.shape[0], b.shape[0]):
        raise ValueError(f"emd: shapes must be a [n], b [m], cost [n, m], got {a.shape}, {b.shape}, {cost.shape}.")
    if (a < 0).any() or (b < 0).any() or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("emd: masses `a` and `b` must be finite and non-negative.")
    if not np.isfinite(cost).all():
        raise ValueError("emd: `cost` must be finite.")
    sa, sb = a.sum(), b.sum()
    if sa == 0 or sb == 0:
        return Transport(cost=0.0, plan=np.zeros_like(cost))
    a, b = a / sa, b / sb
    # Marginals are ours and already normalised; POT's own check would only re-test float rounding.
    plan, log = ot.emd(a, b, cost, numItermax=max_iter, log=True, center_dual=True, numThreads=1,
                       check_marginals=False)
    if log["warning"] is not None:
        raise RuntimeError(f"emd: solver stopped before optimality: {log['warning']}")
    return Transport(cost=float((plan * cost).sum()), plan=plan)


def _log_mass(x: Tensor) -> Tensor:
    """log of masses with log(0) = -inf (padding), never NaN."""
    return torch.where(x > 0, x.clamp_min(torch.finfo(x.dtype).tiny).log(), torch.full_like(x, -torch.inf))


def _lse(x: Tensor, dim: int) -> Tensor:
    """logsumexp that returns -inf (not NaN) for all -inf slices."""
    out = torch.logsumexp(x, dim=dim)
    return torch.nan_to_num(out, nan=-torch.inf)


def sinkhorn_batch(a: Tensor, b: Tensor, cost: Tensor, *, reg: float, max_iter: int = 1000,
                   tol: float = 1e-9) -> BatchTransport:
    """Entropic OT ``min_P <P, C> + reg * KL(P | a b^T)`` in the log domain, batched.

    Args:
        a, b: Masses [B, n] and [B, m] (zeros for padding); each row is used as given (sum to 1 for OT).
        cost: [B, n, m].
        reg: Entropic regularisation (> 0). Small values are safe: all updates are log-sum-exps.
        max_iter, tol: Stop when the max change of the potentials f, g falls below `tol`.
    Returns:
        :class:`BatchTransport`; warns (never prints) if `max_iter` is reached first.
    """
    log_a, log_b = _log_mass(a), _log_mass(b)
    f = torch.zeros_like(a)
    g = torch.zeros_like(b)
    # b=batch, n=rows (a side), m=columns (b side)
    err, it = float("inf"), 0
    for it in range(1, max_iter + 1):
        # P = a b^T exp((f + g - C) / reg): rows sum to a when f = -reg lse_j((g_j - C_ij) / reg + log b_j).
        f_new = -reg * _lse((g.unsqueeze(1) - cost) / reg + log_b.unsqueeze(1), dim=2)
        g_new = -reg * _lse((f_new.unsqueeze(2) - cost) / reg + log_a.unsqueeze(2), dim=1)
        err = _max_change(f, f_new, g, g_new)
        f, g = f_new, g_new
        if err < tol:
            break
    log_plan = (f.unsqueeze(2) + g.unsqueeze(1) - cost) / reg + log_a.unsqueeze(2) + log_b.unsqueeze(1)
    plan = torch.nan_to_num(log_plan.exp(), nan=0.0)
    converged = err < tol
    if not converged:
        warnings.warn(f"sinkhorn_batch: not converged after {max_iter} iterations (change {err:.2e} > tol "
                      f"{tol:g}); increase `max_iter` or `reg`.", RuntimeWarning, stacklevel=2)
    return BatchTransport(cost=(plan * cost).sum((1, 2)), plan=plan, n_iter=it, converged=converged, error=err)


def _max_change(f: Tensor, f_new: Tensor, g: Tensor, g_new: Tensor) -> float:
    df = torch.nan_to_num((f_new - f).abs(), nan=0.0, posinf=0.0)
    dg = torch.nan_to_num((g_new - g).abs(), nan=0.0, posinf=0.0)
    return float(torch.maximum(df.amax(), dg.amax()))


def unbalanced_sinkhorn_batch(a: Tensor, b: Tensor, cost: Tensor, *, reg: float, reg_a: float, reg_b: float,
                              max_iter: int = 200_000, tol: float = 1e-6, check_every: int = 10) -> BatchTransport:
    """Entropic unbalanced OT with two KL marginal penalties, log domain, batched.

    ``min_P <P, C> + reg * H(P) + reg_a * KL(P 1 | a) + reg_b * KL(P^T 1 | b)`` with the Gibbs kernel
    ``K = exp(-C / reg)`` (POT's ``reg_type="entropy"``), solved by the scaling iterations
    ``u = (a / K v)^(reg_a / (reg_a + reg))``, ``v = (b / K^T u)^(reg_b / (reg_b + reg))`` written on
    the potentials ``f = reg log u``, ``g = reg log v`` so that small `reg` neither under- nor overflows.
    ``reg_a = inf`` (or ``reg_b = inf``) makes that marginal exact.

    Args:
        a, b: Masses [B, n] and [B, m]; zeros are padding (never receive mass).
        cost: [B, n, m].
        reg: Entropic strength ε > 0. reg_a, reg_b: KL strengths λ ≥ 0 (0 = that marginal is free).
        max_iter, tol, check_every: stop when the mean relative change of the scalings u, v (the
            original Lazy-EMD criterion) is ≤ `tol`, checked every `check_every` iterations.
    Returns:
        :class:`BatchTransport` with ``P = diag(u) K diag(v)``; warns if not converged.
    """
    log_a, log_b = _log_mass(a), _log_mass(b)
    phi_a = 1.0 if reg_a == float("inf") else reg_a / (reg_a + reg)
    phi_b = 1.0 if reg_b == float("inf") else reg_b / (reg_b + reg)
    f = torch.zeros_like(a).masked_fill(a <= 0, -torch.inf)
    g = torch.zeros_like(b).masked_fill(b <= 0, -torch.inf)
    err, it = float("inf"), 0
    f_check, g_check = f, g
    for it in range(1, max_iter + 1):
        f = phi_a * reg * (log_a - _lse((g.unsqueeze(1) - cost) / reg, dim=2))
        g = phi_b * reg * (log_b - _lse((f.unsqueeze(2) - cost) / reg, dim=1))
        if it % check_every == 0:
            err = _relative_scaling_change(f_check, f, reg) + _relative_scaling_change(g_check, g, reg)
            err *= 0.5
            f_check, g_check = f, g
            if err <= tol:
                break
    log_plan = (f.unsqueeze(2) + g.unsqueeze(1) - cost) / reg
    plan = torch.nan_to_num(log_plan.exp(), nan=0.0)
    converged = err <= tol
    if not converged:
        warnings.warn(f"unbalanced_sinkhorn_batch: not converged after {max_iter} iterations (change "
                      f"{err:.2e} > tol {tol:g}); increase `max_iter` or `reg`.", stacklevel=2)
    return BatchTransport(cost=(plan * cost).sum((1, 2)), plan=plan, n_iter=it, converged=converged, error=err)


def _relative_scaling_change(old: Tensor, new: Tensor, reg: float) -> float:
    """max over the batch of ||u_new - u_old||_1 / ||u_new||_1 with u = exp(f / reg), computed stably."""
    shift = torch.maximum(old, new).amax(dim=-1, keepdim=True)
    shift = torch.nan_to_num(shift, neginf=0.0)
    u_old = torch.nan_to_num(((old - shift) / reg).exp(), nan=0.0)
    u_new = torch.nan_to_num(((new - shift) / reg).exp(), nan=0.0)
    num = (u_new - u_old).abs().sum(-1)
    den = u_new.abs().sum(-1).clamp_min(torch.finfo(new.dtype).tiny)
    return float((num / den).amax())
