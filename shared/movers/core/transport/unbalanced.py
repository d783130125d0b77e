"""Entropic optimal transport with two KL-relaxed marginals, log domain, batched ``[B, n, m]``: Lazy-EMD.

POT was checked for stock replacements: ``ot.unbalanced.sinkhorn_unbalanced_translation_invariant``
solves one problem at a time with another stopping rule, so it cannot reproduce the Lazy-EMD original's
iterations; this solver stays here and is tested against POT's ``sinkhorn_unbalanced`` for its optimum.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from . import pot
from .common import Transport, log_mass

__all__ = ["unbalanced_sinkhorn_batch", "overrelaxation", "iterates_on_host", "OVERRELAXATION"]

OVERRELAXATION = 1.95
"""The largest over-relaxation factor ω of the accelerated unbalanced solver (plain scaling iterations: ω = 1);
the factor itself is :func:`overrelaxation`'s, from the marginal strengths."""
_HOST_NUMPY = True
"""On a CPU the iterations run in numpy (False: in torch, as on an accelerator, so that a test on a CPU counts the
operations an accelerator launches)."""
_DUAL_RTOL = 1e-12
"""A relaxed block is undone if it lowers the dual by more than this fraction of the dual's size (the float64
noise of those sums is ~1e-15 of it)."""


def iterates_on_host(device: torch.device) -> bool:
    """Whether :func:`unbalanced_sinkhorn_batch` iterates in numpy for problems on `device` (a CPU): there each
    operation costs little and a batch's padding costs its full work; elsewhere it iterates in torch, one kernel
    launch per operation whatever the batch's size, so fewer, larger batches are faster."""
    return device.type == "cpu" and _HOST_NUMPY


def overrelaxation(reg: float, reg_a: float, reg_b: float) -> float:
    """ω = 2 / (1 + sqrt(1 - φa φb)), at most :data:`OVERRELAXATION` (1 when a side is free).

    Near the optimum the scaling iterations are a block Gauss-Seidel sweep on a two-block (2-cyclic) system
    whose Gauss-Seidel rate is ``φa φb`` times the squared second singular value of the normalised plan, so
    at most ``φa φb``: exactly that for a plan that splits into unlinked groups of tokens (each group's own
    translation), which at small ε is the slow case. Young's optimal factor for that rate is this ω, and the
    over-relaxed sweep then contracts at ``ω - 1`` (0.88 per iteration at the default strengths, against
    ``φa φb`` = 0.996 for the plain iterations). A larger rate cannot occur; a smaller one converges at
    ``ω - 1`` too.
    """
    inf = float("inf")
    phi_a = 1.0 if reg_a == inf else reg_a / (reg_a + reg)
    phi_b = 1.0 if reg_b == inf else reg_b / (reg_b + reg)
    return min(2.0 / (1.0 + math.sqrt(max(0.0, 1.0 - phi_a * phi_b))), OVERRELAXATION)


