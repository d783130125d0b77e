"""Score line files with one metric, in one process or across the ranks of ``torchrun``.

    python -m movers.distributed_score --metric moverscore -c hyps.txt -r refs.txt --opt idf=true
    torchrun --nproc_per_node 2 -m movers.distributed_score --metric twmd -c hyps.txt -r refs.txt

Files hold one text per line; each ``-r`` file is one reference stream (line i of every file is a
reference of hypothesis i). Under torchrun (``WORLD_SIZE`` set) the process group is initialised
(NCCL when CUDA is available, else gloo), every rank reads the files and scores its shard inside
:func:`movers.distributed_scoring`, and rank 0 prints the result as JSON: ``metric``, ``score``,
``scores`` (input order), ``signature``, ``world_size``. ``--block-size N`` streams the pairs in
blocks (:func:`movers.score_stream`; one process).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main"]


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m movers.distributed_score", description=__doc__.split("\n")[0])
    p.add_argument("--metric", "-m", required=True)
    p.add_argument("--predictions", "-c", required=True, help="hypotheses, one per line")
    p.add_argument("--references", "-r", required=True, action="append", help="reference file (repeatable)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="metric option, VALUE parsed as JSON when it is JSON (idf=true, centering=corpus)")
    p.add_argument("--block-size", type=int, default=None, help="stream in blocks of this many pairs")
    args = p.parse_args(argv)
    from .streaming import METRICS

    if args.metric not in METRICS:
        p.error(f"unknown --metric {args.metric!r}; choose one of {list(METRICS)}")
    options = {}
    for item in args.opt:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--opt must be KEY=VALUE, got {item!r}")
        options[key] = _value(value)
    preds = _lines(args.predictions)
    streams = [_lines(path) for path in args.references]
    for path, stream in zip(args.references, streams):
        if len(stream) != len(preds):
            p.error(f"reference file {path!r} has {len(stream)} lines, the predictions {len(preds)}")
    refs = [[s[i] for s in streams] for i in range(len(preds))]

    import movers

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if world > 1:
        if args.block_size is not None:
            p.error("--block-size streams in one process; leave it out under torchrun")
        import torch
        import torch.distributed as dist

        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        rank = dist.get_rank()
        with movers.distributed_scoring():
            result = getattr(movers, args.metric)(preds, refs, **options)
        dist.destroy_process_group()
    elif args.block_size is not None:
        result = movers.score_stream(args.metric, preds, refs, block_size=args.block_size, **options)
    else:
        result = getattr(movers, args.metric)(preds, refs, **options)
    if rank == 0:
        json.dump({"metric": args.metric, "score": result.score, "scores": list(result.scores),
                   "signature": result.signature, "world_size": world}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
