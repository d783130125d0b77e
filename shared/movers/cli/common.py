"""What the ``movers`` commands share: their errors, their parser, reading text files, ``--opt`` parsing, scoring
texts with several metrics, and rendering what ``movers score`` prints.

Errors. Every command runs through :func:`guarded`, which decides what a failure prints. A user's mistake or a
missing resource is one line on stderr, ``<prog>: error: <message>``, and nothing on stdout; a traceback is kept
for a bug, for its report to say where it happened. The rule:

* exit status 2, the user's mistake: what the command line's parser refuses (:class:`CommandParser`: an unknown
  option, a value that is not a number, a choice that does not exist, a missing argument; argparse's message without
  its usage block), a :class:`UsageError` (what a command checks itself: files, combinations of options), and the
  ``ValueError`` and ``TypeError`` that movers raises on a bad input or option (its messages name the argument and
  what was expected);
* exit status 1, a resource that is missing or fails: ``OSError`` (a file, folder or model that cannot be found,
  read or written, a model that is not in the cache while downloads are off, a full disk), ``ImportError`` (an
  optional package that is not installed), ``MemoryError`` and torch's ``OutOfMemoryError``;
* exit status 130, ``<prog>: interrupted`` on Ctrl-C; a closed pipe on stdout (``movers score ... | head -1``) ends
  the command quietly, exit status 1;
* any other exception (``RuntimeError``, ``AssertionError``, ``KeyError``, ``IndexError``, ``AttributeError``, ...)
  is a bug, in movers or in a library it calls: Python's traceback, exit status 1.

A message is printed on one line (line breaks inside it become spaces). ``MOVERS_TRACEBACK=1`` in the environment
raises the exceptions of the one-line errors too, with their tracebacks.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import metrics as registry
from ..core.options import scalar_kind
from ..core.validation import universal
from .tables import TEXT_WIDTH, number, render_comparison, rounded

if TYPE_CHECKING:
    from ..core.significance import Interval
    from ..core.spec import MetricSpec

__all__ = ["UsageError", "CommandParser", "guarded", "one_line", "read_lines", "stdin_bytes", "cli_options",
           "parse_options", "add_lang_argument", "lang_options", "RESERVED", "where", "metric_kwargs", "score_texts",
           "render", "TRACEBACK_VARIABLE"]

RESERVED = {"verbose", "return_matching", "return_plans"}
"""Options that the command line sets itself (or that change the result's type): not ``--opt`` options."""

TRACEBACK_VARIABLE = "MOVERS_TRACEBACK"
"""Set (to anything but "" or "0"), the one-line errors raise their exceptions, with tracebacks."""


class UsageError(Exception):
    """Bad input or options; printed as one line, exit status 2."""


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, whose refusals are one line, ``<prog>: error: <message>`` (argparse prints its usage block
    first), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: object) -> str:
    """`text` on one line: its line breaks, and the white space around them, become one space."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()


def _resource_message(err: BaseException) -> str:
    """An OSError or ImportError in words: a file's error as ``<what went wrong>: '<path>'``, else its message."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        return f"{err.strerror}: {str(err.filename)!r}" + (f" -> {str(err.filename2)!r}" if err.filename2 else "")
    return str(err) or type(err).__name__


def guarded(prog: str, run: Callable[[list[str]], int], argv: Sequence[str] | None) -> int:
    """Run a command; its failures print and exit as this module's docstring says. Returns the exit status (a parser's
    ``SystemExit`` included: ``--help`` gives 0, a refusal 2)."""
    def fail(message: str, status: int) -> int:
        if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
            raise  # the exception being handled, with its traceback
        print(f"{prog}: error: {one_line(message)}", file=sys.stderr)
        return status

    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as stop:
        if isinstance(stop.code, str):  # sys.exit("message"), as Python prints it
            print(one_line(stop.code), file=sys.stderr)
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except UsageError as e:
        return fail(str(e), 2)
    except (ValueError, TypeError) as e:
        return fail(str(e) or type(e).__name__, 2)
    except (OSError, ImportError) as e:
        if isinstance(e, BrokenPipeError):
            return _closed_stdout()
        return fail(_resource_message(e), 1)
    except MemoryError as e:
        return fail(f"out of memory{f' ({e})' if str(e) else ''}", 1)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        if type(e).__name__ == "OutOfMemoryError":  # torch's (a RuntimeError), on an accelerator
            return fail(str(e), 1)
        raise


