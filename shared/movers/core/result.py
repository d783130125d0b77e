"""The one result type of every movers metric."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .signature import Signature

__all__ = ["Scores", "REGROUPING_ATOL"]

REGROUPING_ATOL = 1e-5
"""The reproducibility rule of movers' scores, the same on every CPU.

**Bit for bit** (by construction, on any instruction set):

* the same call (the same texts in the same order, options, torch thread count and machine) gives the same
  numbers: every step is deterministic;
* an embedding-cache hit returns the stored vectors (their bytes are checked), so a run whose vectors all come
  from the cache equals the run that stored them;
* ΔBLEU: its statistics are sums kept exactly (integer counts, and the rated references' weighted counts as
  exact sums of float64 values, rounded once as ``math.fsum`` rounds), so any grouping (systems, streams,
  shards, Ray blocks, resamples) gives the same numbers.

**To float32 rounding**, ``|a - b| <= REGROUPING_ATOL`` on every score, the same texts grouped or run
differently: another ``batch_size``, several systems in one run or one by one, a cache filled by other calls,
streamed blocks, ranks of a distributed call (each rank with all inputs, or its own shard), Ray blocks, a
torchmetrics ``forward`` per batch then ``compute``, another torch thread count, another CPU. Which texts share
an encoder batch (the padding, and the matrix kernels a CPU picks for a shape) moves a token vector's last
bits: no batching rule keeps a row's bits on every instruction set (not rows of one length, not a fixed batch
shape, not one text per batch across thread counts; measured with AVX-512, AVX2 and SSE4.2 kernels on an Intel
Xeon), and the transport's sums change with the thread count.
The largest moves come from texts with equal tokens embedded in different batches: the Euclidean distance of
two vectors a few float32 steps apart is the norm of their difference, about ``sqrt(dim)`` steps (7.8e-7 for a
MoverScore pair like "with Dawn French." / "With Dawn French." in another batch, 384 dimensions; most pairs move
less than 2e-7). The bound keeps a tenfold margin over that. Tests and docs compare such runs with this bound,
never bit for bit.
"""


@dataclass(frozen=True)
class Scores:
    """Corpus score, per-segment scores (input order) and the reproducibility signature.

    `signature` is a :class:`~movers.core.signature.Signature`: its text, with its fields (``.fields``).
    `extra` holds metric-specific outputs (e.g. ``precision``/``recall`` for TWMD, ``distances`` for SMS,
    ``precisions``/``bp`` for ΔBLEU); `to_dict()` flattens them next to the three common keys, with the
    signature rendered: the shape the evaluate modules return.

    `statistics` is set by a metric whose corpus score is not the mean of its segment scores (ΔBLEU):
    per segment, the sufficient statistics ``[n, k]`` that :meth:`movers.core.spec.MetricSpec.corpus_from_statistics`
    turns, summed, into the corpus score (what resampling tests resample). Not part of `to_dict()`.
    """

    score: float
    scores: list[float]
    signature: Signature
    extra: Mapping[str, Any] = field(default_factory=dict)
    statistics: Sequence[Sequence[float]] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "scores": list(self.scores)}
        out.update(self.extra)
        out["signature"] = str(self.signature)
        return out

    def __str__(self) -> str:
        return f"{self.score:.4f} ({self.signature})"
