"""Worker for tests/test_distributed.py: score every metric on the first N pairs of a JSONL file of records
with `hypothesis` and `reference` (or `references`), e.g. a fixture of tests/reference, and write the results
as JSON. Run plainly (one process) or under torchrun (each rank writes its own file;
scoring inside movers.distributed_scoring())."""
from __future__ import annotations

import json
import os
import sys
import warnings

CONFIGS = [
    ("moverscore", {"idf": True}),
    ("twmd", {"centering": "batch"}),
    ("twmd", {"centering": "corpus"}),
    ("lazy_emd", {"idf": True}),
    ("sms", {}),
    ("s_wms", {}),
    ("delta_bleu", {}),
]


def pairs(path: str, n: int) -> tuple[list[str], list[list[str]]]:
    records = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()][: n + 1]
    preds = [r["hypothesis"] for r in records[:n]]
    firsts = [list(r["references"]) if "references" in r else [r["reference"]] for r in records]
    # every third segment gets a second reference (the next record's): ragged reference groups
    refs = [firsts[i] + (firsts[(i + 1) % len(firsts)][:1] if i % 3 == 0 else []) for i in range(len(preds))]
    return preds, refs


def main(path: str, n: int, out: str) -> None:
    import movers

    warnings.simplefilter("ignore")
    preds, refs = pairs(path, n)
    rank = 0
    if "WORLD_SIZE" in os.environ:
        import torch.distributed as dist
        import torch.distributed.fsdp  # noqa: F401  before the group, as the README says

        dist.init_process_group("gloo")
        rank = dist.get_rank()
    results = {}
    for slug, options in CONFIGS:
        fn = getattr(movers, slug)
        if "WORLD_SIZE" in os.environ:
            with movers.distributed_scoring():
                res = fn(preds, refs, **options)
        else:
            res = fn(preds, refs, **options)
        key = slug + "".join(f"|{k}={v}" for k, v in options.items())
        results[key] = {"score": res.score, "scores": list(res.scores), "signature": res.signature,
                        # the signature without any version (the library's, its dependencies', the tokenizers')
                        "settings": res.signature.settings(strip_versions=("tok", "seg")),
                        "extra": {k: v for k, v in res.extra.items() if k != "alignments"}}
    with open(out if "WORLD_SIZE" not in os.environ else f"{out}.rank{rank}", "w") as f:
        json.dump(results, f)
    if "WORLD_SIZE" in os.environ:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