def unbalanced_sinkhorn_batch(a, b, cost, *, reg: float, reg_a: float, reg_b: float,
                              max_iter: int = 200_000, tol: float = 1e-6, check_every: int = 10,
                              valid_a=None, valid_b=None, accelerate: bool = True,
                              return_plan: bool = True) -> Transport:
    """Entropic unbalanced OT with two KL marginal penalties, log domain, batched.

    ``min_P <P, C> + reg * sum(P log P - P) + reg_a * KL(P 1 | a) + reg_b * KL(P^T 1 | b)``, i.e. the
    Gibbs kernel ``K = exp(-C / reg)`` (POT's ``reg_type="entropy"``). The plain scaling iterations
    (the Lazy-EMD original's, and POT's) are ``u = (a / K v)^φa``, ``v = (b / K^T u)^φb`` with
    ``φ = λ / (λ + ε)``, from ``u = 1/n``, ``v = 1/m``; each exactly maximises the dual
    ``D(f, g) = -λa <a, e^(-f/λa) - 1> - λb <b, e^(-g/λb) - 1> - ε <e^(f/ε), K e^(g/ε)>`` in
    ``f = ε log u`` (resp. ``g``). They are carried as ``log u`` and ``log v`` so that small `reg`
    neither under- nor overflows: the first `check_every` iterations by log-sum-exp, later blocks as
    products on a stabilised kernel (``exp(log u_i + log v_j - C_ij/ε)`` at a block start: the plan then),
    kept from block to block while the scalings stay within ``e^±30`` of it (:data:`_REUSE`) and stabilised
    afresh otherwise, falling back to log-sum-exp for any block where that kernel under- or overflows.

    ``accelerate=True`` (default) reaches the same optimum in fewer iterations with two standard
    devices that leave the fixed point unchanged:

    * **translation** (Séjourné, Vialard and Peyré, AISTATS 2022, "Faster unbalanced optimal
      transport: translation invariant Sinkhorn and 1-D Frank-Wolfe"): the plain iterations contract
      only at rate ``φ`` along ``(f + t, g - t)``, which leaves the coupling term unchanged, so with
      λ >> ε they need ``~1/(1 - φ)`` iterations (the original's cap of 200,000 is hit at λ = 1000).
      After each block the exact dual maximiser on that line is applied, in closed form
      ``t = log(Σ a e^(-f/λa) / Σ b e^(-g/λb)) / (1/λa + 1/λb)`` (skipped when a λ is 0 or both are ∞);
    * **over-relaxation** (Thibault, Chizat, Dossal and Papadakis, Algorithms 2021, "Overrelaxed
      Sinkhorn-Knopp algorithm for regularized optimal transport"):
      ``log u <- log u + ω (log u_plain - log u)`` after the first block, with Young's optimal factor for
      the slowest rate the sweep can have, ``ω = 2 / (1 + sqrt(1 - φa φb))`` (:func:`overrelaxation`; 1.88
      at Lazy-EMD's default strengths, at most :data:`OVERRELAXATION`). Safeguard: the plain iterations and
      the translation steps never lower the dual objective; a relaxed block that lowers it (beyond float64
      noise) is undone and that problem's next block runs plain, so every accepted block is an ascent
      step and the iterations converge wherever the plain ones do.

    ``accelerate=False`` runs the plain iterations: iteration counts and plans equal the original's.
    ``reg_a = inf`` makes that marginal exact (balanced side); ``reg_a = 0`` frees it (``u = 1``).

    Stopping rule (the Lazy-EMD original's, ``unbalanced.py``): every `check_every` iterations,
    ``0.5 * (|u - u'|_max / max(|u|_max, |u'|_max, 1) + the same for v) <= tol`` with ``u'`` the
    previous iteration's value. Every problem stops on its own (converged problems are frozen and
    dropped from the batch), so a result never depends on the other problems of the batch.

    On CPU the iterations run in numpy (through POT's backend layer, on the tensors' memory): for
    these many small products it is several times faster than torch's per-operation overhead; on
    other devices they run in torch, where each operation is a kernel launch. Both run the same float64
    iterations; torch fuses each half-step's update and relaxation into two kernels (a scaled subtraction
    and ``torch.lerp``), and these and its exp and log round the last bit of some entries differently.

    Args:
        a, b: Non-negative masses [B, n] and [B, m] (numpy or torch; the result has the same type).
        cost: [B, n, m], finite.
        reg: Entropic strength ε > 0. reg_a, reg_b: KL strengths λ in [0, inf].
        max_iter, tol, check_every: iteration cap, threshold and check period of the stopping rule.
        valid_a, valid_b: bool [B, n] / [B, m], the real rows/columns; the rest is padding and never
            takes part. Default ``a > 0`` / ``b > 0``. A valid position with zero mass gets no mass
            when its λ > 0, and scaling 1 when its λ = 0 (as ``(0 / x)^0 = 1`` in the original).
        accelerate: Translation steps and over-relaxation (default), or the plain iterations.
        return_plan: Keep ``P = diag(u) K diag(v)`` in the result (default).
    Returns:
        :class:`Transport` with ``[B]`` fields: ``cost = <P, C>``, ``converged``, ``iterations`` (each
        problem's own count) and ``error`` (its last stopping-rule value); warns (never prints) if a
        problem hits `max_iter` first.
    Raises:
        ValueError: On shape mismatches, negative or non-finite masses or costs, or bad parameters.
    """
    as_numpy = isinstance(cost, np.ndarray)
    if as_numpy:  # torch views of the same memory; converted back at the end
        a, b, cost = (torch.from_numpy(np.asarray(x)) for x in (a, b, cost))
        valid_a, valid_b = (None if v is None else torch.from_numpy(np.asarray(v)) for v in (valid_a, valid_b))
    _check_unbalanced(a, b, cost, reg, reg_a, reg_b, max_iter, tol, check_every)
    if not isinstance(accelerate, bool):
        raise TypeError(f"unbalanced_sinkhorn_batch: `accelerate` must be a bool, got {accelerate!r}.")
    valid_a = a > 0 if valid_a is None else valid_a.to(torch.bool) | (a > 0)
    valid_b = b > 0 if valid_b is None else valid_b.to(torch.bool) | (b > 0)
    n_batch = cost.shape[0]
    state: dict[str, Any] = {  # per-problem solver state, updated in place by _uot_iterations
        "log_u": torch.where(valid_a, -valid_a.sum(-1, keepdim=True).clamp_min(1).to(cost.dtype).log(), -torch.inf),
        "log_v": torch.where(valid_b, -valid_b.sum(-1, keepdim=True).clamp_min(1).to(cost.dtype).log(), -torch.inf),
        "iterations": torch.zeros(n_batch, dtype=torch.long, device=cost.device),
        "errors": torch.full((n_batch,), torch.inf, dtype=cost.dtype, device=cost.device),
    }
    scaled = cost / reg  # C / ε = -log K
    inputs: dict[str, Any] = {"log_a": log_mass(a), "log_b": log_mass(b), "scaled": scaled,
              "valid_a": valid_a, "valid_b": valid_b}
    on_cpu = iterates_on_host(cost.device)
    if on_cpu:  # numpy views of the same memory
        state = {k: x.numpy() for k, x in state.items()}
        inputs = {k: x.detach().numpy() for k, x in inputs.items()}
    nx = pot.get_backend(inputs["scaled"])
    with np.errstate(all="ignore"):  # -inf arithmetic is intended; results are checked, not warned
        _uot_iterations(nx, state, **inputs, reg=reg, reg_a=reg_a, reg_b=reg_b, max_iter=max_iter, tol=tol,
                        check_every=check_every, accelerate=accelerate)
    if on_cpu:
        state = {k: torch.from_numpy(x) for k, x in state.items()}
    log_u, log_v, iterations, errors = state["log_u"], state["log_v"], state["iterations"], state["errors"]
    # P = exp(log u_i + log v_j - C_ij/ε), built in place in `scaled` (no longer needed): no [B, n, m] copies.
    plan = scaled.neg_().add_(log_u.unsqueeze(2)).add_(log_v.unsqueeze(1)).exp_().nan_to_num_(nan=0.0)
    converged = errors <= tol
    if not bool(converged.all()):
        bad = torch.nonzero(~converged).flatten().tolist()
        warnings.warn(f"unbalanced_sinkhorn_batch: problems {bad[:10]} not converged after {max_iter} "
                      f"iterations (change {float(errors.max()):.2e} > tol {tol:g}); increase `max_iter` "
                      f"or `reg`.", RuntimeWarning, stacklevel=2)
    total = torch.bmm(plan.reshape(n_batch, 1, -1), cost.reshape(n_batch, -1, 1)).reshape(n_batch)  # <P, C>
    out = Transport(cost=total, plan=plan if return_plan else None, converged=converged, iterations=iterations,
                    error=errors)
    if as_numpy:
        out = Transport(*(None if x is None else x.numpy() for x in (out.cost, out.plan, out.converged,
                                                                    out.iterations, out.error)))
    return out


