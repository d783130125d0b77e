"""A file of human judgments for ``movers.correlate``: read (JSON Lines, CSV, TSV, Parquet, or records in memory)
and checked as a whole before any metric scores, every problem named by its line (or row) and field.

One record per judged output: the output (``prediction``, or ``hypothesis`` as WMT's files name it), its
references (``references``, a list, or ``reference``), a human score (``human`` or another field), and where the
level needs them its ``system`` and its input (a document or source item); any field can group the records
(``lp``). A field name with dots also reaches into nested objects (``human.Fluency``).

A label (a group, a system, an input) is a field's value; several fields give a tuple of values, never a joined
text, and :func:`label_text` writes it (one field: its value; several: a JSON array). A number written as text (a
CSV or TSV cell) is read only in the form :data:`DECIMAL` describes.
"""
from __future__ import annotations

import csv
import decimal
import io
import json
import math
import os
import re
import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..core.agreement import LEVELS, MIN_POINTS, Layout
from ..core.validation import check_text, max_text_chars, short_repr, universal

__all__ = ["Judgments", "read_judgments", "read_records", "number", "label_text", "read_labels", "Label", "HUMAN",
           "SYSTEM", "PREDICTION_FIELDS", "REFERENCE_FIELDS", "FORMATS", "DECIMAL"]

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
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number written as text (a CSV or TSV cell, white space around it aside): ASCII digits with an optional sign,
decimal point and exponent (``4``, ``-0.5``, ``+3``, ``.5``, ``2e-3``), as JSON and CSV writers write numbers.
Digit separators (``1_000``, ``1,000``, ``1 000``), a decimal comma, ``nan``, ``inf`` and other scripts' digits are
refused, not guessed; so is a number beyond the float range (``1e400``)."""
FLOAT_MAX = sys.float_info.max
_MISSING = object()
Label = str | tuple[str, ...]
"""A record's label: a field's value as text (one field), or a tuple of them (several)."""


class _Beyond:
    """A JSON number beyond the float range (``1e400``, a 401-digit integer), kept as the text the file has."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        body = self.text.lstrip("+-")
        unit = "digits" if body.isdigit() else "characters"
        return self.text if len(self.text) <= 24 else f"{self.text[:12]}... ({len(body):,} {unit})"


class _Duplicate(Exception):
    """A key that appears twice in one JSON object."""


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
    layout: Layout                 # labels: a text per record, or a tuple of texts with several fields

    def where(self, i: int) -> str:
        """Where record `i` is: ``judgments.jsonl, line 3``."""
        return f"{self.source}, {self.places[i]}"

    def group_names(self) -> list[str] | None:
        """Each record's group as :func:`label_text` writes it (the names of the results' groups); None without
        groups."""
        return None if self.layout.groups is None else [label_text(cast(Label, g)) for g in self.layout.groups]

    def core_layout(self) -> Layout:
        """The layout with every label written as text (:func:`label_text`): distinct labels stay distinct, and
        one field's labels are their values, so the groups sort (and resample) as their values do."""
        def names(labels: Sequence[Hashable] | None) -> list[str] | None:  # the reader's labels: Label
            return None if labels is None else [label_text(cast(Label, x)) for x in labels]

        return Layout(self.level, names(self.layout.groups), names(self.layout.systems), names(self.layout.inputs))

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
    """`value` as a finite float; with `text` (a CSV or TSV cell) its text is read as :data:`DECIMAL` says, else
    (JSON, Parquet, records) it must be a number: an integer or a decimal (a Parquet decimal column) is read as the
    float nearest to it (a 400-digit one is beyond the float range and refused). An absent or null value (an empty
    cell) gives NaN when `missing` is None, else an error ending with `missing` (a hint)."""
    if value is _MISSING or value is None or (text and isinstance(value, str) and not value.strip()):
        if missing is None:
            return float("nan")
        raise ValueError(f"{what} is missing{missing}.")
    beyond = f"{what} is beyond the range of a float (±{FLOAT_MAX:.4g})"
    if text and isinstance(value, str):
        if not DECIMAL.fullmatch(value.strip()):
            raise ValueError(f"{what} must be a finite number, got {short_repr(value)}{_not_decimal(value.strip())}.")
        parsed = float(value)
        if not math.isfinite(parsed):
            raise ValueError(f"{beyond}, got {_Beyond(value.strip())!r}.")
        return parsed
    if isinstance(value, _Beyond):
        raise ValueError(f"{beyond}, got {value!r}.")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating, decimal.Decimal)):
        raise ValueError(f"{what} must be a finite number, got {short_repr(value)}.")
    if isinstance(value, decimal.Decimal):  # a Parquet decimal column (an SQL export's NUMERIC)
        if not value.is_finite():
            raise ValueError(f"{what} must be a finite number, got {short_repr(value)}.")
        if not math.isfinite(float(value)):
            raise ValueError(f"{beyond}, got {value:.4e}.")
    try:
        parsed = float(value)
    except OverflowError:  # a Python int of more than 308 digits (str() refuses those of more than 4,300)
        size = abs(int(value))
        digits = int(size.bit_length() * math.log10(2)) + 1
        digits -= 10 ** (digits - 1) > size
        raise ValueError(f"{beyond}, got an integer of {digits:,} digits.") from None
    if not math.isfinite(parsed):
        raise ValueError(f"{what} must be a finite number, got {short_repr(value)}.")
    return parsed


