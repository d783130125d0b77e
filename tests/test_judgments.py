"""A judgments file for ``movers correlate``, read as a hostile file would test it, and the options it takes:
every bad file or option is one sentence naming the line and the field (or the option) and what is expected, never
a traceback, a last-one-wins or a silent guess; group labels of several fields are tuples; ``-l/--lang`` reaches
every metric.

The oracles are outside the code under test: sacreBLEU's own ``sentence_bleu``/``sentence_chrf`` (with the
tokenizer named by hand), scipy's ``pearsonr``, Python's ``float`` on the digits written in the test, and counts
made by hand. No test needs an encoder.
"""
from __future__ import annotations

import csv
import io
import json
import math
import sys

import numpy as np
import pytest
from scipy import stats

import movers
from movers.api.judgments import read_judgments
from movers.cli.correlate import main as command
from movers.core.validation import MAX_TEXT_CHARS

EXACT = 1e-9


def _records(n=12, **extra):
    """`n` records with a human score and a `comet` column drawn from a seeded generator; `extra` adds fields."""
    rng = np.random.default_rng(n)
    human = rng.normal(size=n)
    out = []
    for i in range(n):
        record = {"prediction": f"output number {i}", "references": [f"reference text {i % 5}"],
                  "human": float(human[i]), "comet": float(human[i] + rng.normal())}
        record.update({k: v(i) for k, v in extra.items()})
        out.append(record)
    return out


def _jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _csv(path, rows, delimiter=","):
    """`rows` (lists of cells; the first is the header) written by Python's csv module, quoting as it needs."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter=delimiter).writerows(rows)
    return path


def _table(records, fields=("prediction", "references", "human", "comet")):
    """Records as CSV rows: the header, then each record's cells (references as the JSON list the page asks)."""
    return [list(fields), *([json.dumps(r[f]) if f == "references" else r[f] for f in fields] for r in records)]


def _refused(source, match, **kwargs):
    with pytest.raises(ValueError, match=match):
        movers.correlate(source, "column:comet", resamples=10, **kwargs)


