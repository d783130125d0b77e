"""``python -m shared.bench cold-start``: how long a ``movers`` command takes from a cold start, beside the floor.

    python -m shared.bench cold-start                           # every metric, every --help, 5 rounds
    python -m shared.bench cold-start --metric moverscore --metric twmd --repeats 9
    python -m shared.bench cold-start --against /path/to/other/tree/shared    # the same commands with another movers

Every measurement is a fresh ``python`` process, timed from its start to its exit (the interpreter's start, its
imports and its work): what a user waits for. Side by side in one run, in rounds (each round runs every command
once, so that the load of a shared machine falls on all of them alike):

* the floor: import torch and transformers, load the bundled MiniLM encoder (``AutoTokenizer`` and ``AutoModel``
  from its folder) and run one forward pass over one pair, the least that scoring one pair with an embedding
  metric does;
* ``movers score -m SLUG -r REF -c HYP`` on one pair (the first of ``movers demo``'s pairs) for each metric;
* ``movers --help`` and ``movers COMMAND --help`` for every subcommand (:data:`movers.cli.COMMANDS`).

It prints each command's minimum and median seconds and, for ``movers score``, the ratio of its median to the
floor's median (and of the minima). The goals: ``movers score`` on one pair at most :data:`SCORE_GOAL` times the
floor, every ``--help`` at most :data:`HELP_GOAL` seconds. ``--against DIR`` runs the same commands with the
``movers`` of DIR (a tree's ``shared/`` folder) first on ``PYTHONPATH``, in the same rounds. The processes run
offline, in a Hugging Face home of the run's own where ``movers register`` has run (untimed) first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .harness import OFFLINE

__all__ = ["main", "commands", "report", "timed", "FLOOR", "SCORE_GOAL", "HELP_GOAL"]

SCORE_GOAL = 1.3
"""``movers score`` on one pair: at most this many times the floor (medians)."""
HELP_GOAL = 0.5
"""``movers COMMAND --help``: at most this many seconds (median)."""

FLOOR = """
import sys
import torch, transformers
folder, prediction, reference = sys.argv[1:4]
tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
model = transformers.AutoModel.from_pretrained(folder).eval()
with torch.inference_mode():
    model(**tokenizer([prediction, reference], padding=True, return_tensors="pt"))
"""
"""The floor's program: ``python -c FLOOR MODEL_FOLDER PREDICTION REFERENCE``."""

Run = Callable[[Sequence[str], Mapping[str, str]], float]
"""How a command is timed: (argv, environment) -> seconds from start to exit (:func:`timed`)."""


def timed(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """Seconds from the start of the process `argv` to its exit; a failure is a RuntimeError with its stderr."""
    start = time.perf_counter()
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=dict(env), timeout=600)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"cold-start: `{' '.join(argv)}` exited {proc.returncode}: {proc.stderr[-2000:]}")
    return seconds


def commands(metrics: Sequence[str], files: tuple[str, str], model: str, pair: tuple[str, str]
             ) -> dict[str, list[str]]:
    """Label -> the process to time: the floor, ``movers score`` per metric, every ``--help``."""
    from movers.cli import COMMANDS

    python = sys.executable
    out = {"floor": [python, "-c", FLOOR, model, *pair]}
    hyp, ref = files
    for slug in metrics:
        out[f"score {slug}"] = [python, "-m", "movers", "score", "-m", slug, "-r", ref, "-c", hyp]
    out["--help"] = [python, "-m", "movers", "--help"]
    for name in COMMANDS:
        out[f"{name} --help"] = [python, "-m", "movers", name, "--help"]
    return out


def report(times: Mapping[str, Mapping[str, list[float]]]) -> tuple[str, dict[str, Any]]:
    """The table and its figures from `times` (tree -> label -> seconds of each round): min and median, the
    ratios of ``score`` to the floor, each checked against its goal."""
    lines: list[str] = []
    figures: dict[str, Any] = {}
    for tree, runs in times.items():
        floor_min, floor_med = min(runs["floor"]), statistics.median(runs["floor"])
        rows = []
        for label, seconds in runs.items():
            low, mid = min(seconds), statistics.median(seconds)
            entry: dict[str, Any] = {"min": low, "median": mid, "runs": len(seconds)}
            goal = ""
            if label.startswith("score ") and not label.endswith("--help"):
                entry.update(ratio=mid / floor_med, ratio_min=low / floor_min)
                goal = "ok" if entry["ratio"] <= SCORE_GOAL else f"over {SCORE_GOAL}x"
            elif label.endswith("--help"):
                goal = "ok" if mid <= HELP_GOAL else f"over {HELP_GOAL} s"
            entry["goal"] = goal
            figures.setdefault(tree, {})[label] = entry
            ratio = f"{entry['ratio']:.2f}x ({entry['ratio_min']:.2f}x)" if "ratio" in entry else ""
            rows.append([label, f"{low:.2f}", f"{mid:.2f}", ratio, goal])
        header = ["command", "min s", "median s", "median/floor (min/min)", "goal"]
        widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
        lines += [f"{tree}: {len(runs['floor'])} rounds, each command a fresh process", ""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
        lines.append("")
    return "\n".join(lines), figures


def main(argv: list[str] | None = None, *, run: Run = timed) -> int:
    from movers import metrics as registry
    from movers.cli import DEMO_PAIRS

    p = argparse.ArgumentParser(prog="python -m shared.bench cold-start", description=__doc__.split("\n")[0])
    p.add_argument("--metric", action="append", choices=registry.slugs(), metavar="SLUG",
                   help="repeatable; default: every registered metric")
    p.add_argument("--repeats", type=int, default=5, help="rounds (default 5)")
    p.add_argument("--against", metavar="DIR", help="another tree's shared/ folder, measured in the same rounds")
    p.add_argument("--json", metavar="FILE", help="also write the figures to this file")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    from .harness import model_folder

    pair = DEMO_PAIRS[0]
    model = model_folder()
    trees = {"this tree": None, **({f"against {args.against}": args.against} if args.against else {})}
    times: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
    with tempfile.TemporaryDirectory(prefix="movers-cold-start-") as folder:
        hyp, ref = Path(folder, "hyp.txt"), Path(folder, "ref.txt")
        hyp.write_text(pair[0] + "\n", encoding="utf-8")
        ref.write_text(pair[1] + "\n", encoding="utf-8")
        todo = commands(args.metric or registry.slugs(), (str(hyp), str(ref)), model, pair)
        envs: dict[str, dict[str, str]] = {}
        for tree, path in trees.items():  # a Hugging Face home of the run's own, the modules registered untimed
            envs[tree] = {**os.environ, **OFFLINE, "HF_HOME": str(Path(folder, "hf", str(len(envs))))}
            if path is not None:
                envs[tree]["PYTHONPATH"] = os.pathsep.join([path, *filter(None, [os.environ.get("PYTHONPATH")])])
            run([sys.executable, "-m", "movers", "register"], envs[tree])
        for _ in range(args.repeats):
            for label, command in todo.items():
                for tree in trees:
                    times[tree].setdefault(label, []).append(run(command, envs[tree]))
    text, figures = report(times)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0
