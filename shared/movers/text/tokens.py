"""Token ids without strings: tables over a tokenizer's vocabulary, packed ids, one tokenisation per call.

* :class:`Vocabulary`: boolean tables over the vocabulary (special tokens, WordPiece continuation pieces, BPE and
  SentencePiece word-start markers, single punctuation characters, a stop-word list), built once per tokenizer
  from its token strings and read with an array of ids, so that a call never turns ids into strings to find
  which tokens a metric keeps (the approach of fairseq's whole-word masks).
* :class:`PackedIds`: the ids of many texts in one array with their offsets (the layout every per-token step
  reads: one array operation for all texts, not one per text).
* :func:`content_ids` tokenises texts (no special tokens) with the tokenizer's Rust backend when it has one;
  inside :func:`call_tokens` each distinct text is tokenised once, and the checks, the IDF statistics and the
  encoder of a call read the same ids (up to :data:`MEMO_TOKENS` tokens a call; past that, texts are tokenised
  again where they are read).
"""
from __future__ import annotations

import contextlib
import contextvars
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..core.packed import sides_of

__all__ = ["Vocabulary", "PackedIds", "content_ids", "call_tokens", "MEMO_TOKENS", "subword_flags", "token_texts"]

MEMO_TOKENS = 1 << 24
"""Token ids a call keeps for reuse (int32: 64 MiB); texts past it are tokenised again where they are read."""

_MARKERS = ("Ġ", "▁")
_PUNCTUATION = frozenset(string.punctuation)


@dataclass(eq=False)
class Vocabulary:
    """Per-id tables of one tokenizer, indexed with an array of ids.

    ``strings[i]`` is token i's string; ``special``: one of the tokenizer's special ids ([CLS], [SEP], [PAD],
    [UNK], ...); ``continuation``: contains ``##`` (WordPiece's continuation piece, as MoverScore tests it);
    ``marker``: starts with a word-start marker (``Ġ`` BPE, ``▁`` SentencePiece); ``punctuation``: a single ASCII
    punctuation character.
    """

    strings: list[str]
    special: np.ndarray
    continuation: np.ndarray
    marker: np.ndarray
    punctuation: np.ndarray
    unk: int | None
    tokenizer: Any = field(default=None, repr=False)
    _words: dict[frozenset[str], np.ndarray] = field(default_factory=dict, repr=False)
    _unicode_punctuation: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def of(cls, tokenizer: Any) -> Vocabulary:
        """The tables of `tokenizer` (every id below ``len(tokenizer)``, added tokens included)."""
        size = max(len(tokenizer), max(tokenizer.all_special_ids, default=-1) + 1)
        strings = [s if isinstance(s, str) else "" for s in tokenizer.convert_ids_to_tokens(list(range(size)))]
        special = np.zeros(size, dtype=bool)
        special[list(tokenizer.all_special_ids)] = True
        unk = getattr(tokenizer, "unk_token_id", None)
        return cls(strings, special, np.array(["##" in s for s in strings], dtype=bool),
                   np.array([s.startswith(_MARKERS) for s in strings], dtype=bool),
                   np.array([s in _PUNCTUATION for s in strings], dtype=bool), unk, tokenizer)

    @property
    def unicode_punctuation(self) -> np.ndarray:
        """Bool table: the token's text (:func:`token_texts`) is made only of Unicode punctuation (the rule of every
        language but English), made on first use, once per tokenizer."""
        if self._unicode_punctuation is None:
            from .languages import is_punctuation

            self._unicode_punctuation = np.array([is_punctuation(t) for t in token_texts(self.tokenizer,
                                                                                       self.strings)], dtype=bool)
        return self._unicode_punctuation

    def words(self, words: frozenset[str]) -> np.ndarray:
        """Bool table: the token's string is one of `words` (a stop-word list), made once per list."""
        if words not in self._words:
            self._words[words] = np.array([s in words for s in self.strings], dtype=bool)
        return self._words[words]

    def tokens(self, ids: Sequence[int] | np.ndarray) -> list[str]:
        """The strings of `ids` (for labels: explanations, cache entries)."""
        strings = self.strings
        return [strings[i] for i in np.asarray(ids).tolist()]


