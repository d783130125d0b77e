"""``movers explain``: the transport plan of one (prediction, reference) pair as a heatmap.

    movers explain -m moverscore "The cat sat on the mat." "A cat was sitting on the mat." -o plan.png

Uses :func:`movers.explain` (the plan exactly as scoring computes it) and :func:`movers.plot_explanation`.
Prints the score, the distance where the metric has one, the largest plan entries and the signature;
``--format json`` prints ``Explanation.to_dict()`` instead.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .. import metrics as registry
from .common import CommandParser, UsageError, add_lang_argument, guarded, lang_options, parse_options

__all__ = ["main"]

PROG = "movers explain"


def _parser() -> argparse.ArgumentParser:
    plans = registry.slugs(plans=True)
    p = CommandParser(prog=PROG, description="Draw the transport plan of one pair (rows: the prediction's tokens, "
                                             "words or sentences; columns: the reference's).",
                      epilog="--opt works as in 'movers score' (typed by the metric's signature).")
    p.add_argument("-m", "--metric", required=True, choices=plans, metavar="SLUG", help=f"one of {', '.join(plans)}")
    p.add_argument("prediction", help="the hypothesis text")
    p.add_argument("reference", help="the reference text")
    p.add_argument("-o", "--output", metavar="PNG", help="write the heatmap here (PNG, SVG or PDF by extension)")
    add_lang_argument(p)
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="metric option, repeatable")
    p.add_argument("-f", "--format", choices=["text", "json"], default="text")
    p.add_argument("--top", type=int, default=5, help="plan entries listed in text output (default 5)")
    p.add_argument("--no-annotate", dest="annotate", action="store_false", help="no numbers in the cells")
    return p


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    for name, text in (("prediction", args.prediction), ("reference", args.reference)):
        if not text.strip():
            raise UsageError(f"the {name} is empty; there is nothing to align.")
    import numpy as np

    import movers

    options = parse_options([*lang_options(args.lang), *args.opt], [args.metric])[args.metric]
    options.pop("empty_predictions", None)
    try:
        e = movers.explain(args.metric, args.prediction, args.reference, **options)
    except (TypeError, ValueError) as err:
        raise UsageError(str(err)) from None
    if args.output:
        import matplotlib

        matplotlib.use("Agg")
        ax = movers.plot_explanation(e, annotate=args.annotate)
        try:
            ax.figure.savefig(args.output, dpi=150)
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot write {args.output!r}: {getattr(err, 'strerror', None) or err}") from None
    if args.format == "json":
        sys.stdout.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
        return 0
    line = f"{e.metric} = {e.score:.4f}"
    if e.distance is not None:
        line += f" (distance {e.distance:.4f}, cost {e.cost_label})"
    print(line)
    plan = np.asarray(e.plan)
    total = float(plan.sum()) or 1.0
    order = sorted(range(plan.size), key=lambda f: (-round(float(plan.flat[f]), 12), f))[: max(args.top, 0)]
    for flat in order:
        i, j = np.unravel_index(flat, plan.shape)
        if plan[i, j] <= 0:
            break
        print(f"  {100 * plan[i, j] / total:5.1f}%  {e.prediction_labels[i]!r} -> {e.reference_labels[j]!r}"
              f"  (cost {e.cost[i, j]:.3f})")
    print(e.signature)
    if args.output:
        print(f"wrote {args.output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(PROG, run, argv)
