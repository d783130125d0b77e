"""MoverScore (Zhao et al., EMNLP 2019): exact EMD between IDF-weighted contextual token embeddings.

For a hypothesis h and a reference r, each kept token (or n-gram) i carries a mass proportional to
its IDF weight and a unit vector e_i; the distance is the earth mover's distance

    d(h, r) = min_{P >= 0, P1 = m_r, P^T1 = m_h}  sum_ij P_ij C(e_i, e_j)

solved exactly (network simplex, float64), and the score is a transform of d. Three originals
disagree; each is a preset, every setting overridable:

=========  ==================================  ===================================================
preset     original                            settings
=========  ==================================  ===================================================
"1.0.3"    PyPI moverscore 1.0.3 (v2)           last layer, unigrams, C = ||e_i - e_j||, 1 - d  (default)
"github"   AIPHES/emnlp19-moverscore HEAD (v2)  same, score 1 / (1 + d)
"paper"    v1 ``moverscore.py`` / the paper     p-means (min, mean, max) of the last 5 layers,
                                                n-grams, C = ||e_i - e_j||^2, 1 - d
=========  ==================================  ===================================================

Common to all: [CLS]/[SEP] stay in the transport (idf 0 when IDF comes from a corpus, 1 without IDF),
WordPiece continuation pieces (``##``), single ASCII punctuation tokens and stop words get no mass.
Weights are uniform by default (``idf=False``); ``idf=True`` computes IDF ``ln((N+1)/(df+1))`` per call
separately on the references and on the predictions (the original README's usage); a fitted
:class:`~movers.text.idf.Idf` table gives fixed weights.
Distances are computed in float64 as direct differences of unit vectors, so that a text scored
against itself reaches exactly the maximum; the originals' float32 ``sqrt(2 - 2 cos)`` leaves it ~3e-4 low.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import torch

from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram, unit_rows
from ..core.options import Widget, option
from ..core.references import ReferenceGroups
from ..core.signature import Signature, library_versions, nrefs_label
from ..core.spec import Example, Inputs, LongTextStudy, Output
from ..core.transport import emd, partial_emd
from ..pipeline.call import baseline_option
from ..pipeline.embedding import Context, EmbeddingMetric, EmbeddingOptions, encoder_option, model_option
from ..text.embedding import EmbeddedText, Encoder, load_encoder
from ..text.filters import PUNCTUATION, resolve_stopwords, subword_mask
from ..text.guards import check_encoder_inputs
from ..text.idf import Idf, call_idf
from . import examples

__all__ = ["MOVERSCORE", "MoverScoreOptions", "moverscore_from_embeddings", "moverscore_histogram",
           "moverscore_kept", "PRESETS", "DEFAULT_PRESET"]

DEFAULT_PRESET = "1.0.3"
"""Chosen on the development sets (docs/development.md): 1 - d correlates better than 1/(1 + d)
under Pearson."""

Cost = Literal["euclidean", "sqeuclidean", "cosine"]
Transform = Literal["1-d", "1/(1+d)", "exp(-d)", "d"]
Masses = Literal["normalised", "partial"]
IdfSpec = bool | Idf | tuple[Idf, Idf]


@dataclass(frozen=True)
class Preset:
    layer: int | tuple[int, ...]
    n_gram: int
    cost: Cost
    transform: Transform


PRESETS: dict[str, Preset] = {
    "1.0.3": Preset(layer=-1, n_gram=1, cost="euclidean", transform="1-d"),
    "github": Preset(layer=-1, n_gram=1, cost="euclidean", transform="1/(1+d)"),
    "paper": Preset(layer=(-5, -4, -3, -2, -1), n_gram=1, cost="sqeuclidean", transform="1-d"),
}

TRANSFORMS = {
    "1-d": lambda d: 1.0 - d,
    "1/(1+d)": lambda d: 1.0 / (1.0 + d),
    "exp(-d)": lambda d: math.exp(-d),
    "d": lambda d: d,
}
COST_MAX = {"euclidean": 2.0, "sqeuclidean": 4.0, "cosine": 2.0}
"""The largest ground cost between unit vectors: all mass moved at it is the worst distance."""


@dataclass(frozen=True, kw_only=True)
class MoverScoreOptions(EmbeddingOptions):
    preset: Literal["1.0.3", "github", "paper"] = option(DEFAULT_PRESET, """"1.0.3" (default: PyPI moverscore
        1.0.3, score 1 - d, may be negative; chosen on the development sets), "github" (1/(1 + d), in (0, 1])
        or "paper" (p-means of the last five layers, n-grams, squared Euclidean cost).""")
    model: str | None = model_option()
    layer: int | Sequence[int] | None = option(None, """hidden_states index (0 = embeddings, -1 = last), or a
        list of indices aggregated by power means; None = the preset's.""")
    n_gram: int | None = option(None, "n-gram size (windows of n kept tokens); None = the preset's (1).",
                                low=1, integer=True)
    cost: Cost | None = option(None, "Ground cost between unit vectors; None = the preset's.")
    transform: Transform | None = option(None, "Distance to score; None = the preset's.")
    idf: IdfSpec = option(False, """False (default): uniform weights (special tokens included, the original's
        no-idf setting); True: IDF per call, separately on the references and on the predictions (the
        original README's usage); a fitted movers.Idf table (both sides) or a pair (references, predictions).""",
                          cli=True)
    remove_subwords: bool = option(True, "Give WordPiece continuation pieces (##) no mass (the original).")
    remove_punctuation: bool = option(True, "Give single ASCII punctuation tokens no mass (the original).")
    stop_words: bool | str | Sequence[str] | None = option(None, """None (default), True or "en" (the shipped
        153-word English list) or your own words: they get no mass.""",
                                                            widget=Widget("radio", ("none", "en"), {"none": None}))
    reference_aggregation: Literal["max", "mean"] = option("max", """Several references: "max" (default: the
        closest reference; chosen on the development sets) or "mean" (the original's example).""")
    masses: Masses = option("normalised", """"normalised" (default, the original): each side's weights scaled to
        total 1, so the whole of both texts is matched; "partial": the lighter text is moved whole into the
        heavier one and the rest of the heavier costs nothing (Rubner et al. 2000's EMD for unequal masses).""")
    encoder: Encoder | None = encoder_option()
    baseline: float | Literal["fit", "bundled"] | None = baseline_option()


