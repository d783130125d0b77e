"""``movers score --shard`` under torchrun: each rank reads only its own contiguous share of the lines and scores it
inside ``distributed_scoring(sharded=True)``; rank 0 prints the corpus results of all lines."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from .. import metrics as registry
from ..core.scope import RankFailed, launched_scoring, shard_bounds
from ..pipeline.call import make_options
from ..pipeline.passes import run_length
from .common import UsageError, decoded, render, score_texts, where

__all__ = ["run_shard", "read_shard", "count_lines"]


def count_lines(path: str, what: str) -> int:
    """Lines of a UTF-8 text file (universal line ends, as :func:`movers.cli.common.read_lines` reads them),
    read in one pass without holding them; a missing, empty or not-UTF-8 file is a :class:`UsageError` naming it
    (and the line)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file {path!r} does not exist (--shard reads files, not standard input).")
    n, last = 0, b""
    with p.open("rb") as f:
        for raw in f:
            decoded(raw, f"{what} file {path!r}", n + 1)
            n += raw.count(b"\r") - raw.count(b"\r\n") + (1 if raw.endswith(b"\n") else 0)
            last = raw
    if last and not last.endswith((b"\n", b"\r")):
        n += 1  # a last line without its line end
    if n == 0:
        raise UsageError(f"{what} file {path!r} is empty; expected one text per line.")
    return n


def read_shard(path: str, what: str, rank: int, world: int, multiple: int = 1, n: int | None = None) -> list[str]:
    """This rank's contiguous share of the `n` lines of `path` (balanced in runs of `multiple` lines), read without
    holding the other ranks' lines (:func:`count_lines` counts them first when `n` is None)."""
    n = count_lines(path, what) if n is None else n
    empty = [r for r in range(world) if len(range(*shard_bounds(n, world, r, multiple))) == 0]
    if empty:  # every rank sees the same counts and stops here alike, before any collective
        runs = f" in runs of {multiple} (batch centring)" if multiple > 1 else ""
        raise UsageError(f"--shard: {what} file {path!r} has {n} lines{runs}, too few for {world} ranks: rank "
                         f"{empty[0]} would have none; score it without --shard, or on fewer ranks.")
    start, stop = shard_bounds(n, world, rank, multiple)
    lines = []
    with Path(path).open(encoding="utf-8", newline=None) as f:
        for i, line in enumerate(f):
            if i >= stop:
                break
            if i >= start:
                lines.append(line[:-1] if line.endswith("\n") else line)
    return lines


def run_shard(args: argparse.Namespace, slugs: list[str], options: dict[str, dict[str, Any]]) -> int:
    """``--shard`` under torchrun: each rank reads its own lines and scores them inside
    ``distributed_scoring(sharded=True)``; rank 0 prints the corpus results of all lines."""
    if args.per_segment or args.confidence or len(args.cands) > 1:
        raise UsageError("--shard keeps each rank's segment scores on that rank; it prints corpus results of one "
                         "system (no --per-segment, --confidence or several systems).")
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    multiple = 1
    for slug in slugs:  # batch centring: every rank holds whole runs of consecutive segments
        try:
            multiple = math.lcm(multiple, run_length(make_options(registry.get(slug), options.get(slug, {}))))
        except (TypeError, ValueError) as err:
            raise UsageError(str(err)) from None
    files = {"hypothesis": [args.cands[0]], "reference": list(args.refs)}
    counts = {path: count_lines(path, what) for what, paths in files.items() for path in paths}
    if len(set(counts.values())) > 1:  # every rank sees the same counts: refused alike, before any collective
        raise UsageError("files must have the same number of lines, got "
                         + ", ".join(f"{path}: {n}" for path, n in counts.items()) + ".")
    n = counts[args.cands[0]]
    hyps = read_shard(args.cands[0], "hypothesis", rank, world, multiple, n)
    refs = [read_shard(path, "reference", rank, world, multiple, n) for path in args.refs]
    first_line = shard_bounds(n, world, rank, multiple)[0] + 1
    with launched_scoring(sharded=True) as rank:
        try:
            results = score_texts(slugs, hyps, [list(group) for group in zip(*refs, strict=True)], options)
        except (TypeError, ValueError, RankFailed) as err:
            raise UsageError(where(str(err), args.cands[0], list(args.refs), first_line)) from None
    if rank == 0:
        sys.stdout.write(render(args, results))
    return 0
