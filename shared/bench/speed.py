"""``python -m shared.bench speed``: timings of the metrics, in three forms.

    python -m shared.bench speed --metric moverscore          # beside its original (moverscore, sms, lazy_emd)
    python -m shared.bench speed --generic --metric twmd      # any metric: time and peak memory beside the floor
    python -m shared.bench speed --lengths 50,200,800,2000    # every metric by text length (shared.bench.lengths)

``--metric SLUG`` alone compares the metric with its original implementation where :data:`ORIGINALS` names a
comparison, and falls back to ``--generic`` for the others.

``--generic``: time and peak memory of any registered metric, side by side with the floor.

    python -m shared.bench speed --generic --metric moverscore --metric twmd --pairs 200
    python -m shared.bench speed --generic --metric twmd --against /path/to/other/release/shared   # two trees

Each measurement runs in a fresh process (:func:`shared.bench.harness.fresh`): it loads the encoder with a
4-pair call, then times one call on the first `--pairs` WMT15/16 development pairs (the best of `--repeats`; the
metric's bench options, e.g. per-call IDF, from its spec) and reports the process's peak RSS (interpreter, torch
and encoder included). The floor (:func:`shared.bench.harness.floor`) is the bare encoder over every token of
the same texts: what any embedding metric must at least do. ``--against DIR`` measures the same calls with the
``movers`` found in DIR (e.g. the previous release's ``shared/`` folder), in the same run, alternating with this
one.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from typing import Any

from .harness import Runner, floor, fresh, quiet_offline

__all__ = ["main", "generic", "measure", "wmt_pairs", "ORIGINALS"]

ORIGINALS = {"moverscore": "speed_moverscore", "sms": "speed_sms", "lazy_emd": "speed_lazy_emd"}
"""metric -> the module of this package that times it beside its original implementation (or, for Lazy-EMD, a
re-enactment of it): ``python -m shared.bench speed --metric SLUG``."""

def wmt_pairs(n: int) -> tuple[list[str], list[str]]:
    """The first `n` WMT15/16 development pairs (hypothesis, first reference)."""
    from .data import load_dataset

    records = load_dataset("wmt15_16_da_seg_toen").records[:n]
    return [r["hypothesis"] for r in records], [r["references"][0] for r in records]


def measure(metric: str | None, pairs: int, repeats: int, options: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process (:func:`shared.bench.harness.fresh`): the best of `repeats` timed calls of ``movers.<metric>``
    with `options` on the first `pairs` WMT15/16 pairs, after a 4-pair call that loads the encoder; `metric` None:
    the best of `repeats` floors over the same texts."""
    quiet_offline()
    preds, refs = wmt_pairs(pairs)
    if metric is None:
        return {"seconds": min(floor(preds + refs) for _ in range(repeats))}
    import movers

    fn = getattr(movers, metric)
    fn(preds[:4], refs[:4], **{k: v for k, v in options.items() if k != "idf"})  # loads the encoder
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(preds, refs, **options)
        best = min(best, time.perf_counter() - start)
    return {"seconds": best}


def main(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    """The speed study: by text length (``--lengths``), any metric beside the floor (``--generic``), or a metric
    beside its original (:data:`ORIGINALS`; the others fall back to ``--generic``). `run`: how the first two run
    each measurement (:mod:`shared.bench.harness`)."""
    from movers import metrics as registry

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["-h"], ["--help"]):  # the study's three forms; each form's --help gives its options
        print(__doc__.split("\n\n``--metric SLUG`` alone")[0].replace("``", "") + "\n\n" + " ".join(
            f"--metric {slug}" for slug in ORIGINALS) + ", --generic and --lengths take --help for their options.")
        return 0
    if "--lengths" in argv:
        from .lengths import main as by_length

        return by_length(argv, run=run)
    if "--generic" in argv:
        return generic([a for a in argv if a != "--generic"], run=run)
    metric, rest = registry.DEMO, argv
    if "--metric" in argv and argv.index("--metric") + 1 < len(argv):
        i = argv.index("--metric")
        metric, rest = argv[i + 1], argv[:i] + argv[i + 2:]
    if metric not in ORIGINALS:
        print(f"python -m shared.bench speed: no comparison with the original for {metric!r}; time and memory "
              f"instead", file=sys.stderr)
        return generic(["--metric", metric, *rest], run=run)
    return int(importlib.import_module(f".{ORIGINALS[metric]}", __package__).main(rest))


def generic(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    """``--generic``: time and peak memory of the metrics beside the floor, each in a fresh process."""
    from movers import metrics as registry

    p = argparse.ArgumentParser(prog="python -m shared.bench speed --generic",
                                description="time and peak memory of any registered metric beside the floor")
    p.add_argument("--metric", action="append", choices=registry.slugs(), required=True, help="repeatable")
    p.add_argument("--pairs", type=int, default=200, help="first N WMT15/16 development pairs (default 200)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per measurement; the best counts")
    p.add_argument("--against", action="append", default=[], metavar="DIR",
                   help="another movers tree to measure in the same run (the folder holding its `movers`)")
    p.add_argument("--json", help="also write the measurements to this file")
    args = p.parse_args(argv)
    trees: list[str | None] = [None, *args.against]
    quiet = {"MOVERS_NO_AUTOREGISTER": "1"}
    base = run(measure, env=quiet, metric=None, pairs=args.pairs, repeats=args.repeats, options={})
    rows = []
    for slug in args.metric:
        options = dict(registry.get(slug).bench_options)
        for tree in trees:
            one = run(measure, env=quiet, path=tree, metric=slug, pairs=args.pairs, repeats=args.repeats,
                      options=options)
            rows.append({"metric": slug, "tree": tree or "this", "options": options, **one,
                         "x_floor": one["seconds"] / base["seconds"]})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(f"{args.pairs} WMT15/16 pairs, best of {args.repeats}; floor (bare encoder over every token): "
          f"{base['seconds']:.2f} s, peak {base['peak_rss_mb']:.0f} MB\n")
    print("| metric | options | tree | seconds | x floor | peak RSS |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['metric']} | {json.dumps(r['options'])} | {r['tree']} | {r['seconds']:.2f} | {r['x_floor']:.2f} "
              f"| {r['peak_rss_mb']:.0f} MB |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"pairs": args.pairs, "floor": base, "rows": rows}, f, indent=1)
    return 0
