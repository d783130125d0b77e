"""``movers score --ray DATA``: score a data set file or folder on a Ray cluster.

Before a cluster is started or joined, the command checks what needs no cluster: the metrics' options and what Ray
refuses (:func:`movers.integrations.ray.checked_call`), and the files, read here the way Ray's readers will read
them (every file problem is one line naming the file and, where it can, the line or row: an empty file, a CSV file
with a header only, bytes that are not UTF-8, a line that is not a JSON object, a column missing, null or of the
wrong type, a column that is a string in some rows and a list in others). A cluster this command starts stays on
this machine (:func:`movers.integrations.ray.local_cluster`); Ray's own INFO and progress lines show with
``--ray-logs`` (and ``--progress``) only.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import metrics as registry
from ..core.validation import short_repr
from .common import UsageError, decoded, render

__all__ = ["run_ray", "data_files"]

_READERS = {".parquet": "read_parquet", ".jsonl": "read_json", ".json": "read_json", ".csv": "read_csv"}


def data_files(path: Path) -> tuple[str, list[Path]]:
    """The Ray reader of `path` (a file, or a folder of files of one format) and its files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    kinds = {_READERS.get(p.suffix.lower()) for p in files} - {None}
    if len(kinds) != 1:
        raise UsageError(f"--ray {str(path)!r}: expected Parquet, JSONL or CSV files (.parquet, .jsonl/.json, .csv), "
                         f"found {sorted(p.suffix for p in files)[:5] or 'no files'}.")
    reader = kinds.pop()
    assert reader is not None
    return reader, [p for p in files if _READERS.get(p.suffix.lower()) == reader]


# ----------------------------------------------------------------------------- the files, as Ray reads them

class _Rows:
    """What each row of the data set must hold, checked value by value: a string prediction (or a list of
    sentences, for a metric that reads documents), references that are strings or lists of strings (the same kind
    in every row of a file, as Ray's readers need) with at least one per row, an int in the index column."""

    def __init__(self, args: argparse.Namespace, documents: bool) -> None:
        self.prediction = args.prediction_column
        self.references = list(args.reference_column or ["reference"])
        self.index = args.index_column
        self.columns = [self.prediction, *self.references, *args.weights_column, *([self.index] if self.index else [])]
        self.documents = documents
        self.kinds: dict[str, tuple[str, str]] = {}  # column -> (kind, where first seen)

    def check(self, row: dict[str, Any], where: str) -> None:
        missing = [c for c in (self.prediction, *([self.index] if self.index else [])) if c not in row]
        if missing:
            raise UsageError(f"{where} has no {missing[0]!r} (its keys: {', '.join(sorted(row)) or 'none'}); every "
                             f"row needs one.")
        value = row[self.prediction]
        if not (isinstance(value, str) or (self.documents and _strings(value))):
            raise UsageError(f"{where}: {self.prediction!r} is {_shown(value)}; expected a string (the prediction"
                             f"{' or a list of its sentences' if self.documents else ''}).")
        given = 0
        for column in self.references:
            value = row.get(column)  # a reference column missing in a row is null there, as Ray reads it
            if value is None:
                continue
            if not (isinstance(value, str) or _strings(value)):
                raise UsageError(f"{where}: {column!r} is {_shown(value)}; expected a string or a list of strings "
                                 f"(the references).")
            self._same_kind(column, "a string" if isinstance(value, str) else "a list", where)
            given += 1 if isinstance(value, str) else len(value)
        if not given:
            raise UsageError(f"{where} has no reference in {', '.join(map(repr, self.references))}; every row needs "
                             f"one.")
        if self.index is not None:
            value = row[self.index]
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"{where}: the index column {self.index!r} is {_shown(value)}; expected each row's "
                                 f"position, an int 0, 1, ...")

    def _same_kind(self, column: str, kind: str, where: str) -> None:
        seen = self.kinds.setdefault(column, (kind, where))
        if seen[0] != kind:
            raise UsageError(f"{where}: {column!r} is {kind}, but {seen[1]} has {seen[0]}; Ray's readers need one "
                             f"type per column: make it a list in every row.")


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _shown(value: Any) -> str:
    """A JSON row's value as the messages quote it (null for None)."""
    return "null" if value is None else short_repr(value)


