"""``python -m shared.bench correlation``: metric scores vs human judgments, with bootstrap confidence intervals.

    python -m shared.bench correlation --data wmt15_16_da_seg_toen --group-by lp \\
        --metric moverscore --metric 'moverscore={"preset": "1.0.3"}' --metric sentbleu
    python -m shared.bench correlation --data webnlg2020_human --metric twmd --metric bertscore \\
        --compare-to bertscore --level system

Each ``--metric`` is a movers module slug, sacreBLEU's ``sentbleu`` or ``chrf`` (the package's,
:data:`movers.api.agreement.SACREBLEU`) or a bench baseline (``bertscore``: bert-score F1 on the same encoder
and layer; ``rougeL``: rouge-score F), optionally followed by ``=<JSON kwargs>``. Every output is scored: an
empty one gets the metric's worst value (a movers module's ``empty_predictions="worst"``; 0 for the baselines,
:data:`BASELINE_WORST`), and the count is printed. A distance (Lazy-EMD) is negated, so that higher is better
for every row and its correlations and paired differences read like the others' (listed in the output and the
JSON). The
statistics are ``movers.correlate``'s (:mod:`movers.api.agreement`, one call per criterion on the scored
records): Pearson, Spearman and Kendall at ``--level`` (segment, system or summary), per group with
``--group-by`` and then averaged, as WMT reports per language pair; 95% percentile bootstrap CIs resample
segments (segment level) or inputs (system and summary levels), within groups. Records without a human
score for a criterion are skipped for it and counted. ``--compare-to METRIC`` adds each metric's difference
to METRIC with a paired interval (the same resamples) and the Williams test for Pearson. Output: a Markdown
table on stdout, a PNG per criterion (``movers.Agreement.plot``) and a JSON of all figures and scores under
``--out``.

Text is preprocessed as the papers did when the set's README names a step (``--preprocess paper``,
the default; see :mod:`shared.bench.data`): WMT17 is Moses-detokenized as MoverScore's ``run_MT.py``.
The step applied is printed in the table header and saved in the JSON (``preprocessing``).
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from movers.api.agreement import SACREBLEU, Agreement, correlate, sacrebleu_scores
from movers.core.agreement import LEVELS, STATISTICS, Layout
from movers.pipeline.call import is_empty

from .data import DEVELOPMENT, INPUT_FIELDS, VALIDATION, Dataset, load_dataset

__all__ = ["main", "render", "agreement", "write_judgments", "score_metric", "group_labels", "record_layout",
           "parse_metric", "BASELINES", "BASELINE_WORST", "SCORE", "HUMAN"]

logger = logging.getLogger("movers")


# ---------------------------------------------------------------- baselines (neither movers modules nor sacreBLEU)

def _sacrebleu(name: str, preds: list[str], refs: list[list[str]], **kw) -> list[float]:
    return sacrebleu_scores(name, preds, refs, kw)


def _bertscore(preds: list[str], refs: list[list[str]], model: str | None = None, layer: int = 6,
               idf: bool = False, batch_size: int = 64) -> list[float]:
    import bert_score

    from .harness import model_folder

    _, _, f1 = bert_score.score(preds, refs, model_type=model_folder(model), num_layers=layer, idf=idf,
                                batch_size=batch_size, device="cpu", verbose=False)
    return [float(x) for x in f1]


def _rouge_l(preds: list[str], refs: list[list[str]]) -> list[float]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return [max(scorer.score(r, p)["rougeL"].fmeasure for r in rs) for p, rs in zip(preds, refs, strict=False)]


BASELINES: dict[str, Callable[..., list[float]]] = {
    **{name: functools.partial(_sacrebleu, name) for name in SACREBLEU}, "bertscore": _bertscore, "rougeL": _rouge_l}

BASELINE_WORST: dict[str, float] = {**dict.fromkeys(SACREBLEU, 0.0), "bertscore": 0.0, "rougeL": 0.0}
"""The score an empty output gets from each baseline without being scored, as movers' metrics do with
``empty_predictions="worst"``: sacreBLEU and rouge-score give an empty hypothesis 0; bert-score 0.3.13 sets an
empty candidate's F1 to 0 itself, but first calls a tokenizer method that transformers 5 removed
(``build_inputs_with_special_tokens``), so empty outputs never reach it."""


def negated(name: str) -> bool:
    """Whether `name` is a movers distance (lower is better), whose scores the bench negates so that every
    correlation reads the same way: higher = closer to the human judgments (as ``bench suite`` does)."""
    if name in BASELINES:
        return False
    from movers import metrics as registry

    return not registry.get(name).higher_is_better


def score_metric(name: str, preds: list[str], refs: list[list[str]], kwargs: dict) -> list[float]:
    """Per-segment scores of a movers module (via movers.load) or a baseline; an empty or whitespace-only
    output gets the worst value (:data:`BASELINE_WORST`; a movers module's own, ``empty_predictions="worst"``).
    The scores are as the metric gives them: distances are not negated here (see :func:`negated`)."""
    if name in BASELINES:
        empty = {i for i, p in enumerate(preds) if is_empty(p)}
        keep = [i for i in range(len(preds)) if i not in empty]
        part = iter(BASELINES[name]([preds[i] for i in keep], [refs[i] for i in keep], **kwargs) if keep else [])
        return [BASELINE_WORST[name] if i in empty else next(part) for i in range(len(preds))]
    from movers import load

    module = load(name)
    out = module.compute(predictions=preds, references=refs, **kwargs)
    return [float(x) for x in out["scores"]]


# ---------------------------------------------------------------- statistics (movers.correlate)

SCORE = "score: "
"""The prefix of a metric's score column in the records handed to ``movers.correlate``."""
HUMAN = "human score: "
"""The prefix of a criterion's column there (None where a record has no score for it: skipped and counted)."""


def agreement(records: Sequence[dict], preds: Sequence[str], refs: Sequence[Sequence[str]], human: Sequence[float],
              scores: Mapping[str, Sequence[float]], layout: Layout, *, group_by: str | None = None,
              compare_to: str | None = None, n_boot: int = 1000, seed: int = 0,
              statistics: Sequence[str] = STATISTICS) -> Agreement:
    """``movers.correlate`` of every scored metric (a ``column:`` of the records) with one human criterion at
    ``layout.level``, the records' groups, systems and inputs as `layout` (:func:`record_layout`) has them.
    Records without a score for the criterion (NaN) are skipped and counted."""
    fields = [f.strip() for f in (group_by or "").split(",") if f.strip()]
    inputs = None if layout.level == "segment" else layout.inputs
    rows = [{**{f: r[f] for f in fields}, **({"system": r["system"]} if layout.level == "system" else {}),
             **({"input": inputs[i]} if inputs is not None else {}), "prediction": p, "references": list(rs),
             HUMAN: None if math.isnan(h) else h, **{SCORE + label: s[i] for label, s in scores.items()}}
            for i, (r, p, rs, h) in enumerate(zip(records, preds, refs, human, strict=True))]
    return correlate(rows, {label: f"column:{SCORE}{label}" for label in scores}, human=HUMAN, level=layout.level,
                     group_by=fields or None, input_field=None if inputs is None else "input",
                     compare_to=compare_to, resamples=n_boot, seed=seed, skip_missing=True, statistics=statistics)


def write_judgments(path: Path, records: Sequence[dict], preds: Sequence[str], refs: Sequence[Sequence[str]],
                    scores: Mapping[str, Sequence[float]]) -> Path:
    """The scored records as a judgments file for ``movers correlate``: each record's own fields, its texts as
    they were scored (``prediction``, ``references``: after the set's preprocessing) and each metric's scores as
    the study correlated them (a distance negated) in a column named by its label, so that
    ``movers correlate PATH -m column:LABEL ...`` recomputes the study's figures from the file."""
    taken = {"prediction", "references"} | {k for r in records for k in r}
    clash = sorted(set(scores) & taken)
    if clash:
        raise ValueError(f"correlation: metric labels {clash} are field names of the records; choose other labels.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for i, (r, p, rs) in enumerate(zip(records, preds, refs, strict=True)):
            row = {k: v for k, v in r.items() if k not in ("hypothesis", "references")}
            row.update(prediction=p, references=list(rs), **{label: float(s[i]) for label, s in scores.items()})
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


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


def record_layout(records: Sequence[dict], level: str, *, data: str, group_by: str | None = None,
                  input_field: str | None = None) -> Layout:
    """Groups, systems and inputs of `records` for `level`; a clear error naming the level and the data set
    when the records cannot give them (no ``system`` field; no input field known for the set)."""
    groups = group_labels(records, group_by)
    if level == "segment":
        return Layout(level, groups)
    fields = sorted(records[0])
    if level == "system" and any("system" not in r for r in records):
        raise ValueError(f"correlation: `--level system` needs a `system` field in every record; data set "
                         f"{data!r} has none (fields: {fields}).")
    spec = input_field or INPUT_FIELDS.get(data.split(":")[0])
    if not spec:
        raise ValueError(f"correlation: `--level {level}` resamples inputs (documents, source items), and data set "
                         f"{data!r} names no input field: pass --input-field FIELD (fields: {fields}).")
    names = [f.strip() for f in spec.split(",") if f.strip()]
    missing = [f for f in names if any(f not in r for r in records)]
    if missing:
        raise ValueError(f"correlation: `--level {level}`: input field(s) {missing} are not in every record of "
                         f"data set {data!r} (fields: {fields}).")
    inputs = [".".join(str(r[f]) for f in names) for r in records]
    systems = [str(r["system"]) for r in records] if level == "system" else None
    return Layout(level, groups, systems, inputs)


# ---------------------------------------------------------------- CLI

def parse_metric(spec: str) -> tuple[str, str, dict]:
    """'name' or 'name={json}' or 'label:name={json}' -> (label, name, kwargs)."""
    head, _, js = spec.partition("=")
    label, _, name = head.rpartition(":")
    name = name.strip()
    kwargs = json.loads(js) if js else {}
    label = label or (name if not kwargs else f"{name} {json.dumps(kwargs, separators=(',', ':'))}")
    return label, name, kwargs


def _sample(records: list[dict], limit: int | None, seed: int, layout: Layout) -> list[int]:
    """Indices of a seeded random sample of `limit` records (segment level) or of `limit` inputs with all their
    outputs (system and summary levels, so each input keeps its systems)."""
    if layout.level == "segment" or layout.inputs is None:
        if not limit or limit >= len(records):
            return list(range(len(records)))
        return sorted(np.random.default_rng(seed).choice(len(records), limit, replace=False).tolist())
    names = sorted(set(layout.inputs), key=str)
    if not limit or limit >= len(names):
        return list(range(len(records)))
    chosen = {names[i] for i in np.random.default_rng(seed).choice(len(names), limit, replace=False).tolist()}
    return [i for i, x in enumerate(layout.inputs) if x in chosen]


def _subset(layout: Layout, pick: list[int]) -> Layout:
    def sub(values: Sequence[Hashable] | None) -> list[Hashable] | None:
        return None if values is None else [values[i] for i in pick]
    return Layout(layout.level, sub(layout.groups), sub(layout.systems), sub(layout.inputs))


def _cell(v: tuple[float, float, float], signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    star = "*" if signed and (v[1] > 0 or v[2] < 0) else ""
    return f"{v[0]:{f}} [{v[1]:{f}}, {v[2]:{f}}]{star}"


def _level_line(level: str, counts: dict[str, Any], criterion: str, grouped: bool) -> str:
    units, resampled = sum(counts["units"].values()), sum(counts["resampled"].values())
    where = f" in {len(counts['units'])} groups" if grouped else ""
    line = {"segment": f"segment level: {units} segments{where}, resampled",
            "system": f"system level: {units} systems{where}; means over {resampled} inputs, inputs resampled",
            "summary": f"summary level: correlation across systems per input, averaged over {units} inputs{where}; "
                       f"inputs resampled"}[level]
    if counts["undefined_inputs"]:
        line += (f"; {counts['undefined_inputs']} inputs without a defined correlation (one output or constant "
                 f"scores) left out")
    skipped = (f"{counts['skipped']} record{'s' if counts['skipped'] > 1 else ''} without a {criterion} score "
               f"skipped" if counts["skipped"] else "no record without a score")
    return f"{line}; {skipped}."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench correlation", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="set name in ../shared/data, e.g. bagel, stsb:dev")
    p.add_argument("--metric", action="append",
                   help="slug or baseline, optionally =JSON kwargs; repeat for several")
    p.add_argument("--criterion", action="append", help="human criterion (default: all)")
    p.add_argument("--level", choices=list(LEVELS), default="segment",
                   help="segment (default): every output; system: per-system means; summary: per input across "
                        "systems, averaged over inputs")
    p.add_argument("--compare-to", metavar="METRIC",
                   help="a --metric label (added if absent): each metric's paired difference to it (same bootstrap "
                        "resamples) and the Williams test for Pearson")
    p.add_argument("--input-field", help="record field(s) naming an output's input (system/summary levels); "
                                         "default: the set's (shared.bench.data.INPUT_FIELDS)")
    p.add_argument("--refs", choices=["all", "first"], default="all", help="references per item")
    p.add_argument("--group-by", help="record field(s) to correlate within (e.g. lp, or year,lp), then average")
    p.add_argument("--preprocess", choices=["paper", "none"], default="paper",
                   help="paper (default): the step the set's README names (WMT17: Moses detokenization, "
                        "as MoverScore's run_MT.py); none: the stored text")
    p.add_argument("--limit", type=int, help="use a seeded random sample of N items (quick runs); at the system "
                                             "and summary levels N inputs with all their outputs")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench-out", help="folder for the PNG and JSON")
    p.add_argument("--render", metavar="JSON", help="print the Markdown report of a saved run instead of scoring")
    p.add_argument("--heading", type=int, default=2, help="with --render: the level of the report's first heading")
    args = p.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text(encoding="utf-8")), args.heading), end="")
        return 0
    if not args.data or not args.metric:
        p.error("--data and --metric are required (or --render JSON)")

    data = load_dataset(args.data, preprocess=args.preprocess)
    try:
        layout = record_layout(data.records, args.level, data=args.data, group_by=args.group_by,
                               input_field=args.input_field)
    except ValueError as e:
        p.error(str(e))
    pick = _sample(data.records, args.limit, args.seed, layout)
    records, layout = [data.records[i] for i in pick], _subset(layout, pick)
    preds = [r["hypothesis"] for r in records]
    refs = [list(r["references"]) if args.refs == "all" else [r["references"][0]] for r in records]
    criteria = args.criterion or data.criteria
    sub = Dataset(data.name, records, data.criteria, data.preprocessing)

    specs = [parse_metric(spec) for spec in args.metric]
    base = None
    if args.compare_to:
        base = next((label for label, name, _ in specs if args.compare_to in (label, name)), None)
        if base is None:
            specs.append(parse_metric(args.compare_to))
            base = specs[-1][0]
    scores: dict[str, list[float]] = {}
    timing: dict[str, float] = {}
    for label, name, kwargs in specs:
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scores[label] = score_metric(name, preds, refs, kwargs)
            if negated(name):  # a distance: higher = better, so its r has the sign of the others'
                scores[label] = [0.0 - x for x in scores[label]]
        timing[label] = time.perf_counter() - start
        for w in {str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)}:
            logger.warning("%s: %s", label, w)
    empty = [i for i, text in enumerate(preds) if is_empty(text)]
    worst = {label: s[empty[0]] for label, s in scores.items()} if empty else {}
    empty_outputs = {"count": len(empty), "ids": [records[i].get("id") for i in empty], "scored": worst}

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"correlation_{args.data.replace(':', '-')}" + ("" if args.level == "segment" else f"_{args.level}")
    summary: dict[str, dict] = {}
    per_group: dict[str, dict[str, dict[str, float]]] = {}
    paired_all: dict[str, dict[str, dict]] = {}
    counts: dict[str, dict] = {}
    input_field = None if layout.inputs is None else (args.input_field or INPUT_FIELDS[args.data.split(":")[0]])
    for criterion in criteria:
        try:
            found = agreement(records, preds, refs, sub.human(criterion), scores, layout, group_by=args.group_by,
                              compare_to=base, n_boot=args.bootstrap, seed=args.seed)
        except ValueError as e:
            p.error(f"criterion {criterion}: {e}")
        results = {label: m.result for label, m in found.metrics.items()}
        first = next(iter(results.values()))
        counts[criterion] = {"skipped": first.skipped, "units": {g: r.units for g, r in first.groups.items()},
                             "resampled": {g: r.resampled for g, r in first.groups.items()},
                             "undefined_inputs": sum(r.undefined for r in first.groups.values())}
        summary[criterion] = {label: {s: r.interval(s) for s in STATISTICS} for label, r in results.items()}
        if base is not None:
            tests = found.williams()
            paired_all[criterion] = {label: {**diff, "williams": tests[label]}
                                     for label, diff in found.differences().items()}
        if layout.groups is not None:
            per_group[criterion] = {label: {str(g): v.point["pearson"] for g, v in r.groups.items()}
                                    for label, r in results.items()}
        found.plot(out / f"{stem}_{criterion}.png")
    result = {
        "data": args.data, "n": len(records), "refs": args.refs, "level": args.level,
        "input_field": input_field,
        "preprocessing": data.preprocessing, "group_by": args.group_by, "bootstrap": args.bootstrap,
        "seed": args.seed, "counts": counts, "empty_outputs": empty_outputs, "correlations": summary,
        "compare_to": base, "paired": paired_all, "per_group_pearson": per_group,
        "negated": [label for label, name, _ in specs if negated(name)], "seconds": timing}
    print(render(json.loads(json.dumps(result))), end="")  # what the JSON holds, as the docs render it
    (out / f"{stem}.json").write_text(json.dumps({**result, "scores": scores}, indent=1))
    write_judgments(out / f"{stem}.jsonl", records, preds, refs, scores)
    print(f"saved {out / stem}_*.png, {out / stem}.json and {out / stem}.jsonl (the scored records, for movers "
          f"correlate)")
    return 0