@dataclass
class MoverScoreContext(Context[MoverScoreOptions]):
    stops: frozenset[str] = frozenset()
    stop_label: str = "none"


# ----------------------------------------------------------------------------------------- formula

def moverscore_from_embeddings(prediction: Histogram, reference: Histogram, *, cost: Cost = "euclidean",
                               transform: Transform = "1/(1+d)", masses: Masses = "normalised",
                               return_plan: bool = False) -> Alignment:
    """The formula: MoverScore of one pair from its weighted unit vectors.

    ``d = min_P <P, C>`` over plans with marginals ``m_h / |m_h|`` (rows, prediction) and
    ``m_r / |m_r|`` (columns, reference), ``C_ij`` = ``||h_i - r_j||`` ("euclidean"), its square
    ("sqeuclidean") or ``1 - cos`` ("cosine"), computed in float64 as direct differences (exactly 0 for
    identical vectors, so a text scores the maximum against itself); the score is ``transform(d)``.
    ``masses="partial"``: the masses stay as given and the lighter side is moved whole, ``d`` the cost per
    unit of mass moved (:func:`~movers.core.transport.partial_emd`; equal totals give the same ``d``).
    A side with no mass -> d = the largest cost (2 or 4), ``Alignment.empty`` set; also when both are
    empty (the original's d = 0 there would be a perfect score for two texts with nothing to compare).
    """
    from scipy.spatial.distance import cdist  # here: scipy.spatial costs ~35 MB and 0.2 s to import

    m_h, x_h = np.asarray(prediction.mass, dtype=np.float64), prediction.vectors()
    m_r, x_r = np.asarray(reference.mass, dtype=np.float64), reference.vectors()
    sq = cdist(x_h, x_r, "sqeuclidean")
    c = np.sqrt(sq) if cost == "euclidean" else sq if cost == "sqeuclidean" else 0.5 * sq  # 1-cos = |x-y|^2/2
    if len(m_h) == 0 or len(m_r) == 0:
        d = COST_MAX[cost]  # all mass pays the largest cost (EMD-hat's penalty), even with both sides empty
        return Alignment(score=TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None,
                         plan=np.zeros_like(c) if return_plan else None, empty=True)
    solved = partial_emd(m_h, m_r, c, return_plan=return_plan) if masses == "partial" else \
        emd(m_h / m_h.sum(), m_r / m_r.sum(), c, return_plan=return_plan)
    d = float(solved.cost)
    return Alignment(score=TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None, plan=solved.plan)


