"""What an encoder returns: token vectors of many texts, packed in one tensor on the encoder's device.

:class:`TokenBatch` is the form every token metric reads: the vectors of every token of every distinct text in
one ``[T, d]`` tensor (float32, on the encoder's device), their ids and offsets on the host
(:class:`~movers.text.tokens.PackedIds`), and which distinct text each input text is. Token classes (special,
continuation piece, punctuation, stop word) come from the vocabulary's tables, indexed with the ids; the metrics
gather the tokens they compare from it in padded batches, so the per-token work is a few array operations per
chunk of texts, not a few per text.

:class:`TokenEmbeddings` (one tensor and one list of strings per text) is the per-text form of the same output
(:meth:`movers.Encoder.embed`), and the form a hand-made encoder returns (:meth:`TokenBatch.of_embeddings`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .filters import PUNCTUATION
from .languages import PunctuationRule, is_punctuation
from .tokens import PackedIds, Vocabulary, subword_flags, token_texts

__all__ = ["TokenTexts", "TokenBatch", "TokenEmbeddings", "EmbeddedText"]


@dataclass(frozen=True)
class TokenEmbeddings:
    """Per-text token vectors, in input order.

    tokens[i]: wordpiece strings incl. special tokens; ids[i]: their vocabulary ids;
    special[i]: True where the position is a special token ([CLS], [SEP], <s>, ...);
    vectors[i]: float32 tensor [len(tokens[i]), d] on CPU.
    """

    tokens: list[list[str]]
    ids: list[list[int]]
    special: list[list[bool]]
    vectors: list[Tensor]

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, start: int, stop: int) -> TokenEmbeddings:
        """Texts ``start:stop`` (e.g. the predictions, then the references, of one ``embed`` call)."""
        return TokenEmbeddings(self.tokens[start:stop], self.ids[start:stop], self.special[start:stop],
                               self.vectors[start:stop])

    def texts(self) -> list[EmbeddedText]:
        """One :class:`EmbeddedText` per text, in order."""
        return [EmbeddedText(*row) for row in zip(self.tokens, self.ids, self.special, self.vectors, strict=False)]


@dataclass(frozen=True)
class EmbeddedText:
    """One text as the encoder saw it: wordpieces (special tokens included), their ids, which are special,
    and the float32 vectors [len(tokens), d] (CPU)."""

    tokens: list[str]
    ids: list[int]
    special: list[bool]
    vectors: Tensor


@dataclass(frozen=True, eq=False)
class TokenTexts:
    """Token ids of texts with the classes of their tokens: distinct text u's tokens are
    ``packed.ids[packed.offsets[u]:packed.offsets[u + 1]]``. Classes are read from `vocabulary`'s tables, or
    (a hand-made encoder's output, without a vocabulary) from `strings` and `special_flags`."""

    packed: PackedIds
    vocabulary: Vocabulary | None
    strings: list[list[str]] | None = None
    special_flags: np.ndarray | None = None

    @property
    def special(self) -> np.ndarray:
        """[T] bool: special tokens."""
        if self.vocabulary is not None:
            return self.vocabulary.special[self.packed.ids]
        assert self.special_flags is not None
        return self.special_flags

    def _flat_strings(self) -> list[str]:
        assert self.strings is not None
        return [s for row in self.strings for s in row]

    def _table(self, name: str) -> np.ndarray:
        if self.vocabulary is not None:
            return getattr(self.vocabulary, name)[self.packed.ids]
        rule = {"continuation": lambda s: "##" in s, "marker": lambda s: s.startswith(("Ġ", "▁")),
                "punctuation": lambda s: s in PUNCTUATION,
                "unicode_punctuation": lambda s: is_punctuation(token_texts(None, [s])[0])}[name]
        return np.array([rule(s) for s in self._flat_strings()], dtype=bool)

    @property
    def punctuation(self) -> np.ndarray:
        """[T] bool: single ASCII punctuation tokens."""
        return self._table("punctuation")

    def punctuation_of(self, rule: PunctuationRule) -> np.ndarray:
        """[T] bool: punctuation tokens by `rule`: "ascii" (a single ASCII punctuation character, MoverScore's
        original rule, English) or "unicode" (a token whose text is Unicode punctuation only, every other
        language; :func:`movers.text.languages.is_punctuation`)."""
        return self._table("punctuation" if rule == "ascii" else "unicode_punctuation")

    def subword(self) -> np.ndarray:
        """[T] bool: continuation pieces (:func:`movers.text.filters.is_subword` of every token)."""
        p = self.packed
        return subword_flags(self._table("continuation"), self._table("marker"), self._table("punctuation"),
                             p.position, p.text_of, len(p))

    def words(self, words: frozenset[str]) -> np.ndarray:
        """[T] bool: tokens whose string is one of `words`."""
        if not words:
            return np.zeros(len(self.packed.ids), dtype=bool)
        if self.vocabulary is not None:
            return self.vocabulary.words(words)[self.packed.ids]
        return np.array([s in words for s in self._flat_strings()], dtype=bool)

    def tokens(self, u: int) -> list[str]:
        """The token strings of distinct text `u` (for labels)."""
        if self.vocabulary is not None:
            return self.vocabulary.tokens(self.packed.row(u))
        assert self.strings is not None
        return list(self.strings[u])

    def token_strings(self, tokens: np.ndarray) -> list[str]:
        """The strings of packed tokens `tokens` (indices into ``packed.ids``), for labels."""
        if self.vocabulary is not None:
            return self.vocabulary.tokens(self.packed.ids[tokens])
        flat = self._flat_strings()
        return [flat[t] for t in np.asarray(tokens).tolist()]


@dataclass(frozen=True, eq=False, kw_only=True)
class TokenBatch(TokenTexts):
    """Token vectors of texts, packed: distinct text u's tokens are rows ``packed.offsets[u]:packed.offsets[u+1]``
    of `vectors` ([T, d] float32 on the encoder's device); input text i is distinct text ``rows[i]``."""

    vectors: Tensor
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def device(self) -> torch.device:
        return self.vectors.device

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    # -------------------------------------------------------------------------------- conversions

    def to_embeddings(self) -> TokenEmbeddings:
        """The per-text form, in input order: one CPU tensor (and one list of strings) per text."""
        host = self.vectors.cpu()
        off, special = self.packed.offsets, self.special
        rows = self.rows.tolist()
        return TokenEmbeddings(tokens=[self.tokens(u) for u in rows],
                               ids=[self.packed.row(u).tolist() for u in rows],
                               special=[special[off[u]:off[u + 1]].tolist() for u in rows],
                               vectors=[host[off[u]:off[u + 1]].clone() for u in rows])

    @classmethod
    def of_embeddings(cls, embeddings: TokenEmbeddings, device: torch.device | str | None = None) -> TokenBatch:
        """A hand-made encoder's per-text output as a batch (one distinct text per input text)."""
        n = len(embeddings)
        packed = PackedIds.of([list(ids) for ids in embeddings.ids])
        vectors = torch.cat([torch.as_tensor(v, dtype=torch.float32) for v in embeddings.vectors]) if n else \
            torch.zeros(0, 0)
        if device is not None:
            vectors = vectors.to(device)
        special = np.array([bool(s) for row in embeddings.special for s in row], dtype=bool)
        return cls(packed=packed, vocabulary=None, strings=[list(t) for t in embeddings.tokens], special_flags=special,
                   vectors=vectors, rows=np.arange(n, dtype=np.int64))
