"""TWMD and TRWMD (Chen, Ding, Levinboim and Soricut, Eval4NLP 2020): tempered word mover similarity
between centred, L2-normalised contextual token vectors. Reproduces xchen147/BatchCenterTWMD @01fb6db.

For a candidate with kept token vectors x_1..x_n and a reference with y_1..y_m (centred, then unit
length), ``S = X Yᵀ`` and ``A = S / T``. Each side is a soft alignment ``π`` and a value ``<π, S>``:

* TWMD: ``iterations`` log-domain Sinkhorn sweeps on ``exp(A)``. The candidate side normalises over
  candidate tokens, then over reference tokens (so each candidate token sends mass 1/n), repeated;
  the reference side does the same in the other order. One sweep is the paper's setting; many sweeps
  converge to the entropic OT plan with uniform marginals, and both sides to ``<P*, S>``.
* TRWMD: one softmax, ``cand = (1/n) Σ_i Σ_j softmax_j(A)_ij S_ij`` (ref side over columns): the
  expectation of ``S`` under the Gibbs weights (the original code, default), i.e. the gradient of
  the smoothed max ``T log Σ_j exp(S_ij / T)``, which the paper writes and ``relaxed="logsumexp"``
  computes; T -> 0 gives BERTScore's mean of row (column) maxima for both.

Precision (candidate side), recall (reference side) and F = 2PR/(P+R) are each self-normalised as
the original does: ``V(c, r) / sqrt(V(c, c) V(r, r))``. (The original labels the candidate side
"R" and the reference side "P", because its metrics are called with swapped arguments.)
Centring subtracts a token mean, separately for candidates and references: per batch of k
consecutive pairs (the original, batch dependent), over the whole call, a fitted
:class:`TwmdCentering` (fixed: shards score like one call), or none.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import torch
from torch import Tensor

from .._validation import check_choice, check_number, check_pairs
from ..guards import check_encoder_inputs
from ..centering import CENTERINGS, Centering, CenteringSpec, centring_means, chunked_corpus_means
from ..distributed import current_scope
from ..embedding import Encoder, load_encoder
from ..explanation import Explanation
from ..histogram import Alignment, Histogram, unit_rows
from ..references import CHUNK, ReferenceGroups, segment_chunks
from ..result import Scores
from ..scoring_options import with_scoring_options
from .. import progress
from ..signature import format_float, format_signature, library_versions, nrefs_label
from ..transport import buckets, pad

__all__ = ["twmd", "twmd_from_embeddings", "TwmdPairs", "TwmdCentering", "tempered_plans", "default_layer",
           "DEFAULT_TEMPERATURES", "PRESETS", "HIGHER_IS_BETTER"]

HIGHER_IS_BETTER = True
VARIANTS = ("twmd", "trwmd")
PRESETS = {"wmt": True, "sts": False}
"""preset -> keep the leading special token ([CLS], <s>): the original's run_wmt.py keeps it (its default,
use_CLS=True), run_STS.py drops it; the trailing one ([SEP], </s>) is dropped by both."""
DEFAULT_TEMPERATURES = {("twmd", True): 0.1, ("twmd", False): 0.02, ("trwmd", True): 0.15, ("trwmd", False): 0.02}
"""(variant, centred) -> T: the paper's and the original's defaults (batch_center_eval.py)."""

@dataclass(frozen=True, eq=False)
class TwmdCentering(Centering):
    """A :class:`~movers.centering.Centering` fitted with the tokens :func:`twmd` keeps (the original's
    batch means, over a whole corpus); :func:`twmd` refuses one fitted with another model, layer or preset.
    """

    @classmethod
    def fit(cls, predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
            preset: Literal["wmt", "sts"] = "wmt", model: str | None = None, layer: int | None = None,
            long_texts: Literal["window", "truncate", "error"] = "window", batch_size: int = 64,
            device: str | None = None, verbose: bool = False, encoder: Encoder | None = None) -> "TwmdCentering":
        """Token means of `predictions` and (all) `references`, with the tokens :func:`twmd` keeps.

        Pass the result as ``twmd(..., centering=<it>)`` with the same model, layer and preset.
        """
        name = "twmd"
        preds, refs = check_pairs(name, predictions, references)
        check_choice(name, "preset", preset, list(PRESETS))
        encoder = _resolve_encoder(name, model, layer, device, long_texts, encoder)
        cand, ref, _, _ = _kept_vectors(encoder, preds, ReferenceGroups.of(refs).flat, PRESETS[preset], batch_size,
                                        verbose)
        return cls(prediction_mean=torch.cat(cand).double().mean(0), reference_mean=torch.cat(ref).double().mean(0),
                   model=encoder.name, layer=encoder.layer_label, preset=preset,
                   n_tokens=(sum(len(x) for x in cand), sum(len(x) for x in ref)))


def default_layer(model: str | None, config) -> int:
    """The original's default layer: 10 for BERT/RoBERTa base, 19 for large, else the last (-1).

    The original matches four hub ids exactly; here any BERT/RoBERTa checkpoint whose name starts with
    ``bert-base``/``roberta-base`` (12 layers) or ``bert-large``/``roberta-large`` (24) qualifies.
    """
    names = [str(model or ""), str(getattr(config, "_name_or_path", "") or "")]
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    for text in names:
        base = re.split(r"[/\\]", text.rstrip("/\\"))[-1].lower()
        if re.match(r"(bert|roberta)-base\b", base) and layers == 12:
            return 10
        if re.match(r"(bert|roberta)-large\b", base) and layers == 24:
            return 19
    return -1


def tempered_plans(sim: Tensor, row_mask: Tensor, col_mask: Tensor, *, temperature: float,
                   variant: Literal["twmd", "trwmd"] = "twmd", iterations: int = 1) -> tuple[Tensor, Tensor]:
    """The two soft alignments of TWMD/TRWMD for a batch, as joint plans.

    Args:
        sim: Similarities [B, n, m] (rows = candidate tokens, columns = reference tokens).
        row_mask, col_mask: Bool [B, n] and [B, m]; False marks padding (gets no mass).
        temperature: T > 0. variant: "twmd" or "trwmd". iterations: Sinkhorn sweeps (TWMD only).
    Returns:
        (cand_plan, ref_plan), each [B, n, m], with ``cand_plan.sum(2) = 1/n`` on real rows and
        ``ref_plan.sum(1) = 1/m`` on real columns; side values are ``(plan * sim).sum((1, 2))``.
    """
    # b=batch, n=candidate tokens (dim 1), m=reference tokens (dim 2)
    valid = row_mask.unsqueeze(2) & col_mask.unsqueeze(1)
    logits = (sim / temperature).masked_fill(~valid, -math.inf)
    n = row_mask.sum(1).clamp_min(1).to(sim.dtype).view(-1, 1, 1)
    m = col_mask.sum(1).clamp_min(1).to(sim.dtype).view(-1, 1, 1)
    if variant == "trwmd":
        return _log_normalise(logits, 2).exp() / n, _log_normalise(logits, 1).exp() / m
    cand, ref = logits, logits
    for _ in range(iterations):
        cand = _log_normalise(_log_normalise(cand, 1), 2)  # over candidate tokens, then reference tokens
        ref = _log_normalise(_log_normalise(ref, 2), 1)
    return cand.exp() / n, ref.exp() / m


def _log_normalise(x: Tensor, dim: int) -> Tensor:
    """log-softmax over `dim` that leaves all -inf (padded) slices at -inf instead of NaN."""
    lse = torch.logsumexp(x, dim=dim, keepdim=True)
    return x - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))


@dataclass(frozen=True)
class TwmdPairs:
    """Per (prediction, reference) pair: self-normalised ``precision`` (candidate side), ``recall``
    (reference side) and ``f1``; ``degenerate`` lists the pairs whose self-similarity was not positive
    (values set to 0); ``alignments`` (on request): score F, cost ``1 - S``, plan = the candidate-side
    alignment of the pair."""

    precision: list[float]
    recall: list[float]
    f1: list[float]
    degenerate: list[int]
    alignments: list[Alignment] | None = None


@torch.inference_mode()
def twmd_from_embeddings(predictions: Sequence[Tensor], references: Sequence[Tensor], *, temperature: float,
                         variant: Literal["twmd", "trwmd"] = "twmd", iterations: int = 1,
                         relaxed: Literal["expectation", "logsumexp"] = "expectation",
                         prediction_means: Sequence[Tensor] | None = None,
                         reference_means: Sequence[Tensor] | None = None, batch_size: int = 64,
                         device: torch.device | str | None = None, return_plans: bool = False) -> TwmdPairs:
    """The formula, for aligned pairs ``(predictions[k], references[k])`` of token vectors [n, d], [m, d].

    Each side is centred (``x - μ`` with the given per-pair means; none by default) and scaled to unit
    length; with ``S = X Yᵀ`` the candidate side ``V(c, r) = <π_c, S>`` and the reference side
    ``<π_r, S>`` come from :func:`tempered_plans` (or the smoothed maximum for TRWMD's "logsumexp").
    Precision, recall and F are self-normalised: ``V(c, r) / sqrt(V(c, c) V(r, r))``. Pairs are padded
    and solved in buckets of similar size (bounded memory); `batch_size` and `device` never change a value.
    """
    kw = {"temperature": temperature, "variant": variant, "iterations": iterations, "relaxed": relaxed}

    def unit(x: Tensor, means: Sequence[Tensor] | None, k: int) -> Tensor:  # float64, per bucket (bounded memory)
        x = x.to(torch.float64)
        return unit_rows(x if means is None else x - means[k])

    n_pairs = len(references)
    prec, rec, f1 = [0.0] * n_pairs, [0.0] * n_pairs, [0.0] * n_pairs
    plans: list[Alignment | None] = [None] * n_pairs
    bad: list[int] = []
    side = [max(len(predictions[k]), len(references[k])) for k in range(n_pairs)]
    for chunk in buckets([(side[k], side[k]) for k in range(n_pairs)], budget=_CHUNK, max_size=batch_size,
                         waste=float("inf")):
        cand = {k: unit(predictions[k], prediction_means, k) for k in chunk}
        ref = {k: unit(references[k], reference_means, k) for k in chunk}
        # One padded width for both sides: a text met with itself then gives bitwise the same sums as
        # its self-similarity, so its score is exactly 1.
        both, mask = (t.to(device) for t in pad([cand[k] for k in chunk] + [ref[k] for k in chunk]))
        x, y, xm, ym = both[: len(chunk)], both[len(chunk):], mask[: len(chunk)], mask[len(chunk):]
        c_cr, r_cr, cross_plan = _sides(x, xm, y, ym, **kw)
        c_cc, r_cc, _ = _sides(x, xm, x, xm, **kw)
        c_rr, r_rr, _ = _sides(y, ym, y, ym, **kw)
        values = []
        for num, den_a, den_b in ((c_cr, c_cc, c_rr), (r_cr, r_cc, r_rr),
                                  (_harmonic(c_cr, r_cr), _harmonic(c_cc, r_cc), _harmonic(c_rr, r_rr))):
            ok = (den_a > 0) & (den_b > 0) & torch.isfinite(den_a * den_b) & torch.isfinite(num)
            one = torch.ones_like(num)
            sa, sb = torch.where(ok, den_a, one), torch.where(ok, den_b, one)
            # num / sqrt(sa sb) written as (num / sa) sqrt(sa / sb): exactly 1 when a text meets itself
            values.append((torch.where(ok, num / sa * (sa / sb).sqrt(), torch.zeros_like(num)), ok))
        for b, k in enumerate(chunk):
            prec[k], rec[k], f1[k] = (float(v[b]) for v, _ in values)
            if not all(bool(ok[b]) for _, ok in values):
                bad.append(k)
            if return_plans:
                n, m = len(cand[k]), len(ref[k])
                cost = (1.0 - cand[k] @ ref[k].T).cpu().numpy()
                plan = cross_plan[b, :n, :m].cpu().numpy() if cross_plan is not None else _softmax_plan(cand[k], ref[k], temperature)
                plans[k] = Alignment(score=f1[k], cost=cost, plan=plan)
    return TwmdPairs(prec, rec, f1, bad, plans if return_plans else None)  # type: ignore[arg-type]


def _softmax_plan(x: Tensor, y: Tensor, temperature: float) -> "np.ndarray":
    """The alignment shown for TRWMD's smoothed maximum: its gradient, the row softmax of S/T over n."""
    return (torch.softmax(x @ y.T / temperature, dim=1) / x.shape[0]).cpu().numpy()


@with_scoring_options("twmd")
def twmd(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
         variant: Literal["twmd", "trwmd"] = "twmd", centering: CenteringSpec = "batch",
         temperature: float | None = None, iterations: int = 1,
         relaxed: Literal["expectation", "logsumexp"] = "expectation", centering_batch: int = 32,
         preset: Literal["wmt", "sts"] = "wmt", model: str | None = None, layer: int | None = None,
         reference_aggregation: Literal["max", "mean"] = "max",
         long_texts: Literal["window", "truncate", "error"] = "window", batch_size: int = 64,
         device: str | None = None, verbose: bool = False, encoder: Encoder | None = None,
         return_plans: bool = False) -> Scores:
    """TWMD or TRWMD precision, recall and F of each prediction against its reference(s).

    Args:
        predictions: Candidates, one per segment.
        references: One reference per segment (str) or a non-empty list per segment (ragged allowed).
        variant: "twmd" (Sinkhorn-tempered, default) or "trwmd" (tempered relaxed, one softmax).
        centering: "batch" (default, the paper: token means of the candidates and, separately, of the
            references of each run of `centering_batch` consecutive segments; scores depend on order
            and batch size), "corpus" (one pair of means over this call), a fitted :class:`TwmdCentering`,
            or "none".
        temperature: T > 0; None = the paper's 0.1 (TWMD) / 0.15 (TRWMD) centred, 0.02 uncentred.
        iterations: Sinkhorn sweeps for TWMD (1 = the paper); must be 1 for TRWMD.
        relaxed: TRWMD's side value: "expectation" (default; the original code and its fixtures:
            ``Σ_j softmax_j(S/T)_ij S_ij``) or "logsumexp" (the paper's smoothed maximum
            ``T log Σ_j exp(S_ij / T)``). Both tend to BERTScore's greedy max as T -> 0.
        centering_batch: k, segments per centring batch (32 = the original's batch size).
        preset: "wmt" (default: keep [CLS], drop [SEP]) or "sts" (drop both), as the original's scripts.
        model: Hub id or local folder; None = the bundled all-MiniLM-L6-v2.
        layer: hidden_states index; None = 10 for BERT/RoBERTa base, 19 for large, else the last.
        reference_aggregation: with several references, "max" (default) or "mean" of each of
            precision, recall and F separately over the references.
        long_texts: "window" (default), "truncate" or "error" for texts longer than the model window.
        batch_size, device, verbose: Runtime only; never change a score.
        encoder: A ready :class:`Encoder` (overrides `model`, `layer`, `device`, `long_texts`).
        return_plans: Add ``extra["alignments"]``: per segment and reference, a
            :class:`~movers.explain.Explanation` (kept tokens, cost ``1 - S`` of the centred unit vectors,
            the candidate-side alignment, F).
    Returns:
        :class:`~movers.result.Scores`: ``score`` (mean F), ``scores`` (F per segment), ``signature``,
        and ``extra`` ``precision``, ``recall``, ``f1`` (= scores) per segment, input order.
    Raises:
        ValueError / TypeError: On malformed inputs or options (the message names the argument).
    """
    name = "twmd"
    preds, refs = check_pairs(name, predictions, references)
    check_choice(name, "variant", variant, list(VARIANTS))
    check_choice(name, "preset", preset, list(PRESETS))
    check_choice(name, "reference_aggregation", reference_aggregation, ["max", "mean"])
    check_number(name, "iterations", iterations, low=1, integer=True)
    check_number(name, "centering_batch", centering_batch, low=1, integer=True)
    check_number(name, "batch_size", batch_size, low=1, integer=True)
    check_choice(name, "relaxed", relaxed, ["expectation", "logsumexp"])
    if variant == "twmd" and relaxed != "expectation":
        raise ValueError(f"{name}: `relaxed` applies to variant='trwmd' only, got relaxed={relaxed!r} with "
                         f"variant='twmd'.")
    if variant == "trwmd" and iterations != 1:
        raise ValueError(f"{name}: `iterations` must be 1 for variant='trwmd' (it has no Sinkhorn "
                         f"iterations), got {iterations}.")
    if not isinstance(centering, (str, Centering)):
        raise TypeError(f"{name}: `centering` must be one of {list(CENTERINGS)} or a movers.TwmdCentering, "
                        f"got {type(centering).__name__}.")
    if isinstance(centering, str):
        check_choice(name, "centering", centering, list(CENTERINGS))
    centred = not (isinstance(centering, str) and centering == "none")
    if temperature is None:
        temperature = DEFAULT_TEMPERATURES[(variant, centred)]
    check_number(name, "temperature", temperature, low=0, low_open=True)
    temperature = float(temperature)
    encoder = _resolve_encoder(name, model, layer, device, long_texts, encoder)
    if isinstance(centering, Centering):
        centering.check(name, encoder.name, encoder.layer_label, preset)
    elif centering in ("batch", "corpus") and current_scope().call_size(len(preds)) == 1:
        warnings.warn(f"{name}: centering={centering!r} on a single segment subtracts that segment's own "
                      f"token means; pass a fitted movers.TwmdCentering (or centering='none') to score "
                      f"small calls.", RuntimeWarning, stacklevel=2)

    groups = ReferenceGroups.of(refs)
    check_encoder_inputs(name, encoder, preds, refs, self_normalised=True)  # before the model runs
    # This process scores segments `part` (all unless distributed or streamed; whole centring batches).
    scope = current_scope()
    part = scope.part(len(preds), multiple=centering_batch if isinstance(centering, str) else 1)
    local_preds, local_refs = preds[part.start:part.stop], refs[part.start:part.stop]
    local = ReferenceGroups.of(local_refs)
    keep_first = PRESETS[preset]
    # Bounded memory: embed and score CHUNK segments at a time (whole centring batches). Corpus centring
    # needs the means of the whole call first: over several chunks that is one extra encoder pass (sums only).
    chunks = segment_chunks(len(local_preds), CHUNK, centering_batch if centering == "batch" else 1)

    def kept(chunk: range):
        group = ReferenceGroups.of(local_refs[chunk.start:chunk.stop])
        return (*_kept_vectors(encoder, local_preds[chunk.start:chunk.stop], group.flat, keep_first, batch_size,
                               verbose), group)

    first = None  # a single chunk's vectors, embedded once for the corpus means and the scores
    if centering == "corpus":
        means, first = chunked_corpus_means(chunks, kept, lambda data: data[:2], total=scope.total,
                                            dim=encoder.vector_size)
        corpus = Centering(*means, encoder.name, encoder.layer_label, preset)
    scope.statistics_done()
    local_pairs = TwmdPairs([], [], [], [], [] if return_plans else None)
    explained: list[Explanation] = []
    center_label = "corpus" if centering == "corpus" else centring_means(centering, [], [], [], centering_batch,
                                                                         dim=encoder.vector_size)[2]
    empty: list[str] = []  # texts with no kept token (the guard above catches them for any tokenizer encoder)
    for chunk in chunks:
        cand, ref, cand_labels, ref_labels, group = first if first is not None else kept(chunk)
        first = None
        at = part.start + chunk.start
        empty += [f"predictions[{at + i}]" for i, x in enumerate(cand) if len(x) == 0]
        empty += [f"references[{at + group.owner[k]}]" for k, x in enumerate(ref) if len(x) == 0]
        if empty:
            break  # raised below, on every rank at once
        mu_cand, mu_ref, _ = centring_means(corpus if centering == "corpus" else centering, cand, ref, group.owner,
                                            centering_batch, dim=encoder.vector_size)
        solved = twmd_from_embeddings(
            [cand[i] for i in group.owner], ref, temperature=temperature, variant=variant, iterations=iterations,
            relaxed=relaxed, prediction_means=[mu_cand[i] for i in group.owner],
            reference_means=[mu_ref[i] for i in group.owner], batch_size=batch_size, device=encoder.device,
            return_plans=return_plans)
        progress.pairs_done(len(ref))
        offset = len(local_pairs.f1)
        local_pairs.precision.extend(solved.precision)
        local_pairs.recall.extend(solved.recall)
        local_pairs.f1.extend(solved.f1)
        local_pairs.degenerate.extend(offset + k for k in solved.degenerate)
        if return_plans:
            local_pairs.alignments.extend(solved.alignments)
            explained += [Explanation.of(name, _uniform(cand_labels[i]), _uniform(ref_labels[k]), alignment,
                                         cost_label="1 - cos (centred)" if center_label != "none" else "1 - cos")
                          for k, (i, alignment) in enumerate(zip(group.owner, solved.alignments))]
        del cand, ref, mu_cand, mu_ref, solved  # before the next chunk is embedded
    empty = scope.gather(empty)  # every rank raises, or none
    if empty:
        raise ValueError(f"{name}: {', '.join(empty[:5])} must have at least one token to compare with "
                         f"preset={preset!r}, got none.")
    bad = set(local_pairs.degenerate)
    rows = scope.gather(list(zip(local_pairs.precision, local_pairs.recall, local_pairs.f1,
                                 [k in bad for k in range(len(local_pairs.f1))])))
    pairs = TwmdPairs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                      [k for k, r in enumerate(rows) if r[3]])
    explained = scope.gather(explained)
    if pairs.degenerate:
        bad = sorted({groups.owner[k] for k in pairs.degenerate})
        warnings.warn(f"{name}: segments {bad[:10]} have a non-positive self-similarity "
                      f"(all tokens equal to the centring mean?); their values are set to 0.",
                      RuntimeWarning, stacklevel=2)
    precision = groups.aggregate(pairs.precision, reference_aggregation)
    recall = groups.aggregate(pairs.recall, reference_aggregation)
    f = groups.aggregate(pairs.f1, reference_aggregation)

    fields: list[tuple[str, object]] = [
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        ("preset", preset),
        ("model", encoder.name),
        ("layer", encoder.layer_label),
        ("center", center_label),
        ("T", format_float(temperature)),
    ]
    if variant == "twmd":
        fields.append(("iter", iterations))
    else:
        fields.append(("form", relaxed))
    fields += [("long", encoder.long_texts), *library_versions("transformers", "torch")]
    signature = format_signature(variant.upper(), fields)
    extra = {"precision": precision, "recall": recall, "f1": list(f)}
    if return_plans:
        extra["alignments"] = groups.split(explained)
    return Scores(score=float(np.mean(f)), scores=f, signature=signature, extra=extra)