def _closed_stdout() -> int:
    """Standard output was closed by its reader: the rest of the output goes nowhere (not to a second error at
    exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 1


# ----------------------------------------------------------------------------- input files


def read_lines(path: str, what: str) -> list[str]:
    """Lines of a UTF-8 file (``-`` = stdin) without their line ends; a missing or empty file is an error.
    Both are read as bytes and decoded strictly (not with the locale's ``surrogateescape``): bytes that are
    not UTF-8 are an error naming the line. Line ends are Python's universal newlines: ``\\n``, ``\\r\\n`` and
    ``\\r`` (old Mac files) each end a line, so one file gives the same lines in any of the three."""
    if path == "-":
        data = stdin_bytes(what)
        name = "<stdin>"
    else:
        p = Path(path)
        if not p.exists():
            raise UsageError(f"{what} file {path!r} does not exist.")
        if not p.is_file():
            raise UsageError(f"{what} file {path!r} is not a regular file.")
        try:
            data = p.read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read {what} file {path!r}: {e.strerror}.") from None
        name = path
    text = decoded(data, f"{what} {'<stdin>' if path == '-' else f'file {path!r}'}")
    text = universal(text)
    if text.endswith("\n"):
        text = text[:-1]
    if text == "":
        raise UsageError(f"{what} {name!r} is empty; expected one text per line.")
    # split on line ends only (str.splitlines would also split on U+2028 etc. and shift the alignment)
    return text.split("\n")


def stdin_bytes(what: str) -> bytes:
    """Standard input's bytes; a closed standard input (``<&-``: Python's ``sys.stdin`` is None) is a
    :class:`UsageError` naming `what`."""
    stdin = sys.stdin
    try:
        if stdin is None or stdin.closed:
            raise OSError("standard input is closed")
        return stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode("utf-8", "surrogatepass")
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read the {what} from standard input ({getattr(e, 'strerror', None) or e}); pass a "
                         f"file.") from None


def decoded(data: bytes, where_: str, first_line: int = 1) -> str:
    """`data` decoded as UTF-8, strictly; bytes that are not are a :class:`UsageError` naming `where_` and the line
    (counted from `first_line`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = universal(data[:e.start]).count(b"\n") + first_line
        raise UsageError(f"{where_} is not UTF-8 text: line {line} has {e.reason} at byte {e.start} "
                         f"of the input.") from None


# ----------------------------------------------------------------------------- --opt parsing


def _typed_value(option: str, raw: str, kind: str) -> Any:
    """Type ``raw`` for an option of `kind` (:func:`movers.core.options.scalar_kind`): the raw text for
    text options, else a JSON literal (numbers, true/false/null, lists), checked against int/float/bool."""
    if kind == "str":
        return None if raw == "null" else raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise UsageError(f"--opt {option}: expected an integer, got {raw!r}.")
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise UsageError(f"--opt {option}: expected a number, got {raw!r}.")
    if kind == "bool" and not isinstance(value, bool):
        raise UsageError(f"--opt {option}: expected true or false, got {raw!r}.")
    return value


def cli_options(spec: MetricSpec) -> dict[str, str]:
    """name -> scalar kind of the options ``--opt`` can set for `spec` (declared ``cli``, not reserved)."""
    return {f.name: scalar_kind(f.hint) for f in spec.options if f.info.cli and f.name not in RESERVED}


def add_lang_argument(parser: argparse.ArgumentParser) -> None:
    """``-l/--lang``: the language of the texts, a code (``de``), a language tag (``de-DE``) or sacreBLEU's
    ``src-tgt`` pair (the target counts); :func:`movers.text.languages.language_code` tells them apart."""
    parser.add_argument("-l", "--lang", default=None, metavar="LANG",
                        help="the language of the texts: an ISO 639-1 code (de, zh, ...), a language tag (de-DE, "
                             "pt_BR, zh-Hans: its language counts) or, as sacreBLEU's -l, a pair src-tgt in lower "
                             "case whose target counts (en-de: German); sets every metric's `lang` (default: en)")


def lang_options(spec: str | None) -> list[str]:
    """The ``--opt`` items ``-l/--lang`` stands for (before the explicit ones, which win); a language movers does not
    support is a :class:`UsageError` naming ``--lang``."""
    if spec is None:
        return []
    from ..text.languages import target_language

    try:
        return [f"lang={target_language(spec)}"]
    except ValueError as err:
        raise UsageError(str(err)) from None


def parse_options(items: Sequence[str], slugs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``key=value`` (every selected metric that has `key`) or ``slug.key=value`` (one metric) -> kwargs per slug.

    Values are typed by the metric's option declarations: JSON literals (``0.05``, ``true``, ``[-5, -1]``,
    ``null``) for non-text options, the raw text for text options. A key that no selected metric accepts
    is an error naming the option and the accepted keys.
    """
    functions = {slug: cli_options(registry.get(slug)) for slug in slugs}
    out: dict[str, dict[str, Any]] = {slug: {} for slug in functions}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--opt {item!r}: expected key=value (or metric.key=value).")
        slug, dot, name = key.rpartition(".")
        if dot and slug not in functions:
            raise UsageError(f"--opt {item}: {slug!r} is not among the selected metrics {sorted(functions)}.")
        targets = [slug] if dot else list(functions)
        applied = False
        for target in targets:
            kinds = functions[target]
            if name in kinds:
                out[target][name] = _typed_value(item, raw, kinds[name])
                applied = True
        if not applied:
            accepted = sorted({p for t in targets for p in functions[t]})
            raise UsageError(f"--opt {item}: unknown option {name!r} for {', '.join(targets)}; "
                             f"accepted: {', '.join(accepted)}.")
    return out


# ----------------------------------------------------------------------------- scoring


def where(message: str, hyp_name: str, ref_names: Sequence[str], first_line: int = 1) -> str:
    """A metric's ``predictions[i]`` / ``references[i][j]`` message with the file and line added (line 1 of the
    texts passed is line `first_line` of each file)."""
    m = re.search(r"`references\[(\d+)\]\[(\d+)\]`", message)
    if m:
        i, j = int(m.group(1)), int(m.group(2))
        if j < len(ref_names):
            return f"{message} (line {i + first_line} of {ref_names[j]})"
    m = re.search(r"`predictions\[(\d+)\]`", message)
    if m:
        return f"{message} (line {int(m.group(1)) + first_line} of {hyp_name})"
    return message


def metric_kwargs(slugs: Sequence[str], options: dict[str, dict[str, Any]], verbose: bool) -> dict[str, dict]:
    """Each metric's keyword arguments: its ``--opt`` options, and ``verbose`` where the metric has it."""
    return {slug: {**options.get(slug, {}),
                   **({"verbose": verbose} if registry.get(slug).has_option("verbose") else {})}
            for slug in slugs}


