"""Lazy-EMD (Chen, Lan, Xiong, Pang, Ma and Cheng, IJCAI 2020): evaluation by unbalanced optimal transport.

A prediction's tokens (rows, masses μ) and a reference's tokens (columns, masses ν) are matched by the
entropic unbalanced transport problem

    P* = argmin_P  <C, P> + ε Σ_ij P_ij (log P_ij - 1) + λc KL(P 1 | μ) + λr KL(Pᵀ1 | ν),

with cost C_ij = 1 - cos(x_i, y_j) between contextual token vectors, and the score is the transport
cost  Lazy-EMD = <C, P*>  (a distance: lower is better; not normalised by the transported mass, not
including the KL terms). λc (`reg_candidate`) relaxes the prediction's marginal, λr (`reg_reference`)
the reference's. Limits (tested): λc = λr = ∞ is the entropic EMD (→ WMD as ε → 0); (∞, 0) gives
``1 - precision`` and (0, ∞) ``1 - recall`` of BERTScore (ε → 0, no mask, same weights).

=========== ====================================================== =====================================
preset      original                                               settings
=========== ====================================================== =====================================
"original"  Beastlyprime/lazy_emd HEAD 1e9a256 (``Scorer``)        plan entries with C >= 0.999 zeroed
                                                                   after solving (default)
"paper"     the formula above                                      no mask
=========== ====================================================== =====================================

Common to both (the original): masses 1/(L-2) on the real tokens and 0 on [CLS]/[SEP], which stay as
rows and columns (they can receive mass only from a side with λ = 0); ε = 0.009, λc = 0.23, λr = 0.31;
the original's stopping rule (every 10 iterations, mean relative change of the scalings <= 1e-6, at
most 200,000 iterations). The solver is log-domain stabilised, float64, batched (many pairs per call),
and by default accelerated (translation steps and over-relaxation: the same optimum in fewer
iterations); ``solver="sinkhorn-plain"`` runs the original's plain iterations.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal, Sequence, Union

import numpy as np
import torch

from .._validation import check_choice, check_number, check_pairs
from ..embedding import Encoder, TokenEmbeddings
from ..idf import Idf, idf_from_ids
from ..result import Scores
from ..signature import format_float, format_signature, library_versions, nrefs_label
from ..transport import emd, unbalanced_sinkhorn_batch

__all__ = ["lazy_emd", "lazy_emd_plot", "PRESETS", "DEFAULT_PRESET", "HIGHER_IS_BETTER", "MASK_THRESHOLD"]

HIGHER_IS_BETTER = False
"""`scores` are distances (lower is better); `similarities` = 1 - distance are higher-is-better."""
DEFAULT_PRESET = "original"
MASK_THRESHOLD = 0.999
"""The original's post-solve mask: plan entries with cost >= 0.999 (cos <= 0.001) are zeroed."""

MaskSpec = Union[bool, float, None]
IdfSpec = Union[bool, Idf]

# Padded elements (problems x rows x columns) per solver call: bounds memory, never changes a number.
_SOLVER_BUDGET = 1 << 22


@dataclass(frozen=True)
class Preset:
    mask: float | None  # cost threshold of the post-solve mask, None = no mask


PRESETS: dict[str, Preset] = {
    "original": Preset(mask=MASK_THRESHOLD),
    "paper": Preset(mask=None),
}


