"""Worker for tests/test_sharded.py, run under torchrun (2 gloo ranks): each rank scores only its own shard of
the real texts of tests/reference/ inside movers.distributed_scoring(sharded=True) and writes its results as
JSON (`<out>.rank<r>`). Modes: "score" (every metric; unequal shards), "fail" (rank 1 passes a bad input),
"hang" (rank 1 never reaches the call; a short timeout)."""
from __future__ import annotations

import json
import os
import sys
import time
import warnings

CONFIGS = [
    ("moverscore", {"idf": True}),
    ("twmd", {"centering": "batch", "centering_batch": 4}),
    ("twmd", {"centering": "corpus"}),
    ("lazy_emd", {"idf": True}),
    ("sms", {}),
    ("delta_bleu", {}),
]
N = 21          # segments of the union
SPLIT = 8       # rank 0 holds 8 (two whole centring batches of 4), rank 1 the other 13


def pairs() -> tuple[list[str], list[list[str]], list[list[float]]]:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.conftest import reference_records

    records = reference_records("dbleu_dailydialog_segments")[:N]
    return ([r["hypothesis"] for r in records], [list(r["references"]) for r in records],
            [list(r["ref_weights"]) for r in records])


def main(mode: str, out: str) -> None:
    import torch.distributed as dist
    import torch.distributed.fsdp  # noqa: F401  before the group (docs/distributed.md says why)

    import movers

    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    preds, refs, weights = pairs()
    mine = slice(0, SPLIT) if rank == 0 else slice(SPLIT, N)
    results: dict[str, object] = {}
    if mode == "score":
        for slug, options in [*CONFIGS, ("delta_bleu", {"reference_weights": weights[mine]})]:
            with movers.distributed_scoring(sharded=True):
                res = getattr(movers, slug)(preds[mine], refs[mine], **options)
            key = slug + "".join(f"|{k}" for k in options)
            results[key] = {"score": res.score, "scores": list(res.scores), "signature": str(res.signature)}
        try:  # batch centring on shards that split a run: refused on every rank alike
            with movers.distributed_scoring(sharded=True):
                movers.twmd(preds[mine], refs[mine], centering="batch", centering_batch=5)
        except ValueError as err:
            results["split_run"] = str(err)
    else:
        bad = list(preds[mine])
        if rank == 1 and mode == "fail":
            bad[2] = 7  # not a string: this rank's input check fails
        if rank == 1 and mode == "hang":
            time.sleep(20)
        try:
            with movers.distributed_scoring(sharded=True, timeout=3 if mode == "hang" else None):
                movers.moverscore(bad, refs[mine], idf=True)
            results["error"] = None
        except Exception as err:  # noqa: BLE001  the test reads what each rank raised
            results["error"] = f"{type(err).__name__}: {err}"
    with open(f"{out}.rank{rank}", "w", encoding="utf-8") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