def _uot_iterations(nx, state: dict, *, log_a, log_b, scaled, valid_a, valid_b, reg: float, reg_a: float,
                    reg_b: float, max_iter: int, tol: float, check_every: int, accelerate: bool) -> None:
    """The iterations of :func:`unbalanced_sinkhorn_batch` on numpy or torch arrays (`nx`: POT backend).

    Updates ``state`` (log_u, log_v, iterations, errors) in place; b=problems, n=rows, m=columns.
    """
    inf = float("inf")
    phi_a = 1.0 if reg_a == inf else reg_a / (reg_a + reg)
    phi_b = 1.0 if reg_b == inf else reg_b / (reg_b + reg)
    # 1/λ of each side for the translation step (None: no translation for this problem class).
    translate = (1.0 / reg_a, 1.0 / reg_b) if accelerate and reg_a > 0 and reg_b > 0 and reg_a + reg_b < inf \
        else None
    w_star = overrelaxation(reg, reg_a, reg_b) if accelerate else 1.0
    log_u, log_v, iterations, errors = state["log_u"], state["log_v"], state["iterations"], state["errors"]
    # Per problem: the factor of its next block (1 after an undone block), the dual at its last accepted block.
    omega = nx.full((errors.shape[0], 1), w_star, type_as=errors)
    dual = nx.full(errors.shape, -inf, type_as=errors)
    active = nx.arange(errors.shape[0], type_as=iterations)
    # The active problems' inputs, gathered as problems drop out; with them the positions with mass (a finite log
    # mass), computed once rather than in every block.
    sub = [scaled, log_a, log_b, valid_a, valid_b, _finite(log_a), _finite(log_b)]
    kernel = None  # the active problems' stabilised kernel (:class:`_Kernel`), kept while it can carry them
    done = 0
    while active.shape[0] and done < max_iter:
        lu0, lv0 = log_u[active], log_v[active]
        steps = min(check_every, max_iter - done)
        relaxed = w_star > 1.0 and done > 0
        w = omega[active] if relaxed else None
        s_cost, la, lb, va, vb, has_a, has_b = sub
        block = None
        if done > 0:
            block, kernel = _kernel_block(nx, s_cost, la, lb, va, vb, lu0, lv0, steps, phi_a, phi_b, w, kernel,
                                          (has_a, has_b)) or (None, None)
        elif accelerate and steps > 1:
            # The first iteration moves the potentials far from the start (by log-sum-exp); the kernel
            # stabilised there carries the rest of the first block.
            first = _logsumexp_block(nx, s_cost, la, lb, va, vb, lu0, lv0, 1, phi_a, phi_b, None)
            block, kernel = _kernel_block(nx, s_cost, la, lb, va, vb, first[2], first[3], steps - 1, phi_a, phi_b,
                                          None, None, (has_a, has_b)) or (None, None)
        if block is None:  # the plain iterations' first block (the original's path), or a kernel out of range
            block = _logsumexp_block(nx, s_cost, la, lb, va, vb, lu0, lv0, steps, phi_a, phi_b, w)
        lu_prev, lv_prev, lu, lv, log_mass_p = block
        # Positions with mass and a finite scaling, for the translation and the dual (a translation keeps them).
        ok = (has_a & _finite(lu), has_b & _finite(lv))
        sums = None  # the dual's two sums at the translated scalings, from the translation's own
        if translate is not None:
            lu, lv, sums = _translate(nx, lu, lv, la, lb, reg, *translate, ok=ok)
        done += steps
        err = 0.5 * (_relative_change(nx, lu_prev, lu) + _relative_change(nx, lv_prev, lv))
        if w_star > 1.0:
            # Safeguard: plain iterations and translation steps never lower the dual; a relaxed block that does
            # (far from the optimum, where the sweep is not yet linear) is undone and redone plain.
            new_dual, scale = _dual(nx, lu, lv, la, lb, log_mass_p, reg, reg_a, reg_b, ok=ok, sums=sums)
            keep = new_dual >= dual[active] - _DUAL_RTOL * scale
            if w is not None:
                keep = keep | (w[:, 0] == 1.0)
                lu = nx.where(keep[:, None], lu, lu0)
                lv = nx.where(keep[:, None], lv, lv0)
                err = nx.where(keep, err, errors[active])
                omega[active] = nx.where(keep[:, None], w_star + 0.0 * w, 1.0 + 0.0 * w)
            dual[active] = nx.where(keep, new_dual, dual[active])
        log_u[active], log_v[active] = lu, lv
        iterations[active] = done
        errors[active] = err
        going = _positions(~(err <= tol))
        if going.shape[0] < active.shape[0]:  # problems dropped out: the rest's inputs and kernel, gathered once
            active = active[going]
            sub = [x[going] for x in sub]
            kernel = None if kernel is None else kernel.select(going)


