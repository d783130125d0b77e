"""A file of human judgments for ``movers.correlate``: read (JSON Lines, CSV, TSV, Parquet, or records in memory)
and checked as a whole before any metric scores, every problem named by its line (or row) and field.

One record per judged output: the output (``prediction``, or ``hypothesis`` as WMT's files name it), its
references (``references``, a list, or ``reference``), a human score (``human`` or another field), and where the
level needs them its ``system`` and its input (a document or source item); any field can group the records
(``lp``). A field name with dots also reaches into nested objects (``human.Fluency``).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.agreement import LEVELS, MIN_POINTS, Layout
from ..core.validation import check_text, short_repr, universal

__all__ = ["Judgments", "read_judgments", "read_records", "number", "HUMAN", "SYSTEM", "PREDICTION_FIELDS",
           "REFERENCE_FIELDS", "FORMATS"]

HUMAN = "human"
"""The field of the human score unless another is named."""
SYSTEM = "system"
"""The field naming the system that produced an output (the system level needs it)."""
PREDICTION_FIELDS = ("prediction", "hypothesis")
"""The output's field, the first found: ``prediction`` (evaluate's name) or ``hypothesis`` (WMT's)."""
REFERENCE_FIELDS = ("references", "reference")
"""The references' field, the first found: a list of texts, or one text."""
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv",
           ".parquet": "parquet"}
"""File suffix -> format."""
STDIN = "<stdin>"
"""The name of standard input (``-``) in messages."""
_MISSING = object()


@dataclass(frozen=True)
class Judgments:
    """Checked records: the texts, the human scores (NaN where a record has none and ``skip_missing`` allows
    it), and the layout of the level (groups, systems, inputs)."""

    source: str                    # the file's name, or "records"
    text_cells: bool               # a CSV or TSV file: numbers are written as text
    records: list[Mapping[str, Any]]
    places: list[str]              # per record: "line 3" (JSON Lines, CSV), "row 3" (Parquet), "record 3"
    predictions: list[str]
    references: list[list[str]]
    human: np.ndarray
    human_field: str
    level: str
    group_by: tuple[str, ...]
    input_fields: tuple[str, ...]
    layout: Layout

    def where(self, i: int) -> str:
        """Where record `i` is: ``judgments.jsonl, line 3``."""
        return f"{self.source}, {self.places[i]}"

    def column(self, name: str) -> list[float]:
        """Each record's number in field `name` (a metric's scores computed elsewhere); a record without one, or
        with one that is not a finite number, is an error naming it."""
        return [number(field(r, name), f"{self.where(i)}: field `{name}`", missing="", text=self.text_cells)
                for i, r in enumerate(self.records)]


def field(record: Mapping[str, Any], name: str) -> Any:
    """The value of `name` in `record`: the key itself, else a dotted path into nested objects; a sentinel when
    absent."""
    if name in record:
        return record[name]
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def number(value: Any, what: str, *, missing: str | None, text: bool = False) -> float:
    """`value` as a finite float; with `text` (a CSV or TSV cell) its text is parsed, else (JSON, Parquet, records)
    it must be a number. An absent or null value (an empty cell) gives NaN when `missing` is None, else an error
    ending with `missing` (a hint)."""
    if value is _MISSING or value is None or (text and isinstance(value, str) and not value.strip()):
        if missing is None:
            return float("nan")
        raise ValueError(f"{what} is missing{missing}.")
    parsed = value
    if text and isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            parsed = None
    if isinstance(parsed, bool) or not isinstance(parsed, (int, float, np.integer, np.floating)) or \
            not math.isfinite(float(parsed)):
        raise ValueError(f"{what} must be a finite number, got {short_repr(value)}.")
    return float(parsed)


