"""Worker for tests/test_sharded.py, run under torchrun (2 gloo ranks): each rank scores only its own shard of
the real texts of tests/reference/ inside movers.distributed_scoring(sharded=True) and writes its results as
JSON (`<out>.rank<r>`). One run, in order: every metric on unequal shards; a batch-centring run split between
the ranks (refused on both); calls that the ranks make differently (another option value, another metric,
another kind of inputs; the whole call's inputs differing without sharding): each fails on both ranks with the
same error, and a call after them works; rank 1 passing a bad input (every rank fails with its reason); rank 1
never reaching a call (rank 0 names it when a short timeout runs out)."""
from __future__ import annotations

import json
import os
import sys
import time
import warnings

CONFIGS = [  # every metric, every call-level statistic; the same as tests/test_ray.py's
    ("moverscore", {"idf": True}),
    ("twmd", {"centering_batch": 8}),  # TWMD's default batch centring: rank 0 holds one whole run of 8
    ("twmd", {"centering": "corpus", "variant": "trwmd"}),
    ("lazy_emd", {"idf": True}),
    ("sms", {}),
    ("s_wms", {}),
    ("delta_bleu", {"reference_weights": "weights"}),  # the rated references' weights
]
N = 20          # segments of the union (tests/helpers.py's split_pairs)
SPLIT = 8       # rank 0 holds 8, rank 1 the other 12


def pairs() -> tuple[list[str], list[list[str]], list[list[float]]]:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.helpers import split_pairs

    return split_pairs()


HANG_TIMEOUT = 2  # seconds rank 0 waits for rank 1 in the last call

# calls that the two ranks make differently: name -> (sharded, rank 0's call, rank 1's call), a call being
# (metric, options, inputs: "mine" or "weights" (this rank's segments, with ΔBLEU's weights) or "reversed" (the
# whole call's, predictions in another order))
DISAGREE = {
    "lowercase": (True, ("delta_bleu", {"lowercase": True}, "mine"), ("delta_bleu", {}, "mine")),
    "metric": (True, ("moverscore", {}, "mine"), ("lazy_emd", {}, "mine")),
    "idf": (True, ("moverscore", {"idf": True}, "mine"), ("moverscore", {"idf": False}, "mine")),
    "centering": (True, ("twmd", {"centering": "corpus"}, "mine"), ("twmd", {"centering": "batch"}, "mine")),
    "max_ngram_order": (True, ("delta_bleu", {"max_ngram_order": 2}, "mine"), ("delta_bleu", {}, "mine")),
    "reference_weights": (True, ("delta_bleu", {}, "weights"), ("delta_bleu", {}, "mine")),
    "whole_inputs": (False, ("delta_bleu", {}, "whole"), ("delta_bleu", {}, "reversed")),
    "whole_idf": (False, ("moverscore", {"idf": True}, "whole"), ("moverscore", {}, "whole")),
}


def main(out: str) -> None:
    import torch.distributed as dist
    import torch.distributed.fsdp  # noqa: F401  before the group (docs/distributed.md says why)

    import movers

    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    preds, refs, weights = pairs()
    mine = slice(0, SPLIT) if rank == 0 else slice(SPLIT, N)
    results: dict[str, object] = {}
    for slug, options in CONFIGS:
        kwargs = {k: weights[mine] if v == "weights" else v for k, v in options.items()}
        with movers.distributed_scoring(sharded=True):
            res = getattr(movers, slug)(preds[mine], refs[mine], **kwargs)
        key = slug + "".join(f"|{k}" for k in options)
        results[key] = {"score": res.score, "scores": list(res.scores), "signature": str(res.signature)}
    try:  # batch centring on shards that split a run: refused on every rank alike
        with movers.distributed_scoring(sharded=True):
            movers.twmd(preds[mine], refs[mine], centering="batch", centering_batch=5)
    except ValueError as err:
        results["split_run"] = str(err)
    for name, (sharded, *calls) in DISAGREE.items():  # every rank raises the same error, none waits
        slug, options, inputs = calls[rank]
        args = {"mine": (preds[mine], refs[mine]), "weights": (preds[mine], refs[mine]), "whole": (preds, refs),
                "reversed": (preds[::-1], refs)}[inputs]
        extra = {"reference_weights": weights[mine]} if inputs == "weights" else {}
        results[f"disagree|{name}"] = _error(lambda: getattr(movers, slug)(*args, **options, **extra), movers,
                                             timeout=None, sharded=sharded)
    with movers.distributed_scoring(sharded=True):  # the group is whole after them
        results["after"] = movers.delta_bleu(preds[mine], refs[mine]).score
    bad = list(preds[mine])
    if rank == 1:
        bad[2] = 7  # not a string: this rank's input check fails
    results["fail"] = _error(lambda: movers.moverscore(bad, refs[mine], idf=True), movers, timeout=None)
    if rank == 0:
        results["hang"] = _error(lambda: movers.moverscore(preds[mine], refs[mine], idf=True), movers,
                                 timeout=HANG_TIMEOUT)
    else:
        time.sleep(HANG_TIMEOUT + 2)  # never reaches the call; leaves the group after rank 0 gave up
    with open(f"{out}.rank{rank}", "w", encoding="utf-8") as f:
        json.dump(results, f)
    dist.destroy_process_group()


def _error(call, movers, timeout: float | None, sharded: bool = True) -> str | None:
    try:
        with movers.distributed_scoring(sharded=sharded, timeout=timeout):
            call()
    except Exception as err:  # noqa: BLE001  the test reads what each rank raised
        return f"{type(err).__name__}: {err}"
    return None


if __name__ == "__main__":
    main(sys.argv[1])
