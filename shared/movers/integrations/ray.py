"""movers on Ray Data: score a corpus that no process holds, with the result of one call on all of it.

    >>> import ray, movers.integrations.ray as movers_ray               # doctest: +SKIP
    >>> ds = ray.data.read_parquet("s3://bucket/pairs/")                # columns prediction, reference
    >>> out = movers_ray.score(ds, "moverscore", idf=True)
    >>> out.write_parquet("scored/")                                     # every input column + "moverscore"
    >>> out.score, out.signature                                         # those of movers.moverscore(...)

:func:`score` runs the metric in two passes through the scope hooks that :func:`movers.score_stream` and
distributed scoring use:

1. **statistics**: a ``map_batches`` over the data set's blocks runs the metric on each block up to the point
   where it has built its call-level statistics (document frequencies for per-call IDF: a tokenizer, no model;
   ΔBLEU's n-gram sums, kept exactly; token sums for corpus centring: the one statistic that needs the
   encoder, so that pass runs on a pool of actors); it also gives the signature, the rows and the references
   per row. Each block's partial sums (a few kB to a few hundred kB, nothing per row) stream to the driver as
   they are made and are added there in any order: the sums behind :class:`movers.Idf`, a corpus
   :class:`movers.Centering`, ΔBLEU's corpus counts.
2. **scoring**: a ``map_batches`` over a pool of actors (one encoder per actor, loaded once) scores each
   batch with those sums: ``rows`` (lazy) is the input with one column more, named by the metric's slug. The
   corpus score is the mean of that column (exact sums of each block's scores, added on the driver) or, for
   ΔBLEU, computed from the summed statistics; the signature is one call's.

Order: a Ray dataset has no row order (blocks run and come back in any order). Only TWMD's batch centring
(and ``centering="batch"`` of any metric) depends on it; it needs ``index=``: a column with each row's position
in the input, and then the rows are hash-partitioned by run (``repartition(keys=...)``: every block holds whole
runs of ``centering_batch`` consecutive positions) and each run is scored with its own rows, as one call would.

Refused, with the reason: ``baseline="fit"`` (a random pairing over the whole call) and ``return_plans``
(per-pair matrices are for inspecting chosen rows: :func:`movers.explain`).
"""
from __future__ import annotations

import math
import pickle
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    import pyarrow as pa
    import ray
    import ray.data
except ImportError as err:  # an optional extra
    raise ImportError("movers.integrations.ray needs Ray Data: pip install 'movers[ray]' "
                      "(or pip install 'ray[data]').") from err

from .. import metrics as registry
from ..core.scope import add_totals, use_scope
from ..core.signature import Signature
from ..core.spec import MetricSpec
from ..core.summation import ExactSum, column_sum
from ..pipeline.call import checked_options, make_options
from ..pipeline.call import score as score_call
from ..pipeline.embedding import EmbeddingMetric
from ..pipeline.streaming import _FirstPass, _SecondPass

__all__ = ["score", "RayScores"]

_REFUSED = {
    "return_plans": "return_plans keeps a transport plan per pair for inspection, which is not a column to write "
                    "for a whole data set; explain chosen rows with movers.explain",
}


@dataclass
class RayScores:
    """The result of :func:`score`: ``signature`` and ``extra`` of one call (known once the statistics pass
    has run), ``rows`` (lazy) and ``score``.

    A corpus score that is a mean of segment scores is reduced from ``rows``' score column when first read,
    which runs the scoring pass; writing ``rows`` runs it again. To do both in one pass, :meth:`write_parquet`
    writes the rows and reduces the score from the written column (or materialize ``rows`` first).
    """

    rows: Any
    """A lazy ``ray.data.Dataset``: every input column and the per-row score in column ``column``."""
    column: str
    signature: Signature
    """The signature of one call on the whole data set."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Corpus-level outputs from the summed statistics (ΔBLEU's precisions, brevity penalty, counts); the other
    per-segment outputs (precision, recall, ...) are not kept."""
    _score: float | None = field(default=None, repr=False)

    @property
    def score(self) -> float:
        """The corpus score of one call on the whole data set."""
        if self._score is None:
            self._score = _mean(self.rows, self.column)
        return self._score

    def write_parquet(self, path: str, **kwargs: Any) -> None:
        """``rows.write_parquet(path)``, then the corpus score from the written score column (one scoring pass)."""
        self.rows.write_parquet(path, **kwargs)
        if self._score is None:
            self._score = _mean(ray.data.read_parquet(path, columns=[self.column]), self.column)

    def materialize(self) -> RayScores:
        """The same result with ``rows`` scored once and kept in Ray's object store (then ``score`` reads it)."""
        return RayScores(self.rows.materialize(), self.column, self.signature, self.extra, self._score)

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "signature": str(self.signature), **self.extra}


