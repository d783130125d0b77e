"""Centring of token vectors (Chen et al., 2020): subtract a token mean before comparing directions.

The TWMD paper centres the candidate tokens and, separately, the reference tokens by their means over a
batch of consecutive pairs. Modes, by name in every signature (``center:...``):

* ``"batch"`` — means over each run of `k` consecutive segments (the paper; scores depend on order
  and on the other segments of the batch);
* ``"corpus"`` — one pair of means over the whole call (order-free, depends on the call's texts);
* ``"none"`` — no centring;
* a fitted :class:`Centering` — fixed means (order- and call-free: shards score like one call).

Order-free modes: ``"corpus"`` (a segment's score does not depend on the order of the call, only on
which texts are in it), ``"none"`` and a fitted table (depends on nothing else in the call). ``"batch"``
depends on the order: moving a segment to another batch of `k` changes its means and its score.

Every metric with token (or word) vectors takes ``centering=`` and ``centering_batch=`` with these
modes (twmd, moverscore, lazy_emd, and the contextual path of sms/s_wms); each centres the vectors it
scores (its kept tokens or words), predictions and references separately, before its own
normalisation; :func:`movers.fit_centering` fits a table with the tokens a metric keeps under its options.
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from ..core.packed import host_tensor
from ..core.validation import check_choice, check_number

__all__ = ["Centering", "CENTERINGS", "CenteringSpec", "SegmentMeans", "segment_means", "fitted_means",
           "centring_means", "text_sums", "corpus_sums", "means_of", "chunked_corpus_means", "check_centering",
           "centering_label"]

CENTERINGS = ("batch", "corpus", "none")


@dataclass(frozen=True, eq=False)
class Centering:
    """Fixed centring means fitted on a corpus: scores no longer depend on which pairs share a call.

    ``prediction_mean`` / ``reference_mean``: float64 [d], the token means of the kept tokens of the
    fitted predictions and references. ``model``, ``layer``, ``preset`` record what they were fitted
    with (``preset``: the metric's choice of kept tokens); a metric refuses a mismatch.
    """

    prediction_mean: Tensor
    reference_mean: Tensor
    model: str
    layer: str
    preset: str
    n_tokens: tuple[int, int] = field(default=(0, 0))

    @property
    def label(self) -> str:
        """Signature text ``fitted[<sha8>]``: a hash of the two means (float64 bytes) and their provenance."""
        h = hashlib.sha256()
        for mean in (self.prediction_mean, self.reference_mean):
            h.update(mean.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
        h.update(f"{self.model}|{self.layer}|{self.preset}".encode())
        return f"fitted[{h.hexdigest()[:8]}]"

    def check(self, metric: str, model: str, layer: str, preset: str) -> None:
        """Raise unless the means are finite vectors of one size, fitted with this model, layer and preset."""
        means = (self.prediction_mean, self.reference_mean)
        if not all(isinstance(m, Tensor) and m.ndim == 1 and bool(torch.isfinite(m).all()) for m in means) \
                or self.prediction_mean.shape != self.reference_mean.shape:
            raise ValueError(f"{metric}: `centering` must hold two finite mean vectors of the encoder's size, got "
                             f"{[tuple(getattr(m, 'shape', ())) for m in means]} with non-finite or mismatched values; "
                             f"fit it again (movers.fit_centering).")
        mine, theirs = (model, layer, preset), (self.model, self.layer, self.preset)
        if mine != theirs:
            raise ValueError(f"{metric}: `centering` was fitted with model/layer/preset {theirs}, but this call "
                             f"uses {mine}; fit it again with the same settings.")


CenteringSpec = Literal["batch", "corpus", "none"] | Centering


@dataclass(frozen=True, eq=False)
class SegmentMeans:
    """The centring means of a chunk's segments: `table` [G, d] float64, and per segment the row of its
    prediction mean (`prediction` [n]) and of its references' mean (`reference` [n])."""

    table: Tensor
    prediction: np.ndarray
    reference: np.ndarray
    label: str


def text_sums(vectors: Sequence[Tensor], *, dim: int) -> Tensor:
    """[len(vectors), dim + 1] float64: each text's token sum and token count (last column)."""
    sums = torch.zeros(len(vectors), dim + 1, dtype=torch.float64)
    for row, x in enumerate(vectors):
        sums[row, :dim] = x.sum(0, dtype=torch.float64)
        sums[row, dim] = x.shape[0]
    return sums


def corpus_sums(prediction_sums: Tensor, reference_sums: Tensor) -> Tensor:
    """[2, dim + 1] float64 on the CPU: the token sums and counts of all predictions and of all references (from
    :func:`text_sums`-shaped rows); added up over the chunks, ranks or blocks of a call, then :func:`means_of`."""
    return torch.stack([prediction_sums.sum(0), reference_sums.sum(0)]).cpu()


def chunked_corpus_means(chunks: Sequence[range], load: Callable[[range], Any], sums: Callable[[Any], Tensor], *,
                         total: Callable[[Tensor], Tensor], dim: int) -> tuple[tuple[Tensor, Tensor], Any]:
    """Corpus means of a call read a chunk at a time (memory of one chunk): ``load(chunk)`` embeds a chunk,
    ``sums(data)`` gives its :func:`corpus_sums`, and `total` adds them up over the scope (ranks, stream blocks).
    Returns the means and, when there is a single chunk, its loaded data, so that the caller scores it without
    embedding it again (None otherwise)."""
    acc = torch.zeros(2, dim + 1, dtype=torch.float64)
    first = None
    for chunk in chunks:
        data = load(chunk)
        acc += sums(data)
        first = data if len(chunks) == 1 else None
        del data  # before the next chunk is loaded
    return means_of(total(acc)), first


def means_of(sums: Tensor) -> tuple[Tensor, Tensor]:
    """(prediction mean, reference mean) from :func:`corpus_sums`."""
    dim = sums.shape[1] - 1
    return sums[0, :dim] / sums[0, dim], sums[1, :dim] / sums[1, dim]


def segment_means(centering: CenteringSpec, prediction_sums: Tensor, reference_sums: Tensor,
                  owner: Sequence[int] | np.ndarray, k: int, *, total: Callable[[Tensor], Tensor] | None = None
                  ) -> SegmentMeans | None:
    """The means each segment is centred by (None for ``"none"``), from per-text sums.

    Args:
        centering: A mode name or a fitted :class:`Centering`.
        prediction_sums: [n, d + 1] float64, each prediction's token sum and count (:func:`text_sums`).
        reference_sums: [m, d + 1], the same per flat reference; ``owner[j]`` is its segment.
        k: Segments per batch for ``"batch"``.
        total: For ``"corpus"``: maps these segments' :func:`corpus_sums` to those of the whole call (the sum over
            the ranks of a distributed call, or over a stream); default: these segments are the whole call.
    """
    n = prediction_sums.shape[0]
    d = prediction_sums.shape[1] - 1
    device = prediction_sums.device
    if isinstance(centering, Centering):
        return fitted_means(centering, n, d, device)
    if centering == "none":
        return None
    if centering == "corpus":
        sums = corpus_sums(prediction_sums, reference_sums)
        table = torch.stack(means_of(sums if total is None else total(sums))).to(device)
        return SegmentMeans(table, np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), "corpus")
    groups = -(-n // k)
    segment_group = np.arange(n, dtype=np.int64) // k
    by_group = torch.zeros(2 * groups, d + 1, dtype=torch.float64, device=device)
    by_group.index_add_(0, host_tensor(2 * segment_group, device), prediction_sums)
    by_group.index_add_(0, host_tensor(2 * (np.asarray(owner, dtype=np.int64) // k) + 1, device), reference_sums)
    table = by_group[:, :d] / by_group[:, d:]
    return SegmentMeans(table, 2 * segment_group, 2 * segment_group + 1, f"batch[k={k}]")


def fitted_means(table: Centering, n: int, dim: int, device: torch.device | str = "cpu") -> SegmentMeans:
    """:func:`segment_means` of a fitted table: the same two means for every one of `n` segments (no sums
    needed); the table must have `dim` dimensions."""
    if table.prediction_mean.shape != (dim,):
        raise ValueError(f"centering: the fitted means must have {dim} dimensions, got "
                         f"{tuple(table.prediction_mean.shape)}.")
    means = torch.stack([table.prediction_mean, table.reference_mean]).to(device, torch.float64)
    return SegmentMeans(means, np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), table.label)


def centring_means(centering: CenteringSpec, predictions: Sequence[Tensor], references: Sequence[Tensor],
                   owner: Sequence[int], k: int, *, total: Callable[[Tensor], Tensor] | None = None,
                   dim: int | None = None) -> tuple[list[Tensor], list[Tensor], str]:
    """Per segment (prediction mean, reference mean) and the signature label, from per-text token vectors
    (:func:`segment_means` of their :func:`text_sums`; ``"none"`` gives zero means).

    Args:
        centering: A mode name or a fitted :class:`Centering`.
        predictions: Token vectors [n_i, d] per segment (float32 or float64; the means are float64).
        references: Token vectors [m_j, d] per flat reference; ``owner[j]`` is its segment.
        k: Segments per batch for ``"batch"``.
        total: For ``"corpus"``, as in :func:`segment_means`. dim: the vector size when there are no segments here.
    """
    n = len(predictions)
    d = predictions[0].shape[1] if n else int(dim or 0)
    means = segment_means(centering, text_sums(predictions, dim=d), text_sums(references, dim=d), owner, k,
                          total=total)
    if means is None:
        zero = torch.zeros(d, dtype=torch.float64)
        return [zero] * n, [zero] * n, "none"
    rows = list(means.table)
    return [rows[g] for g in means.prediction], [rows[g] for g in means.reference], means.label


def centering_label(centering: CenteringSpec, k: int) -> str:
    """Signature text of a centring mode: ``none``, ``corpus``, ``batch[k=32]`` or ``fitted[<hash>]``."""
    if isinstance(centering, Centering):
        return centering.label
    return f"batch[k={k}]" if centering == "batch" else str(centering)


def check_centering(name: str, centering: object, centering_batch: object, n_segments: int) -> None:
    """Validate `centering` and `centering_batch` (messages name the argument); warn when a call-dependent
    mode meets a single segment (its own means would be subtracted)."""

    if not isinstance(centering, (str, Centering)):
        raise TypeError(f"{name}: `centering` must be one of {list(CENTERINGS)} or a fitted movers.Centering, "
                        f"got {type(centering).__name__}.")
    if isinstance(centering, str):
        check_choice(name, "centering", centering, list(CENTERINGS))
    check_number(name, "centering_batch", centering_batch, low=1, integer=True)
    if isinstance(centering, str) and centering in ("batch", "corpus") and n_segments == 1:
        warnings.warn(f"{name}: centering={centering!r} on a single segment subtracts that segment's own "
                      f"token means; pass a fitted table (movers.fit_centering) or centering='none' to score "
                      f"small calls.", RuntimeWarning, stacklevel=3)
