"""The parts of a metric card that come from its declaration: the option table (names, types, defaults, what
each does, the worst value an empty prediction gets), kept between two markers in ``cards/<slug>.md`` and
checked by the tests against the spec.

    python -m movers.integrations.hub.cards --write    # rewrite the generated parts of every card (and its copy)
"""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from ... import metrics as registry
from ...core.options import type_text
from ...core.spec import MetricSpec
from ...core.validation import MAX_TEXT_CHARS
from ...pipeline.call import make_options
from .evaluate_module import CORPUS, configurations

__all__ = ["options_table", "option_rows", "sync", "BEGIN", "END"]

BEGIN = "<!-- options: generated from the metric's declaration by `python -m movers.integrations.hub.cards --write` -->"
END = "<!-- /options -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _worst(spec: MetricSpec) -> str:
    o = spec.resolve(make_options(spec, {}))
    value = spec.worst(o)["scores"]
    return "inf" if isinstance(value, float) and math.isinf(value) else format(value, "g")


def option_rows(spec: MetricSpec) -> list[str]:
    """Every option of the spec as a Markdown table, in declaration order, with its type, default and
    documentation (the card's table and the API reference's)."""
    lines = ["| option | type | default | what it does |", "|---|---|---|---|"]
    for f in spec.options:
        doc = f.info.doc
        if f.name == "empty_predictions":
            doc += f" The worst value at the default options: {_worst(spec)}."
        runtime = " Runtime only: never changes a score." if f.info.runtime and "untime only" not in doc else ""
        lines.append(f"| `{f.name}` | {_cell(type_text(f.hint))} | `{f.default!r}` | {_cell(doc + runtime)} |")
    return lines


def options_table(spec: MetricSpec) -> str:
    """The card's option table: every option of the spec, in declaration order, with its default."""
    lines = [BEGIN, "", *option_rows(spec)]
    lines += ["", f"Every text passes one check in both APIs, `score_stream` and the command line: at most "
              f"{MAX_TEXT_CHARS:,} characters (`movers.core.validation.MAX_TEXT_CHARS`; the environment variable "
              f"`MOVERS_MAX_TEXT_CHARS` raises it), refused before tokenisation, and valid code points only (a lone "
              f"surrogate is an error naming its position). One module object may be shared by threads: "
              f"`compute(predictions=..., references=...)` calls never share state (docs/evaluate.md, *Threads*)."]
    configs = ", ".join(f"`{c}`" for c in configurations(spec))
    lines += ["", f"evaluate configurations: {configs}. The `{CORPUS}` twins (`evaluate.load(\"{spec.slug}\", "
              f"\"{CORPUS}\")`) return only the float scalars (`score` and the corpus-level values) and keep the "
              f"signature as the module's `last_signature`, so that evaluate's "
              f"`evaluator(...).compute(strategy=\"bootstrap\")`, which resamples every key it gets, works; that "
              f"bootstrap takes one reference per prediction. As a torchmetrics `Metric` (Lightning, exact under "
              f"DDP): `movers.torchmetrics.{spec.class_title()}(**options)` (docs/lightning.md)."]
    return "\n".join([*lines, "", END])


def sync(text: str, spec: MetricSpec) -> str:
    """`text` with its generated block replaced by the spec's current one (the card must hold the markers)."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"cards: the card of {spec.slug} has no generated option block ({BEGIN} ... {END}).")
    return pattern.sub(lambda _: options_table(spec), text, count=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m movers.integrations.hub.cards", description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the cards (default: list the stale ones)")
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[4]), help="the repository root")
    args = p.parse_args(argv)
    repo = Path(args.repo)
    stale = []
    for spec in registry.specs():
        card = repo / "cards" / f"{spec.slug}.md"
        if not card.is_file():
            continue
        text = card.read_text(encoding="utf-8")
        new = sync(text, spec)
        if new != text:
            stale.append(spec.slug)
        if args.write:
            card.write_text(new, encoding="utf-8")
            copy = repo / "metrics" / spec.slug / "README.md"
            if copy.parent.is_dir():
                copy.write_text(new, encoding="utf-8")
    print(("rewrote " if args.write else "stale: ") + (", ".join(stale) or "none"))
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    raise SystemExit(main())