def _dual(nx, lu, lv, la, lb, log_mass_p, reg: float, reg_a: float, reg_b: float, ok=None, sums=None):
    """The dual objective per problem (up to a constant), and the size of its terms (for a float64 tolerance).

    ``D = -λa Σ a u^(-ε/λa) - λb Σ b v^(-ε/λb) - ε Σ P`` (``ε Σ a log u`` for λ = ∞, nothing for λ = 0), over
    positions with mass and a finite scaling (``ok``: each side's, when the caller has them); ``log_mass_p`` is
    ``log Σ P``. ``sums``: the logs of the two sums when the caller has them (from :func:`_translate`; both λ
    finite and > 0), else they are summed here.
    """
    ok = _with_scaling(nx, la, lb, lu, lv) if ok is None else ok

    def side(lmass, lscale, ok, lam, log_sum):
        if log_sum is not None:
            return -lam * nx.exp(log_sum)
        if lam == 0.0:
            return nx.zeros(lmass.shape[:1], type_as=lmass)
        if lam == float("inf"):
            return reg * nx.sum(nx.where(ok, nx.exp(lmass) * lscale, 0.0), axis=-1)
        return -lam * nx.exp(_nx_lse(nx, nx.where(ok, lmass - (reg / lam) * lscale, -float("inf")), axis=-1))

    sum_a, sum_b = (None, None) if sums is None else sums
    term_a, term_b = side(la, lu, ok[0], reg_a, sum_a), side(lb, lv, ok[1], reg_b, sum_b)
    coupling = reg * nx.exp(log_mass_p)
    return term_a + term_b - coupling, nx.abs(term_a) + nx.abs(term_b) + coupling


