"""movers on Ray Data: score a corpus that no process holds, with the result of one call on all of it.

    >>> import movers.integrations.ray as movers_ray                    # doctest: +SKIP
    >>> movers_ray.local_cluster()                                      # or ray.init(address=...) for a cluster
    >>> ds = ray.data.read_parquet("s3://bucket/pairs/")                # columns prediction, reference
    >>> out = movers_ray.score(ds, "moverscore", idf=True)
    >>> out.write_parquet("scored/")                                     # every input column + "moverscore"
    >>> out.score, out.signature                                         # those of movers.moverscore(...)

:func:`score` runs the metric in the two passes of :mod:`movers.pipeline.passes`, which
:func:`movers.score_stream` runs too:

1. **statistics**: a ``map_batches`` over the data set's blocks checks each block's columns (a prediction string
   and references in every row, an integer `index`) and runs the metric on it up to the point where it has built
   its call-level statistics (document frequencies for per-call IDF: a tokenizer, no model; ΔBLEU's n-gram sums,
   kept exactly; token sums for corpus centring: the one statistic that needs the encoder, so that pass runs on a
   pool of actors); it also gives the signature, the rows and the references per row. Each block's partial sums
   (a few kB to a few hundred kB, nothing per row) stream to the driver as they are made and are merged there in
   any order: the sums behind :class:`movers.Idf`, a corpus :class:`movers.Centering`, ΔBLEU's corpus counts.
2. **scoring**: a ``map_batches`` over a pool of actors (one encoder per actor, loaded once) scores each
   batch with those sums: ``rows`` (lazy) is the input with one column more, named by the metric's slug. The
   corpus score is the mean of that column (exact sums of each block's scores, added on the driver: from the
   written files' blocks as :meth:`RayScores.write_parquet` writes them, so writing and the score take one
   execution of this pass; read first, the score keeps the scored rows for a later write) or, for ΔBLEU,
   computed from the summed statistics; the signature is one call's.

Order: a Ray dataset has no row order (blocks run and come back in any order). Only TWMD's batch centring
(and ``centering="batch"`` of any metric) depends on it; it needs ``index=``: a column with each row's position
in the input, and then the rows are hash-partitioned by run (``repartition(keys=...)``: every block holds whole
runs of ``centering_batch`` consecutive positions) and each run is scored with its own rows, as one call would.

Checked before any task runs (:func:`checked_call`, which ``movers score --ray`` runs before it starts a
cluster): the arguments, the metric's options, and what a call split into blocks refuses
(:func:`movers.pipeline.passes.check_split`: ``baseline="fit"``, ``return_plans``, batch centring without
`index`); then, on the cluster, the columns and the resources (an actor that no node can hold is refused; a
fixed pool that would hold every CPU, leaving none for the tasks that read and cut the blocks, is made smaller,
with a warning). An error inside a block (the columns' check, or the metric's own about a row, ΔBLEU's weights
included) names the row by its `index` value, or by the values of its first other columns, and the column; named
by its values, which rows elsewhere in the data set may share, it also says to pass `index=`.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import pickle
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .. import metrics as registry
from ..core.scope import use_scope
from ..core.signature import Signature
from ..core.spec import MetricSpec
from ..core.summation import ExactSum, column_sum
from ..core.validation import short_repr
from ..pipeline.call import checked_options, make_options
from ..pipeline.call import score as score_call
from ..pipeline.embedding import EmbeddingMetric
from ..pipeline.passes import Partial, ScoringPass, StatisticsPass, check_split, run_length

__all__ = ["score", "RayScores", "RayCall", "checked_call", "local_cluster", "LOCAL_CLUSTER_ENV"]

WHO = "movers.integrations.ray.score"

LOCAL_CLUSTER_ENV = {
    # Ray's switch for a cluster of one machine (read when ray is imported): every process listens and connects
    # on the loopback, and no address is looked up on the network
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report
    "RAY_enable_metrics_collection": "0",  # no metrics agents at work
    # Ray's API server asks cloud metadata servers (169.254.169.254, metadata.google.internal) which cloud it runs
    # on when it starts, usage reporting on or off; plain-HTTP requests of the cluster's processes go to a closed
    # port of this machine instead (Ray's own gRPC ignores proxies; HTTPS is untouched)
    "http_proxy": "http://127.0.0.1:9",
    "no_proxy": "localhost,127.0.0.1,::1",
    # token authentication, as Ray sets it for a local cluster, said explicitly (then Ray prints no notice of it;
    # read when ray is imported, like the first)
    "RAY_AUTH_MODE": "token",
}
"""The environment of the processes of a cluster that :func:`local_cluster` starts: on the loopback, no
dashboard, no metrics, no usage report, no request to a cloud metadata server."""


def _ray() -> Any:
    """The ``ray`` module with Ray Data, or an ImportError naming the extra."""
    try:
        import ray
        import ray.data
    except ImportError as err:  # an optional extra
        raise ImportError("movers.integrations.ray needs Ray Data: pip install 'movers[ray]' "
                          "(or pip install 'ray[data]').") from err
    return ray


def local_cluster(num_cpus: int | None = None, *, dashboard: bool = False, progress: bool = False,
                  logs: bool = False, **init_options: Any) -> Any:
    """Start Ray on this machine alone, for scoring here: every process of the cluster on the loopback, no
    dashboard and no metrics unless `dashboard`, no usage report, no request to a cloud metadata server; Ray's
    progress bars only with `progress`, the workers' output and Ray's own INFO and WARNING lines only with `logs`.
    Returns what ``ray.init`` returns (``ray.shutdown()`` stops it).

    Ray reads where a cluster listens when it is imported: call this before anything in the process imports
    ``ray`` (after, the cluster uses the machine's network address, and a warning says so).

    Args:
        num_cpus: CPUs the cluster offers (None: the machine's).
        dashboard: Start Ray's dashboard and metrics (on the loopback).
        progress: Ray Data's progress bars on stderr.
        logs: The workers' output and Ray's INFO and WARNING lines on stderr (else its ``ray`` and ``ray.data``
            loggers show errors only).
        **init_options: More keyword arguments of ``ray.init``.
    """
    imported = "ray" in sys.modules
    saved = {key: os.environ.get(key) for key in LOCAL_CLUSTER_ENV}
    env = dict(LOCAL_CLUSTER_ENV)
    if dashboard:
        del env["RAY_enable_metrics_collection"]
    if os.environ.get("RAY_AUTH_MODE") or imported:
        del env["RAY_AUTH_MODE"]  # the user's choice, or read already (Ray reads it on import)
    os.environ.update(env)
    try:
        ray = _ray()
        context = ray.init(num_cpus=num_cpus, include_dashboard=dashboard, log_to_driver=logs,
                           configure_logging=False, **init_options)
    finally:  # this process's own requests keep the user's proxies; the cluster's processes have theirs (the
        # authentication mode stays: this process talks to the cluster with it)
        for key, value in saved.items():
            if key == "RAY_AUTH_MODE":
                continue
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    ray.data.DataContext.get_current().enable_progress_bars = progress
    if not logs:
        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    address = ray.util.get_node_ip_address()
    if imported and not address.startswith("127.") and address not in ("::1", "localhost"):
        warnings.warn(f"movers: ray was imported before local_cluster(), so the cluster listens on this machine's "
                      f"network address {address}, not the loopback; call local_cluster() before importing ray (or "
                      f"set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 first).", RuntimeWarning, stacklevel=2)
    return context


# ------------------------------------------------------------------------------------------ the call

@dataclass(frozen=True)
class _Columns:
    prediction: str
    references: tuple[str, ...]
    extra: Mapping[str, tuple[str, ...]]  # extra input (ΔBLEU's reference_weights) -> columns, like references
    index: str | None

    @property
    def wanted(self) -> list[str]:
        return [self.prediction, *self.references, *(c for cols in self.extra.values() for c in cols),
                *([self.index] if self.index else [])]

    def read(self, table: pa.Table) -> tuple[list[Any], list[list[Any]], dict[str, Any]]:
        predictions = table.column(self.prediction).to_pylist()
        references = _grouped([table.column(c).to_pylist() for c in self.references])
        extra = {key: _grouped([table.column(c).to_pylist() for c in cols]) for key, cols in self.extra.items()}
        return predictions, references, extra

    def row(self, table: pa.Table, i: int, column: str | None = None) -> str:
        """Row `i` of `table` as the user knows it: by its `index` value, else by the values of its first other
        columns."""
        if self.index is not None and column != self.index:
            return f"the row with {self.index}={short_repr(table.column(self.index)[i].as_py())}"
        shown = self._shown(table, column, i)
        return "the row " + (", ".join(shown) if shown else f"{i} of a block")

    def unnamed(self, table: pa.Table, i: int, column: str | None = None) -> str:
        """What :meth:`row` leaves open about row `i`, as a sentence to end an error with: nothing when the row is
        named by its `index` value (or the error is about that column); else that a block sees only its own rows,
        so the values shown may name other rows too (how many rows of the block they name, when several), and
        how to name rows by position: ``index=``."""
        if self.index is not None:
            return ""
        fix = "pass index=<a column with each row's position 0, 1, ...> to name each row by its position."
        shown = self._shown(table, column, i)
        if not shown:
            return f" Without `index`, a row is named by its place in its block; {fix}"
        same = sum(self._shown(table, column, k) == shown for k in range(table.num_rows))
        if same > 1:
            return (f" Without `index`, a row is named by its first columns' values, and {same} rows of its block "
                    f"have the values shown (rows of other blocks may too); {fix}")
        return (f" Without `index`, a row is named by its first columns' values, which rows of other blocks may "
                f"share; {fix}")

    @staticmethod
    def _shown(table: pa.Table, column: str | None, i: int) -> list[str]:
        return [f"{name}={short_repr(table.column(name)[i].as_py())}" for name in table.column_names
                if name != column][:3]

    def check(self, table: pa.Table, spec: MetricSpec) -> None:
        """Each column of a block as a call needs it: strings (a document's sentences too, for a metric that reads
        documents) in the prediction column, a string or a list of strings in each reference column and at least
        one reference per row, integers in the index column; else the column and the row are named."""
        prediction = self._bad(table, self.prediction, _is_text(spec.documents),
                               _arrow_text if spec.documents else _arrow_string)
        if prediction is not None:
            what = "a string (or a list of sentences)" if spec.documents else "a string"
            raise TypeError(f"{WHO}: column {self.prediction!r} (the predictions) must hold {what} in every row; "
                            f"{self.row(table, prediction, self.prediction)} holds "
                            f"{short_repr(table.column(self.prediction)[prediction].as_py())}."
                            f"{self.unnamed(table, prediction, self.prediction)}")
        for name in self.references:
            bad = self._bad(table, name, _is_text(True), nulls=True)
            if bad is not None:
                raise TypeError(f"{WHO}: reference column {name!r} must hold a string or a list of strings in "
                                f"every row (None: no reference there); {self.row(table, bad, name)} holds "
                                f"{short_repr(table.column(name)[bad].as_py())}.{self.unnamed(table, bad, name)}")
        for i, refs in enumerate(_grouped([table.column(c).to_pylist() for c in self.references])):
            if not refs:
                columns = ", ".join(repr(c) for c in self.references)
                column = self.references[0] if len(self.references) == 1 else None
                raise ValueError(f"{WHO}: {self.row(table, i, column)} has no reference in column"
                                 f"{'s' if len(self.references) > 1 else ''} {columns}; every row needs one."
                                 f"{self.unnamed(table, i, column)}")
        if self.index is not None:
            bad = self._bad(table, self.index, lambda v: isinstance(v, int) and not isinstance(v, bool),
                            pa.types.is_integer)
            if bad is not None and pa.types.is_floating(table.column(self.index).type):
                # pandas turns a column of ints with one float or None into floats: name that row, not the first
                bad = next((i for i, v in enumerate(table.column(self.index).to_pylist())
                            if v is None or not float(v).is_integer()), bad)
            if bad is not None:
                raise TypeError(f"{WHO}: the `index` column {self.index!r} must hold each row's position (an int "
                                f"0, 1, ...) in every row; {self.row(table, bad, self.index)} holds "
                                f"{short_repr(table.column(self.index)[bad].as_py())}.")

    @staticmethod
    def _bad(table: pa.Table, name: str, good: Any, arrow: Any = None, *, nulls: bool = False) -> int | None:
        """The first row whose value in column `name` is not `good` (None: every row is), read value by value
        only when the column's Arrow type or its nulls do not settle it."""
        column = table.column(name)
        if (arrow or _arrow_text)(column.type) and (nulls or not column.null_count):
            return None
        for i, value in enumerate(column.to_pylist()):
            if not (value is None and nulls) and not good(value):
                return i
        return None


def _arrow_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _arrow_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or (
        (pa.types.is_list(t) or pa.types.is_large_list(t)) and _arrow_text(t.value_type))


def _is_text(lists: bool) -> Any:
    def good(value: Any) -> bool:
        return isinstance(value, str) or (lists and isinstance(value, (list, tuple)) and
                                          all(isinstance(v, str) for v in value))
    return good


def _grouped(columns: list[list[Any]]) -> list[list[Any]]:
    """Per row, the values of several columns, each a value or a list of values (None: none)."""
    out: list[list[Any]] = []
    for values in zip(*columns, strict=True):
        row: list[Any] = []
        for v in values:
            if v is None:
                continue
            row.extend(v if isinstance(v, (list, tuple)) else [v])
        out.append(row)
    return out


def _names(value: Any, what: str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else ()
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"{WHO}: `{what}` must be a column name or a list of them, got {value!r}.")
    return names


def _pool_size(concurrency: Any) -> tuple[int, int] | None:
    """`concurrency` as (min, max) actors, None for Ray's autoscaling pool, or a TypeError/ValueError naming it."""
    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if concurrency is None:
        return None
    if whole(concurrency):
        if concurrency < 1:
            raise ValueError(f"{WHO}: `concurrency` must be a positive number of actors, got {concurrency}.")
        return concurrency, concurrency
    if isinstance(concurrency, tuple) and len(concurrency) == 2 and all(whole(x) for x in concurrency):
        low, high = concurrency
        if not 1 <= low <= high:
            raise ValueError(f"{WHO}: `concurrency` as (min, max) actors needs 1 <= min <= max, got {concurrency}.")
        return low, high
    raise TypeError(f"{WHO}: `concurrency` must be None (Ray's autoscaling pool), a positive int or a (min, max) "
                    f"tuple of ints, got {concurrency!r}.")


def _resource(value: Any, what: str, *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            value < 0 or (value == 0 and not optional):
        wanted = "a number >= 0 or None" if optional else "a number > 0"
        raise ValueError(f"{WHO}: `{what}` (per actor) must be {wanted}, got {value!r}.")
    return float(value)


@dataclass(frozen=True)
class RayCall:
    """A Ray scoring call as :func:`checked_call` checked it: the metric, its options (as passed, and their
    dataclass), the columns, the pool's size and each actor's resources, the run length batch centring keeps
    whole."""

    spec: MetricSpec
    options: dict[str, Any]
    resolved: Any
    columns: _Columns
    block_size: int
    pool: tuple[int, int] | None
    num_cpus: float
    num_gpus: float | None
    multiple: int


def checked_call(metric: str | MetricSpec, *, prediction: str = "prediction",
                 reference: str | Sequence[str] = "reference", index: str | None = None, block_size: int = 1024,
                 concurrency: int | tuple[int, int] | None = None, num_cpus: float = 1,
                 num_gpus: float | None = None, **options: Any) -> RayCall:
    """Every check of :func:`score` that needs neither the data set nor a cluster (the same arguments, less the
    data set): the columns' names, `block_size`, `concurrency`, `num_cpus`, `num_gpus`, the metric's options and
    what a call split into blocks refuses. ``movers score --ray`` runs it before it starts a cluster."""
    spec = registry.get(metric)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"{WHO}: `block_size` must be a positive int, got {block_size!r}.")
    if index is not None and (not isinstance(index, str) or not index):
        raise TypeError(f"{WHO}: `index` must be None or a column name, got {index!r}.")
    pool = _pool_size(concurrency)
    cpus = _resource(num_cpus, "num_cpus", optional=False)
    gpus = _resource(num_gpus, "num_gpus", optional=True)
    options = dict(options)
    extra_columns = {key: _names(options.pop(key), key) for key in spec.extra_inputs if key in options}
    columns = _Columns(_one(prediction), _names(reference, "reference"), extra_columns, index)
    o = make_options(spec, options)
    check_split(spec.name(o), o, part="block", rows=True,
                unordered=None if index is not None else
                "a Ray dataset keeps no row order (its blocks run and return in any order); pass index=<a column "
                "with each row's position 0, 1, ...>")
    checked_options(spec, options)
    assert cpus is not None
    return RayCall(spec, options, o, columns, block_size, pool, cpus, gpus, run_length(o))


def _one(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{WHO}: `prediction` must be a column name, got {name!r}.")
    return name


# ------------------------------------------------------------------------------------------ the passes

class _Worker:
    """What both passes' workers (tasks or actors) share: the metric, its options, the columns; the metric's
    context (encoder, vectors) loaded once per process."""

    def __init__(self, spec: MetricSpec, options: dict[str, Any], columns: _Columns, threads: int | None) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.spec = spec
        self.options = options
        self.columns = columns
        if isinstance(spec, EmbeddingMetric):  # the encoder (tokenizer first, weights on first use), cached
            spec.context(checked_options(spec, options))  # for the process's life

    def call(self, table: pa.Table) -> Any:
        predictions, references, extra = self.columns.read(table)
        with self.rows_named(table):
            return score_call(self.spec, predictions, references, extra, **self.options)

    @contextlib.contextmanager
    def rows_named(self, table: pa.Table) -> Iterator[None]:
        """A metric's error about ``predictions[i]``, ``references[i]`` or an extra input's ``[i]`` (ΔBLEU's
        ``reference_weights[i]``) of this block, as the column and the row of the data set; "segment i" of that
        message, the same position, as "that row"."""
        try:
            yield
        except (ValueError, TypeError) as err:
            text = str(err)
            pattern = _argument(tuple(self.columns.extra))
            rows = [int(m["i"]) for m in pattern.finditer(text)]
            if not rows:
                raise
            named = pattern.sub(lambda m: self._named(table, m), text)
            if len(set(rows)) == 1:
                named = re.sub(rf"\bsegment {rows[0]}\b", "that row", named)
            raise type(err)(named + self.columns.unnamed(table, rows[0])) from None

    def _named(self, table: pa.Table, m: re.Match) -> str:
        i = int(m["i"])
        row = self.columns.row(table, i)
        if m["what"] == "predictions":
            return f"column {self.columns.prediction!r} of {row}"
        what = "reference" if m["what"] == "references" else f"`{m['what']}`"
        names = self.columns.references if m["what"] == "references" else self.columns.extra[m["what"]]
        columns = f"column{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}"
        if m["j"] is not None:
            value = f"reference {int(m['j']) + 1}" if m["what"] == "references" else \
                f"value {int(m['j']) + 1} of {what}"
            return f"{value} ({columns}) of {row}"
        return f"the {what} ({columns}) of {row}"

    def scored(self, table: pa.Table, totals: list[Any], size: int | None = None) -> Any:
        """The metric's result on `table` with the call-level statistics `totals`."""
        second = ScoringPass(totals, size)
        with use_scope(second), warnings.catch_warnings():
            if table.num_rows == 1:
                warnings.simplefilter("ignore")  # one row scored for corpus outputs: no warning about it
            second.begin(0)
            return self.call(table)


@functools.cache
def _argument(extra: tuple[str, ...]) -> re.Pattern[str]:
    """How a metric's message names a row of its call, in backquotes: ``predictions[i]``, ``references[i]``,
    ``references[i][j]``, or an extra input's (``reference_weights[i]``, ``reference_weights[i][j]``)."""
    names = "|".join(re.escape(name) for name in ("predictions", "references", *extra))
    return re.compile(rf"`(?P<what>{names})\[(?P<i>\d+)\](?:\[(?P<j>\d+)\])?`")


_WORKERS: dict[bytes, _StatisticsWorker] = {}


def _first_pass(table: pa.Table, key: bytes) -> pa.Table:
    """The statistics pass as Ray tasks (statistics that need no encoder): a worker process keeps the metric
    and its tokenizer for its next block of the same call (and forgets an earlier call's)."""
    worker = _WORKERS.get(key)
    if worker is None:
        _WORKERS.clear()
        worker = _WORKERS[key] = _StatisticsWorker(*pickle.loads(key))
    return worker(table)


class _StatisticsWorker(_Worker):
    """One block's checked columns and partial statistics, signature, rows and references per row, as a one-row
    table: the block is read `block_size` rows at a time (:func:`score` already cuts blocks to that size; this
    keeps the bound whatever block arrives) and the parts' partials merged here, so memory is bounded by
    `block_size` and the driver gets one partial per block."""

    def __init__(self, spec: MetricSpec, options: dict[str, Any], columns: _Columns, threads: int | None,
                 block_size: int) -> None:
        super().__init__(spec, options, columns, threads)
        self.block_size = block_size

    def __call__(self, table: pa.Table) -> pa.Table:
        merged: Partial | None = None
        for start in range(0, table.num_rows, self.block_size):
            merged = self._partial(table.slice(start, self.block_size)).merged(merged)
        return pa.table({"partial": pa.array([] if merged is None else [pickle.dumps(merged)], pa.binary())})

    def _partial(self, table: pa.Table) -> Partial:
        self.columns.check(table, self.spec)
        first = StatisticsPass(signature_only=True)
        with use_scope(first), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings come from the scoring pass
            first.begin()
            signature = self.call(table).signature
        counts = [len(r) for r in self.columns.read(table)[1]]
        index = self.columns.index
        positions = table.column(index).to_pylist() if index is not None else []
        return first.to_partial(table.num_rows, signature=signature,
                             nrefs=(min(counts, default=0), max(counts, default=0)),
                             index=(min(positions), max(positions), sum(positions)) if positions else None)


class _StatisticsActor(_StatisticsWorker):
    """The statistics pass on a pool of actors (corpus centring embeds texts): its arguments wait in Ray's object
    store (`ref`, one ``ray.put``), so that an actor is created, and restarted, with a small reference."""

    def __init__(self, ref: Any) -> None:
        super().__init__(*_ray().get(ref))


class _ScoringActor(_Worker):
    """The scoring pass: each batch (or each run of consecutive rows) scored with the reduced statistics. The
    arguments (the metric, its options, the columns, the statistics) wait in Ray's object store (`ref`, one
    ``ray.put``), so that an actor is created, and restarted, with a small reference."""

    def __init__(self, ref: Any) -> None:
        spec, options, columns, threads, totals, size, column, multiple = _ray().get(ref)
        super().__init__(spec, options, columns, threads)
        self.totals, self.size, self.column, self.multiple = totals, size, column, multiple

    def __call__(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:
            return table.append_column(self.column, pa.array([], pa.float64()))
        if self.multiple > 1:  # whole runs of `multiple` consecutive positions: in input order, one call
            index = self.columns.index
            assert index is not None
            table = table.sort_by(index)
            positions = table.column(index).to_pylist()
            k = self.multiple
            for at in range(0, len(positions), k):
                run = positions[at:at + k]
                start = run[0] - run[0] % k
                if run != list(range(start, min(start + k, self.size))):
                    raise ValueError(f"{WHO}: `index` column {index!r} must number the rows 0..{self.size - 1} once "
                                     f"each; the run starting at {start} holds positions "
                                     f"{run[:8]}{'...' if len(run) > 8 else ''}.")
        result = self.scored(table, self.totals, self.size)
        return table.append_column(self.column, pa.array([float(s) for s in result.scores], pa.float64()))


def _mean(ds: Any, column: str) -> float:
    """The mean of a float column: each block's exact sum (a task per block, in a module that imports no model
    code), added on the driver; the same bits in any block order."""
    sums = ds.select_columns([column]).map_batches(column_sum, batch_size=None, batch_format="pyarrow",
                                                   fn_args=(column,))
    return _mean_of(triple for batch in sums.iter_batches(batch_size=None, batch_format="pyarrow")
                    for triple in zip(*(batch.column(c).to_pylist() for c in ("units", "special", "n")), strict=True))


def _mean_of(sums: Iterable[tuple[int | str, float, int]]) -> float:
    """The mean from blocks' exact sums (the units, the non-finite part, the count), added in any order."""
    total, n = ExactSum(), 0
    for units, special, count in sums:
        total, n = total + ExactSum(int(units), special), n + count
    return float(total) / n if n else math.nan


@functools.cache
def _scored_parquet() -> type:
    """A Parquet datasink that also returns each write task's exact sum and count of the score column, so that
    writing the rows gives the corpus score in the same execution (built on first use: Ray is optional)."""
    ray = _ray()

    class ScoredParquet(ray.data.BlockBasedFileDatasink):  # type: ignore[name-defined]
        def __init__(self, path: str, column: str, parquet_args: dict[str, Any], **sink_args: Any) -> None:
            super().__init__(path, file_format="parquet", **sink_args)
            self.column, self.parquet_args = column, parquet_args
            self.sums: list[tuple[int, float, int]] = []

        def write_block_to_file(self, block: Any, file: Any) -> None:
            import pyarrow.parquet as pq

            pq.write_table(block.to_arrow(), file, **self.parquet_args)

        def write(self, blocks: Any, ctx: Any) -> Any:
            blocks = list(blocks)
            total, n = ExactSum(), 0
            for block in blocks:
                values = block.column(self.column).to_pylist() if hasattr(block, "column") else \
                    list(block[self.column])
                total, n = total + ExactSum.of(values), n + len(values)
            super().write(blocks, ctx)
            return str(total.units), total.special, n

        def on_write_complete(self, write_result: Any) -> None:
            super().on_write_complete(write_result)
            self.sums = [(int(u), s, c) for u, s, c in write_result.write_returns if c]

    return ScoredParquet


@dataclass
class RayScores:
    """The result of :func:`score`: ``signature`` and ``extra`` of one call (known once the statistics pass
    has run), ``rows`` (lazy) and ``score``.

    A corpus score that is a mean of segment scores comes from the scoring pass, which runs once in either order:
    :meth:`write_parquet` adds up the score column as it writes the rows; reading ``score`` before any write keeps
    the scored rows (in Ray's object store, which spills to disk), and a later write writes those.
    """

    rows: Any
    """A ``ray.data.Dataset``: every input column and the per-row score in column ``column``; lazy until
    ``score`` is read, then the scored rows, kept."""
    column: str
    signature: Signature
    """The signature of one call on the whole data set."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Corpus-level outputs from the summed statistics (ΔBLEU's precisions, brevity penalty, counts); the other
    per-segment outputs (precision, recall, ...) are not kept."""
    _score: float | None = field(default=None, repr=False)
    _keep: Any = field(default=None, repr=False)  # the scoring actors' arguments in the object store

    @property
    def score(self) -> float:
        """The corpus score of one call on the whole data set."""
        if self._score is None:
            with _ours():
                self.rows = self.rows.materialize()
                self._score = _mean(self.rows, self.column)
        return self._score

    def write_parquet(self, path: str, **kwargs: Any) -> None:
        """Write ``rows`` as Parquet files under `path` (one per write task; `filesystem`, `try_create_dir` and
        ``pyarrow.parquet.write_table`` arguments such as `compression` pass through), adding up the score
        column as the blocks are written: the corpus score comes from the same execution of the scoring pass."""
        sink_args = {key: kwargs.pop(key) for key in ("filesystem", "try_create_dir") if key in kwargs}
        sink = _scored_parquet()(path, self.column, kwargs, **sink_args)
        with _ours():
            self.rows.write_datasink(sink)
        if self._score is None:
            self._score = _mean_of(sink.sums)

    def materialize(self) -> RayScores:
        """The same result with ``rows`` scored once and kept in Ray's object store (then ``score`` reads it)."""
        with _ours():
            rows = self.rows.materialize()
        return RayScores(rows, self.column, self.signature, self.extra, self._score, self._keep)

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "signature": str(self.signature), **self.extra}


# ------------------------------------------------------------------------------------------ the cluster

def _fitted_pool(call: RayCall, ray: Any) -> tuple[int, int] | None:
    """The pool's size checked against the cluster's alive nodes: an actor that no node can hold, or one that would
    take every CPU of the cluster, is refused; a fixed pool whose actors would take every CPU is made smaller, with
    a warning (the tasks that read and cut the blocks, each asking for a CPU, would otherwise wait forever)."""
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    cpus = [float(n.get("CPU", 0)) for n in nodes]
    gpus = [float(n.get("GPU", 0)) for n in nodes]
    if cpus and call.num_cpus > max(cpus):
        raise ValueError(f"{WHO}: `num_cpus`={call.num_cpus:g} per actor, but no node of the cluster has more than "
                         f"{max(cpus):g} CPUs (it has {sum(cpus):g} in all); an actor could never start. Pass "
                         f"num_cpus <= {max(cpus):g}.")
    if call.num_gpus and call.num_gpus > max(gpus, default=0):
        raise ValueError(f"{WHO}: `num_gpus`={call.num_gpus:g} per actor, but no node of the cluster has "
                         f"{'a GPU' if not max(gpus, default=0) else f'more than {max(gpus):g} GPUs'}; an actor "
                         f"could never start. Pass num_gpus=None (CPU actors) or at most {max(gpus, default=0):g}.")
    if not cpus:
        return call.pool
    total = sum(cpus)
    low, high = call.pool or (1, 1)
    free = total - 1  # a whole CPU for the tasks that read and cut blocks (each asks for one)
    fits = int(free // call.num_cpus) if free >= call.num_cpus else 0
    if fits == 0:
        fix = f"pass num_cpus <= {free:g}" if free >= 1 else "start the cluster with 2 CPUs or more"
        raise ValueError(f"{WHO}: one actor with `num_cpus`={call.num_cpus:g} takes every CPU of the cluster "
                         f"({total:g}), and the tasks that read and cut the data set's blocks need one, which they "
                         f"would wait for forever; {fix}.")
    if call.pool is None or low <= fits:
        return call.pool
    warnings.warn(f"movers: `concurrency`={low if low == high else call.pool} actors of {call.num_cpus:g} "
                  f"CPUs would take every CPU of the cluster ({total:g}), leaving none for the tasks that read "
                  f"and cut the data set's blocks, which would then wait forever; scoring with {fits} actor"
                  f"{'s' if fits > 1 else ''}.", RuntimeWarning, stacklevel=3)
    return fits, fits


def _translated(err: BaseException) -> BaseException | None:
    """A failure of a Ray task as movers' own error: the block check's or metric's message without Ray's frames,
    an Arrow type conflict between blocks as the column and its types; None for anything else."""
    cause = getattr(err, "cause", None)
    text = str(err)
    merge = re.search(r"Unable to merge: Field (?P<name>\S+) has incompatible types: (?P<a>.+?) vs (?P<b>[^\n]+)",
                      text)
    if merge:
        return ValueError(f"{WHO}: column {merge['name']!r} holds {merge['a']} in some blocks of the data set and "
                          f"{merge['b'].rstrip('. ')} in others, which Arrow cannot put in one column; give it one "
                          f"type in every row (strings for predictions; strings, or lists of strings in every row, "
                          f"for references).")
    if isinstance(cause, (ValueError, TypeError)) and not isinstance(cause, pa.ArrowException):
        return type(cause)(str(cause))
    # Ray Data wraps a function's error in its UserCodeException, which keeps only the error's traceback as text
    raised = list(_RAISED.finditer(text))
    if raised:
        return {"TypeError": TypeError, "ValueError": ValueError}[raised[-1]["kind"]](raised[-1]["message"])
    return None


_RAISED = re.compile(r"^(?P<kind>TypeError|ValueError): (?P<message>.*?)\n\nThe above exception was the direct cause",
                     re.M | re.S)


@contextlib.contextmanager
def _ours() -> Iterator[None]:
    try:
        yield
    except Exception as err:  # noqa: BLE001  Ray wraps a task's error in its own type
        translated = _translated(err)
        if translated is None:
            raise
        raise translated from None


# ------------------------------------------------------------------------------------------ score

def score(ds: Any, metric: str | MetricSpec, *, prediction: str = "prediction",
          reference: str | Sequence[str] = "reference", index: str | None = None, block_size: int = 1024,
          concurrency: int | tuple[int, int] | None = None, num_cpus: float = 1, num_gpus: float | None = None,
          **options: Any) -> RayScores:
    """Score a ``ray.data.Dataset`` with a movers metric: the corpus score and signature of one
    ``movers.<metric>`` call on the whole data set (to ``movers.REGROUPING_ATOL``; ΔBLEU's the same bits), and
    ``rows``, the data set with a per-row score column named by the metric's slug.

    Args:
        ds: A Ray dataset with a prediction column and one or several reference columns (each a string or a
            list of strings per row; None: no reference there).
        metric: A registered metric's slug (``"moverscore"``, ``"twmd"``, ...).
        prediction, reference: The column names.
        index: A column with each row's position in the input (0, 1, ...); needed only by batch centring
            (TWMD's default), whose runs of consecutive rows Ray's unordered blocks do not keep. Errors inside a
            block name the row by it.
        block_size: Rows per block and per metric call in both passes (the data set is cut into blocks of at most
            this many rows, so every actor of the pool gets some; memory grows with it, no score depends on it).
        concurrency: Actors (and statistics tasks at once) per pass: Ray's ``map_batches`` argument, an int or
            (min, max); None: Ray's autoscaling pool. A fixed pool that would hold every CPU of the cluster is
            made smaller, with a warning (the tasks that read the data set need one).
        num_cpus, num_gpus: Per actor; torch runs ``num_cpus`` threads in each. More than a node has is refused.
        **options: The metric's options (``idf=True``, ``centering="corpus"``, ...). The metric's extra
            inputs (ΔBLEU's ``reference_weights``) name columns, shaped as `reference`.
    Raises:
        TypeError: `ds` is not a Ray dataset; a column name, `concurrency` or a column's values of the wrong type
            (naming the column and the row).
        ValueError: A missing column, an empty data set, a bad option (the metric's own message), resources no
            node has, ``baseline="fit"``, ``return_plans`` or batch centring without `index`.
    """
    call = checked_call(metric, prediction=prediction, reference=reference, index=index, block_size=block_size,
                        concurrency=concurrency, num_cpus=num_cpus, num_gpus=num_gpus, **options)
    ray = _ray()
    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"{WHO}: `ds` must be a ray.data.Dataset (ray.data.read_parquet(...), from_items(...), ...), "
                        f"got {type(ds).__name__}.")
    spec, columns = call.spec, call.columns
    with _ours():  # blocks whose types Arrow cannot merge fail here
        schema = ds.schema()
    if schema is None:
        raise ValueError(f"{WHO}: the data set is empty; expected at least one row.")
    names = list(schema.names)
    missing = [c for c in columns.wanted if c not in names]
    if missing:
        raise ValueError(f"{WHO}: the data set has no column {missing[0]!r}; its columns are {names}.")
    if spec.slug in names:
        raise ValueError(f"{WHO}: the data set already has a column {spec.slug!r}, the name of the score column; "
                         f"rename it first.")
    pool = _fitted_pool(call, ray)
    threads = max(1, int(call.num_cpus))  # torch threads per actor
    # Ray Data restarts a pool's actor whose process dies and retries the batches it held (max_restarts and
    # max_task_retries default to -1 for actor pools), and retries a task whose worker dies (max_retries -1);
    # a batch that raises fails the run with its error. The actors' arguments wait in the object store (one
    # ray.put each pass), so a restart needs no large inline argument.
    strategy = ray.data.ActorPoolStrategy() if pool is None else \
        ray.data.ActorPoolStrategy(min_size=pool[0], max_size=pool[1])
    actor = {"batch_format": "pyarrow", "compute": strategy, "num_cpus": call.num_cpus, "num_gpus": call.num_gpus}
    common = (spec, dict(call.options), columns, threads)

    # Blocks of at most `block_size` rows (Ray's streaming repartition: blocks split and combined as they stream,
    # no shuffle). A reader may return a whole data set as one block (Ray's Parquet reader does, up to 128 MiB),
    # and a block goes to one task or actor whole: without this, one actor of the pool scores every row while
    # the others wait.
    ds = ds.repartition(target_num_rows_per_block=call.block_size)
    # the statistics pass, a partial per block; only corpus centring embeds texts there (an actor pool then,
    # holding the encoder for the pass); the others read texts with a tokenizer, in plain tasks on CPUs
    statistics = (*common, call.block_size)
    if getattr(call.resolved, "centering", None) == "corpus":
        first = ds.map_batches(_StatisticsActor, batch_size=None, fn_constructor_args=(ray.put(statistics),),
                               **actor)
    else:
        first = ds.map_batches(_first_pass, batch_size=None, fn_args=(pickle.dumps(statistics),),
                               batch_format="pyarrow", concurrency=None if pool is None else pool[1])
    merged: Partial | None = None
    with _ours():
        for batch in first.iter_batches(batch_size=None, batch_format="pyarrow"):
            for blob in batch.column("partial").to_pylist():
                merged = pickle.loads(blob).merged(merged)
    if merged is None or not merged.n:
        raise ValueError(f"{WHO}: the data set is empty; expected at least one row.")
    size, multiple = merged.n, max(call.multiple, merged.multiple)
    totals = merged.totals if merged.asked else []
    if multiple > 1:
        low, high, total = merged.extra["index"]
        if (low, high, total) != (0, size - 1, size * (size - 1) // 2):
            raise ValueError(f"{spec.slug}: `index` column {index!r} must number the {size} rows 0..{size - 1} once "
                             f"each; it holds values from {low} to {high}.")
    keep = ray.put((*common, totals, size, spec.slug, multiple))
    if multiple > 1:
        # hash-partitioned by run: every block holds whole runs of `multiple` consecutive positions
        run = f"__movers_run_{spec.slug}"
        keyed = ds.with_column(run, ray.data.expressions.col(str(index)) // multiple)
        blocks = max(1, -(-size // call.block_size))
        rows = keyed.repartition(blocks, keys=[run]).drop_columns([run]).map_batches(
            _ScoringActor, batch_size=None, fn_constructor_args=(keep,), **actor)
    else:
        rows = ds.map_batches(_ScoringActor, batch_size=call.block_size, fn_constructor_args=(keep,), **actor)
    signature = merged.extra["signature"]
    nrefs = merged.extra["nrefs"]
    if signature.get("nrefs") is not None:  # the whole data set's, as one call's
        signature = signature.set("nrefs", nrefs[0] if nrefs[0] == nrefs[1] else "var")
    result = RayScores(rows=rows, column=spec.slug, signature=signature, _keep=keep)
    if not spec.corpus_from_segments:  # a corpus statistic from the summed statistics: one row scored with them
        sample = ds.limit(1).take_batch(1, batch_format="pyarrow")
        whole = _Worker(spec, dict(call.options), columns, None).scored(sample, totals, size)  # the driver's threads
        per_segment = set(spec.per_segment_outputs())
        result._score = whole.score
        result.extra = {k: v for k, v in whole.extra.items() if k not in per_segment and k != "empty_predictions"}
    return result