def _cli(argv, capsys):
    """``movers correlate ARGV`` in this process (the command's own error path): (status, stdout, stderr)."""
    status = command(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


# ------------------------------------------------------------------ the four tracebacks, as the command runs them


def test_sacrebleus_options_are_checked_as_sacrebleu_checks_them(tmp_path, capsys):
    path = _jsonl(tmp_path / "j.jsonl", [json.dumps(r) for r in _records()])
    status, out, err = _cli([str(path), "-m", 'sentbleu={"tokenize": "nope"}'], capsys)
    assert status == 2 and out == ""
    from sacrebleu.metrics.bleu import BLEU

    offline = [t for t in BLEU.TOKENIZERS if t not in ("spm", "flores101", "flores200", "spBLEU-1K")]
    assert err == (f"movers correlate: error: metric 'sentbleu={{\"tokenize\": \"nope\"}}': option `tokenize` of "
                   f"sacrebleu.sentence_bleu must be one of {offline}, got 'nope'.\n")


@pytest.mark.parametrize("metric, match", [
    ('sentbleu={"tokenize": "nope"}', r"option `tokenize` of sacrebleu.sentence_bleu must be one of \[.*'13a'"),
    ('sentbleu={"tokenise": "zh"}', r"unknown option 'tokenise' of sacrebleu.sentence_bleu; its options are "
                                    r"smooth_method, smooth_value, lowercase, tokenize, use_effective_order"),
    ('sentbleu={"smooth_method": "nope"}', r"`smooth_method` .* one of \['none', 'floor', 'add-k', 'exp'\]"),
    # sacreBLEU 2.5 and later annotate smooth_value Optional[float], 2.4 float
    ('sentbleu={"smooth_value": "x"}', r"option `smooth_value` .* must be a number( or null)?, got 'x'"),
    ('sentbleu={"smooth_value": -1}', r"option `smooth_value` .* must be >= 0, got -1"),
    ('sentbleu={"lowercase": "yes"}', r"option `lowercase` .* must be true or false, got 'yes'"),
    ('sentbleu={"use_effective_order": 0}', r"option `use_effective_order` .* must be true or false, got 0"),
    ('sentbleu={"tokenize": "flores200"}', r"downloads its model at run time"),
    ('chrf={"char_order": 2.5}', r"option `char_order` of sacrebleu.sentence_chrf must be an integer, got 2.5"),
    ('chrf={"char_order": "6"}', r"option `char_order` .* must be an integer, got '6'"),
    ('chrf={"beta": true}', r"option `beta` .* must be an integer, got True"),
    ('chrf={"word_order": -1}', r"option `word_order` .* must be >= 0, got -1"),
    ('chrf={"tokenize": "zh"}', r"unknown option 'tokenize' of sacrebleu.sentence_chrf; its options are char_order"),
])
def test_every_sacrebleu_option_is_refused_naming_it(metric, match, monkeypatch):
    from movers.api import agreement

    def scored(*args, **kwargs):
        raise AssertionError("a metric scored before its options were refused")

    monkeypatch.setitem(agreement.SACREBLEU, metric.partition("=")[0], scored)
    with pytest.raises(ValueError, match=match):
        movers.correlate(_records(), metric)


def test_a_tokenizer_without_its_packages_is_named():
    import importlib.util

    if importlib.util.find_spec("mecab_ko") is not None:
        pytest.skip("mecab-ko is installed here: the tokenizer runs")
    with pytest.raises(ValueError, match=r"`tokenize` 'ko-mecab' .* needs packages that are not installed "
                                         r"\(pip install 'sacrebleu\[ko\]'\)"):
        movers.correlate(_records(), 'sentbleu={"tokenize": "ko-mecab"}')
    with pytest.raises(ValueError, match=r"'ko-mecab' \(sacreBLEU's tokenizer for the target language 'ko'\)"):
        movers.correlate(_records(), "sentbleu", lang="ko")


def test_accepted_sacrebleu_options_score_as_sacrebleu_does():
    import sacrebleu

    records = _records()
    got = movers.correlate(records, ['sentbleu={"tokenize": "char", "smooth_method": "floor", "smooth_value": 0.5}',
                                     'chrf={"char_order": 4, "beta": 1}'], resamples=10)
    bleu = [sacrebleu.sentence_bleu(r["prediction"], r["references"], tokenize="char", smooth_method="floor",
                                    smooth_value=0.5).score for r in records]
    chrf = [sacrebleu.sentence_chrf(r["prediction"], r["references"], char_order=4, beta=1).score for r in records]
    assert [m.scores for m in got.metrics.values()] == [tuple(bleu), tuple(chrf)]


def test_a_long_csv_cell_is_read_up_to_the_text_limit_and_refused_beyond_it(tmp_path, capsys, monkeypatch):
    records = _records()
    long = "word " * 30_000  # 150,000 characters: above csv's own cap (131,072), below the text limit
    assert 131_072 < len(long) < MAX_TEXT_CHARS
    records[2]["prediction"] = long
    path = _csv(tmp_path / "long.csv", _table(records))
    j = read_judgments(path)
    assert j.predictions[2] == long and len(j.records) == 12
    status, _, err = _cli([str(path), "-m", "column:comet", "--bootstrap", "10"], capsys)
    assert status == 0, err
    records[4]["comet"] = "9" * (MAX_TEXT_CHARS + 1)  # a cell beyond the limit, in a field that is no text
    path = _csv(tmp_path / "longer.csv", _table(records))
    status, _, err = _cli([str(path), "-m", "column:comet"], capsys)
    assert status == 2 and err == (f"movers correlate: error: longer.csv, line 6: `comet` has {MAX_TEXT_CHARS + 1:,} "
                                   f"characters, above the limit of {MAX_TEXT_CHARS:,}; split it into smaller units "
                                   f"(paragraphs, sentences) or raise the limit with the environment variable "
                                   f"MOVERS_MAX_TEXT_CHARS.\n")
    monkeypatch.setenv("MOVERS_MAX_TEXT_CHARS", "1000")  # the limit is the one in force, read in one place
    with pytest.raises(ValueError, match=r"long.csv, line 4: `prediction` has 150,000 characters, above the limit "
                                         r"of 1,000"):
        read_judgments(tmp_path / "long.csv")


def test_closed_or_unreadable_standard_input_is_said_in_words(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)  # what Python sets when the process starts with stdin closed (<&-)
    status, out, err = _cli(["-", "-m", "sentbleu"], capsys)
    assert (status, out) == (2, "") and err == (
        "movers correlate: error: <stdin>: standard input is closed; pipe the JSON Lines in (movers correlate - ... "
        "< FILE) or name the file.\n")

    class Broken:
        closed = False

        class buffer:  # noqa: N801 (a stream's attribute)
            @staticmethod
            def read():
                raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(sys, "stdin", Broken())
    with pytest.raises(ValueError, match=r"<stdin>: standard input cannot be read \(Bad file descriptor\)"):
        movers.correlate("-", "sentbleu")


@pytest.mark.parametrize("literal", ["9" * 401, "-" + "9" * 401, "1e400", "-1.5E+999", "9" * 5000])
def test_a_number_beyond_the_float_range_is_refused_naming_line_and_field(tmp_path, literal, capsys):
    lines = [json.dumps(r) for r in _records()]
    lines[3] = lines[3].replace('"human": ', f'"human": {literal}, "was": ', 1)
    path = _jsonl(tmp_path / "huge.jsonl", lines)
    status, _, err = _cli([str(path), "-m", "column:comet"], capsys)
    assert status == 2 and err.startswith(f"movers correlate: error: huge.jsonl, line 4: field `human` (the human "
                                          f"score) is beyond the range of a float (±{sys.float_info.max:.4g}), got ")
    assert "\n" == err[-1] and err.count("\n") == 1
    rows = _table(_records())
    rows[5][2] = literal  # the same number in a CSV cell
    with pytest.raises(ValueError, match=r"j.csv, line 6: field `human` .* beyond the range of a float"):
        read_judgments(_csv(tmp_path / "j.csv", rows))
    if literal[0] != "-" and "e" not in literal.lower():  # a Python int in records
        with pytest.raises(ValueError, match=r"record 4: field `human` .* beyond the range of a float .* got an "
                                             rf"integer of {len(literal):,} digits"):
            read_judgments([{**r, "human": 10 ** len(literal) - 1 if i == 3 else r["human"]}
                            for i, r in enumerate(_records())])


def test_a_large_integer_within_the_float_range_is_read_as_the_float_it_is(tmp_path):
    lines = [json.dumps(r) for r in _records()]
    digits = "7" * 300  # 7.77e299: finite
    lines[1] = lines[1].replace('"comet": ', f'"comet": {digits}, "was": ', 1)
    j = read_judgments(_jsonl(tmp_path / "j.jsonl", lines))
    assert j.column("comet")[1] == float(digits) == float(int(digits))


# ------------------------------------------------------------------ numbers written as text (CSV and TSV cells)


@pytest.mark.parametrize("cell, value", [
    ("4.5", 4.5), (" 4.5 ", 4.5), ("-3", -3.0), ("+3", 3.0), (".5", 0.5), ("5.", 5.0), ("2e-3", 2e-3),
    ("2E+3", 2000.0), ("-0", 0.0), ("007", 7.0), ("1e308", 1e308), ("4.9e-324", 5e-324),
])
def test_a_csv_number_is_read_as_python_reads_its_digits(tmp_path, cell, value):
    rows = _table(_records())
    rows[2][2] = cell
    assert read_judgments(_csv(tmp_path / "j.csv", rows)).human[1] == value


@pytest.mark.parametrize("cell, match", [
    ("1_0", r"got '1_0' \(digit separators and decimal commas are not read: write 1000"),
    ("1,000", r"got '1,000' \(digit separators"),
    ("1 000", r"got '1 000' \(digit separators"),
    ("3,5", r"got '3,5' \(digit separators and decimal commas"),
    ("１２", r"got '１２' \(digits other than 0-9 are not read\)"),
    ("٣", r"got '٣' \(digits other than 0-9"),
    ("nan", r"got 'nan' \(not a finite number\)"),
    ("-Infinity", r"got '-Infinity' \(not a finite number\)"),
    ("inf", r"got 'inf' \(not a finite number\)"),
    ("0x10", r"got '0x10'\."),
    ("4.5.1", r"got '4.5.1'\."),
    ("true", r"got 'true'\."),
    ("1e", r"got '1e'\."),
    ("e5", r"got 'e5'\."),
    ("--1", r"got '--1'\."),
])
def test_a_csv_cell_that_is_no_plain_number_is_refused(tmp_path, cell, match):
    for suffix, delimiter in (("csv", ","), ("tsv", "\t")):
        rows = _table(_records())
        rows[7][2] = cell
        _refused(_csv(tmp_path / f"j.{suffix}", rows, delimiter), rf"j.{suffix}, line 8: field `human` \(the human "
                                                                  rf"score\) must be a finite number, {match}")


def test_a_csv_column_is_read_with_the_same_rule(tmp_path):
    rows = _table(_records())
    rows[4][3] = "1_000"
    with pytest.raises(ValueError, match=r"line 5: field `comet` must be a finite number, got '1_000' \(digit"):
        movers.correlate(_csv(tmp_path / "j.csv", rows), "column:comet")


# ------------------------------------------------------------------ references


@pytest.mark.parametrize("cell", ["ref one ||| ref two", "ref one", '{"a": "b"}', '"ref one"', "[ref one", "",
                                  "[" * 5000])
def test_a_csv_references_cell_must_be_a_json_list(tmp_path, cell):
    rows = _table(_records())
    rows[3][1] = cell
    _refused(_csv(tmp_path / "j.csv", rows), r"j.csv, line 4: field `references` in a CSV or TSV file must be a JSON "
                                             r"list of texts \(\[\"first reference\", \"second reference\"\]\), got "
                                             r".*; a column `reference` holds one reference as plain text\.")


@pytest.mark.parametrize("cell, match", [
    ('["a", 3]', r"field `references\[1\]` must be a non-empty text, got 3"),
    ('[["a"]]', r"field `references\[0\]` must be a non-empty text, got \['a'\]"),
    ("[]", r"field `references` must be a text or a non-empty list of texts"),
    ('["a", " "]', r"field `references\[1\]` must be a non-empty text"),
    ('["a", null]', r"field `references\[1\]` must be a non-empty text, got None"),
    ('["a", NaN]', r"field `references\[1\]` must be a non-empty text, got nan"),
])
def test_a_csv_references_list_holds_texts(tmp_path, cell, match):
    rows = _table(_records())
    rows[3][1] = cell
    _refused(_csv(tmp_path / "j.csv", rows), rf"j.csv, line 4: {match}")


def test_a_csv_reference_column_holds_one_text_and_a_list_holds_several(tmp_path):
    import sacrebleu

    records = _records()
    rows = [["prediction", "reference", "human"], *([r["prediction"], "[laughs] " + r["references"][0], r["human"]]
                                                   for r in records)]
    got = movers.correlate(_csv(tmp_path / "one.csv", rows), "sentbleu", resamples=10)
    assert got.judgments.references[0] == ["[laughs] reference text 0"]
    assert list(got.metrics["sentbleu"].scores) == [
        sacrebleu.sentence_bleu(r["prediction"], ["[laughs] " + r["references"][0]]).score for r in records]
    rows = _table(records, ("prediction", "references", "human"))
    rows[1][1] = json.dumps(["ref one", "ref two ||| three"])
    assert read_judgments(_csv(tmp_path / "two.csv", rows)).references[0] == ["ref one", "ref two ||| three"]


def test_a_json_lines_references_text_is_one_reference_whatever_its_first_character(tmp_path):
    import sacrebleu

    records = _records()
    texts = ['["not", "a list"]', "[laughs] fine", "[", "[1, 2]"]
    for i, text in enumerate(texts):
        records[i]["references"] = text
    path = _jsonl(tmp_path / "j.jsonl", [json.dumps(r) for r in records])
    got = movers.correlate(path, "sentbleu", resamples=10)
    assert got.judgments.references[:4] == [[t] for t in texts]
    assert list(got.metrics["sentbleu"].scores[:4]) == [
        sacrebleu.sentence_bleu(r["prediction"], [t]).score for r, t in zip(records, texts, strict=False)]
    records = _records()  # the same in records in memory and in Parquet
    records[0]["references"] = texts[0]
    assert read_judgments(records).references[0] == [texts[0]]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{**r, "references": texts[0]} for r in records]), tmp_path / "j.parquet")
    assert read_judgments(tmp_path / "j.parquet").references[0] == [texts[0]]