def _with_scaling(nx, la, lb, lu, lv):
    """Each side's positions with mass and a finite scaling."""
    return _finite(la) & _finite(lu), _finite(lb) & _finite(lv)


def _translate(nx, lu, lv, la, lb, reg: float, inv_a: float, inv_b: float, ok=None):
    """The exact dual maximiser along ``(f + t, g - t)``: ``log u += t/ε``, ``log v -= t/ε``.

    ``t = (log Σ_i a_i u_i^(-ε/λa) - log Σ_j b_j v_j^(-ε/λb)) / (1/λa + 1/λb)``, over positions with
    mass and a finite scaling (``ok``: each side's, when the caller has them); no shift if a side has none.
    Returns the shifted ``log u``, ``log v`` and those two log-sums at them (the first moves by ``-t/λa``, the
    second by ``+t/λb``), which the dual reads (:func:`_dual`'s ``sums``) instead of summing again.
    """
    ok = _with_scaling(nx, la, lb, lu, lv) if ok is None else ok

    def side(lmass, lscale, ok, inv):
        return _nx_lse(nx, nx.where(ok, lmass - (reg * inv) * lscale, -float("inf")), axis=-1)

    sum_a, sum_b = side(la, lu, ok[0], inv_a), side(lb, lv, ok[1], inv_b)
    t = (sum_a - sum_b) / (inv_a + inv_b)
    t = nx.where(_finite(t), t, 0.0)
    shift = (t / reg)[:, None]
    return lu + shift, lv - shift, (sum_a - inv_a * t, sum_b + inv_b * t)  # -inf stays -inf


def _logsumexp_block(nx, s_cost, la, lb, va, vb, lu, lv, steps: int, phi_a: float, phi_b: float, omega):
    """`steps` scaling iterations on log u, log v by log-sum-exp: safe for any ε and any start. Also returns
    ``log Σ P`` of the final scalings."""
    lu_prev, lv_prev = lu, lv
    log_ku = lv
    for _ in range(steps):
        lu_prev, lv_prev = lu, lv
        lu = _relax(nx, lu, _scaling_step(nx, la, va, _lse_minus_cost(nx, s_cost, lv[:, None, :], -1), phi_a), omega)
        log_ku = _lse_minus_cost(nx, s_cost, lu[:, :, None], -2)
        lv = _relax(nx, lv, _scaling_step(nx, lb, vb, log_ku, phi_b), omega)
    log_mass_p = _nx_lse(nx, nx.where(_finite(lv), lv + log_ku, -float("inf")), -1)
    return lu_prev, lv_prev, lu, lv, log_mass_p