def render(result: dict[str, Any], heading: int = 2) -> str:
    """The Markdown report of one run, from its JSON (what `main` prints; the docs include it rendered from a saved
    JSON, with `heading` the level of its first heading)."""
    h = "#" * heading
    lines: list[str] = []
    data, level, group_by = result["data"], result["level"], result["group_by"]
    if data in VALIDATION or data.split(":")[0] in VALIDATION:
        lines += [f"> note: {data} is a VALIDATION set: final numbers only, never for choosing defaults.", ""]
    elif data not in DEVELOPMENT and data.split(":")[0] not in DEVELOPMENT:
        lines += [f"> note: {data} is not listed as development or validation in ../shared/README.md.", ""]
    lines += [f"{h} {data}: {result['n']} items, refs={result['refs']}, {level} level"
              + (f", per {group_by} then averaged" if group_by else "")
              + f", 95% bootstrap CI ({result['bootstrap']} resamples), preprocessing: {result['preprocessing']}", ""]
    if result["negated"]:
        lines += [f"> distances negated (higher = better), so every correlation reads the same way: "
                  f"{', '.join(result['negated'])}.", ""]
    empty = result["empty_outputs"]
    if empty["count"]:
        given = ", ".join(f"{label} {value:g}" for label, value in empty["scored"].items())
        lines += [f"> {empty['count']} empty output(s) ({', '.join(str(i) for i in empty['ids'][:5])}) get each "
                  f"metric's worst value without being scored: {given}.", ""]
    for criterion, table in result["correlations"].items():
        counts = result["counts"][criterion]
        lines += [f"{h}# {criterion}", "", _level_line(level, counts, criterion, group_by is not None), "",
                  "| metric | Pearson r | Spearman ρ | Kendall τ | time (s) |", "|---|---|---|---|---|"]
        lines += [f"| {label} | " + " | ".join(_cell(row[s]) for s in STATISTICS)
                  + f" | {result['seconds'][label]:.1f} |" for label, row in table.items()]
        lines.append("")
        if result["compare_to"] is not None:
            lines += _paired_lines(result["paired"][criterion], result["compare_to"], level, group_by)
        if criterion in result["per_group_pearson"]:
            values_by = result["per_group_pearson"][criterion]
            names = sorted(next(iter(values_by.values())))
            lines += ["| Pearson r per " + str(group_by) + " | " + " | ".join(names) + " | avg |",
                      "|---|" + "---|" * (len(names) + 1)]
            lines += [f"| {label} | " + " | ".join(f"{values[g]:.3f}" for g in names)
                      + f" | {np.nanmean(list(values.values())):.3f} |" for label, values in values_by.items()]
            lines.append("")
    return "\n".join(lines) + "\n"


