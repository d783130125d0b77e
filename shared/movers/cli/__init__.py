"""The ``movers`` command: what works from the installed wheel on a user's own files.

A module per command, and one for what they share: ``score`` (``movers score``; ``tables`` renders several systems'
tables), ``ray`` (``movers score --ray``, a data set on Ray), ``shard`` (``movers score --shard``, each torchrun
rank its own lines), ``explain``, ``cache`` and ``correlate`` (agreement with human judgments); ``common`` holds
the errors (one line for a user's mistake or a missing resource, a traceback for a bug: the rule is its docstring),
the parser, the reading of files, ``--opt`` parsing and the one renderer. ``demo``, ``register``, ``space``,
``lm-eval`` and ``lighteval`` are a few lines each, here. :data:`COMMANDS` declares the subcommands, :data:`USAGE`
is what ``movers --help`` prints. A parser is built from the declarations without importing torch, transformers or
POT: a command imports what it runs when it runs it.
"""
from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence

from .common import CommandParser, UsageError, guarded

__all__ = ["main", "USAGE", "COMMANDS"]

USAGE = """movers: optimal-transport metrics for generated text (command line).

usage: movers COMMAND [options]      (movers COMMAND --help for its options)

    movers score -m SLUG -r REFS -c HYPS   score a hypothesis file against reference files (sacreBLEU-style);
                                     --ray DATA: a data set on a Ray cluster; --shard: each torchrun rank its lines
    movers explain -m SLUG HYP REF -o plan.png   heatmap of one pair's transport plan
    movers correlate JUDGMENTS.jsonl -m METRIC ...   correlation with human judgments (segment, system, summary)
    movers demo                      score a few real sentence pairs with evaluate.load("moverscore")
    movers register                  register the evaluate modules for bare-name offline loading
    movers space build <slug|all> <dir>   Hugging Face Space folders, each with the movers wheel
    movers cache info|clear [--cache DIR]   an embedding cache folder (movers score --cache DIR, MOVERS_CACHE)
    movers lm-eval tasks             print the lm-evaluation-harness task folder (lm-eval run --include_path DIR)
    movers lighteval tasks           print the LightEval task file (lighteval accelerate ... --custom-tasks FILE)
    movers --version                 print the version

The studies, timings and the documentation site run from a checkout of the repository, at its root:
python -m shared.bench STUDY (docs/development.md).
"""

DEMO_PAIRS = [
    # (prediction, reference): WMT16 cs-en / de-en style sentences and a paraphrase pair.
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("A quick brown fox jumps over the lazy dog.", "The fast brown fox leaped over a lazy dog."),
    ("He went to the store to buy milk.", "She stayed at home and read a book."),
]


def _demo(argv: list[str]) -> int:
    p = CommandParser(prog="movers demo", description="Score real pairs with evaluate.load('moverscore').")
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
    p = CommandParser(prog="movers register",
                                description="Copy the module scripts into evaluate's cache so that "
                                            "evaluate.load('<slug>') works offline in any process.")
    p.add_argument("names", nargs="*", help="modules (default: all)")
    args = p.parse_args(argv)
    import movers

    try:
        written = movers.register(args.names or None)
    except OSError as err:
        raise UsageError(f"cannot write {getattr(err, 'filename', None) or 'the module cache'} "
                         f"({err.strerror or err}); set HF_HOME (or HF_MODULES_CACHE) to a writable folder.") from None
    for path in written:
        print(f"registered {path}")
    return 0


def _explain(argv: list[str]) -> int:
    from .explain import run

    return run(argv)


def _score(argv: list[str]) -> int:
    from .score import run

    return run(argv)


def _correlate(argv: list[str]) -> int:
    from .correlate import run

    return run(argv)


def _cache(argv: list[str]) -> int:
    from .cache import run

    return run(argv)


