"""movers on Ray Data: score a corpus that no process holds, with the result of one call on all of it.

    >>> import ray, movers.integrations.ray as movers_ray               # doctest: +SKIP
    >>> ds = ray.data.read_parquet("s3://bucket/pairs/")                # columns prediction, reference
    >>> out = movers_ray.score(ds, "moverscore", idf=True)
    >>> out.rows.write_parquet("scored/")                                # every input column + "moverscore"
    >>> out.score, out.signature                                         # those of movers.moverscore(...)

:func:`score` runs the metric in two passes through the scope hooks that :func:`movers.score_stream` and
distributed scoring use, each a ``map_batches`` over pools of actors (one encoder loaded once per actor):

1. **statistics**: each block runs the metric up to the point where it has built its call-level statistics
   (document frequencies for per-call IDF, token sums for corpus centring, ΔBLEU's n-gram sums, kept exactly),
   and Ray reduces the blocks' partial sums (``Dataset.aggregate``) in any order; the reduced statistics are
   those of one call (the sums behind :class:`movers.Idf`, a corpus :class:`movers.Centering`, ΔBLEU's corpus
   counts). The same pass counts rows and references per row.
2. **scoring**: each block is scored with the reduced statistics: ``rows`` (lazy) is the input with one
   column more, named by the metric's slug. The corpus score is reduced from that column (a mean of segment
   scores) or, for ΔBLEU, computed from the summed statistics; the signature is one call's.

Order: a Ray dataset has no row order (blocks run and come back in any order). Only TWMD's batch centring
(and ``centering="batch"`` of any metric) depends on it; it needs ``index=``: a column with each row's position
in the input, and then each run of ``centering_batch`` consecutive positions is grouped
(``groupby(...).map_groups``) and scored together, as one call would.

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
    from ray.data.aggregate import AggregateFnV2
except ImportError as err:  # an optional extra
    raise ImportError("movers.integrations.ray needs Ray Data: pip install 'movers[ray]' "
                      "(or pip install 'ray[data]').") from err

from .. import metrics as registry
from ..core.scope import add_totals, use_scope
from ..core.signature import Signature
from ..core.spec import MetricSpec
from ..pipeline.call import checked_options, make_options
from ..pipeline.call import score as score_call
from ..pipeline.embedding import EmbeddingMetric
from ..pipeline.streaming import _Collected, _FirstPass, _SecondPass

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

class _Statistics(_FirstPass):
    """The first pass of one block; also records the consecutive runs a metric asks for (batch centring)."""

    multiple = 1

    def part(self, n: int, *, multiple: int = 1) -> range:
        self.multiple = max(self.multiple, multiple)
        return range(n)


class _Worker:
    """What both passes' actors share: the metric, its options, the columns; the encoder loaded once."""

    def __init__(self, slug: str, options: dict[str, Any], columns: _Columns, threads: int | None) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.spec = registry.get(slug)
        self.options = options
        self.columns = columns
        if isinstance(self.spec, EmbeddingMetric):  # load the encoder now, once for the actor's life
            self.spec.context(checked_options(self.spec, options))

    def call(self, table: pa.Table) -> Any:
        predictions, references, extra = self.columns.read(table)
        return score_call(self.spec, predictions, references, extra, **self.options)

    def scored(self, table: pa.Table, totals: list[Any], size: int | None = None) -> Any:
        """The metric's result on `table` with the call-level statistics `totals`."""
        second = _SecondPass(totals, size)
        with use_scope(second), warnings.catch_warnings():
            if table.num_rows == 1:
                warnings.simplefilter("ignore")  # one row scored for the signature: no warning about it
            second.begin(0)
            return self.call(table)


_WORKERS: dict[bytes, _StatisticsWorker] = {}


def _first_pass(table: pa.Table, key: bytes) -> pa.Table:
    """The statistics pass runs as Ray tasks: a worker process keeps its metric (and encoder) for the next
    batch and the next call with the same arguments."""
    worker = _WORKERS.get(key)
    if worker is None:
        worker = _WORKERS[key] = _StatisticsWorker(*pickle.loads(key))
    return worker(table)


class _StatisticsWorker(_Worker):
    signature: Signature | None = None

    def __call__(self, table: pa.Table) -> pa.Table:
        first = _Statistics()
        with use_scope(first), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings come from the scoring pass
            first.begin()
            try:
                self.call(table)
            except _Collected:
                pass
        if self.signature is None:  # the signature depends on the options and the data's shape, not the totals
            self.signature = self.scored(table.slice(0, 1), first.totals).signature
        counts = [len(r) for r in self.columns.read(table)[1]]
        index = self.columns.index
        positions = table.column(index).to_pylist() if index is not None else []
        partial = {"signature": self.signature, "totals": first.totals, "asked": first.asked,
                   "multiple": first.multiple, "n": table.num_rows,
                   "nrefs": (min(counts, default=0), max(counts, default=0)),
                   "index": (min(positions), max(positions), math.fsum(positions)) if positions else None}
        return pa.table({"partial": [pickle.dumps(partial)]})


