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

* one shard per rank of a process group, each rank passing only its own segments, inside
  ``distributed_scoring(sharded=True)`` (:class:`ShardedScope`): the same sums, per-segment results kept on
  their rank, the corpus score reduced from every rank's sums;
* one block of a Ray Data set (:mod:`movers.integrations.ray`): statistics from a first pass reduced by Ray.

Collectives are explicit: scoring is distributed only inside :func:`distributed_scoring` (a call made
on one rank alone, as evaluate's ``num_process`` mode does on process 0, must not wait for the others).
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import math
from collections import Counter
from collections.abc import Iterator, Sequence, Sized
from typing import Any, TypeVar

import torch

from .summation import ExactSum

__all__ = ["Scope", "ProcessGroupScope", "ShardedScope", "RankFailed", "RanksDisagree", "ExactSum", "add_totals",
           "current_scope", "use_scope", "distributed_scoring", "launched_scoring", "shard_bounds", "describe_call",
           "disagreement"]

T = TypeVar("T")

def add_totals(a: Any, b: Any) -> Any:
    """Two partial values of :meth:`Scope.total` added up: Counters merged, lists element by element, tensors,
    numbers and :class:`ExactSum` with ``+``. Partial sums from blocks or workers reduce with it in any order."""
    if isinstance(a, Counter):
        merged = Counter(a)
        merged.update(b)
        return merged
    if isinstance(a, list):
        if len(a) != len(b):
            raise ValueError(f"partial totals of different lengths: {len(a)} and {len(b)}.")
        return [add_totals(x, y) for x, y in zip(a, b, strict=True)]
    return a + b


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

    partial: bool = False
    """Whether a call sees only part of the call's inputs (the others are on other ranks): options fitted on
    the whole call's texts together (``baseline="fit"``) are refused then."""

    signature_only: bool = False
    """Whether the call is made for its call-level statistics and its signature only (a first pass over
    blocks): after :meth:`statistics_done` a metric may skip its scoring (no model run, no transport) and
    return placeholder scores (NaN) with the call's signature."""

    def call(self, spec: Any = None, options: dict[str, Any] | None = None,
             inputs: tuple[Any, Any, Any] | None = None) -> contextlib.AbstractContextManager[None]:
        """Wraps one metric call (the front, :func:`movers.pipeline.call.score`): `spec`, the keyword `options`
        as passed and the `inputs` (predictions, references, extra inputs) of the call, before any check."""
        return contextlib.nullcontext()

    def finish(self, spec: Any, options: Any, result: Any) -> Any:
        """The call's :class:`~movers.core.result.Scores` as the whole call's (identity unless the inputs are
        spread over ranks)."""
        return result


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


class RankFailed(RuntimeError):
    """Raised on every other rank of a sharded call when one rank's part of it failed (names the rank and why),
    and on a rank that waited for the others longer than `timeout` (names the ranks that did not arrive)."""


class RanksDisagree(ValueError):
    """Raised on every rank of a collective call that the ranks make differently (another metric, an option with
    another value, another kind of inputs): names the option and each rank's value."""


_DEFAULT = " (the default)"


def describe_call(spec: Any, options: dict[str, Any], inputs: tuple[Any, Any, Any] | None, *,
                  whole: bool) -> dict[str, str]:
    """What every rank of a collective call must agree on, as text: the metric; every declared option that can
    change a number (not the ``runtime`` ones: device, batch size, progress, cache), passed or its default; any
    other keyword passed; and the inputs: with `whole` (every rank passes the whole call) a digest of them, else
    their kind (texts or documents, which extra inputs are given). Never raises."""
    out = {"metric": str(getattr(spec, "slug", spec))}
    declared = {f.name: f for f in getattr(spec, "options", ())}
    for name, f in declared.items():
        if f.info.runtime:
            continue
        out[name] = _text(options[name]) if name in options else _text(f.default) + _DEFAULT
    for name in options:
        if name not in declared:
            out[name] = _text(options[name])
    predictions, references, extra = inputs if inputs is not None else (None, None, None)
    extra = extra or {}
    if whole:
        n = len(predictions) if isinstance(predictions, Sized) else "?"
        out["inputs"] = f"{n} segments, digest " + _digest((predictions, references,
                                                           sorted(extra.items(), key=lambda kv: str(kv[0]))))
    else:
        first = next(iter(predictions), None) if isinstance(predictions, (list, tuple)) else predictions
        out["predictions"] = ("texts" if isinstance(first, str) else "documents (lists of sentences)"
                              if isinstance(first, (list, tuple)) else type(first).__name__)
        for key in getattr(spec, "extra_inputs", ()):
            out[key] = "given" if extra.get(key) is not None else "not given"
    return out


def disagreement(calls: Sequence[dict[str, str]]) -> str | None:
    """The message for the first entry on which the ranks' descriptions (:func:`describe_call`, in rank order)
    differ, or None when they agree."""
    keys = list(dict.fromkeys(k for call in calls for k in call))
    for key in keys:
        values = [call.get(key, "not passed") for call in calls]
        if len({v.removesuffix(_DEFAULT) for v in values}) <= 1:
            continue
        ranks: dict[str, list[int]] = {}
        for rank, value in enumerate(values):
            ranks.setdefault(value, []).append(rank)
        said = " and ".join(f"{value} on rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}"
                            for value, rs in ranks.items())
        what = "call different metrics" if key == "metric" else f"pass different `{key}`"
        return (f"distributed_scoring: the ranks {what}: `{key}` is {said}; every rank must make the same call "
                f"(the same metric and options, and the same kind of inputs: the whole call's with sharded=False, "
                f"each its own with sharded=True).")
    return None


def _text(value: Any, depth: int = 0) -> str:
    """A value as text that is the same on every rank for the same value (no ids, no addresses, no devices)."""
    try:
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        if depth > 4:
            return type(value).__name__
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(_text(v, depth + 1) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{_text(k)}: {_text(v, depth + 1)}" for k, v in
                                   sorted(value.items(), key=lambda kv: str(kv[0]))) + "}"
        if isinstance(value, torch.Tensor):
            return f"tensor{tuple(value.shape)}:{value.dtype}:{_digest(value.detach().cpu().numpy().tobytes())}"
        if hasattr(value, "tobytes") and hasattr(value, "shape"):  # numpy arrays
            return f"array{tuple(value.shape)}:{_digest(value.tobytes())}"
        fields = vars(value) if hasattr(value, "__dict__") else {}
        kept = {k: v for k, v in fields.items() if not k.startswith("_") and not isinstance(v, torch.device)}
        return f"{type(value).__name__}(" + ", ".join(f"{k}={_text(v, depth + 1)}" for k, v in sorted(kept.items())) \
            + ")"
    except Exception:  # noqa: BLE001  a description must never fail a call
        return type(value).__name__


def _digest(value: Any) -> str:
    """A short digest of `value` (bytes, or anything pickle writes the same on every rank)."""
    import hashlib
    import pickle

    try:
        data = value if isinstance(value, bytes) else pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


class ProcessGroupScope(Scope):
    """One rank of an initialised ``torch.distributed`` process group (gloo on CPU, NCCL on GPU).

    Every rank must make the same metric calls with the same inputs; each embeds and scores its own
    contiguous shard. Sums are all-reduced (float64 and int64 tensors; a Counter of token ids as a dense
    vector over the largest id), per-segment values all-gathered (``all_gather_object``, rank order).

    Ranks agree before they compute: at the start of every call, before its first collective, each rank
    reports what it calls (:func:`describe_call`: the metric, every option that can change a number, the
    inputs) and a call that differs on any rank fails on every rank with one :class:`RanksDisagree` naming the
    option and each rank's value. On gloo a rank that does not arrive within `timeout` is named
    (``monitored_barrier``, :class:`RankFailed`).
    """

    whole_inputs = True
    """Whether every rank passes the whole call's inputs (they must be the same on every rank then)."""

    def __init__(self, group: Any = None, timeout: float | datetime.timedelta | None = None) -> None:
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
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=float(timeout))
        self.timeout = timeout
        self.monitored = backend == "gloo"

    # ---------------------------------------------------------------------------------- agreement

    def _arrive(self) -> None:
        """Wait for every rank (gloo: naming the ranks that do not arrive within `timeout`)."""
        if not self.monitored:
            return
        try:
            self.dist.monitored_barrier(group=self.group, timeout=self.timeout, wait_all_ranks=True)
        except RuntimeError as err:
            label = "distributed_scoring()" if self.whole_inputs else "distributed_scoring(sharded=True)"
            raise RankFailed(f"{label}: rank {self.rank} of {self.world} gave up waiting for the other ranks: "
                             f"{err}") from None

    def agree(self, description: dict[str, str]) -> None:
        """Every rank's `description` of its call (:func:`describe_call`); raise :class:`RanksDisagree` on every
        rank alike when they differ."""
        self._arrive()
        calls: list[Any] = [None] * self.world
        self.dist.all_gather_object(calls, description, group=self.group)
        problem = disagreement(calls)
        if problem is not None:
            raise RanksDisagree(problem)

    @contextlib.contextmanager
    def call(self, spec: Any = None, options: dict[str, Any] | None = None,
             inputs: tuple[Any, Any, Any] | None = None) -> Iterator[None]:
        if spec is not None:
            self.agree(describe_call(spec, options or {}, inputs, whole=self.whole_inputs))
        yield

    def part(self, n: int, *, multiple: int = 1) -> range:
        return range(*shard_bounds(n, self.world, self.rank, multiple))

    def call_size(self, n: int) -> int:
        return n  # every rank passes the whole call

    def _reduce(self, tensor: torch.Tensor, op: Any = None) -> torch.Tensor:
        t = tensor.to(self.device).clone()
        self.dist.all_reduce(t, op=op or self.dist.ReduceOp.SUM, group=self.group)
        return t.cpu()

    def total(self, value: T) -> T:
        if isinstance(value, ExactSum) or (isinstance(value, list) and any(isinstance(x, ExactSum) for x in value)):
            parts: list[Any] = [None] * self.world  # exact sums: Python ints, gathered and added exactly
            self.dist.all_gather_object(parts, value, group=self.group)
            total = parts[0]
            for part in parts[1:]:
                total = add_totals(total, part)
            return total
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