def _jsonl(path: Path, rows: _Rows) -> None:
    """Every line of a JSONL file: UTF-8, one JSON object, the columns as :class:`_Rows` wants them."""
    n = 0
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            line = decoded(raw, f"--ray file {str(path)!r}", number)
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise UsageError(f"--ray file {str(path)!r}: line {number} is not JSON ({err.msg} at column "
                                 f"{err.colno}); expected one JSON object per line.") from None
            if not isinstance(row, dict):
                raise UsageError(f"--ray file {str(path)!r}: line {number} is a JSON {type(row).__name__}, not an "
                                 f"object; expected one JSON object per line.")
            rows.check(row, f"--ray file {str(path)!r}, line {number}")
            n += 1
    if not n:
        raise UsageError(f"--ray file {str(path)!r} is empty; expected one JSON object per line.")


def _csv(path: Path, rows: _Rows) -> None:
    """A CSV file as Ray's reader types it (pyarrow.csv, types inferred from the first block), read block by
    block: UTF-8, a header and rows, the columns as :class:`_Rows` wants them."""
    import pyarrow as pa
    import pyarrow.csv

    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            decoded(raw, f"--ray file {str(path)!r}", number)
    try:
        reader = pyarrow.csv.open_csv(path)
        _batches(path, reader.schema.names, reader, rows, lambda i: f"line {i + 2}")
    except pa.ArrowInvalid as err:
        first = str(err).splitlines()[0] if str(err) else "unreadable"
        raise UsageError(f"--ray file {str(path)!r} is not a CSV file Arrow can read: {first}") from None


def _parquet(path: Path, rows: _Rows) -> None:
    """A Parquet file, its columns read batch by batch (the others not at all)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        f = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise UsageError(f"--ray file {str(path)!r} is not a Parquet file Arrow can read: "
                         f"{str(err).splitlines()[0] if str(err) else 'unreadable'}") from None
    names = f.schema_arrow.names
    columns = [c for c in dict.fromkeys(rows.columns) if c in names]
    _batches(path, names, f.iter_batches(batch_size=4096, columns=columns), rows, lambda i: f"row {i + 1}")


def _batches(path: Path, names: list[str], batches: Any, rows: _Rows, where: Any) -> None:
    """The rows of Arrow record batches: each checked where its batch's column types and nulls do not settle it
    (a batch of string predictions and string references without nulls, and integer positions, is fine as it is)."""
    import pyarrow as pa

    missing = [c for c in (rows.prediction, *([rows.index] if rows.index else [])) if c not in names]
    if missing or not any(c in names for c in rows.references):
        name = missing[0] if missing else rows.references[0]
        raise UsageError(f"--ray file {str(path)!r} has no column {name!r}; its columns are {names}.")
    n = 0
    for batch in batches:
        settled = all(c in batch.schema.names and not batch.column(c).null_count and
                      (pa.types.is_integer if c == rows.index else pa.types.is_string)(batch.schema.field(c).type)
                      for c in (rows.prediction, *rows.references, *([rows.index] if rows.index else [])))
        if not settled:
            for i, row in enumerate(batch.to_pylist()):
                rows.check(row, f"--ray file {str(path)!r}, {where(n + i)}")
        else:
            for c in rows.references:
                rows.kinds.setdefault(c, ("a string", f"--ray file {str(path)!r}, {where(n)}"))
        n += batch.num_rows
    if not n:
        raise UsageError(f"--ray file {str(path)!r} has {'a header only' if names else 'no rows'}; expected a header "
                         f"and one row per pair." if path.suffix.lower() == ".csv" else
                         f"--ray file {str(path)!r} has no rows.")


def _checked_files(reader: str, files: list[Path], rows: _Rows) -> None:
    check = {"read_json": _jsonl, "read_csv": _csv, "read_parquet": _parquet}[reader]
    for path in files:
        check(path, rows)


# ----------------------------------------------------------------------------- the run

def run_ray(args: argparse.Namespace, slugs: list[str], options: dict[str, dict[str, Any]]) -> int:
    """Score the data set on Ray with each metric; print the corpus results; with --output write per metric
    ``<slug>.parquet`` (a folder of Parquet files: the input columns and the score) and ``<slug>.json`` (the
    corpus score, the signature and the metric's corpus-level outputs, e.g. ΔBLEU's counts)."""
    if args.per_segment or args.confidence or args.paired_bs or args.paired_ar:
        raise UsageError("--ray writes the per-row scores with --output DIR; --per-segment, --confidence and the "
                         "paired tests need every score in one process (score the written Parquet files).")
    path = Path(args.ray)
    if not path.exists():
        raise UsageError(f"--ray {args.ray!r} does not exist.")
    reader, files = data_files(path)
    files = [f.resolve() for f in files]  # read by Ray's workers, whose working folder is not this one
    from ..integrations.ray import checked_call, local_cluster, score  # imports no Ray yet

    calls = {}
    for slug in slugs:  # every refusal that depends on the options alone, before a cluster is started or joined
        spec = registry.get(slug)
        call = dict(options.get(slug, {}))
        if args.weights_column and "reference_weights" in spec.extra_inputs:
            call["reference_weights"] = args.weights_column
        call.update(prediction=args.prediction_column, reference=args.reference_column or "reference",
                    index=args.index_column, concurrency=args.actors)
        try:
            checked_call(slug, **call)
        except (TypeError, ValueError) as err:
            raise UsageError(_in_flags(str(err))) from None
        calls[slug] = call
    _checked_files(reader, files, _Rows(args, any(registry.get(slug).documents for slug in slugs)))
    address = args.address or os.environ.get("RAY_ADDRESS")
    with _native_stderr(shown=args.ray_logs):
        if address:
            if address.split("://")[-1].rpartition(":")[0].strip("[]") in ("127.0.0.1", "localhost", "::1"):
                # a cluster on the loopback (local_cluster's): Ray would otherwise take the address for this
                # machine's network address, where nothing listens (it reads this when imported)
                os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            import ray
            import ray.data

            ray.init(address=address, log_to_driver=args.ray_logs, configure_logging=False)
            ray.data.DataContext.get_current().enable_progress_bars = bool(args.progress)
        else:
            local_cluster(dashboard=args.dashboard, progress=bool(args.progress), logs=args.ray_logs)
            import ray  # after local_cluster: Ray reads on import where a local cluster listens
            import ray.data
        if not args.ray_logs:  # Ray's own log lines (execution plans, its errors before it raises them)
            for name in ("ray", "ray.data"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
        return _scored(args, ray, reader, files, calls, score)


def _in_flags(message: str) -> str:
    """A refusal of the Ray integration in the command's words: its `index=` is ``--index-column NAME``."""
    return message.replace("pass index=", "pass --index-column NAME (index=)")