def _relax(nx, old, new, omega):
    """``old + ω (new - old)`` where both are finite (ω per problem, [b, 1]); `new` elsewhere."""
    if omega is None:
        return new
    return nx.where(_finite(old) & _finite(new), old + omega * (new - old), new)


_REUSE = 30.0
"""A block keeps the previous block's kernel while each row's and column's scaling relative to that kernel is
within ``e^±30`` at the block start (the products then lose nothing to the float range; only rounding differs from
a kernel stabilised afresh); otherwise, or after the problems changed, the kernel is stabilised at the block
start."""


@dataclass
class _Kernel:
    """A stabilised kernel ``exp(α_i + β_j - C_ij/ε)`` of some problems and what the iterations read with it:
    α, β, and the rows and columns with a scaling as 0/1 factors."""

    kern: Any
    alpha: Any
    beta: Any
    mask_a: Any
    mask_b: Any

    def select(self, rows) -> _Kernel:
        """The same for problems ``rows`` (a gather, no exponential)."""
        return _Kernel(*(x[rows] for x in (self.kern, self.alpha, self.beta, self.mask_a, self.mask_b)))


def _kernel_block(nx, s_cost, la, lb, va, vb, lu, lv, steps: int, phi_a: float, phi_b: float, omega,
                  kernel: _Kernel | None, has_mass):
    """The same iterations as products on a stabilised kernel.

    With ``α``, ``β`` the stabilisation point (the scalings ``log u``, ``log v`` at this or an earlier block's
    start: `kernel`, kept while it can carry the block, :data:`_REUSE`), ``K~ = exp(α_i + β_j - C_ij/ε)`` (entries
    <= ~1 near the optimum) and relative scalings ``u~ = u e^-α``, ``v~ = v e^-β``, the update
    ``u = (a / K v)^φ`` reads ``log u~ = φ log a + (φ-1) α - φ log(K~ v~)``: one product with the kernel per
    half-step plus a few vector operations, no exponential of the cost. Rows and columns without mass are kept
    out by a 0/1 factor (their kernel entries are 1, so every sum stays positive). Returns (the block, the
    kernel), or None (the caller redoes the block by log-sum-exp) if a row or column that must carry mass has no
    scaling at the start, or if a scaling leaves the float range during the block. `has_mass`: the positions
    with mass on each side (``isfinite(la)``, ``isfinite(lb)``). Each decision reads the device once (one
    synchronisation on an accelerator), for both sides together.
    """
    need_a, need_b = va & has_mass[0], vb & has_mass[1]  # rows and columns that must carry mass when phi > 0
    unscaled = [need & ~_finite(scaling) for need, scaling, phi in ((need_a, lu, phi_a), (need_b, lv, phi_b))
                if phi > 0]
    # Rows/columns with a scaling: those with mass (φ > 0), or every valid one (φ = 0: u = 1).
    on_a = need_a if phi_a > 0 else va
    on_b = need_b if phi_b > 0 else vb
    zero_a, zero_b = nx.zeros(lu.shape, type_as=lu), nx.zeros(lv.shape, type_as=lv)
    missing = _any_of(unscaled) if unscaled else None
    kept = None
    if kernel is not None:
        lu_t, lv_t = nx.where(on_a, lu - kernel.alpha, zero_a), nx.where(on_b, lv - kernel.beta, zero_b)
        kept = (nx.abs(lu_t) < _REUSE).all() & (nx.abs(lv_t) < _REUSE).all()
    missing, kept = _read([missing, kept])
    if missing:
        return None
    if not kept:
        kernel = None
    if kernel is None:
        alpha, beta = nx.where(on_a, lu, zero_a), nx.where(on_b, lv, zero_b)
        kernel = _Kernel(_stabilised_kernel(nx, s_cost, alpha, beta, on_a, on_b), alpha, beta,
                         nx.where(on_a, 1.0, zero_a), nx.where(on_b, 1.0, zero_b))
        lu_t, lv_t = zero_a, zero_b  # log u~ = 0 at the block start
    kern, alpha, beta, mask_a, mask_b = kernel.kern, kernel.alpha, kernel.beta, kernel.mask_a, kernel.mask_b
    coef_a = nx.where(on_a, phi_a * la + (phi_a - 1.0) * alpha, zero_a) if phi_a > 0 else None
    coef_b = nx.where(on_b, phi_b * lb + (phi_b - 1.0) * beta, zero_b) if phi_b > 0 else None
    free_a = nx.where(on_a, -alpha, zero_a) if phi_a == 0 else None  # log u~ for u = 1
    free_b = nx.where(on_b, -beta, zero_b) if phi_b == 0 else None
    u, v = nx.exp(lu_t) * mask_a, nx.exp(lv_t) * mask_b
    lu_prev, lv_prev = lu_t, lv_t
    ku = None
    for _ in range(steps):
        lu_prev, lv_prev = lu_t, lv_t
        if phi_a > 0:
            lu_t = _scaling_update(nx, coef_a, phi_a, nx.matmul(kern, v[:, :, None])[:, :, 0], lu_t, omega)
        else:
            lu_t = free_a
        u = nx.exp(lu_t) * mask_a
        ku = nx.matmul(u[:, None, :], kern)[:, 0, :] if phi_b > 0 else None
        if ku is not None:
            lv_t = _scaling_update(nx, coef_b, phi_b, ku, lv_t, omega)
        else:
            lv_t = free_b
        v = nx.exp(lv_t) * mask_b
    # A sum that under- or overflowed shows as a non-finite or out-of-range log scaling.
    limit = 700.0
    if not bool((nx.abs(nx.where(on_a, lu_t, zero_a)) < limit).all()
                & (nx.abs(nx.where(on_b, lv_t, zero_b)) < limit).all()):
        return None
    if ku is None:
        ku = nx.matmul(u[:, None, :], kern)[:, 0, :]
    neg = -float("inf")
    return (nx.where(on_a, lu_prev + alpha, neg), nx.where(on_b, lv_prev + beta, neg),
            nx.where(on_a, lu_t + alpha, neg), nx.where(on_b, lv_t + beta, neg),
            nx.log(nx.sum(v * ku, axis=-1))), kernel


