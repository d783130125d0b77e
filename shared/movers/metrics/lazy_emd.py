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
from typing import Any, Callable, Iterable, Literal, Sequence, Union

import numpy as np
import torch

from .._validation import check_choice, check_number, check_pairs
from ..centering import Centering, CenteringSpec, centring_means, check_centering, chunked_corpus_means
from ..embedding import Encoder, load_encoder
from ..explanation import Explanation, plot_explanation
from ..guards import check_encoder_inputs
from ..histogram import Alignment, Histogram, unit_rows
from ..distributed import current_scope
from ..idf import Idf, call_idf
from ..references import CHUNK, ReferenceGroups, segment_chunks
from ..result import Scores
from ..scoring_options import with_scoring_options
from .. import progress
from ..signature import format_float, format_signature, library_versions, nrefs_label
from ..transport import emd, solve_ragged, unbalanced_sinkhorn_batch

__all__ = ["lazy_emd", "lazy_emd_from_embeddings", "lazy_emd_masses", "LazyEmdPairs", "lazy_emd_plot", "PRESETS",
           "DEFAULT_PRESET", "HIGHER_IS_BETTER", "MASK_THRESHOLD"]

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


@dataclass(frozen=True)
class LazyEmdPairs:
    """Per (prediction, reference) pair: the Lazy-EMD ``distances`` ``<C, P*>`` (after the mask), the
    solver's ``converged`` and ``iterations``, and (on request) the plans P* as scored."""

    distances: list[float]
    converged: list[bool]
    iterations: list[int]
    plans: list[np.ndarray] | None = None
    costs: list[np.ndarray] | None = None
    masked_out: list[bool] | None = None  # the mask removed every plan entry: distance 0 from no match at all


def lazy_emd_from_embeddings(predictions: Sequence[Histogram], references: Sequence[Histogram], *,
                             reg: float = 0.009, reg_candidate: float = 0.23, reg_reference: float = 0.31,
                             mask: float | None = MASK_THRESHOLD,
                             solver: Literal["sinkhorn", "sinkhorn-plain", "emd"] = "sinkhorn",
                             max_iter: int = 200_000, tol: float = 1e-6, device: torch.device | str | None = None,
                             return_plans: bool = False) -> LazyEmdPairs:
    """The formula, for aligned pairs ``(predictions[k], references[k])`` of token histograms.

    With unit vectors x̂ (prediction, rows, masses μ) and ŷ (reference, columns, masses ν) and
    ``C = clamp(1 - x̂ ŷᵀ, 0, 2)``, the plan P* minimises ``<C, P> + ε Σ P (log P - 1) + λc KL(P1 | μ)
    + λr KL(Pᵀ1 | ν)`` (batched log-domain scaling iterations; "sinkhorn-plain": the original's plain
    iterations; "emd": the exact balanced plan, the original's WMD baseline), plan entries with
    ``C >= mask`` are zeroed (the original's post-solve mask; None: none), and the distance is ``<C, P*>``.
    """
    costs = [(1.0 - unit_rows(torch.as_tensor(h.points, dtype=torch.float64))
              @ unit_rows(torch.as_tensor(r.points, dtype=torch.float64)).T).clamp_(0.0, 2.0)
             for h, r in zip(predictions, references)]
    a = [torch.as_tensor(h.mass, dtype=torch.float64) for h in predictions]
    b = [torch.as_tensor(r.mass, dtype=torch.float64) for r in references]
    if solver == "emd":
        solved = [emd(a_k, b_k, c) for a_k, b_k, c in zip(a, b, costs)]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # reported once, per segment, by the caller
            solved = solve_ragged(unbalanced_sinkhorn_batch, a, b, costs, budget=_SOLVER_BUDGET, device=device,
                                  reg=reg, reg_a=reg_candidate, reg_b=reg_reference, max_iter=max_iter, tol=tol,
                                  accelerate=solver == "sinkhorn")
    plans = [t.plan if mask is None else t.plan * (c < mask) for t, c in zip(solved, costs)]
    masked_out = [mask is not None and float(t.plan.sum()) > 0 and float(p.sum()) <= 1e-12 * float(t.plan.sum())
                  for t, p in zip(solved, plans)]
    return LazyEmdPairs(distances=[float((p * c).sum()) for p, c in zip(plans, costs)],
                        masked_out=masked_out,
                        converged=[bool(t.converged) for t in solved],
                        iterations=[int(t.iterations) for t in solved],
                        plans=[p.numpy() for p in plans] if return_plans else None,
                        costs=[c.numpy() for c in costs] if return_plans else None)


