"""``python -m shared.bench long-texts``: how to read a text longer than the encoder's window, decided on human
judgments.

    python -m shared.bench long-texts --split dev                   # choose: SummEval and Newsroom (development)
    python -m shared.bench long-texts --split validation            # then, once, the final numbers: RealSumm
    python -m shared.bench long-texts --render cards/long_texts.json --write   # the tables of the study page

Every metric that declares a :class:`~movers.core.spec.LongTextStudy` scores each summary against its source
article (prediction = summary, reference = article: BARTScore's source -> hypothesis protocol) under every
candidate way of reading the article:

* the encoder readings (:data:`READINGS`): truncated to the first window, as the originals and bert-score;
  512-token windows with half overlap (each token from the window where it is most central), a quarter and no
  overlap; 256-token windows (the length all-MiniLM-L6-v2 was trained
  on) with half and no overlap. A text that fits the window reads the same under all of them;
* the metric's transport that fits a short text against a long one (``LongTextStudy.partial``: partial or
  unbalanced transport with the summary as the source), on the truncated and on the windowed article.

Kendall τ (tau-b) between the scores and each human criterion, segment level, pooled over the set's
summaries (SummEval: consistency and relevance; Newsroom: its four criteria; RealSumm: LitePyramid recall).
Intervals: 95% percentile bootstrap over *documents* (each resample draws the set's articles with
replacement, with all their summaries: the candidates differ in how an article is read, so the article is
the unit), 1,000 resamples, the same ones for every candidate: the difference to truncation gets a paired
interval. A set's value is the mean over its criteria; the development value is the mean of SummEval's and
Newsroom's (each set resampled on its own). Scores are cached under ``<out>/scores`` and vectors in an
embedding cache (``<out>/cache``), so each text is embedded once per reading.

The rule, declared before the study ran (:data:`RULE`): validation numbers are computed only after the
defaults were chosen on the development sets.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from movers import metrics as registry

from .data import data_root, load_dataset

__all__ = ["READINGS", "SETS", "Reading", "candidates", "main", "run_study", "render", "RULE", "BEGIN", "END",
           "FIGURES"]

SETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "summeval": ("development", ("consistency", "relevance")),
    "newsroom_human": ("development", ("coherence", "fluency", "informativeness", "relevance")),
    "realsumm": ("validation", ("litepyramid_recall",)),
}
"""set -> (role, the human criteria correlated): the study's protocol (SummEval as BARTScore's source ->
hypothesis rows, Newsroom's four aspects, RealSumm's LitePyramid recall)."""

SHORT = {"summeval": "SummEval", "newsroom_human": "Newsroom", "realsumm": "RealSumm"}

RULE = ("Per metric, the default is truncation (MoverScore's and Lazy-EMD's originals' and bert-score's reading, "
        "and the cheapest) "
        "unless a whole-text reading has a higher development mean with a paired 95% interval above 0 (then the "
        "best such one). The partial transports are measured and offered as options, not as the long-text "
        "default: they change every pair whose two sides differ in mass, short ones included.")
"""The decision rule, fixed before the study ran."""

FIGURES = "cards/long_texts.json"
"""The committed figures (relative to the checkout) the docs' generated tables are rendered from."""


@dataclass(frozen=True)
class Reading:
    """One way of reading a text longer than the window (:class:`~movers.text.embedding.Encoder` settings)."""

    key: str
    label: str
    long_texts: str
    window_size: int | None = None
    window_overlap: float = 0.5

    def encoder_options(self) -> dict[str, Any]:
        return {"long_texts": self.long_texts, "window_size": self.window_size, "window_overlap": self.window_overlap}


READINGS = (
    Reading("truncate", "truncated at 512 tokens", "truncate"),
    Reading("w512h", "512-token windows, half overlap", "window"),
    Reading("w512q", "512-token windows, quarter overlap", "window", None, 0.25),
    Reading("w512n", "512-token windows, no overlap", "window", None, 0.0),
    Reading("w256h", "256-token windows, half overlap", "window", 256, 0.5),
    Reading("w256n", "256-token windows, no overlap", "window", 256, 0.0),
)
BY_KEY = {r.key: r for r in READINGS}
PARTIAL_READINGS = ("truncate", "w512h")
"""The readings the partial transport is scored with."""