def moverscore_kept(tokens: Sequence[str], special: Sequence[bool], *, remove_subwords: bool = True,
                    remove_punctuation: bool = True, stops: frozenset[str] = frozenset()) -> list[int]:
    """Positions MoverScore keeps: special tokens always; continuation pieces, single punctuation tokens
    and `stops` dropped as asked (they get no mass). Centring means are taken over these positions."""
    subword = subword_mask(tokens) if remove_subwords else [False] * len(tokens)  # O(L), not O(L^2)
    return [p for p, tok in enumerate(tokens)
            if special[p] or not (subword[p] or (remove_punctuation and tok in PUNCTUATION) or tok in stops)]


def moverscore_histogram(tokens: Sequence[str], special: Sequence[bool], vectors: Any, weights: np.ndarray, *,
                         n_gram: int = 1, remove_subwords: bool = True, remove_punctuation: bool = True,
                         stops: frozenset[str] = frozenset()) -> Histogram:
    """One text's histogram: kept tokens (or n-grams of kept tokens) with positive weight, unit vectors.

    Special tokens are always kept; WordPiece continuation pieces, single ASCII punctuation tokens and
    `stops` are dropped as asked. An n-gram is a window of n consecutive kept positions (stride 1; one
    window if fewer are kept, as v1) with the summed weight and the weight-averaged vector.
    """
    keep = moverscore_kept(tokens, special, remove_subwords=remove_subwords, remove_punctuation=remove_punctuation,
                           stops=stops)
    vecs = vectors.to(torch.float64).numpy() if isinstance(vectors, torch.Tensor) else np.asarray(vectors, np.float64)
    if n_gram == 1:  # one position per point: the same numbers as the windows below, without a loop per token
        idx = np.asarray(keep, dtype=np.int64)
        mass = np.asarray(weights, dtype=np.float64)[idx]
        points = mass[:, None] * vecs[idx]
        labels = [tokens[p] for p in keep]
    else:
        wins = [keep[s:s + n_gram] for s in range(max(1, len(keep) - n_gram + 1))] if keep else []
        mass = np.array([weights[w].sum() for w in wins], dtype=np.float64)
        points = np.stack([(weights[w, None] * vecs[w]).sum(0) for w in wins]) if wins else vecs[:0]
        labels = [" ".join(tokens[p] for p in w) for w in wins]
    positive = np.flatnonzero(mass > 0)
    return Histogram([labels[k] for k in positive], mass[positive], unit_rows(points[positive]))


# -------------------------------------------------------------------------------------------- spec

