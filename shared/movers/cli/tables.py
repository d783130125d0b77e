"""Output of ``movers score`` for several systems (a :class:`movers.Comparison`): an aligned text table per
metric, JSON, TSV/CSV rows, or a LaTeX (booktabs) table with one column per metric.

With a paired test the first system is the baseline (``Baseline: <name>``, as sacreBLEU prints it), every
system has the mean ± half width of its 95% bootstrap interval where the test gives one, and every other
system its p-value, marked ``*`` below 0.05.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only: `movers score --help` reads TEXT_WIDTH without importing torch
    from ..api.comparison import Comparison, SystemScore

__all__ = ["render_comparison", "rounded", "number", "TEXT_WIDTH"]

TEXT_WIDTH = 4
"""Decimals of the text and LaTeX output unless ``--width`` says otherwise (sacreBLEU prints fixed decimals)."""

_TESTS = {"bs": ("Paired bootstrap resampling", "resamples"), "ar": ("Paired approximate randomization", "trials")}
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def render_comparison(c: Comparison, *, fmt: str, width: int | None, per_segment: bool,
                      titles: Mapping[str, str]) -> str:
    """`c` as text, json, tsv, csv or latex; `titles` are the metrics' display names (LaTeX headers). `width`:
    decimals (None: :data:`TEXT_WIDTH` in text and latex, full precision in the data formats)."""
    if fmt == "json":
        return json.dumps(rounded(c.to_dict(per_segment=per_segment), width), indent=1, ensure_ascii=False) + "\n"
    if fmt in ("tsv", "csv"):
        return _rows(c, "\t" if fmt == "tsv" else ",", per_segment, width)
    if fmt == "latex":
        return _latex(c, TEXT_WIDTH if width is None else width, titles)
    return _text(c, TEXT_WIDTH if width is None else width)


def rounded(value: Any, width: int | None) -> Any:
    """Every float in `value` (nested dicts and lists) rounded to `width` decimals; None: as computed. The data
    formats (json, tsv, csv) print full precision unless ``--width`` is given."""
    if width is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return round(value, width)
    if isinstance(value, dict):
        return {k: rounded(v, width) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, width) for v in value]
    return value


def number(x: float, width: int | None) -> str:
    """One score in the data formats: ``repr`` of the float, rounded to `width` decimals unless None."""
    return repr(rounded(float(x), width))


def _label(c: Comparison, name: str) -> str:
    return f"Baseline: {name}" if c.test is not None and name == c.baseline else name


def _p(r: SystemScore) -> str:
    """sacreBLEU's four decimals, ``*`` below 0.05."""
    return "" if r.p_value is None else f"{r.p_value:.4f}" + ("*" if r.significant else " ")


def _footer(c: Comparison) -> str:
    if c.test is None:
        return ""
    name, unit = _TESTS[c.test]
    seed = "none" if c.seed is None else c.seed
    return (f"{name} test ({c.samples} {unit}, seed {seed}) of each system against the baseline; "
            f"p-values marked * are below 0.05.\n")


def _text(c: Comparison, width: int) -> str:
    blocks = []
    for slug in c.metrics:
        results = list(c[slug].values())
        has_interval = any(r.interval is not None for r in results)
        header = ["System", "Score", *(["μ ± 95% CI"] if has_interval else []), *(["p-value"] if c.test else [])]
        rows = []
        for r in results:
            row = [_label(c, r.system), f"{r.score:.{width}f}"]
            if has_interval:
                ci = r.interval
                row.append("" if ci is None else f"{ci.mean:.{width}f} ± {ci.half_width:.{width}f}")
            if c.test:
                row.append(_p(r))
            rows.append(row)
        sizes = [max(len(x[k]) for x in [header, *rows]) for k in range(len(header))]
        lines = [results[0].signature]
        for row in [header, *rows]:
            cells = [row[0].ljust(sizes[0]), *(cell.rjust(size) for cell, size in zip(row[1:], sizes[1:], strict=True))]
            lines.append("  ".join(cells).rstrip())
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + ("\n" + _footer(c) if c.test else "")


def _rows(c: Comparison, delimiter: str, per_segment: bool, width: int | None) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    if per_segment:
        writer.writerow(["metric", "system", "segment", "score"])
        for slug in c.metrics:
            for r in c[slug].values():
                for i, s in enumerate(r.result.scores):
                    writer.writerow([slug, r.system, i + 1, number(s, width)])
        return buf.getvalue()
    has_interval = any(r.interval is not None for by in c.results.values() for r in by.values())
    writer.writerow(["metric", "system", "score", *(["mean", "half_width", "low", "high"] if has_interval else []),
                     *(["p_value"] if c.test else []), "signature"])
    for slug in c.metrics:
        for r in c[slug].values():
            row = [slug, r.system, number(r.score, width)]
            if has_interval:
                ci = r.interval
                row += ["", "", "", ""] if ci is None else [
                    number(x, width) for x in (ci.mean, ci.half_width, ci.low, ci.high)]
            if c.test:
                row.append("" if r.p_value is None else repr(r.p_value))
            writer.writerow(row + [r.signature])
    return buf.getvalue()


def _escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex_cell(r: SystemScore, width: int) -> str:
    cell = f"{r.score:.{width}f}"
    if r.interval is not None:
        cell += f" ($\\mu = {r.interval.mean:.{width}f} \\pm {r.interval.half_width:.{width}f}$)"
    if r.p_value is not None:
        cell += f" ($p = {r.p_value:.4f}$)" + ("$^*$" if r.significant else "")
    return cell


def _latex(c: Comparison, width: int, titles: Mapping[str, str]) -> str:
    lines = [f"% {c[slug][c.baseline].signature}" for slug in c.metrics]
    if c.test:
        lines.append(f"% {_footer(c).strip()}")
    lines += [r"\begin{tabular}{l" + "r" * len(c.metrics) + "}", r"\toprule",
              " & ".join(["System", *(_escape(titles.get(slug, slug)) for slug in c.metrics)]) + r" \\",
              r"\midrule"]
    for name in c.systems:
        cells = [_escape(_label(c, name)), *(_latex_cell(c[slug][name], width) for slug in c.metrics)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