# ------------------------------------------------------------------------------------------ inputs

@dataclass(frozen=True)
class _Columns:
    prediction: str
    references: tuple[str, ...]
    extra: Mapping[str, tuple[str, ...]]  # extra input (ΔBLEU's reference_weights) -> columns, like references
    index: str | None

    def read(self, table: pa.Table) -> tuple[list[Any], list[list[Any]], dict[str, Any]]:
        predictions = table.column(self.prediction).to_pylist()
        references = _grouped([table.column(c).to_pylist() for c in self.references])
        extra = {key: _grouped([table.column(c).to_pylist() for c in cols]) for key, cols in self.extra.items()}
        return predictions, references, extra


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


def _names(value: str | Sequence[str], what: str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"movers.integrations.ray.score: `{what}` must be a column name or a list of them, got "
                        f"{value!r}.")
    return names


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
        return score_call(self.spec, predictions, references, extra, **self.options)

    def scored(self, table: pa.Table, totals: list[Any], size: int | None = None) -> Any:
        """The metric's result on `table` with the call-level statistics `totals`."""
        second = _SecondPass(totals, size)
        with use_scope(second), warnings.catch_warnings():
            if table.num_rows == 1:
                warnings.simplefilter("ignore")  # one row scored for corpus outputs: no warning about it
            second.begin(0)
            return self.call(table)


_WORKERS: dict[bytes, _StatisticsWorker] = {}


def _first_pass(table: pa.Table, key: bytes) -> pa.Table:
    """The statistics pass as Ray tasks (statistics that need no encoder): a worker process keeps the metric
    and its tokenizer for its next block of the same call (and forgets an earlier call's)."""
    worker = _WORKERS.get(key)
    if worker is None:
        _WORKERS.clear()
        worker = _WORKERS[key] = _StatisticsWorker(*pickle.loads(key))
    return worker(table)


class _Statistics(_FirstPass):
    """The first pass of one block: records its sums, and the consecutive runs a metric asks for (batch
    centring); the metric goes on to its signature without scoring."""

    multiple = 1
    signature_only = True

    def part(self, n: int, *, multiple: int = 1) -> range:
        self.multiple = max(self.multiple, multiple)
        return range(n)

    def statistics_done(self) -> None:
        pass


class _StatisticsWorker(_Worker):
    """One block's partial statistics, signature, rows and references per row, as a one-row table: the block
    is read `block_size` rows at a time (:func:`score` already cuts blocks to that size; this keeps the bound
    whatever block arrives) and the parts' sums added here, so memory is bounded by `block_size` and the driver
    gets one partial per block."""

    def __init__(self, spec: MetricSpec, options: dict[str, Any], columns: _Columns, threads: int | None,
                 block_size: int) -> None:
        super().__init__(spec, options, columns, threads)
        self.block_size = block_size

    def __call__(self, table: pa.Table) -> pa.Table:
        merged = None
        for start in range(0, table.num_rows, self.block_size):
            merged = _merge(merged, self._partial(table.slice(start, self.block_size)))
        return pa.table({"partial": pa.array([] if merged is None else [pickle.dumps(merged)], pa.binary())})

    def _partial(self, table: pa.Table) -> dict[str, Any]:
        first = _Statistics()
        predictions, references, extra = self.columns.read(table)
        with use_scope(first), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings come from the scoring pass
            first.begin()
            signature = score_call(self.spec, predictions, references, extra, **self.options).signature
        counts = [len(r) for r in references]
        index = self.columns.index
        positions = table.column(index).to_pylist() if index is not None else []
        return {"signature": signature, "totals": first.totals, "asked": first.asked,
                "multiple": first.multiple, "n": table.num_rows,
                "nrefs": (min(counts, default=0), max(counts, default=0)),
                "index": (min(positions), max(positions), sum(positions)) if positions else None}