def _space(argv: list[str]) -> int:
    p = CommandParser(prog="movers space", description="Build Hugging Face Space folders (upload one with "
                                                        "`hf upload <org>/<slug> <dir>/<slug> . --repo-type=space`).")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="assemble <dir>/<slug>/ for one metric or all six")
    b.add_argument("slug", help="a metric slug, or 'all'")
    b.add_argument("dir", help="output folder; each Space goes to <dir>/<slug>/")
    b.add_argument("--wheel", help="a movers wheel to ship (default: built from the source tree, or packed from "
                                   "the installed files)")
    args = p.parse_args(argv)
    import tempfile
    from pathlib import Path

    from ..integrations.hub.loading import module_names
    from ..integrations.spaces.build import build, build_wheel

    slugs = module_names() if args.slug == "all" else [args.slug]
    try:
        wheel = Path(args.wheel) if args.wheel else None
        with tempfile.TemporaryDirectory() as tmp:
            if wheel is None and len(slugs) > 1:
                wheel = build_wheel(tmp)
            for slug in slugs:
                print(f"built {build(slug, args.dir, wheel=wheel)}")
    except FileNotFoundError as err:
        raise UsageError(f"{err.strerror}: {err.filename!r}" if err.filename else str(err)) from None
    except ValueError as err:
        raise UsageError(str(err)) from None
    return 0


def _tasks_parser(prog: str, description: str) -> CommandParser:
    """``movers lm-eval|lighteval tasks``: one action, no option."""
    p = CommandParser(prog=prog, description=description)
    p.add_argument("action", choices=["tasks"], metavar="tasks", help="print it")
    return p


def _lm_eval(argv: list[str]) -> int:
    _tasks_parser("movers lm-eval", "Print the folder of movers' lm-evaluation-harness task template and its "
                                    "utils.py, for `lm-eval run --include_path \"$(movers lm-eval tasks)\" --tasks "
                                    "movers_template ...`.").parse_args(argv)
    try:
        from ..integrations.harnesses.lm_eval import TASKS
    except ImportError as err:
        raise UsageError(str(err)) from None
    print(TASKS)
    return 0


def _lighteval(argv: list[str]) -> int:
    _tasks_parser("movers lighteval", "Print the path of movers' LightEval task file (the task movers_template), "
                                      "for `lighteval accelerate MODEL_ARGS \"movers_template|0\" --custom-tasks "
                                      "\"$(movers lighteval tasks)\" ...`.").parse_args(argv)
    import importlib.util

    from ..integrations import harnesses, missing_extra

    if importlib.util.find_spec("lighteval") is None:  # the file imports it; its path alone does not
        raise UsageError(missing_extra("movers.integrations.harnesses.lighteval", "lighteval", "lighteval"))
    print(harnesses.LIGHTEVAL_TASKS)
    return 0


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "score": _score, "explain": _explain, "correlate": _correlate, "demo": _demo, "register": _register,
    "space": _space, "cache": _cache, "lm-eval": _lm_eval, "lighteval": _lighteval}
"""Every subcommand: ``movers NAME ARGS`` runs ``COMMANDS[NAME](ARGS)`` through :func:`movers.cli.common.guarded`
(one-line errors; the rule is in :mod:`movers.cli.common`)."""


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line on stderr (no source line of the library): ``movers: warning: ...``."""
    text = str(message)
    text = text[len("movers: "):] if text.startswith("movers: ") else text
    print(f"movers: warning: {text}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["bench"], ["docs"]):  # they need the repository's data, pages and cards, not only the package
        print(f"movers: error: `movers {argv[0]}` runs from a checkout of the repository, at its root: "
              f"python -m shared.bench {'STUDY' if argv[0] == 'bench' else 'docs'} (docs/development.md).",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.showwarning = _one_line_warning
    if argv[:1] != ["register"]:  # `movers register` says itself what it could not write
        from ..integrations.hub.loading import autoregister

        autoregister()
    if argv and argv[0] in ("-V", "--version"):
        from .. import __version__

        print(f"movers {__version__}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"movers: error: unknown command {argv[0]!r}; the commands are listed below.", file=sys.stderr)
        print(USAGE)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return guarded(f"movers {argv[0]}", COMMANDS[argv[0]], argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
