"""``python -m shared.bench systems``: several systems on one test set, and a training loop's repeated evaluations,
with and without the embedding cache.

    python -m shared.bench systems                       # MoverScore, WebNLG 2020's 16 systems x 178 inputs
    python -m shared.bench systems --metric twmd --systems 8 --evaluations 5

Scenarios, each in a fresh process (:func:`shared.bench.harness.fresh`; peak RSS = the process's ``ru_maxrss``:
interpreter, torch and encoder included; the encoder is loaded by a 2-pair call before the clock starts):

* ``one by one``: each system scored by its own call, no cache (what scoring 16 submissions costs today);
* ``one by one, cache``: the same calls with one folder cache (``cache=DIR``, cold at the start): the
  shared references are encoded by the first call only;
* ``one run``: every system in one :func:`movers.compare` call (references encoded once, in memory);
* ``evaluations``: a ``compute_metrics``-style loop: one ``evaluate`` module object, ``--evaluations``
  ``compute`` calls on the same references with a different system's outputs each time (the module's
  in-memory cache); the first evaluation and the mean of the later ones.

``texts encoded`` counts the texts the model ran on (one encoder pass per text;
:func:`movers.core.progress.tally`). The floor (:func:`shared.bench.harness.floor`) is the bare encoder over
every token of every unique text of the test set once (all systems' outputs and the references). Every
scenario's scores are checked equal to the first's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .harness import Runner, floor, fresh, quiet_offline

__all__ = ["main", "load_systems", "render", "scenario"]

SCENARIOS = {"one-by-one": "one by one, no cache", "one-by-one-cache": "one by one, folder cache",
             "one-run": "one run (movers.compare)", "evaluations": "evaluations (module cache)"}


def load_systems(n_systems: int | None = None, n_inputs: int | None = None) -> tuple[dict[str, list[str]],
                                                                                      list[list[str]]]:
    """WebNLG 2020's systems on the inputs every one of them was rated on: {system: outputs}, references."""
    from .data import load_dataset

    records = load_dataset("webnlg2020_human").records
    by_system: dict[str, dict[int, dict]] = {}
    for r in records:
        by_system.setdefault(r["system"], {})[r["sample_id"]] = r
    common = sorted(set.intersection(*(set(s) for s in by_system.values())))[:n_inputs]
    names = sorted(by_system)[:n_systems]
    first = by_system[names[0]]
    systems = {name: [by_system[name][i]["hypothesis"] for i in common] for name in names}
    return systems, [list(first[i]["references"]) for i in common]


def scenario(name: str, metric: str, data: str, cache_dir: str, evaluations: int) -> dict[str, Any]:
    """In a fresh process (:func:`shared.bench.harness.fresh`): one scenario (a key of :data:`SCENARIOS`, or
    "floor") on the systems saved in the JSON file `data`, timed after a 2-pair call that loads the encoder; the
    texts the encoder ran on (:func:`movers.core.progress.tally`) and the scores."""
    quiet_offline()
    saved = json.loads(Path(data).read_text(encoding="utf-8"))
    systems, references = saved["systems"], saved["references"]
    names = list(systems)
    if name == "floor":
        unique = list(dict.fromkeys([t for s in systems.values() for t in s] + [t for r in references for t in r]))
        return {"seconds": floor(unique), "texts": len(unique)}
    import movers
    from movers.core.progress import tally

    fn = getattr(movers, metric)
    fn(["A warm-up text."] * 2, [["It loads the encoder."]] * 2, cache=False)
    scores: dict[str, list[float]] = {}
    times: list[float] = []
    with tally() as done:
        start = time.perf_counter()
        if name == "one-by-one":
            for system in names:
                scores[system] = fn(systems[system], references, cache=False).scores
        elif name == "one-by-one-cache":
            for system in names:
                scores[system] = fn(systems[system], references, cache=cache_dir).scores
        elif name == "one-run":
            result = movers.compare(metric, systems, references, cache=False)
            scores = {system: list(result[metric][system].result.scores) for system in names}
        else:
            module = movers.load(metric)
            for system in names[:evaluations]:
                t = time.perf_counter()
                scores[system] = module.compute(predictions=systems[system], references=references)["scores"]
                times.append(time.perf_counter() - t)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "texts": done.texts_encoded, "evaluations": times, "scores": scores}