def _uniform(labels: list[str]) -> Histogram:
    """The labels of one side with TWMD's uniform masses 1/n (the points are not needed to explain)."""
    return Histogram(labels, np.full(len(labels), 1.0 / max(len(labels), 1)), None)


def _resolve_encoder(name: str, model: str | None, layer: int | None, device: str | None, long_texts: str,
                     encoder: Encoder | None) -> Encoder:
    """A given encoder as is; else one for `model` at `layer` (None: the original's per-model default)."""
    if encoder is not None:
        if model is not None or layer is not None:
            raise ValueError(f"{name}: pass either `encoder` or `model`/`layer`, not both.")
        return encoder
    check_choice(name, "long_texts", long_texts, ["window", "truncate", "error"])
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int)):
        raise TypeError(f"{name}: `layer` must be an int or None, got {type(layer).__name__} {layer!r}.")
    if layer is None:
        probe = load_encoder(model, layer=-1, device=device, long_texts=long_texts)
        layer = default_layer(model, probe.backbone.model.config)
    return load_encoder(model, layer=layer, device=device, long_texts=long_texts)


def _kept_vectors(encoder: Encoder, preds: list[str], refs: list[str], keep_first: bool, batch_size: int,
                  verbose: bool) -> tuple[list[Tensor], list[Tensor], list[list[str]], list[list[str]]]:
    """Token vectors of the kept positions (float32 views of the encoder's output, shared by repeated
    texts; the formula works in float64): [leading specials if `keep_first`] + content, and their tokens.
    The original keeps positions 0..len-2 of ``tokenizer.encode(s)`` (use_CLS=True) or 1..len-2.
    """
    bb = encoder.backbone
    start = 0 if keep_first else len(bb.prefix)
    emb = encoder.embed(preds + refs, batch_size=batch_size, verbose=verbose)
    kept = [v[start: v.shape[0] - len(bb.suffix)] for v in emb.vectors]
    tokens = [t[start: len(t) - len(bb.suffix)] for t in emb.tokens]
    n = len(preds)
    return kept[:n], kept[n:], tokens[:n], tokens[n:]


