"""``python -m shared.bench scale``: peak memory against corpus size, and throughput with 1 and 2 processes.

    python -m shared.bench scale                                   # every metric, base 200 pairs, sizes 1x and 10x
    python -m shared.bench scale --metric twmd --base 2000 --sizes 1,10,100 --processes 1,2

Each measurement runs in a fresh process (:func:`shared.bench.harness.fresh`; peak RSS = the process's
``ru_maxrss``, which includes the Python interpreter, torch and the loaded encoder). The ``size x`` corpus is
the first ``base`` pairs of WMT15/16 (development) repeated ``size`` times, so that only the corpus size
changes, not the longest text (the encoder's activations grow with the longest batch; ``--distinct`` takes the first
``base x size`` distinct pairs instead, cycling the 4,240 beyond that), read through
:func:`movers.score_stream` in blocks of ``--block-size`` pairs, with the call-level statistics on
(per-call IDF for MoverScore and Lazy-EMD, batch centring for TWMD). ``call`` is one plain call on the
base corpus (``--call-sizes``: also on its multiples, built the same way); ``bert-score`` is a loaded
``BERTScorer`` (:func:`shared.bench.harness.bertscorer`) on the same base pairs with the same encoder (bundled
MiniLM, last layer).
Throughput: pairs per second of one plain call on the base corpus, in 1 process and under torchrun
with N processes (:func:`movers.distributed_scoring`, gloo, one thread each), timed on rank 0 from a
barrier after the encoder is loaded to the gathered result.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from typing import Any

from .harness import Runner, bertscorer, fresh, quiet_offline

__all__ = ["main", "options", "measure", "Corpus"]


def options(metric: str) -> dict[str, Any]:
    """The options a metric is measured with: its spec's bench options (the call-level statistics on)."""
    from movers import metrics as registry

    return dict(registry.get(metric).bench_options)


def _shipped() -> list[str]:
    from movers import module_names

    return module_names()


class Corpus:
    """The first `n` WMT15/16 pairs (cycled): re-iterable, so two-pass statistics can stream it."""

    def __init__(self, n: int, base: int | None = None) -> None:
        from .data import load_dataset

        self.records = load_dataset("wmt15_16_da_seg_toen").records[:base]
        self.n = n

    def __len__(self) -> int:
        return self.n

    def pairs(self):
        return itertools.islice(itertools.cycle(self.records), self.n)

    def predictions(self):
        return _Iterable(lambda: (r["hypothesis"] for r in self.pairs()), self.n)

    def references(self):
        return _Iterable(lambda: (list(r["references"]) for r in self.pairs()), self.n)


class _Iterable:
    def __init__(self, make, n: int) -> None:
        self.make, self.n = make, n

    def __iter__(self):
        return self.make()

    def __len__(self) -> int:
        return self.n