def _decoded(data: bytes, name: str) -> str:
    """UTF-8 text (a byte-order mark dropped) with ``\\r\\n`` and ``\\r`` line ends read as ``\\n``."""
    try:
        return universal(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        line = universal(data[:e.start]).count(b"\n") + 1
        raise ValueError(f"{name}, line {line}: not UTF-8 text ({e.reason} at byte {e.start}).") from None


def read_records(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]]) -> tuple[str, list[Any], list[str]]:
    """(name, records, place of each record) of a file (by its suffix: :data:`FORMATS`) or of records in memory;
    a CSV or TSV file's name ends in ``.csv`` or ``.tsv``."""
    if not isinstance(source, (str, os.PathLike)):
        if isinstance(source, Mapping) or not isinstance(source, Sequence):
            raise TypeError(f"correlate: `judgments` must be a file path or a list of records (dicts), got "
                            f"{type(source).__name__}.")
        records = list(source)
        return "records", records, [f"record {i}" for i in range(1, len(records) + 1)]
    if str(source) == "-":  # standard input, as JSON Lines
        import sys

        return _json_lines(STDIN, sys.stdin.buffer.read())
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"judgments file {str(path)!r} does not exist." if not path.exists() else
                         f"judgments file {str(path)!r} is not a regular file.")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path.name}: unknown format {path.suffix!r}; a judgments file is one of "
                         f"{sorted(FORMATS)} (or '-': JSON Lines on standard input).")
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as e:  # pyarrow's own errors (not a Parquet file, a broken footer)
            raise ValueError(f"{path.name}: not a readable Parquet file ({e}).") from None
        return path.name, rows, [f"row {i}" for i in range(1, len(rows) + 1)]
    if kind == "jsonl":
        return _json_lines(path.name, path.read_bytes())
    text = _decoded(path.read_bytes(), path.name)
    reader = csv.DictReader(io.StringIO(text), delimiter="," if kind == "csv" else "\t")
    records, places = [], []
    for row in reader:
        if None in row:
            raise ValueError(f"{path.name}, line {reader.line_num}: more cells than the header has columns.")
        records.append(row)
        places.append(f"line {reader.line_num}")
    return path.name, records, places


def _json_lines(name: str, data: bytes) -> tuple[str, list[Any], list[str]]:
    """One JSON value per non-blank line; a line that is not JSON is an error naming it."""
    records, places = [], []
    # not splitlines: U+2028 inside a text is no line end
    for number_, line in enumerate(_decoded(data, name).split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{name}, line {number_}: not valid JSON ({e.msg} at column {e.colno}).") from None
        places.append(f"line {number_}")
    return name, records, places


def _texts(record: Mapping[str, Any], where: str) -> tuple[str, list[str]]:
    """The record's output and references, checked."""
    name = next((f for f in PREDICTION_FIELDS if field(record, f) is not _MISSING), None)
    if name is None:
        raise ValueError(f"{where}: the record has no prediction (field `prediction` or `hypothesis`).")
    prediction = record[name]
    if not isinstance(prediction, str):
        raise ValueError(f"{where}: field `{name}` must be a text, got {short_repr(prediction)}.")
    check_text(where, name, prediction)
    ref_name = next((f for f in REFERENCE_FIELDS if field(record, f) is not _MISSING), None)
    if ref_name is None:
        raise ValueError(f"{where}: the record has no reference (field `references`, a list, or `reference`).")
    refs = record[ref_name]
    if isinstance(refs, str) and ref_name == "references" and refs.lstrip().startswith("["):
        try:  # a CSV cell holding a JSON list
            refs = json.loads(refs)
        except json.JSONDecodeError:
            raise ValueError(f"{where}: field `references` must be a JSON list of texts, got "
                             f"{short_repr(refs)}.") from None
    refs = [refs] if isinstance(refs, str) else refs
    if not isinstance(refs, (list, tuple)) or not refs:
        raise ValueError(f"{where}: field `{ref_name}` must be a text or a non-empty list of texts, got "
                         f"{short_repr(record[ref_name])}.")
    for j, ref in enumerate(refs):
        label = ref_name if len(refs) == 1 and ref_name == "reference" else f"{ref_name}[{j}]"
        if not isinstance(ref, str) or not ref.strip():
            raise ValueError(f"{where}: field `{label}` must be a non-empty text, got {short_repr(ref)}.")
        check_text(where, label, ref)
    return prediction, list(refs)


def _labels(records: list[Any], fields: Sequence[str], where: Any, what: str) -> list[str] | None:
    """Each record's value of `fields` (joined by '.'), or None without fields; absent or null is an error."""
    if not fields:
        return None
    out = []
    for i, record in enumerate(records):
        parts = []
        for name in fields:
            value = field(record, name)
            if value is _MISSING or value is None or isinstance(value, (Mapping, list)) or \
                    (isinstance(value, str) and not value.strip()):
                shown = "missing" if value is _MISSING or value is None else f"not a label: {short_repr(value)}"
                raise ValueError(f"{where(i)}: field `{name}` ({what}) is {shown}.")
            parts.append(str(value))
        out.append(".".join(parts))
    return out


def read_judgments(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]], *, human: str = HUMAN,
                   level: str = LEVELS[0], group_by: str | Sequence[str] | None = None,
                   input_field: str | Sequence[str] | None = None, skip_missing: bool = False) -> Judgments:
    """Read and check a judgments file (or records) for one human score at one level.

    Raises:
        ValueError: Naming the file, the line (or row, or record; 1-based) and the field: a record that is not
            an object, without a prediction, a reference or a human score (unless `skip_missing`), a score that
            is not a finite number, a group, system or input without a label; and a group (or at the summary
            level an input) with fewer than :data:`~movers.core.agreement.MIN_POINTS` units, or whose human
            scores are all equal.
    """
    if level not in LEVELS:
        raise ValueError(f"correlate: unknown level {level!r}; choose one of {list(LEVELS)}.")
    name, records, places = read_records(source)
    if not records:
        raise ValueError(f"{name}: no records; a judgments file has one record per judged output.")

    def where(i: int) -> str:
        return f"{name}, {places[i]}"

    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"{where(i)}: a record must be an object with fields, got {short_repr(record)}.")
    texts = [_texts(r, where(i)) for i, r in enumerate(records)]
    hint = "; pass skip_missing=True (--skip-missing) to leave such records out" if not skip_missing else ""
    text = FORMATS.get(Path(name).suffix.lower()) in ("csv", "tsv")
    scores = np.array([number(field(r, human), f"{where(i)}: field `{human}` (the human score)",
                              missing=None if skip_missing else hint, text=text) for i, r in enumerate(records)])
    group_fields = _fields(group_by)
    input_fields = _fields(input_field)
    if level != "segment" and not input_fields:
        raise ValueError(f"correlate: the {level} level resamples inputs (documents, source items): name the field "
                         f"that says which input each output is for (input_field, --input-field FIELD); the first "
                         f"record's fields are {sorted(records[0])}.")
    groups = _labels(records, group_fields, where, "the group")
    systems = _labels(records, [SYSTEM], where, "the system") if level == "system" else None
    inputs = _labels(records, input_fields, where, "the input") if level != "segment" else None
    layout = Layout(level, groups, systems, inputs)
    _check_points(layout, scores, where, group_fields, input_fields, human)
    return Judgments(name, text, records, places, [p for p, _ in texts], [r for _, r in texts], scores, human, level,
                     tuple(group_fields), tuple(input_fields), layout)


