"""``python -m shared.bench suite``: one or more metric settings over every development (or validation) set.

    python -m shared.bench suite --suite dev --metric moverscore --metric 'moverscore={"centering": "corpus"}'

Each set has a fixed protocol (subset size, grouping, correlation, criteria; :data:`SUITES`), so
settings are compared on the same segments with the same bootstrap resamples. For every set the
table gives the primary correlation (Pearson for WMT and STS, as their literature reports; Spearman
for the others, as MoverScore's Table 4 and the summarisation/dialogue papers) averaged over the
set's human criteria (all of them: none is picked by hand) and over groups (language pairs,
years), with a 95% percentile bootstrap interval over segments (1,000 resamples, resampled within
groups). The second table gives each setting's difference to the first ``--metric`` with a
*paired* bootstrap interval (the same resamples for both), which is what a default decision needs.
The mean over sets gets an interval too: each resample's values averaged over the sets (every set is
resampled on its own), so the difference of two means has a paired interval as well.

Every segment-level run also writes each set's scored records to ``<out>/judgments/<set>.jsonl``
(:func:`shared.bench.correlation.write_judgments`): its figures are ``movers correlate`` on that file with
the set's protocol (``-m column:LABEL``, ``--group-by``, one ``--human`` per criterion, averaged).

The development suite is for choosing defaults; the validation suite is for the final figures only
(``--suite validation`` prints a reminder). Scores are cached under ``<out>/scores/`` keyed by set,
subset and the *explicit* metric options (``--no-cache`` recomputes): after a default changes, a cached
bare ``moverscore`` still holds the old default's scores, so name options explicitly or clear the cache.
Subsets keep the 2-core CI machine's budget: sizes are in :data:`SUITES` and in the output; ``--full``
scores the whole sets instead (the final validation tables).

``--level system`` correlates per-system mean scores with per-system mean human scores, with the bootstrap
over inputs (``movers.correlate``), on the sets whose records name at least :data:`MIN_SYSTEMS` systems
(STS has none, BAGEL two: their columns are left out, and listed). The scores are the segment level's
(cached), so the second level costs only the bootstrap.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from movers.core.agreement import interval

from .correlation import agreement, group_labels, parse_metric, record_layout, score_metric, write_judgments
from .data import Dataset, load_dataset

__all__ = ["SetProtocol", "SUITES", "run_suite", "main", "set_bootstrap"]


@dataclass(frozen=True)
class SetProtocol:
    spec: str                      # load_dataset spec (name or name:split)
    statistic: str                 # "pearson" | "spearman"
    limit: int | None = None       # seeded random subset of this many items (None = all)
    group_by: str | None = None    # correlate within groups, then average
    refs: str = "all"              # "all" | "first"
    criteria: tuple[str, ...] = field(default=())  # () = all criteria of the set

    @property
    def label(self) -> str:
        """Short column name with the subset size, e.g. ``wmt15_16[800]``."""
        return SHORT.get(self.spec, self.spec) + (f"[{self.limit}]" if self.limit else "")


SHORT = {"wmt15_16_da_seg_toen": "wmt15_16", "dailydialog_multiref": "dailydialog", "usr_personachat": "usr_pc",
         "newsroom_human": "newsroom", "wmt17_da_seg_toen": "wmt17", "webnlg2020_human": "webnlg2020"}


SUITES: dict[str, list[SetProtocol]] = {
    "dev": [
        SetProtocol("wmt15_16_da_seg_toen", "pearson", limit=800, group_by="year,lp"),
        SetProtocol("stsb:dev", "pearson", limit=500),
        SetProtocol("bagel", "spearman"),
        SetProtocol("sfhotel", "spearman", limit=300),
        SetProtocol("sfres", "spearman", limit=300),
        SetProtocol("summeval", "spearman", limit=200),
        SetProtocol("dailydialog_multiref", "spearman"),
        SetProtocol("usr_personachat", "spearman"),
        SetProtocol("newsroom_human", "spearman", limit=200),
    ],
    "validation": [
        SetProtocol("wmt17_da_seg_toen", "pearson", limit=700, group_by="lp"),
        SetProtocol("sts12_16", "pearson", limit=600, group_by="year"),
        SetProtocol("stsb:test", "pearson", limit=500),
        SetProtocol("realsumm", "spearman", limit=200),
        SetProtocol("webnlg2020_human", "spearman", limit=300),
    ],
}
"""Subset sizes are what two shared CPU cores afford for a handful of settings (a few minutes each)."""


def _sample(n: int, limit: int | None, seed: int) -> np.ndarray:
    if not limit or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, limit, replace=False))


def set_bootstrap(metric: Sequence[float], humans: Sequence[Sequence[float]], records: Sequence[dict],
                  protocol: SetProtocol, *, level: str = "segment", n_boot: int = 1000,
                  seed: int = 0) -> tuple[float, np.ndarray]:
    """(point value, bootstrap distribution [n_boot]) of the protocol's statistic, averaged over criteria and
    groups: ``movers.correlate`` once per criterion on the records (``column:`` scores), at the segment level
    (segments resampled within groups) or the system level (per-system means, inputs resampled within groups).

    The resamples depend only on the records' layout and the seed, so two metrics scored on the same records get
    the same resamples: subtracting their distributions gives a paired interval. Records without a score for a
    criterion (NaN) are left out of it. At the segment level the values are averaged over (group, criterion)
    pairs, at the system level over criteria of the per-criterion averages over groups.
    """
    layout = record_layout(records, level, data=protocol.spec, group_by=protocol.group_by)
    preds = [r["hypothesis"] for r in records]
    refs = [list(r["references"]) if protocol.refs == "all" else [r["references"][0]] for r in records]
    found = [agreement(records, preds, refs, human, {"metric": metric}, layout, group_by=protocol.group_by,
                       n_boot=n_boot, seed=seed, statistics=(protocol.statistic,)).metrics["metric"].result
             for human in humans]
    s = protocol.statistic
    if level == "segment":
        points = [r.groups[g].point[s] for g in found[0].groups for r in found]
        dists = [r.groups[g].boot[s] for g in found[0].groups for r in found]
    else:
        points, dists = [r.point[s] for r in found], [r.boot[s] for r in found]
    return float(np.mean(points)), np.nanmean(np.stack(dists), 0)


MIN_SYSTEMS = 4
"""The system level leaves out a set with fewer systems than this in some group: with 2 or 3 system means a
correlation says next to nothing (2 points always give ±1)."""


def _fewest_systems(records: Sequence[dict], group_by: str | None) -> int:
    groups = group_labels(records, group_by) or ["all"] * len(records)
    systems: dict[str, set] = {}
    for g, r in zip(groups, records, strict=True):
        systems.setdefault(g, set()).add(r["system"])
    return min(len(v) for v in systems.values())


def _cache_key(protocol: SetProtocol, preprocessing: str, seed: int, name: str, kwargs: dict) -> str:
    blob = json.dumps([protocol.spec, protocol.limit, protocol.refs, preprocessing, seed, name, kwargs],
                      sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def _score(name: str, kwargs: dict, preds: list[str], refs: list[list[str]]) -> tuple[list[float], str]:
    """Scores (higher = better: distances are negated) and the signature when the metric has one."""
    from .correlation import BASELINES

    if name in BASELINES:
        return score_metric(name, preds, refs, kwargs), f"{name}{json.dumps(kwargs, sort_keys=True)}"
    from movers import metrics as registry
    from movers.pipeline.call import make_options

    spec = registry.get(name)
    out = registry.function(spec)(preds, refs, **kwargs)  # = the evaluate module's compute (a thin wrapper)
    # higher is better for every metric (a distance becomes its reward), so every correlation reads the same way
    resolved = spec.resolve(make_options(spec, kwargs))
    return [float(spec.reward(resolved, float(x))) for x in out.scores], str(out.signature)


def run_suite(suite: str, metrics: list[str], *, sets: list[str] | None = None, out: Path,
              n_boot: int = 1000, seed: int = 0, use_cache: bool = True, cached_only: bool = False,
              full: bool = False, level: str = "segment") -> dict:
    """Score every setting on every set of `suite` (whole sets with `full`); returns (and saves) the figures at
    `level` ("segment" or "system"; at the system level sets without systems are left out, and listed)."""
    if level not in ("segment", "system"):
        raise ValueError(f"suite: `level` must be 'segment' or 'system', got {level!r}.")
    protocols = [replace(p, limit=None) if full else p
                 for p in SUITES[suite] if not sets or p.spec in sets or p.spec.split(":")[0] in sets]
    parsed = [parse_metric(m) for m in metrics]
    cache = out / "scores"
    cache.mkdir(parents=True, exist_ok=True)
    result: dict = {"suite": suite, "seed": seed, "bootstrap": n_boot, "level": level, "sets": {},
                    "no_systems": [], "too_few_systems": []}
    dists: dict[str, list[np.ndarray]] = {}  # label -> one bootstrap distribution per set, for the mean
    for protocol in protocols:
        data = load_dataset(protocol.spec)
        if level == "system" and any("system" not in r for r in data.records):
            result["no_systems"].append(protocol.label)
            continue
        if level == "system" and _fewest_systems(data.records, protocol.group_by) < MIN_SYSTEMS:
            result["too_few_systems"].append(protocol.label)  # BAGEL's 2: a correlation of 2 points is ±1
            continue
        pick = _sample(len(data.records), protocol.limit, seed)
        records = [data.records[i] for i in pick]
        preds = [r["hypothesis"] for r in records]
        refs = [list(r["references"]) if protocol.refs == "all" else [r["references"][0]] for r in records]
        criteria = list(protocol.criteria) or data.criteria
        humans = [Dataset(data.name, records, data.criteria).human(c) for c in criteria]  # NaN: no score, skipped
        entry: dict = {"n": len(records), "statistic": protocol.statistic, "group_by": protocol.group_by,
                       "criteria": criteria, "preprocessing": data.preprocessing, "metrics": {}}
        base_dist = None
        stem = protocol.spec.replace(":", "-")
        columns: dict[str, list[float]] = {}
        paths = [cache / f"{stem}_{_cache_key(protocol, data.preprocessing, seed, name, kwargs)}.json"
                 for _, name, kwargs in parsed]
        if cached_only and not all(p.is_file() for p in paths):
            continue
        for (label, name, kwargs), path in zip(parsed, paths, strict=False):
            cached = use_cache and path.is_file()
            if cached:
                saved = json.loads(path.read_text())
            else:
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    scores, signature = _score(name, kwargs, preds, refs)
                saved = {"label": label, "name": name, "kwargs": kwargs, "scores": scores, "signature": signature,
                         "seconds": time.perf_counter() - start}
                path.write_text(json.dumps(saved))
            columns[label] = saved["scores"]
            value, dist = set_bootstrap(saved["scores"], humans, records, protocol, level=level, n_boot=n_boot,
                                        seed=seed)
            row = {"value": value, "ci": list(interval(dist)), "signature": saved["signature"],
                   "seconds": saved["seconds"]}
            if base_dist is None:
                base_dist, base_value = dist, value
            else:
                diff = dist - base_dist
                row["delta"] = value - base_value
                row["delta_ci"] = list(interval(diff))
            entry["metrics"][label] = row
            dists.setdefault(label, []).append(dist)
            print(f"  {protocol.label}: {label}: {value:.3f} "
                  f"({'cached' if cached else format(saved['seconds'], '.0f') + ' s'})", flush=True)
        result["sets"][protocol.label] = entry
        if level == "segment" and not cached_only:  # the scored records, for movers correlate
            name = stem + (f"_{protocol.limit}" if protocol.limit else "")
            write_judgments(out / "judgments" / f"{name}.jsonl", records, preds, refs, columns)
    if result["sets"]:
        result["mean"] = _mean_over_sets([label for label, _, _ in parsed], result["sets"], dists)
    return result


def _mean_over_sets(labels: list[str], sets: dict, dists: dict[str, list[np.ndarray]]) -> dict:
    """The mean over sets with a bootstrap interval, and each setting's paired difference to the first.

    Each set is resampled on its own, so averaging the sets' bootstrap distributions resample by resample
    gives a distribution of the mean over sets; the same resamples serve every setting (paired).
    """
    base = np.mean(np.stack(dists[labels[0]]), 0)
    base_value = float(np.mean([entry["metrics"][labels[0]]["value"] for entry in sets.values()]))
    out: dict[str, dict] = {}
    for label in labels:
        mean = np.mean(np.stack(dists[label]), 0)
        value = float(np.mean([entry["metrics"][label]["value"] for entry in sets.values()]))
        row = {"value": value, "ci": list(interval(mean))}
        if label != labels[0]:
            diff = mean - base
            row["delta"] = value - base_value
            row["delta_ci"] = list(interval(diff))
        out[label] = row
    return out


def format_tables(result: dict) -> str:
    """Markdown: values with CIs per set and their mean; then differences to the first setting."""
    sets = list(result["sets"])
    labels = list(next(iter(result["sets"].values()))["metrics"]) if sets else []
    head = "| setting | " + " | ".join(f"{s} ({result['sets'][s]['statistic'][0]})" for s in sets) + " | mean |"
    lines = [head, "|---|" + "---|" * (len(sets) + 1)]
    for label in labels:
        rows = [result["sets"][s]["metrics"][label] for s in sets]
        cells = [f"{r['value']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" for r in rows]
        mean = result.get("mean", {}).get(label)
        tail = f"{mean['value']:.3f} [{mean['ci'][0]:.3f}, {mean['ci'][1]:.3f}]" if mean else \
            f"{np.mean([r['value'] for r in rows]):.3f}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {tail} |")
    if len(labels) > 1:
        lines += ["", f"Difference to `{labels[0]}`, paired 95% bootstrap interval (* = excludes 0):", "",
                  head.replace("| setting |", "| setting |"), "|---|" + "---|" * (len(sets) + 1)]
        for label in labels[1:]:
            rows = [result["sets"][s]["metrics"][label] for s in sets]
            cells = [_delta_cell(r) for r in rows]
            mean = result.get("mean", {}).get(label)
            tail = _delta_cell(mean) if mean else f"{np.mean([r['delta'] for r in rows]):+.3f}"
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {tail} |")
    return "\n".join(lines)


def _delta_cell(row: dict) -> str:
    lo, hi = row["delta_ci"]
    return f"{row['delta']:+.3f} [{lo:+.3f}, {hi:+.3f}]" + ("*" if lo > 0 or hi < 0 else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench suite", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=list(SUITES), default="dev")
    p.add_argument("--metric", action="append", required=True,
                   help="slug or baseline, optionally =JSON kwargs (label:slug=JSON); the first is the reference")
    p.add_argument("--set", action="append", help="only these sets (default: the whole suite)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full", action="store_true", help="the whole sets, not the suite's seeded subsets")
    p.add_argument("--level", choices=["segment", "system"], default="segment",
                   help="segment (default) or system: per-system means, inputs resampled (sets with systems)")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--cached-only", action="store_true", help="tables from cached scores only (skip sets not cached)")
    p.add_argument("--out", default="bench-out/suite")
    args = p.parse_args(argv)
    if args.suite == "validation":
        print("> note: VALIDATION suite: final figures only, after the defaults are frozen; never for choosing them.\n")
    out = Path(args.out)
    result = run_suite(args.suite, args.metric, sets=args.set, out=out, n_boot=args.bootstrap, seed=args.seed,
                       use_cache=not args.no_cache, cached_only=args.cached_only, full=args.full, level=args.level)
    sizes = ", ".join(f"{s} n={e['n']}" for s, e in result["sets"].items())
    how = ("segment level, segments resampled" if args.level == "segment" else
           "system level (per-system means), inputs resampled")
    print(f"\n## {args.suite} suite ({sizes}); {how}; p = Pearson, s = Spearman, averaged over criteria and "
          f"groups; 95% bootstrap CI ({args.bootstrap} resamples)\n")
    if result["no_systems"]:
        print(f"> no systems, left out at the system level: {', '.join(result['no_systems'])}\n")
    if result["too_few_systems"]:
        print(f"> fewer than {MIN_SYSTEMS} systems, left out at the system level: "
              f"{', '.join(result['too_few_systems'])}\n")
    print(format_tables(result))
    stem = out / (f"suite_{args.suite}" + ("_full" if args.full else "") +
                  ("" if args.level == "segment" else f"_{args.level}"))
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    print(f"\nsaved {stem}.json")
    return 0
