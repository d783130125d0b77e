"""Scopes of a metric call: which segments this process scores, and how call-level statistics add up.

A metric's score for one segment can depend on the rest of the call (per-call IDF, batch or corpus
centring, ΔBLEU's corpus sums). Every metric asks the active :class:`Scope` at the few points where
it builds such statistics, so the same code scores

* one whole call in one process (the default scope: every hook is the identity);
* one shard per rank of a ``torch.distributed`` process group, inside :func:`distributed_scoring`:
  statistics are all-reduced (sums of document frequencies, token vectors, counts), per-segment
  results all-gathered in input order, and every rank returns the full result of a one-process call;
* one block of a stream (:func:`movers.score_stream`): statistics come from a first pass over the
  whole stream.

    >>> import torch.distributed as dist, movers                       # doctest: +SKIP
    >>> dist.init_process_group("gloo")                                # e.g. under torchrun
    >>> with movers.distributed_scoring():                             # every rank, same inputs
    ...     out = movers.moverscore(predictions, references, idf=True)  # each rank scores 1/world

Collectives are explicit: scoring is distributed only inside :func:`distributed_scoring` (a call made
on one rank alone, as evaluate's ``num_process`` mode does on process 0, must not wait for the others).
"""
from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import torch

__all__ = ["Scope", "ProcessGroupScope", "current_scope", "use_scope", "distributed_scoring", "launched_scoring",
           "shard_bounds"]

T = TypeVar("T")


class Scope:
    """The whole call in this process: the identity at every hook (the default)."""

    def part(self, n: int, *, multiple: int = 1) -> range:
        """Indices of the call's `n` segments that this process scores (a contiguous range whose start is a
        multiple of `multiple`, so that batches of `multiple` consecutive segments are never split)."""
        return range(n)

    def total(self, value: T) -> T:
        """`value` (a local sum: int, float, list of floats, float64/int64 tensor, or a Counter of ids) summed
        over the whole call."""
        return value

    def statistics_done(self) -> None:
        """Called by a metric once every call-level statistic is built (a first streaming pass stops here)."""

    def gather(self, values: Sequence[T]) -> list[T]:
        """Per-segment (or per-reference) values of this process's part -> the whole call's, in input order."""
        return list(values)

    def call_size(self, n: int) -> int:
        """Number of segments of the whole call, when known (else `n`, the segments passed in)."""
        return n


_WHOLE_CALL = Scope()
_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("movers_scope", default=None)


def current_scope() -> Scope:
    """The scope the metrics see now (the whole call in this process unless a scope was entered)."""
    return _SCOPE.get() or _WHOLE_CALL


ScopeT = TypeVar("ScopeT", bound=Scope)


@contextlib.contextmanager
def use_scope(scope: ScopeT) -> Iterator[ScopeT]:
    """Make `scope` the active one for the metric calls inside the ``with`` block."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def shard_bounds(n: int, world: int, rank: int, multiple: int = 1) -> tuple[int, int]:
    """[start, stop) of rank `rank` among `world`: contiguous, balanced in units of `multiple` segments."""
    units = -(-n // multiple)
    lo, hi = units * rank // world, units * (rank + 1) // world
    return min(lo * multiple, n), min(hi * multiple, n)


class ProcessGroupScope(Scope):
    """One rank of an initialised ``torch.distributed`` process group (gloo on CPU, NCCL on GPU).

    Every rank must make the same metric calls with the same inputs; each embeds and scores its own
    contiguous shard. Sums are all-reduced (float64 and int64 tensors; a Counter of token ids as a dense
    vector over the largest id), per-segment values all-gathered (``all_gather_object``, rank order).
    """

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("distributed_scoring: no torch.distributed process group is initialised; call "
                               "torch.distributed.init_process_group(...) first (torchrun sets the environment).")
        self.dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        backend = dist.get_backend(group)
        self.device = (torch.device("cuda", torch.cuda.current_device()) if backend == "nccl"
                       else torch.device("cpu"))

    def part(self, n: int, *, multiple: int = 1) -> range:
        return range(*shard_bounds(n, self.world, self.rank, multiple))

    def call_size(self, n: int) -> int:
        return n  # every rank passes the whole call

    def _reduce(self, tensor: torch.Tensor, op: Any = None) -> torch.Tensor:
        t = tensor.to(self.device).clone()
        self.dist.all_reduce(t, op=op or self.dist.ReduceOp.SUM, group=self.group)
        return t.cpu()

    def total(self, value: T) -> T:
        if isinstance(value, Counter):
            top = max(value, default=-1)
            if any(not isinstance(k, int) or k < 0 for k in value):
                raise TypeError("distributed_scoring: Counter totals must count non-negative int ids.")
            size = int(self._reduce(torch.tensor([top + 1], dtype=torch.int64), self.dist.ReduceOp.MAX)[0])
            dense = torch.zeros(size, dtype=torch.int64)
            if value:
                keys = torch.tensor(list(value.keys()), dtype=torch.int64)
                dense[keys] = torch.tensor(list(value.values()), dtype=torch.int64)
            dense = self._reduce(dense)
            nz = torch.nonzero(dense).flatten().tolist()
            counts = dense[nz].tolist()
            return Counter(dict(zip(nz, counts, strict=True)))  # type: ignore[return-value]
        if isinstance(value, torch.Tensor):
            return self._reduce(value).to(value.dtype)  # type: ignore[return-value]
        if isinstance(value, list):
            return self._reduce(torch.tensor(value, dtype=torch.float64)).tolist()  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"distributed_scoring: cannot sum a {type(value).__name__} across ranks.")
        dtype = torch.int64 if isinstance(value, int) else torch.float64
        return type(value)(self._reduce(torch.tensor([value], dtype=dtype))[0].item())

    def gather(self, values: Sequence[T]) -> list[T]:
        parts: list[Any] = [None] * self.world
        self.dist.all_gather_object(parts, list(values), group=self.group)
        return [v for part in parts for v in part]


@contextlib.contextmanager
def distributed_scoring(group: Any = None) -> Iterator[ProcessGroupScope]:
    """Score across the ranks of an initialised process group: inside the block every movers metric call
    is collective (all ranks call it with the same inputs), each rank embeds and scores ``1/world`` of the
    segments, call-level statistics (per-call IDF, batch/corpus centring, ΔBLEU's corpus sums) are
    all-reduced, and every rank returns the full result, equal to a one-process call to float32 rounding.

    Raises:
        RuntimeError: If no process group is initialised.
    """
    with use_scope(ProcessGroupScope(group)) as scope:
        yield scope


@contextlib.contextmanager
def launched_scoring() -> Iterator[int]:
    """For command-line tools under ``torchrun``/``accelerate launch``: when ``WORLD_SIZE`` > 1, initialise
    the default process group (NCCL with CUDA, gloo on CPU), score collectively inside the block
    (:func:`distributed_scoring`) and destroy the group afterwards; yields this process's rank (0 when
    not launched by a launcher, and then nothing is distributed)."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        yield 0
        return
    import torch.distributed as dist

    # Imported before the group exists, on purpose: this module's ShardedGradScaler takes
    # `process_group=dist.group.WORLD` as a default argument, evaluated on import. transformers'
    # from_pretrained imports it lazily; imported while the group is up, the default keeps the destroyed
    # group's gloo threads alive until interpreter teardown, which then aborts now and then
    # ("terminate called without an active exception", SIGABRT after the output was printed).
    import torch.distributed.fsdp.sharded_grad_scaler  # noqa: F401

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        with distributed_scoring():
            yield dist.get_rank()
    finally:
        dist.destroy_process_group()