@pytest.mark.parametrize("record, match", [
    ({"prediction": "a", "hypothesis": "b", "references": ["c"], "human": 1}, r"the record has both `prediction` and "
                                                                               r"`hypothesis`; keep one of them"),
    ({"prediction": "a", "references": ["c"], "reference": "d", "human": 1}, r"the record has both `references` and "
                                                                              r"`reference`; keep one of them"),
    ({"prediction": "a", "references": [["c"]], "human": 1}, r"field `references\[0\]` must be a non-empty text"),
    ({"prediction": "a", "references": [{"text": "c"}], "human": 1}, r"field `references\[0\]` must be a non-empty"),
    ({"prediction": "a", "references": {"text": "c"}, "human": 1}, r"field `references` must be a text or a "
                                                                    r"non-empty list"),
    ({"prediction": ["a"], "references": ["c"], "human": 1}, r"field `prediction` must be a text, got \['a'\]"),
    ({"predictions": "a", "references": ["c"], "human": 1}, r"the record has no prediction .*; its fields are "
                                                            r"\['human', 'predictions', 'references'\]"),
])
def test_records_whose_texts_are_unclear_are_refused(tmp_path, record, match):
    lines = [json.dumps(r) for r in _records()]
    lines[5] = json.dumps(record)
    _refused(_jsonl(tmp_path / "j.jsonl", lines), rf"j.jsonl, line 6: {match}")


