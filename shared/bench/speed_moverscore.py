"""``python -m shared.bench speed --metric moverscore``: side-by-side timings on one WMT-like workload.

Workload: R references from ``wmt15_16_da_seg_toen`` (development set), each shared by S "systems":
its own MT output plus, for system k, the output of the segment k*N/S records further on (standing in
for another system's translation: timings depend on lengths and sharing, not content), so all
R*S outputs are distinct texts: R*S pairs (default 500 x 5 = 2,500), about R*(S+1) unique texts.
All runs use the same encoder (default the bundled MiniLM, last layer), on CPU, in one process:

* **floor**: the bare encoder over every token of the *unique* texts, tokenizer included
  (:func:`shared.bench.harness.floor`: what any embedding metric must at least do);
* **movers**: ``movers.moverscore(preset="1.0.3", idf=True)`` (same computation as the original);
* **original**: PyPI ``moverscore==1.0.3`` through :mod:`shared.bench.original_moverscore`,
  IDF dicts from the references and the hypotheses, batch_size 256 (its default);
* **bert-score**: a ``BERTScorer`` 0.3.13 built once (:func:`shared.bench.harness.bertscorer`), same model and
  layer, idf off (its default), then timed: loaded, as movers is.

Scores of movers and the original are compared on every pair as a sanity check.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time

import numpy as np
import torch

from .harness import bertscorer, floor, quiet_offline

__all__ = ["main", "workload"]


def workload(n_refs: int = 500, n_systems: int = 5) -> tuple[list[str], list[str]]:
    """(predictions, references) of the WMT-like workload; references repeat n_systems times."""
    from .data import load_dataset

    records = load_dataset("wmt15_16_da_seg_toen").records
    refs_seen: dict[str, int] = {}
    for i, r in enumerate(records):
        refs_seen.setdefault(r["references"][0], i)
        if len(refs_seen) == n_refs:
            break
    stride = len(records) // n_systems
    preds, refs = [], []
    for ref, i in refs_seen.items():
        for k in range(n_systems):
            preds.append(records[(i + k * stride) % len(records)]["hypothesis"])
            refs.append(ref)
    return preds, refs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench speed --metric moverscore",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--refs", type=int, default=500, help="distinct references")
    p.add_argument("--systems", type=int, default=5, help="outputs per reference")
    p.add_argument("--model", default=None, help="model folder or hub id (default: bundled MiniLM)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--skip", action="append", default=[], choices=["original", "bertscore"])
    p.add_argument("--out", default="bench-out")
    args = p.parse_args(argv)
    quiet_offline()

    from movers import Encoder
    from movers import metrics as registry

    moverscore = registry.function("moverscore")

    encoder = Encoder(args.model, layer=-1, device="cpu")
    model_path = encoder.backbone.path
    preds, refs = workload(args.refs, args.systems)
    n_unique = len(set(preds) | set(refs))
    print(f"workload: {len(preds)} pairs, {len(set(refs))} references, {n_unique} unique texts; "
          f"model {model_path}; torch threads {torch.get_num_threads()}; device cpu\n")
    times: dict[str, float] = {}

    # Warm up every path once on a few pairs so that no timing includes model loading.
    moverscore(preds[:8], refs[:8], preset="1.0.3", encoder=encoder)

    times["floor (encoder forward, unique texts)"] = floor(preds + refs, encoder)
    gc.collect()
    start = time.perf_counter()
    ours = moverscore(preds, refs, preset="1.0.3", idf=True, encoder=encoder, batch_size=args.batch_size).scores
    times["movers moverscore (preset 1.0.3, idf)"] = time.perf_counter() - start

    max_diff = max_diff_identical = None
    if "original" not in args.skip:
        from .original_moverscore import load_original

        original = load_original(model_path)
        original.word_mover_score(refs[:4], preds[:4], original.get_idf_dict(refs[:4], nthreads=1),
                                  original.get_idf_dict(preds[:4], nthreads=1), device="cpu")
        gc.collect()
        start = time.perf_counter()
        idf_ref = original.get_idf_dict(refs, nthreads=1)
        idf_hyp = original.get_idf_dict(preds, nthreads=1)
        theirs = original.word_mover_score(refs, preds, idf_ref, idf_hyp, stop_words=[], n_gram=1,
                                           remove_subwords=True, batch_size=256, device="cpu")
        times["original moverscore 1.0.3"] = time.perf_counter() - start
        diff = np.abs(np.asarray(ours) - np.asarray(theirs))
        # Token-identical pairs (e.g. 'success .' vs 'success.') carry the original's float32 self-score noise.
        same = np.array([a == b for a, b in zip(encoder.token_ids(preds), encoder.token_ids(refs), strict=False)])
        max_diff = float(diff[~same].max())
        max_diff_identical = float(diff[same].max()) if same.any() else None
    if "bertscore" not in args.skip:
        scorer = bertscorer(args.model, batch_size=args.batch_size)  # loaded once, as movers' encoder is
        gc.collect()
        start = time.perf_counter()
        scorer.score(preds, refs)
        times["bert-score 0.3.13 (same model, last layer)"] = time.perf_counter() - start

    ours_t = times["movers moverscore (preset 1.0.3, idf)"]
    floor_t = times["floor (encoder forward, unique texts)"]
    print("| run | seconds | pairs/s | movers time / this |")
    print("|---|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {t:.2f} | {len(preds) / t:.0f} | {ours_t / t:.2f} |")
    print()
    print(f"movers / floor time: {ours_t / floor_t:.3f} (goal <= 1.15)")
    if "original moverscore 1.0.3" in times:
        print(f"movers throughput / original: {times['original moverscore 1.0.3'] / ours_t:.2f}x (goal >= 3)")
        print(f"max |movers - original|: {max_diff:.2e} over pairs whose tokens differ"
              + (f"; {max_diff_identical:.2e} on the {int(same.sum())} token-identical pairs (original's float32 "
                 f"distances keep a self-score below its maximum)" if same.any() else ""))
    if "bert-score 0.3.13 (same model, last layer)" in times:
        print(f"movers / bert-score time: {ours_t / times['bert-score 0.3.13 (same model, last layer)']:.3f} "
              f"(goal <= 1.2)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "speed_moverscore.json"), "w") as fh:
        json.dump({"pairs": len(preds), "unique_texts": n_unique, "seconds": times, "max_diff": max_diff}, fh, indent=1)
    return 0