def _fields(spec: str | Sequence[str] | None) -> list[str]:
    if spec is None:
        return []
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    return [p.strip() for p in parts if p.strip()]


def _check_points(layout: Layout, human: np.ndarray, where: Any, group_fields: list[str], input_fields: list[str],
                  human_field: str) -> None:
    """Enough units in every group (and input) for a correlation, and human scores that vary there."""
    n = len(human)
    groups = np.asarray(layout.groups if layout.groups is not None else ["all"] * n)
    rated = ~np.isnan(human)
    by = f" (--group-by {','.join(group_fields)})" if group_fields else ""
    for g in sorted(set(groups.tolist())):
        idx = np.flatnonzero((groups == g) & rated)
        named = f"group {g!r}{by}" if group_fields else "the file"
        first = where(int(np.flatnonzero(groups == g)[0]))
        if layout.level == "system":
            systems = np.asarray(layout.systems)[idx]
            means = {s: human[idx][systems == s].mean() for s in set(systems)}
            units, values, noun = len(means), np.array(list(means.values())), "systems"
        else:
            units, values, noun = len(idx), human[idx], "records with a human score"
        if units < MIN_POINTS:
            raise ValueError(f"{first}: {named} has {units} {noun}; a correlation needs at least {MIN_POINTS}.")
        if np.ptp(values) == 0 and layout.level != "summary":
            raise ValueError(f"{first}: the human scores (field `{human_field}`) of {named} are all equal "
                             f"({values[0]:g}{' per system' if layout.level == 'system' else ''}): no correlation "
                             f"can be computed there.")
        if layout.level == "summary":
            inputs = np.asarray(layout.inputs)
            varied = False
            for j in sorted(set(inputs[groups == g].tolist())):
                members = np.flatnonzero((groups == g) & (inputs == j) & rated)
                if len(members) < MIN_POINTS:
                    at = where(int(np.flatnonzero((groups == g) & (inputs == j))[0]))
                    raise ValueError(f"{at}: input {j!r} (field `{','.join(input_fields)}`) has {len(members)} "
                                     f"outputs with a human score; the summary level correlates an input's outputs "
                                     f"and needs at least {MIN_POINTS}.")
                varied = varied or np.ptp(human[members]) > 0
            if not varied:
                raise ValueError(f"{first}: the human scores (field `{human_field}`) are equal within every input "
                                 f"of {named}: no summary-level correlation can be computed there.")
