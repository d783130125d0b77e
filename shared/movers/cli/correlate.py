"""``movers correlate``: how closely metrics agree with human judgments in a file of one's own.

    movers correlate judgments.jsonl -m sentbleu -m chrf -m moverscore
    movers correlate wmt.jsonl -m 'moverscore={"idf": true}' -m column:comet --group-by lp --compare-to chrf
    movers correlate judgments.jsonl -m twmd --level system --input-field doc_id --format json --plot agreement.png
    movers correlate wmt.jsonl -m chrf -m column:comet --level system --input-field doc --stat spa --test perm-inputs

One implementation with :func:`movers.correlate`: the file is read and checked before any metric scores, and
every problem (a missing field, a score that is not a finite number, too few points in a group, an unknown
metric or option) is one line on stderr, ``movers correlate: error: ...``, with exit status 2.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from .. import metrics as registry
from ..core import agreement as stats
from ..core.progress import PROGRESS_MIN_PAIRS
from .common import CommandParser, UsageError, add_lang_argument, guarded, lang_options, parse_options

if TYPE_CHECKING:
    from ..api.agreement import Agreement

__all__ = ["main", "run", "render_text"]

PROG = "movers correlate"
NAMES = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ", "kendall_c": "Kendall τ-c",
         "tau_23": "τ_23", "acc23": "acc23", "acc_eq": "acc_eq", stats.ACCURACY: "pairwise accuracy", "spa": "SPA"}
TEXT_WIDTH = 3
"""Decimals of the text table."""


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog=PROG,
        description="Correlate metric scores with human judgments: Pearson, Spearman and Kendall tau-b per group "
                    "and averaged, with bootstrap intervals, at the segment, system or summary level; against "
                    "one metric (--compare-to) paired differences and the Williams test. The protocols of WMT24-25 "
                    "and SacreROUGE are options: --stat (acc_eq, spa, ...), --average, --resample, --test.",
        epilog="The file holds one record per judged output: 'prediction' (or 'hypothesis'), 'references' (a list) "
               "or 'reference', the human score ('human', or --human FIELD), and where needed 'system', the "
               "input field and the --group-by fields. A metric is a movers slug with options as JSON "
               "(-m 'moverscore={\"idf\": true}') or --opt KEY=VALUE, sentbleu or chrf (sacreBLEU), or "
               "column:FIELD for scores already in the file.")
    p.add_argument("judgments", metavar="JUDGMENTS",
                   help="a JSON Lines (.jsonl), CSV, TSV or Parquet file; '-': JSON Lines on standard input")
    p.add_argument("-m", "--metric", action="append", required=True, metavar="METRIC",
                   help=f"repeatable: a movers metric ({', '.join(registry.slugs())}) optionally =JSON options; "
                        "sentbleu or chrf (=JSON: sacreBLEU's options); column:FIELD (scores in the file)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a movers metric option, as for movers score (slug.KEY=VALUE for one metric)")
    add_lang_argument(p)  # every metric's `lang`, and sentence BLEU's tokenizer as sacreBLEU's -l picks it
    p.add_argument("--cache", metavar="DIR", default=None,
                   help="embedding cache folder, as for movers score (default: $MOVERS_CACHE if set)")
    p.add_argument("--human", default="human", metavar="FIELD",
                   help="the field of the human score (default: human; a dotted name reaches into an object)")
    p.add_argument("--level", choices=list(stats.LEVELS), default=stats.LEVELS[0],
                   help="segment (default): every output; system: per-system means within each group; summary: "
                        "per input across its outputs, averaged over inputs")
    p.add_argument("--group-by", metavar="FIELDS", help="correlate within groups (e.g. lp, or year,lp), then average")
    p.add_argument("--input-field", metavar="FIELDS",
                   help="the field naming each output's input (document, source item): the unit the system and "
                        "summary levels resample (needed there)")
    p.add_argument("--compare-to", metavar="METRIC",
                   help="each metric's difference to METRIC (paired bootstrap interval) and the one-sided Williams "
                        "test of Pearson r; METRIC is one of the -m metrics, or another one to score as well")
    p.add_argument("--bootstrap", type=int, default=stats.RESAMPLES, metavar="N",
                   help=f"bootstrap resamples, and permutations of a permutation test (default {stats.RESAMPLES}, "
                        f"at most {stats.MAX_RESAMPLES:,})")
    p.add_argument("--seed", type=int, default=stats.SEED, help=f"the bootstrap's seed (default {stats.SEED})")
    p.add_argument("--stat", action="append", choices=list(stats.STATS), metavar="NAME",
                   help=f"repeatable: a statistic, one of {', '.join(stats.STATS)} (default: pearson, spearman, "
                        f"kendall, and at the system level {stats.ACCURACY})")
    p.add_argument("--average", choices=list(stats.AVERAGES),
                   help="how units make one value: " + "; ".join(f"{k}: {v}" for k, v in stats.AVERAGES.items()) +
                        " (default: none; item at the summary level)")
    p.add_argument("--resample", choices=list(stats.RESAMPLINGS),
                   help="what the bootstrap draws: " + "; ".join(f"{k}: {v}" for k, v in stats.RESAMPLINGS.items()) +
                        " (default: the unit averaged over, inputs for item and systems for sys; else segments at "
                        "the segment level, inputs elsewhere)")
    p.add_argument("--test", action="append", choices=list(stats.TESTS), metavar="TEST",
                   help="repeatable: a test against --compare-to, one-sided (the metric agrees better): " +
                        "; ".join(f"{k}: {v}" for k, v in stats.TESTS.items()) +
                        f" (default: {' and '.join(stats.DEFAULT_TESTS)}); a permutation test also ranks every "
                        f"metric into significance clusters")
    p.add_argument("--epsilon", type=float, default=0.0, metavar="E",
                   help="the tie threshold of tau_23 and acc23: metric scores at most E apart are tied (default 0)")
    p.add_argument("--skip-missing", action="store_true",
                   help="leave out records without a human score (absent or null) instead of refusing the file")
    p.add_argument("-f", "--format", choices=["text", "json"], default="text",
                   help="text (default): tables; json: every figure, undefined values as null")
    p.add_argument("--scores", action="store_true", help="with --format json: each metric's scores too")
    p.add_argument("--plot", metavar="FILE.png", help="also draw each metric's scores against the human scores")
    p.add_argument("-w", "--width", type=int, default=TEXT_WIDTH, help=f"decimals in text (default {TEXT_WIDTH})")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar on stderr (default: on for {PROGRESS_MIN_PAIRS}+ records x metrics when "
                        f"stderr is a terminal)")
    return p


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if not 1 <= args.bootstrap <= stats.MAX_RESAMPLES:
        raise UsageError(f"--bootstrap must be from 1 to {stats.MAX_RESAMPLES:,} (every resample's value is kept), "
                         f"got {args.bootstrap}.")
    if args.width < 0:
        raise UsageError(f"--width must be >= 0, got {args.width}.")
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        raise UsageError(f"--plot {args.plot}: the picture is a PNG file (FILE.png).")
    specs = [*args.metric, *([args.compare_to] if args.compare_to else [])]
    slugs = [s for s in dict.fromkeys(m.partition("=")[0].strip() for m in specs) if registry.is_slug(s)]
    everywhere = next((item for item in args.opt if item.partition("=")[0].strip() == "lang"), None)
    if everywhere is not None:  # it would reach the movers metrics only, and sacreBLEU would keep its tokenizer
        raise UsageError(f"--opt {everywhere}: the language of the texts is -l/--lang (-l "
                         f"{everywhere.partition('=')[2].strip() or 'LANG'}), which reaches every metric, sentence "
                         f"BLEU's tokenizer too; --opt SLUG.lang=... sets one movers metric's.")
    lang = lang_options(args.lang)[0].partition("=")[2] if args.lang is not None else None
    options = parse_options(args.opt, slugs) if args.opt else {}
    from ..api.agreement import correlate

    block: Any = nullcontext()
    if args.cache is not None:  # the embedding cache of every movers metric (else MOVERS_CACHE, if set)
        from ..text.embedding_cache import EmbeddingCache, using_cache

        try:
            block = using_cache(EmbeddingCache(args.cache))
        except ValueError as e:
            raise UsageError(f"--cache: {e}") from None
    try:
        with block:
            result = correlate(args.judgments, args.metric, human=args.human, level=args.level,
                               group_by=args.group_by,
                               input_field=args.input_field, compare_to=args.compare_to, resamples=args.bootstrap,
                               seed=args.seed, skip_missing=args.skip_missing, statistics=args.stat,
                               average=args.average, resample=args.resample, test=args.test, epsilon=args.epsilon,
                               metric_options=options, lang=lang, progress=args.progress)
    except (TypeError, ValueError) as e:
        message = str(e)
        raise UsageError(message[len("correlate: "):] if message.startswith("correlate: ") else message) from None
    if args.plot:
        try:
            result.plot(args.plot)
        except OSError as e:
            raise UsageError(f"--plot: cannot write {args.plot!r} ({e.strerror or e}).") from None
    sys.stdout.write(result.to_json(scores=args.scores) + "\n" if args.format == "json"
                     else render_text(result, args.width))
    return 0


def _cell(value: float, low: float, high: float, *, width: int, signed: bool = False, why: str = "") -> str:
    if not math.isfinite(value):
        return f"n/a ({why})" if why else "n/a"
    f = f"+.{width}f" if signed else f".{width}f"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{value:{f}}"
    star = "*" if signed and (low > 0 or high < 0) else ""
    return f"{value:{f}} [{low:{f}}, {high:{f}}]{star}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart."""
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