def lazy_emd(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
             reg: float = 0.009, reg_candidate: float = 0.23, reg_reference: float = 0.31,
             preset: str = DEFAULT_PRESET, mask: MaskSpec = None, idf: IdfSpec = False,
             model: str | None = None, layer: int = -1,
             reference_aggregation: Literal["min", "mean"] = "min", max_iter: int = 200_000,
             tol: float = 1e-6, solver: Literal["sinkhorn", "sinkhorn-plain", "emd"] = "sinkhorn",
             long_texts: Literal["window", "truncate", "error"] = "window", return_matching: bool = False, batch_size: int = 64, device: str | None = None,
             verbose: bool = False, encoder: Encoder | None = None) -> Scores:
    """Lazy-EMD distance of each prediction to its reference(s), and the similarity ``1 - distance``.

    Args:
        predictions: Hypotheses (candidates), one per segment.
        references: One reference per segment (str) or a non-empty list per segment (ragged allowed).
        reg: Entropic strength ε > 0 (original 0.009).
        reg_candidate: λc in [0, inf], KL weight of the prediction (row) marginal (original 0.23);
            ``float("inf")`` makes it exact, 0 frees it.
        reg_reference: λr in [0, inf], KL weight of the reference (column) marginal (original 0.31).
        preset: "original" (default: post-solve mask C >= 0.999) or "paper" (no mask).
        mask: Override the preset: True (threshold 0.999), False (no mask) or a cost threshold in (0, 2].
        idf: False (default, the original): uniform masses 1/(L-2) on real tokens; True: IDF from this
            call's references (bert_score's convention, used for both sides; the 2020 version of the
            original); or a fitted :class:`~movers.idf.Idf` table. [CLS]/[SEP] always get mass 0.
        model: Hub id or local folder; None = the bundled all-MiniLM-L6-v2.
        layer: ``hidden_states`` index (-1 = last = 6 for MiniLM, the fixtures' setting).
        reference_aggregation: "min" (default: the closest reference) or "mean" over references.
        max_iter, tol: The original's iteration cap (200,000) and stopping threshold (1e-6).
        solver: "sinkhorn" (default): Lazy-EMD by the accelerated scaling iterations (translation
            steps and over-relaxation, see :func:`~movers.transport.unbalanced_sinkhorn_batch`): the same
            optimum as the original's iterations, in far fewer iterations when λ >> ε.
            "sinkhorn-plain": the original's plain iterations (same start, same stopping rule: the
            original's iteration counts and stopped plans). "emd": exact EMD (network simplex, float64)
            with the same masses and cost and no mask = the original's WMD baseline (``Scorer._wmd``),
            the limit λc, λr -> ∞, ε -> 0; `reg`, `reg_candidate`, `reg_reference`, `max_iter`, `tol`
            are unused.
        long_texts: "window" (sliding windows, default), "truncate" (first 510 pieces, as the
            original) or "error".
        return_matching: Add ``extra["matching"]``: per segment and reference, the tokens and the plan
            P* as scored (mask applied), for :func:`lazy_emd_plot`.
        batch_size, device, verbose: Runtime only; never change a score.
        encoder: A ready :class:`Encoder` (overrides `model`, `layer`, `device`, `long_texts`).
    Returns:
        :class:`~movers.result.Scores`: ``scores`` = distances (lower is better), ``score`` their mean,
        ``extra``: ``similarities`` (``1 - distance``, higher is better, 1 for identical texts) and
        their mean ``similarity``; ``converged`` and ``iterations`` per segment (worst reference);
        ``per_reference`` distances with several references; ``matching`` on request.
    Raises:
        ValueError / TypeError: On malformed inputs or options (the message names the argument).

    Example:
        >>> out = lazy_emd(["The man in a coat."], ["The young man in a slicker."])  # doctest: +SKIP
        >>> round(out.scores[0], 4), round(out.extra["similarities"][0], 4)  # doctest: +SKIP
    """
    name = "lazy_emd"
    preds, refs = check_pairs(name, predictions, references)
    check_number(name, "reg", reg, low=0.0, low_open=True)
    _check_strength(name, "reg_candidate", reg_candidate)
    _check_strength(name, "reg_reference", reg_reference)
    check_choice(name, "preset", preset, list(PRESETS))
    check_choice(name, "solver", solver, ["sinkhorn", "sinkhorn-plain", "emd"])
    if solver == "emd" and mask is not None:
        raise ValueError(f"{name}: `mask` applies to the Sinkhorn solvers only (the original's WMD baseline has "
                         f"no mask), got mask={mask!r} with solver='emd'.")
    threshold = None if solver == "emd" else _resolve_mask(name, mask, PRESETS[preset])
    check_choice(name, "reference_aggregation", reference_aggregation, ["min", "mean"])
    check_number(name, "max_iter", max_iter, low=1, integer=True)
    check_number(name, "tol", tol, low=0.0, low_open=True)
    if not isinstance(idf, (bool, Idf)):
        raise TypeError(f"{name}: `idf` must be a bool or an Idf table, got {type(idf).__name__}.")
    if not isinstance(return_matching, bool):
        raise TypeError(f"{name}: `return_matching` must be a bool, got {type(return_matching).__name__}.")
    if encoder is None:
        check_number(name, "layer", layer, integer=True)
        encoder = Encoder(model, layer=layer, device=device, long_texts=long_texts)
    elif model is not None:
        raise ValueError(f"{name}: pass either `encoder` or `model`, not both.")

    flat_refs = [r for group in refs for r in group]
    emb = encoder.embed(preds + flat_refs, batch_size=batch_size, verbose=verbose)
    hyp = _slice(emb, 0, len(preds))
    ref = _slice(emb, len(preds), len(emb.ids))
    table, idf_label = _resolve_idf(name, idf, ref.ids)
    pair_hyp = [i for i, group in enumerate(refs) for _ in group]  # prediction index of each pair

    hyp_mass = [_masses(hyp.ids[i], hyp.special[i], table) for i in range(len(preds))]
    ref_mass = [_masses(ref.ids[k], ref.special[k], table) for k in range(len(flat_refs))]
    hyp_unit = [_unit(v) for v in hyp.vectors]
    ref_unit = [_unit(v) for v in ref.vectors]
    costs = [(1.0 - hyp_unit[i] @ ref_unit[k].T).clamp_(0.0, 2.0) for k, i in enumerate(pair_hyp)]
    if solver == "emd":
        solved = _solve_exact(costs, [hyp_mass[i] for i in pair_hyp], ref_mass)
    else:
        solved = _solve(costs, [hyp_mass[i] for i in pair_hyp], ref_mass, reg=reg, reg_a=reg_candidate,
                        reg_b=reg_reference, max_iter=max_iter, tol=tol, device=encoder.device,
                        accelerate=solver == "sinkhorn")

    distances, converged, iterations, plans = [], [], [], []
    for k, (plan, cost) in enumerate(zip(solved["plans"], costs)):
        if threshold is not None:
            plan = plan * (cost < threshold)
        distances.append(float((plan * cost).sum()))
        plans.append(plan)
    not_converged = [pair_hyp[k] for k in range(len(costs)) if not solved["converged"][k]]
    if not_converged:
        warnings.warn(f"{name}: segments {sorted(set(not_converged))[:10]} did not converge within "
                      f"max_iter={max_iter} iterations (tol {tol:g}); their scores are the last iterate. "
                      f"Increase `max_iter` or `reg`, or use larger `reg_candidate`/`reg_reference`.",
                      RuntimeWarning, stacklevel=2)

    per_reference: list[list[float]] = []
    matching: list[list[dict[str, Any]]] = []
    k = 0
    for i, group in enumerate(refs):
        ks = range(k, k + len(group))
        per_reference.append([distances[j] for j in ks])
        converged.append(all(solved["converged"][j] for j in ks))
        iterations.append(max(solved["iterations"][j] for j in ks))
        if return_matching:
            matching.append([{"prediction_tokens": hyp.tokens[i], "reference_tokens": ref.tokens[j],
                              "weights": plans[j].tolist(), "distance": distances[j]} for j in ks])
        k += len(group)
    agg = min if reference_aggregation == "min" else (lambda xs: sum(xs) / len(xs))
    scores = [float(agg(d)) for d in per_reference]
    similarities = [1.0 - d for d in scores]
    signature = format_signature("LazyEMD", [
        ("preset", preset),
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        ("model", encoder.name),
        ("layer", encoder.layer_label),
        ("mass", idf_label),
        ("mask", "none" if threshold is None else format_float(threshold)),
        ("long", encoder.long_texts),
        ("ot", "emd" if solver == "emd" else
         f"uot-{solver}[reg={format_float(reg)},reg_c={format_float(reg_candidate)},"
         f"reg_r={format_float(reg_reference)},iter={max_iter},tol={format_float(tol)}]"),
        *library_versions("transformers", "torch"),
    ])
    extra: dict[str, Any] = {"similarity": float(np.mean(similarities)), "similarities": similarities,
                             "converged": converged, "iterations": iterations}
    if any(len(g) > 1 for g in refs):
        extra["per_reference"] = per_reference
    if return_matching:
        extra["matching"] = matching
    return Scores(score=float(np.mean(scores)), scores=scores, signature=signature, extra=extra)