def _scaling_update(nx, coef, phi: float, product, old, omega):
    """A half-step's relative log scaling ``new = coef - phi log(product)``, relaxed to ``old + omega (new - old)``
    (`omega` None: `new`). In torch each is one kernel (a scaled subtraction, ``torch.lerp``) where numpy's
    operators take two and three: on an accelerator every operation is a launch. The fused forms round the last
    bit of some entries differently."""
    if isinstance(product, torch.Tensor):
        new = torch.sub(coef, torch.log(product), alpha=phi)
        return new if omega is None else torch.lerp(old, new, omega)
    new = coef - phi * nx.log(product)
    return new if omega is None else old + omega * (new - old)


def _stabilised_kernel(nx, s_cost, alpha, beta, on_a, on_b):
    """``exp(α_i + β_j - C_ij/ε)`` where row i and column j have a scaling, 1 elsewhere: one [b, n, m] array,
    filled in place (the kernel of long texts is tens of MB; each extra pass or copy costs as much as a
    product with it)."""
    kern = -s_cost
    kern += alpha[:, :, None]
    kern += beta[:, None, :]
    off_a, off_b = ~on_a, ~on_b
    if isinstance(kern, np.ndarray):
        np.exp(kern, out=kern)
        if off_a.any():
            kern[off_a] = 1.0
        if off_b.any():
            kern.transpose(0, 2, 1)[off_b] = 1.0  # a view: sets the columns
    else:  # masked fills: the same entries, without reading the device back
        kern.exp_().masked_fill_(off_a[:, :, None], 1.0).masked_fill_(off_b[:, None, :], 1.0)
    return kern


