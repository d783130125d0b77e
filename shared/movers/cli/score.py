"""``movers score``: score a file of hypotheses against reference files, sacreBLEU-style.

    movers score -m moverscore -r refs.txt [-r refs2.txt ...] -c hyps.txt
    cat hyps.txt | movers score -m moverscore -m twmd -r refs.txt --format json --per-segment
    movers score -m lazy_emd -r refs.txt -c hyps.txt --opt reg=0.05 --confidence

Files hold one text per line (UTF-8); each ``-r`` file is one reference stream (line i of every file
is a reference of hypothesis i), as in sacreBLEU. Every problem with the input (missing file, unequal
line counts, empty file, a bad ``--opt``, an input the metric rejects) is reported as one line on
stderr, ``movers score: error: ...``, with exit status 2; nothing is scored then.
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import metrics as registry
from ..core.options import scalar_kind
from ..core.spec import MetricSpec

__all__ = ["main", "parse_options", "bootstrap_interval", "read_lines", "UsageError"]

PROG = "movers score"

# Options that the command line sets itself (or that change the result's type): not --opt options.
_RESERVED = {"verbose", "return_matching", "return_plans"}

BOOTSTRAP_SEED = 12345   # sacreBLEU's default seed for --confidence
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default --confidence-n
PROGRESS_MIN_PAIRS = 500  # "long work": progress on by default from this many pairs x metrics


class UsageError(Exception):
    """Bad input or options; printed as one line, exit status 2."""


# ----------------------------------------------------------------------------- input files


def read_lines(path: str, what: str) -> list[str]:
    """Lines of a UTF-8 file (``-`` = stdin) without their line ends; a missing or empty file is an error.
    Both are read as bytes and decoded strictly (not with the locale's ``surrogateescape``): bytes that are
    not UTF-8 are an error naming the line."""
    if path == "-":
        stdin = sys.stdin
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode("utf-8", "surrogatepass")
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
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        where = "<stdin>" if path == "-" else f"file {path!r}"
        raise UsageError(f"{what} {where} is not UTF-8 text: line {line} has {e.reason} at byte {e.start} "
                         f"of the input.") from None
    if text.endswith("\n"):
        text = text[:-1]
    if text == "":
        raise UsageError(f"{what} {name!r} is empty; expected one text per line.")
    # split on "\n" only (str.splitlines would also split on U+2028 etc. and shift the alignment)
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


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


def _cli_options(spec: MetricSpec) -> dict[str, str]:
    """name -> scalar kind of the options ``--opt`` can set for `spec` (declared ``cli``, not reserved)."""
    return {f.name: scalar_kind(f.hint) for f in spec.options if f.info.cli and f.name not in _RESERVED}


def parse_options(items: Sequence[str], specs: dict[str, MetricSpec]) -> dict[str, dict[str, Any]]:
    """``key=value`` (every selected metric that has `key`) or ``slug.key=value`` (one metric) -> kwargs per slug.

    Values are typed by the metric's option declarations: JSON literals (``0.05``, ``true``, ``[-5, -1]``,
    ``null``) for non-text options, the raw text for text options. A key that no selected metric accepts
    is an error naming the option and the accepted keys.
    """
    functions = {slug: _cli_options(spec) for slug, spec in specs.items()}
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


# ----------------------------------------------------------------------------- bootstrap


@dataclass(frozen=True)
class Interval:
    """Bootstrap estimate of a corpus score: mean over resamples and the 95% percentile interval."""

    mean: float
    half_width: float
    low: float
    high: float
    samples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "half_width": self.half_width, "low": self.low, "high": self.high,
                "level": 0.95, "samples": self.samples, "seed": self.seed}


def bootstrap_interval(scores: Sequence[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED,
                       corpus: Callable[[Any], float] | None = None) -> Interval:
    """Resample the segments with replacement `samples` times (numpy ``default_rng(seed)``).

    Each resample's corpus score is the mean of its segment scores, or ``corpus(indices)`` for a
    metric whose corpus score is not a mean (ΔBLEU recomputes from the resampled segments). Returns the
    mean of the resampled scores, and the 2.5th and 97.5th percentiles; ``half_width`` is half their
    distance (sacreBLEU prints ``μ ± half_width``).
    """
    import numpy as np

    values = np.asarray(scores, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(samples, len(values)))
    if corpus is None:
        stats = values[idx].mean(axis=1)
    else:
        stats = np.array([corpus(row) for row in idx], dtype=np.float64)
    low, high = np.percentile(stats, [2.5, 97.5])
    return Interval(mean=float(stats.mean()), half_width=float((high - low) / 2), low=float(low),
                    high=float(high), samples=samples, seed=seed)


# ----------------------------------------------------------------------------- scoring


def _where(message: str, hyp_name: str, ref_names: list[str]) -> str:
    """Add file and line to a metric's ``predictions[i]`` / ``references[i][j]`` message."""
    m = re.search(r"`references\[(\d+)\]\[(\d+)\]`", message)
    if m:
        i, j = int(m.group(1)), int(m.group(2))
        if j < len(ref_names):
            return f"{message} (line {i + 1} of {ref_names[j]})"
    m = re.search(r"`predictions\[(\d+)\]`", message)
    if m:
        return f"{message} (line {int(m.group(1)) + 1} of {hyp_name})"
    return message