class ShardedScope(ProcessGroupScope):
    """One rank of a process group whose ranks each pass only their own segments (any sizes): the call is the
    union of the ranks' segments in rank order. Sums are all-reduced as in :class:`ProcessGroupScope`;
    per-segment results stay on their rank; the corpus score and signature are reduced over all ranks at the
    end of the call (:meth:`finish`).

    The ranks agree on the call first (:meth:`ProcessGroupScope.agree`: the metric, the options, the kind of
    inputs). Failure is agreed on too: before each collective every rank reports whether it failed (an
    all-reduced flag, after a ``monitored_barrier`` on gloo, which names a rank that does not arrive within
    `timeout`); a rank whose part raises reports its reason at the next check and every other rank raises
    :class:`RankFailed` naming it, instead of waiting in a collective that rank will never join.
    """

    partial = True
    whole_inputs = False

    def __init__(self, group: Any = None, timeout: float | datetime.timedelta | None = None) -> None:
        super().__init__(group, timeout)
        self._sizes: list[int] | None = None
        self._settled = False  # this call's failure is known to every rank already

    def _check(self, failure: str | None = None) -> None:
        """Every rank says whether its part failed; raise :class:`RankFailed` on the others if one did."""
        try:
            self._arrive()
        except RankFailed:
            self._settled = True
            raise
        flag = self._reduce(torch.tensor([0 if failure is None else 1], dtype=torch.int64), self.dist.ReduceOp.MAX)
        if not int(flag[0]):
            return
        reasons: list[Any] = [None] * self.world
        self.dist.all_gather_object(reasons, failure, group=self.group)
        self._settled = True
        if failure is None:
            failed = [(r, why) for r, why in enumerate(reasons) if why is not None]
            raise RankFailed("; ".join(f"rank {r} failed: {why}" for r, why in failed))

    @contextlib.contextmanager
    def call(self, spec: Any = None, options: dict[str, Any] | None = None,
             inputs: tuple[Any, Any, Any] | None = None) -> Iterator[None]:
        self._sizes, self._settled = None, False
        if spec is not None:  # every rank raises the same error here, before any other collective
            self.agree(describe_call(spec, options or {}, inputs, whole=False))
        try:
            yield
        except BaseException as err:
            if not self._settled:
                self._settled = True
                self._check(f"{type(err).__name__}: {err}")
            raise

    def _agreed_sizes(self, n: int) -> list[int]:
        if self._sizes is None:
            self._check()
            sizes: list[Any] = [None] * self.world
            self.dist.all_gather_object(sizes, int(n), group=self.group)
            self._sizes = [int(x) for x in sizes]
        return self._sizes

    # ---------------------------------------------------------------------------------- the hooks

    def part(self, n: int, *, multiple: int = 1) -> range:
        sizes = self._agreed_sizes(n)
        starts = [sum(sizes[:r]) for r in range(self.world)]
        split = [r for r in range(1, self.world) if starts[r] % multiple and starts[r] < sum(sizes)]
        if multiple > 1 and split:
            self._settled = True  # every rank sees the same sizes and raises the same error here
            raise ValueError(f"distributed_scoring(sharded=True): batch centring averages runs of {multiple} "
                             f"consecutive segments of the union, but rank {split[0]}'s segments start at "
                             f"segment {starts[split[0]]}, inside a run (ranks hold {sizes} segments); give every "
                             f"rank but the last a multiple of {multiple} segments (movers.core.scope.shard_bounds "
                             f"with multiple={multiple}), or use centering='corpus' or a fitted table.")
        return range(n)

    def call_size(self, n: int) -> int:
        return sum(self._agreed_sizes(n))

    def total(self, value: T) -> T:
        self._check()
        return super().total(value)

    def gather(self, values: Sequence[T]) -> list[T]:
        return list(values)  # each rank keeps its own segments' values

    def finish(self, spec: Any, options: Any, result: Any) -> Any:
        """The corpus score of the union (a mean of segment scores: reduced from every rank's sums; ΔBLEU's
        was computed from all-reduced statistics already) and the union's ``nrefs``."""
        import dataclasses

        self._check()
        n = len(result.scores)
        keys = ["scores", *(k for k in spec.per_segment_outputs() if k in result.extra and k != "per_reference"
                            and _numbers(result.extra[k], n))]
        local = [math.fsum(result.scores)] + [math.fsum(result.extra[k]) for k in keys[1:]]
        label = result.signature.get("nrefs")
        labels: list[Any] = [None] * self.world
        self.dist.all_gather_object(labels, label, group=self.group)
        signature = result.signature
        if label is not None and len({str(x) for x in labels}) > 1:
            signature = signature.set("nrefs", "var")
        if not spec.corpus_from_segments:
            return dataclasses.replace(result, signature=signature)
        sums = self._reduce(torch.tensor([*local, n], dtype=torch.float64)).tolist()
        means = {k: [s / sums[-1]] for k, s in zip(keys, sums[:-1], strict=True)}
        score, corpus = spec.corpus(options, means)  # a mean of each per-segment output: of the one-entry means
        extra = {**result.extra, **corpus}
        if "raw_scores" in means:  # a baseline-rescaled call: the unscaled corpus score
            extra["raw_score"] = means["raw_scores"][0]
        return dataclasses.replace(result, score=score, signature=signature, extra=extra)


