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

__all__ = ["Transport", "BatchTransport", "UnbalancedBatchTransport", "emd", "sinkhorn_batch",
           "unbalanced_sinkhorn_batch"]


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


@dataclass(frozen=True)
class UnbalancedBatchTransport(BatchTransport):
    """:class:`BatchTransport` plus per-problem diagnostics (each problem stops on its own).

    `n_iter`, `converged` and `error` summarise the batch (max, all, max); the tensors below are per problem.
    """

    iterations: Tensor  # [B] int64: iterations run by each problem
    errors: Tensor  # [B]: last stopping-rule value of each problem
    converged_each: Tensor  # [B] bool
    log_u: Tensor  # [B, n]: log of the row scalings u (-inf on rows that get no mass)
    log_v: Tensor  # [B, m]: log of the column scalings v


def unbalanced_sinkhorn_batch(a: Tensor, b: Tensor, cost: Tensor, *, reg: float, reg_a: float, reg_b: float,
                              max_iter: int = 200_000, tol: float = 1e-6, check_every: int = 10,
                              valid_a: Tensor | None = None, valid_b: Tensor | None = None
                              ) -> UnbalancedBatchTransport:
    """Entropic unbalanced OT with two KL marginal penalties, log domain, batched.

    ``min_P <P, C> + reg * sum(P log P - P) + reg_a * KL(P 1 | a) + reg_b * KL(P^T 1 | b)``, i.e. the
    Gibbs kernel ``K = exp(-C / reg)`` (POT's ``reg_type="entropy"``), solved by the scaling iterations
    ``u = (a / K v)^(reg_a / (reg_a + reg))``, ``v = (b / K^T u)^(reg_b / (reg_b + reg))`` from
    ``v = 1/m``, carried as ``log u`` and ``log v`` so that small `reg` neither under- nor overflows:
    the first `check_every` iterations by log-sum-exp, later blocks with products on a kernel
    re-stabilised at each block start (``exp(log u_i + log v_j - C_ij/ε)``, the current plan), falling
    back to log-sum-exp for any block where that kernel under- or overflows.
    ``reg_a = inf`` makes that marginal exact (balanced side); ``reg_a = 0`` frees it (``u = 1``).

    Stopping rule (the Lazy-EMD original's, ``unbalanced.py``): every `check_every` iterations,
    ``0.5 * (|u - u'|_max / max(|u|_max, |u'|_max, 1) + the same for v) <= tol`` with ``u'`` the
    previous iteration's value. Every problem stops on its own (converged problems are frozen and
    dropped from the batch), so a result never depends on the other problems of the batch.

    Args:
        a, b: Non-negative masses [B, n] and [B, m].
        cost: [B, n, m], finite.
        reg: Entropic strength ε > 0. reg_a, reg_b: KL strengths λ in [0, inf].
        max_iter, tol, check_every: iteration cap, threshold and check period of the stopping rule.
        valid_a, valid_b: bool [B, n] / [B, m], the real rows/columns; the rest is padding and never
            takes part. Default ``a > 0`` / ``b > 0``. A valid position with zero mass gets no mass
            when its λ > 0, and scaling 1 when its λ = 0 (as ``(0 / x)^0 = 1`` in the original).
    Returns:
        :class:`UnbalancedBatchTransport` with ``P = diag(u) K diag(v)`` and ``cost = <P, C>``;
        warns (never prints) if a problem hits `max_iter` first.
    Raises:
        ValueError: On shape mismatches, negative or non-finite masses or costs, or bad parameters.
    """
    _check_unbalanced(a, b, cost, reg, reg_a, reg_b, max_iter, tol, check_every)
    valid_a = a > 0 if valid_a is None else valid_a.to(torch.bool) | (a > 0)
    valid_b = b > 0 if valid_b is None else valid_b.to(torch.bool) | (b > 0)
    log_a, log_b = _log_mass(a), _log_mass(b)
    phi_a = 1.0 if reg_a == float("inf") else reg_a / (reg_a + reg)
    phi_b = 1.0 if reg_b == float("inf") else reg_b / (reg_b + reg)
    scaled = cost / reg  # C / ε, so that log K = -scaled
    n_batch = cost.shape[0]
    neg_inf = torch.tensor(-torch.inf, dtype=cost.dtype, device=cost.device)
    log_u = torch.where(valid_a, -valid_a.sum(-1, keepdim=True).clamp_min(1).to(cost.dtype).log(), neg_inf)
    log_v = torch.where(valid_b, -valid_b.sum(-1, keepdim=True).clamp_min(1).to(cost.dtype).log(), neg_inf)
    iterations = torch.zeros(n_batch, dtype=torch.long, device=cost.device)
    errors = torch.full((n_batch,), torch.inf, dtype=cost.dtype, device=cost.device)
    active = torch.arange(n_batch, device=cost.device)
    gathered = -1  # number of problems the cached sub-batch below was gathered for
    done = 0
    while active.numel() and done < max_iter:
        if gathered != active.numel():  # re-gather only when problems have dropped out
            s_cost, s_la, s_lb, s_va, s_vb = (x[active] for x in (scaled, log_a, log_b, valid_a, valid_b))
            s_cost_t = s_cost.transpose(1, 2).contiguous()  # both reductions run over the last dim
            gathered = active.numel()
        # b=active problems, n=rows (a side), m=columns (b side)
        lu, lv = log_u[active], log_v[active]
        steps = min(check_every, max_iter - done)
        block = None
        if done > 0:  # the first block moves the potentials far: always log-sum-exp there
            block = _kernel_block(s_cost, s_la, s_lb, s_va, s_vb, lu, lv, steps, phi_a, phi_b, neg_inf)
        if block is None:
            block = _logsumexp_block(s_cost, s_cost_t, s_la, s_lb, s_va, s_vb, lu, lv, steps, phi_a, phi_b,
                                     neg_inf)
        lu_prev, lv_prev, lu, lv = block
        done += steps
        err = 0.5 * (_relative_change(lu_prev, lu) + _relative_change(lv_prev, lv))
        log_u[active], log_v[active] = lu, lv
        iterations[active] = done
        errors[active] = err
        active = active[~(err <= tol)]
    log_plan = log_u.unsqueeze(2) + log_v.unsqueeze(1) - scaled
    plan = torch.nan_to_num(log_plan.exp(), nan=0.0)
    converged_each = errors <= tol
    if not bool(converged_each.all()):
        bad = torch.nonzero(~converged_each).flatten().tolist()
        warnings.warn(f"unbalanced_sinkhorn_batch: problems {bad[:10]} not converged after {max_iter} "
                      f"iterations (change {float(errors.max()):.2e} > tol {tol:g}); increase `max_iter` "
                      f"or `reg`.", RuntimeWarning, stacklevel=2)
    return UnbalancedBatchTransport(
        cost=(plan * cost).sum((1, 2)), plan=plan, n_iter=int(iterations.max()) if n_batch else 0,
        converged=bool(converged_each.all()), error=float(errors.max()) if n_batch else 0.0,
        iterations=iterations, errors=errors, converged_each=converged_each, log_u=log_u, log_v=log_v)