def score_texts(slugs: Sequence[str], predictions: list[str], references: list[list[str]],
                options: dict[str, dict[str, Any]], *, verbose: bool = False) -> dict[str, Any]:
    """Run each metric once on the same texts, sharing one encoder pass; {slug: movers.Scores}."""
    from ..text.embedding import shared_embeddings

    results: dict[str, Any] = {}
    with shared_embeddings():  # metrics on the same encoder embed each unique text once
        for slug in slugs:
            spec = registry.get(slug)
            kwargs = dict(options.get(slug, {}))
            if any(f.name == "verbose" for f in spec.options):
                kwargs["verbose"] = verbose
            results[slug] = registry.function(spec)(predictions, references, **kwargs)
    return results


def _formatter(width: int) -> Callable[[float], str]:
    return lambda x: f"{x:.{width}f}"


def _render(args: argparse.Namespace, results: dict[str, Any], intervals: dict[str, Interval]) -> str:
    fmt = _formatter(args.width)
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
        return json.dumps(payload, indent=1, ensure_ascii=False) + "\n"
    if args.format in ("tsv", "csv"):
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="\t" if args.format == "tsv" else ",", lineterminator="\n")
        if args.per_segment:
            writer.writerow(["segment", *slugs])
            n = len(next(iter(results.values())).scores)
            for i in range(n):
                writer.writerow([i + 1, *(repr(float(results[s].scores[i])) for s in slugs)])
        else:
            header = ["metric", "score"]
            if intervals:
                header += ["mean", "half_width", "low", "high"]
            writer.writerow(header + ["signature"])
            for slug, res in results.items():
                row = [slug, repr(float(res.score))]
                if intervals:
                    ci = intervals[slug]
                    row += [repr(ci.mean), repr(ci.half_width), repr(ci.low), repr(ci.high)]
                writer.writerow(row + [str(res.signature)])
        return buf.getvalue()
    lines = []
    for slug, res in results.items():
        if args.per_segment:
            lines += [f"{slug}\t{i + 1}\t{fmt(s)}" for i, s in enumerate(res.scores)]
        if slug in intervals:
            ci = intervals[slug]
            lines.append(f"{res.signature}|bs:{ci.samples}|seed:{ci.seed} = {fmt(res.score)} "
                         f"(μ = {fmt(ci.mean)} ± {fmt(ci.half_width)}, 95% CI [{fmt(ci.low)}, {fmt(ci.high)}])")
        else:
            lines.append(f"{res.signature} = {fmt(res.score)}")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Score hypotheses (one per line) against one or more reference files (one per line, "
                    "aligned). Prints '<signature> = <score>' per metric, like sacreBLEU.",
        epilog="Options are typed by the metric's signature: JSON literals for numbers, booleans, lists "
               "and null (e.g. --opt reg=0.05 --opt layer=[-5,-1] --opt idf=true), plain text for "
               "string options (--opt preset=1.0.3). 'key=value' applies to every selected metric that "
               "has the option, 'slug.key=value' to one. --confidence resamples the segments with "
               f"replacement (--confidence-n times, numpy seed {BOOTSTRAP_SEED}) and prints the mean of "
               "the resampled corpus scores ± half the width of their 95% percentile interval.")
    p.add_argument("-m", "--metric", action="append", required=True, choices=registry.slugs(),
                   metavar="SLUG", help=f"metric to run, repeatable: {', '.join(registry.slugs())}")
    p.add_argument("-r", "--refs", action="append", required=True, metavar="FILE",
                   help="reference file, one per line; repeat for several references per hypothesis")
    p.add_argument("-c", "--cands", "-i", "--input", dest="cands", default="-", metavar="FILE",
                   help="hypothesis file, one per line (default: standard input)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="metric option, repeatable (see below)")
    p.add_argument("-f", "--format", choices=["text", "json", "tsv", "csv"], default="text")
    p.add_argument("--per-segment", action="store_true", help="also output one score per hypothesis")
    p.add_argument("--confidence", action="store_true", help="bootstrap 95%% interval of the corpus score")
    p.add_argument("--confidence-n", type=int, default=BOOTSTRAP_SAMPLES, metavar="N",
                   help=f"bootstrap resamples (default {BOOTSTRAP_SAMPLES})")
    p.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default {BOOTSTRAP_SEED})")
    p.add_argument("-w", "--width", type=int, default=4, help="decimals in text output (default 4)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar on stderr (default: on for {PROGRESS_MIN_PAIRS}+ pairs x metrics "
                        f"when stderr is a terminal)")
    return p


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    slugs = list(dict.fromkeys(args.metric))
    if args.cands == "-" and sys.stdin.isatty():
        raise UsageError("no hypotheses: pass -c FILE or pipe them on standard input.")
    if args.confidence_n < 1:
        raise UsageError(f"--confidence-n must be >= 1, got {args.confidence_n}.")
    if args.width < 0:
        raise UsageError(f"--width must be >= 0, got {args.width}.")
    hyp_name = "<stdin>" if args.cands == "-" else args.cands
    ref_lines = [read_lines(path, "reference") for path in args.refs]
    hyps = read_lines(args.cands, "hypothesis")
    counts = {hyp_name: len(hyps), **{path: len(lines) for path, lines in zip(args.refs, ref_lines, strict=False)}}
    if len(set(counts.values())) > 1:
        raise UsageError("files must have the same number of lines, got "
                         + ", ".join(f"{name}: {n}" for name, n in counts.items()) + ".")
    references = [list(group) for group in zip(*ref_lines, strict=False)]

    options = parse_options(args.opt, {slug: registry.get(slug) for slug in slugs})
    verbose = args.progress
    if verbose is None:
        verbose = sys.stderr.isatty() and len(hyps) * len(slugs) >= PROGRESS_MIN_PAIRS
    from ..core.scope import launched_scoring

    with launched_scoring() as rank:  # under torchrun: each rank scores its shard, statistics all-reduced
        try:
            results = score_texts(slugs, hyps, references, options, verbose=verbose)
        except (TypeError, ValueError) as e:
            raise UsageError(_where(str(e), hyp_name, list(args.refs))) from None
    if rank != 0:
        return 0  # every rank holds the full result; rank 0 prints it
    intervals: dict[str, Interval] = {}
    if args.confidence:
        for slug, res in results.items():
            spec = registry.get(slug)
            # not a mean of segment scores (ΔBLEU): the corpus statistic is recomputed per resample
            corpus = None if spec.corpus_from_segments else functools.partial(
                _resampled_corpus, registry.function(spec), hyps, references, options[slug])
            intervals[slug] = bootstrap_interval(res.scores, samples=args.confidence_n, seed=args.seed,
                                                 corpus=corpus)
    sys.stdout.write(_render(args, results, intervals))
    return 0


def _resampled_corpus(function: Callable[..., Any], hyps: list[str], references: list[list[str]],
                      options: dict[str, Any], idx: Any) -> float:
    return float(function([hyps[i] for i in idx], [references[i] for i in idx], **options).score)


def guarded(prog: str, run: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> int:
    """Run a subcommand; a :class:`UsageError` becomes one line on stderr and exit status 2."""
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(PROG, run, argv)
