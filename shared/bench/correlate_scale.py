"""``python -m shared.bench correlate-scale``: time and peak memory of movers correlate against records and resamples.

    python -m shared.bench correlate-scale                                 # 10k, 100k, 1M records x 500, 1,000
    python -m shared.bench correlate-scale --sizes 10000,100000 --resamples 1000 --json out.json

Each measurement runs in a fresh process (:func:`shared.bench.harness.fresh`): it builds the records in memory
(one judged output each: a short prediction and reference, a human score, and the metric's score in a field,
``column:metric``, so that only the statistics are measured, not a metric), notes its resident set then
(``VmRSS``: the records and the interpreter), and calls :func:`movers.correlate` at the segment level with the
default statistics (Pearson, Spearman, Kendall) and ``--bootstrap`` resamples. Reported: the call's time, the
time inside the statistics (:func:`movers.core.agreement.level_correlations`), the resident set with the
records (after a first tiny call has imported everything the call needs), and the process's peak
(``ru_maxrss``) and peak beyond the records. Wall time depends on what else the machine runs; the call's CPU
time (``time.process_time``: numpy here is single-threaded) is the figure to compare. The scores are a seeded normal
human score and a metric of it plus noise, rounded to 2 decimals (ties, as real metrics have).
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any

from .harness import fresh

__all__ = ["main", "measure", "SIZES", "RESAMPLES"]

SIZES = (10_000, 100_000, 1_000_000)
"""Records per measurement (the issue's goal: at most 1 GB beyond the records at 1M)."""
RESAMPLES = (500, 1000)
"""Resamples per measurement: two counts, to show time linear in them."""


def _rss_mb() -> float:
    """The process's resident set now, from /proc (MiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(records: int, resamples: int, seed: int = 0) -> dict[str, Any]:
    """One measurement (run in a fresh process): ``movers.correlate`` of `records` in-memory records with one
    ``column:`` metric and `resamples` resamples."""
    import numpy as np

    import movers
    from movers.core import agreement

    warm = [{"prediction": "p", "references": ["r"], "human": float(i % 3), "metric": float(i % 5)} for i in range(9)]
    movers.correlate(warm, "column:metric", resamples=2)  # every module the call imports, before the baseline
    rng = np.random.default_rng(seed)
    human = rng.normal(size=records)
    metric = np.round(human + rng.normal(size=records), 2)
    rows = [{"prediction": "p", "references": ["r"], "human": float(h), "metric": float(m)}
            for h, m in zip(human, metric, strict=True)]
    del human, metric
    with_records = _rss_mb()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    inside = [0.0]
    original = agreement.level_correlations

    def timed(*args: Any, **kwargs: Any) -> agreement.LevelResult:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            inside[0] += time.perf_counter() - start

    from movers.api import agreement as api

    api.stats.level_correlations = timed
    start, cpu = time.perf_counter(), time.process_time()
    result = movers.correlate(rows, "column:metric", resamples=resamples, seed=seed)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    out = result.to_dict()["metrics"]["column:metric"]
    return {"records": records, "resamples": resamples, "seconds": seconds, "cpu_seconds": cpu,
            "statistics_seconds": inside[0],
            "rss_with_records_mb": with_records, "peak_before_call_mb": peak_before,
            "pearson": out["pearson"]["value"], "kendall": out["kendall"]["value"]}


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| records | resamples | wall time (s) | CPU time (s) | in the statistics, wall (s) | RSS with the "
             "records (MB) | peak (MB) | peak beyond the records (MB) |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['records']:,} | {r['resamples']:,} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
                     f"{r['statistics_seconds']:.1f} | "
                     f"{r['rss_with_records_mb']:.0f} | {r['peak_rss_mb']:.0f} | "
                     f"{r['peak_rss_mb'] - r['rss_with_records_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench correlate-scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="records per measurement, comma-separated")
    p.add_argument("--resamples", default=",".join(map(str, RESAMPLES)), help="resamples, comma-separated")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for resamples in (int(r) for r in args.resamples.split(",")):
            row = fresh(measure, records=size, resamples=resamples)
            rows.append(row)
            print(_table([row]).splitlines()[-1], flush=True)
    print()
    print(_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0