def _scored(args: argparse.Namespace, ray: Any, reader: str, files: list[Path], calls: dict[str, dict[str, Any]],
            score: Any) -> int:
    results = {}
    try:
        ds = getattr(ray.data, reader)([str(p) for p in files])
        for slug, call in calls.items():
            try:
                result = score(ds, slug, **call)
                if args.output:
                    out = Path(args.output)
                    out.mkdir(parents=True, exist_ok=True)
                    result.write_parquet(str((out / f"{slug}.parquet").resolve()))
                    (out / f"{slug}.json").write_text(json.dumps(result.to_dict(), indent=1, ensure_ascii=False)
                                                      + "\n", encoding="utf-8")
                else:
                    result.score  # noqa: B018  the scoring pass, for the corpus score
            except (TypeError, ValueError) as err:
                raise UsageError(_in_flags(str(err).splitlines()[0])) from None
            except ray.exceptions.RayError as err:  # a failure of Ray's own (a worker, a reader): its first line
                raise UsageError(f"Ray failed: {_first_line(err)}") from None
            results[slug] = result
        sys.stdout.write(render(args, results))
    finally:
        ray.shutdown()
    return 0


@contextlib.contextmanager
def _native_stderr(*, shown: bool) -> Iterator[None]:
    """Unless `shown`, what Ray's C++ core writes to this process's stderr (file descriptor 2) goes nowhere while
    Ray runs: on a healthy run it logs an error-level line for every Ray Data actor pool ("constructor arguments
    in the object store and max_restarts > 0", about the arguments Ray Data itself passes; ray-project/ray#57733).
    Python's ``sys.stderr`` (movers' warnings and its one-line error) still reaches the terminal."""
    if shown:
        yield
        return
    sys.stderr.flush()
    native = os.dup(2)
    saved = sys.stderr
    sys.stderr = open(os.dup(native), "w", encoding=saved.encoding or "utf-8", errors="backslashreplace",  # noqa: SIM115
                      buffering=1)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        os.dup2(native, 2)
        os.close(native)
        sys.stderr = saved


def _first_line(err: BaseException) -> str:
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(getattr(err, "cause", None) or err))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__