def smoothed_max_sides(sim: Tensor, row_mask: Tensor, col_mask: Tensor, *, temperature: float
                       ) -> tuple[Tensor, Tensor]:
    """TRWMD as the paper writes it: candidate side ``(1/n) Σ_i T log Σ_j exp(S_ij / T)``, reference
    side the same over columns; [B] each. Shapes: sim [B, n, m], masks [B, n] and [B, m]."""
    valid = row_mask.unsqueeze(2) & col_mask.unsqueeze(1)
    logits = (sim / temperature).masked_fill(~valid, -math.inf)
    n = row_mask.sum(1).clamp_min(1).to(sim.dtype)
    m = col_mask.sum(1).clamp_min(1).to(sim.dtype)
    rows = torch.where(row_mask, temperature * torch.logsumexp(logits, 2), torch.zeros_like(n[:, None]))
    cols = torch.where(col_mask, temperature * torch.logsumexp(logits, 1), torch.zeros_like(m[:, None]))
    return rows.sum(1) / n, cols.sum(1) / m


def _sides(x: Tensor, xm: Tensor, y: Tensor, ym: Tensor, *, relaxed: str = "expectation",
           **kw) -> tuple[Tensor, Tensor, Tensor | None]:
    """Unnormalised (candidate side, reference side) values [B] of padded batches x [B, n, d], y [B, m, d],
    and the candidate-side plan (None for the smoothed maximum, which has no plan)."""
    sim = torch.bmm(x, y.transpose(1, 2))
    if kw["variant"] == "trwmd" and relaxed == "logsumexp":
        return (*smoothed_max_sides(sim, xm, ym, temperature=kw["temperature"]), None)
    cand_plan, ref_plan = tempered_plans(sim, xm, ym, **kw)
    return (cand_plan * sim).sum((1, 2)), (ref_plan * sim).sum((1, 2)), cand_plan


def _harmonic(p: Tensor, r: Tensor) -> Tensor:
    s = p + r
    return torch.where(s != 0, 2 * p * r / torch.where(s != 0, s, torch.ones_like(s)), torch.zeros_like(s))


_CHUNK = 1 << 18
"""Most entries of one [B, L, L] float64 matrix per bucket (2 MiB); long texts get smaller buckets. About
twenty such matrices and the padded [2B, L, d] vectors live at once: at 4 Mi entries a bucket of 64 pairs
of ~120 tokens added ~150 MB to the peak, at 256 Ki entries ~20 MB, at the same speed (400 WMT pairs)."""
