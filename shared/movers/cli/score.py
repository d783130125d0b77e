"""``movers score``: score a file of hypotheses against reference files, sacreBLEU-style.

    movers score -m moverscore -r refs.txt [-r refs2.txt ...] -c hyps.txt
    cat hyps.txt | movers score -m moverscore -m twmd -r refs.txt --format json --per-segment
    movers score -m lazy_emd -r refs.txt -c hyps.txt --opt reg=0.05 --confidence
    movers score -m moverscore -m delta_bleu -r refs.txt -c base.txt sys1.txt sys2.txt --paired-bs -f latex

Files hold one text per line (UTF-8); each ``-r`` file is one reference stream (line i of every file
is a reference of hypothesis i), as in sacreBLEU. Several ``-c`` files are several systems
(:func:`movers.compare`; tables in :mod:`movers.cli.tables`), the first the baseline of ``--paired-bs`` /
``--paired-ar``; one system prints exactly what it printed before. Every problem with the input (missing file, unequal
line counts, empty file, a bad ``--opt``, an input the metric rejects) is reported as one line on
stderr, ``movers score: error: ...``, with exit status 2; nothing is scored then.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import metrics as registry
from ..core.options import choices_of, scalar_kind
from ..core.progress import PROGRESS_MIN_PAIRS
from ..core.significance import (
    BOOTSTRAP_SAMPLES,
    DEFAULT_SEED,
    RANDOMIZATION_TRIALS,
    SEED_VARIABLE,
    bootstrap_interval,
    resolve_seed,
)
from .common import (
    CommandParser,
    UsageError,
    add_lang_argument,
    cli_options,
    guarded,
    lang_options,
    metric_kwargs,
    parse_options,
    read_lines,
    render,
    score_texts,
    where,
)
from .tables import TEXT_WIDTH

if TYPE_CHECKING:
    from ..core.significance import Interval
    from ..core.spec import MetricSpec

__all__ = ["main", "run"]

PROG = "movers score"

BOOTSTRAP_SEED = DEFAULT_SEED  # sacreBLEU's default seed for --confidence and the paired tests


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog=PROG,
        description="Score hypotheses (one per line) against one or more reference files (one per line, "
                    "aligned). Prints '<signature> = <score>' per metric, like sacreBLEU; several systems "
                    "(-c A B ...) give one table per metric, the first system being the baseline of the "
                    "paired tests.",
        epilog="Options are typed by the metric's signature: JSON literals for numbers, booleans, lists "
               "and null (e.g. --opt reg=0.05 --opt layer=[-5,-1] --opt idf=true), plain text for "
               "string options (--opt preset=1.0.3). 'key=value' applies to every selected metric that "
               "has the option, 'slug.key=value' to one. --confidence resamples the segments with "
               f"replacement (--confidence-n times, numpy seed {BOOTSTRAP_SEED}) and prints the mean of "
               "the resampled corpus scores ± half the width of their 95% percentile interval. "
               "--paired-bs and --paired-ar follow sacreBLEU: every system against the first on the same "
               "resamples, the mean ± half the width of each system's 95% bootstrap interval, and the "
               f"p-value, marked * below 0.05. The seed is --seed, else ${SEED_VARIABLE}, else "
               f"{BOOTSTRAP_SEED}; 'none' draws it from the system.")
    p.add_argument("-m", "--metric", action="append", required=True, choices=registry.slugs(),
                   metavar="SLUG", help=f"metric to run, repeatable: {', '.join(registry.slugs())}")
    p.add_argument("-r", "--refs", action="append", default=[], metavar="FILE",
                   help="reference file, one per line; repeat for several references per hypothesis")
    p.add_argument("-c", "--cands", "-i", "--input", dest="cands", nargs="+", default=["-"], metavar="FILE",
                   help="hypothesis file(s), one per line; several files are several systems "
                        "(default: standard input)")
    p.add_argument("--shard", action="store_true",
                   help="under torchrun: each rank reads only its own contiguous share of the lines and scores it "
                        "(distributed_scoring(sharded=True)); rank 0 prints the corpus result of all lines")
    ray_group = p.add_argument_group("Ray Data", "score a data set file or folder on a Ray cluster instead of "
                                                 "line files (pip install 'movers[ray]')")
    ray_group.add_argument("--ray", metavar="DATA", default=None,
                           help="a Parquet, JSONL (.jsonl/.json) or CSV file or folder, read with ray.data")
    ray_group.add_argument("--prediction-column", default="prediction", metavar="NAME")
    ray_group.add_argument("--reference-column", action="append", default=[], metavar="NAME",
                           help="repeatable (default: reference); a column of strings or of lists of strings")
    ray_group.add_argument("--weights-column", action="append", default=[], metavar="NAME",
                           help="reference weights (ΔBLEU), shaped as the reference columns")
    ray_group.add_argument("--index-column", default=None, metavar="NAME",
                           help="each row's position in the input (needed by batch centring: TWMD's default)")
    ray_group.add_argument("--address", default=None,
                           help="an existing Ray cluster (else $RAY_ADDRESS, else a local cluster)")
    ray_group.add_argument("--output", default=None, metavar="DIR",
                           help="write <slug>.parquet (every input column and the per-row score) and <slug>.json "
                                "(score, signature and corpus-level outputs) here")
    ray_group.add_argument("--actors", type=int, default=None, metavar="N",
                           help="scoring actors (default: Ray's autoscaling pool)")
    ray_group.add_argument("--ray-logs", action="store_true",
                           help="Ray's own INFO and progress lines and its workers' output on stderr (default: "
                                "errors only)")
    ray_group.add_argument("--dashboard", action="store_true",
                           help="start Ray's dashboard and metrics with the local cluster (default: off; the local "
                                "cluster stays on the loopback either way)")
    add_lang_argument(p)
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="metric option, repeatable (see below; --list-options SLUG lists a metric's options)")
    p.add_argument("--list-options", action=_ListOptions, metavar="SLUG", choices=registry.slugs(),
                   help="print the --opt options of one metric (name, type, default, what it does) and exit")
    p.add_argument("--cache", metavar="DIR", default=None,
                   help="embedding cache folder: texts embedded by an earlier run are read, not encoded again "
                        "(default: $MOVERS_CACHE if set; `movers cache info|clear`)")
    p.add_argument("-f", "--format", choices=["text", "json", "tsv", "csv", "latex"], default="text",
                   help="text (default: '<signature> = <score>' per metric, or one table per metric for several "
                        "systems), json, tsv or csv (data), latex (a booktabs table of several systems)")
    p.add_argument("--per-segment", action="store_true", help="also output one score per hypothesis")
    p.add_argument("--confidence", action="store_true",
                   help="bootstrap 95%% interval of the corpus score (with --paired-ar: of each system)")
    p.add_argument("--confidence-n", type=int, default=BOOTSTRAP_SAMPLES, metavar="N",
                   help=f"bootstrap resamples (default {BOOTSTRAP_SAMPLES})")
    paired = p.add_mutually_exclusive_group()
    paired.add_argument("--paired-bs", action="store_true",
                        help="paired bootstrap resampling test of each system against the first (Koehn, 2004)")
    paired.add_argument("--paired-ar", action="store_true",
                        help="paired approximate randomization test of each system against the first "
                             "(Riezler & Maxwell, 2005)")
    p.add_argument("--paired-bs-n", type=int, default=BOOTSTRAP_SAMPLES, metavar="N",
                   help=f"resamples of --paired-bs (default {BOOTSTRAP_SAMPLES})")
    p.add_argument("--paired-ar-n", type=int, default=RANDOMIZATION_TRIALS, metavar="N",
                   help=f"trials of --paired-ar (default {RANDOMIZATION_TRIALS})")
    p.add_argument("--seed", default=None, metavar="SEED",
                   help=f"resampling seed, an integer or 'none' (default ${SEED_VARIABLE} or {BOOTSTRAP_SEED})")
    p.add_argument("-w", "--width", type=int, default=None,
                   help=f"decimals of the printed scores (default {TEXT_WIDTH} in text and latex, full precision in "
                        f"json, tsv and csv)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"progress bar on stderr (default: on for {PROGRESS_MIN_PAIRS}+ pairs x metrics "
                        f"when stderr is a terminal)")
    return p


class _ListOptions(argparse.Action):
    """``--list-options SLUG``: the metric's ``--opt`` options, read from its declaration, then exit."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        spec = registry.get(values)
        kinds = cli_options(spec)
        lines = [f"{spec.slug} (--opt KEY=VALUE or --opt {spec.slug}.KEY=VALUE):"]
        for f in spec.options:
            if f.name in kinds:
                lines.append(f"  {f.name}={_kind_text(f)}  (default {json.dumps(f.default)})")
                lines.append(f"      {textwrap.shorten(f.info.doc, 110, placeholder=' ...')}")
        sys.stdout.write("\n".join(lines) + "\n")
        parser.exit(0)


