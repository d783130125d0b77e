"""``movers bench correlation``: metric scores vs human judgments, with bootstrap confidence intervals.

    movers bench correlation --data wmt15_16_da_seg_toen --group-by lp \\
        --metric moverscore --metric 'moverscore={"preset": "1.0.3"}' --metric sentbleu

Each ``--metric`` is a movers module slug or a baseline (``sentbleu``: sacreBLEU sentence BLEU;
``bertscore``: bert-score F1 on the same encoder and layer; ``rougeL``: rouge-score F), optionally
followed by ``=<JSON kwargs>``. Pearson, Spearman and Kendall are computed per segment (per group
with ``--group-by``, then averaged, as WMT reports per language pair); 95% percentile bootstrap CIs
resample segments (within groups). Output: a Markdown table on stdout, a PNG and a JSON of all
scores under ``--out``.

Text is preprocessed as the papers did when the set's README names a step (``--preprocess paper``,
the default; see :mod:`movers.bench.data`): WMT17 is Moses-detokenized as MoverScore's ``run_MT.py``.
The step applied is printed in the table header and saved in the JSON (``preprocessing``).
"""
from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from .data import DEVELOPMENT, VALIDATION, Dataset, load_dataset

__all__ = ["main", "correlations", "score_metric", "group_labels", "BASELINES"]

logger = logging.getLogger("movers")


# ---------------------------------------------------------------- baselines (not movers modules)

def _sentbleu(preds: list[str], refs: list[list[str]], **kw) -> list[float]:
    import sacrebleu

    return [sacrebleu.sentence_bleu(p, r, **kw).score for p, r in zip(preds, refs, strict=False)]


def _bertscore(preds: list[str], refs: list[list[str]], model: str | None = None, layer: int = 6,
               idf: bool = False, batch_size: int = 64) -> list[float]:
    import bert_score

    from ..text.embedding import _resolve_model

    path, _ = _resolve_model(model)
    _, _, f1 = bert_score.score(preds, refs, model_type=path, num_layers=layer, idf=idf, batch_size=batch_size,
                                device="cpu", verbose=False)
    return [float(x) for x in f1]


def _rouge_l(preds: list[str], refs: list[list[str]]) -> list[float]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return [max(scorer.score(r, p)["rougeL"].fmeasure for r in rs) for p, rs in zip(preds, refs, strict=False)]


BASELINES: dict[str, Callable[..., list[float]]] = {"sentbleu": _sentbleu, "bertscore": _bertscore,
                                                    "rougeL": _rouge_l}


def score_metric(name: str, preds: list[str], refs: list[list[str]], kwargs: dict) -> list[float]:
    """Per-segment scores of a movers module (via movers.load) or a baseline."""
    if name in BASELINES:
        return BASELINES[name](preds, refs, **kwargs)
    from ..integrations.hub import load

    module = load(name)
    out = module.compute(predictions=preds, references=refs, **kwargs)
    return [float(x) for x in out["scores"]]


# ---------------------------------------------------------------- statistics

