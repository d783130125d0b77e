"""``python -m shared.bench gpu``: the token metrics on the training device, beside the floor and bert-score.

    python -m shared.bench gpu                               # CUDA if present, else the CPU; the bundled MiniLM
    python -m shared.bench gpu --shape tiny --sets short     # a 2-layer, 128-wide encoder of random weights
    python -m shared.bench gpu --shape minilm --device cuda  # random weights of the bundled model's shape

Workload: the WMT17 to-English segments (``wmt17_da_seg_toen``, stored text, no preprocessing; a timing only,
nothing is chosen on this validation set): "short" is the 3,920 (hypothesis, first reference) pairs as they are,
"medium" joins 8 consecutive pairs into one (490 pairs), "long" joins 16 (245). Per set, in one process, the
best of `--repeats` runs, alternating:

* **floor**: the tokenizer and the encoder's forward pass over the unique texts, batched as movers batches
  (:func:`shared.bench.harness.floor`), in float32 and (on an accelerator) float16;
* **moverscore**, **twmd**, **lazy_emd**: one call of the metric at its defaults on the same encoder, loaded once;
* **bert-score**: a ``BERTScorer`` built once with the same model folder and its last layer (bert-score 0.3.13),
  then timed: loaded, as movers is.

On an accelerator, the first `--agreement` short pairs are also scored on the CPU, and the largest difference of
each metric's scores between the two devices is printed.

Then, over the first `--ops-pairs` pairs, the torch operations and the copies (``aten::to``, ``aten::_to_copy``,
``aten::copy_``) per pair of each metric call beyond the encoder's forward pass (torch.profiler; the forward pass
is the ``movers: encoder forward`` range; on one transport thread, as the profiler sees only the calling thread);
with ``--profile N``, the profiler's table of each metric call over those pairs, its N operations that take the
most time of their own on the device (on an accelerator, its kernels' time; on a CPU, the CPU's).
Times depend on the encoder's shape, not its weights, so ``--shape`` runs random weights of a given shape with the
bundled tokenizer, where the bundled weights are not installed.
"""
from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .harness import bertscorer, floor, model_folder, quiet_offline

__all__ = ["main", "SHAPES", "SETS", "workload", "operations", "profile_table", "random_model"]

SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "minilm": {"num_hidden_layers": 6, "hidden_size": 384, "num_attention_heads": 12, "intermediate_size": 1536},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
}
"""Encoder shapes for ``--shape`` (BERT, 512 positions, the bundled MiniLM's vocabulary): random weights."""
SETS = {"short": 1, "medium": 8, "long": 16}
"""set -> WMT17 pairs joined into one."""
METRICS = ("moverscore", "twmd", "lazy_emd")
COPIES = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})


def workload(joined: int, pairs: int | None = None) -> tuple[list[str], list[str]]:
    """WMT17 to-English (hypotheses, first references) as stored, `joined` consecutive pairs per pair."""
    from .data import load_dataset

    records = load_dataset("wmt17_da_seg_toen", preprocess="none").records
    hyps, refs = [r["hypothesis"] for r in records], [r["references"][0] for r in records]
    hyps = [" ".join(hyps[i:i + joined]) for i in range(0, len(hyps), joined)]
    refs = [" ".join(refs[i:i + joined]) for i in range(0, len(refs), joined)]
    return hyps[:pairs], refs[:pairs]


