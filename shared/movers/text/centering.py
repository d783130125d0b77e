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

import torch
from torch import Tensor

from ..core.validation import check_choice, check_number

__all__ = ["Centering", "CENTERINGS", "CenteringSpec", "centring_means", "corpus_means", "corpus_sums", "means_of",
           "chunked_corpus_means", "check_centering", "centering_label"]

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


def corpus_means(predictions: Sequence[Tensor], references: Sequence[Tensor], *,
                 total: Callable[[Tensor], Tensor] | None = None, dim: int) -> tuple[Tensor, Tensor]:
    """Token means (float64) of all prediction and all reference vectors ([n_i, dim] each), from sums and
    counts that `total` adds up over the rest of the call (other ranks, other blocks of a stream)."""
    sums = corpus_sums(predictions, references, dim=dim)
    return means_of(sums if total is None else total(sums))


def corpus_sums(predictions: Sequence[Tensor], references: Sequence[Tensor], *, dim: int) -> Tensor:
    """[2, dim + 1] float64: the token sums and the token counts (last column) of the prediction and the
    reference vectors; added up over the chunks, ranks or blocks of a call, then :func:`means_of`."""
    sums = torch.zeros(2, dim + 1, dtype=torch.float64)
    for row, vectors in ((0, predictions), (1, references)):
        for x in vectors:
            sums[row, :dim] += x.sum(0, dtype=torch.float64)
            sums[row, dim] += x.shape[0]
    return sums


def chunked_corpus_means(chunks: Sequence[range], load: Callable[[range], Any],
                         vectors: Callable[[Any], tuple[Sequence[Tensor], Sequence[Tensor]]], *,
                         total: Callable[[Tensor], Tensor], dim: int) -> tuple[tuple[Tensor, Tensor], Any]:
    """Corpus means of a call read a chunk at a time (memory of one chunk): ``load(chunk)`` embeds a chunk,
    ``vectors(data)`` gives its (prediction, reference) token vectors, and `total` adds their sums up over
    the scope (ranks, stream blocks). Returns the means and, when there is a single chunk, its loaded data,
    so that the caller scores it without embedding it again (None otherwise)."""
    sums = torch.zeros(2, dim + 1, dtype=torch.float64)
    first = None
    for chunk in chunks:
        data = load(chunk)
        sums += corpus_sums(*vectors(data), dim=dim)
        first = data if len(chunks) == 1 else None
        del data  # before the next chunk is loaded
    return means_of(total(sums)), first


def means_of(sums: Tensor) -> tuple[Tensor, Tensor]:
    """(prediction mean, reference mean) from :func:`corpus_sums`."""
    dim = sums.shape[1] - 1
    return sums[0, :dim] / sums[0, dim], sums[1, :dim] / sums[1, dim]


def centring_means(centering: CenteringSpec, predictions: Sequence[Tensor], references: Sequence[Tensor],
                   owner: Sequence[int], k: int, *, total: Callable[[Tensor], Tensor] | None = None,
                   dim: int | None = None) -> tuple[list[Tensor], list[Tensor], str]:
    """Per segment (prediction mean, reference mean) and the signature label.

    Args:
        centering: A mode name or a fitted :class:`Centering`.
        predictions: Token vectors [n_i, d] per segment (float32 or float64; the means are float64).
        references: Token vectors [m_j, d] per flat reference; ``owner[j]`` is its segment.
        k: Segments per batch for ``"batch"``.
        total: For ``"corpus"``: maps these segments' token sums and counts to those of the whole call
            (the sum over the ranks of a distributed call, or over a stream); default: these segments are
            the whole call. dim: the vector size when there are no segments here.
    """
    n = len(predictions)
    d = predictions[0].shape[1] if n else int(dim or 0)
    if isinstance(centering, Centering):
        if centering.prediction_mean.shape != (d,):
            raise ValueError(f"centering: the fitted means must have {d} dimensions, got "
                             f"{tuple(centering.prediction_mean.shape)}.")
        mc = centering.prediction_mean.to("cpu", torch.float64)
        mr = centering.reference_mean.to("cpu", torch.float64)
        return [mc] * n, [mr] * n, centering.label
    if centering == "none":
        zero = torch.zeros(d, dtype=torch.float64)
        return [zero] * n, [zero] * n, "none"
    if centering == "corpus":
        mc, mr = corpus_means(predictions, references, total=total, dim=d)
        return [mc] * n, [mr] * n, "corpus"
    size = k
    refs_of: list[list[int]] = [[] for _ in range(n)]
    for j, i in enumerate(owner):
        refs_of[i].append(j)
    mu_c: list[Tensor] = []
    mu_r: list[Tensor] = []
    for start in range(0, n, size):
        seg = range(start, min(start + size, n))
        mc = torch.cat([predictions[i] for i in seg]).to(torch.float64).mean(0)
        mr = torch.cat([references[j] for i in seg for j in refs_of[i]]).to(torch.float64).mean(0)
        mu_c += [mc] * len(seg)
        mu_r += [mr] * len(seg)
    return mu_c, mu_r, "corpus" if centering == "corpus" else f"batch[k={k}]"


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