_RESAMPLED = {"segments": "segments", "inputs": "inputs", "systems": "systems", "both": "systems and inputs"}


def _heading(result: Agreement) -> str:
    j, first = result.judgments, next(iter(result.metrics.values())).result
    proto = result.protocol or stats.protocol(j.level)
    groups = first.groups
    units = sum(g.units for g in groups.values())
    resampled = sum(g.resampled for g in groups.values())
    where = f" in {len(groups)} group{'' if len(groups) == 1 else 's'} ({','.join(j.group_by)})" if j.group_by else ""
    inputs = ",".join(j.input_fields)
    drawn = _RESAMPLED[proto.resample] + " resampled"
    pooled = ", pairs pooled over the groups" if proto.average == "pooled" else ""
    if j.level == "system":
        count = f"{resampled} inputs ({inputs}), " if proto.resample == "inputs" else f"the inputs ({inputs}); "
        line = f"system level: {units} systems{where}{pooled}; means over {count}{drawn}"
    elif proto.average in ("item", "sys"):
        unit = "input" if proto.average == "item" else "system"
        n = sum(g.units + g.undefined for g in groups.values())
        named = f" ({inputs})" if proto.average == "item" else ""
        line = f"{j.level} level: correlation across each {unit}'s outputs, averaged over {n} {unit}s{named}{where}; " \
               f"{drawn}"
    else:
        line = f"segment level: {units} segments{where}{pooled}, {drawn}"
    return (f"{j.source}: {len(j.records)} records, human score `{j.human_field}`\n{line};\n"
            f"{stats.CONFIDENCE:.0%} bootstrap intervals ({result.resamples} resamples, seed {result.seed})")


