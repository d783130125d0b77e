"""``python -m shared.bench speed --lengths 50,200,800,2000``: time and peak memory of every metric by text
length, beside the encoder floor and bert-score, with the transport's share of each metric's time.

    python -m shared.bench speed --lengths 50,200,800,2000                 # torch's default threads
    python -m shared.bench speed --lengths 800,2000 --threads 1 --metric moverscore --metric lazy_emd
    python -m shared.bench speed --lengths 800,2000 --render saved.json    # the report of a run saved with --json

Pairs: SummEval's 100 source articles (../shared/data/summeval, development) joined into one stream of words;
for length L, pair k is the passage of L words starting at word 2kL against the passage of L words starting
half a passage later (they overlap by half), ``--row-words // L`` pairs per length (16,000 words per row by
default: the same amount of text at every length). Every item runs in a fresh process with ``--threads``
torch threads (``OMP_NUM_THREADS``); the model is loaded and warmed up on one short pair first, and only the
timed call counts. Peak RSS is the child's (interpreter, torch and encoder included).

* **floor**: the bare encoder over every token of every unique text, in 512-token windows that do not overlap,
  batched as movers batches (:func:`shared.bench.harness.floor`: what any embedding metric must at least do);
* **encoding**: movers' own encoding (:meth:`movers.Encoder.embed`) under each reading the metrics use:
  ``truncate`` reads the first window of each text; ``window`` (whole text) reads a longer text in windows
  that overlap by half, each token taken from the window where it is most central, so a long text costs about
  twice its tokens (the context every token gets);
* each metric: one call with its bench options (per-call IDF, batch centring) and its default reading; beside
  it, where that default is not the whole text, the same call with ``long_texts="window"`` (``<slug>@whole``);
  ``transport`` is the wall time inside its formula (cost matrices and solvers; pairs solved on threads at once
  count once; :func:`movers.core.progress.tally`), the rest is encoding, histograms and bookkeeping;
* **bert-score**: a loaded ``BERTScorer`` (:func:`shared.bench.harness.bertscorer`) with the same encoder and
  layer (bert-score 0.3.13 truncates every text to the model's 512 positions, so past them it scores only the
  start of each text: marked †).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .harness import Runner, bertscorer, floor, fresh, quiet_offline

__all__ = ["main", "pairs", "ROW_WORDS", "items", "measure", "render", "render_saved"]

ROW_WORDS = 16_000
"""Words of text per row of the table (split into pairs of the row's length)."""

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


def measure(mode: str, length: int, row_words: int, options: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process (:func:`shared.bench.harness.fresh`): one item of a row (see :func:`items`) on the pairs
    of `length` words, after a warm-up on a short pair; its seconds and the transport's (0 for the floor, the
    encodings and bert-score)."""
    quiet_offline()
    preds, refs = pairs(length, row_words)
    short = ["A short warm-up text."], ["Another short warm-up text."]
    if mode == "floor":
        return {"seconds": floor(preds + refs), "transport": 0.0}
    if mode == "windows":
        from movers import load_encoder

        encoder = load_encoder(**options)
        encoder.embed(short[0] + short[1])
        start = time.perf_counter()
        encoder.embed(list(dict.fromkeys(preds + refs)))
        return {"seconds": time.perf_counter() - start, "transport": 0.0}
    if mode == "bertscore":
        scorer = bertscorer()  # loaded and warmed up once, as movers' encoder is
        start = time.perf_counter()
        scorer.score(preds, refs)
        return {"seconds": time.perf_counter() - start, "transport": 0.0}
    import movers
    from movers.core.progress import tally

    fn = getattr(movers, mode.split("@")[0])
    fn(*short, **{k: v for k, v in options.items() if k != "idf"})
    with tally() as done:
        start = time.perf_counter()
        fn(preds, refs, **options)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "transport": done.transport_seconds}


def main(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    from movers import metrics as registry

    p = argparse.ArgumentParser(prog="python -m shared.bench speed --lengths", description=__doc__.split("\n")[0])
    p.add_argument("--lengths", required=True, help="words per text, comma-separated (e.g. 50,200,800,2000)")
    p.add_argument("--metric", action="append", choices=registry.slugs(),
                   help="repeatable (default: every registered metric)")
    p.add_argument("--threads", type=int, default=None, help="torch threads in every child (default: torch's)")
    p.add_argument("--row-words", type=int, default=ROW_WORDS, help=f"words per row (default {ROW_WORDS:,})")
    p.add_argument("--no-bertscore", action="store_true", help="leave bert-score out")
    p.add_argument("--json", help="also write the measurements to this file")
    p.add_argument("--render", metavar="JSON", help="print the report of the --lengths rows of a run saved with "
                                                    "--json instead of running (what the docs include)")
    args = p.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            print(render_saved(json.load(f), lengths))
        return 0
    plan = items(args.metric or registry.slugs(), not args.no_bertscore)
    rows: dict[int, dict[str, Any]] = {}
    for length in lengths:
        rows[length] = {}
        for name, mode, options in plan:
            rows[length][name] = run(measure, env={"MOVERS_NO_AUTOREGISTER": "1"}, threads=args.threads, mode=mode,
                                     length=length, row_words=args.row_words, options=options)
            print(json.dumps({"length": length, name: rows[length][name]}), file=sys.stderr, flush=True)
    print(render(rows, [name for name, _, _ in plan], args.row_words, args.threads))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"row_words": args.row_words, "threads": args.threads, "rows": rows}, f, indent=1)
    return 0


def render_saved(saved: dict[str, Any], lengths: list[int] | None = None) -> str:
    """The report of a run saved with ``--json`` (its rows of `lengths`, default all), as the run printed it."""
    rows = {int(k): v for k, v in saved["rows"].items() if lengths is None or int(k) in lengths}
    items = list(next(iter(rows.values())))
    return render(rows, items, saved["row_words"], saved["threads"])


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
        lines += ["", "† bert-score truncates each text at the model's 512 positions (how many words that is: "
                  "[Encoders and languages](encoders-and-languages.md#how-many-words-fill-the-window)): past them "
                  "it scores only the start."]
    return "\n".join(lines)