def score_texts(slugs: Sequence[str], predictions: list[str], references: list[list[str]],
                options: dict[str, dict[str, Any]], *, verbose: bool = False) -> dict[str, Any]:
    """Run each metric once on the same texts, sharing one encoder pass (:func:`movers.compare` with one
    system); {slug: movers.Scores}."""
    from ..api.comparison import compare

    comparison = compare(slugs, {"": predictions}, references, metric_options=metric_kwargs(slugs, options, verbose))
    return {slug: comparison[slug][""].result for slug in slugs}


# ----------------------------------------------------------------------------- output


def render(args: argparse.Namespace, results: Any, intervals: dict[str, Interval] | None = None) -> str:
    """What ``movers score`` prints, in ``args.format`` with ``args.width`` decimals: for one system (`results`:
    {slug: a result with ``score``, ``signature`` and ``scores``}) a ``<signature> = <score>`` line per metric as
    sacreBLEU prints it (with the interval of `intervals`), JSON, TSV or CSV, with ``args.per_segment`` one score
    per hypothesis too; for several systems (`results`: a :class:`movers.Comparison`) the tables of
    :mod:`movers.cli.tables`."""
    if not isinstance(results, dict):
        return render_comparison(results, fmt=args.format, width=args.width, per_segment=args.per_segment,
                                 titles={slug: registry.get(slug).title for slug in results.metrics})
    intervals = intervals or {}
    width = TEXT_WIDTH if args.width is None else args.width
    slugs = list(results)
    if args.format == "json":
        payload: dict[str, Any] = {}
        for slug, res in results.items():
            entry: dict[str, Any] = {"score": res.score, "signature": str(res.signature)}
            if args.per_segment:
                entry["scores"] = list(res.scores)
            if slug in intervals:
                entry["confidence"] = intervals[slug].to_dict()
            payload[slug] = entry
        return json.dumps(rounded(payload, args.width), indent=1, ensure_ascii=False) + "\n"
    if args.format in ("tsv", "csv"):
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="\t" if args.format == "tsv" else ",", lineterminator="\n")
        if args.per_segment:
            writer.writerow(["segment", *slugs])
            n = len(next(iter(results.values())).scores)
            for i in range(n):
                writer.writerow([i + 1, *(number(results[s].scores[i], args.width) for s in slugs)])
        else:
            header = ["metric", "score"]
            if intervals:
                header += ["mean", "half_width", "low", "high"]
            writer.writerow(header + ["signature"])
            for slug, res in results.items():
                row = [slug, number(res.score, args.width)]
                if intervals:
                    ci = intervals[slug]
                    row += [number(x, args.width) for x in (ci.mean, ci.half_width, ci.low, ci.high)]
                writer.writerow(row + [str(res.signature)])
        return buf.getvalue()
    lines = []
    for slug, res in results.items():
        if args.per_segment:
            lines += [f"{slug}\t{i + 1}\t{s:.{width}f}" for i, s in enumerate(res.scores)]
        if slug in intervals:
            ci = intervals[slug]
            from ..core.significance import seed_label

            lines.append(f"{res.signature}|bs:{ci.samples}|seed:{seed_label(ci.seed)} = {res.score:.{width}f} "
                         f"(μ = {ci.mean:.{width}f} ± {ci.half_width:.{width}f}, 95% CI [{ci.low:.{width}f}, "
                         f"{ci.high:.{width}f}])")
        else:
            lines.append(f"{res.signature} = {res.score:.{width}f}")
    return "\n".join(lines) + "\n"