def _check_strength(name: str, arg: str, value: Any) -> None:
    """λ in [0, inf]: like check_number, but infinity is a meaningful value (exact marginal)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: `{arg}` must be a number in [0, inf], got {type(value).__name__} {value!r}.")
    if math.isnan(value) or value < 0:
        raise ValueError(f"{name}: `{arg}` must be a number in [0, inf], got {value}.")


def _resolve_mask(name: str, mask: MaskSpec, preset: Preset) -> float | None:
    if mask is None:
        return preset.mask
    if mask is True:
        return MASK_THRESHOLD
    if mask is False:
        return None
    check_number(name, "mask", mask, low=0.0, high=2.0, low_open=True)
    return float(mask)


def _resolve_idf(name: str, idf: IdfSpec, ref_ids: list[list[int]]) -> tuple[Idf | None, str]:
    """(table, signature label); None = uniform masses."""
    if idf is False:
        return None, "uniform"
    if idf is True:
        if len(ref_ids) == 1:
            warnings.warn(f"{name}: idf=True computes IDF from the references of this call; with a single "
                          f"reference every token gets weight 0 (uniform masses are used instead). Pass "
                          f"idf=False or a fitted movers.Idf table.", RuntimeWarning, stacklevel=3)
        return idf_from_ids(ref_ids), "idf-call"
    return idf, f"idf-{idf.label}"


def _slice(e: TokenEmbeddings, start: int, stop: int) -> TokenEmbeddings:
    return TokenEmbeddings(e.tokens[start:stop], e.ids[start:stop], e.special[start:stop], e.vectors[start:stop])


def _unit(vectors: torch.Tensor) -> torch.Tensor:
    """float64 unit vectors, so that a token's cost to itself is 0 up to 1e-16 (the original: float32)."""
    x = vectors.to(torch.float64)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def _masses(ids: list[int], special: list[bool], table: Idf | None) -> torch.Tensor:
    """Masses summing to 1 over the real tokens, 0 on special tokens (which stay as rows/columns).

    Uniform: 1/(L-2) each, the rounding remainder on the last real token (the original's
    ``get_uniform_weight``). IDF: idf / sum(idf); all-zero IDF falls back to uniform.
    """
    real = np.array([not s for s in special])
    out = np.zeros(len(ids))
    if not real.any():
        return torch.from_numpy(out)
    if table is not None:
        w = np.asarray(table.lookup(ids), dtype=np.float64) * real
        if w.sum() > 0:
            return torch.from_numpy(w / w.sum())
    k = int(real.sum())
    out[real] = 1.0 / k
    last = np.flatnonzero(real)[-1]
    out[last] += 1.0 - out.sum()
    return torch.from_numpy(out)