# ------------------------------------------------------------------ duplicate keys and columns


@pytest.mark.parametrize("line, key", [
    ('{"prediction": "a", "references": ["b"], "human": 1, "human": 5}', "human"),
    ('{"prediction": "a", "prediction": "b", "references": ["b"], "human": 1}', "prediction"),
    ('{"prediction": "a", "references": ["b"], "human": 1, "meta": {"x": 1, "x": 2}}', "x"),  # nested, unused too
])
def test_a_json_key_twice_in_one_object_is_refused(tmp_path, line, key):
    lines = [json.dumps(r) for r in _records()]
    lines.insert(2, line)
    _refused(_jsonl(tmp_path / "j.jsonl", lines), rf"j.jsonl, line 3: key '{key}' appears twice in one object "
                                                  rf"\(JSON readers keep one of the two silently\); write it once\.")


def test_a_column_twice_is_refused_and_unnamed_columns_are_not(tmp_path):
    rows = _table(_records(), ("prediction", "human", "references", "human", "comet"))
    with pytest.raises(ValueError, match=r"j.csv, line 1: column `human` appears twice \(columns 2 and 4\); give each "
                                         r"column its own name\."):
        read_judgments(_csv(tmp_path / "j.csv", rows))
    with pytest.raises(ValueError, match=r"j.tsv, line 1: column `human` appears twice"):
        read_judgments(_csv(tmp_path / "j.tsv", rows, "\t"))
    rows = _table(_records())
    rows = [["", *rows[0]], *([str(i), *row] for i, row in enumerate(rows[1:]))]  # pandas' unnamed index column
    assert len(read_judgments(_csv(tmp_path / "index.csv", rows)).records) == 12
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(_records())
    pq.write_table(table.append_column("human", pa.array([1.0] * 12)), tmp_path / "j.parquet")
    with pytest.raises(ValueError, match=r"j.parquet: column `human` appears twice"):
        read_judgments(tmp_path / "j.parquet")


# ------------------------------------------------------------------ malformed files


def _with_line(tmp_path, line, name="j.jsonl", at=2):
    lines = [json.dumps(r) for r in _records()]
    lines.insert(at, line)
    return _jsonl(tmp_path / name, lines)