def candidates(slug: str) -> list[tuple[str, str, str | None]]:
    """(key, reading key, partial?) per candidate of `slug`: every reading (SMS: truncated or whole), then the
    partial transport on the readings of :data:`PARTIAL_READINGS`."""
    study = registry.get(slug).long_text_study
    assert study is not None
    readings = [r.key for r in READINGS] if study.windows else list(PARTIAL_READINGS)
    return [(r, r, None) for r in readings] + [(f"partial-{r}", r, "partial") for r in PARTIAL_READINGS]


def studied() -> list[str]:
    """The metrics that declare a long-text study, in registry order."""
    return [slug for slug in registry.slugs() if registry.get(slug).long_text_study is not None]


# ---------------------------------------------------------------------------------------------------- data

@dataclass(frozen=True)
class StudySet:
    name: str
    role: str
    criteria: tuple[str, ...]
    predictions: list[str]
    sources: list[str]
    documents: list[str]
    human: dict[str, np.ndarray]


def load_set(name: str, limit: int | None = None) -> StudySet:
    """A set's summaries with their source articles (``<name>_docs.jsonl``) and human scores; `limit` keeps the
    first N documents (for quick runs and tests)."""
    role, criteria = SETS[name]
    data = load_dataset(name, preprocess="none")
    path = data_root() / name / f"{name}_docs.jsonl"
    with path.open(encoding="utf-8") as f:
        sources = {d["doc_id"]: d["source"] for d in map(json.loads, f) if d}
    keep = list(dict.fromkeys(r["doc_id"] for r in data.records))[:limit] if limit else None
    records = [r for r in data.records if keep is None or r["doc_id"] in set(keep)]
    human = {c: np.array([float(r["human"][c]) for r in records]) for c in criteria}
    return StudySet(name, role, criteria, [r["hypothesis"] for r in records],
                    [sources[r["doc_id"]] for r in records], [str(r["doc_id"]) for r in records], human)


def window_words(split: str = "dev", model: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """How many words the encoder's first window holds: over the source articles of the `split`'s sets longer than
    the window of `model` (default the bundled MiniLM), the words (white-space tokens with a letter or a digit;
    punctuation marks are not counted) of what truncation keeps (:meth:`~movers.text.embedding.Encoder.first_window`).
    Returns the count of articles, the median and the 10th and 90th percentiles."""
    import movers

    encoder = movers.load_encoder(model, device="cpu")
    words = []
    for name, (role, _) in SETS.items():
        if (role == "validation") != (split == "validation"):
            continue
        data = load_set(name, limit)
        for text in dict.fromkeys(data.sources):
            if len(encoder.content_ids([text])[0]) > encoder.span:
                kept = encoder.first_window([text])[0]
                words.append(sum(any(c.isalnum() for c in w) for w in kept.split()))
    assert words, f"no {split} article is longer than the window of {encoder.name}"
    low, median, high = np.percentile(words, [10, 50, 90])
    return {"model": encoder.name, "window": encoder.backbone.window, "articles": len(words), "median": median,
            "p10": low, "p90": high}


def encoder_cost(texts: Sequence[str], reading: Reading) -> float:
    """Tokens the encoder runs under `reading` over the unique `texts`, as a multiple of the floor: every
    content token once, in 512-token windows without overlap (special tokens counted in both)."""
    from movers import Encoder

    encoder = Encoder(**reading.encoder_options())
    floor = Encoder(long_texts="window", window_overlap=0.0)
    n_special = len(encoder.backbone.prefix) + len(encoder.backbone.suffix)
    lengths = [len(ids) for ids in encoder.tokenize(list(dict.fromkeys(texts)))]
    run = sum(e - s + n_special for n in lengths for s, e in encoder.windows(n))
    need = sum(e - s + n_special for n in lengths for s, e in floor.windows(n))
    return run / need


# ------------------------------------------------------------------------------------------------ scoring

def _score(slug: str, key: str, data: StudySet, out: Path, cache: Path, cached_only: bool = False) -> dict | None:
    """One metric under one candidate on one set: scores (higher = better) and signature, cached on disk (None
    with `cached_only` when they are not on disk yet)."""
    from movers import Encoder
    from movers.pipeline.call import make_options

    spec = registry.get(slug)
    study = spec.long_text_study
    assert study is not None
    reading_key, partial = next((r, p) for k, r, p in candidates(slug) if k == key)
    reading = BY_KEY[reading_key]
    options: dict[str, Any] = dict(study.options)
    if partial:
        options.update(study.partial)
    refs = data.sources
    if study.windows:
        options["encoder"] = Encoder(**reading.encoder_options())
    else:  # sentence by sentence: the reading applies to the document (truncate: cut after its first window)
        options["long_texts"] = reading.long_texts
    digest = hashlib.sha1(json.dumps([slug, key, {k: v for k, v in options.items() if k != "encoder"},
                                      reading.encoder_options(), data.name, len(data.predictions)],
                                     sort_keys=True).encode()).hexdigest()[:12]
    path = out / "scores" / f"{data.name}_{slug}_{key}_{digest}.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    if cached_only:
        return None
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = registry.function(spec)(data.predictions, [[r] for r in refs], cache=str(cache), **options)
    output = study.output if partial else "scores"
    values = result.scores if output == "scores" else result.extra[output]
    resolved = spec.resolve(make_options(spec, {k: v for k, v in options.items() if k != "encoder"}))
    scores = [float(spec.reward(resolved, float(x))) if output == "scores" else float(x) for x in values]
    saved = {"scores": scores, "signature": str(result.signature), "output": output,
             "seconds": time.perf_counter() - start}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved))
    return saved


