"""``movers score`` past one process: ``--ray DATA`` (a data set file or folder on a Ray cluster) and ``--shard``
(under torchrun, each rank reading only its own lines)."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from .. import metrics as registry
from .score import UsageError

__all__ = ["run_ray", "run_shard", "read_shard"]

_READERS = {".parquet": "read_parquet", ".jsonl": "read_json", ".json": "read_json", ".csv": "read_csv"}


def _reader(path: Path) -> str:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    kinds = {_READERS.get(p.suffix.lower()) for p in files} - {None}
    if len(kinds) != 1:
        raise UsageError(f"--ray {str(path)!r}: expected Parquet, JSONL or CSV files (.parquet, .jsonl/.json, .csv), "
                         f"found {sorted(p.suffix for p in files)[:5] or 'no files'}.")
    return kinds.pop()  # type: ignore[return-value]


def run_ray(args: argparse.Namespace, slugs: list[str], options: dict[str, dict[str, Any]]) -> int:
    """Score the data set on Ray with each metric; print the corpus results; with --output write per metric
    ``<slug>.parquet`` (a folder of Parquet files: the input columns and the score) and ``<slug>.json`` (the
    corpus score, the signature and the metric's corpus-level outputs, e.g. ΔBLEU's counts)."""
    from .score import _render

    if args.per_segment or args.confidence or args.paired_bs or args.paired_ar:
        raise UsageError("--ray writes the per-row scores with --output DIR; --per-segment, --confidence and the "
                         "paired tests need every score in one process (score the written Parquet files).")
    path = Path(args.ray)
    if not path.exists():
        raise UsageError(f"--ray {args.ray!r} does not exist.")
    reader = _reader(path)  # before a cluster is started or joined
    try:
        import ray
        import ray.data

        from ..integrations.ray import score
    except ImportError as err:
        raise UsageError(str(err)) from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = args.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = bool(args.progress)
    results = {}
    try:
        ds = getattr(ray.data, reader)(str(path))
        for slug in slugs:
            spec = registry.get(slug)
            call = dict(options.get(slug, {}))
            if args.weights_column and "reference_weights" in spec.extra_inputs:
                call["reference_weights"] = args.weights_column
            try:
                result = score(ds, slug, prediction=args.prediction_column,
                               reference=args.reference_column or "reference", index=args.index_column,
                               concurrency=args.actors, **call)
            except (TypeError, ValueError) as err:
                raise UsageError(str(err)) from None
            if args.output:
                out = Path(args.output)
                out.mkdir(parents=True, exist_ok=True)
                result.write_parquet(str(out / f"{slug}.parquet"))
                (out / f"{slug}.json").write_text(json.dumps(result.to_dict(), indent=1, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
            results[slug] = result
        sys.stdout.write(_render(args, results, {}))
    finally:
        ray.shutdown()
    return 0


def read_shard(path: str, what: str, rank: int, world: int, multiple: int = 1) -> list[str]:
    """This rank's contiguous share of the lines of `path` (balanced in runs of `multiple` lines), read without
    holding the other ranks' lines: one pass counts the lines, a second keeps this rank's."""
    from ..core.scope import shard_bounds

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file {path!r} does not exist (--shard reads files, not standard input).")
    with p.open(encoding="utf-8", newline=None) as f:
        n = sum(1 for _ in f)
    empty = [r for r in range(world) if len(range(*shard_bounds(n, world, r, multiple))) == 0]
    if empty:  # every rank sees the same counts and stops here alike, before any collective
        runs = f" in runs of {multiple} (batch centring)" if multiple > 1 else ""
        raise UsageError(f"--shard: {what} file {path!r} has {n} lines{runs}, too few for {world} ranks: rank "
                         f"{empty[0]} would have none; score it without --shard, or on fewer ranks.")
    start, stop = shard_bounds(n, world, rank, multiple)
    lines = []
    with p.open(encoding="utf-8", newline=None) as f:
        for i, line in enumerate(f):
            if i >= stop:
                break
            if i >= start:
                lines.append(line[:-1] if line.endswith("\n") else line)
    return lines


def run_shard(args: argparse.Namespace, slugs: list[str], options: dict[str, dict[str, Any]]) -> int:
    """``--shard`` under torchrun: each rank reads its own lines and scores them inside
    ``distributed_scoring(sharded=True)``; rank 0 prints the corpus results of all lines."""
    from ..core.scope import launched_scoring
    from ..pipeline.call import make_options
    from .score import _render, score_texts

    if args.per_segment or args.confidence or len(args.cands) > 1:
        raise UsageError("--shard keeps each rank's segment scores on that rank; it prints corpus results of one "
                         "system (no --per-segment, --confidence or several systems).")
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    multiple = 1
    for slug in slugs:  # batch centring: every rank holds whole runs of consecutive segments
        o = make_options(registry.get(slug), options.get(slug, {}))
        if getattr(o, "centering", None) == "batch":
            multiple = math.lcm(multiple, int(o.centering_batch))
    hyps = read_shard(args.cands[0], "hypothesis", rank, world, multiple)
    refs = [read_shard(path, "reference", rank, world, multiple) for path in args.refs]
    if len({len(hyps), *(len(r) for r in refs)}) > 1:
        raise UsageError("files must have the same number of lines.")
    with launched_scoring(sharded=True) as rank:
        results = score_texts(slugs, hyps, [list(group) for group in zip(*refs, strict=True)], options)
    if rank == 0:
        sys.stdout.write(_render(args, results, {}))
    return 0