@pytest.mark.parametrize("line, match", [
    ('{"prediction": "a", "references": ["b"], "human": true}', r"line 3: field `human` .* finite number, got True"),
    ('{"prediction": "a", "references": ["b"], "human": NaN}', r"line 3: field `human` .* finite number, got nan"),
    ('{"prediction": "a", "references": ["b"], "human": -Infinity}', r"line 3: field `human` .* got -inf"),
    ('{"prediction": "a", "references": ["b"], "human": "4"}', r"line 3: field `human` .* got '4'"),
    ('{"prediction": "a", "references": ["b"], "human": {"x": 1}}', r"line 3: field `human` .* got \{'x': 1\}"),
    ('{"prediction": "a", "references": ["b"], "human": 1', r"line 3: not valid JSON \(Expecting ',' delimiter"),
    ('{"prediction": "a"} {"b": 1}', r"line 3: not valid JSON \(Extra data at column 21\)"),
    ("[" * 100_000 + "]" * 100_000, r"line 3: not valid JSON here \(nested too deeply\)"),
    ("\ufeff" + json.dumps(_records(1)[0]), r"line 3: not valid JSON \(Unexpected UTF-8 BOM"),
    ('"just a text"', r"line 3: a record must be an object with fields, got 'just a text'\."),
    ("null", r"line 3: a record must be an object with fields, got None"),
    (json.dumps(_records(2)), r"line 3: a record must be an object with fields, got .* \(a JSON array of records\? "
                              r"write one record per line: JSON Lines\)"),
])
def test_a_malformed_json_line_is_named(tmp_path, line, match):
    _refused(_with_line(tmp_path, line), rf"j.jsonl, {match}")


@pytest.mark.parametrize("data, match", [
    (b"", r"e.jsonl: no records"),
    (b"\n \n\t\n", r"e.jsonl: no records"),
    (b'{"prediction": "a"}\n\x00\x00\n', r"e.jsonl, line 2: a NUL character; a judgments file is UTF-8 text "
                                         r"\(a UTF-16 file\? save it as UTF-8\)"),
    (json.dumps(_records(1)[0]).encode("utf-16"), r"e.jsonl, line 1: not UTF-8 text"),
    (json.dumps(_records(1)[0]).encode("utf-16-le"), r"e.jsonl, line 1: a NUL character"),  # UTF-16 without a BOM
    (b'{"prediction": "a\xe9"}\n', r"e.jsonl, line 1: not UTF-8 text \(invalid continuation byte at byte 17\)"),
])
def test_a_file_that_is_no_utf8_json_lines_is_named(tmp_path, data, match):
    (tmp_path / "e.jsonl").write_bytes(data)
    _refused(tmp_path / "e.jsonl", match)


def test_a_byte_order_mark_and_any_line_end_read_as_plain_lines(tmp_path):
    records = _records()
    text = "".join(json.dumps(r) + "\r\n" for r in records)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode())
    body = io.StringIO()
    csv.writer(body, lineterminator="\r").writerows(_table(records))  # old Mac line ends
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + body.getvalue().encode())
    want = [r["human"] for r in records]
    assert list(read_judgments(tmp_path / "bom.jsonl").human) == want
    assert list(read_judgments(tmp_path / "bom.csv").human) == want


@pytest.mark.parametrize("text, match", [
    ("prediction,references,human\n\"a\",\"[\"\"b\"\"]\",1\nc,\"[\"\"d\"\"]\"\n",
     r"line 3: 2 cells, fewer than the header's 3 columns \(prediction, references, human\); a cell with the "
     r"delimiter in it must be quoted"),
    ("prediction,references,human\na,\"[\"\"b\"\"]\",1\nc, d,\"[\"\"d\"\"]\",2\n", r"line 3: 4 cells, more than"),
    ("prediction,references,human\na,\"[\"\"b\"\"]\",1\n\"c,\"[\"\"d\"\"]\",2\n",
     r"line 3: not valid CSV \(',' expected after '\"'; a cell with a quote must be quoted whole, its quotes "
     r"doubled: \"say \"\"hi\"\"\"\)"),
    ("prediction,references,human\na,\"[\"\"b\"\"]\",1\n\"c,\"\"[d]\"\",2\n", r"line 3: not valid CSV \(unexpected "
                                                                               r"end of data"),
    ("prediction,references,human\n", r"j.csv: no records"),
    ("", r"j.csv: no records"),
    ("prediction,references,human\n\n\n", r"j.csv: no records"),
    ("prediction\treferences\thuman\na\t[\"b\"]\t1\n", r"j.csv, line 2: the record has no prediction .*; its fields "
                                                        r"are \['prediction\\treferences\\thuman'\]"),
])
def test_a_malformed_csv_is_named_by_the_line_its_row_starts_on(tmp_path, text, match):
    (tmp_path / "j.csv").write_text(text, encoding="utf-8", newline="")
    with pytest.raises(ValueError, match=rf"j.csv{'' if match.startswith('j.csv') else ', '}"
                                         rf"{match.removeprefix('j.csv')}"):
        read_judgments(tmp_path / "j.csv")


def test_a_name_with_white_space_around_it_is_named_not_missing(tmp_path):
    (tmp_path / "j.csv").write_text('prediction, references, human\na,"[""b""]",1\n', encoding="utf-8")
    _refused(tmp_path / "j.csv", r"j.csv, line 2: the record has no field `references` but has ' references': "
                                 r"white space around a field's name counts; remove it\.")
    _refused([{**r, " lp": "x"} for r in _records()], r"records, record 1: the record has no field `lp` but has "
                                                      r"' lp'", group_by="lp")


def test_a_row_is_named_by_its_first_line_when_a_cell_spans_lines(tmp_path):
    rows = _table(_records())
    rows[2][0] = "a prediction\nover\nthree lines"  # the row of line 3 ends on line 5
    rows[3][0] = "the next one\nover two"  # lines 6 and 7
    rows[3][2] = "high"
    _refused(_csv(tmp_path / "j.csv", rows), r"j.csv, line 6: field `human`")