def render_text(result: Agreement, width: int = TEXT_WIDTH) -> str:
    """The tables ``movers correlate`` prints: the statistics per metric; with ``compare_to`` the tests (paired
    differences, Williams, a permutation test); the significance clusters; with groups each group's value of the
    first statistic; then the notes and the metrics' signatures."""
    names = list(result.statistics)
    lines = [_heading(result), ""]
    lines += _table(["metric", *(NAMES[s] for s in names)],
                    [[label, *(_cell(*m.result.interval(s), width=width, why=m.result.reasons.get(s, ""))
                               for s in names)] for label, m in result.metrics.items()])
    group_names = result.group_names
    if "acc_eq" in names:
        lines += ["", "acc_eq's tie threshold (metric scores at most this far apart are tied):", ""]
        first_groups = list(next(iter(result.metrics.values())).result.groups)
        header = ["metric", *(group_names[g] for g in first_groups)] if len(first_groups) > 1 else ["metric",
                                                                                                     "threshold"]
        lines += _table(header, [[label, *(f"{m.result.groups[g].threshold:.{width + 1}g}" for g in first_groups)]
                                 for label, m in result.metrics.items()])
    base = result.compare_to
    if base is not None:
        lines += _tests(result, base, names, width)
    if result.clusters:
        test = next(t for t in result.tests if t in stats.PERMUTATION_TESTS)
        lines += ["", f"significance clusters ({test}, {result.resamples} permutations; a new cluster starts at a "
                      f"metric that one of the current cluster beats at p <= {stats.ALPHA:g}), best first:", ""]
        lines += _table(["statistic", "clusters"],
                        [[NAMES[s], "  |  ".join(", ".join(c) for c in result.clusters[s])] for s in names])
    first = next(iter(result.metrics.values())).result
    if len(first.groups) > 1:
        groups = list(first.groups)
        shown = "pearson" if "pearson" in names else names[0]
        lines += ["", f"{NAMES[shown]} per group ({','.join(result.judgments.group_by)}):", ""]
        lines += _table(["metric", *(group_names[g] for g in groups), "average"],
                        [[label, *(_cell(m.result.groups[g].point[shown], math.nan, math.nan, width=width)
                                   for g in groups), _cell(m.result.point[shown], math.nan, math.nan, width=width)]
                         for label, m in result.metrics.items()])
    notes = result.notes()
    if notes:
        lines += ["", *(f"note: {n}" for n in notes)]
    signed = [(label, m.signature) for label, m in result.metrics.items() if m.signature]
    if signed:
        lines += ["", *(f"{label}: {signature}" for label, signature in signed)]
    return "\n".join(lines) + "\n"