def _solve(costs: list[torch.Tensor], a: list[torch.Tensor], b: list[torch.Tensor], *, reg: float,
           reg_a: float, reg_b: float, max_iter: int, tol: float, device: torch.device,
           accelerate: bool = True) -> dict[str, list]:
    """Solve many problems of different sizes: sorted by size, padded into chunks of bounded memory."""
    order = sorted(range(len(costs)), key=lambda k: (costs[k].shape[0] * costs[k].shape[1], costs[k].shape))
    plans: list[torch.Tensor | None] = [None] * len(costs)
    conv: list[bool] = [True] * len(costs)
    iters: list[int] = [0] * len(costs)
    start = 0
    while start < len(order):
        stop, rows, cols = start, 0, 0
        smallest = costs[order[start]].numel()
        while stop < len(order):
            n, m = costs[order[stop]].shape
            r, c = max(rows, n), max(cols, m)
            # Bounded memory, and at most ~2x padding waste (problems are sorted by size).
            if stop > start and ((stop - start + 1) * r * c > _SOLVER_BUDGET or r * c > 2 * smallest + 256):
                break
            rows, cols, stop = r, c, stop + 1
        chunk = order[start:stop]
        size = len(chunk)
        cost_b = torch.zeros(size, rows, cols, dtype=torch.float64)
        a_b = torch.zeros(size, rows, dtype=torch.float64)
        b_b = torch.zeros(size, cols, dtype=torch.float64)
        valid_a = torch.zeros(size, rows, dtype=torch.bool)
        valid_b = torch.zeros(size, cols, dtype=torch.bool)
        for row, k in enumerate(chunk):
            n, m = costs[k].shape
            cost_b[row, :n, :m] = costs[k]
            a_b[row, :n], b_b[row, :m] = a[k], b[k]
            valid_a[row, :n], valid_b[row, :m] = True, True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # reported once, per segment, by the caller
            out = unbalanced_sinkhorn_batch(
                a_b.to(device), b_b.to(device), cost_b.to(device), reg=reg, reg_a=reg_a, reg_b=reg_b,
                max_iter=max_iter, tol=tol, valid_a=valid_a.to(device), valid_b=valid_b.to(device),
                accelerate=accelerate)
        plan = out.plan.cpu()
        for row, k in enumerate(chunk):
            n, m = costs[k].shape
            plans[k] = plan[row, :n, :m].clone()
            conv[k] = bool(out.converged_each[row])
            iters[k] = int(out.iterations[row])
        start = stop
    return {"plans": plans, "converged": conv, "iterations": iters}