@pytest.mark.parametrize("spec, arg, match", [
    ({"human": ""}, "human", r"`human` \(--human\) must name the field of the human score, got ''"),
    ({"group_by": "lp,"}, "group_by", r"`group_by` \(--group-by\) 'lp,' names an empty field"),
    ({"group_by": ","}, "group_by", r"names an empty field"),
    ({"group_by": ""}, "group_by", r"names an empty field"),
    ({"group_by": ["lp", " "]}, "group_by", r"names an empty field"),
    ({"group_by": "lp,lp"}, "group_by", r"`group_by` \(--group-by\) names the field `lp` twice"),
    ({"group_by": [1]}, "group_by", r"must be a field name, names joined by commas or a list of names, got \[1\]"),
    ({"input_field": "doc,", "level": "summary"}, "input_field", r"`input_field` \(--input-field\) 'doc,' names an "
                                                                 r"empty field"),
])
def test_an_empty_or_repeated_field_name_is_refused_before_the_file_is_read(spec, arg, match):
    with pytest.raises(ValueError, match=rf"^correlate: (`{arg}` .*)?{match}"):
        read_judgments("no such file.jsonl", **spec)


@pytest.mark.parametrize("value, shown", [
    (None, "missing"), ("", r"not a label \(a text, a number or true/false\): ''"), (" ", r"not a label .*: ' '"),
    ([1], r"not a label .*: \[1\]"), ({"a": 1}, r"not a label .*: \{'a': 1\}"), (float("nan"), r"not a label .*nan"),
])
def test_a_label_that_is_no_text_or_number_is_refused(tmp_path, value, shown):
    records = _records(lp=lambda i: "ab"[i % 2])
    records[8]["lp"] = value
    _refused(_jsonl(tmp_path / "j.jsonl", [json.dumps(r) for r in records]),
             rf"j.jsonl, line 9: field `lp` \(the group\) is {shown}", group_by="lp")
    lines = [json.dumps(r) for r in records[:8]] + [json.dumps(records[8]).replace('"lp": ', '"lp": 1e999, "x": ')]
    _refused(_jsonl(tmp_path / "k.jsonl", lines + [json.dumps(r) for r in records[9:]]),
             r"k.jsonl, line 9: field `lp` \(the group\) is not a label .*: 1e999", group_by="lp")


# ------------------------------------------------------------------ group labels are tuples


def test_labels_of_several_fields_are_tuples_and_never_collide():
    rng = np.random.default_rng(3)
    parts = [("x.y", "z"), ("x", "y.z"), ("x", "y")]
    records = [{"prediction": f"out {i}", "references": [f"ref {i}"], "human": float(rng.normal()),
                "comet": float(rng.normal()), "a": parts[i % 3][0], "b": parts[i % 3][1]} for i in range(30)]
    result = movers.correlate(records, "column:comet", group_by="a,b", resamples=10)
    assert result.judgments.layout.groups[:3] == parts
    out = result.to_dict()
    want = {json.dumps(list(p)): stats.pearsonr([r["comet"] for r in records[k::3]],
                                                [r["human"] for r in records[k::3]])[0] for k, p in enumerate(parts)}
    got = out["metrics"]["column:comet"]["per_group"]
    assert set(got) == set(want) == set(out["groups"])
    for key, r in want.items():
        assert abs(got[key]["pearson"] - r) <= EXACT and tuple(json.loads(key)) in parts
    assert abs(out["metrics"]["column:comet"]["pearson"]["value"] - np.mean(list(want.values()))) <= EXACT
    from movers.cli.correlate import render_text

    table = render_text(result)
    assert 'segment level: 30 segments in 3 groups (a,b)' in table and '["x.y", "z"]' in table


def test_one_fields_labels_are_its_values_as_before():
    records = _records(24, lp=lambda i: ["de-en", "x.y"][i % 2])
    result = movers.correlate(records, "column:comet", group_by="lp", resamples=10)
    assert result.judgments.layout.groups[:2] == ["de-en", "x.y"]
    assert list(result.to_dict()["groups"]) == ["de-en", "x.y"]


def test_a_label_is_the_text_the_file_writes_so_csv_and_json_lines_agree(tmp_path):
    records = _records(24, year=lambda i: [2019, "2019", 2020][i % 3])  # 2019 and "2019": one group, as in a CSV
    result = movers.correlate(records, "column:comet", group_by="year", resamples=10).to_dict()
    assert result["groups"] == {"2019": {"units": 16, "resampled": 16}, "2020": {"units": 8, "resampled": 8}}