class _Merge(AggregateFnV2):
    """Ray's reduction of the first pass's partial statistics (any order: sums of ints, Counters, float64
    tensors and exact sums)."""

    def __init__(self) -> None:
        super().__init__("statistics", zero_factory=lambda: b"", on="partial", ignore_nulls=True)

    def aggregate_block(self, block: Any) -> bytes:
        acc = b""
        for blob in block.column("partial").to_pylist():
            acc = self.combine(acc, blob)
        return acc

    def combine(self, current: bytes, new: bytes) -> bytes:
        if not current:
            return new
        if not new:
            return current
        a, b = pickle.loads(current), pickle.loads(new)
        index = a["index"] if b["index"] is None else b["index"] if a["index"] is None else (
            min(a["index"][0], b["index"][0]), max(a["index"][1], b["index"][1]), a["index"][2] + b["index"][2])
        totals = add_totals(a["totals"], b["totals"]) if a["totals"] and b["totals"] else a["totals"] or b["totals"]
        return pickle.dumps({
            "signature": a["signature"], "totals": totals, "asked": a["asked"] or b["asked"],
            "multiple": max(a["multiple"], b["multiple"]), "n": a["n"] + b["n"],
            "nrefs": (min(a["nrefs"][0], b["nrefs"][0]), max(a["nrefs"][1], b["nrefs"][1])), "index": index})


class _ScoringActor(_Worker):
    """The scoring pass: each batch (or each run of consecutive rows) scored with the reduced statistics."""

    def __init__(self, slug: str, options: dict[str, Any], columns: _Columns, threads: int | None,
                 totals: list[Any], size: int, column: str, multiple: int) -> None:
        super().__init__(slug, options, columns, threads)
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
    out = ds.aggregate(_ExactMean(column))
    return float(out[f"mean({column})"])


class _ExactMean(AggregateFnV2):
    """The mean of a float column with its sum kept exact (the same bits in any block order)."""

    def __init__(self, column: str) -> None:
        super().__init__(f"mean({column})", zero_factory=lambda: (0, 0), on=column, ignore_nulls=False)
        self.column = column

    def aggregate_block(self, block: Any) -> tuple[int, int]:
        from ..core.scope import ExactSum

        values = block.column(self.column).to_pylist()
        return ExactSum.of(values).units, len(values)

    def combine(self, current: tuple[int, int], new: tuple[int, int]) -> tuple[int, int]:
        return current[0] + new[0], current[1] + new[1]

    def finalize(self, accumulator: tuple[int, int]) -> float:  # type: ignore[override]
        from ..core.scope import ExactSum

        return float(ExactSum(accumulator[0])) / accumulator[1] if accumulator[1] else math.nan


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
        block_size: Rows per actor call (memory grows with it, no score depends on it).
        concurrency: Actors per pass (Ray's ``map_batches`` argument; None: Ray's autoscaling pool).
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
    threads = max(1, int(num_cpus)) if num_cpus else None
    # Ray Data restarts a pool's actor whose process dies and retries the batches it held (max_restarts and
    # max_task_retries default to -1 for actor pools); a batch that raises fails the run with its error
    pool = ray.data.ActorPoolStrategy(size=concurrency) if isinstance(concurrency, int) else \
        ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1]) if concurrency else \
        ray.data.ActorPoolStrategy()
    actor = {"batch_format": "pyarrow", "compute": pool, "num_cpus": num_cpus, "num_gpus": num_gpus}
    common = (spec.slug, dict(options), columns, threads)

    first = ds.map_batches(_first_pass, batch_size=block_size, fn_args=(pickle.dumps(common),),
                           batch_format="pyarrow", num_cpus=num_cpus, num_gpus=num_gpus)
    merged = pickle.loads(first.aggregate(_Merge())["statistics"])
    size, multiple = merged["n"], merged["multiple"]
    totals = merged["totals"] if merged["asked"] else []
    if multiple > 1:
        if index is None:
            raise ValueError(f"{spec.slug}: centering='batch' averages runs of {multiple} consecutive rows of the "
                             f"input, and a Ray dataset keeps no row order (its blocks run and return in any order); "
                             f"pass index=<a column with each row's position 0, 1, ...>, or use centering='corpus' "
                             f"or a fitted table.")
        low, high, total = merged["index"]
        if (low, high, total) != (0, size - 1, size * (size - 1) / 2):
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
        whole = _Worker(*common).scored(sample, totals, size)
        per_segment = set(spec.per_segment_outputs())
        result._score = whole.score
        result.extra = {k: v for k, v in whole.extra.items() if k not in per_segment and k != "empty_predictions"}
    return result