def token_texts(tokenizer: Any, strings: Sequence[str]) -> list[str]:
    """Each token's text as it reads in a text, without white space: decoded by the tokenizer's own decoder where
    it has one (a byte-level BPE token's bytes as characters, SentencePiece's and BPE's word-start markers
    removed), else the string without a word-start marker or WordPiece's ``##``."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is not None:
        return [decoder.decode([s]).strip() if s else "" for s in strings]
    return [s.removeprefix("##").lstrip("".join(_MARKERS)).strip() for s in strings]


def subword_flags(continuation: np.ndarray, marker: np.ndarray, punctuation: np.ndarray, position: np.ndarray,
                  text_of: np.ndarray, n_texts: int) -> np.ndarray:
    """Continuation pieces of packed tokens (:func:`movers.text.filters.is_subword` for every token at once):
    WordPiece ``##x``, or, in a text with any word-start marker, a piece after the first token without one that
    is not punctuation. All arrays are per token; `text_of` is each token's text, `position` its place in it."""
    marked = np.zeros(n_texts, dtype=bool)
    marked[text_of[marker]] = True
    return continuation | (marked[text_of] & (position > 1) & ~marker & ~punctuation)


@dataclass(frozen=True, eq=False)
class PackedIds:
    """Token ids of several texts, packed: text t's ids are ``ids[offsets[t]:offsets[t + 1]]``."""

    ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[np.ndarray | Sequence[int]]) -> PackedIds:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]) if len(rows) else \
            np.zeros(0, dtype=np.int64)
        return cls(ids.astype(np.int64, copy=False), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def text_of(self) -> np.ndarray:
        """Each token's text."""
        return sides_of(self.lengths)

    @cached_property
    def position(self) -> np.ndarray:
        """Each token's place in its text."""
        return np.arange(len(self.ids), dtype=np.int64) - self.offsets[self.text_of]

    def count(self, flags: np.ndarray) -> np.ndarray:
        """Per text, how many of its tokens have `flags` set."""
        return np.bincount(self.text_of[flags], minlength=len(self)).astype(np.int64)

    def row(self, t: int) -> np.ndarray:
        return self.ids[self.offsets[t]:self.offsets[t + 1]]


def _tokenize(tokenizer: Any, texts: list[str]) -> list[np.ndarray]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and getattr(backend, "truncation", None) is None \
            and getattr(backend, "padding", None) is None:
        # the fast tokenizer's own batch call without the Python wrapper's conversions (the same ids: tested)
        return [np.asarray(e.ids, dtype=np.int32) for e in backend.encode_batch(texts, add_special_tokens=False)]
    # verbose=False: no "Token indices sequence length is longer than the specified maximum" warning; the model
    # never sees more than one window of these ids
    enc = tokenizer(texts, add_special_tokens=False, return_attention_mask=False, verbose=False)
    return [np.asarray(x, dtype=np.int32) for x in enc["input_ids"]]


_Memo = dict[int, tuple[Any, dict[str, np.ndarray], list[int]]]
_MEMO: contextvars.ContextVar[_Memo | None] = contextvars.ContextVar("movers_call_tokens", default=None)


@contextlib.contextmanager
def call_tokens() -> Iterator[None]:
    """Within the block :func:`content_ids` tokenises each distinct text once per tokenizer (nested blocks share
    the outer one's ids); the ids are dropped when the outermost block ends."""
    token = _MEMO.set({} if _MEMO.get() is None else _MEMO.get())
    try:
        yield
    finally:
        _MEMO.reset(token)


def content_ids(tokenizer: Any, texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's token ids without special tokens (int32), from the block's memo where it has them."""
    memos = _MEMO.get()
    if memos is None:
        return _tokenize(tokenizer, list(texts))
    _, memo, used = memos.setdefault(id(tokenizer), (tokenizer, {}, [0]))
    missing = [t for t in dict.fromkeys(texts) if t not in memo]
    if missing:
        new = dict(zip(missing, _tokenize(tokenizer, missing), strict=True))
        for text, ids in new.items():
            if used[0] + len(ids) > MEMO_TOKENS:
                break
            memo[text] = ids
            used[0] += len(ids)
        return [memo[t] if t in memo else new[t] for t in texts]
    return [memo[t] for t in texts]