def test_a_true_false_label_reads_as_json_writes_it_in_json_lines_and_parquet(tmp_path):
    """A boolean field (JSON true/false, a Parquet bool column, read as numpy's bool) labels groups "true" and
    "false", the text JSON writes (Python's "True" is no file's text); Parquet's was refused as no label."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records(24, ok=lambda i: i % 3 == 0)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "j.parquet")
    for source in (records, _jsonl(tmp_path / "j.jsonl", [json.dumps(r) for r in records]), tmp_path / "j.parquet"):
        result = movers.correlate(source, "column:comet", group_by="ok", resamples=10).to_dict()
        assert result["groups"] == {"false": {"units": 16, "resampled": 16}, "true": {"units": 8, "resampled": 8}}


def test_a_parquet_decimal_column_is_read_as_its_numbers_and_a_non_finite_one_is_refused(tmp_path):
    """A decimal column (an SQL export's NUMERIC) holds numbers: they are read as the floats nearest to them, so the
    correlation is scipy's on those floats. Arrow's decimals are finite and below 1e76; a Decimal NaN or one beyond
    the float range, as records may hold, is refused naming the record."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records(12)
    exact = [decimal.Decimal(f"{r['human']:.4f}") for r in records]
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != "human"} for r in records])
    pq.write_table(table.append_column("human", pa.array(exact, pa.decimal128(12, 4))), tmp_path / "j.parquet")
    result = movers.correlate(tmp_path / "j.parquet", "column:comet", resamples=10)
    want = stats.pearsonr([r["comet"] for r in records], [float(d) for d in exact])[0]
    assert abs(result.metrics["column:comet"].result.point["pearson"] - want) <= EXACT
    for bad, said in ((decimal.Decimal("NaN"), r"must be a finite number, got Decimal\('NaN'\)"),
                      (decimal.Decimal("1e400"), r"is beyond the range of a float \(±1.798e\+308\), got 1.0000e\+400")):
        given = [dict(r, human=bad) if k == 4 else r for k, r in enumerate(records)]  # records hold any Decimal
        with pytest.raises(ValueError, match=r"record 5: field `human` \(the human score\) " + said):
            movers.correlate(given, "column:comet", resamples=10)


def test_inputs_of_several_fields_are_tuples_at_the_summary_level():
    rng = np.random.default_rng(5)
    parts = [("x.y", "z"), ("x", "y.z")]  # two inputs that a joined text would make one
    records = [{"prediction": f"out {i}", "references": [f"ref {i}"], "human": float(rng.normal()),
                "comet": float(rng.normal()), "doc": parts[i % 2][0], "seg": parts[i % 2][1]} for i in range(8)]
    result = movers.correlate(records, "column:comet", level="summary", input_field="doc,seg", resamples=10)
    assert result.judgments.layout.inputs[:2] == parts
    per_input = [stats.pearsonr([r["comet"] for r in records[k::2]], [r["human"] for r in records[k::2]])[0]
                 for k in range(2)]
    assert result.to_dict()["groups"]["all"]["resampled"] == 2
    assert abs(result.metrics["column:comet"].result.point["pearson"] - np.mean(per_input)) <= EXACT


# ------------------------------------------------------------------ -l/--lang


ZH = [("猫坐在垫子上。", ["猫在垫子上坐着。"]), ("今天天气很好。", ["今天的天气非常好。"]),
      ("我们明天去北京。", ["明天我们要去北京。"]), ("他喜欢读书。", ["他很喜欢看书。"]),
      ("这个问题很难。", ["这是一个难题。"]), ("请把门关上。", ["请关门。"])]


def _zh_records():
    return [{"prediction": p, "references": r, "human": float(h)} for (p, r), h in zip(ZH, [3, 1, 4, 2, 5, 2],
                                                                                        strict=True)]


def test_lang_picks_sacrebleus_tokenizer_for_sentence_bleu():
    import sacrebleu

    records = _zh_records()
    got = movers.correlate(records, ["sentbleu", "chrf", 'sentbleu={"tokenize": "13a"}'], lang="zh", resamples=10)
    zh = [sacrebleu.sentence_bleu(r["prediction"], r["references"], tokenize="zh").score for r in records]
    plain = [sacrebleu.sentence_bleu(r["prediction"], r["references"], tokenize="13a").score for r in records]
    chrf = [sacrebleu.sentence_chrf(r["prediction"], r["references"]).score for r in records]
    assert zh != plain  # the tokenizer matters on these texts
    assert list(got.metrics["sentbleu"].scores) == zh
    assert list(got.metrics['sentbleu={"tokenize": "13a"}'].scores) == plain  # the metric's own option wins
    assert list(got.metrics["chrf"].scores) == chrf  # chrF reads every language alike
    assert "|tokenize:zh|" in got.metrics["sentbleu"].signature
    assert list(movers.correlate(records, "sentbleu", resamples=10).metrics["sentbleu"].scores) == plain


def test_lang_ja_picks_mecab():
    import sacrebleu

    pytest.importorskip("MeCab", reason="sacrebleu[ja] (movers[ja], in the test extra) tokenises Japanese")
    records = _zh_records()
    ja = movers.correlate(records, "sentbleu", lang="ja", resamples=10)
    want = [sacrebleu.sentence_bleu(r["prediction"], r["references"], tokenize="ja-mecab").score for r in records]
    assert list(ja.metrics["sentbleu"].scores) == want and "tokenize:ja-mecab" in ja.metrics["sentbleu"].signature


def test_lang_is_every_movers_metrics_lang():
    records = _zh_records()
    preds, refs = [r["prediction"] for r in records], [r["references"] for r in records]
    got = movers.correlate(records, ["delta_bleu", 'delta_bleu={"lang": "en"}'], lang="zh", resamples=10)
    zh, en = movers.delta_bleu(preds, refs, lang="zh"), movers.delta_bleu(preds, refs)
    assert list(got.metrics["delta_bleu"].scores) == list(zh.scores) != list(en.scores)
    assert got.metrics["delta_bleu"].signature == str(zh.signature) and "lang:zh" in str(zh.signature)
    assert list(got.metrics['delta_bleu={"lang": "en"}'].scores) == list(en.scores)


