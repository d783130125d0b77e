"""Tempered (entropic) soft alignments of two token sets, batched ``[B, n, m]``: TWMD and TRWMD.

With similarities ``S`` [n, m] and temperature T, the logits are ``A = S / T``. Each side of a pair is a
soft alignment ``π`` and a value ``<π, S>``:

* **Sinkhorn** (``mode="sinkhorn"``, TWMD): `iterations` log-domain sweeps on ``exp(A)``. The candidate
  side normalises over candidate tokens, then over reference tokens (so each candidate token sends mass 1/n),
  repeated; the
  reference side does the same in the other order. Many sweeps converge to the entropic OT plan with
  uniform marginals, and both sides to ``<P*, S>``.
* **Relaxed** (``mode="softmax"``, TRWMD): one softmax per row (candidate side) or column (reference side), the
  expectation of ``S`` under the Gibbs weights; or the paper's smoothed maximum
  ``(1/n) Σ_i T log Σ_j exp(S_ij / T)`` (``relaxed="logsumexp"``), whose gradient that softmax is.

Padding is marked by boolean masks and never takes part (all -inf slices stay -inf, never NaN).
"""
from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

__all__ = ["tempered_plans", "smoothed_max_sides", "tempered_sides", "tempered_values"]


def _log_normalise(x: Tensor, dim: int, *, inplace: bool = False) -> Tensor:
    """log-softmax over `dim` that leaves all -inf (padded) slices at -inf instead of NaN (into `x` itself when
    `inplace`: the same numbers without a new [B, n, m] buffer). An all -inf slice has log-sum-exp -inf, which is
    raised to the lowest finite number: -inf minus it stays -inf, and every finite shift is unchanged."""
    shift = torch.logsumexp(x, dim=dim, keepdim=True).clamp_min_(torch.finfo(x.dtype).min)
    return x.sub_(shift) if inplace else x - shift


def _logits(sim: Tensor, row_mask: Tensor, col_mask: Tensor, temperature: float) -> Tensor:
    valid = row_mask.unsqueeze(2) & col_mask.unsqueeze(1)
    return (sim / temperature).masked_fill(~valid, -math.inf)


def tempered_plans(sim: Tensor, row_mask: Tensor, col_mask: Tensor, *, temperature: float,
                   mode: Literal["sinkhorn", "softmax"] = "sinkhorn", iterations: int = 1) -> tuple[Tensor, Tensor]:
    """The two soft alignments of a batch, as joint plans.

    Args:
        sim: Similarities [B, n, m] (rows = candidate tokens, columns = reference tokens).
        row_mask, col_mask: Bool [B, n] and [B, m]; False marks padding (gets no mass).
        temperature: T > 0. mode: "sinkhorn" (sweeps, TWMD) or "softmax" (one softmax, TRWMD).
        iterations: Sinkhorn sweeps ("sinkhorn" only).
    Returns:
        (cand_plan, ref_plan), each [B, n, m], with ``cand_plan.sum(2) = 1/n`` on real rows and
        ``ref_plan.sum(1) = 1/m`` on real columns; side values are ``(plan * sim).sum((1, 2))``.
    """
    # b=batch, n=candidate tokens (dim 1), m=reference tokens (dim 2)
    logits = _logits(sim, row_mask, col_mask, temperature)
    n = row_mask.sum(1, dtype=sim.dtype).clamp_min(1).view(-1, 1, 1)
    m = col_mask.sum(1, dtype=sim.dtype).clamp_min(1).view(-1, 1, 1)
    if mode == "softmax":
        return _log_normalise(logits, 2).exp() / n, _log_normalise(logits, 1).exp() / m
    cand, ref = logits, logits
    for _ in range(iterations):
        cand = _log_normalise(_log_normalise(cand, 1), 2)  # over candidate tokens, then reference tokens
        ref = _log_normalise(_log_normalise(ref, 2), 1)
    return cand.exp() / n, ref.exp() / m


def smoothed_max_sides(sim: Tensor, row_mask: Tensor, col_mask: Tensor, *, temperature: float
                       ) -> tuple[Tensor, Tensor]:
    """TRWMD as the paper writes it: candidate side ``(1/n) Σ_i T log Σ_j exp(S_ij / T)``, reference
    side the same over columns; [B] each. Shapes: sim [B, n, m], masks [B, n] and [B, m]."""
    logits = _logits(sim, row_mask, col_mask, temperature)
    n = row_mask.sum(1, dtype=sim.dtype).clamp_min(1)
    m = col_mask.sum(1, dtype=sim.dtype).clamp_min(1)
    rows = torch.where(row_mask, temperature * torch.logsumexp(logits, 2), torch.zeros_like(n[:, None]))
    cols = torch.where(col_mask, temperature * torch.logsumexp(logits, 1), torch.zeros_like(m[:, None]))
    return rows.sum(1) / n, cols.sum(1) / m