def main(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    from movers import metrics as registry

    p = argparse.ArgumentParser(prog="python -m shared.bench systems", description=__doc__.split("\n")[0])
    p.add_argument("--metric", default=registry.DEMO, choices=registry.slugs(plans=True))
    p.add_argument("--systems", type=int, default=None, help="the first N systems (default: all 16)")
    p.add_argument("--inputs", type=int, default=None, help="the first N inputs (default: all 178)")
    p.add_argument("--evaluations", type=int, default=5, help="compute calls in the evaluation loop (default 5)")
    p.add_argument("--json", help="also write the measurements to this file")
    p.add_argument("--render", metavar="JSON", help="print the report of a run saved with --json instead of running")
    args = p.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text(encoding="utf-8"))), end="")
        return 0
    systems, references = load_systems(args.systems, args.inputs)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "systems.json")
        with open(data, "w", encoding="utf-8") as f:
            json.dump({"systems": systems, "references": references}, f)
        environment = {"MOVERS_CACHE": ""}  # no cache but the scenario's own (an empty $MOVERS_CACHE names none)
        base = run(scenario, env=environment, name="floor", metric=args.metric, data=data, cache_dir="",
                     evaluations=0)
        for name in SCENARIOS:
            rows[name] = run(scenario, env=environment, name=name, metric=args.metric, data=data,
                               cache_dir=tempfile.mkdtemp(dir=tmp), evaluations=args.evaluations)
            print(json.dumps({name: {k: v for k, v in rows[name].items() if k != "scores"}}), file=sys.stderr,
                  flush=True)
    want = rows["one-by-one"]["scores"]
    apart = max(abs(a - b) for row in rows.values() for name in row["scores"]
                for a, b in zip(row["scores"][name], want[name], strict=True))
    from movers import REGROUPING_ATOL

    if apart > REGROUPING_ATOL:  # the scenarios group the texts differently: equal to float32 rounding
        raise RuntimeError(f"bench systems: scores differ from scoring one by one without cache by {apart:.2g}, "
                           f"more than the reproducibility bound {REGROUPING_ATOL:g}")
    result = {"metric": args.metric, "systems": len(systems), "inputs": len(references),
              "references": sum(len(r) for r in references), "apart": apart, "floor": base, "rows": rows}
    print(render(result), end="")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


def render(result: dict[str, Any]) -> str:
    """The Markdown report of one run, from what ``--json`` saves (what `main` prints; the docs include it
    rendered from a saved file by ``python -m shared.bench systems --render FILE``)."""
    rows, floor = result["rows"], result["floor"]
    base = rows["one-by-one"]["seconds"]
    lines = [f"{result['metric']}: WebNLG 2020, {result['systems']} systems x {result['inputs']} inputs "
             f"({result['references']} references); floor (bare encoder, every unique text once): "
             f"{floor['seconds']:.2f} s, {floor['texts']} texts, peak {floor['peak_rss_mb']:.0f} MB. Scores equal in "
             f"every scenario to float32 rounding (at most {result['apart']:.1e} apart).", "",
             "| scenario | seconds | x one by one | x floor | texts encoded | peak RSS |", "|---|---|---|---|---|---|"]
    for scenario, label in SCENARIOS.items():
        r = rows[scenario]
        lines.append(f"| {label} | {r['seconds']:.2f} | {r['seconds'] / base:.2f} | "
                     f"{r['seconds'] / floor['seconds']:.2f} | {r['texts']} | {r['peak_rss_mb']:.0f} MB |")
    times = rows["evaluations"]["evaluations"]
    if len(times) > 1:
        later = sum(times[1:]) / len(times[1:])
        lines += ["", f"evaluations: first {times[0]:.2f} s, later ones {later:.2f} s on average "
                      f"({later / times[0]:.2f}x the first): " + ", ".join(f"{t:.2f}" for t in times)]
    return "\n".join(lines) + "\n"