# --------------------------------------------------------------------------------------------- statistics

def document_resamples(documents: Sequence[str], n_boot: int, seed: int) -> list[np.ndarray]:
    """`n_boot` resamples of the records: the documents drawn with replacement, each with all its records."""
    names, index = np.unique(np.asarray(documents), return_inverse=True)
    members = [np.flatnonzero(index == j) for j in range(len(names))]
    rng = np.random.default_rng(seed)
    return [np.concatenate([members[j] for j in rng.integers(0, len(names), len(names))]) for _ in range(n_boot)]


def kendall(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.kendalltau(x, y)[0])


def set_figures(scores: Sequence[float], data: StudySet, resamples: list[np.ndarray]) -> dict:
    """Kendall τ per criterion, their mean, and the mean's bootstrap distribution (over the given resamples)."""
    m = np.asarray(scores, float)
    per = {c: kendall(m, h) for c, h in data.human.items()}
    boot = np.array([np.mean([kendall(m[idx], h[idx]) for h in data.human.values()]) for idx in resamples])
    return {"criteria": per, "value": float(np.mean(list(per.values()))), "boot": boot}


def _interval(dist: np.ndarray) -> list[float]:
    return [float(np.nanpercentile(dist, 2.5)), float(np.nanpercentile(dist, 97.5))]


