"""Centring of token vectors (Chen et al., 2020): subtract a token mean before comparing directions.

The TWMD paper centres the candidate tokens and, separately, the reference tokens by their means over a
batch of consecutive pairs. Modes, by name in every signature (``center:...``):

* ``"batch"`` — means over each run of `k` consecutive segments (the paper; scores depend on order
  and on the other segments of the batch);
* ``"corpus"`` — one pair of means over the whole call (order-free, depends on the call's texts);
* ``"none"`` — no centring;
* a fitted :class:`Centering` — fixed means (order- and call-free: shards score like one call).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence, Union

import torch
from torch import Tensor

__all__ = ["Centering", "CENTERINGS", "CenteringSpec", "centring_means"]

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
        """Raise unless fitted with this model, layer and preset."""
        mine, theirs = (model, layer, preset), (self.model, self.layer, self.preset)
        if mine != theirs:
            raise ValueError(f"{metric}: `centering` was fitted with model/layer/preset {theirs}, but this call "
                             f"uses {mine}; fit it again with the same settings.")


CenteringSpec = Union[Literal["batch", "corpus", "none"], Centering]


def centring_means(centering: CenteringSpec, predictions: Sequence[Tensor], references: Sequence[Tensor],
                   owner: Sequence[int], k: int, *, total: Callable[[Tensor], Tensor] | None = None,
                   dim: int | None = None) -> tuple[list[Tensor], list[Tensor], str]:
    """Per segment (prediction mean, reference mean) and the signature label.

    Args:
        centering: A mode name or a fitted :class:`Centering`.
        predictions: Token vectors [n_i, d] per segment (float64).
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
        # sums and counts, not means: they add up across the parts of a call
        sums = torch.zeros(2, d + 1, dtype=torch.float64)
        for row, vectors in ((0, predictions), (1, references)):
            for x in vectors:
                sums[row, :d] += x.sum(0)
                sums[row, d] += x.shape[0]
        sums = sums if total is None else total(sums)
        mc, mr = sums[0, :d] / sums[0, d], sums[1, :d] / sums[1, d]
        return [mc] * n, [mr] * n, "corpus"
    size = k
    refs_of: list[list[int]] = [[] for _ in range(n)]
    for j, i in enumerate(owner):
        refs_of[i].append(j)
    mu_c: list[Tensor] = []
    mu_r: list[Tensor] = []
    for start in range(0, n, size):
        seg = range(start, min(start + size, n))
        mc = torch.cat([predictions[i] for i in seg]).mean(0)
        mr = torch.cat([references[j] for i in seg for j in refs_of[i]]).mean(0)
        mu_c += [mc] * len(seg)
        mu_r += [mr] * len(seg)
    return mu_c, mu_r, "corpus" if centering == "corpus" else f"batch[k={k}]"