class MoverScore(EmbeddingMetric[MoverScoreOptions, MoverScoreContext]):
    slug = "moverscore"
    title = "MoverScore"
    Options = MoverScoreOptions
    summary = """MoverScore (Zhao et al., EMNLP 2019) is the earth mover's distance between the IDF-weighted
        contextual token embeddings of a prediction and a reference, turned into a similarity (higher is
        better). Presets reproduce the three original implementations: "1.0.3" (default: PyPI moverscore
        1.0.3; 1 - d), "github" (1/(1 + d), in (0, 1]) and "paper" (p-means of the last five layers,
        n-grams, squared Euclidean cost). The default encoder is the bundled all-MiniLM-L6-v2 (no
        download); any Hugging Face model id or local folder works."""
    citation = """\
@inproceedings{zhao-etal-2019-moverscore,
    title = "{M}over{S}core: Text Generation Evaluating with Contextualized Embeddings and Earth Mover Distance",
    author = "Zhao, Wei and Peyrard, Maxime and Liu, Fei and Gao, Yang and Meyer, Christian M. and Eger, Steffen",
    booktitle = "Proceedings of EMNLP-IJCNLP 2019",
    year = "2019",
    pages = "563--578",
    url = "https://aclanthology.org/D19-1053",
}
"""
    codebase_urls = ("https://github.com/AIPHES/emnlp19-moverscore",)
    reference_urls = ("https://aclanthology.org/D19-1053",)
    rescalable = True
    bench_options = {"idf": True}
    original_options = {"reference_aggregation": "mean"}  # the original scores one reference; its README averages
    long_text_study = LongTextStudy({"masses": "partial"}, """partial transport (masses="partial"): the
        summary, the lighter side, is moved whole into the article, each of whose tokens takes at most its own
        weight; the rest of the article costs nothing""")
    scores_doc = "one score per segment, in input order; higher is better"
    outputs = (Output("distances", "list of float", """the earth mover's distance per segment (for several
                      references the mean, or the min with "max")."""),)
    empty_message = ("have a side with no weighted token (all filtered, or idf 0); the largest cost is used "
                     "(the worst score), see the card.")
    formula_step = 1
    parallel_pairs = True  # POT's network simplex per pair releases the GIL
    module_examples = """
    >>> moverscore = evaluate.load("moverscore")
    >>> results = moverscore.compute(predictions=["The cat sat on the mat."],
    ...                              references=["A cat was sitting on the mat."])
    >>> round(results["score"], 4)
    0.5995
    >>> results["signature"].split("|")[:4]
    ['MoverScore', 'preset:1.0.3', 'nrefs:1', 'agg:max']
    >>> results = moverscore.compute(predictions=["The cat sat on the mat."],
    ...                              references=[["A cat was sitting on the mat.", "The cat sat on the mat."]],
    ...                              reference_aggregation="max")
    >>> results["scores"]
    [1.0]
"""
    space_examples = (examples.WMT_PAIRS,
                      Example("One prediction, two references (the closer one counts)",
                              "The committee approved the new budget on Friday.",
                              "On Friday the committee passed the new budget. ||| The budget was rejected by the "
                              "committee."),
                      examples.SLICKER)

    # ----------------------------------------------------------------------------- declarations

    def check(self, o: MoverScoreOptions) -> None:
        if not (isinstance(o.idf, (bool, Idf)) or (isinstance(o.idf, tuple) and len(o.idf) == 2
                                                  and all(isinstance(t, Idf) for t in o.idf))):
            raise TypeError(f"moverscore: `idf` must be a bool, an Idf table or a pair of Idf tables, got "
                            f"{type(o.idf).__name__}.")
        if o.baseline is not None and o.transform == "d":
            raise ValueError("moverscore: `baseline` rescales similarities; transform='d' gives distances.")

    def resolve(self, o: MoverScoreOptions) -> MoverScoreOptions:
        base = PRESETS[o.preset]
        return replace(o, n_gram=base.n_gram if o.n_gram is None else o.n_gram,
                       cost=base.cost if o.cost is None else o.cost,
                       transform=base.transform if o.transform is None else o.transform)

    def can_rescale(self, o: MoverScoreOptions) -> bool:
        return o.transform != "d"

    def worst(self, o: MoverScoreOptions) -> dict[str, Any]:
        """All mass moved at the largest cost between unit vectors (2 Euclidean, 4 squared, 2 for 1 - cos)
        through the transform: -1 for the default 1.0.3 preset, 1/3 for github, -3 for paper."""
        o = self.resolve(o)
        assert o.cost is not None and o.transform is not None
        d = COST_MAX[o.cost]
        return {"scores": TRANSFORMS[o.transform](d), "distances": d}

    def reward(self, o: MoverScoreOptions, score: float) -> float:
        return -score if self.resolve(o).transform == "d" else score

    # ------------------------------------------------------------------------------------ hooks

    def context(self, o: MoverScoreOptions) -> MoverScoreContext:
        encoder = o.encoder
        if encoder is None:
            encoder = load_encoder(o.model, layer=PRESETS[o.preset].layer if o.layer is None else o.layer,
                                   device=o.device, long_texts=o.long_texts)
        elif o.model is not None or o.layer is not None:
            raise ValueError("moverscore: pass either `encoder` or `model`/`layer`, not both.")
        stops, stop_label = resolve_stopwords(o.stop_words)
        kept = (f"moverscore[sub:{'drop' if o.remove_subwords else 'keep'},"
                f"punct:{'drop' if o.remove_punctuation else 'keep'},stop:{stop_label}]")
        return MoverScoreContext(o, "moverscore", encoder, kept, stops, stop_label)

    def _kept(self, ctx: MoverScoreContext, tokens: Sequence[str], special: Sequence[bool]) -> list[int]:
        o = ctx.options
        return moverscore_kept(tokens, special, remove_subwords=o.remove_subwords,
                               remove_punctuation=o.remove_punctuation, stops=ctx.stops)

    def guard(self, ctx: MoverScoreContext, inputs: Inputs) -> None:
        assert ctx.encoder is not None
        filtered_out = check_encoder_inputs(  # no real token (only [UNK]), or too large: fail before the model runs
            ctx.name, ctx.encoder, inputs.predictions, inputs.references,
            kept=lambda tokens: self._kept(ctx, tokens, [False] * len(tokens)))
        if filtered_out:
            warnings.warn(f"moverscore: {', '.join(filtered_out[:5])} keep only [CLS]/[SEP] after the filters (all "
                          f"tokens are punctuation, subword pieces or stop words); they are scored on those "
                          f"contextual vectors, as the original does.", RuntimeWarning, stacklevel=5)

    def statistics(self, ctx: MoverScoreContext, predictions: list[str], references: ReferenceGroups
                   ) -> tuple[Idf | None, Idf | None, str]:
        """(reference table, prediction table, signature label); None = uniform weights."""
        idf, encoder = ctx.options.idf, ctx.encoder
        assert encoder is not None
        if idf is False:
            return None, None, "none"
        if idf is True:
            tables = (call_idf(encoder.iter_token_ids(references.flat), tokenizer=encoder.name),
                      call_idf(encoder.iter_token_ids(predictions), tokenizer=encoder.name))
            if min(t.n_docs for t in tables) == 1:
                warnings.warn("moverscore: idf=True computes IDF from the texts of this call; with a single text "
                              "every token gets weight 0. Pass idf=False or a fitted movers.Idf table.",
                              RuntimeWarning, stacklevel=5)
            return tables[0], tables[1], "call"
        tables = (idf, idf) if isinstance(idf, Idf) else idf
        for table in tables:
            table.check("moverscore", encoder.name)
        if isinstance(idf, Idf):
            return idf, idf, idf.label
        return idf[0], idf[1], f"{idf[0].label}+{idf[1].label}"

    def embed(self, ctx: MoverScoreContext, texts: list[str]) -> list[EmbeddedText]:
        assert ctx.encoder is not None
        return ctx.encoder.embed(texts, batch_size=ctx.options.batch_size, verbose=ctx.options.verbose).texts()

    def centring_vectors(self, ctx: MoverScoreContext, item: EmbeddedText) -> torch.Tensor:
        return item.vectors.to(torch.float64)[self._kept(ctx, item.tokens, item.special)]

    def histogram(self, ctx: MoverScoreContext, stats: Any, item: EmbeddedText, mean: torch.Tensor | None,
                  prediction: bool) -> Histogram:
        o, table = ctx.options, stats[1] if prediction else stats[0]
        weights = np.ones(len(item.ids)) if table is None else np.asarray(table.lookup(item.ids), np.float64)
        vectors = item.vectors.to(torch.float64)
        if mean is not None:
            vectors = vectors - mean
        assert o.n_gram is not None
        return moverscore_histogram(item.tokens, item.special, vectors, weights, n_gram=o.n_gram,
                                    remove_subwords=o.remove_subwords, remove_punctuation=o.remove_punctuation,
                                    stops=ctx.stops)

    def formula(self, ctx: MoverScoreContext, pairs: Sequence[tuple[Histogram, Histogram]]) -> list[Alignment]:
        o = ctx.options
        assert o.cost is not None and o.transform is not None
        return [moverscore_from_embeddings(h, r, cost=o.cost, transform=o.transform, masses=o.masses,
                                           return_plan=o.return_plans) for h, r in pairs]

    def cost_label(self, ctx: MoverScoreContext) -> str:
        return str(ctx.options.cost)

    def segments(self, ctx: MoverScoreContext, groups: ReferenceGroups, pairs: list[Alignment],
                 explained: list[Explanation]) -> dict[str, Any]:
        agg = ctx.options.reference_aggregation
        # The distance of the reference the score came from: mean of distances, or the smallest one.
        return {"scores": groups.aggregate([p.score for p in pairs], agg),
                "distances": groups.aggregate(cast(list[float], [p.distance for p in pairs]),
                                              "mean" if agg == "mean" else "min")}

    def signature(self, ctx: MoverScoreContext, inputs: Inputs, center: str) -> Signature:
        o, encoder = ctx.options, ctx.encoder
        assert encoder is not None
        idf_label = _idf_label(o.idf)
        return Signature("MoverScore", (
            ("preset", o.preset),
            ("nrefs", nrefs_label(inputs.references)),
            ("agg", o.reference_aggregation),
            ("model", encoder.name),
            ("layer", encoder.layer_label),
            ("center", center),
            ("idf", idf_label),
            ("ngram", o.n_gram),
            ("sub", "drop" if o.remove_subwords else "keep"),
            ("punct", "drop" if o.remove_punctuation else "keep"),
            ("stop", ctx.stop_label),
            ("cost", o.cost),
            ("transform", o.transform),
            ("long", encoder.windows_label),
            ("ot", "emd-partial" if o.masses == "partial" else "emd"),
        ), library_versions("transformers", "torch", "pot"))


def _idf_label(idf: IdfSpec) -> str:
    if idf is False:
        return "none"
    if idf is True:
        return "call"
    if isinstance(idf, Idf):
        return idf.label
    return f"{idf[0].label}+{idf[1].label}"


MOVERSCORE = MoverScore()
