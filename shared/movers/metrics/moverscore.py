"""MoverScore (Zhao et al., EMNLP 2019): exact EMD between IDF-weighted contextual token embeddings.

For a hypothesis h and a reference r, each kept token (or n-gram) i carries a mass proportional to
its IDF weight and a unit vector e_i; the distance is the earth mover's distance

    d(h, r) = min_{P >= 0, P1 = m_r, P^T1 = m_h}  sum_ij P_ij C(e_i, e_j)

solved exactly (network simplex, float64), and the score is a transform of d. Three originals
disagree; each is a preset, every setting overridable:

=========  ==================================  ===================================================
preset     original                            settings
=========  ==================================  ===================================================
"1.0.3"    PyPI moverscore 1.0.3 (v2)           last layer, unigrams, C = ||e_i - e_j||, 1 - d
"github"   AIPHES/emnlp19-moverscore HEAD (v2)  same, score 1 / (1 + d)                (default)
"paper"    v1 ``moverscore.py`` / the paper     p-means (min, mean, max) of the last 5 layers,
                                                n-grams, C = ||e_i - e_j||^2, 1 - d
=========  ==================================  ===================================================

Common to all: [CLS]/[SEP] stay in the transport (idf 0 when IDF comes from a corpus, 1 without IDF),
WordPiece continuation pieces (``##``), single ASCII punctuation tokens and stop words get no mass.
Weights are uniform by default (``idf=False``); ``idf=True`` computes IDF ``ln((N+1)/(df+1))`` per call
separately on the references and on the predictions (the original README's usage); a fitted
:class:`~movers.idf.Idf` table gives fixed weights.
Distances are computed in float64 as direct differences of unit vectors, so that a text scored
against itself reaches exactly the maximum; the originals' float32 ``sqrt(2 - 2 cos)`` leaves it ~3e-4 low.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal, Sequence, Union

import numpy as np
import torch
from scipy.spatial.distance import cdist

from .._validation import check_choice, check_number, check_pairs
from ..centering import Centering, CenteringSpec, centring_means, check_centering, chunked_corpus_means
from ..embedding import Encoder, load_encoder
from ..explanation import Explanation
from ..filters import PUNCTUATION, resolve_stopwords, subword_mask
from ..guards import check_encoder_inputs
from ..histogram import Alignment, Histogram, unit_rows
from ..distributed import Scope, current_scope
from ..idf import Idf, call_idf
from ..references import CHUNK, ReferenceGroups, segment_chunks
from ..result import Scores
from ..scoring_options import with_scoring_options
from .. import progress
from ..signature import format_signature, library_versions, nrefs_label
from ..transport import emd

__all__ = ["moverscore", "moverscore_from_embeddings", "moverscore_histogram", "moverscore_kept", "PRESETS", "HIGHER_IS_BETTER",
           "DEFAULT_PRESET"]

HIGHER_IS_BETTER = True
DEFAULT_PRESET = "1.0.3"
"""Chosen on the development sets (issue 14): 1 - d correlates better than 1/(1 + d) under Pearson (card)."""

Cost = Literal["euclidean", "sqeuclidean", "cosine"]
Transform = Literal["1-d", "1/(1+d)", "exp(-d)", "d"]
IdfSpec = Union[bool, Idf, "tuple[Idf, Idf]"]


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

_TRANSFORMS = {
    "1-d": lambda d: 1.0 - d,
    "1/(1+d)": lambda d: 1.0 / (1.0 + d),
    "exp(-d)": lambda d: math.exp(-d),
    "d": lambda d: d,
}


def moverscore_from_embeddings(prediction: Histogram, reference: Histogram, *, cost: Cost = "euclidean",
                               transform: Transform = "1/(1+d)", return_plan: bool = False) -> Alignment:
    """The formula: MoverScore of one pair from its weighted unit vectors.

    ``d = min_P <P, C>`` over plans with marginals ``m_h / |m_h|`` (rows, prediction) and
    ``m_r / |m_r|`` (columns, reference), ``C_ij`` = ``||h_i - r_j||`` ("euclidean"), its square
    ("sqeuclidean") or ``1 - cos`` ("cosine"), computed in float64 as direct differences (exactly 0 for
    identical vectors, so a text scores the maximum against itself); the score is ``transform(d)``.
    A side with no mass -> d = the largest cost (2 or 4), ``Alignment.empty`` set; also when both are
    empty (the original's d = 0 there would be a perfect score for two texts with nothing to compare).
    """
    m_h, x_h = np.asarray(prediction.mass, dtype=np.float64), np.asarray(prediction.points, dtype=np.float64)
    m_r, x_r = np.asarray(reference.mass, dtype=np.float64), np.asarray(reference.points, dtype=np.float64)
    sq = cdist(x_h, x_r, "sqeuclidean")
    c = np.sqrt(sq) if cost == "euclidean" else sq if cost == "sqeuclidean" else 0.5 * sq  # 1-cos = |x-y|^2/2
    if len(m_h) == 0 or len(m_r) == 0:
        d = _COST_MAX[cost]  # all mass pays the largest cost (EMD-hat's penalty), even with both sides empty
        return Alignment(score=_TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None,
                         plan=np.zeros_like(c) if return_plan else None, empty=True)
    solved = emd(m_h / m_h.sum(), m_r / m_r.sum(), c, return_plan=return_plan)
    d = float(solved.cost)
    return Alignment(score=_TRANSFORMS[transform](d), distance=d, cost=c if return_plan else None, plan=solved.plan)


def moverscore_kept(tokens: Sequence[str], special: Sequence[bool], *, remove_subwords: bool = True,
                    remove_punctuation: bool = True, stops: frozenset[str] = frozenset()) -> list[int]:
    """Positions MoverScore keeps: special tokens always; continuation pieces, single punctuation tokens
    and `stops` dropped as asked (they get no mass). Centring means are taken over these positions."""
    subword = subword_mask(tokens) if remove_subwords else [False] * len(tokens)  # O(L), not O(L^2)
    return [p for p, tok in enumerate(tokens)
            if special[p] or not (subword[p] or (remove_punctuation and tok in PUNCTUATION) or tok in stops)]


def moverscore_histogram(tokens: Sequence[str], special: Sequence[bool], vectors, weights: np.ndarray, *,
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
    if n_gram == 1:
        wins = [[p] for p in keep]
    else:
        wins = [keep[s:s + n_gram] for s in range(max(1, len(keep) - n_gram + 1))] if keep else []
    mass = np.array([weights[w].sum() for w in wins], dtype=np.float64)
    points = np.stack([(weights[w, None] * vecs[w]).sum(0) for w in wins]) if wins else vecs[:0]
    labels = [" ".join(tokens[p] for p in w) for w in wins]
    positive = np.flatnonzero(mass > 0)
    return Histogram([labels[k] for k in positive], mass[positive], unit_rows(points[positive]))


@with_scoring_options("moverscore")
def moverscore(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
               preset: str = DEFAULT_PRESET, model: str | None = None,
               layer: int | Sequence[int] | None = None, n_gram: int | None = None,
               cost: Cost | None = None, transform: Transform | None = None,
               idf: IdfSpec = False, remove_subwords: bool = True, remove_punctuation: bool = True,
               stop_words: bool | str | Sequence[str] | None = None,
               reference_aggregation: Literal["mean", "max"] = "max",
               long_texts: Literal["window", "truncate", "error"] = "window",
               batch_size: int = 64, device: str | None = None, verbose: bool = False,
               encoder: Encoder | None = None, return_plans: bool = False,
               centering: CenteringSpec = "none", centering_batch: int = 32) -> Scores:
    """MoverScore of each prediction against its reference(s).

    Args:
        predictions: Hypotheses, one per segment.
        references: One reference per segment (str) or a non-empty list per segment (ragged allowed).
        preset: "1.0.3" (default: PyPI moverscore 1.0.3, score 1-d, may be negative; chosen on the
            development sets, see the card), "github" (1/(1+d) in (0, 1]) or "paper".
        model: Hub id or local folder; None = the bundled all-MiniLM-L6-v2.
        layer, n_gram, cost, transform: Override the preset (layer: hidden_states index, or a list of
            indices aggregated by power means).
        idf: False (default) = uniform weights (special tokens included, the original's no-idf setting;
            chosen on the development sets, see the card); True = per call, separately on the
            references and on the predictions (the original README's usage); an :class:`Idf` table
            (both sides) or a pair (reference table, prediction table).
        remove_subwords, remove_punctuation: give WordPiece ``##`` pieces / single punctuation tokens no mass.
        stop_words: None (default), True / "en" (shipped 153-word list) or your own words.
        reference_aggregation: "max" (default: the closest reference; chosen on the development
            sets, see the card) or "mean" over references (the original's example).
        long_texts: "window" (sliding windows, default), "truncate" (first 510 pieces, as the originals)
            or "error".
        batch_size, device, verbose: Runtime only; never change a score.
        encoder: A ready :class:`Encoder` (overrides `model`, `layer`, `device`, `long_texts`).
        return_plans: Add ``extra["alignments"]``: per segment and reference, a
            :class:`~movers.explain.Explanation` (tokens, masses, cost matrix, plan, score).
        centering: Subtract a token mean from the kept token vectors before they are made unit length
            (Chen et al. 2020's batch centring, as :func:`~movers.twmd`), predictions and references
            separately: "none" (default; the original, and the development sets did not favour
            centring, see the card), "corpus" (one pair of means over the call; order-free), "batch"
            (means over each run of `centering_batch` consecutive segments; order dependent) or a
            fitted :class:`~movers.Centering` (``movers.fit_centering("moverscore", ...)``; call-free).
        centering_batch: k for ``centering="batch"`` (32, the TWMD original's batch size).
    Returns:
        :class:`~movers.result.Scores`: ``score`` (mean of segments), ``scores`` (input order),
        ``signature``; ``extra["distances"]`` (the EMD per segment, aggregated like the scores) and,
        for multiple references, ``extra["per_reference"]``.
    Raises:
        ValueError / TypeError: On malformed inputs or options (message names the argument).
    """
    name = "moverscore"
    preds, refs = check_pairs(name, predictions, references)
    check_choice(name, "preset", preset, list(PRESETS))
    base = PRESETS[preset]
    n_gram = base.n_gram if n_gram is None else n_gram
    check_number(name, "n_gram", n_gram, low=1, integer=True)
    check_number(name, "batch_size", batch_size, low=1, integer=True)
    cost = base.cost if cost is None else check_choice(name, "cost", cost, ["euclidean", "sqeuclidean", "cosine"])
    transform = base.transform if transform is None else check_choice(name, "transform", transform,
                                                                       list(_TRANSFORMS))
    check_choice(name, "reference_aggregation", reference_aggregation, ["mean", "max"])
    if not (isinstance(idf, (bool, Idf)) or (isinstance(idf, tuple) and len(idf) == 2
                                            and all(isinstance(t, Idf) for t in idf))):
        raise TypeError(f"{name}: `idf` must be a bool, an Idf table or a pair of Idf tables, got {type(idf).__name__}.")
    stops, stop_label = resolve_stopwords(stop_words)
    if encoder is None:
        encoder = load_encoder(model, layer=base.layer if layer is None else layer, device=device,
                               long_texts=long_texts)
    elif model is not None or layer is not None:
        raise ValueError(f"{name}: pass either `encoder` or `model`/`layer`, not both.")

    check_centering(name, centering, centering_batch, len(preds))
    kept_label = _kept_label(remove_subwords, remove_punctuation, stop_label)
    if isinstance(centering, Centering):
        centering.check(name, encoder.name, encoder.layer_label, kept_label)

    groups = ReferenceGroups.of(refs)
    filtered_out = check_encoder_inputs(  # no real token (only [UNK]), or too large: fail before the model runs
        name, encoder, preds, refs,
        kept=lambda tokens: moverscore_kept(tokens, [False] * len(tokens), remove_subwords=remove_subwords,
                                            remove_punctuation=remove_punctuation, stops=stops))
    if filtered_out:
        warnings.warn(f"{name}: {', '.join(filtered_out[:5])} keep only [CLS]/[SEP] after the filters (all tokens "
                      f"are punctuation, subword pieces or stop words); they are scored on those contextual "
                      f"vectors, as the original does.", RuntimeWarning, stacklevel=2)
    filters = dict(remove_subwords=remove_subwords, remove_punctuation=remove_punctuation, stops=stops)
    # This process scores segments `part` (all of them unless scoring is distributed or streamed; whole
    # centring batches); call-level statistics (IDF, corpus centring) are summed over the scope.
    scope = current_scope()
    part = scope.part(len(preds), multiple=centering_batch if centering == "batch" else 1)
    local = ReferenceGroups.of(refs[part.start:part.stop])
    idf_ref, idf_hyp, idf_label = _resolve_idf(name, idf, encoder, local.flat, preds[part.start:part.stop])

    def side(emb, i: int, table: Idf | None, mean) -> Histogram:
        weights = np.ones(len(emb.ids[i])) if table is None else np.asarray(table.lookup(emb.ids[i]), np.float64)
        vectors = emb.vectors[i].to(torch.float64)
        if mean is not None:
            vectors = vectors - mean
        return moverscore_histogram(emb.tokens[i], emb.special[i], vectors, weights, n_gram=n_gram, **filters)

    def kept(emb, i: int) -> torch.Tensor:
        return emb.vectors[i].to(torch.float64)[moverscore_kept(emb.tokens[i], emb.special[i], **filters)]

    # Centring: "batch" chunks hold whole batches; "corpus" needs the call's means first (one extra encoder
    # pass over this process's part, the sums added up over the scope) unless the whole call is one
    # chunk of one process; a fitted table is fixed.
    chunks = segment_chunks(len(part), CHUNK, centering_batch if centering == "batch" else 1)
    fixed = centering if isinstance(centering, Centering) else None
    center_label = centering.label if fixed else str(centering)
    whole_in_one = type(scope) is Scope and len(chunks) <= 1
    if centering == "corpus" and not whole_in_one:
        def vectors(chunk: range):  # sums only: kept vectors, a chunk at a time
            start, stop = part.start + chunk.start, part.start + chunk.stop
            return _centring_vectors(preds[start:stop], refs[start:stop], encoder=encoder, n_gram=n_gram,
                                     batch_size=batch_size, verbose=verbose, **filters)[:2]

        means, _ = chunked_corpus_means(chunks, vectors, lambda data: data, total=scope.total,
                                        dim=encoder.vector_size)
        fixed = Centering(*means, encoder.name, encoder.layer_label, kept_label)
    scope.statistics_done()

    pairs: list[Alignment] = []
    alignments: list[Explanation] = []
    # Bounded memory: embed and score CHUNK segments at a time (IDF above already covers the whole call).
    for chunk in chunks:
        start, stop = part.start + chunk.start, part.start + chunk.stop
        chunk_preds, chunk_refs = preds[start:stop], refs[start:stop]
        chunk = ReferenceGroups.of(chunk_refs)
        emb = encoder.embed(chunk_preds + chunk.flat, batch_size=batch_size, verbose=verbose)
        hyp_emb, ref_emb = emb.select(0, len(chunk_preds)), emb.select(len(chunk_preds), len(emb))
        if centering == "none":
            mu_h = mu_r = [None] * len(chunk_preds)
        else:
            mu_h, mu_r, label = centring_means(fixed if fixed is not None else centering,
                                               [kept(hyp_emb, i) for i in range(len(chunk_preds))],
                                               [kept(ref_emb, k) for k in range(len(chunk.flat))], chunk.owner,
                                               centering_batch)
            center_label = "corpus" if centering == "corpus" else label
        hyp_side, current = None, -1  # one prediction's histogram at a time (its references follow it)
        for k, i in enumerate(chunk.owner):
            if i != current:
                hyp_side, current = side(hyp_emb, i, idf_hyp, mu_h[i]), i
            ref_side = side(ref_emb, k, idf_ref, mu_r[i])
            pair = moverscore_from_embeddings(hyp_side, ref_side, cost=cost, transform=transform,
                                              return_plan=return_plans)
            pairs.append(pair)
            progress.pairs_done(1)
            if return_plans:
                alignments.append(Explanation.of(name, hyp_side, ref_side, pair, cost_label=cost))
        del emb, hyp_emb, ref_emb, hyp_side, ref_side, mu_h, mu_r  # before the next chunk is embedded
    pairs, alignments = scope.gather(pairs), scope.gather(alignments)
    empty = sorted({groups.owner[k] for k, pair in enumerate(pairs) if pair.empty})
    if empty:
        warnings.warn(f"{name}: segments {empty[:10]} have a side with no weighted token (all "
                      f"filtered, or idf 0); the largest cost is used (the worst score), see the card.",
                      RuntimeWarning, stacklevel=2)
    per_reference = groups.split([pair.score for pair in pairs])
    scores = groups.aggregate([pair.score for pair in pairs], reference_aggregation)
    # The distance of the reference the score came from: mean of distances, or the smallest one.
    distances = groups.aggregate([pair.distance for pair in pairs], "mean" if reference_aggregation == "mean"
                                 else "min")
    signature = format_signature("MoverScore", [
        ("preset", preset),
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        ("model", encoder.name),
        ("layer", encoder.layer_label),
        ("center", center_label),
        ("idf", idf_label),
        ("ngram", n_gram),
        ("sub", "drop" if remove_subwords else "keep"),
        ("punct", "drop" if remove_punctuation else "keep"),
        ("stop", stop_label),
        ("cost", cost),
        ("transform", transform),
        ("long", encoder.long_texts),
        ("ot", "emd"),
        *library_versions("transformers", "torch", "pot"),
    ])
    extra: dict = {"distances": distances}
    if groups.multiple:
        extra["per_reference"] = per_reference
    if return_plans:
        extra["alignments"] = groups.split(alignments)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=signature, extra=extra)


def _kept_label(remove_subwords: bool, remove_punctuation: bool, stop_label: str) -> str:
    """The token selection a fitted centring table must share (its ``preset`` field)."""
    return (f"moverscore[sub:{'drop' if remove_subwords else 'keep'},punct:{'drop' if remove_punctuation else 'keep'},"
            f"stop:{stop_label}]")


def _centring_vectors(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
                      preset: str = DEFAULT_PRESET, model: str | None = None,
                      layer: int | Sequence[int] | None = None, remove_subwords: bool = True,
                      remove_punctuation: bool = True, stop_words: bool | str | Sequence[str] | None = None,
                      stops: frozenset[str] | None = None, long_texts: str = "window", batch_size: int = 64,
                      device: str | None = None, verbose: bool = False, encoder: Encoder | None = None,
                      **_unused) -> tuple[list[torch.Tensor], list[torch.Tensor], str, str, str]:
    """Kept token vectors of predictions and all references (chunk by chunk), for corpus means and
    :func:`movers.fit_centering`: (predictions, references, model, layer, token-selection label)."""
    name = "moverscore"
    preds, refs = check_pairs(name, predictions, references)
    check_choice(name, "preset", preset, list(PRESETS))
    if stops is None:
        stops, stop_label = resolve_stopwords(stop_words)
    else:
        stop_label = resolve_stopwords(stop_words)[1]
    if encoder is None:
        encoder = load_encoder(model, layer=PRESETS[preset].layer if layer is None else layer, device=device,
                               long_texts=long_texts)
    flat = ReferenceGroups.of(refs).flat
    texts = preds + flat
    cand: list[torch.Tensor] = []
    ref: list[torch.Tensor] = []
    for start in range(0, len(texts), CHUNK):
        emb = encoder.embed(texts[start:start + CHUNK], batch_size=batch_size, verbose=verbose)
        for j in range(len(emb)):
            keep = moverscore_kept(emb.tokens[j], emb.special[j], remove_subwords=remove_subwords,
                                   remove_punctuation=remove_punctuation, stops=stops)
            (cand if start + j < len(preds) else ref).append(emb.vectors[j].to(torch.float64)[keep])
    return (cand, ref, encoder.name, encoder.layer_label,
            _kept_label(remove_subwords, remove_punctuation, stop_label))


def _resolve_idf(name: str, idf: IdfSpec, encoder: Encoder, refs: list[str],
                 preds: list[str]) -> tuple[Idf | None, Idf | None, str]:
    """(reference table, prediction table, signature label); None = uniform weights."""
    if idf is False:
        return None, None, "none"
    if idf is True:
        tables = (call_idf(encoder.iter_token_ids(refs), tokenizer=encoder.name),
                  call_idf(encoder.iter_token_ids(preds), tokenizer=encoder.name))
        if min(t.n_docs for t in tables) == 1:
            warnings.warn(f"{name}: idf=True computes IDF from the texts of this call; with a single text "
                          f"every token gets weight 0. Pass idf=False or a fitted movers.Idf table.",
                          RuntimeWarning, stacklevel=3)
        return tables[0], tables[1], "call"
    tables = (idf, idf) if isinstance(idf, Idf) else idf
    for table in tables:
        table.check(name, encoder.name)
    if isinstance(idf, Idf):
        return idf, idf, idf.label
    return idf[0], idf[1], f"{idf[0].label}+{idf[1].label}"


_COST_MAX = {"euclidean": 2.0, "sqeuclidean": 4.0, "cosine": 2.0}
