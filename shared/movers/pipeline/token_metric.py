"""The token metrics' chunk: one packed batch of token vectors on the encoder's device (MoverScore, TWMD,
Lazy-EMD).

A :class:`TokenMetric` embeds a chunk's texts into one :class:`~movers.text.token_batch.TokenBatch` (each distinct
text once; the vectors stay on the encoder's device), takes the centring sums of every text in a few batched
operations, and scores the chunk's pairs with its own :meth:`~movers.pipeline.embedding.EmbeddingMetric.score_chunk`:
its sides as :class:`~movers.core.pairs.PointSets` (index arrays built on the host from the token ids and the
vocabulary's tables), gathered bucket by bucket (:func:`~movers.core.pairs.gather`). Nothing here runs once per
text: the work per chunk is a few array operations, plus a few per bucket of pairs.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from ..core.explanation import Explanation
from ..core.histogram import Alignment
from ..core.packed import ranges, sides_of
from ..core.pairs import PointSets, Scratch, gather, stage
from ..text.centering import SegmentMeans
from ..text.embedding import Encoder
from ..text.token_batch import TokenBatch, TokenTexts
from .embedding import Chunk, Context, EmbeddingMetric, EmbeddingOptions

__all__ = ["TokenMetric", "input_tokens", "pair_sides", "side_means", "side_labels", "explanations"]

OptionsT = TypeVar("OptionsT", bound=EmbeddingOptions)
C = TypeVar("C", bound=Context)

_SUM_STEP = 1 << 13
"""Token vectors converted to float64 at a time for the centring sums, in memory reused from step to step
(:class:`~movers.core.pairs.Scratch`; 24 MiB at 384 dims)."""


def input_tokens(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
    """(token, text) of every token of every input text, in input order: `token` indexes the batch's packed
    vectors and ids (a text given twice has its tokens twice), `text` is the input text's position."""
    lengths = batch.packed.lengths[batch.rows]
    return ranges(batch.packed.offsets[batch.rows], lengths), sides_of(lengths)


def pair_sides(chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
    """(prediction text, reference text) of each of the chunk's pairs, as positions in its input texts."""
    owner = np.asarray(chunk.group.owner, dtype=np.int64)
    return owner, chunk.n + np.arange(len(owner), dtype=np.int64)


def side_means(means: SegmentMeans | None, prediction: np.ndarray) -> np.ndarray | None:
    """The row of ``means.table`` each input text is centred by (None: no centring): a prediction its segment's
    prediction mean, a reference (the pair ``prediction[k]``'s) its segment's reference mean."""
    return None if means is None else np.concatenate([means.prediction, means.reference[prediction]])


def side_labels(texts: TokenTexts, points: PointSets, s: int, member: np.ndarray | None = None) -> list[str]:
    """The labels of side `s`'s points: its tokens' strings, or (n-grams: `member` [Q, n], which window members
    are real) each point's tokens joined by spaces."""
    rows = slice(int(points.start[s]), int(points.start[s] + points.count[s]))
    if member is None:
        return texts.token_strings(points.index[rows, 0])
    strings = iter(texts.token_strings(points.index[rows][member[rows]]))
    return [" ".join(next(strings) for _ in range(int(k))) for k in member[rows].sum(1)]


def explanations(name: str, aligned: Sequence[Alignment], texts: TokenTexts, points: PointSets,
                 prediction: np.ndarray, reference: np.ndarray, cost_label: str, member: np.ndarray | None = None
                 ) -> list[Explanation]:
    """Each pair's :class:`~movers.core.explanation.Explanation`: its sides' labels (:func:`side_labels`) and
    masses, and its alignment's cost and plan (zeros where the pair was not solved: a side without points)."""
    out = []
    for k, a in enumerate(aligned):
        h, r = int(prediction[k]), int(reference[k])
        left, right = side_labels(texts, points, h, member), side_labels(texts, points, r, member)
        blank = np.zeros((len(left), len(right)))
        out.append(Explanation(metric=name, prediction_labels=left, reference_labels=right,
                               prediction_mass=points.side_mass(h).copy(), reference_mass=points.side_mass(r).copy(),
                               cost=np.asarray(blank if a.cost is None else a.cost, dtype=np.float64),
                               plan=np.asarray(blank if a.plan is None else a.plan, dtype=np.float64),
                               score=float(a.score), distance=a.distance, cost_label=cost_label))
    return out


class TokenMetric(EmbeddingMetric[OptionsT, C], Generic[OptionsT, C]):
    """An embedding metric over contextual token vectors, scored a chunk at a time in batches."""

    parallel_pairs = True

    @abstractmethod
    def centring_tokens(self, ctx: C, batch: TokenBatch) -> np.ndarray:
        """[T] bool over the batch's packed tokens: the tokens centring means are taken over."""

    def embed(self, ctx: C, texts: list[Any]) -> TokenBatch:
        """The texts through the encoder: a :class:`TokenBatch` (a hand-made encoder's per-text output packed)."""
        encoder, o = ctx.encoder, ctx.options
        assert encoder is not None
        if isinstance(encoder, Encoder):
            return encoder.encode(texts, batch_size=o.batch_size, verbose=o.verbose)
        return TokenBatch.of_embeddings(encoder.embed(texts, batch_size=o.batch_size, verbose=o.verbose),
                                        getattr(encoder, "device", None))

    def centring_sums(self, ctx: C, items: TokenBatch, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each text's centring tokens summed in float64 (and counted), per distinct text in a few batched
        operations, then read out for every input text."""
        tokens = np.flatnonzero(self.centring_tokens(ctx, items))
        texts = items.packed.text_of[tokens]
        distinct, dim, device = len(items.packed), items.dim, items.device
        sums = torch.zeros(distinct, dim + 1, dtype=torch.float64, device=device)
        counts = np.bincount(texts, minlength=distinct).astype(np.float64)
        scratch = Scratch()
        for start in range(0, len(tokens), _SUM_STEP):
            index, text = stage([tokens[start:start + _SUM_STEP], texts[start:start + _SUM_STEP]], device)
            index = index.view(1, -1, 1)  # one side of single tokens
            wide = gather(items.vectors, index, None, None, out=scratch.points([index], items.vectors)[0])
            sums[:, :dim].index_add_(0, text, wide[0])
        rows, count = stage([items.rows, counts], device)
        sums[:, dim] = count
        per_text = sums.index_select(0, rows)
        return per_text[:n], per_text[n:]