def _kind_text(f: Any) -> str:
    choices = choices_of(f.hint)
    if choices is not None and scalar_kind(f.hint) == "str":
        return "|".join(str(c) for c in choices)
    return {"str": "TEXT", "int": "INT", "float": "NUMBER", "bool": "true|false"}.get(scalar_kind(f.hint), "JSON")


def _checked(args: argparse.Namespace) -> int | None:
    """The resolved seed, after the checks of numbers and combinations."""
    for name in ("confidence_n", "paired_bs_n", "paired_ar_n"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    if args.width is not None and args.width < 0:
        raise UsageError(f"--width must be >= 0, got {args.width}.")
    paired = args.paired_bs or args.paired_ar
    if paired and len(args.cands) < 2:
        raise UsageError(f"--paired-{'bs' if args.paired_bs else 'ar'} compares systems with the first: pass "
                         f"several hypothesis files (-c BASELINE SYSTEM ...).")
    if len(args.cands) > 1 and args.confidence and not args.paired_ar:
        raise UsageError("--confidence takes one system; for several use --paired-bs (which reports each "
                         "system's interval) or --paired-ar --confidence.")
    if len(args.cands) > 1 and args.per_segment and args.format in ("text", "latex"):
        raise UsageError(f"--per-segment with several systems needs --format json, tsv or csv, not "
                         f"{args.format}.")
    if args.cands.count("-") > 1:
        raise UsageError("standard input ('-') can be one system only.")
    if "-" in args.cands and sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty():
        raise UsageError("no hypotheses: pass -c FILE or pipe them on standard input.")
    try:
        return resolve_seed(args.seed)
    except ValueError:
        raise UsageError(f"--seed: expected an integer or 'none', got {args.seed!r}.") from None


def _ray_only(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The options of the "Ray Data" group given with a value other than their default (they act on --ray only)."""
    group = next(g for g in parser._action_groups if g.title == "Ray Data")
    return [a.option_strings[0] for a in group._group_actions
            if a.dest != "ray" and getattr(args, a.dest) != a.default]


def run(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv))
    slugs = list(dict.fromkeys(args.metric))
    options = parse_options([*lang_options(args.lang), *args.opt], slugs)
    if args.actors is not None and args.actors < 1:
        raise UsageError(f"--actors must be >= 1, got {args.actors}.")
    if args.ray is None and (unused := _ray_only(parser, args)):
        raise UsageError(f"{', '.join(unused)} {'acts' if len(unused) == 1 else 'act'} on a data set scored on Ray "
                         f"only: pass --ray DATA, or leave {'it' if len(unused) == 1 else 'them'} out when scoring "
                         f"line files (-r/-c).")
    if args.ray is not None and (args.refs or args.shard or args.cands != parser.get_default("cands")):
        line_files = "-r FILE" if args.refs else "--shard" if args.shard else "-c FILE"
        raise UsageError(f"--ray DATA scores a data set's columns; {line_files} is for line files: pass one or the "
                         f"other.")
    if args.ray is not None:
        from .ray import run_ray

        return run_ray(args, slugs, options)
    if not args.refs:
        raise UsageError("pass reference files (-r FILE, repeatable), or a data set with --ray DATA.")
    seed = _checked(args)
    if args.shard:
        from .shard import run_shard

        return run_shard(args, slugs, options)
    names = ["<stdin>" if path == "-" else path for path in args.cands]
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"hypothesis file {twice!r} is given twice; each system needs its own file.")
    ref_lines = [read_lines(path, "reference") for path in args.refs]
    systems = {name: read_lines(path, "hypothesis") for name, path in zip(names, args.cands, strict=True)}
    counts = {**{name: len(lines) for name, lines in systems.items()},
              **{path: len(lines) for path, lines in zip(args.refs, ref_lines, strict=False)}}
    if len(set(counts.values())) > 1:
        raise UsageError("files must have the same number of lines, got "
                         + ", ".join(f"{name}: {n}" for name, n in counts.items()) + ".")
    references = [list(group) for group in zip(*ref_lines, strict=False)]

    verbose = args.progress
    if verbose is None:
        verbose = sys.stderr.isatty() and len(references) * len(slugs) * len(systems) >= PROGRESS_MIN_PAIRS
    from ..text.embedding_cache import EmbeddingCache, using_cache

    try:  # --cache DIR: the embedding cache of every metric call (MOVERS_CACHE when not given)
        cache = None if args.cache is None else EmbeddingCache(args.cache)
    except ValueError as e:
        raise UsageError(f"--cache: {e}") from None
    if len(systems) > 1 or args.paired_bs or args.paired_ar or args.format == "latex":
        with using_cache(cache):
            return _run_systems(args, slugs, systems, references, options, verbose, seed)
    hyp_name, hyps = next(iter(systems.items()))
    from ..core.scope import launched_scoring

    with launched_scoring() as rank, using_cache(cache):  # under torchrun: each rank scores its shard
        try:
            results = score_texts(slugs, hyps, references, options, verbose=verbose)
        except (TypeError, ValueError) as e:
            raise UsageError(where(str(e), hyp_name, list(args.refs))) from None
    if rank != 0:
        return 0  # every rank holds the full result; rank 0 prints it
    intervals: dict[str, Interval] = {}
    if args.confidence:
        from ..pipeline.call import make_options

        for slug, res in results.items():
            spec = registry.get(slug)
            # not a mean of segment scores (ΔBLEU): the corpus statistic is recomputed per resample from the
            # resampled segments' statistics
            corpus = None if spec.corpus_from_segments else functools.partial(
                _resampled_corpus, spec, spec.resolve(make_options(spec, options[slug])), res.statistics)
            intervals[slug] = bootstrap_interval(res.scores, samples=args.confidence_n, seed=seed, corpus=corpus)
    sys.stdout.write(render(args, results, intervals))
    return 0


def _resampled_corpus(spec: MetricSpec, options: Any, statistics: Any, idx: Any) -> float:
    import numpy as np

    return float(spec.corpus_from_statistics(options, np.asarray(statistics, dtype=np.float64)[idx].sum(0)[None])[0])


def _run_systems(args: argparse.Namespace, slugs: list[str], systems: dict[str, list[str]],
                 references: list[list[str]], options: dict[str, dict[str, Any]], verbose: bool,
                 seed: int | None) -> int:
    """Several systems (or a LaTeX table): :func:`movers.compare` and one table per metric."""
    from ..api.comparison import SYSTEM_NOTE, compare
    from ..core.scope import launched_scoring

    kwargs = metric_kwargs(slugs, options, verbose)
    files = dict(zip(systems, args.cands, strict=True))
    with launched_scoring() as rank:
        try:
            comparison = compare(slugs, systems, references, paired_bs=args.paired_bs, paired_bs_n=args.paired_bs_n,
                                 paired_ar=args.paired_ar, paired_ar_n=args.paired_ar_n,
                                 ar_confidence_n=args.confidence_n if args.paired_ar and args.confidence else 0,
                                 seed="none" if seed is None else seed, metric_options=kwargs)
        except (TypeError, ValueError) as e:
            notes = [n[len(SYSTEM_NOTE):] for n in getattr(e, "__notes__", []) if n.startswith(SYSTEM_NOTE)]
            name = notes[0] if notes else next(iter(systems))
            raise UsageError(where(str(e), name if files.get(name) != "-" else "<stdin>", list(args.refs))) \
                from None
    if rank != 0:
        return 0
    sys.stdout.write(render(args, comparison))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(PROG, run, argv)