def _merge(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """Two blocks' partial statistics added up (any order: sums of ints, Counters, float64 tensors and exact
    sums)."""
    if a is None:
        return b
    index = a["index"] if b["index"] is None else b["index"] if a["index"] is None else (
        min(a["index"][0], b["index"][0]), max(a["index"][1], b["index"][1]), a["index"][2] + b["index"][2])
    totals = add_totals(a["totals"], b["totals"]) if a["totals"] and b["totals"] else a["totals"] or b["totals"]
    return {"signature": a["signature"], "totals": totals, "asked": a["asked"] or b["asked"],
            "multiple": max(a["multiple"], b["multiple"]), "n": a["n"] + b["n"],
            "nrefs": (min(a["nrefs"][0], b["nrefs"][0]), max(a["nrefs"][1], b["nrefs"][1])), "index": index}


class _ScoringActor(_Worker):
    """The scoring pass: each batch (or each run of consecutive rows) scored with the reduced statistics."""

    def __init__(self, spec: MetricSpec, options: dict[str, Any], columns: _Columns, threads: int | None,
                 totals: list[Any], size: int, column: str, multiple: int) -> None:
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
                    raise ValueError(f"movers.integrations.ray.score: `index` column {index!r} must number the rows "
                                     f"0..{self.size - 1} once each; the run starting at {start} holds positions "
                                     f"{run[:8]}{'...' if len(run) > 8 else ''}.")
        result = self.scored(table, self.totals, self.size)
        return table.append_column(self.column, pa.array([float(s) for s in result.scores], pa.float64()))


def _mean(ds: Any, column: str) -> float:
    """The mean of a float column: each block's exact sum (a task per block, in a module that imports no model
    code), added on the driver; the same bits in any block order."""
    total, n = ExactSum(), 0
    sums = ds.select_columns([column]).map_batches(column_sum, batch_size=None, batch_format="pyarrow",
                                                   fn_args=(column,))
    for batch in sums.iter_batches(batch_size=None, batch_format="pyarrow"):
        for units, special, count in zip(*(batch.column(c).to_pylist() for c in ("units", "special", "n")),
                                         strict=True):
            total, n = total + ExactSum(int(units), special), n + count
    return float(total) / n if n else math.nan


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
            (TWMD's default), whose runs of consecutive rows Ray's unordered blocks do not keep.
        block_size: Rows per block and per metric call in both passes (the data set is cut into blocks of at most
            this many rows, so every actor of the pool gets some; memory grows with it, no score depends on it).
        concurrency: Actors (and statistics tasks at once) per pass: Ray's ``map_batches`` argument, an int or
            (min, max); None: Ray's autoscaling pool. Leave CPUs for the tasks that read the data set: a pool
            that holds every CPU of the cluster waits for reads that can never be scheduled.
        num_cpus, num_gpus: Per actor; torch runs ``num_cpus`` threads in each.
        **options: The metric's options (``idf=True``, ``centering="corpus"``, ...). The metric's extra
            inputs (ΔBLEU's ``reference_weights``) name columns, shaped as `reference`.
    Raises:
        ValueError: A missing column, a bad option (the metric's own message), ``baseline="fit"``,
            ``return_plans`` or batch centring without `index`.
    """
    spec = registry.get(metric)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"movers.integrations.ray.score: `block_size` must be a positive int, got {block_size!r}.")
    extra_columns = {key: _names(options.pop(key), key) for key in spec.extra_inputs if key in options}
    columns = _Columns(prediction, _names(reference, "reference"), extra_columns, index)
    for key, reason in _REFUSED.items():
        if options.get(key):
            raise ValueError(f"{spec.slug}: {key} is refused on Ray: {reason}.")
    o = make_options(spec, options)
    checked_options(spec, options)
    if getattr(o, "baseline", None) == "fit":
        raise ValueError(f"{spec.slug}: baseline='fit' is fitted on random pairs of the whole call's texts, a pairing "
                         f"Ray's blocks cannot make without a shuffle of every row; fit it once (a call with "
                         f"baseline='fit' gives extra['baseline']) and pass that number, or baseline='bundled'.")
    names = ds.schema().names
    wanted = [columns.prediction, *columns.references, *(c for cols in extra_columns.values() for c in cols)]
    missing = [c for c in (*wanted, *([index] if index else [])) if c not in names]
    if missing:
        raise ValueError(f"movers.integrations.ray.score: the data set has no column {missing[0]!r}; its columns "
                         f"are {names}.")
    if spec.slug in names:
        raise ValueError(f"movers.integrations.ray.score: the data set already has a column {spec.slug!r}, the "
                         f"name of the score column; rename it first.")
    multiple = o.centering_batch if getattr(o, "centering", None) == "batch" else 1
    if multiple > 1 and index is None:
        raise ValueError(f"{spec.slug}: centering='batch' averages runs of {multiple} consecutive rows of the "
                         f"input, and a Ray dataset keeps no row order (its blocks run and return in any order); "
                         f"pass index=<a column with each row's position 0, 1, ...>, or use centering='corpus' "
                         f"or a fitted table.")
    threads = max(1, int(num_cpus)) if num_cpus else None
    # Ray Data restarts a pool's actor whose process dies and retries the batches it held (max_restarts and
    # max_task_retries default to -1 for actor pools), and retries a task whose worker dies (max_retries -1);
    # a batch that raises fails the run with its error
    pool = ray.data.ActorPoolStrategy(size=concurrency) if isinstance(concurrency, int) else \
        ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1]) if concurrency else \
        ray.data.ActorPoolStrategy()
    actor = {"batch_format": "pyarrow", "compute": pool, "num_cpus": num_cpus, "num_gpus": num_gpus}
    common = (spec, dict(options), columns, threads)

    # Blocks of at most `block_size` rows (Ray's streaming repartition: blocks split and combined as they stream,
    # no shuffle). A reader may return a whole data set as one block (Ray's Parquet reader does, up to 128 MiB),
    # and a block goes to one task or actor whole: without this, one actor of the pool scores every row while
    # the others wait.
    ds = ds.repartition(target_num_rows_per_block=block_size)
    # the statistics pass, a partial per block; only corpus centring embeds texts there (an actor pool then,
    # holding the encoder for the pass); the others read texts with a tokenizer, in plain tasks on CPUs
    statistics = (*common, block_size)
    if getattr(o, "centering", None) == "corpus":
        first = ds.map_batches(_StatisticsWorker, batch_size=None, fn_constructor_args=statistics, **actor)
    else:
        tasks = concurrency if isinstance(concurrency, int) else concurrency[1] if concurrency else None
        first = ds.map_batches(_first_pass, batch_size=None, fn_args=(pickle.dumps(statistics),),
                               batch_format="pyarrow", concurrency=tasks)
    merged: dict[str, Any] | None = None
    for batch in first.iter_batches(batch_size=None, batch_format="pyarrow"):
        for blob in batch.column("partial").to_pylist():
            merged = _merge(merged, pickle.loads(blob))
    if merged is None:
        raise ValueError("movers.integrations.ray.score: the data set is empty; expected at least one row.")
    size, multiple = merged["n"], max(multiple, merged["multiple"])
    totals = merged["totals"] if merged["asked"] else []
    if multiple > 1:
        low, high, total = merged["index"]
        if (low, high, total) != (0, size - 1, size * (size - 1) // 2):
            raise ValueError(f"{spec.slug}: `index` column {index!r} must number the {size} rows 0..{size - 1} once "
                             f"each; it holds values from {low} to {high}.")
    scoring = (*common, totals, size, spec.slug, multiple)
    if multiple > 1:
        # hash-partitioned by run: every block holds whole runs of `multiple` consecutive positions
        run = f"__movers_run_{spec.slug}"
        keyed = ds.with_column(run, ray.data.expressions.col(str(index)) // multiple)
        blocks = max(1, -(-size // block_size))
        rows = keyed.repartition(blocks, keys=[run]).drop_columns([run]).map_batches(
            _ScoringActor, batch_size=None, fn_constructor_args=scoring, **actor)
    else:
        rows = ds.map_batches(_ScoringActor, batch_size=block_size, fn_constructor_args=scoring, **actor)
    signature = merged["signature"]
    nrefs = merged["nrefs"]
    if signature.get("nrefs") is not None:  # the whole data set's, as one call's
        signature = signature.set("nrefs", nrefs[0] if nrefs[0] == nrefs[1] else "var")
    result = RayScores(rows=rows, column=spec.slug, signature=signature)
    if not spec.corpus_from_segments:  # a corpus statistic from the summed statistics: one row scored with them
        sample = ds.limit(1).take_batch(1, batch_format="pyarrow")
        whole = _Worker(spec, dict(options), columns, None).scored(sample, totals, size)  # the driver's threads kept
        per_segment = set(spec.per_segment_outputs())
        result._score = whole.score
        result.extra = {k: v for k, v in whole.extra.items() if k not in per_segment and k != "empty_predictions"}
    return result