def _finite(x):
    """Which entries are finite: numpy's ufunc, or in torch ``|x| < inf`` (two kernels, where ``torch.isfinite``
    launches four; the same answer, NaN included)."""
    if isinstance(x, torch.Tensor):
        return x.abs() < math.inf
    return np.isfinite(x)


def _read(flags: list) -> list[bool]:
    """Boolean scalars (0-d arrays; None reads as False) as Python bools, read from the device at once (one
    synchronisation)."""
    given = [x for x in flags if x is not None]
    if given and isinstance(given[0], torch.Tensor):
        given = torch.stack(given).tolist()
    values = iter(given)
    return [x is not None and bool(next(values)) for x in flags]


def _positions(mask):
    """The positions of a 1-d boolean array's set entries: one read of the device, where indexing with the mask
    itself reads it once for each array indexed."""
    if isinstance(mask, np.ndarray):
        return np.flatnonzero(mask)
    return torch.nonzero(mask).flatten()


def _any_of(masks):
    """Whether any entry of any of the boolean arrays is set, as one array (read once by the caller)."""
    out = masks[0].any()
    for mask in masks[1:]:
        out = out | mask.any()
    return out


def _scaling_step(nx, lmass, valid, log_kv, phi: float):
    """log of ``(mass / Kv)^phi`` on valid positions: phi = 0 gives 1 (even for zero mass), zero mass 0."""
    neg = -float("inf")
    if phi == 0.0:
        return nx.where(valid, nx.zeros(log_kv.shape, type_as=log_kv), neg)
    out = phi * (lmass - log_kv)
    # Zero mass (log -inf) -> -inf; a row that reaches no column (log_kv = -inf) transports nothing.
    return nx.where(valid & _finite(out), out, neg)


def _lse_minus_cost(nx, s_cost, shift, axis: int):
    """``_nx_lse(shift - s_cost, axis)`` (the same numbers) in one [b, n, m] array, worked in place."""
    x = -s_cost
    x += shift
    top = nx.max(x, axis=axis, keepdims=True)
    top = nx.where(_finite(top), top, nx.zeros(top.shape, type_as=top))
    x -= top
    if isinstance(x, np.ndarray):
        np.exp(x, out=x)
    else:
        x.exp_()
    return nx.log(nx.sum(x, axis=axis)) + nx.squeeze(top, axis=axis)


def _nx_lse(nx, x, axis: int):
    """logsumexp over `axis`, -inf (not NaN) for all -inf slices. Written out: on small arrays it is
    several times faster than scipy's ``logsumexp`` (which POT's numpy backend calls)."""
    top = nx.max(x, axis=axis, keepdims=True)
    top = nx.where(_finite(top), top, 0.0)
    return nx.log(nx.sum(nx.exp(x - top), axis=axis)) + nx.squeeze(top, axis=axis)


def _relative_change(nx, old, new):
    """Per problem ``max|x - x'| / max(max|x|, max|x'|, 1)`` for ``x = exp(new)``, ``x' = exp(old)``.

    With ``s = max(max new, max old, 0)`` the ratio equals ``max|exp(new - s) - exp(old - s)|`` exactly,
    which never overflows (the denominator becomes 1).
    """
    shift = nx.maximum(nx.maximum(nx.max(old, axis=-1), nx.max(new, axis=-1)), 0.0)[:, None]
    diff = nx.exp(new - shift) - nx.exp(old - shift)
    return nx.max(nx.abs(nx.nan_to_num(diff, nan=0.0)), axis=-1)


def _check_unbalanced(a: Tensor, b: Tensor, cost: Tensor, reg: float, reg_a: float, reg_b: float,
                      max_iter: int, tol: float, check_every: int) -> None:
    name = "unbalanced_sinkhorn_batch"
    if cost.ndim != 3 or a.shape != cost.shape[:2] or b.shape != (cost.shape[0], cost.shape[2]):
        raise ValueError(f"{name}: shapes must be a [B, n], b [B, m], cost [B, n, m], got "
                         f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(cost.shape)}.")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()) or (a < 0).any() or (b < 0).any():
        raise ValueError(f"{name}: masses `a` and `b` must be finite and non-negative.")
    if not (torch.isfinite(cost.sum()) or torch.isfinite(cost).all()):  # a finite sum has finite terms
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