def test_the_command_takes_l_as_movers_score_does_and_refuses_opt_lang(tmp_path, capsys):
    import sacrebleu

    path = _jsonl(tmp_path / "zh.jsonl", [json.dumps(r, ensure_ascii=False) for r in _zh_records()])
    status, out, err = _cli([str(path), "-m", "sentbleu", "-l", "en-zh", "--format", "json", "--scores",
                             "--bootstrap", "10"], capsys)
    assert status == 0, err
    entry = json.loads(out)["metrics"]["sentbleu"]
    assert entry["scores"] == [sacrebleu.sentence_bleu(r["prediction"], r["references"], tokenize="zh").score
                               for r in _zh_records()]
    assert entry["signature"].startswith("sacrebleu.sentence_bleu|tokenize:zh|")
    status, out, err = _cli([str(path), "-m", "sentbleu", "-m", "delta_bleu", "--opt", "lang=zh"], capsys)
    assert (status, out) == (2, "") and err == (
        "movers correlate: error: --opt lang=zh: the language of the texts is -l/--lang (-l zh), which reaches every "
        "metric, sentence BLEU's tokenizer too; --opt SLUG.lang=... sets one movers metric's.\n")
    status, _, err = _cli([str(path), "-m", "sentbleu", "-l", "xx"], capsys)
    assert status == 2 and err.startswith("movers correlate: error: --lang must be an ISO 639-1 code or a language tag")
    assert "got 'xx'" in err and err.count("\n") == 1
    status, _, err = _cli([str(path), "-m", "delta_bleu", "--opt", "delta_bleu.lang=zh", "--bootstrap", "10"], capsys)
    assert status == 0, err


def test_lang_in_python_is_checked_before_the_file_is_read():
    with pytest.raises(ValueError, match=r"^correlate: `lang` 'en-zh' is a language pair, the command line's -l "
                                         r"src-tgt form; pass the target language, 'zh'"):
        movers.correlate("no such file.jsonl", "sentbleu", lang="en-zh")


def test_every_case_of_the_issue_ends_in_one_line_never_a_traceback(tmp_path, capsys):
    """The command on each hostile file: exit status 2 and one line on stderr (the four tracebacks and the silent
    surprises of the reader)."""
    good = _records()
    lines = [json.dumps(r) for r in good]
    cases = {
        "tok.jsonl": (lines, ["-m", 'sentbleu={"tokenize": "nope"}']),
        "digits.jsonl": ([*lines[:3], lines[3].replace('"human": ', '"human": ' + "9" * 401 + ', "x": ', 1),
                          *lines[4:]], ["-m", "sentbleu"]),
        "twice.jsonl": ([*lines[:2], lines[2].replace('"human": ', '"human": 1, "human": ', 1), *lines[3:]],
                        ["-m", "sentbleu"]),
    }
    for name, (body, argv) in cases.items():
        _jsonl(tmp_path / name, body)
        status, out, err = _cli([str(tmp_path / name), *argv], capsys)
        assert status == 2 and out == "" and err.startswith("movers correlate: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
    rows = _table(good)
    rows[1][1] = "ref one ||| ref two"
    rows[2][2] = "1_0"
    for k in (1, 2):
        fixed = [row[:] for row in rows]
        fixed[3 - k] = _table(good)[3 - k]
        _csv(tmp_path / f"c{k}.csv", fixed)
        status, out, err = _cli([str(tmp_path / f"c{k}.csv"), "-m", "sentbleu"], capsys)
        assert status == 2 and err.count("\n") == 1 and f"c{k}.csv, line {k + 1}: field" in err, err


def test_the_float_it_is_for_digits_json_writes(tmp_path):
    """JSON Lines numbers are read as Python's json reads them (every finite float and integer), however many
    digits the integer has below the float range."""
    records = _records()
    records[0]["human"] = 10 ** 30
    records[1]["human"] = -(2 ** 64)
    records[2]["human"] = 1.5e-320  # subnormal
    j = read_judgments(_jsonl(tmp_path / "j.jsonl", [json.dumps(r) for r in records]))
    assert list(j.human[:3]) == [1e30, -18446744073709551616.0, 1.5e-320]
    assert math.isfinite(j.human.sum())


def test_the_page_states_the_declared_limit_numbers_and_tokenizers():
    """docs/human-judgments.md restates what is declared once: the text limit, the numbers a cell may hold and the
    tokenizers sacreBLEU's command line picks."""
    from sacrebleu.metrics.bleu import BLEU

    from movers.api.judgments import DECIMAL

    from .helpers import REPO

    page = (REPO / "docs" / "human-judgments.md").read_text(encoding="utf-8")
    assert f"{MAX_TEXT_CHARS:,} characters, `MOVERS_MAX_TEXT_CHARS`" in page
    assert f"(`{'`, `'.join(BLEU._TOKENIZER_MAP.values())}`, else `{BLEU.TOKENIZER_DEFAULT}`)" in page
    paragraph = next(p for p in page.split("\n\n") if p.startswith("Numbers "))
    accepted, refused = paragraph.split("A cell with")
    for cell in accepted.split("cell digits as JSON writes them:")[1].split("`")[1::2]:
        assert DECIMAL.fullmatch(cell), cell
    for cell in refused.split("`")[1::2]:
        assert not DECIMAL.fullmatch(cell) or not math.isfinite(float(cell)), cell
