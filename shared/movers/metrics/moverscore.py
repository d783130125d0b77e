"""MoverScore (Zhao et al., EMNLP 2019): exact EMD between contextual token embeddings (uniform weights; IDF optional).

For a hypothesis h and a reference r, each kept token (or n-gram) i carries a mass (uniform by default,
or proportional to its IDF weight) and a unit vector e_i; the distance is the earth mover's distance

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
Distances are computed in float64, from one batched product of each size class and, below 1e-4, as direct
differences of unit vectors, so that a text scored against itself reaches exactly the maximum; the originals'
float32 ``sqrt(2 - 2 cos)`` leaves it up to 8e-4 low.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import torch
from torch import Tensor

from ..core import progress
from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram, unit_rows
from ..core.options import Widget, option
from ..core.packed import ranges, sides_of
from ..core.pairs import GATHER, PointSets, Scratch, gather, pairwise, stage, unit_distances
from ..core.parallel import Solver
from ..core.references import ReferenceGroups
from ..core.signature import Signature, library_versions, nrefs_label
from ..core.spec import Example, Inputs, LongTextStudy, Output
from ..core.transport import grouped, network_simplex, padded_size, partial_emd, shape_classes, simplex
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
from ..pipeline.token_metric import TokenMetric, explanations, input_tokens, pair_sides, side_labels
from ..text.centering import SegmentMeans
from ..text.embedding import Encoder, model_label
from ..text.filters import resolve_stopwords
from ..text.guards import check_encoder_inputs
from ..text.idf import Idf, call_idf
from ..text.languages import PunctuationRule, language
from ..text.token_batch import TokenBatch, TokenTexts
from ..text.tokens import PackedIds
from . import examples

__all__ = ["MOVERSCORE", "MoverScoreOptions", "moverscore_from_embeddings", "moverscore_histogram",
           "moverscore_kept", "moverscore_filtered", "moverscore_points", "moverscore_pairs", "moverscore_costs",
           "PRESETS", "DEFAULT_PRESET"]

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
    idf: IdfSpec = option(False, """False (default): uniform weights (the original's example.py); True: IDF per
        call, references and predictions apart (its README's usage); a fitted movers.Idf table, or a pair of them
        (references, predictions).""",
                          cli=True)
    remove_subwords: bool = option(True, "Give WordPiece continuation pieces (##) no mass (the original).")
    remove_punctuation: bool = option(True, """Give punctuation tokens no mass (English: single ASCII
        characters, as the original; another `lang`: Unicode punctuation).""")
    stop_words: bool | str | Sequence[str] | None = option(None, """None (default), True (the list of `lang`;
        English: the shipped 153 words), a language code or your own words: they get no mass.""",
                                                            widget=Widget("radio", ("none", "en"), {"none": None}))
    reference_aggregation: Literal["max", "mean"] = option("max", """Several references: "max" (default: the
        closest reference; chosen on the development sets) or "mean" (the original's example).""")
    masses: Masses = option("normalised", """"normalised" (default, the original): each side's weights scaled to
        total 1; "partial": the lighter text moved whole into the heavier, the rest of which costs nothing (Rubner
        et al. 2000's EMD for unequal masses).""")
    encoder: Encoder | None = encoder_option()
    baseline: float | Literal["fit", "bundled"] | None = baseline_option()


@dataclass
class MoverScoreContext(Context[MoverScoreOptions]):
    stops: frozenset[str] = frozenset()
    stop_label: str = "none"
    punctuation: PunctuationRule = "ascii"

    @property
    def punct_label(self) -> str:
        """Signature text of the punctuation filter: ``drop`` (English's ASCII rule), ``drop[unicode]`` or ``keep``."""
        if not self.options.remove_punctuation:
            return "keep"
        return "drop" if self.punctuation == "ascii" else f"drop[{self.punctuation}]"


# ----------------------------------------------------------------------------------------- formula

def moverscore_costs(prediction: Tensor, reference: Tensor, cost: Cost, prediction_mask: Tensor,
                     reference_mask: Tensor) -> Tensor:
    """Ground costs [B, n, m] between the unit directions of batched points [B, n, d] and [B, m, d] (float64;
    the masks [B, n], [B, m] mark real points): ``||h_i - r_j||`` ("euclidean"), its square ("sqeuclidean") or
    ``1 - cos`` = half of it ("cosine"), from :func:`~movers.core.pairs.unit_distances` (identical points at
    exactly 0, so a text scores the maximum against itself)."""
    sq = unit_distances(prediction, reference, prediction_mask, reference_mask)
    return sq.sqrt_() if cost == "euclidean" else sq if cost == "sqeuclidean" else sq.mul_(0.5)


def _transport(m_h: np.ndarray, m_r: np.ndarray, c: np.ndarray, masses: Masses) -> tuple[float, np.ndarray]:
    """(d, plan) of one pair with positive masses, given normalised ("normalised": the exact EMD) or as they are
    ("partial": the lighter side moved whole)."""
    if masses == "partial":
        solved = partial_emd(m_h, m_r, c)
        assert solved.plan is not None
        return float(solved.cost), solved.plan
    plan, d = network_simplex(m_h, m_r, c)
    return d, plan


def moverscore_from_embeddings(prediction: Histogram, reference: Histogram, *, cost: Cost = "euclidean",
                               transform: Transform = "1/(1+d)", masses: Masses = "normalised",
                               return_plan: bool = False) -> Alignment:
    """The formula: MoverScore of one pair from its weighted unit vectors.

    ``d = min_P <P, C>`` over plans with marginals ``m_h / |m_h|`` (rows, prediction) and
    ``m_r / |m_r|`` (columns, reference), ``C_ij`` = ``||h_i - r_j||`` ("euclidean"), its square
    ("sqeuclidean") or ``1 - cos`` ("cosine") (:func:`moverscore_costs`); the score is ``transform(d)``.
    ``masses="partial"``: the masses stay as given and the lighter side is moved whole, ``d`` the cost per
    unit of mass moved (:func:`~movers.core.transport.partial_emd`; equal totals give the same ``d``).
    A side with no mass -> d = the largest cost (2 or 4), ``Alignment.empty`` set; also when both are
    empty (the original's d = 0 there would be a perfect score for two texts with nothing to compare).
    """
    m_h, m_r = np.asarray(prediction.mass, dtype=np.float64), np.asarray(reference.mass, dtype=np.float64)
    if len(m_h) == 0 or len(m_r) == 0:
        return _empty(np.zeros((len(m_h), len(m_r))), cost, transform, return_plan)
    # each side padded to its size class, as in a call (:func:`moverscore_pairs`): the same products, the same bits
    sides = []
    for side in (prediction, reference):
        x = torch.as_tensor(np.asarray(side.vectors(), dtype=np.float64)).reshape(len(side.mass), -1)
        padded = x.new_zeros((1, padded_size(len(x)), x.shape[1]))
        padded[0, :len(x)] = x
        mask = torch.zeros(padded.shape[:2], dtype=torch.bool)
        mask[0, :len(x)] = True
        sides += [padded, mask]
    c = moverscore_costs(sides[0], sides[2], cost, sides[1], sides[3])[0, :len(m_h), :len(m_r)].numpy()
    d, plan = _transport(m_h, m_r, c, masses) if masses == "partial" else \
        _transport(m_h / m_h.sum(), m_r / m_r.sum(), c, masses)
    return Alignment(score=TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None,
                     plan=plan if return_plan else None)


def _empty(c: np.ndarray, cost: Cost, transform: Transform, return_plan: bool) -> Alignment:
    d = COST_MAX[cost]  # all mass pays the largest cost (EMD-hat's penalty), even with both sides empty
    return Alignment(score=TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None,
                     plan=np.zeros_like(c) if return_plan else None, empty=True)


def moverscore_filtered(texts: TokenTexts, *, remove_subwords: bool = True, remove_punctuation: bool = True,
                        stops: frozenset[str] = frozenset(), punctuation: PunctuationRule = "ascii") -> np.ndarray:
    """[T] bool over the texts' tokens: what MoverScore's filters give no mass (continuation pieces, punctuation
    tokens by the `punctuation` rule, `stops`, as asked); special tokens are kept whatever this says."""
    out = texts.words(stops)
    if remove_subwords:
        out = out | texts.subword()
    if remove_punctuation:
        out = out | texts.punctuation_of(punctuation)
    return out


def moverscore_points(tokens: np.ndarray, side: np.ndarray, n_sides: int, weights: np.ndarray, kept: np.ndarray,
                      n_gram: int) -> tuple[PointSets, np.ndarray | None]:
    """The sides of `n_sides` input texts: their kept tokens, or n-grams of them, with positive weight. `tokens`,
    `side` and `weights` [T_in] are every input token (an index into the packed tokens), its text and its weight,
    each text's tokens in order (:func:`~movers.pipeline.token_metric.input_tokens`); `kept` [T] marks the kept
    packed tokens. An n-gram is a window of n consecutive kept positions (stride 1; one window if fewer are kept, as
    v1) with the summed weight and the weighted sum of the vectors. Returns the points and, for n-grams, which
    window members are real [Q, n]."""
    keep = kept[tokens]
    if n_gram == 1:
        positive = keep & (weights > 0)
        return PointSets.of_tokens(tokens[positive], side[positive], n_sides, weights[positive]), None
    k_tokens, k_side, k_weights = tokens[keep], side[keep], weights[keep]
    k_count = np.bincount(k_side, minlength=n_sides).astype(np.int64)
    k_start = np.cumsum(k_count) - k_count
    windows = np.where(k_count > 0, np.maximum(1, k_count - n_gram + 1), 0)
    w_side = sides_of(windows)
    position = ranges(np.zeros(n_sides, dtype=np.int64), windows)[:, None] + np.arange(n_gram)[None, :]
    member = position < k_count[w_side][:, None]
    where = np.where(member, k_start[w_side][:, None] + position, 0)
    index = np.where(member, k_tokens[where] if len(k_tokens) else 0, 0)
    w = np.where(member, k_weights[where] if len(k_weights) else 0.0, 0.0)
    mass = w.sum(1)
    positive = mass > 0
    count = np.bincount(w_side[positive], minlength=n_sides).astype(np.int64)
    return PointSets(index[positive], w[positive], mass[positive], np.cumsum(count) - count, count), member[positive]


def moverscore_kept(tokens: Sequence[str], special: Sequence[bool], *, remove_subwords: bool = True,
                    remove_punctuation: bool = True, stops: frozenset[str] = frozenset(),
                    punctuation: PunctuationRule = "ascii") -> list[int]:
    """Positions MoverScore keeps in one text given as strings: special tokens always; continuation pieces,
    punctuation tokens (by the `punctuation` rule) and `stops` dropped as asked (they get no mass). Centring means
    are taken over these positions."""
    texts = _one_text(tokens, special)
    kept = texts.special | ~moverscore_filtered(texts, remove_subwords=remove_subwords,
                                                remove_punctuation=remove_punctuation, stops=stops,
                                                punctuation=punctuation)
    return np.flatnonzero(kept).tolist()


def moverscore_histogram(tokens: Sequence[str], special: Sequence[bool], vectors: Any, weights: np.ndarray, *,
                         n_gram: int = 1, remove_subwords: bool = True, remove_punctuation: bool = True,
                         stops: frozenset[str] = frozenset(), punctuation: PunctuationRule = "ascii") -> Histogram:
    """One text's histogram (:func:`moverscore_points` of one text given as strings): kept tokens (or n-grams of
    kept tokens) with positive weight, as unit vectors (an n-gram's: of the weighted sum of its tokens)."""
    texts = _one_text(tokens, special)
    kept = texts.special | ~moverscore_filtered(texts, remove_subwords=remove_subwords,
                                                remove_punctuation=remove_punctuation, stops=stops,
                                                punctuation=punctuation)
    points, member = moverscore_points(np.arange(len(tokens)), np.zeros(len(tokens), dtype=np.int64), 1,
                                       np.asarray(weights, dtype=np.float64), kept, n_gram)
    vecs = torch.as_tensor(np.asarray(vectors.numpy() if isinstance(vectors, Tensor) else vectors, np.float64))
    index, w, _, _ = points.padded(np.zeros(1, dtype=np.int64), int(points.count[0]))
    unit = unit_rows(gather(vecs.reshape(len(tokens), -1), torch.from_numpy(index),
                            None if w is None else torch.from_numpy(w), None))[0].numpy()
    return Histogram(side_labels(texts, points, 0, member), points.side_mass(0), unit)


def _one_text(tokens: Sequence[str], special: Sequence[bool]) -> TokenTexts:
    return TokenTexts(PackedIds.of([np.zeros(len(tokens), dtype=np.int64)]), None, [list(tokens)],
                      np.asarray(special, dtype=bool).reshape(-1))


def moverscore_pairs(vectors: Tensor, points: PointSets, prediction: np.ndarray, reference: np.ndarray, *,
                     means: SegmentMeans | None = None, pair_segment: np.ndarray | None = None,
                     cost: Cost = "euclidean", transform: Transform = "1-d", masses: Masses = "normalised",
                     return_plans: bool = False, pool: Solver | None = None) -> list[Alignment]:
    """MoverScore of many pairs: sides ``prediction[k]`` and ``reference[k]`` of `points` (over the packed
    `vectors`, on any device), centred by the segment means (`pair_segment[k]`: pair k's segment) when given.

    Each pair is padded to its size class (:func:`~movers.core.transport.shape_classes`: its products have the
    same shapes in any company, so a call split into parts gives the same bits); a class's costs are computed on
    the vectors' device (:func:`~movers.core.pairs.pairwise`, :func:`moverscore_costs`), copied to the host in
    one piece per group of classes, and solved there exactly (network simplex, float64), ``pool.threads`` pairs
    at once (the same results with any number of threads).
    """
    out: list[Alignment | None] = [None] * len(prediction)
    n_h, n_r = points.count[prediction], points.count[reference]
    for k in np.flatnonzero((n_h == 0) | (n_r == 0)).tolist():
        out[k] = _empty(np.zeros((int(n_h[k]), int(n_r[k]))), cost, transform, return_plans)
    solvable = np.flatnonzero((n_h > 0) & (n_r > 0))
    side = sides_of(points.count)
    mass = points.mass if masses == "partial" else \
        points.mass / np.bincount(side, weights=points.mass, minlength=len(points.count))[side]
    total = np.bincount(side, weights=mass, minlength=len(points.count))  # a normalised side's total: 1 (rounded)
    plan = list(shape_classes(list(zip(n_h[solvable].tolist(), n_r[solvable].tolist(), strict=True)),
                              budget=_BUDGET if vectors.device.type == "cpu" else _DEVICE_BUDGET))

    def solve(part: list[tuple[np.ndarray, int, int]]) -> None:
        for c, row, k in part:
            h, r = int(prediction[k]), int(reference[k])
            m_h = mass[points.start[h]:points.start[h] + points.count[h]]
            m_r = mass[points.start[r]:points.start[r] + points.count[r]]
            block = np.ascontiguousarray(c[row, :len(m_h), :len(m_r)])
            if masses == "partial":
                d, p = _transport(m_h, m_r, block, masses)
            else:  # positive masses, each side normalised: b scaled to a's total (float rounding), as POT does
                p, d = simplex(m_h, m_r * (total[h] / total[r]), block)
            out[k] = Alignment(score=TRANSFORMS[transform](d), distance=d, cost=block if return_plans else None,
                               plan=p if return_plans else None)

    threads = 1 if pool is None else pool.threads
    for group in grouped(plan, lambda batch: len(batch[0]) * batch[1][0] * batch[1][1], budget=_GROUP):
        with progress.transport():
            jobs = [(c, row, k) for c, ks in _group_costs(vectors, points, prediction, reference, solvable[
                np.concatenate([bucket for bucket, _ in group])], group, means, pair_segment, cost)
                for row, k in enumerate(ks.tolist())]
            parts = min(threads, len(jobs))  # no more threads than pairs
            if parts <= 1 or pool is None:
                solve(jobs)
            else:
                pool.map(solve, [jobs[i::parts] for i in range(parts)])
        progress.pairs_done(len(jobs))
    return out  # type: ignore[return-value]


def _group_costs(vectors: Tensor, points: PointSets, prediction: np.ndarray, reference: np.ndarray,
                 pairs: np.ndarray, group: list[tuple[list[int], tuple[int, int]]], means: SegmentMeans | None,
                 pair_segment: np.ndarray | None, cost: Cost) -> list[tuple[np.ndarray, np.ndarray]]:
    """The padded costs of a group of size classes (`pairs`: the group's pairs, class after class), on the host
    (one copy for the group): (costs [B, n, m], the class's pairs) per class."""
    costs, members, done = [], [], 0
    scratch = Scratch(GATHER)  # the buckets' gathered vectors, in the same memory
    for bucket, (width_h, width_r) in group:
        ks = pairs[done:done + len(bucket)]
        done += len(bucket)
        ih, wh, _, vh = points.padded(prediction[ks], width_h)
        ir, wr, _, vr = points.padded(reference[ks], width_r)
        arrays = [ih, ir, vh, vr] + ([wh, wr] if wh is not None and wr is not None else [])
        if means is not None:
            assert pair_segment is not None
            arrays += [means.prediction[pair_segment[ks]], means.reference[pair_segment[ks]]]
        staged = stage(arrays, vectors.device)
        mh = mr = None
        if means is not None:
            mh, mr = means.table.index_select(0, staged[-2]), means.table.index_select(0, staged[-1])
        costs.append(pairwise(lambda x, y, x_mask, y_mask: moverscore_costs(x, y, cost, x_mask, y_mask), vectors,
                              (staged[0], staged[1]), (staged[2], staged[3]), mean=(mh, mr),
                              weights=(staged[4], staged[5]) if wh is not None else (None, None), scratch=scratch))
        members.append(ks)
    return list(zip(_to_host(costs), members, strict=True))


_BUDGET = 1 << 20
"""Padded cost entries ``B·n·m`` per bucket on a CPU (8 MiB of float64; the vectors are gathered a slice at a
time, :func:`~movers.core.pairs.pairwise`)."""
_DEVICE_BUDGET = 1 << 24
"""The same on an accelerator (128 MiB): fewer, larger buckets, so fewer kernel launches."""
_GROUP = 1 << 24
"""Cost entries a group of buckets copies to the host at once (128 MiB of float64)."""


def _to_host(tensors: list[Tensor]) -> list[np.ndarray]:
    """Tensors as host arrays: views on the CPU; from an accelerator, one copy for all of them."""
    if not tensors or tensors[0].device.type == "cpu":
        return [t.numpy() for t in tensors]
    flat = torch.cat([t.reshape(-1) for t in tensors]).cpu().numpy()
    out, start = [], 0
    for t in tensors:
        out.append(flat[start:start + t.numel()].reshape(tuple(t.shape)))
        start += t.numel()
    return out


# -------------------------------------------------------------------------------------------- spec

class MoverScore(TokenMetric[MoverScoreOptions, MoverScoreContext]):
    slug = "moverscore"
    title = "MoverScore"
    Options = MoverScoreOptions
    summary = """MoverScore (Zhao et al., EMNLP 2019) is the earth mover's distance between the contextual
        token embeddings of a prediction and a reference, turned into a similarity (higher is better). Every
        token weighs the same by default; idf=True weights them by IDF. Presets reproduce the three original
        implementations: "1.0.3" (default: PyPI moverscore 1.0.3; 1 - d), "github" (1/(1 + d), in (0, 1])
        and "paper" (p-means of the last five layers, n-grams, squared Euclidean cost). The default encoder
        is the bundled all-MiniLM-L6-v2 (no download); any Hugging Face model id or local folder works."""
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
                      references the mean, or the min with "max")."""), UNKNOWN_OUTPUT)
    empty_message = ("have a side with no weighted token (all filtered, or idf 0); the largest cost is used "
                     "(the worst score), see the card.")
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
            encoder = call_encoder("moverscore", o, o.model, o.layer, PRESETS[o.preset].layer)
        elif o.model is not None or o.layer is not None:
            raise ValueError("moverscore: pass either `encoder` or `model`/`layer`, not both.")
        try:
            stops, stop_label = resolve_stopwords(o.stop_words, o.lang)
        except ValueError as err:
            raise ValueError(f"moverscore: {err}") from None
        ctx = MoverScoreContext(o, "moverscore", encoder, "", stops, stop_label, language(o.lang).punctuation)
        ctx.kept_label = (f"moverscore[sub:{'drop' if o.remove_subwords else 'keep'},punct:{ctx.punct_label},"
                          f"stop:{stop_label}]")
        return ctx

    def _filtered(self, ctx: MoverScoreContext, texts: TokenTexts) -> np.ndarray:
        o = ctx.options
        return moverscore_filtered(texts, remove_subwords=o.remove_subwords, remove_punctuation=o.remove_punctuation,
                                   stops=ctx.stops, punctuation=ctx.punctuation)

    def guard(self, ctx: MoverScoreContext, inputs: Inputs) -> None:
        assert ctx.encoder is not None
        filtered_out = check_encoder_inputs(  # no real token (only [UNK]), or too large: fail before the model runs
            ctx.name, ctx.encoder, inputs.predictions, inputs.references,
            filtered=lambda texts: self._filtered(ctx, texts))
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
            tables = (call_idf(encoder, references.flat), call_idf(encoder, predictions))
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

    def centring_tokens(self, ctx: MoverScoreContext, batch: TokenBatch) -> np.ndarray:
        return batch.special | ~self._filtered(ctx, batch)

    def score_chunk(self, ctx: MoverScoreContext, stats: Any, chunk: Chunk, means: SegmentMeans | None,
                    pool: Solver) -> tuple[list[Alignment], list[Explanation]]:
        """Each input text's kept tokens (or n-grams) weighted by its side's table, then :func:`moverscore_pairs`."""
        o, batch = ctx.options, chunk.items
        assert o.n_gram is not None and o.cost is not None and o.transform is not None
        tokens, side = input_tokens(batch)
        weights = np.ones(len(tokens))
        if stats[0] is not None:  # IDF: the prediction table on predictions, the reference table on references
            ids, is_prediction = batch.packed.ids[tokens], side < chunk.n
            weights[is_prediction] = stats[1].lookup_array(ids[is_prediction])
            weights[~is_prediction] = stats[0].lookup_array(ids[~is_prediction])
        points, member = moverscore_points(tokens, side, len(batch), weights, self.centring_tokens(ctx, batch),
                                           o.n_gram)
        prediction, reference = pair_sides(chunk)
        aligned = moverscore_pairs(batch.vectors, points, prediction, reference, means=means, pair_segment=prediction,
                                   cost=o.cost, transform=o.transform, masses=o.masses,
                                   return_plans=o.return_plans, pool=pool)
        if not self.wants_plans(o):
            return aligned, []
        return aligned, explanations(ctx.name, aligned, batch, points, prediction, reference, self.cost_label(ctx),
                                     member)

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
            ("model", model_label(encoder)),
            ("layer", encoder.layer_label),
            ("center", center),
            ("idf", idf_label),
            ("ngram", o.n_gram),
            ("sub", "drop" if o.remove_subwords else "keep"),
            ("punct", ctx.punct_label),
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