def _side_value(logits: Tensor, sim: Tensor, dims: tuple[int, ...], count: Tensor) -> Tensor:
    """``<plan, sim>`` of one side without keeping its plan: the log-normalisations over `dims` in turn, done in
    place on one copy of the logits (one [B, n, m] buffer instead of one per step), then ``exp``, times the
    similarities, summed, over `count` (the side's real token count, [B])."""
    x = logits.clone()
    for dim in dims:
        _log_normalise(x, dim, inplace=True)
    return x.exp_().mul_(sim).sum((1, 2)) / count


def tempered_sides(x: Tensor, x_mask: Tensor, y: Tensor, y_mask: Tensor, *, temperature: float,
                   mode: Literal["sinkhorn", "softmax"] = "sinkhorn", iterations: int = 1,
                   relaxed: Literal["expectation", "logsumexp"] = "expectation", return_plan: bool = True
                   ) -> tuple[Tensor, Tensor, Tensor | None]:
    """Side values of padded batches of unit vectors x [B, n, d] and y [B, m, d] with ``S = x yᵀ``:
    (candidate side [B], reference side [B], candidate-side plan [B, n, m]; None for the smoothed
    maximum, which has no plan, and when `return_plan` is False; ``relaxed`` applies to the softmax mode).

    The values are computed the same way whether or not the plan is asked for (so a text met with itself gives
    bitwise its self-similarity either way); the plan is the :func:`tempered_plans` one."""
    return tempered_values(torch.bmm(x, y.transpose(1, 2)), x_mask, y_mask, temperature=temperature, mode=mode,
                           iterations=iterations, relaxed=relaxed, return_plan=return_plan)


def tempered_values(sim: Tensor, x_mask: Tensor, y_mask: Tensor, *, temperature: float,
                    mode: Literal["sinkhorn", "softmax"] = "sinkhorn", iterations: int = 1,
                    relaxed: Literal["expectation", "logsumexp"] = "expectation", return_plan: bool = True,
                    symmetric: bool = False) -> tuple[Tensor, Tensor, Tensor | None]:
    """:func:`tempered_sides` from the similarities ``S`` [B, n, m] themselves (e.g. cosines of vectors that are
    not unit rows, :func:`movers.core.pairs.cosines`). `symmetric`: each problem compares a text with itself
    (``S`` symmetric, the same masks): the reference side is the candidate side of the transposed problem, the
    same value, and is not computed again.

    With similarities in [-1, 1] (cosines) and ``2 / T`` below :data:`DIRECT_RANGE` the values are computed on
    the kernel ``exp((S - 1) / T)`` itself, one exponential for both sides (the normalisations are divisions by
    sums; no entry leaves the float range); at smaller temperatures, in the log domain. Both are the same
    quantities, to float rounding."""
    plan = tempered_plans(sim, x_mask, y_mask, temperature=temperature, mode=mode, iterations=iterations)[0] \
        if return_plan and not (mode == "softmax" and relaxed == "logsumexp") else None
    if mode == "softmax" and relaxed == "logsumexp":
        return (*smoothed_max_sides(sim, x_mask, y_mask, temperature=temperature), None)
    n = x_mask.sum(1, dtype=sim.dtype).clamp_min(1)
    m = y_mask.sum(1, dtype=sim.dtype).clamp_min(1)
    # candidate side: over candidate tokens, then reference tokens (Sinkhorn), or one softmax over references
    cand_dims, ref_dims = ((1, 2) * iterations, (2, 1) * iterations) if mode == "sinkhorn" else ((2,), (1,))
    if 2.0 / temperature < DIRECT_RANGE:
        valid = x_mask.unsqueeze(2) & y_mask.unsqueeze(1)
        kernel = sim.sub(1.0).div_(temperature).exp_().mul_(valid)  # one new [B, n, m] array
        cand = _direct_value(kernel, sim, cand_dims, n, inplace=symmetric)
        return cand, cand if symmetric else _direct_value(kernel, sim, ref_dims, m, inplace=True), plan
    logits = _logits(sim, x_mask, y_mask, temperature)
    cand = _side_value(logits, sim, cand_dims, n)
    return cand, cand if symmetric else _side_value(logits, sim, ref_dims, m), plan


DIRECT_RANGE = 600.0
"""Largest ``2 / T`` at which :func:`tempered_values` works on the kernel itself: its entries then stay above
``exp(-600)``, far from float64's underflow (``exp(-708)``); a colder temperature works in the log domain."""


def _direct_value(kernel: Tensor, sim: Tensor, dims: tuple[int, ...], count: Tensor, *, inplace: bool) -> Tensor:
    """``<plan, sim> / count`` with the plan the kernel normalised over `dims` in turn (a padded slice sums to 0
    and stays 0)."""
    x = kernel if inplace else kernel.clone()
    tiny = torch.finfo(x.dtype).tiny
    for dim in dims:
        x.div_(x.sum(dim, keepdim=True).clamp_min_(tiny))
    return x.mul_(sim).sum((1, 2)) / count