def run_study(split: str, metrics: list[str], *, out: Path, cache: Path, n_boot: int = 1000, seed: int = 0,
              limit: int | None = None, cached_only: bool = False, log: Any = print) -> dict:
    """Score every candidate of every metric on the sets of `split` ("dev" or "validation"); the figures. With
    `cached_only`, only the candidates whose scores are already on disk (the others are left out of the figures
    and named in their "missing" list)."""
    role = {"dev": "development", "validation": "validation"}[split]
    result: dict[str, Any] = {"split": split, "bootstrap": n_boot, "seed": seed, "limit": limit, "sets": {},
                              "metrics": {}, "cost": {}, "missing": []}
    boots: dict[tuple[str, str, str], np.ndarray] = {}
    for name, (set_role, criteria) in SETS.items():
        if set_role != role:
            continue
        data = load_set(name, limit)
        resamples = document_resamples(data.documents, n_boot, seed)
        result["sets"][name] = {"role": set_role, "criteria": list(criteria), "summaries": len(data.predictions),
                                "documents": len(set(data.documents))}
        result["cost"][name] = {r.key: encoder_cost(data.predictions + data.sources, r) for r in READINGS}
        for slug in metrics:
            entry = result["metrics"].setdefault(slug, {})
            for key, _, _ in candidates(slug):
                saved = _score(slug, key, data, out, cache, cached_only)
                if saved is None:
                    result["missing"].append(f"{slug} {key} {name}")
                    log(f"  {SHORT[name]}: {slug} {key}: not computed", flush=True)
                    continue
                fig = set_figures(saved["scores"], data, resamples)
                boots[(slug, key, name)] = fig.pop("boot")
                entry.setdefault(key, {"signature": saved["signature"], "sets": {}})["sets"][name] = {
                    **fig, "ci": _interval(boots[(slug, key, name)]), "seconds": saved["seconds"]}
                log(f"  {SHORT[name]}: {slug} {key}: tau {fig['value']:.3f} ({saved['seconds']:.0f} s)", flush=True)
    names = list(result["sets"])
    for slug, entry in result["metrics"].items():  # the mean over the split's sets, and the paired differences
        complete = {k for k, row in entry.items() if set(row["sets"]) == set(names)}
        for key in set(entry) - complete:
            del entry[key]  # a candidate computed on some of the split's sets only: left out with the missing ones
        if "truncate" not in entry:
            entry.clear()
            continue
        base = np.mean([boots[(slug, "truncate", n)] for n in names], 0)
        for key, row in entry.items():
            dist = np.mean([boots[(slug, key, n)] for n in names], 0)
            row["mean"] = {"value": float(np.mean([row["sets"][n]["value"] for n in names])), "ci": _interval(dist)}
            for n in names:
                diff = boots[(slug, key, n)] - boots[(slug, "truncate", n)]
                row["sets"][n]["delta"] = {"value": row["sets"][n]["value"] - entry["truncate"]["sets"][n]["value"],
                                           "ci": _interval(diff)}
            row["mean"]["delta"] = {"value": row["mean"]["value"] - float(np.mean(
                [entry["truncate"]["sets"][n]["value"] for n in names])), "ci": _interval(dist - base)}
    return result


# ---------------------------------------------------------------------------------------------- rendering

BEGIN = "<!-- long-texts: generated from cards/long_texts.json by `python -m shared.bench long-texts --render` -->"
END = "<!-- /long-texts -->"


def _label(key: str) -> str:
    reading = BY_KEY[key.removeprefix("partial-")]
    return f"partial transport, {reading.label}" if key.startswith("partial-") else reading.label