def _numbers(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


@contextlib.contextmanager
def distributed_scoring(group: Any = None, *, sharded: bool = False,
                        timeout: float | datetime.timedelta | None = None) -> Iterator[ProcessGroupScope]:
    """Score across the ranks of an initialised process group: inside the block every movers metric call
    is collective (all ranks call it with the same inputs), each rank embeds and scores ``1/world`` of the
    segments, call-level statistics (per-call IDF, batch/corpus centring, ΔBLEU's corpus sums) are
    all-reduced, and every rank returns the full result, equal to a one-process call to float32 rounding.

    ``sharded=True``: each rank passes only its own segments (any number, at least one); the call is their
    union in rank order. Every rank returns the union's corpus ``score`` and signature and the ``scores`` (and
    other per-segment outputs) of its own segments. A rank whose part fails makes the call fail on every rank
    with its reason (:class:`RankFailed`). ``baseline="fit"`` (fitted on random pairs of the whole call) is
    refused; batch centring needs every rank but the last to hold whole runs of ``centering_batch`` segments.

    In both modes the ranks agree on each call before its first collective: a call that another rank makes with
    another metric, another value of an option that can change a number, other inputs (``sharded=False``) or
    another kind of inputs (texts or documents, an extra input given or not; ``sharded=True``) fails on every
    rank with one :class:`RanksDisagree` that names the option and each rank's value. On gloo a rank that does
    not reach a call or a check within `timeout` seconds (default: the process group's) is named
    (:class:`RankFailed`).

    Raises:
        RuntimeError: If no process group is initialised.
    """
    scope = ShardedScope(group, timeout) if sharded else ProcessGroupScope(group, timeout)
    with use_scope(scope):
        yield scope


@contextlib.contextmanager
def launched_scoring(*, sharded: bool = False) -> Iterator[int]:
    """For command-line tools under ``torchrun``/``accelerate launch``: when ``WORLD_SIZE`` > 1, initialise
    the default process group (NCCL with CUDA, gloo on CPU), score collectively inside the block
    (:func:`distributed_scoring`, ``sharded`` as there) and destroy the group; yields this process's rank (0 when
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
        with distributed_scoring(sharded=sharded):
            yield dist.get_rank()
    finally:
        dist.destroy_process_group()