def _rank(x: np.ndarray) -> np.ndarray:
    return stats.rankdata(x, axis=-1)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r for each row pair of [B, n] arrays."""
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    den = np.sqrt((xc ** 2).sum(-1) * (yc ** 2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(-1) / den


def correlations(metric: Sequence[float], human: Sequence[float], groups: Sequence[str] | None = None, *,
                 n_boot: int = 1000, seed: int = 0) -> dict[str, tuple[float, float, float]]:
    """{"pearson"|"spearman"|"kendall": (value, ci_low, ci_high)}; per-group values are averaged."""
    m, h = np.asarray(metric, float), np.asarray(human, float)
    g = np.asarray(groups if groups is not None else ["all"] * len(m))
    rng = np.random.default_rng(seed)
    names = sorted(set(g))
    point: dict[str, list[Any]] = {"pearson": [], "spearman": [], "kendall": []}
    boots: dict[str, list[Any]] = {"pearson": [], "spearman": [], "kendall": []}
    for name in names:
        idx = np.flatnonzero(g == name)
        mi, hi = m[idx], h[idx]
        point["pearson"].append(stats.pearsonr(mi, hi)[0])
        point["spearman"].append(stats.spearmanr(mi, hi)[0])
        point["kendall"].append(stats.kendalltau(mi, hi)[0])
        sample = rng.integers(0, len(idx), size=(n_boot, len(idx)))
        bm, bh = mi[sample], hi[sample]
        boots["pearson"].append(_pearson_rows(bm, bh))
        boots["spearman"].append(_pearson_rows(_rank(bm), _rank(bh)))
        boots["kendall"].append(np.array([stats.kendalltau(a, b)[0] for a, b in zip(bm, bh, strict=False)]))
    out = {}
    for key in point:
        dist = np.nanmean(np.stack(boots[key]), 0)
        out[key] = (float(np.mean(point[key])), float(np.nanpercentile(dist, 2.5)),
                    float(np.nanpercentile(dist, 97.5)))
    return out


def _per_group_pearson(metric: Sequence[float], human: Sequence[float], groups: Sequence[str]) -> dict[str, float]:
    m, h, g = np.asarray(metric, float), np.asarray(human, float), np.asarray(groups)
    return {name: float(stats.pearsonr(m[g == name], h[g == name])[0]) for name in sorted(set(groups))}


def group_labels(records: Sequence[dict], group_by: str | None) -> list[str] | None:
    """Group of each record: the value of one field, or of several joined (``--group-by year,lp``)."""
    if not group_by:
        return None
    fields = [f.strip() for f in group_by.split(",") if f.strip()]
    missing = [f for f in fields if f not in records[0]]
    if missing:
        raise ValueError(f"correlation: `--group-by` fields {missing} are not in the records "
                         f"(fields: {sorted(records[0])}).")
    return [".".join(str(r[f]) for f in fields) for r in records]


# ---------------------------------------------------------------- CLI

def _parse_metric(spec: str) -> tuple[str, str, dict]:
    """'name' or 'name={json}' or 'label:name={json}' -> (label, name, kwargs)."""
    head, _, js = spec.partition("=")
    label, _, name = head.rpartition(":")
    name = name.strip()
    kwargs = json.loads(js) if js else {}
    label = label or (name if not kwargs else f"{name} {json.dumps(kwargs, separators=(',', ':'))}")
    return label, name, kwargs


def _plot(path: Path, dataset: str, criterion: str, rows: list[tuple[str, dict]], scores: dict,
          human: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, axes = plt.subplots(1, n + 1, figsize=(4 * (n + 1), 3.6))
    ax = axes[0]
    labels = [label for label, _ in rows]
    for k, key in enumerate(("pearson", "spearman", "kendall")):
        vals = [r[key][0] for _, r in rows]
        err = np.array([[r[key][0] - r[key][1], r[key][2] - r[key][0]] for _, r in rows]).T
        ax.bar(np.arange(n) + 0.27 * (k - 1), vals, 0.27, yerr=err, capsize=2, label=key)
    ax.set_xticks(np.arange(n), [textwrap(label) for label in labels], fontsize=7, rotation=20)
    ax.set_title(f"{dataset} / {criterion}", fontsize=9)
    ax.legend(fontsize=7)
    for ax, (label, _) in zip(axes[1:], rows, strict=False):
        ax.scatter(scores[label], human, s=3, alpha=0.4)
        ax.set_xlabel(textwrap(label), fontsize=7)
        ax.set_ylabel("human", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def textwrap(text: str, width: int = 28) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="movers bench correlation", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="set name in ../shared/data, e.g. bagel, stsb:dev")
    p.add_argument("--metric", action="append", required=True,
                   help="slug or baseline, optionally =JSON kwargs; repeat for several")
    p.add_argument("--criterion", action="append", help="human criterion (default: all)")
    p.add_argument("--refs", choices=["all", "first"], default="all", help="references per item")
    p.add_argument("--group-by", help="record field(s) to correlate within (e.g. lp, or year,lp), then average")
    p.add_argument("--preprocess", choices=["paper", "none"], default="paper",
                   help="paper (default): the step the set's README names (WMT17: Moses detokenization, "
                        "as MoverScore's run_MT.py); none: the stored text")
    p.add_argument("--limit", type=int, help="use a seeded random sample of N items (quick runs)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench-out", help="folder for the PNG and JSON")
    args = p.parse_args(argv)

    data = load_dataset(args.data, preprocess=args.preprocess)
    if args.data in VALIDATION or args.data.split(":")[0] in VALIDATION:
        print(f"> note: {args.data} is a VALIDATION set: final numbers only, never for choosing defaults.\n")
    elif args.data not in DEVELOPMENT and args.data.split(":")[0] not in DEVELOPMENT:
        print(f"> note: {args.data} is not listed as development or validation in ../shared/README.md.\n")
    records = data.records
    if args.limit and args.limit < len(records):
        pick = sorted(np.random.default_rng(args.seed).choice(len(records), args.limit, replace=False))
        records = [records[i] for i in pick]
    preds = [r["hypothesis"] for r in records]
    refs = [list(r["references"]) if args.refs == "all" else [r["references"][0]] for r in records]
    groups = group_labels(records, args.group_by)
    criteria = args.criterion or data.criteria
    sub = Dataset(data.name, records, data.criteria, data.preprocessing)

    scores: dict[str, list[float]] = {}
    timing: dict[str, float] = {}
    for spec in args.metric:
        label, name, kwargs = _parse_metric(spec)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scores[label] = score_metric(name, preds, refs, kwargs)
        timing[label] = time.perf_counter() - start
        for w in {str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)}:
            logger.warning("%s: %s", label, w)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"correlation_{args.data.replace(':', '-')}"
    print(f"## {args.data}: {len(records)} items, refs={args.refs}"
          + (f", per {args.group_by} then averaged" if groups else "")
          + f", 95% bootstrap CI ({args.bootstrap} resamples), preprocessing: {data.preprocessing}\n")
    summary = {}
    per_group: dict[str, dict[str, dict[str, float]]] = {}
    for criterion in criteria:
        human = sub.human(criterion)
        rows = [(label, correlations(s, human, groups, n_boot=args.bootstrap, seed=args.seed))
                for label, s in scores.items()]
        summary[criterion] = {label: r for label, r in rows}
        print(f"### {criterion}\n")
        print("| metric | Pearson r | Spearman ρ | Kendall τ | time (s) |")
        print("|---|---|---|---|---|")
        for label, r in rows:
            cells = [f"{r[k][0]:.3f} [{r[k][1]:.3f}, {r[k][2]:.3f}]" for k in ("pearson", "spearman", "kendall")]
            print(f"| {label} | " + " | ".join(cells) + f" | {timing[label]:.1f} |")
        print()
        if groups:
            per_group[criterion] = {label: _per_group_pearson(s, human, groups) for label, s in scores.items()}
            names = sorted(set(groups))
            print("| Pearson r per " + args.group_by + " | " + " | ".join(names) + " | avg |")
            print("|---|" + "---|" * (len(names) + 1))
            for label, values in per_group[criterion].items():
                print(f"| {label} | " + " | ".join(f"{values[g]:.3f}" for g in names)
                      + f" | {np.mean(list(values.values())):.3f} |")
            print()
        _plot(out / f"{stem}_{criterion}.png", args.data, criterion, rows, scores, human)
    (out / f"{stem}.json").write_text(json.dumps({"data": args.data, "n": len(records), "refs": args.refs,
                                                  "preprocessing": data.preprocessing, "group_by": args.group_by,
                                                  "correlations": summary,
                                                  "per_group_pearson": per_group,
                                                  "seconds": timing, "scores": scores}, indent=1))
    print(f"saved {out / stem}_*.png and {out / stem}.json")
    return 0