def measure(mode: str, metric: str, n: int, block: int = 0, base: int | None = None) -> dict[str, Any] | None:
    """In a fresh process (:func:`shared.bench.harness.fresh`): one measurement on `n` pairs (the first `base`
    cycled, or `n` distinct ones): ``stream`` in blocks of `block`, one plain ``call``, ``bertscore``, or
    ``throughput`` (timed from the moment the encoder is loaded; under torchrun rank 0 reports, the others
    return None). Its seconds; the peak resident set is the process's."""
    quiet_offline()
    import movers

    corpus = Corpus(n, base)
    start = time.perf_counter()
    if mode == "stream":
        movers.score_stream(metric, corpus.predictions(), corpus.references(), block_size=block, **options(metric))
    elif mode == "call":
        getattr(movers, metric)(list(corpus.predictions()), list(corpus.references()), **options(metric))
    elif mode == "bertscore":
        bertscorer().score(list(corpus.predictions()), list(corpus.references()))  # loaded, as movers' encoder
    elif mode == "throughput":
        import torch.distributed as dist

        preds, refs = list(corpus.predictions()), list(corpus.references())
        world = int(os.environ.get("WORLD_SIZE", "1"))
        fn = getattr(movers, metric)
        fn(preds[:4], refs[:4], **{k: v for k, v in options(metric).items() if k != "idf"})  # load the encoder
        if world > 1:
            dist.init_process_group("gloo")
            dist.barrier()
            start = time.perf_counter()
            with movers.distributed_scoring():
                fn(preds, refs, **options(metric))
            rank = dist.get_rank()
            dist.destroy_process_group()
            if rank != 0:
                return None
        else:
            start = time.perf_counter()
            fn(preds, refs, **options(metric))
    else:
        raise ValueError(f"scale: unknown measurement {mode!r}")
    return {"mode": mode, "metric": metric, "n": n, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench scale", description=__doc__.split("\n")[0])
    p.add_argument("--metric", action="append", help="repeatable; default: every shipped module")
    p.add_argument("--base", type=int, default=200, help="pairs in the 1x corpus (default 200)")
    p.add_argument("--sizes", default="1,10", help="multiples of the base to stream (default 1,10)")
    p.add_argument("--call-sizes", default="1", help="multiples of the base to score in one plain call (default 1)")
    p.add_argument("--block-size", type=int, default=100)
    p.add_argument("--processes", default="1,2", help="process counts for throughput ('' to skip)")
    p.add_argument("--distinct", action="store_true", help="distinct pairs instead of the base repeated")
    p.add_argument("--no-bertscore", action="store_true")
    p.add_argument("--json", help="also write the measurements to this file")
    args = p.parse_args(argv)
    metrics = args.metric or _shipped()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    call_sizes = [int(s) for s in args.call_sizes.split(",") if s]
    procs = [int(s) for s in args.processes.split(",") if s]
    base = None if args.distinct else args.base  # the corpus: the base pairs repeated, or distinct pairs
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        row: dict[str, Any] = {"metric": metric, "options": options(metric)}
        for size in call_sizes:
            one = run(measure, mode="call", metric=metric, n=args.base * size, base=base)
            row[_call_key(size)] = one["peak_rss_mb"]
        for size in sizes:
            one = run(measure, mode="stream", metric=metric, n=args.base * size, block=args.block_size, base=base)
            row[f"stream_{size}x"] = one["peak_rss_mb"]
        for n in procs:
            one = run(measure, processes=n, threads=None if n == 1 else 1, mode="throughput", metric=metric,
                      n=args.base)
            row[f"pairs_per_s_{n}p"] = args.base / one["seconds"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    bert = None if args.no_bertscore else run(measure, mode="bertscore", metric="-", n=args.base)["peak_rss_mb"]
    print(_table(rows, sizes, call_sizes, procs, bert, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"base": args.base, "block_size": args.block_size, "rows": rows, "bertscore_mb": bert}, f,
                      indent=1)
    return 0


def _call_key(size: int) -> str:
    """The JSON key of a plain call's peak: "call" at the base size (as before --call-sizes), else call_<n>x."""
    return "call" if size == 1 else f"call_{size}x"


def _table(rows, sizes, call_sizes, procs, bert, args) -> str:
    head = (["metric"] + [f"call {args.base * s}" for s in call_sizes] + [f"stream {args.base * s}" for s in sizes]
            + (["max/min"] if len(sizes) + len(call_sizes) > 1 else []) + [f"pairs/s {n}p" for n in procs])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        peaks = [row[_call_key(s)] for s in call_sizes] + [row[f"stream_{s}x"] for s in sizes]
        cells = [row["metric"]] + [f"{v:.0f} MB" for v in peaks]
        if len(peaks) > 1:
            cells.append(f"{max(peaks) / min(peaks):.2f}")
        cells += [f"{row[f'pairs_per_s_{n}p']:.1f}" for n in procs]
        lines.append("| " + " | ".join(cells) + " |")
    if bert is not None:
        lines.append(f"\nbert-score (same MiniLM, last layer) on the {args.base} base pairs: peak {bert:.0f} MB")
    return "\n".join(lines)

