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
from ..embedding import Encoder, TokenEmbeddings
from ..filters import PUNCTUATION, is_subword, resolve_stopwords
from ..idf import Idf, idf_from_ids
from ..result import Scores
from ..signature import format_signature, library_versions, nrefs_label
from ..transport import emd

__all__ = ["moverscore", "PRESETS", "HIGHER_IS_BETTER", "DEFAULT_PRESET"]

HIGHER_IS_BETTER = True
DEFAULT_PRESET = "github"
CHUNK = 2048
"""Segments embedded and scored at a time: memory stays bounded for any corpus size."""

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


def moverscore(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
               preset: str = DEFAULT_PRESET, model: str | None = None,
               layer: int | Sequence[int] | None = None, n_gram: int | None = None,
               cost: Cost | None = None, transform: Transform | None = None,
               idf: IdfSpec = False, remove_subwords: bool = True, remove_punctuation: bool = True,
               stop_words: bool | str | Sequence[str] | None = None,
               reference_aggregation: Literal["mean", "max"] = "mean",
               long_texts: Literal["window", "truncate", "error"] = "window",
               batch_size: int = 64, device: str | None = None, verbose: bool = False,
               encoder: Encoder | None = None) -> Scores:
    """MoverScore of each prediction against its reference(s).

    Args:
        predictions: Hypotheses, one per segment.
        references: One reference per segment (str) or a non-empty list per segment (ragged allowed).
        preset: "github" (default, score 1/(1+d) in (0, 1]), "1.0.3" (1-d, may be negative) or "paper".
        model: Hub id or local folder; None = the bundled all-MiniLM-L6-v2.
        layer, n_gram, cost, transform: Override the preset (layer: hidden_states index, or a list of
            indices aggregated by power means).
        idf: False (default) = uniform weights (special tokens included, the original's no-idf setting;
            chosen on the development sets, see the card); True = per call, separately on the
            references and on the predictions (the original README's usage); an :class:`Idf` table
            (both sides) or a pair (reference table, prediction table).
        remove_subwords, remove_punctuation: give WordPiece ``##`` pieces / single punctuation tokens no mass.
        stop_words: None (default), True / "en" (shipped 153-word list) or your own words.
        reference_aggregation: "mean" over references (the original's example) or "max".
        long_texts: "window" (sliding windows, default), "truncate" (first 510 pieces, as the originals)
            or "error".
        batch_size, device, verbose: Runtime only; never change a score.
        encoder: A ready :class:`Encoder` (overrides `model`, `layer`, `device`, `long_texts`).
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
    cost = base.cost if cost is None else check_choice(name, "cost", cost, ["euclidean", "sqeuclidean", "cosine"])
    transform = base.transform if transform is None else check_choice(name, "transform", transform,
                                                                       list(_TRANSFORMS))
    check_choice(name, "reference_aggregation", reference_aggregation, ["mean", "max"])
    if not (isinstance(idf, (bool, Idf)) or (isinstance(idf, tuple) and len(idf) == 2
                                            and all(isinstance(t, Idf) for t in idf))):
        raise TypeError(f"{name}: `idf` must be a bool, an Idf table or a pair of Idf tables, got {type(idf).__name__}.")
    stops, stop_label = resolve_stopwords(stop_words)
    if encoder is None:
        encoder = Encoder(model, layer=base.layer if layer is None else layer, device=device,
                          long_texts=long_texts)
    elif model is not None or layer is not None:
        raise ValueError(f"{name}: pass either `encoder` or `model`/`layer`, not both.")

    flat_refs = [r for group in refs for r in group]
    idf_ref, idf_hyp, idf_label = _resolve_idf(name, idf, encoder, flat_refs, preds)

    def side(e: TokenEmbeddings, i: int, table: Idf | None):
        return _histogram(e.tokens[i], e.special[i], e.vectors[i], e.ids[i], table, n_gram=n_gram,
                          remove_subwords=remove_subwords, remove_punctuation=remove_punctuation, stops=stops)

    per_reference: list[list[float]] = []
    per_reference_d: list[list[float]] = []
    empty: list[int] = []
    # Bounded memory: embed and score CHUNK segments at a time (IDF above already covers the whole call).
    for start in range(0, len(preds), CHUNK):
        chunk_preds, chunk_refs = preds[start:start + CHUNK], refs[start:start + CHUNK]
        chunk_flat = [r for group in chunk_refs for r in group]
        emb = encoder.embed(chunk_preds + chunk_flat, batch_size=batch_size, verbose=verbose)
        hyp_emb = _slice(emb, 0, len(chunk_preds))
        ref_emb = _slice(emb, len(chunk_preds), len(emb.ids))
        k = 0
        for i, group in enumerate(chunk_refs):
            hyp_side = side(hyp_emb, i, idf_hyp)
            scores_i, dists_i = [], []
            for _ in group:
                d, was_empty = _distance(side(ref_emb, k, idf_ref), hyp_side, cost)
                if was_empty:
                    empty.append(start + i)
                dists_i.append(d)
                scores_i.append(_TRANSFORMS[transform](d))
                k += 1
            per_reference.append(scores_i)
            per_reference_d.append(dists_i)
    if empty:
        warnings.warn(f"{name}: segments {sorted(set(empty))[:10]} have a side with no weighted token (all "
                      f"filtered, or idf 0); see the card's 'Empty histograms' for the score used.",
                      RuntimeWarning, stacklevel=2)
    agg = (lambda xs: sum(xs) / len(xs)) if reference_aggregation == "mean" else max
    agg_d = (lambda xs: sum(xs) / len(xs)) if reference_aggregation == "mean" else min
    scores = [float(agg(s)) for s in per_reference]
    distances = [float(agg_d(d)) for d in per_reference_d]
    signature = format_signature("MoverScore", [
        ("preset", preset),
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        ("model", encoder.name),
        ("layer", encoder.layer_label),
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
    extra = {"distances": distances}
    if any(len(g) > 1 for g in refs):
        extra["per_reference"] = per_reference
    return Scores(score=float(np.mean(scores)), scores=scores, signature=signature, extra=extra)


def _slice(e: TokenEmbeddings, start: int, stop: int) -> TokenEmbeddings:
    return TokenEmbeddings(e.tokens[start:stop], e.ids[start:stop], e.special[start:stop], e.vectors[start:stop])


def _resolve_idf(name: str, idf: IdfSpec, encoder: Encoder, refs: list[str],
                 preds: list[str]) -> tuple[Idf | None, Idf | None, str]:
    """(reference table, prediction table, signature label); None = uniform weights."""
    if idf is False:
        return None, None, "none"
    if idf is True:
        if len(preds) == 1 or len(refs) == 1:
            warnings.warn(f"{name}: idf=True computes IDF from the texts of this call; with a single text "
                          f"every token gets weight 0. Pass idf=False or a fitted movers.Idf table.",
                          RuntimeWarning, stacklevel=3)
        return idf_from_ids(encoder.token_ids(refs)), idf_from_ids(encoder.token_ids(preds)), "call"
    if isinstance(idf, Idf):
        return idf, idf, idf.label
    return idf[0], idf[1], f"{idf[0].label}+{idf[1].label}"


def _histogram(tokens: list[str], special: list[bool], vectors: torch.Tensor, ids: list[int],
               table: Idf | None, *, n_gram: int, remove_subwords: bool, remove_punctuation: bool,
               stops: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """(masses [k], unit vectors [k, d]) of the kept tokens or n-grams with positive mass, float64."""
    weights = np.ones(len(ids)) if table is None else np.asarray(table.lookup(ids), dtype=np.float64)
    keep = [p for p, tok in enumerate(tokens)
            if special[p] or not ((remove_subwords and is_subword(tok, p, tokens))
                                  or (remove_punctuation and tok in PUNCTUATION) or tok in stops)]
    vecs = vectors.to(torch.float64).numpy()
    if n_gram == 1:
        mass, points = weights[keep], vecs[keep]
    else:
        # Windows of n consecutive *kept* positions (stride 1); fewer than n kept -> one window (v1).
        wins = [keep[s:s + n_gram] for s in range(max(1, len(keep) - n_gram + 1))]
        mass = np.array([weights[w].sum() for w in wins])
        points = np.stack([(weights[w, None] * vecs[w]).sum(0) for w in wins]) if wins and keep else vecs[:0]
    positive = mass > 0
    mass, points = mass[positive], points[positive]
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    return mass, points / np.maximum(norms, 1e-300)


def _distance(ref: tuple[np.ndarray, np.ndarray], hyp: tuple[np.ndarray, np.ndarray],
              cost: Cost) -> tuple[float, bool]:
    """EMD between two histograms of unit vectors; (distance, a side was empty)."""
    (m_r, x_r), (m_h, x_h) = ref, hyp
    if len(m_r) == 0 and len(m_h) == 0:
        return 0.0, True  # nothing to transport (the original's result)
    if len(m_r) == 0 or len(m_h) == 0:
        return _COST_MAX[cost], True  # all mass pays the largest possible cost (EMD-hat's penalty)
    # Direct differences (not sqrt(2 - 2cos)): exactly 0 for identical vectors, so self-scores are maximal.
    sq = cdist(x_r, x_h, "sqeuclidean")
    c = np.sqrt(sq) if cost == "euclidean" else sq if cost == "sqeuclidean" else 0.5 * sq  # 1-cos = |x-y|^2/2
    return emd(m_r, m_h, c).cost, False


_COST_MAX = {"euclidean": 2.0, "sqeuclidean": 4.0, "cosine": 2.0}