def random_model(shape: str, folder: Path, tokenizer: str | None = None) -> str:
    """A BERT of `shape` (:data:`SHAPES`) with random weights (seed 0) and the bundled tokenizer (or the one in
    the folder `tokenizer`), saved in `folder`."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tokenizer or model_folder(), local_files_only=True)
    tok.save_pretrained(folder)
    config = transformers.BertConfig(vocab_size=len(tok), max_position_embeddings=512, **SHAPES[shape])
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return str(folder)


def operations(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, int, Counter[str]]:
    """(torch operations, copies, the operations by name) of ``fn(*args, **kwargs)`` outside the encoder's forward
    pass, counted with torch.profiler: every ``aten::`` event, nested ones included. The profiler sees the calling
    thread only: a metric call is counted on one transport thread (``transport_threads=1``)."""
    return _operations(_profiled(fn, *args, **kwargs))


def profile_table(fn: Any, *args: Any, rows: int, **kwargs: Any) -> str:
    """torch.profiler's table of ``fn(*args, **kwargs)``: its `rows` operations with the most time of their own on
    ``kwargs["device"]`` (an accelerator's kernel time; on a CPU, CPU time), the encoder's forward pass included."""
    return _table(_profiled(fn, *args, **kwargs), rows)


def _profiled(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` under torch.profiler: the profile, with the kernels of a CUDA ``kwargs["device"]``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if str(kwargs.get("device") or "cpu").startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        fn(*args, **kwargs)
    return prof


def _operations(prof: Any) -> tuple[int, int, Counter[str]]:
    """:func:`operations` of a profile (kernel events are not ``aten::`` operations, so they do not count): the events
    of ``prof.events()``, read from the profiler's records without building its event objects (seconds per 100,000
    events), by :func:`_profiled_events`."""
    from movers.text.embedding import FORWARD_LABEL

    events = _profiled_events(prof)
    spans = sorted((start, end) for name, start, end in events if name == FORWARD_LABEL)
    counts: Counter[str] = Counter()
    starts = [s for s, _ in spans]
    for name, start, end in events:
        if not name.startswith("aten::"):
            continue
        k = bisect.bisect_right(starts, start) - 1
        if k >= 0 and end <= spans[k][1]:
            continue  # inside the encoder's forward pass
        counts[name] += 1
    return sum(counts.values()), sum(v for name, v in counts.items() if name in COPIES), counts


PROFILER_UTILITY_EVENTS = frozenset({
    "[memory]", "[OutOfMemory]", "profiler::_record_function_enter", "profiler::_record_function_enter_new",
    "profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr", "aten::_version"})
"""The events that torch's profiler leaves out of ``prof.events()`` by name (torch/autograd/profiler_util.py,
``_filter_name``, torch 2.13.0); tests/test_batched.py checks the counts against ``prof.events()``."""


def _profiled_events(prof: Any) -> list[tuple[str, int, int]]:
    """(name, start ns, end ns) of each event that ``prof.events()`` lists, with its rules (torch.autograd.profiler's
    ``_parse_kineto_results`` and ``EventList._build_tree``): the profiler's own utility events are left out, and a
    CPU event nested alone in one of the same name (an operation that calls itself) is that one event."""
    from torch.autograd import DeviceType

    kept = []  # (name, start, end, thread of a synchronous CPU event or None)
    for e in prof.profiler.kineto_results.events():
        name = e.name()
        if name in PROFILER_UTILITY_EVENTS or getattr(e, "is_hidden_event", lambda: False)():
            continue
        thread = e.start_thread_id()
        sync_cpu = e.device_type() == DeviceType.CPU and not e.is_async() and thread == e.end_thread_id()
        kept.append((name, e.start_ns(), e.end_ns(), thread if sync_cpu else None))
    by_thread: dict[int, list[int]] = {}
    for k, (_, _, _, thread) in enumerate(kept):
        if thread is not None:
            by_thread.setdefault(thread, []).append(k)
    dropped: set[int] = set()
    for indices in by_thread.values():  # nested as _populate_cpu_children nests them: a stack of open parents
        indices.sort(key=lambda k: (kept[k][1], -kept[k][2]))
        stack: list[int] = []
        parent: dict[int, int] = {}
        children: Counter[int] = Counter()
        for k in indices:
            while stack and (kept[k][1] >= kept[stack[-1]][2] or kept[k][2] > kept[stack[-1]][2]):
                stack.pop()
            if stack:
                parent[k] = stack[-1]
                children[stack[-1]] += 1
            stack.append(k)
        dropped.update(k for k, up in parent.items() if kept[up][0] == kept[k][0] and children[up] == 1)
    return [(name, start, end) for k, (name, start, end, _) in enumerate(kept) if k not in dropped]


def _table(prof: Any, rows: int) -> str:
    """:func:`profile_table` of a profile: by device time where it recorded kernels, else by CPU time."""
    from torch.profiler import ProfilerActivity

    on_device = ProfilerActivity.CUDA in prof.activities
    return str(prof.key_averages().table(sort_by="self_device_time_total" if on_device else "self_cpu_time_total",
                                         row_limit=rows))


def _seconds(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench gpu", description=__doc__.split("\n\n")[0]
                                .replace("``", ""))
    p.add_argument("--device", default=None, help="torch device (default: CUDA if present, else the CPU)")
    p.add_argument("--model", default=None, help="model folder or hub id (default: the bundled MiniLM)")
    p.add_argument("--shape", choices=sorted(SHAPES), help="random weights of this shape instead of --model")
    p.add_argument("--tokenizer", default=None, help="with --shape: a folder with the tokenizer (default: bundled)")
    p.add_argument("--sets", default="short,medium,long", help="comma-separated, of: " + ", ".join(SETS))
    p.add_argument("--metric", action="append", choices=METRICS, help="repeatable (default: the three)")
    p.add_argument("--pairs", type=int, default=None, help="at most this many pairs per set (default: all)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per figure; the best counts")
    p.add_argument("--ops-pairs", type=int, default=640, help="pairs the operations are counted over (0: none)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print the profiler's top N operations "
                   "of each metric call over the --ops-pairs pairs (0: none)")
    p.add_argument("--agreement", type=int, default=200, help="short pairs scored on the device and on the CPU, "
                   "to compare (0: none; never on the CPU)")
    p.add_argument("--no-bertscore", action="store_true", help="leave bert-score out")
    p.add_argument("--json", help="also write the measurements to this file")
    args = p.parse_args(argv)
    quiet_offline()
    import torch

    import movers
    from movers import Encoder, load_encoder

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    metrics = args.metric or list(METRICS)
    with tempfile.TemporaryDirectory(prefix="movers-gpu-") as tmp:
        model = random_model(args.shape, Path(tmp), args.tokenizer) if args.shape else args.model
        encoder = load_encoder(model, device=device)
        half = Encoder(model, device=device, dtype=torch.float16) if device != "cpu" else None
        scorer = None if args.no_bertscore else bertscorer(model, device=device)
        rows = []
        for name in args.sets.split(","):
            preds, refs = workload(SETS[name], args.pairs)
            runs = _runs(preds, refs, metrics, model, device, encoder, half, scorer)
            best = {key: float("inf") for key in runs}
            for _ in range(args.repeats):  # alternating, so that a slow moment of the machine hits every figure
                for key, run in runs.items():
                    best[key] = min(best[key], _seconds(run))
            row: dict[str, Any] = {"set": name, "pairs": len(preds), "tokens": _tokens(encoder, preds), **best}
            if args.ops_pairs:
                n = min(args.ops_pairs, len(preds))
                for slug in metrics:  # one profiled call: its operations, and (--profile) its table
                    prof = _profiled(getattr(movers, slug), preds[:n], refs[:n], model=model, device=device,
                                     transport_threads=1)
                    ops, copies, _ = _operations(prof)
                    row[f"{slug} ops/pair"], row[f"{slug} copies/pair"] = ops / n, copies / n
                    if args.profile:
                        print(f"\n{slug}, {name} set, {n} pairs:\n" + _table(prof, args.profile), flush=True)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        agreement = _agreement(metrics, model, device, args.agreement) if device != "cpu" and args.agreement else {}
    _report(rows, metrics, device, encoder.name if not args.shape else f"random {args.shape}", scorer is not None)
    if agreement:
        print(f"\nscores on {device} against the CPU, the first {args.agreement} short pairs, largest |difference|: "
              + ", ".join(f"{slug} {diff:.1e}" for slug, diff in agreement.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "model": model or "bundled", "shape": args.shape,
                                               "rows": rows, "agreement": agreement}, indent=1), encoding="utf-8")
    return 0


def _runs(preds: list[str], refs: list[str], metrics: list[str], model: str | None, device: str, encoder: Any,
          half: Any, scorer: Any) -> dict[str, Any]:
    """What one set times, by name: the floors, each metric (loaded and warmed up first), bert-score (loaded)."""
    import movers

    runs: dict[str, Any] = {"floor": lambda: floor(preds + refs, encoder)}
    if half is not None:
        runs["floor fp16"] = lambda: floor(preds + refs, half)
    for slug in metrics:
        fn = getattr(movers, slug)
        fn(preds[:4], refs[:4], model=model, device=device)
        runs[slug] = lambda fn=fn: fn(preds, refs, model=model, device=device)
    if scorer is not None:
        scorer.score(preds[:4], refs[:4])
        runs["bert-score"] = lambda: scorer.score(preds, refs, batch_size=64)
    return runs


def _agreement(metrics: list[str], model: str | None, device: str, pairs: int) -> dict[str, float]:
    """metric -> the largest |difference| between its scores on `device` and on the CPU over the first `pairs`
    short pairs."""
    import numpy as np

    import movers

    preds, refs = workload(SETS["short"], pairs)
    out = {}
    for slug in metrics:
        fn = getattr(movers, slug)
        there, here = (np.asarray(fn(preds, refs, model=model, device=d).scores) for d in (device, "cpu"))
        out[slug] = float(np.abs(there - here).max())
    return out


def _tokens(encoder: Any, texts: list[str]) -> int:
    """Mean tokens a side (special tokens included, as read)."""
    return round(sum(len(ids) for ids in encoder.token_ids(texts)) / max(1, len(texts)))


def _report(rows: list[dict[str, Any]], metrics: list[str], device: str, model: str, bertscore: bool) -> None:
    import torch

    where = torch.cuda.get_device_name() if device.startswith("cuda") else f"CPU, {torch.get_num_threads()} threads"
    print(f"{where}; {model}; best of the repeats; times as a multiple of the float32 floor\n")
    fp16 = any("floor fp16" in r for r in rows)
    head = ["set (pairs, tokens a side)", "floor"] + (["floor fp16"] if fp16 else []) + metrics + \
        (["bert-score (loaded)"] if bertscore else [])
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        cells = [f"{r['set']} ({r['pairs']:,}, {r['tokens']})", f"{r['floor']:.2f} s"]
        keys = (["floor fp16"] if fp16 else []) + metrics + (["bert-score"] if bertscore else [])
        cells += [f"{r[k]:.2f} s ({r[k] / r['floor']:.2f}x)" for k in keys]
        print("| " + " | ".join(cells) + " |")
    if any(f"{metrics[0]} ops/pair" in r for r in rows):
        print("\ntorch operations (copies) per pair beyond the encoder's forward pass:\n")
        print("| set | " + " | ".join(metrics) + " |\n|" + "---|" * (len(metrics) + 1))
        for r in rows:
            print(f"| {r['set']} | " + " | ".join(f"{r[f'{m} ops/pair']:.1f} ({r[f'{m} copies/pair']:.2f})"
                                                  for m in metrics) + " |")