def _paired_lines(paired: dict[str, dict], base: str, level: str, group_by: str | None) -> list[str]:
    """The difference table: paired bootstrap intervals and, except at the summary level, the Williams test."""
    lines = [f"Difference to `{base}` (metric − {base}), paired 95% bootstrap interval from the same resamples "
             f"(* = excludes 0); Williams test of H1: Pearson r > {base}'s (one-sided p, t with n − 3 df):", "",
             "| metric | Δ Pearson r | Δ Spearman ρ | Δ Kendall τ | Williams t (df) | p |", "|---|---|---|---|---|---|"]
    for label, v in paired.items():
        tests = v["williams"]
        if level == "summary":
            t_cell, p_cell = "n/a (average of per-input r)", "n/a"
        elif len(tests) == 1:
            w = next(iter(tests.values()))
            t_cell, p_cell = f"{w['t']:.2f} ({w['df']})", f"{w['p']:.3g}"
        else:
            t_cell, p_cell = f"per {group_by} below", "below"
        lines.append(f"| {label} | " + " | ".join(_cell(v[s], signed=True) for s in STATISTICS)
                     + f" | {t_cell} | {p_cell} |")
    lines.append("")
    if level != "summary" and any(len(v["williams"]) > 1 for v in paired.values()):
        names = sorted(next(iter(paired.values()))["williams"])
        lines += [f"| Williams p (Pearson r > {base}'s) per {group_by} | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        lines += [f"| {label} | " + " | ".join(f"{v['williams'][g]['p']:.3g}" for g in names) + " |"
                  for label, v in paired.items()]
        lines.append("")
    return lines
