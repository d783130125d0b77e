"""Inverse document frequency over token ids, as MoverScore and BERTScore compute it.

``idf(t) = ln((N + 1) / (df(t) + 1))`` with ``df(t)`` the number of texts whose token-id *set*
(special tokens included) contains ``t``; unseen tokens get ``ln(N + 1)``. Special tokens occur in
every text, so their idf is ``ln(1) = 0``.

An :class:`Idf` table is a frozen value: fit it once on a corpus and pass it to every call (or every
shard) to make scores independent of which other texts are in the call.
"""
from __future__ import annotations

import hashlib
import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .tokens import PackedIds

__all__ = ["Idf", "idf_from_ids", "idf_from_counts", "document_frequencies", "packed_frequencies", "call_idf"]


@dataclass(frozen=True)
class Idf:
    """IDF weights per token id, with `default` for unseen ids. Picklable (no defaultdict)."""

    weights: Mapping[int, float]
    default: float
    n_docs: int
    tag: str = field(default="", compare=False)  # short content hash for signatures
    tokenizer: str = ""  # the encoder whose token ids these are (its signature name); "" = not recorded

    def __call__(self, token_id: int) -> float:
        return self.weights.get(token_id, self.default)

    def lookup(self, ids: Sequence[int]) -> list[float]:
        get, default = self.weights.get, self.default
        return [get(i, default) for i in ids]

    def lookup_array(self, ids: np.ndarray) -> np.ndarray:
        """:meth:`lookup` of an id array, as float64 (each distinct id looked up once)."""
        distinct, inverse = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
        get, default = self.weights.get, self.default
        return np.array([get(i, default) for i in distinct.tolist()], dtype=np.float64)[inverse.reshape(-1)]

    @property
    def label(self) -> str:
        return f"table[N={self.n_docs},{self.tag}]"

    def check(self, metric: str, tokenizer: str) -> None:
        """Raise unless this table holds finite, non-negative weights (IDF is ``ln((N+1)/(df+1)) >= 0``; a NaN
        or negative weight would silently change or flip a token's mass) and was fitted with `tokenizer` (an
        encoder's signature name): token ids of another vocabulary would weight the wrong tokens."""
        values = np.fromiter(self.weights.values(), dtype=np.float64, count=len(self.weights))
        if not (math.isfinite(self.default) and self.default >= 0 and np.isfinite(values).all()
                and (values >= 0).all()):
            bad = [(t, w) for t, w in self.weights.items() if not (math.isfinite(w) and w >= 0)][:3]
            raise ValueError(f"{metric}: `idf` must hold finite, non-negative weights (IDF is ln((N+1)/(df+1)) >= 0), "
                             f"got default {self.default!r} and token weights such as {bad}; fit it with "
                             f"movers.Idf.fit(texts).")
        if self.tokenizer and self.tokenizer != tokenizer:
            raise ValueError(f"{metric}: `idf` was fitted with the tokenizer of {self.tokenizer}, but this call "
                             f"encodes with {tokenizer}; fit it again with the same model (movers.Idf.fit(texts, "
                             f"model=...)).")

    @classmethod
    def fit(cls, texts: Sequence[str], *, model: str | None = None, unicode: str = "nfc") -> Idf:
        """Fit an IDF table on `texts` with the tokenizer of `model` (default: the bundled MiniLM), after the
        same Unicode rule as the scoring call (`unicode`: "nfc", the metrics' default, or "none")."""
        from ..core.validation import check_texts
        from .embedding import load_encoder

        if unicode not in ("nfc", "none"):
            raise ValueError(f"Idf.fit: `unicode` must be 'nfc' or 'none', got {unicode!r}.")
        texts = check_texts("Idf.fit", "texts", texts)
        if unicode == "nfc":
            texts = [unicodedata.normalize("NFC", t) for t in texts]
        encoder = load_encoder(model)
        ids = [encoder.backbone.with_specials(c) for c in encoder.tokenize(texts)]
        return idf_from_ids(ids, tokenizer=encoder.name)


def document_frequencies(docs: Iterable[Sequence[int]]) -> tuple[Counter[int], int]:
    """(df, N): in how many of the documents each token id occurs, and the number of documents."""
    df: Counter[int] = Counter()
    n = 0
    for doc in docs:
        df.update(set(doc))
        n += 1
    return df, n


def idf_from_counts(df: Mapping[int, int], n: int, *, tokenizer: str = "") -> Idf:
    """IDF from document frequencies `df` over `n` documents; `tokenizer` records whose ids."""
    weights = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
    digest = hashlib.sha1(repr(sorted(df.items())).encode() + str(n).encode()).hexdigest()[:8]
    return Idf(weights=weights, default=math.log(n + 1), n_docs=n, tag=digest, tokenizer=tokenizer)


def idf_from_ids(docs: Iterable[Sequence[int]], *, tokenizer: str = "") -> Idf:
    """IDF from token-id documents (each document counts a token once); `tokenizer` records whose ids."""
    return idf_from_counts(*document_frequencies(docs), tokenizer=tokenizer)


def packed_frequencies(packed: PackedIds) -> tuple[Counter[int], int]:
    """:func:`document_frequencies` of packed texts, with array operations: each distinct (text, id) once."""
    if not len(packed.ids):
        return Counter(), len(packed)
    size = int(packed.ids.max()) + 1
    pairs = np.unique(packed.text_of * size + packed.ids)
    ids, counts = np.unique(pairs % size, return_counts=True)
    return Counter(dict(zip(ids.tolist(), counts.tolist(), strict=True))), len(packed)


def call_idf(encoder: Any, texts: Sequence[str]) -> Idf:
    """Per-call IDF of `texts` as `encoder` reads them (its ids, special tokens included, ``long_texts`` applied;
    tokenised some thousands at a time and counted with array operations): document frequencies of this
    process's texts summed over the active scope (all ranks of :func:`~movers.distributed.distributed_scoring`,
    or a whole stream), so that every part of a call weights tokens as one process scoring the whole call would."""
    from ..core.scope import current_scope

    df: Counter[int] = Counter()
    n = 0
    for _, packed in encoder.iter_packed_ids(texts):
        part, k = packed_frequencies(packed)
        df.update(part)
        n += k
    scope = current_scope()
    return idf_from_counts(scope.total(df), scope.total(n), tokenizer=encoder.name)
