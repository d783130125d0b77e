"""``movers.correlate``: how closely metrics agree with human judgments, as the metric papers measure it.

A judgments file (:mod:`movers.api.judgments`) is read and checked as a whole; then every metric scores every
record once: a movers metric by its slug and options (the calls share one encoder pass and the embedding cache),
sacreBLEU's sentence BLEU and chrF (:data:`SACREBLEU`), or scores already in the file (``column:FIELD``: COMET,
BERTScore, anything computed elsewhere). The statistics (:mod:`movers.core.agreement`) are Pearson, Spearman and
Kendall's tau-b per group and averaged, at the segment, system or summary level, each with a bootstrap interval;
at the system level also pairwise accuracy; against one metric (``compare_to``) each other metric's paired
difference and the Williams test.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import metrics as registry
from ..core import agreement as stats
from ..core.agreement import LevelResult
from ..core.signature import SACREBLEU_VERSION_KEY
from ..core.validation import short_repr
from .judgments import HUMAN, Judgments, read_judgments

__all__ = ["correlate", "Agreement", "MetricAgreement", "MetricRequest", "parse_metric", "sacrebleu_scores",
           "sacrebleu_options", "SACREBLEU", "SACREBLEU_FUNCTIONS", "COLUMN"]

COLUMN = "column:"
"""The prefix of a metric whose scores are a field of the file (``column:comet``)."""


SACREBLEU_FUNCTIONS = {"sentbleu": "sentence_bleu", "chrf": "sentence_chrf"}
"""The sacreBLEU sentence metrics by name: the function of ``sacrebleu`` each calls."""


def _sentence_score(function: str) -> Callable[[str, list[str], dict[str, Any]], float]:
    def score(prediction: str, references: list[str], options: dict[str, Any]) -> float:
        import sacrebleu

        return float(getattr(sacrebleu, function)(prediction, references, **options).score)

    score.__doc__ = f"``sacrebleu.{function}``"
    return score


SACREBLEU: dict[str, Callable[[str, list[str], dict[str, Any]], float]] = {
    name: _sentence_score(function) for name, function in SACREBLEU_FUNCTIONS.items()}
"""The sacreBLEU sentence metrics by name (``sacrebleu.sentence_bleu``, ``sacrebleu.sentence_chrf``, with
sacreBLEU's defaults; options are their keyword arguments, :func:`sacrebleu_options`). An empty output scores 0,
their worst value."""


def sacrebleu_scores(name: str, predictions: Sequence[str], references: Sequence[Sequence[str]],
                     options: Mapping[str, Any] | None = None, *, progress: bool = False,
                     lang: str | None = None) -> list[float]:
    """Each output's sentence score under the sacreBLEU metric `name` (:data:`SACREBLEU`), its `options` checked
    first (:func:`sacrebleu_options`, with the tokenizer sacreBLEU picks for the target language `lang`)."""
    score = SACREBLEU[name]
    checked = sacrebleu_options(name, options or {}, lang=lang)
    pairs: Any = zip(predictions, references, strict=True)
    if progress:
        from tqdm.auto import tqdm

        pairs = tqdm(pairs, total=len(predictions), desc=f"movers: {name}", unit="pair", dynamic_ncols=True)
    return [score(p, list(r), dict(checked)) for p, r in pairs]


def _function_name(name: str) -> str:
    """``sacrebleu.sentence_bleu``: the sacreBLEU function a :data:`SACREBLEU` metric calls."""
    return f"sacrebleu.{SACREBLEU_FUNCTIONS[name]}"


def _accepts(value: Any, hint: Any) -> bool:
    """Whether `value` (from JSON) is of the annotated type `hint` (bool, int, float, str, Optional[...])."""
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_accepts(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool or hint is str:
        return isinstance(value, hint)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) if hint is int else hint is float and math.isfinite(value)


def _kind(hint: Any) -> str:
    import typing

    args = typing.get_args(hint)
    if args:
        return " or ".join(_kind(h) for h in args)
    return {bool: "true or false", int: "an integer", float: "a number", str: "a text"}.get(hint, "null")


def sacrebleu_options(name: str, options: Mapping[str, Any], *, lang: str | None = None) -> dict[str, Any]:
    """The keyword arguments of the sacreBLEU metric `name` (:data:`SACREBLEU`), checked as sacreBLEU's command
    line checks them, before any scoring: each a keyword of the function (``sacrebleu.sentence_bleu``,
    ``sacrebleu.sentence_chrf``) of its annotated type, not below 0 where it is a number, `tokenize` one of the
    tokenizers that run offline (:data:`movers.metrics.delta_bleu.TOKENIZERS`, sacreBLEU's own but the
    SentencePiece ones, which download a model) and `smooth_method` one of sacreBLEU's (``BLEU.SMOOTH_DEFAULTS``);
    then sacreBLEU builds its metric with them and scores a few probe pairs, so that what it refuses itself (a
    tokenizer whose packages are missing) is refused here.

    With `lang` (a code, :func:`movers.text.languages.language`) and no `tokenize`, sentence BLEU gets the tokenizer
    sacreBLEU's command line picks for that target language (``-l en-zh``: "zh"; "ja-mecab", "ko-mecab", else
    "13a"); chrF has no tokenizer and reads every language alike.

    Raises:
        ValueError: Naming the option and what sacreBLEU accepts.
    """
    import inspect
    import typing

    import sacrebleu
    from sacrebleu.metrics.bleu import BLEU

    from ..metrics.delta_bleu import TOKENIZERS

    qualified = _function_name(name)
    function = getattr(sacrebleu, qualified.split(".")[1])
    accepted = {p.name: p for p in list(inspect.signature(function).parameters.values())[2:]}
    hints = typing.get_type_hints(function)
    choices = {"tokenize": list(TOKENIZERS), "smooth_method": list(BLEU.SMOOTH_DEFAULTS)}
    for key, value in options.items():
        if key not in accepted:
            raise ValueError(f"unknown option {key!r} of {qualified}; its options are {', '.join(accepted)}.")
        hint = hints.get(key, type(accepted[key].default))  # `tokenize` has no annotation: its default's type
        if not _accepts(value, hint):
            raise ValueError(f"option `{key}` of {qualified} must be {_kind(hint)}, got {short_repr(value)}.")
        if key in choices and value not in choices[key]:
            refused = " (a SentencePiece tokenizer downloads its model at run time, which movers does not do)" \
                if key == "tokenize" and value in BLEU.TOKENIZERS else ""
            raise ValueError(f"option `{key}` of {qualified} must be one of {choices[key]}, got "
                             f"{short_repr(value)}{refused}.")
        if not isinstance(value, (bool, str)) and value is not None and value < 0:
            raise ValueError(f"option `{key}` of {qualified} must be >= 0, got {value!r}.")
    resolved = dict(options)
    chosen = ""
    if lang is not None and "tokenize" in accepted and "tokenize" not in options:
        from ..text.languages import language

        resolved["tokenize"] = language(lang, "correlate").bleu_tokenizer
        chosen = f" (sacreBLEU's tokenizer for the target language {lang!r})"
    try:
        for prediction, reference in _PROBES:
            function(prediction, [reference], **resolved)
    except Exception as e:  # sacreBLEU's own refusals: KeyError, AssertionError, RuntimeError (a missing package)
        why = " ".join(str(e).split()) or type(e).__name__
        extra = re.search(r"pip install (\S+)", why)
        if extra and "tokenize" in resolved:
            raise ValueError(f"option `tokenize` {resolved['tokenize']!r}{chosen} of {qualified} needs packages "
                             f"that are not installed (pip install '{extra.group(1)}').") from None
        raise ValueError(f"sacreBLEU refuses the options {resolved} of {qualified}{chosen}: {why}.") from None
    return resolved


_PROBES = (("a b c d", "a b c d"), ("the cat sat .", "a dog sat on it ."), ("", "x"))
"""Pairs sacreBLEU scores once with a metric's options before the file's: equal, different, an empty output."""


@dataclass(frozen=True)
class MetricRequest:
    """One metric of a call: its label in the results, what it is (``movers``, ``sacrebleu`` or ``column``), its
    name (a slug, a sacreBLEU metric, a field) and its options."""

    label: str
    kind: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


def parse_metric(text: str, label: str | None = None, *,
                 extra_options: Mapping[str, Mapping[str, Any]] | None = None,
                 lang: str | None = None) -> MetricRequest:
    """``SLUG``, ``SLUG={"option": value}``, ``sentbleu``, ``chrf`` (with sacreBLEU's keyword arguments the same
    way) or ``column:FIELD``; `extra_options` ({slug: options}) add options to a movers metric (the command line's
    ``--opt``), and `lang` (the texts' language) is a movers metric's `lang` and sentence BLEU's tokenizer
    (:func:`sacrebleu_options`) where the metric's own options do not set them. Options are checked here, before
    anything is scored."""
    text = text.strip()
    label = label or text
    if text.startswith(COLUMN):
        name = text[len(COLUMN):].strip()
        if not name:
            raise ValueError(f"correlate: metric {text!r}: name the field after {COLUMN!r} (column:comet).")
        return MetricRequest(label, "column", name)
    name, sep, raw = text.partition("=")
    name = name.strip()
    options: dict[str, Any] = {}
    if sep:
        try:
            options = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"correlate: metric {text!r}: the options after '=' must be a JSON object "
                             f"({e.msg} at column {e.colno}).") from None
        if not isinstance(options, dict):
            raise ValueError(f"correlate: metric {text!r}: the options after '=' must be a JSON object, got "
                             f"{raw.strip()!r}.")
    if name in SACREBLEU:
        try:
            options = sacrebleu_options(name, options, lang=lang)
        except ValueError as e:
            raise ValueError(f"correlate: metric {text!r}: {e}") from None
        return MetricRequest(label, "sacrebleu", name, options)
    if not registry.is_slug(name):
        raise ValueError(f"correlate: unknown metric {name!r}; choose a movers metric ({', '.join(registry.slugs())}),"
                         f" {' or '.join(SACREBLEU)}, or {COLUMN}FIELD for scores in the file.")
    spec = registry.get(name)
    languages = {"lang": lang} if lang is not None and spec.has_option("lang") else {}
    options = {**languages, **(extra_options or {}).get(name, {}), **options}
    from ..pipeline.call import checked_options

    try:
        checked_options(spec, options)
    except (TypeError, ValueError) as e:
        raise ValueError(f"correlate: metric {text!r}: {e}") from None
    return MetricRequest(label, "movers", name, options)


@dataclass(frozen=True)
class MetricAgreement:
    """One metric's agreement with the human scores: the scores it gave (negated for a distance), their
    signature, and the statistics (:class:`movers.core.agreement.LevelResult`)."""

    label: str
    request: MetricRequest
    scores: tuple[float, ...]
    signature: str | None
    negated: bool
    result: LevelResult

    def undefined_groups(self) -> list[str]:
        """The groups where the metric has no correlation: its scores (or, at the summary level, every input's
        scores) are all equal there."""
        return [g for g, r in self.result.groups.items() if all(math.isnan(v) for v in r.point.values())]


def _estimate(value: float, low: float, high: float) -> dict[str, Any]:
    """``{"value", "ci"}``; None (JSON null) where a statistic is undefined, never NaN."""
    if math.isnan(value):
        return {"value": None, "ci": None}
    return {"value": value, "ci": None if math.isnan(low) else [low, high]}


def _plain(x: float) -> float | None:
    return None if math.isnan(x) else x


@dataclass(frozen=True)
class Agreement:
    """What :func:`correlate` found: per metric its statistics, and against `compare_to` the paired differences
    and the Williams test. :meth:`to_dict` is the JSON the command prints with ``--format json``."""

    judgments: Judgments
    metrics: dict[str, MetricAgreement]
    compare_to: str | None
    resamples: int
    seed: int

    @property
    def level(self) -> str:
        return self.judgments.level

    @property
    def statistics(self) -> tuple[str, ...]:
        return tuple(next(iter(self.metrics.values())).result.point)

    def differences(self) -> dict[str, dict[str, tuple[float, float, float]]]:
        """label -> statistic -> (metric − compare_to, low, high) from the same resamples; empty without
        `compare_to`."""
        if self.compare_to is None:
            return {}
        base = self.metrics[self.compare_to].result
        return {label: stats.paired_difference(m.result, base) for label, m in self.metrics.items()
                if label != self.compare_to}

    def williams(self) -> dict[str, dict[str, dict[str, float]]]:
        """label -> group -> Williams test of Pearson r > compare_to's (:func:`movers.core.agreement.williams_test`);
        empty without `compare_to` or at the summary level."""
        if self.compare_to is None:
            return {}
        base = self.metrics[self.compare_to].result
        return {label: stats.williams_by_group(m.result, base) for label, m in self.metrics.items()
                if label != self.compare_to}

    def notes(self) -> list[str]:
        """What a reader must know besides the numbers: metrics without a correlation in some group, distances
        negated, records skipped, summary-level inputs left out."""
        out = []
        n_groups = len(next(iter(self.metrics.values())).result.groups)
        for label, m in self.metrics.items():
            lost = m.undefined_groups()
            if len(lost) == n_groups:
                out.append(f"{label}: its scores are all equal{' in every group' if n_groups > 1 else ''}: it has "
                           f"no correlation with the human scores.")
            elif lost:
                out.append(f"{label}: its scores are all equal in group{'s' if len(lost) > 1 else ''} "
                           f"{', '.join(map(repr, lost))}: no correlation there; its averages are over "
                           f"{n_groups - len(lost)} of {n_groups} groups.")
            undefined = sum(g.undefined for g in m.result.groups.values())
            if undefined:
                out.append(f"{label}: {undefined} input(s) without a correlation (the metric's or the human scores "
                           f"equal across the input's outputs) left out of the summary-level average.")
            if m.negated:
                out.append(f"{label}: a distance (lower is better), negated so that its correlations read as the "
                           f"others' (higher = closer to the human judgments).")
        tests = [w for by_group in self.williams().values() for w in by_group.values()]
        if any(math.isnan(w["p"]) for w in tests):
            out.append(f"Williams test: n/a where a group has fewer than 4 units, a metric has no correlation, or a "
                       f"metric correlates perfectly with {self.compare_to}.")
        skipped = next(iter(self.metrics.values())).result.skipped
        if skipped:
            out.append(f"{skipped} record(s) without a human score (field `{self.judgments.human_field}`) left out.")
        return out

    def to_dict(self, *, scores: bool = False) -> dict[str, Any]:
        """The JSON of the results: ``{"level", "n", "metrics": {label: {statistic: {"value", "ci"}, "per_group",
        ...}}, "compare_to", "differences", "williams": {label: {"t", "p", "df", "n", "per_group"}}, "notes",
        ...}``; an undefined value is null, never NaN. With `scores`, each metric's scores too."""
        first = next(iter(self.metrics.values())).result
        j = self.judgments
        out: dict[str, Any] = {
            "level": self.level, "n": len(j.records), "human": j.human_field,
            "group_by": ",".join(j.group_by) or None, "input_field": ",".join(j.input_fields) or None,
            "groups": {g: {"units": r.units, "resampled": r.resampled} for g, r in first.groups.items()},
            "skipped": first.skipped, "resamples": self.resamples, "seed": self.seed,
            "confidence": stats.CONFIDENCE, "metrics": {}, "compare_to": self.compare_to}
        for label, m in self.metrics.items():
            entry: dict[str, Any] = {s: _estimate(*m.result.interval(s)) for s in self.statistics}
            entry["per_group"] = {g: {s: _plain(r.point[s]) for s in self.statistics}
                                  for g, r in m.result.groups.items()}
            entry.update(negated=m.negated, signature=m.signature)
            if scores:
                entry["scores"] = list(m.scores)
            out["metrics"][label] = entry
        if self.compare_to is not None:
            out["differences"] = {label: {s: _estimate(*v) for s, v in diff.items()}
                                  for label, diff in self.differences().items()}
            out["williams"] = {label: _williams_entry(by_group) for label, by_group in self.williams().items()}
        out["notes"] = self.notes()
        return out

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text (NaN can never appear: ``allow_nan=False``)."""
        return json.dumps(self.to_dict(**kwargs), indent=1, ensure_ascii=False, allow_nan=False)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """A PNG of one panel per metric: its scores against the human scores (segments, system means, or at the
        summary level every output), coloured by group, with the correlation in the panel's title."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = list(self.metrics)
        columns = min(len(labels), 3)
        rows = -(-len(labels) // columns)
        fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.8 * rows), squeeze=False)
        unit = {"segment": "segments", "system": "system means", "summary": "outputs"}[self.level]
        for ax, label in zip(axes.flat, labels, strict=False):
            m = self.metrics[label]
            for g, (x, y) in _points(self, m).items():
                ax.scatter(x, y, s=8 if self.level != "system" else 24, alpha=0.6, label=g)
                if self.level == "system" and len(x) <= 30:  # few enough to name
                    for name, xi, yi in zip(_system_names(self.judgments, g), x, y, strict=True):
                        ax.annotate(name, (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points")
            shown = "pearson" if "pearson" in m.result.point else next(iter(m.result.point))
            r, low, high = m.result.interval(shown)
            name = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}.get(shown, shown)
            what = f"mean per-input {name}" if self.level == "summary" else name
            title = f"{what} = {r:.3f} [{low:.3f}, {high:.3f}]" if not math.isnan(r) else \
                "no correlation (its scores are all equal)"
            ax.set_title(f"{_wrap(label)}\n{title}", fontsize=8)
            ax.set_xlabel(f"{_wrap(label)} ({unit}{', negated' if m.negated else ''})", fontsize=7)
            ax.set_ylabel(f"human score ({self.judgments.human_field})", fontsize=7)
            ax.tick_params(labelsize=7)
            if 1 < len(m.result.groups) <= 10:
                ax.legend(fontsize=6)
        for ax in list(axes.flat)[len(labels):]:
            ax.set_visible(False)
        fig.suptitle(f"{self.judgments.source}: {self.level} level, {stats.CONFIDENCE:.0%} bootstrap interval",
                     fontsize=9)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, dpi=110)
        plt.close(fig)
        return out