def _logsumexp_block(s_cost: Tensor, s_cost_t: Tensor, la: Tensor, lb: Tensor, va: Tensor, vb: Tensor,
                     lu: Tensor, lv: Tensor, steps: int, phi_a: float, phi_b: float,
                     neg_inf: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """`steps` scaling iterations on log u, log v by log-sum-exp: safe for any ε and any start."""
    lu_prev, lv_prev = lu, lv
    for _ in range(steps):
        lu_prev, lv_prev = lu, lv
        lu = _scaling_step(la, va, _lse(lv.unsqueeze(1) - s_cost, dim=2), phi_a, neg_inf)
        lv = _scaling_step(lb, vb, _lse(lu.unsqueeze(1) - s_cost_t, dim=2), phi_b, neg_inf)
    return lu_prev, lv_prev, lu, lv


def _kernel_block(s_cost: Tensor, la: Tensor, lb: Tensor, va: Tensor, vb: Tensor, lu: Tensor, lv: Tensor,
                  steps: int, phi_a: float, phi_b: float,
                  neg_inf: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """The same iterations as plain products on a kernel stabilised at the block start.

    With ``α = log u``, ``β = log v`` at the start, ``K~ = exp(α_i + β_j - C_ij/ε)`` (the current plan,
    entries <= ~1) and relative scalings ``u~ = u e^-α``, ``v~ = v e^-β`` (~1), the update
    ``u = (a / K v)^φ`` reads ``u~ = a^φ e^((φ-1)α) (K~ v~)^-φ``: two passes over the kernel and two
    small vector operations per half-step, no exponential of the cost. Returns None (the caller
    redoes the block by log-sum-exp) if a row or column that must carry mass ends the block with a
    zero or non-finite scaling, i.e. the stabilised kernel under- or overflowed (zeros turn into
    infinities and NaNs at the next step, so a failure persists to the end of the block).
    """
    fin_a, fin_b = torch.isfinite(lu), torch.isfinite(lv)
    alpha, beta = torch.where(fin_a, lu, 0.0), torch.where(fin_b, lv, 0.0)
    # Entries of a row or column without mass (-inf potential) are set to 1, not 0, so that no sum
    # below is 0; their scaling is 0, so they still transport nothing.
    both = fin_a.unsqueeze(2) & fin_b.unsqueeze(1)
    kern = torch.where(both, torch.exp(alpha.unsqueeze(2) + beta.unsqueeze(1) - s_cost), 1.0)
    # Products as multiply-and-sum over the last dim (a transposed copy for the columns): several
    # times faster than bmm for many small matrices on CPU.
    kern_t = kern.transpose(1, 2).contiguous()
    need_a = va & torch.isfinite(la)  # rows that must carry mass (when phi_a > 0)
    need_b = vb & torch.isfinite(lb)
    # Per-block constants a^φ e^((φ-1)α) (0 where no mass), and the φ = 0 scalings (1 on valid rows).
    coef_a = torch.where(need_a & fin_a, (phi_a * la + (phi_a - 1.0) * alpha).exp(), 0.0)
    coef_b = torch.where(need_b & fin_b, (phi_b * lb + (phi_b - 1.0) * beta).exp(), 0.0)
    free_u = torch.where(va, (-alpha).exp(), 0.0)  # u = 1 -> u~ = e^-α
    free_v = torch.where(vb, (-beta).exp(), 0.0)
    u = fin_a.to(lu.dtype)  # u~ = 1 at the block start (0 where u = 0)
    v = fin_b.to(lv.dtype)
    u_prev, v_prev = u, v
    for _ in range(steps):
        u_prev, v_prev = u, v
        u = free_u if phi_a == 0.0 else coef_a * (kern * v.unsqueeze(1)).sum(-1).pow(-phi_a)
        v = free_v if phi_b == 0.0 else coef_b * (kern_t * u.unsqueeze(1)).sum(-1).pow(-phi_b)
    good_u = ((u > 0) & torch.isfinite(u)) | ~need_a
    good_v = ((v > 0) & torch.isfinite(v)) | ~need_b
    if (phi_a > 0 and not bool(good_u.all())) or (phi_b > 0 and not bool(good_v.all())):
        return None

    def log_of(x: Tensor, shift: Tensor, fin: Tensor) -> Tensor:
        return torch.where(fin & (x > 0), x.log() + shift, neg_inf)

    if phi_a == 0.0:
        fin_a = va  # u = 1 on every valid row, whatever its potential at the block start
    if phi_b == 0.0:
        fin_b = vb
    return (log_of(u_prev, alpha, fin_a), log_of(v_prev, beta, fin_b), log_of(u, alpha, fin_a),
            log_of(v, beta, fin_b))


def _scaling_step(log_mass: Tensor, valid: Tensor, log_kv: Tensor, phi: float, neg_inf: Tensor) -> Tensor:
    """log of ``(mass / Kv)^phi`` on valid positions: phi = 0 gives 1 (even for zero mass), zero mass 0."""
    if phi == 0.0:
        return torch.where(valid, torch.zeros_like(log_kv), neg_inf)
    out = phi * (log_mass - log_kv)
    # Zero mass (log -inf) -> -inf; a row that reaches no column (log_kv = -inf) transports nothing.
    return torch.where(valid & torch.isfinite(out), out, neg_inf)


def _relative_change(old: Tensor, new: Tensor) -> Tensor:
    """Per problem ``max|x - x'| / max(max|x|, max|x'|, 1)`` for ``x = exp(new)``, ``x' = exp(old)``.

    With ``s = max(max new, max old, 0)`` the ratio equals ``max|exp(new - s) - exp(old - s)|`` exactly,
    which never overflows (the denominator becomes 1).
    """
    shift = torch.maximum(old.amax(-1), new.amax(-1)).clamp_min(0.0).unsqueeze(-1)
    diff = (new - shift).exp() - (old - shift).exp()
    return torch.nan_to_num(diff, nan=0.0).abs().amax(-1)


def _check_unbalanced(a: Tensor, b: Tensor, cost: Tensor, reg: float, reg_a: float, reg_b: float,
                      max_iter: int, tol: float, check_every: int) -> None:
    name = "unbalanced_sinkhorn_batch"
    if cost.ndim != 3 or a.shape != cost.shape[:2] or b.shape != (cost.shape[0], cost.shape[2]):
        raise ValueError(f"{name}: shapes must be a [B, n], b [B, m], cost [B, n, m], got "
                         f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(cost.shape)}.")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()) or (a < 0).any() or (b < 0).any():
        raise ValueError(f"{name}: masses `a` and `b` must be finite and non-negative.")
    if not torch.isfinite(cost).all():
        raise ValueError(f"{name}: `cost` must be finite.")
    if not (isinstance(reg, (int, float)) and 0 < reg < float("inf")):
        raise ValueError(f"{name}: `reg` must be a finite number > 0, got {reg!r}.")
    for arg, value in (("reg_a", reg_a), ("reg_b", reg_b)):
        if not isinstance(value, (int, float)) or value != value or value < 0:
            raise ValueError(f"{name}: `{arg}` must be a number in [0, inf], got {value!r}.")
    if not isinstance(max_iter, int) or max_iter < 1 or not isinstance(check_every, int) or check_every < 1:
        raise ValueError(f"{name}: `max_iter` and `check_every` must be integers >= 1, got {max_iter!r}, "
                         f"{check_every!r}.")
    if not tol > 0:
        raise ValueError(f"{name}: `tol` must be > 0, got {tol!r}.")