def _not_decimal(cell: str) -> str:
    """Why a cell is not a number :data:`DECIMAL` reads, where a likely reason shows."""
    if cell.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return " (not a finite number)"
    if re.fullmatch(r"[+-]?[0-9][0-9_,' .]*", cell) and re.search(r"[0-9][_,' ][0-9]", cell):
        return (" (digit separators and decimal commas are not read: write 1000 for a thousand and 1.5 for one and "
                "a half)")
    if any(ch.isdigit() and not "0" <= ch <= "9" for ch in cell):
        return " (digits other than 0-9 are not read)"
    return ""


def label_text(label: Label) -> str:
    """A label as results and messages write it: one field's value as it is; several fields' values as a JSON
    array (``["wmt21", "de-en"]``), so that no two labels are written alike."""
    return label if isinstance(label, str) else json.dumps(list(label), ensure_ascii=False)


def _decoded(data: bytes, name: str) -> str:
    """UTF-8 text (a byte-order mark dropped) with ``\\r\\n`` and ``\\r`` line ends read as ``\\n``; a NUL byte
    (a UTF-16 or binary file) is an error naming its line."""
    try:
        text = universal(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        line = universal(data[:e.start]).count(b"\n") + 1
        raise ValueError(f"{name}, line {line}: not UTF-8 text ({e.reason} at byte {e.start}).") from None
    nul = text.find("\0")
    if nul >= 0:
        raise ValueError(f"{name}, line {text.count(chr(10), 0, nul) + 1}: a NUL character; a judgments file is "
                         f"UTF-8 text (a UTF-16 file? save it as UTF-8).")
    return text


def _stdin() -> bytes:
    """Standard input's bytes; closed or unreadable standard input is an error saying so."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise ValueError(f"{STDIN}: standard input is closed; pipe the JSON Lines in (movers correlate - ... < "
                         f"FILE) or name the file.")
    try:
        buffer = getattr(stream, "buffer", None)
        return buffer.read() if buffer is not None else stream.read().encode("utf-8", "surrogatepass")
    except (OSError, ValueError) as e:
        raise ValueError(f"{STDIN}: standard input cannot be read ({getattr(e, 'strerror', None) or e}).") from None


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
        return _json_lines(STDIN, _stdin())
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"judgments file {str(path)!r} does not exist." if not path.exists() else
                         f"judgments file {str(path)!r} is not a regular file.")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path.name}: unknown format {path.suffix!r}; a judgments file is one of "
                         f"{sorted(FORMATS)} (or '-': JSON Lines on standard input).")
    if kind == "parquet":
        return _parquet(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"judgments file {str(path)!r} cannot be read ({e.strerror or e}).") from None
    if kind == "jsonl":
        return _json_lines(path.name, data)
    return _delimited(path.name, _decoded(data, path.name), "," if kind == "csv" else "\t")


def _parquet(path: Path) -> tuple[str, list[Any], list[str]]:
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(path)
        twice = _twice(file.schema_arrow.names)
        if twice is None:
            rows = file.read().to_pylist()
    except Exception as e:  # pyarrow's own errors (not a Parquet file, a broken footer)
        raise ValueError(f"{path.name}: not a readable Parquet file ({e}).") from None
    if twice is not None:
        raise ValueError(f"{path.name}: column `{twice}` appears twice; give each column its own name.")
    return path.name, rows, [f"row {i}" for i in range(1, len(rows) + 1)]


def _twice(names: Sequence[str]) -> str | None:
    """The first name (not empty) that `names` holds twice."""
    seen: set[str] = set()
    for x in names:
        if x in seen and x != "":
            return x
        seen.add(x)
    return None


def _delimited(name: str, text: str, delimiter: str) -> tuple[str, list[Any], list[str]]:
    """A CSV or TSV file as records (the header's names -> cells), read as RFC 4180 has it (``strict``: a quote
    that never closes is an error, not the rest of the file in one cell). A row is named by the line it starts on;
    a row with more or fewer cells than the header has columns, a column name given twice and a cell longer than
    the text limit (:func:`~movers.core.validation.max_text_chars`; the `references` cell, a list, is checked
    text by text) are errors naming the line and the field."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    old = csv.field_size_limit()
    # the whole file is in memory already: csv's own cap (131,072) would only refuse cells below the text limit
    csv.field_size_limit(max(old, min(len(text) + 1, 2**31 - 1)))
    records: list[Any] = []
    places: list[str] = []
    limit = max_text_chars()
    try:
        header: list[str] | None = None
        end = 0
        while True:
            start = end + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                raise ValueError(f"{name}, line {start}: not valid {'CSV' if delimiter == ',' else 'TSV'} ({e}; a "
                                 f"cell with a quote must be quoted whole, its quotes doubled: \"say \"\"hi\"\"\")."
                                 ) from None
            end = reader.line_num
            if not row:  # a blank line
                continue
            if header is None:
                header = row
                twice = _twice(header)
                if twice is not None:
                    columns = [str(k + 1) for k, x in enumerate(header) if x == twice]
                    raise ValueError(f"{name}, line {start}: column `{twice}` appears twice (columns "
                                     f"{' and '.join(columns)}); give each column its own name.")
                continue
            if len(row) != len(header):
                more = "more" if len(row) > len(header) else "fewer"
                raise ValueError(f"{name}, line {start}: {len(row)} cells, {more} than the header's {len(header)} "
                                 f"columns ({', '.join(header)}); a cell with the delimiter in it must be quoted.")
            for column, cell in zip(header, row, strict=True):
                if len(cell) > limit and column != REFERENCE_FIELDS[0]:
                    check_text(f"{name}, line {start}", column, cell)
            records.append(dict(zip(header, row, strict=True)))
            places.append(f"line {start}")
    finally:
        csv.field_size_limit(old)
    return name, records, places


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (``json``'s ``object_pairs_hook``)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _json_float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _Beyond(text)


def _json_int(text: str) -> Any:
    if len(text.lstrip("-")) <= 308:  # below 1e308: an int, whose float is finite
        return int(text)
    return _Beyond(text) if not math.isfinite(float(text)) else int(text)


def _json_lines(name: str, data: bytes) -> tuple[str, list[Any], list[str]]:
    """One JSON value per non-blank line; a line that is not JSON, or an object with a key twice, is an error
    naming it. A number beyond the float range is kept as its text (:class:`_Beyond`), refused where it is used."""
    records, places = [], []
    # not splitlines: U+2028 inside a text is no line end
    for number_, line in enumerate(_decoded(data, name).split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line, object_pairs_hook=_object, parse_float=_json_float,
                                      parse_int=_json_int))
        except json.JSONDecodeError as e:
            raise ValueError(f"{name}, line {number_}: not valid JSON ({e.msg} at column {e.colno}).") from None
        except _Duplicate as e:
            raise ValueError(f"{name}, line {number_}: key {e.args[0]!r} appears twice in one object (JSON readers "
                             f"keep one of the two silently); write it once.") from None
        except RecursionError:
            raise ValueError(f"{name}, line {number_}: not valid JSON here (nested too deeply).") from None
        places.append(f"line {number_}")
    return name, records, places


def _one_of(record: Mapping[str, Any], names: Sequence[str], where: str) -> str | None:
    """The one field of `names` that the record has; both is an error (which would count?)."""
    present = [f for f in names if field(record, f) is not _MISSING]
    if len(present) > 1:
        raise ValueError(f"{where}: the record has both `{present[0]}` and `{present[1]}`; keep one of them.")
    return present[0] if present else None


def _texts(record: Mapping[str, Any], where: str, text_cells: bool) -> tuple[str, list[str]]:
    """The record's output and references, checked: in a CSV or TSV cell (`text_cells`) `references` is a JSON
    list of texts; elsewhere a text is one reference, whatever its first character."""
    name = _one_of(record, PREDICTION_FIELDS, where)
    if name is None:
        raise ValueError(f"{where}: the record has no prediction (field `prediction` or `hypothesis`); its fields "
                         f"are {short_repr(sorted(map(str, record)))}.")
    prediction = record[name]
    if not isinstance(prediction, str):
        raise ValueError(f"{where}: field `{name}` must be a text, got {short_repr(prediction)}.")
    check_text(where, name, prediction)
    ref_name = _one_of(record, REFERENCE_FIELDS, where)
    if ref_name is None:
        raise ValueError(f"{where}: the record has no reference (field `references`, a list, or `reference`).")
    refs = record[ref_name]
    if text_cells and ref_name == REFERENCE_FIELDS[0]:  # a CSV or TSV cell: a JSON list of texts
        refs = _json_list(refs, where)
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


def _json_list(cell: str, where: str) -> Any:
    """A CSV or TSV `references` cell: a JSON list of texts (``["ref one", "ref two"]``)."""
    expected = (f"{where}: field `references` in a CSV or TSV file must be a JSON list of texts "
                f"([\"first reference\", \"second reference\"]), got {short_repr(cell)}")
    try:
        refs = json.loads(cell, object_pairs_hook=_object, parse_float=_json_float, parse_int=_json_int)
    except (json.JSONDecodeError, _Duplicate, RecursionError):
        refs = None
    if not isinstance(refs, list):
        raise ValueError(f"{expected}; a column `reference` holds one reference as plain text.")
    return refs


def _label(value: Any) -> str | None:
    """A field's value as a label's text: a text (not blank), an integer, a finite number or true/false, as the
    file writes it; None for anything else."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return str(value)
    return None


def read_labels(records: Sequence[Any], fields: Sequence[str], where: Any, what: str) -> list[Label] | None:
    """Each record's label of `fields` (the value's text; a tuple of them for several fields), or None without
    fields; absent, null, blank or not a scalar (a list, an object, NaN) is an error naming the field."""
    if not fields:
        return None
    out: list[Label] = []
    for i, record in enumerate(records):
        parts = []
        for name in fields:
            value = field(record, name)
            text = _label(value)
            if text is None:
                shown = "missing" if value is _MISSING or value is None else \
                    f"not a label (a text, a number or true/false): {short_repr(value)}"
                raise ValueError(f"{where(i)}: field `{name}` ({what}) is {shown}.")
            parts.append(text)
        out.append(parts[0] if len(parts) == 1 else tuple(parts))
    return out


def read_judgments(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]], *, human: str = HUMAN,
                   level: str = LEVELS[0], group_by: str | Sequence[str] | None = None,
                   input_field: str | Sequence[str] | None = None, skip_missing: bool = False) -> Judgments:
    """Read and check a judgments file (or records) for one human score at one level.

    Raises:
        ValueError: Naming the file, the line (or row, or record; 1-based) and the field: a file that is not UTF-8
            JSON Lines, CSV, TSV or Parquet as :func:`read_records` reads them (a key or column twice, a ragged
            row, a cell over the text limit); a record that is not an object, without a prediction, a reference
            or a human score (unless `skip_missing`), with two of them, a score that is not a finite number
            (:func:`number`), a group, system or input without a label; and a group (or at the summary level an
            input) with fewer than :data:`~movers.core.agreement.MIN_POINTS` units, or whose human scores are all
            equal. An empty or repeated field name in `human`, `group_by` or `input_field`, before the file is
            read.
    """
    if level not in LEVELS:
        raise ValueError(f"correlate: unknown level {level!r}; choose one of {list(LEVELS)}.")
    if not isinstance(human, str) or not human.strip():
        raise ValueError(f"correlate: `human` (--human) must name the field of the human score, got "
                         f"{short_repr(human)}.")
    group_fields = _fields(group_by, "group_by")
    input_fields = _fields(input_field, "input_field")
    name, records, places = read_records(source)
    if not records:
        raise ValueError(f"{name}: no records; a judgments file has one record per judged output.")

    def where(i: int) -> str:
        return f"{name}, {places[i]}"

    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            array = " (a JSON array of records? write one record per line: JSON Lines)" if isinstance(
                record, list) and record and isinstance(record[0], Mapping) else ""
            raise ValueError(f"{where(i)}: a record must be an object with fields, got {short_repr(record)}{array}.")
    named = [*PREDICTION_FIELDS, *REFERENCE_FIELDS, human, *group_fields, *input_fields]
    _spaced(records[0], [*named, *([SYSTEM] if level == "system" else [])], where(0))
    text = FORMATS.get(Path(name).suffix.lower()) in ("csv", "tsv")
    texts = [_texts(r, where(i), text) for i, r in enumerate(records)]
    hint = "; pass skip_missing=True (--skip-missing) to leave such records out" if not skip_missing else ""
    scores = np.array([number(field(r, human), f"{where(i)}: field `{human}` (the human score)",
                              missing=None if skip_missing else hint, text=text) for i, r in enumerate(records)])
    if level != "segment" and not input_fields:
        raise ValueError(f"correlate: the {level} level resamples inputs (documents, source items): name the field "
                         f"that says which input each output is for (input_field, --input-field FIELD); the first "
                         f"record's fields are {sorted(records[0])}.")
    groups = read_labels(records, group_fields, where, "the group")
    systems = read_labels(records, [SYSTEM], where, "the system") if level == "system" else None
    inputs = read_labels(records, input_fields, where, "the input") if level != "segment" else None
    layout = Layout(level, groups, systems, inputs)  # labels: text or tuples of texts
    j = Judgments(name, text, records, places, [p for p, _ in texts], [r for _, r in texts], scores, human, level,
                  tuple(group_fields), tuple(input_fields), layout)
    _check_points(j.core_layout(), scores, where, group_fields, input_fields, human)
    return j


def _spaced(record: Mapping[str, Any], names: Sequence[str], where: str) -> None:
    """A field the record lacks under its name but has with white space around it (a CSV header ``a, b``) is an
    error saying so, rather than "missing"."""
    for want in names:
        if field(record, want) is _MISSING:
            near = next((k for k in record if isinstance(k, str) and k != want and k.strip() == want), None)
            if near is not None:
                raise ValueError(f"{where}: the record has no field `{want}` but has {near!r}: white space around a "
                                 f"field's name counts; remove it.")


def _fields(spec: str | Sequence[str] | None, arg: str) -> list[str]:
    """The field names of `spec` (``"year,lp"`` or a list); an empty name, one named twice or a name that is not
    a text is an error naming `arg`."""
    if spec is None:
        return []
    option = f"`{arg}` (--{arg.replace('_', '-')})"
    if isinstance(spec, str):
        parts = spec.split(",")
    elif isinstance(spec, Sequence) and all(isinstance(x, str) for x in spec):
        parts = list(spec)
    else:
        raise ValueError(f"correlate: {option} must be a field name, names joined by commas or a list of names, "
                         f"got {short_repr(spec)}.")
    names = [x.strip() for x in parts]
    if not names or not all(names):
        raise ValueError(f"correlate: {option} {short_repr(spec)} names an empty field; name each field once, "
                         f"joined by commas (year,lp).")
    twice = _twice(names)
    if twice is not None:
        raise ValueError(f"correlate: {option} names the field `{twice}` twice.")
    return names


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
            units, values, noun, rated_only = len(means), np.array(list(means.values())), "system", ""
        else:
            units, values, noun, rated_only = len(idx), human[idx], "record", " with a human score"
        if units < MIN_POINTS:
            raise ValueError(f"{first}: {named} has {units} {noun}{'' if units == 1 else 's'}{rated_only}; a "
                             f"correlation needs at least {MIN_POINTS}.")
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
                                     f"output{'' if len(members) == 1 else 's'} with a human score; the summary level "
                                     f"correlates an input's outputs and needs at least {MIN_POINTS}.")
                varied = varied or np.ptp(human[members]) > 0
            if not varied:
                raise ValueError(f"{first}: the human scores (field `{human_field}`) are equal within every input "
                                 f"of {named}: no summary-level correlation can be computed there.")
