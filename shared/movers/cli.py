"""The ``movers`` command line.

    movers demo                      score a few real sentence pairs with evaluate.load("moverscore")
    movers register                  register the evaluate modules for bare-name offline loading
    movers bench correlation ...     metric vs human judgments (see movers.bench.correlation)
    movers bench speed ...           side-by-side timings (see movers.bench.speed_<metric>)
    movers bench scale ...           peak memory vs corpus size, throughput with 1 and 2 processes
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

__all__ = ["main"]

DEMO_PAIRS = [
    # (prediction, reference): WMT16 cs-en / de-en style sentences and a paraphrase pair.
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("A quick brown fox jumps over the lazy dog.", "The fast brown fox leaped over a lazy dog."),
    ("He went to the store to buy milk.", "She stayed at home and read a book."),
]


def _demo(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="movers demo", description="Score real pairs with evaluate.load('moverscore').")
    p.add_argument("--metric", default="moverscore")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import evaluate

    import movers

    movers.register([args.metric])
    metric = evaluate.load(args.metric)  # bare name: resolved from evaluate's cache, offline
    preds, refs = zip(*DEMO_PAIRS)
    result = metric.compute(predictions=list(preds), references=list(refs))
    for (pred, ref), score in zip(DEMO_PAIRS, result["scores"]):
        print(f"{score:.4f}  {pred!r} vs {ref!r}")
    print(f"{args.metric} = {result['score']:.4f}")
    print(result["signature"])
    return 0


def _register(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="movers register",
                                description="Copy the module scripts into evaluate's cache so that "
                                            "evaluate.load('<slug>') works offline in any process.")
    p.add_argument("names", nargs="*", help="modules (default: all)")
    args = p.parse_args(argv)
    import movers

    for path in movers.register(args.names or None):
        print(f"registered {path}")
    return 0


def _bench(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ("speed", "correlation", "scale"):
        print("usage: movers bench {speed,correlation,scale} [options]\n"
              "  movers bench correlation --data SET --metric SLUG[=JSON] [...]\n"
              "  movers bench speed --metric SLUG [options of that benchmark]")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    kind, rest = argv[0], argv[1:]
    if kind == "scale":
        from .bench.scale import main as scale

        return scale(rest)
    if kind == "correlation":
        from .bench.correlation import main as run

        return run(rest)
    metric = "moverscore"
    if "--metric" in rest:
        i = rest.index("--metric")
        metric = rest[i + 1]
        rest = rest[:i] + rest[i + 2:]
    try:
        module = importlib.import_module(f"movers.bench.speed_{metric}")
    except ModuleNotFoundError:
        print(f"movers bench speed: no speed benchmark for {metric!r}")
        return 2
    return module.main(rest)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    commands = {"demo": _demo, "register": _register, "bench": _bench}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
