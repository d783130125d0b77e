"""movers: optimal-transport metrics for generated text (command line).

usage: movers COMMAND [options]      (movers COMMAND --help for its options)

    movers score -m SLUG -r REFS -c HYPS   score a hypothesis file against reference files (sacreBLEU-style)
    movers explain -m SLUG HYP REF -o plan.png   heatmap of one pair's transport plan
    movers demo                      score a few real sentence pairs with evaluate.load("moverscore")
    movers register                  register the evaluate modules for bare-name offline loading
    movers bench correlation ...     metric vs human judgments (see movers.bench.correlation)
    movers bench suite ...           settings over every development / validation set (movers.bench.suite)
    movers bench validation ...      the final validation tables: full sets, both levels, vs BERTScore
    movers bench speed ...           side-by-side timings (vs the original where there is one; --generic: any metric;
                                     --lengths 50,200,800,2000: every metric by text length)
    movers bench baselines ...       recompute the shipped rescaling baselines (movers/data/baselines.json)
    movers bench scale ...           peak memory vs corpus size, throughput with 1 and 2 processes
    movers bench systems ...         several systems and repeated evaluations, with and without the cache
    movers bench long-texts ...      how to read texts longer than the encoder's window, on summaries vs sources
    movers space build <slug|all> <dir>   Hugging Face Space folders (see movers.space)
    movers cache info|clear [--cache DIR]   an embedding cache folder (movers score --cache DIR, MOVERS_CACHE)
    movers lm-eval tasks             print the lm-evaluation-harness task folder (lm-eval run --include_path DIR)
    movers docs [--build DIR]        build the documentation site of this checkout and serve it (offline)
    movers --version                 print the version
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings

__all__ = ["main"]

DEMO_PAIRS = [
    # (prediction, reference): WMT16 cs-en / de-en style sentences and a paraphrase pair.
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("A quick brown fox jumps over the lazy dog.", "The fast brown fox leaped over a lazy dog."),
    ("He went to the store to buy milk.", "She stayed at home and read a book."),
]


def _demo(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="movers demo", description="Score real pairs with evaluate.load('moverscore').")
    from .. import metrics as registry
    from ..integrations.hub.loading import module_names

    p.add_argument("--metric", default=registry.DEMO, choices=module_names(), metavar="SLUG",
                   help=f"the evaluate module loaded by its bare name and run on the demo pairs (default "
                        f"{registry.DEMO}; one of {', '.join(module_names())})")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import evaluate

    import movers

    movers.register([args.metric])
    # bare name: resolved from evaluate's module cache, offline. evaluate logs "Using the latest cached version
    # ... since it couldn't be found ... on the Hugging Face Hub" for every such load, which reads as a failure
    # on the demo's first line: silenced for this one load.
    verbosity = evaluate.logging.get_verbosity()
    evaluate.logging.set_verbosity_error()
    try:
        metric = evaluate.load(args.metric)
    finally:
        evaluate.logging.set_verbosity(verbosity)
    preds, refs = zip(*DEMO_PAIRS, strict=False)
    result = metric.compute(predictions=list(preds), references=list(refs))
    for (pred, ref), score in zip(DEMO_PAIRS, result["scores"], strict=False):
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

    try:
        written = movers.register(args.names or None)
    except OSError as err:
        print(f"movers register: error: cannot write {getattr(err, 'filename', None) or 'the module cache'} "
              f"({err.strerror or err}); set HF_HOME (or HF_MODULES_CACHE) to a writable folder.", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"movers register: error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"registered {path}")
    return 0


def _bench(argv: list[str]) -> int:
    if argv and argv[0] == "baselines":
        from ..bench.baselines import main as run_baselines

        return run_baselines(argv[1:])
    if argv and argv[0] == "ray":
        from ..bench.ray import main as run_ray

        return run_ray(argv[1:])
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ("speed", "correlation", "suite", "scale",
                                                                  "systems", "validation", "long-texts"):
        print("usage: movers bench {speed,correlation,suite,validation,long-texts,scale,systems,baselines,ray} "
              "[options]\n"
              "  movers bench correlation --data SET --metric SLUG[=JSON] [...]\n"
              "  movers bench suite --suite {dev,validation} --metric SLUG[=JSON] [...]\n"
              "  movers bench validation [--model DIR --encoder NAME] | --render DIR [--write]\n"
              "  movers bench long-texts [--split {dev,validation}] | --render JSON [--write]\n"
              "  movers bench speed --metric SLUG [options of that benchmark]   (vs the original)\n"
              "  movers bench speed --generic --metric SLUG [...] [--against DIR]   (time, memory, floor)\n"
              "  movers bench speed --lengths 50,200,800,2000 [--threads N] [--metric SLUG ...]   (long texts)\n"
              "  movers bench scale [options]   (peak memory vs corpus size, throughput)\n"
              "  movers bench systems [--metric SLUG]   (16 systems, repeated evaluations; embedding cache)\n"
              "  movers bench ray [--metric SLUG --pairs N --memory N,N]   (Ray Data vs one process; memory)\n"
              "  movers bench baselines [--pairs N --out FILE]   (the shipped rescaling baselines)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    kind, rest = argv[0], argv[1:]
    if kind == "systems":
        from ..bench.systems import main as systems

        return systems(rest)
    if kind == "scale":
        from ..bench.scale import main as scale

        return scale(rest)
    if kind == "correlation":
        from ..bench.correlation import main as run

        try:
            return run(rest)
        except FileNotFoundError as e:  # no data folder: one line naming $MOVERS_DATA, not a traceback
            print(f"movers bench correlation: error: {e}", file=sys.stderr)
            return 2
    if kind == "suite":
        from ..bench.suite import main as run_suite

        return run_suite(rest)
    if kind == "validation":
        from ..bench.validation import main as validation

        return validation(rest)
    if kind == "long-texts":
        from ..bench.long_texts import main as long_texts

        try:
            return long_texts(rest)
        except FileNotFoundError as e:
            print(f"movers bench long-texts: error: {e}", file=sys.stderr)
            return 2
    from .. import metrics as registry

    if "--lengths" in rest:  # every metric by text length, beside the floor and bert-score
        from ..bench.lengths import main as by_length

        try:
            return by_length(rest)
        except FileNotFoundError as e:
            print(f"movers bench speed: error: {e}", file=sys.stderr)
            return 2
    if "--generic" in rest:  # time and peak memory of any metric, beside the encoder floor (and other trees)
        from ..bench.speed import main as generic

        return generic([a for a in rest if a != "--generic"])
    metric = registry.DEMO
    if "--metric" in rest:
        i = rest.index("--metric")
        metric = rest[i + 1]
        rest = rest[:i] + rest[i + 2:]
    try:  # a comparison with the metric's original implementation, where movers has one
        module = importlib.import_module(f"movers.bench.speed_{metric}")
    except ModuleNotFoundError:
        from ..bench.speed import main as generic

        print(f"movers bench speed: no comparison with the original for {metric!r}; time and memory instead",
              file=sys.stderr)
        return generic(["--metric", metric, *rest])
    return module.main(rest)


def _explain(argv: list[str]) -> int:
    from .explain import main as run

    return run(argv)


def _score(argv: list[str]) -> int:
    from .score import main as run

    return run(argv)


def _cache(argv: list[str]) -> int:
    from .cache import main as run

    return run(argv)


def _space(argv: list[str]) -> int:
    from ..integrations.spaces.build import main as run

    return run(argv)


def _lm_eval(argv: list[str]) -> int:
    if argv != ["tasks"]:
        print("usage: movers lm-eval tasks\n  prints the folder of movers' lm-evaluation-harness task template and its "
              "utils.py, for `lm-eval run --include_path \"$(movers lm-eval tasks)\" --tasks movers_template ...`",
              file=sys.stdout if argv in (["-h"], ["--help"]) else sys.stderr)
        return 0 if argv in (["-h"], ["--help"]) else 2
    try:
        from ..integrations.harnesses.lm_eval import TASKS
    except ImportError as err:
        print(f"movers lm-eval: error: {err}", file=sys.stderr)
        return 2
    print(TASKS)
    return 0


def _docs(argv: list[str]) -> int:
    from .docs import main as run

    return run(argv)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line on stderr (no source line of the library): ``movers: warning: ...``."""
    text = str(message)
    text = text[len("movers: "):] if text.startswith("movers: ") else text
    print(f"movers: warning: {text}", file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.showwarning = _one_line_warning
    if argv[:1] != ["register"]:  # `movers register` says itself what it could not write
        from ..integrations.hub.loading import autoregister

        autoregister()
    if argv and argv[0] in ("-V", "--version"):
        from .. import __version__

        print(f"movers {__version__}")
        return 0
    commands = {"demo": _demo, "register": _register, "bench": _bench, "score": _score,
                "explain": _explain, "space": _space, "cache": _cache, "lm-eval": _lm_eval, "docs": _docs}
    if not argv or argv[0] not in commands:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"movers: error: unknown command {argv[0]!r}; the commands are listed below.", file=sys.stderr)
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