def _williams_entry(by_group: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The JSON of one metric's Williams tests: ``t``, ``p``, ``df``, ``n`` for a single group, and ``per_group``."""
    per_group = {g: {k: _plain(v[k]) if k in ("t", "p") else v[k] for k in ("t", "p", "df", "n")}
                 for g, v in by_group.items()}
    return {**(next(iter(per_group.values())) if len(per_group) == 1 else {}), "per_group": per_group}


def _points(agreement: Agreement, m: MetricAgreement) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """group -> (metric, human) of what the plot shows: the correlated units, or every rated output (summary)."""
    if agreement.level != "summary":
        return {g: r.values for g, r in m.result.groups.items()}
    j = agreement.judgments
    names = j.group_names()
    groups = np.asarray(names if names is not None else ["all"] * len(j.human))
    x, y = np.asarray(m.scores), j.human
    return {g: (x[(groups == g) & ~np.isnan(y)], y[(groups == g) & ~np.isnan(y)]) for g in m.result.groups}


def _system_names(j: Judgments, group: str) -> list[str]:
    """The systems of `group` in the order of its system means (sorted, those with a rated record)."""
    n, layout = len(j.human), j.core_layout()
    groups = np.asarray(layout.groups if layout.groups is not None else ["all"] * n)
    systems = np.asarray(layout.systems)
    rated = (groups == group) & ~np.isnan(j.human)
    return sorted(set(systems[rated].tolist()))


def _wrap(text: str, width: int = 40) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def _requests(metrics: str | Sequence[str] | Mapping[str, str], compare_to: str | None,
              extra_options: Mapping[str, Mapping[str, Any]] | None,
              lang: str | None = None) -> tuple[list[MetricRequest], str | None]:
    items = [(None, metrics)] if isinstance(metrics, str) else list(metrics.items()) if isinstance(
        metrics, Mapping) else [(None, m) for m in metrics]
    if not items:
        raise ValueError("correlate: name at least one metric.")
    requests = [parse_metric(text, label, extra_options=extra_options, lang=lang) for label, text in items]
    labels = [r.label for r in requests]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise ValueError(f"correlate: metric {twice[0]!r} is named twice; give each metric once (or a label each).")
    base = None
    if compare_to is not None:
        base = next((r.label for r in requests if compare_to.strip() in (r.label, f"{COLUMN}{r.name}")), None)
        if base is None:  # a metric to compare with that is not among them: scored too
            requests.append(parse_metric(compare_to, extra_options=extra_options, lang=lang))
            base = requests[-1].label
    return requests, base


def _score_all(requests: list[MetricRequest], j: Judgments,
               progress: bool) -> dict[str, tuple[list[float], str | None, bool]]:
    """label -> (scores, signature, negated): the columns read first (they can still be refused), then each
    metric scored once on every record; the movers metrics share one encoder pass."""
    out: dict[str, tuple[list[float], str | None, bool]] = {}
    for r in requests:
        if r.kind == "column":
            out[r.label] = (j.column(r.name), None, False)
    if any(r.kind == "movers" for r in requests):
        from ..text.embedding import shared_embeddings

        block: Any = shared_embeddings()
    else:  # sacreBLEU and columns only: no encoder, no torch
        from contextlib import nullcontext

        block = nullcontext()
    with block:
        for r in requests:
            if r.kind == "sacrebleu":
                out[r.label] = (sacrebleu_scores(r.name, j.predictions, j.references, r.options, progress=progress),
                                _sacrebleu_signature(r), False)
            elif r.kind == "movers":
                spec = registry.get(r.name)
                run = {**r.options, **({"verbose": progress} if spec.has_option("verbose") else {})}
                try:
                    result = registry.function(spec)(j.predictions, j.references, **run)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"correlate: metric {r.label!r}: {_located(str(e), j)}") from None
                values = [float(x) for x in result.scores]
                negated = not spec.higher_is_better
                out[r.label] = ([0.0 - x for x in values] if negated else values, str(result.signature), negated)
    for r in requests:  # a metric that gives no finite number cannot be correlated: say where
        bad = next((i for i, x in enumerate(out[r.label][0]) if not math.isfinite(x)), None)
        if bad is not None:
            raise ValueError(f"correlate: metric {r.label!r} gave {out[r.label][0][bad]} for {j.where(bad)}; "
                             f"every score must be a finite number.")
    return {r.label: out[r.label] for r in requests}