@with_scoring_options("lazy_emd")
def lazy_emd(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
             reg: float = 0.009, reg_candidate: float = 0.23, reg_reference: float = 0.31,
             preset: str = DEFAULT_PRESET, mask: MaskSpec = None, idf: IdfSpec = False,
             model: str | None = None, layer: int = -1,
             reference_aggregation: Literal["min", "mean"] = "min", max_iter: int = 200_000,
             tol: float = 1e-6, solver: Literal["sinkhorn", "sinkhorn-plain", "emd"] = "sinkhorn",
             long_texts: Literal["window", "truncate", "error"] = "window", return_matching: bool = False,
             batch_size: int = 64, device: str | None = None, verbose: bool = False, encoder: Encoder | None = None,
             return_plans: bool = False, centering: CenteringSpec = "none", centering_batch: int = 32) -> Scores:
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
        return_plans: Add ``extra["alignments"]``: per segment and reference, a
            :class:`~movers.explain.Explanation` (tokens, masses, cost, the plan P* as scored, distance).
        centering: Subtract a token mean from the token vectors before the cosine cost (Chen et al.
            2020's batch centring, as :func:`~movers.twmd`), predictions and references separately,
            means over the real (non-special) tokens: "none" (default; the original, kept by the
            development sets, see the card), "corpus" (order-free), "batch" (each run of
            `centering_batch` consecutive segments; order dependent) or a fitted
            :class:`~movers.Centering` (``movers.fit_centering("lazy_emd", ...)``; call-free).
        centering_batch: k for ``centering="batch"`` (32).
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
    check_number(name, "batch_size", batch_size, low=1, integer=True)
    check_number(name, "tol", tol, low=0.0, low_open=True)
    if not isinstance(idf, (bool, Idf)):
        raise TypeError(f"{name}: `idf` must be a bool or an Idf table, got {type(idf).__name__}.")
    for arg, value in (("return_matching", return_matching), ("return_plans", return_plans)):
        if not isinstance(value, bool):
            raise TypeError(f"{name}: `{arg}` must be a bool, got {type(value).__name__}.")
    if encoder is None:
        check_number(name, "layer", layer, integer=True)
        encoder = load_encoder(model, layer=layer, device=device, long_texts=long_texts)
    elif model is not None:
        raise ValueError(f"{name}: pass either `encoder` or `model`, not both.")

    check_centering(name, centering, centering_batch, len(preds))
    if isinstance(centering, Centering):
        centering.check(name, encoder.name, encoder.layer_label, _KEPT_LABEL)

    groups = ReferenceGroups.of(refs)
    check_encoder_inputs(name, encoder, preds, refs)  # no content token, or too large: fail before the model runs
    # This process scores segments `part` (all of them unless scoring is distributed or streamed; whole
    # centring batches); per-call IDF and corpus centring are summed over the scope.
    scope = current_scope()
    part = scope.part(len(preds), multiple=centering_batch if centering == "batch" else 1)
    local_preds, local = preds[part.start:part.stop], ReferenceGroups.of(refs[part.start:part.stop])
    table, idf_label = _resolve_idf(name, idf, lambda: encoder.iter_token_ids(local.flat), encoder.name)
    # Bounded memory: embed and solve CHUNK segments at a time (whole centring batches). Corpus centring
    # needs the means of the whole call first: over several chunks that is one extra encoder pass (sums only).
    chunks = segment_chunks(len(local_preds), CHUNK, centering_batch if centering == "batch" else 1)

    def embedded(chunk: range):
        group = ReferenceGroups.of(refs[part.start + chunk.start:part.start + chunk.stop])
        emb = encoder.embed(local_preds[chunk.start:chunk.stop] + group.flat, batch_size=batch_size, verbose=verbose)
        return emb.select(0, len(chunk)), emb.select(len(chunk), len(emb)), group

    def real(hyp, ref, group):
        return [_real(hyp, i) for i in range(len(hyp))], [_real(ref, k) for k in range(len(group.flat))]

    first = None  # a single chunk's embeddings, used once for the corpus means and the scores
    if centering == "corpus":
        means, first = chunked_corpus_means(chunks, embedded, lambda data: real(*data), total=scope.total,
                                            dim=encoder.vector_size)
        corpus = Centering(*means, encoder.name, encoder.layer_label, _KEPT_LABEL)
    scope.statistics_done()
    mode = corpus if centering == "corpus" else centering
    center_label = "corpus" if centering == "corpus" else centring_means(mode, [], [], [], centering_batch,
                                                                         dim=encoder.vector_size)[2]
    keep = return_plans or return_matching
    solved = LazyEmdPairs([], [], [], [] if keep else None, [] if keep else None, [])
    alignments = []
    for chunk in chunks:
        hyp, ref, group = first if first is not None else embedded(chunk)
        first = None
        hyp_vecs, ref_vecs = list(hyp.vectors), list(ref.vectors)
        if centering != "none":
            mu_h, mu_r, _ = centring_means(mode, *real(hyp, ref, group), group.owner, centering_batch,
                                           dim=encoder.vector_size)
            hyp_vecs = [v.to(torch.float64) - mu_h[i] for i, v in enumerate(hyp_vecs)]
            ref_vecs = [v.to(torch.float64) - mu_r[group.owner[k]] for k, v in enumerate(ref_vecs)]
        hyp_sides = [Histogram(hyp.tokens[i], lazy_emd_masses(hyp.ids[i], hyp.special[i], table), hyp_vecs[i])
                     for i in range(len(hyp_vecs))]
        ref_sides = [Histogram(ref.tokens[k], lazy_emd_masses(ref.ids[k], ref.special[k], table), ref_vecs[k])
                     for k in range(len(group.flat))]
        part_solved = lazy_emd_from_embeddings([hyp_sides[i] for i in group.owner], ref_sides, reg=reg,
                                               reg_candidate=reg_candidate, reg_reference=reg_reference,
                                               mask=threshold, solver=solver, max_iter=max_iter, tol=tol,
                                               device=encoder.device, return_plans=keep)
        progress.pairs_done(len(ref_sides))
        solved.distances.extend(part_solved.distances)
        solved.converged.extend(part_solved.converged)
        solved.iterations.extend(part_solved.iterations)
        solved.masked_out.extend(part_solved.masked_out or [False] * len(part_solved.distances))
        if keep:
            solved.plans.extend(part_solved.plans)
            solved.costs.extend(part_solved.costs)
            for k, i in enumerate(group.owner):
                pair = Alignment(score=part_solved.distances[k], distance=part_solved.distances[k],
                                 cost=part_solved.costs[k], plan=part_solved.plans[k])
                alignments.append(Explanation.of(name, hyp_sides[i], ref_sides[k], pair, cost_label="1 - cos"))
        del hyp, ref, hyp_vecs, ref_vecs, hyp_sides, ref_sides, part_solved  # before the next chunk is embedded
    alignments = scope.gather(alignments)
    pairs = LazyEmdPairs(*(scope.gather(values) for values in (solved.distances, solved.converged,
                                                                solved.iterations)),
                         masked_out=scope.gather(solved.masked_out or [False] * len(solved.distances)))
    not_converged = sorted({groups.owner[k] for k, ok in enumerate(pairs.converged) if not ok})
    if not_converged:
        warnings.warn(f"{name}: segments {not_converged[:10]} did not converge within "
                      f"max_iter={max_iter} iterations (tol {tol:g}); their scores are the last iterate. "
                      f"Increase `max_iter` or `reg`, or use larger `reg_candidate`/`reg_reference`.",
                      RuntimeWarning, stacklevel=2)
    masked_out = sorted({groups.owner[k] for k, out in enumerate(pairs.masked_out or []) if out})
    if masked_out:
        warnings.warn(f"{name}: segments {masked_out[:10]} have distance 0 only because the mask removed every "
                      f"plan entry (no token pair with cos > {1 - threshold:.3g}): nothing was matched, which is "
                      f"not evidence of similarity. preset='paper' (no mask) scores these pairs.",
                      RuntimeWarning, stacklevel=2)
    scores = groups.aggregate(pairs.distances, reference_aggregation)
    converged = [all(c) for c in groups.split(pairs.converged)]
    iterations = [max(it) for it in groups.split(pairs.iterations)]
    similarities = [1.0 - d for d in scores]
    signature = format_signature("LazyEMD", [
        ("preset", preset),
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        ("model", encoder.name),
        ("layer", encoder.layer_label),
        ("center", center_label),
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
    if groups.multiple:
        extra["per_reference"] = groups.split(pairs.distances)
    if return_matching:
        extra["matching"] = groups.split([{"prediction_tokens": e.prediction_labels, "reference_tokens":
                                           e.reference_labels, "weights": e.plan.tolist(), "distance": e.distance}
                                          for e in alignments])
    if return_plans:
        extra["alignments"] = groups.split(alignments)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=signature, extra=extra)


_KEPT_LABEL = "lazy_emd[real-tokens]"
"""The token selection of lazy_emd's centring means (a fitted table's ``preset`` field)."""


def _real(emb, i: int) -> torch.Tensor:
    """float64 vectors of the real (non-special) tokens of text `i`: the ones with mass."""
    return emb.vectors[i].to(torch.float64)[[p for p, s in enumerate(emb.special[i]) if not s]]


def _centring_vectors(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
                      model: str | None = None, layer: int = -1, long_texts: str = "window", batch_size: int = 64,
                      device: str | None = None, verbose: bool = False, encoder: Encoder | None = None,
                      **_unused) -> tuple[list[torch.Tensor], list[torch.Tensor], str, str, str]:
    """Real-token vectors of predictions and all references, for :func:`movers.fit_centering`."""
    preds, refs = check_pairs("lazy_emd", predictions, references)
    if encoder is None:
        encoder = load_encoder(model, layer=layer, device=device, long_texts=long_texts)
    flat = ReferenceGroups.of(refs).flat
    emb = encoder.embed(preds + flat, batch_size=batch_size, verbose=verbose)
    vecs = [_real(emb, j) for j in range(len(emb))]
    return vecs[:len(preds)], vecs[len(preds):], encoder.name, encoder.layer_label, _KEPT_LABEL


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


def _resolve_idf(name: str, idf: IdfSpec, ref_ids: Callable[[], Iterable[list[int]]],
                 tokenizer: str) -> tuple[Idf | None, str]:
    """(table, signature label); None = uniform masses. `ref_ids`: the references' token ids, on demand."""
    if idf is False:
        return None, "uniform"
    if idf is True:
        table = call_idf(ref_ids(), tokenizer=tokenizer)  # document frequencies of the whole call
        if table.n_docs == 1:
            warnings.warn(f"{name}: idf=True computes IDF from the references of this call; with a single "
                          f"reference every token gets weight 0 (uniform masses are used instead). Pass "
                          f"idf=False or a fitted movers.Idf table.", RuntimeWarning, stacklevel=3)
        return table, "idf-call"
    idf.check(name, tokenizer)
    return idf, f"idf-{idf.label}"


def lazy_emd_masses(ids: list[int], special: list[bool], table: Idf | None) -> torch.Tensor:
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


def lazy_emd_plot(matching: Explanation | dict[str, Any], *, ax: Any = None, specials: bool = False,
                  annotate: bool = True, title: str | None = None) -> Any:
    """Draw one matching as a heat map of the plan P*: :func:`~movers.explain.plot_explanation` of an
    entry of ``extra["alignments"][i]`` (or of an ``extra["matching"][i]`` dict).

    Rows are prediction tokens, columns reference tokens; cell (i, j) is the share of the moved mass
    that goes from token i to token j. Tokens without mass that receive none ([CLS]/[SEP] unless a
    marginal strength is 0) are hidden unless `specials`. Returns the matplotlib Axes.
    """
    if isinstance(matching, dict):
        plan = np.asarray(matching["weights"], dtype=np.float64)
        n, m = plan.shape
        matching = Explanation(metric="lazy_emd", prediction_labels=list(matching["prediction_tokens"]),
                               reference_labels=list(matching["reference_tokens"]),
                               prediction_mass=plan.sum(1), reference_mass=plan.sum(0), cost=np.zeros_like(plan),
                               plan=plan, score=matching["distance"], distance=matching["distance"],
                               cost_label="1 - cos")
    return plot_explanation(matching, ax=ax, annotate=annotate, hide_massless=not specials,
                            title=title if title is not None else
                            f"Lazy-EMD plan P* (distance {matching.distance:.4f})")