def _solve_exact(costs: list[torch.Tensor], a: list[torch.Tensor], b: list[torch.Tensor]) -> dict[str, list]:
    """Exact EMD per pair (the original's ``_wmd`` baseline: ``ot.emd`` on the same masses and cost)."""
    plans = [torch.from_numpy(emd(a_k.numpy(), b_k.numpy(), c.numpy()).plan) for c, a_k, b_k in zip(costs, a, b)]
    return {"plans": plans, "converged": [True] * len(costs), "iterations": [0] * len(costs)}


def lazy_emd_plot(matching: dict[str, Any], *, ax: Any = None, specials: bool = False, annotate: bool = True,
                  title: str | None = None) -> Any:
    """Draw one matching (an entry of ``extra["matching"][i]``) as a heat map of the plan P*.

    Rows are prediction tokens, columns reference tokens; cell (i, j) is the mass moved from token i
    to token j. Needs matplotlib (imported here only). Returns the matplotlib Axes.

    Args:
        matching: ``{"prediction_tokens", "reference_tokens", "weights", "distance"}`` as returned.
        ax: Axes to draw on (default: a new figure sized to the tokens).
        specials: Keep the [CLS]/[SEP] rows and columns (default: hide them; they carry no mass unless
            a marginal strength is 0).
        annotate: Write each weight (x100) in its cell.
    """
    import matplotlib.pyplot as plt

    weights = np.asarray(matching["weights"], dtype=np.float64)
    rows, cols = list(matching["prediction_tokens"]), list(matching["reference_tokens"])
    if not specials:
        keep_r = [i for i in range(len(rows)) if i not in (0, len(rows) - 1)] or list(range(len(rows)))
        keep_c = [j for j in range(len(cols)) if j not in (0, len(cols) - 1)] or list(range(len(cols)))
        weights = weights[np.ix_(keep_r, keep_c)]
        rows, cols = [rows[i] for i in keep_r], [cols[j] for j in keep_c]
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * len(cols), 0.8 + 0.45 * len(rows)))
    ax.imshow(weights, cmap="Blues", vmin=0.0, vmax=max(float(weights.max()), 1e-12))
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xlabel("reference tokens")
    ax.set_ylabel("prediction tokens")
    if annotate:
        top = float(weights.max()) or 1.0
        for i in range(weights.shape[0]):
            for j in range(weights.shape[1]):
                if weights[i, j] >= 0.005:
                    ax.text(j, i, f"{100 * weights[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if weights[i, j] > 0.6 * top else "black")
    ax.set_title(title if title is not None else f"Lazy-EMD plan P* (distance {matching['distance']:.4f})",
                 fontsize=10)
    return ax