def _located(message: str, j: Judgments) -> str:
    """A metric's message about ``predictions[i]`` or ``references[i]`` with the record's line added."""
    import re

    m = re.search(r"`(?:predictions|references)\[(\d+)\]", message)
    return f"{message} ({j.where(int(m.group(1)))})" if m and int(m.group(1)) < len(j.places) else message


def _sacrebleu_signature(request: MetricRequest) -> str:
    """``sacrebleu.sentence_bleu|smooth_method:floor|version:2.6.0``: the function, its options (with the tokenizer
    that `lang` chose), sacreBLEU's version."""
    import sacrebleu

    fields = [_function_name(request.name), *(f"{k}:{v}" for k, v in sorted(request.options.items())),
              f"{SACREBLEU_VERSION_KEY}:{sacrebleu.__version__}"]
    return "|".join(fields)


def correlate(judgments: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
              metrics: str | Sequence[str] | Mapping[str, str], *, human: str = HUMAN,
              level: str = stats.LEVELS[0], group_by: str | Sequence[str] | None = None,
              input_field: str | Sequence[str] | None = None, compare_to: str | None = None,
              resamples: int = stats.RESAMPLES, seed: int = stats.SEED, skip_missing: bool = False,
              statistics: Sequence[str] | None = None,
              metric_options: Mapping[str, Mapping[str, Any]] | None = None,
              lang: str | None = None,
              progress: bool | None = False) -> Agreement:
    """Correlate metric scores with human judgments, as the metric papers report it.

        >>> result = movers.correlate("judgments.jsonl", ["sentbleu", "chrf"], compare_to="sentbleu")  # doctest: +SKIP
        >>> result.to_dict()["metrics"]["chrf"]["pearson"]                                       # doctest: +SKIP

    The file is read and checked as a whole before any metric scores (:func:`movers.api.judgments.read_judgments`);
    then every metric scores every record once.

    Args:
        judgments: A JSON Lines, CSV, TSV or Parquet file, or a list of records (dicts): one per judged output,
            with ``prediction`` (or ``hypothesis``), ``references`` (or ``reference``) and the human score.
        metrics: One or several of: a movers slug, with options as JSON (``'moverscore={"idf": true}'``);
            ``sentbleu`` or ``chrf`` (sacreBLEU); ``column:FIELD`` for scores in the file. A mapping gives each a
            label: ``{"MoverScore, IDF": 'moverscore={"idf": true}'}``.
        human: The field of the human score (a dotted name reaches into an object: ``human.Fluency``).
        level: ``segment`` (every output), ``system`` (per-system means, within each group) or ``summary`` (per
            input across its outputs, averaged).
        group_by: Field(s) to correlate within (a list, or ``"year,lp"``); the values are averaged over groups.
        input_field: Field(s) naming each output's input (document, source item): the unit the system and
            summary levels resample, and the summary level's unit.
        compare_to: A metric (a label, or a metric not among `metrics`, then scored too): every other metric's
            difference to it with a paired bootstrap interval, and the one-sided Williams test of Pearson r.
        resamples: Bootstrap resamples (the same ones for every metric).
        seed: The bootstrap's seed (numpy ``default_rng(seed)``).
        skip_missing: Leave out records without a human score (absent or null) instead of refusing them.
        statistics: Which to compute (default all: :func:`movers.core.agreement.statistics_of` the level).
        metric_options: ``{slug: {option: value}}`` for every movers metric of that slug.
        lang: The language of the texts, an ISO 639-1 code (default: English): every movers metric's `lang` and
            sentence BLEU's tokenizer, as sacreBLEU's command line picks it for that target language
            (:func:`sacrebleu_options`); a metric's own options win. chrF reads every language alike.
        progress: A progress bar on stderr while the metrics score; None: when stderr is a terminal and the
            metrics score :data:`~movers.core.progress.PROGRESS_MIN_PAIRS` pairs or more.
    Returns:
        An :class:`Agreement` (``.to_dict()``, ``.to_json()``, ``.plot(path)``).
    Raises:
        ValueError: For bad input (naming the line and the field) or an unknown metric or option, before any
            metric scores.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"correlate: `resamples` must be a positive integer, got {resamples!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"correlate: `seed` must be a non-negative integer, got {seed!r}.")
    allowed = stats.statistics_of(level) if level in stats.LEVELS else stats.STATISTICS
    bad = [s for s in statistics or () if s not in allowed]
    if bad:
        raise ValueError(f"correlate: unknown statistic {bad[0]!r} at the {level} level; choose from {list(allowed)}.")
    if lang is not None:
        from ..text.languages import language

        language(lang, "correlate")
    requests, base = _requests(metrics, compare_to, metric_options, lang)
    j = read_judgments(judgments, human=human, level=level, group_by=group_by, input_field=input_field,
                       skip_missing=skip_missing)
    if progress is None:
        from ..core.progress import automatic

        progress = automatic(len(j.records) * sum(r.kind != "column" for r in requests))
    scored = _score_all(requests, j, progress)
    out = {}
    for label, (values, signature, negated) in scored.items():
        result = stats.level_correlations(values, j.human, j.core_layout(), n_boot=resamples, seed=int(seed),
                                          statistics=statistics)
        out[label] = MetricAgreement(label, next(r for r in requests if r.label == label), tuple(values), signature,
                                     negated, result)
    return Agreement(j, out, base, resamples, int(seed))