def _tests(result: Agreement, base: str, names: list[str], width: int) -> list[str]:
    """The tables of the tests against `base`: paired differences and Williams, a permutation test."""
    lines: list[str] = []
    tests = result.williams()
    single = all(len(v) <= 1 for v in tests.values())
    diffs = result.differences()
    if diffs or tests:
        said = []
        if diffs:
            said.append(f"difference to {base}: metric − {base}, paired {stats.CONFIDENCE:.0%} interval from the "
                        f"same resamples (* = excludes 0)")
        if tests:
            said.append(f"Williams test: H1 Pearson r > {base}'s, one-sided p, t with n − 3 df.")
        lines += ["", ";\n".join(said) + ("" if tests else "."), ""]
        header = ["metric", *(f"Δ {NAMES[s]}" for s in names)] if diffs else ["metric"]
        rows = [[label, *(_cell(*diffs[label][s], width=width, signed=True) for s in names)] if diffs else [label]
                for label in (diffs or tests)]
        if tests and single:
            header += ["Williams t (df)", "p"]
            for row, label in zip(rows, tests, strict=True):
                w = next(iter(tests[label].values()))
                row += ["n/a", "n/a"] if math.isnan(w["p"]) else [f"{w['t']:.2f} ({w['df']})", f"{w['p']:.3g}"]
        if diffs or single:
            lines += _table(header, rows)
        if tests and not single:
            group_names = result.group_names
            groups = sorted(next(iter(tests.values())), key=lambda g: group_names[g])
            lines += ["", f"Williams test p (Pearson r > {base}'s) per group ({','.join(result.judgments.group_by)}):",
                      ""]
            lines += _table(["metric", *(group_names[g] for g in groups)],
                            [[label, *("n/a" if math.isnan(v[g]["p"]) else f"{v[g]['p']:.3g}" for g in groups)]
                             for label, v in tests.items()])
    if result.permutation:
        test = next(t for t in result.tests if t in stats.PERMUTATION_TESTS)
        lines += ["", f"permutation test ({test}, {result.resamples} permutations, seed {result.seed}): H1 the metric "
                      f"agrees better than {base}; Δ = metric − {base}, one-sided p = (c + 1) / (k + 1).", ""]
        header = ["metric", *(h for s in names for h in (f"Δ {NAMES[s]}", "p"))]
        rows = [[label, *(c for s in names for c in (_cell(by_stat[s][1], math.nan, math.nan, width=width, signed=True),
                                                      "n/a" if math.isnan(by_stat[s][0]) else f"{by_stat[s][0]:.3g}"))]
                for label, by_stat in result.permutation.items()]
        lines += _table(header, rows)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(PROG, run, argv)