def _cell(v: dict, signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    lo, hi = v["ci"]
    star = "*" if signed and (lo > 0 or hi < 0) else ""
    return f"{v['value']:{f}} [{lo:{f}}, {hi:{f}}]{star}"


def default_reading(slug: str) -> str:
    """The key of the reading a metric uses by default (its declared ``long_texts`` default and window)."""
    from movers.core.options import option_fields

    spec = registry.get(slug)
    fields = {f.name: f.default for f in option_fields(spec.Options)}
    study = spec.long_text_study
    assert study is not None
    if not study.windows:  # sentence by sentence: the reading applies to the document (first window or all of it)
        return "truncate" if fields.get("long_texts") == "truncate" else "w512h"
    for r in READINGS:
        if (r.long_texts, r.window_size, r.window_overlap) == (
                fields.get("long_texts"), fields.get("window_size"), fields.get("window_overlap", 0.5)):
            return r.key
    raise ValueError(f"long-texts: {slug}'s default reading is not one of the study's.")


NOT_COMPUTED = "not computed"
"""The cell of a validation candidate whose scores were not computed (a run stopped before it)."""


def _validation_cells(val: dict | None, slug: str, key: str) -> str:
    """The RealSumm columns of a row: τ and its paired difference to truncation, or "not computed"."""
    if not val:
        return ""
    row = val["metrics"].get(slug, {}).get(key)
    if row is None:
        return f" {NOT_COMPUTED} | |"
    v = row["sets"]["realsumm"]
    return f" {_cell(v)} | {'' if key == 'truncate' else _cell(v['delta'], signed=True)} |"


def render_full(figures: dict) -> str:
    """The study page's tables: per metric, every candidate on the development and the validation sets."""
    dev, val = figures["dev"], figures.get("validation")
    lines = [BEGIN, "", f"**Rule.** {RULE}", ""]
    if val and val.get("missing"):
        names = ", ".join(f"{registry.get(m.split()[0]).title} {_label(m.split()[1])}" for m in val["missing"])
        lines += [f"**Not computed on the validation set** (the run stopped before them; their cells say so): "
                  f"{names}.", ""]
    for slug, entry in dev["metrics"].items():
        spec = registry.get(slug)
        study = spec.long_text_study
        assert study is not None
        chosen = default_reading(slug)
        partial = " ".join(study.partial_label.split())
        lines += [f"### {spec.title}", "", f"The transport that fits a short text against a long one: {partial}.", ""]
        cols = [SHORT[n] for n in dev["sets"]]
        head = ("| candidate | encoder ÷ floor | " + " | ".join(cols) + " | development mean | Δ vs truncation |"
                + (" RealSumm | Δ vs truncation |" if val else ""))
        lines += [head, "|---|---|" + "---|" * (len(cols) + 2) + ("---|---|" if val else "")]
        for key, row in entry.items():
            reading = key.removeprefix("partial-")
            cost = "n/a" if not study.windows else \
                " / ".join(f"{dev['cost'][n][reading]:.2f}" for n in dev["sets"])
            name = _label(key) if study.windows else \
                {"truncate": "article truncated at 512 tokens", "w512h": "whole article"}[reading]
            name = f"partial transport, {name}" if key.startswith("partial-") and not study.windows else name
            name = f"**{name}** (default)" if key == chosen else name
            cells = [_cell(row["sets"][n]) for n in dev["sets"]]
            delta = "" if key == "truncate" else _cell(row["mean"]["delta"], signed=True)
            tail = _validation_cells(val, slug, key)
            lines.append(f"| {name} | {cost} | " + " | ".join(cells) + f" | {_cell(row['mean'])} | {delta} |" + tail)
        lines.append("")
    lines += _criteria_table(figures) + ["", END]
    return "\n".join(lines)


def _criteria_table(figures: dict) -> list[str]:
    """Kendall τ per criterion (point values) of each metric's truncation, its whole text in half-overlapping
    windows and its default."""
    dev, val = figures["dev"], figures.get("validation")
    crits = [(n, c) for n in dev["sets"] for c in dev["sets"][n]["criteria"]]
    head = "| metric | reading | " + " | ".join(f"{SHORT[n]} {c}" for n, c in crits) + (
        " | RealSumm LitePyramid |" if val else " |")
    lines = ["Kendall τ per criterion:", "", head, "|---|---|" + "---|" * (len(crits) + (1 if val else 0))]
    for slug, entry in dev["metrics"].items():
        spec = registry.get(slug)
        keys = list(dict.fromkeys(["truncate", "w512h", default_reading(slug)]))
        for key in keys:
            row = entry[key]
            cells = [f"{row['sets'][n]['criteria'][c]:.3f}" for n, c in crits]
            if val:
                v = val["metrics"].get(slug, {}).get(key)
                cells.append(f"{v['sets']['realsumm']['value']:.3f}" if v else NOT_COMPUTED)
            lines.append(f"| {spec.title} | {_short(slug, key)} | " + " | ".join(cells) + " |")
    return lines


def _short(slug: str, key: str) -> str:
    study = registry.get(slug).long_text_study
    assert study is not None
    text = {"truncate": "truncated", "w512h": "512 windows, half overlap" if study.windows else "whole document"}
    label = text.get(key, _label(key))
    return f"{label} (default)" if key == default_reading(slug) else label


def render_compact(figures: dict, slugs: list[str] | None = None) -> str:
    """A short table: per metric, truncation, the half-overlap windows and
    the default, development mean and RealSumm with the paired difference to truncation."""
    dev, val = figures["dev"], figures.get("validation")
    lines = [BEGIN, "", "| metric | reading | development mean τ | Δ vs truncation |"
             + (" RealSumm τ | Δ vs truncation |" if val else ""),
             "|---|---|---|---|" + ("---|---|" if val else "")]
    for slug in slugs or list(dev["metrics"]):
        entry = dev["metrics"][slug]
        spec = registry.get(slug)
        for key in dict.fromkeys(["truncate", "w512h", default_reading(slug)]):
            row = entry[key]
            delta = "" if key == "truncate" else _cell(row["mean"]["delta"], signed=True)
            tail = _validation_cells(val, slug, key)
            lines.append(f"| {spec.title} | {_short(slug, key)} | {_cell(row['mean'])} | {delta} |" + tail)
    lines += ["", END]
    return "\n".join(lines)


TARGETS = {"docs/long-texts.md": None}
"""Pages with a generated block: the full tables (None) or the compact table of every metric ("all")."""


def render(figures: dict, repo: Path) -> dict[Path, str]:
    """{file: its generated block}: the study page's tables of every candidate (the cards, the README and the
    benchmarks page link to it)."""
    return {repo / "docs" / "long-texts.md": render_full(figures)}


def sync(text: str, block: str, where: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"long-texts: {where} has no generated block ({BEGIN} ... {END}).")
    return pattern.sub(lambda _: block, text, count=1)


def _strip(figures: dict) -> dict:
    """The figures without the per-candidate seconds (they vary by machine and load)."""
    out = json.loads(json.dumps(figures))
    for entry in out["metrics"].values():
        for row in entry.values():
            for s in row["sets"].values():
                s.pop("seconds", None)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench long-texts", description=__doc__.split("\n\n")[0])
    p.add_argument("--split", choices=["dev", "validation"], default="dev",
                   help="dev (default): SummEval and Newsroom, for choosing; validation: RealSumm, final numbers")
    p.add_argument("--metric", action="append", choices=studied(), help="repeatable (default: every studied metric)")
    p.add_argument("--out", default="bench-out/long-texts", help="folder for the scores, the cache and the JSON")
    p.add_argument("--cache", help="embedding cache folder (default: <out>/cache)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, help="the first N documents of each set (a quick run)")
    p.add_argument("--cached-only", action="store_true",
                   help="figures from the candidates already scored under --out; the others are listed as not computed")
    p.add_argument("--figures", default=FIGURES, help=f"the figures file to update (default {FIGURES})")
    p.add_argument("--render", metavar="JSON", help="render the figures in JSON instead of scoring")
    p.add_argument("--write", action="store_true", help="with --render: rewrite the blocks in the docs")
    p.add_argument("--repo", default=".", help="with --write / --figures: the checkout")
    p.add_argument("--window-words", action="store_true",
                   help="print how many words the encoder's first window holds on the split's articles, and stop")
    p.add_argument("--model", default=None, help="with --window-words: the encoder (default: the bundled MiniLM)")
    args = p.parse_args(argv)
    repo = Path(args.repo)
    if args.window_words:
        w = window_words(args.split, args.model, args.limit)
        print(f"{w['model']}, {w['window']} positions: {w['median']:.0f} words in the first window (median over "
              f"{w['articles']} {args.split} articles longer than it; 10th-90th percentile {w['p10']:.0f}-"
              f"{w['p90']:.0f}; punctuation marks not counted)")
        return 0
    if args.render:
        figures = json.loads(Path(args.render).read_text())
        for path, block in render(figures, repo).items():
            if args.write:
                new = sync(path.read_text(encoding="utf-8"), block, str(path))
                path.write_text(new, encoding="utf-8")
                print(f"wrote {path}")
            else:
                print(f"## {path}\n\n{block}\n")
        return 0
    if args.split == "validation":
        print("> note: VALIDATION set: final figures only, after the defaults were chosen; never for choosing them.\n")
    out = Path(args.out)
    result = run_study(args.split, args.metric or studied(), out=out, cache=Path(args.cache or out / "cache"),
                       n_boot=args.bootstrap, seed=args.seed, limit=args.limit, cached_only=args.cached_only)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"long_texts_{args.split}.json").write_text(json.dumps(result, indent=1))
    figures_path = repo / args.figures
    figures = json.loads(figures_path.read_text()) if figures_path.is_file() else {}
    figures[args.split] = _strip(result)
    if "dev" in figures:
        print(render_full(figures))
    if args.limit is None:
        figures_path.parent.mkdir(parents=True, exist_ok=True)
        figures_path.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"\nsaved {figures_path}")
    return 0
