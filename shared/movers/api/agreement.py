"""``movers.correlate``: how closely metrics agree with human judgments, as the metric papers measure it.

A judgments file (:mod:`movers.api.judgments`) is read and checked as a whole; then every metric scores every
record once: a movers metric by its slug and options (the calls share one encoder pass and the embedding cache),
sacreBLEU's sentence BLEU and chrF (:data:`SACREBLEU`), or scores already in the file (``column:FIELD``: COMET,
BERTScore, anything computed elsewhere). The statistics (:mod:`movers.core.agreement`) are by default Pearson,
Spearman and Kendall's tau-b per group and averaged, at the segment, system or summary level, each with a bootstrap
interval; at the system level also pairwise accuracy; against one metric (``compare_to``) each other metric's
paired difference and the Williams test. The protocols of WMT24-25 and SacreROUGE are options: tau-c, tau_23,
acc23, acc_eq and soft pairwise accuracy; averages per system, per input or pooled; resampling of inputs, systems
or both; permutation tests and significance clusters.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import metrics as registry
from ..core import agreement as stats
from ..core.agreement import LevelResult
from ..core.validation import short_repr
from . import judgments as reader
from .judgments import HUMAN, SYSTEM, Judgments, read_judgments

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

    def undefined_groups(self) -> list[Hashable]:
        """The groups where the metric has no correlation: its scores (or, at the summary level, every input's
        scores) are all equal there."""
        return [g for g, r in self.result.groups.items() if all(math.isnan(v) for v in r.point.values())]


def _estimate(value: float, low: float, high: float) -> dict[str, Any]:
    """``{"value", "ci"}``; None (JSON null) where a statistic is undefined, never NaN."""
    if not math.isfinite(value):
        return {"value": None, "ci": None}
    return {"value": value, "ci": None if not (math.isfinite(low) and math.isfinite(high)) else [low, high]}


def _plain(x: float) -> float | None:
    return None if not math.isfinite(x) else x


@dataclass(frozen=True)
class Agreement:
    """What :func:`correlate` found: per metric its statistics, and against `compare_to` the tests of the
    protocol (paired differences, Williams, a permutation test) and the significance clusters of all metrics.
    :meth:`to_dict` is the JSON the command prints with ``--format json``."""

    judgments: Judgments
    metrics: dict[str, MetricAgreement]
    compare_to: str | None
    resamples: int
    seed: int
    protocol: stats.Protocol | None = None
    permutation: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    """label -> statistic -> (one-sided p that the metric agrees better than `compare_to`, the difference)."""
    clusters: dict[str, list[list[str]]] = field(default_factory=dict)
    """statistic -> the significance clusters of all metrics, best first (a permutation test's p <= ALPHA)."""

    @property
    def level(self) -> str:
        return self.judgments.level

    @property
    def statistics(self) -> tuple[str, ...]:
        return tuple(next(iter(self.metrics.values())).result.point)

    @property
    def tests(self) -> tuple[str, ...]:
        return self.protocol.tests if self.protocol is not None else stats.DEFAULT_TESTS

    @property
    def group_names(self) -> dict[Hashable, str]:
        """group label -> its text (a tuple of several fields as a JSON list)."""
        return stats.label_texts(list(next(iter(self.metrics.values())).result.groups))

    def differences(self) -> dict[str, dict[str, tuple[float, float, float]]]:
        """label -> statistic -> (metric − compare_to, low, high) from the same resamples; empty without
        `compare_to` (or without the paired bootstrap among the tests)."""
        if self.compare_to is None or "bootstrap" not in self.tests:
            return {}
        base = self.metrics[self.compare_to].result
        return {label: stats.paired_difference(m.result, base) for label, m in self.metrics.items()
                if label != self.compare_to}

    def williams(self) -> dict[str, dict[Hashable, dict[str, float]]]:
        """label -> group -> Williams test of Pearson r > compare_to's (:func:`movers.core.agreement.williams_test`);
        empty without `compare_to`, without Williams among the tests, without Pearson r, or where units are
        averaged per input or system."""
        if self.compare_to is None or "williams" not in self.tests or "pearson" not in self.statistics:
            return {}
        base = self.metrics[self.compare_to].result
        tests = {label: stats.williams_by_group(m.result, base) for label, m in self.metrics.items()
                 if label != self.compare_to}
        return {label: by_group for label, by_group in tests.items() if by_group}

    def undefined(self) -> dict[str, dict[str, str]]:
        """label -> statistic -> why it has no value (averaged over the groups); only the undefined ones."""
        return {label: dict(m.result.reasons) for label, m in self.metrics.items() if m.result.reasons}

    def notes(self) -> list[str]:
        """What a reader must know besides the numbers: statistics without a value and why, metrics without a
        correlation in some group, distances negated, records skipped, inputs left out of an average."""
        out = []
        names = self.group_names
        n_groups = len(next(iter(self.metrics.values())).result.groups)
        noise = False
        for label, m in self.metrics.items():
            groups = m.result.groups
            equal = [g for g in m.undefined_groups()
                     if all("metric scores all equal" in why for why in groups[g].reasons.values())]
            if equal and len(equal) == n_groups:
                out.append(f"{label}: its scores are all equal{' in every group' if n_groups > 1 else ''}: it has "
                           f"no correlation with the human scores.")
            elif equal:
                out.append(f"{label}: its scores are all equal in group{'s' if len(equal) > 1 else ''} "
                           f"{', '.join(repr(names[g]) for g in equal)}: no correlation there; its averages are over "
                           f"{n_groups - len(equal)} of {n_groups} groups.")
            missing: dict[tuple[tuple[str, ...], str], list[str]] = {}
            for s in self.statistics:
                where = tuple(names[g] for g, r in groups.items() if s in r.reasons and g not in equal)
                if not where:
                    continue
                whys = sorted({groups[g].reasons[s] for g, r in groups.items() if s in r.reasons and g not in equal})
                noise = noise or any("nearly constant" in w for w in whys)
                missing.setdefault((where, "; ".join(whys)), []).append(s)
            for (where, why), stats_ in missing.items():
                verb = "has" if len(stats_) == 1 else "have"
                if n_groups == 1:
                    out.append(f"{label}: {', '.join(stats_)} {verb} no value: {why}.")
                elif len(where) == n_groups:
                    out.append(f"{label}: {', '.join(stats_)} {verb} no value in any group: {why}.")
                else:
                    out.append(f"{label}: {', '.join(stats_)} {verb} no value in group{'s' if len(where) > 1 else ''} "
                               f"{', '.join(map(repr, where))} ({why}): the average is over the other groups.")
            far = [names[g] for g, r in groups.items() if "acc_eq threshold" in r.reasons]
            if far:
                out.append(f"{label}: acc_eq's threshold is beyond the float range (every pair tied) in "
                           f"{', '.join(map(repr, far)) if n_groups > 1 else 'the file'}.")
            undefined = sum(g.undefined for g in groups.values())
            if undefined:
                unit = "system" if self.protocol is not None and self.protocol.average == "sys" else "input"
                out.append(f"{label}: {undefined} {unit}(s) without a correlation (the metric's or the human scores "
                           f"equal across the {unit}'s outputs) left out of the average.")
            if m.negated:
                out.append(f"{label}: a distance (lower is better), negated so that its correlations read as the "
                           f"others' (higher = closer to the human judgments).")
        if noise:
            out.append("nearly constant: ‖x − x̄‖₂ < ε^0.75·|x̄| (ε the float64 machine epsilon), scipy's criterion "
                       "of NearConstantInputWarning: the scores differ by rounding noise, so no statistic is given.")
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
        ...}}, "compare_to", "differences", "williams": {label: {"t", "p", "df", "n", "per_group"}},
        "permutation": {label: {statistic: {"p", "delta"}}}, "clusters": {statistic: [[label, ...], ...]},
        "notes", ...}``; acc_eq adds its ``threshold`` (one calibration) and ``thresholds`` per group. An undefined
        value is null, never NaN or Infinity. With `scores`, each metric's scores too."""
        first = next(iter(self.metrics.values())).result
        j = self.judgments
        names = self.group_names
        proto = self.protocol or stats.protocol(self.level)
        out: dict[str, Any] = {
            "level": self.level, "n": len(j.records), "human": j.human_field,
            "group_by": ",".join(j.group_by) or None, "input_field": ",".join(j.input_fields) or None,
            "groups": {names[g]: {"units": r.units, "resampled": r.resampled} for g, r in first.groups.items()},
            "skipped": first.skipped, "resamples": self.resamples, "seed": self.seed,
            "confidence": stats.CONFIDENCE, "metrics": {}, "compare_to": self.compare_to}
        out["protocol"] = {"statistics": list(proto.statistics), "average": proto.average, "resample": proto.resample,
                           "tests": list(proto.tests), "epsilon": proto.epsilon}
        for label, m in self.metrics.items():
            entry: dict[str, Any] = {s: _estimate(*m.result.interval(s)) for s in self.statistics}
            if "acc_eq" in entry:
                thresholds = {names[g]: _plain(r.threshold) for g, r in m.result.groups.items()}
                entry["acc_eq"]["threshold"] = next(iter(thresholds.values())) if len(thresholds) == 1 else None
                entry["acc_eq"]["thresholds"] = thresholds
            entry["per_group"] = {names[g]: {s: _plain(r.point[s]) for s in self.statistics}
                                  for g, r in m.result.groups.items()}
            entry.update(negated=m.negated, signature=m.signature)
            if scores:
                entry["scores"] = list(m.scores)
            out["metrics"][label] = entry
        if self.compare_to is not None:
            if "bootstrap" in self.tests:
                out["differences"] = {label: {s: _estimate(*v) for s, v in diff.items()}
                                      for label, diff in self.differences().items()}
            if "williams" in self.tests:
                out["williams"] = {label: _williams_entry(by_group, names) for label, by_group in
                                   self.williams().items()}
            if self.permutation:
                out["permutation"] = {label: {s: {"p": _plain(p), "delta": _plain(d)} for s, (p, d) in by_stat.items()}
                                      for label, by_stat in self.permutation.items()}
        if self.clusters:
            out["clusters"] = self.clusters
        out["notes"] = self.notes()
        return out

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON text (NaN and Infinity can never appear: ``allow_nan=False``)."""
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
        per_unit = self.protocol is not None and self.protocol.average in ("item", "sys")
        names = self.group_names
        for ax, label in zip(axes.flat, labels, strict=False):
            m = self.metrics[label]
            for g, (x, y) in _points(self, m, per_unit).items():
                ax.scatter(x, y, s=8 if self.level != "system" else 24, alpha=0.6, label=names[g])
                if self.level == "system" and len(x) <= 30:  # few enough to name
                    for name, xi, yi in zip(_system_names(self.judgments, g), x, y, strict=True):
                        ax.annotate(str(name), (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points")
            shown = "pearson" if "pearson" in m.result.point else next(iter(m.result.point))
            r, low, high = m.result.interval(shown)
            name = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ"}.get(shown, shown)
            what = f"mean per-input {name}" if self.level == "summary" else name
            title = f"{what} = {r:.3f} [{low:.3f}, {high:.3f}]" if math.isfinite(r) else \
                f"no {name}: {m.result.reasons.get(shown, 'undefined')}"
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


def _williams_entry(by_group: dict[Hashable, dict[str, float]], names: dict[Hashable, str]) -> dict[str, Any]:
    """The JSON of one metric's Williams tests: ``t``, ``p``, ``df``, ``n`` for a single group, and ``per_group``."""
    per_group = {names[g]: {k: _plain(v[k]) if k in ("t", "p") else v[k] for k in ("t", "p", "df", "n")}
                 for g, v in by_group.items()}
    return {**(next(iter(per_group.values())) if len(per_group) == 1 else {}), "per_group": per_group}


def _group_of(j: Judgments) -> list[Hashable]:
    """Each record's group as the statistics name it (:meth:`Judgments.core_layout`; one group: "all")."""
    groups = j.core_layout().groups
    return list(groups) if groups is not None else ["all"] * len(j.human)


def _points(agreement: Agreement, m: MetricAgreement, per_unit: bool) -> dict[Hashable, tuple[np.ndarray,
                                                                                              np.ndarray]]:
    """group -> (metric, human) of what the plot shows: the correlated units, or every rated output (averaged
    per input or system)."""
    if agreement.level != "summary" and not per_unit:
        return {g: r.values for g, r in m.result.groups.items()}
    j = agreement.judgments
    groups = _group_of(j)
    x, y = np.asarray(m.scores), j.human
    out = {}
    for g in m.result.groups:
        keep = np.array([label == g for label in groups]) & ~np.isnan(y)
        out[g] = (x[keep], y[keep])
    return out


def _system_names(j: Judgments, group: Hashable) -> list[Hashable]:
    """The systems of `group` in the order of its system means (label order, those with a rated record)."""
    systems = j.core_layout().systems
    assert systems is not None
    rated = [s for g, s, h in zip(_group_of(j), systems, j.human, strict=True) if g == group and h == h]
    return stats.factorize(rated)[1]


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
              f"version:{sacrebleu.__version__}"]
    return "|".join(fields)


def correlate(judgments: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
              metrics: str | Sequence[str] | Mapping[str, str], *, human: str = HUMAN,
              level: str = stats.LEVELS[0], group_by: str | Sequence[str] | None = None,
              input_field: str | Sequence[str] | None = None, compare_to: str | None = None,
              resamples: int = stats.RESAMPLES, seed: int = stats.SEED, skip_missing: bool = False,
              statistics: Sequence[str] | str | None = None, average: str | None = None, resample: str | None = None,
              test: Sequence[str] | str | None = None, epsilon: float = 0.0,
              metric_options: Mapping[str, Mapping[str, Any]] | None = None,
              lang: str | None = None,
              progress: bool | None = False) -> Agreement:
    """Correlate metric scores with human judgments, as the metric papers and the WMT metrics tasks report it.

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
        compare_to: A metric (a label, or a metric not among `metrics`, then scored too): every other metric is
            tested against it (`test`), one-sided: does it agree better?
        resamples: Bootstrap resamples (the same ones for every metric), and permutations of a permutation test;
            at most :data:`movers.core.agreement.MAX_RESAMPLES`.
        seed: The bootstrap's and the permutations' seed (numpy ``default_rng(seed)``).
        skip_missing: Leave out records without a human score (absent or null) instead of refusing them.
        statistics: Which to compute (:data:`movers.core.agreement.STATS`; default
            :func:`movers.core.agreement.statistics_of` the level).
        average: How units make a value (:data:`movers.core.agreement.AVERAGES`): ``none`` (default; ``item`` at
            the summary level), ``sys``, ``item`` or ``pooled``.
        resample: What the bootstrap draws (:data:`movers.core.agreement.RESAMPLINGS`): ``segments`` (default at
            the segment level), ``inputs`` (elsewhere), ``systems`` or ``both``.
        test: The tests against `compare_to` (:data:`movers.core.agreement.TESTS`; default the paired bootstrap
            and Williams); a permutation test also ranks every metric into significance clusters.
        epsilon: The tie threshold of tau_23 and acc23: metric scores at most this far apart are tied.
        metric_options: ``{slug: {option: value}}`` for every movers metric of that slug.
        lang: The language of the texts, an ISO 639-1 code (default: English): every movers metric's `lang` and
            sentence BLEU's tokenizer, as sacreBLEU's command line picks it for that target language
            (:func:`sacrebleu_options`); a metric's own options win. chrF reads every language alike.
        progress: A progress bar on stderr while the metrics score and the statistics resample; None: when stderr
            is a terminal and the metrics score :data:`~movers.core.progress.PROGRESS_MIN_PAIRS` pairs or more.
    Returns:
        An :class:`Agreement` (``.to_dict()``, ``.to_json()``, ``.plot(path)``).
    Raises:
        ValueError: For bad input (naming the line and the field), an unknown metric, option or protocol, or a
            protocol the file cannot give (no system or input field), before any metric scores.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or \
            not 1 <= resamples <= stats.MAX_RESAMPLES:
        raise ValueError(f"correlate: `resamples` must be an integer from 1 to {stats.MAX_RESAMPLES:,} (the "
                         f"bootstrap keeps every resample's value), got {resamples!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"correlate: `seed` must be a non-negative integer, got {seed!r}.")
    proto = stats.protocol(level, statistics, average, resample, test, epsilon)
    if lang is not None:
        from ..text.languages import language

        language(lang, "correlate")
    requests, base = _requests(metrics, compare_to, metric_options, lang)
    j = read_judgments(judgments, human=human, level=level, group_by=group_by, input_field=input_field,
                       skip_missing=skip_missing)
    layout = _protocol_layout(j, proto)
    stats.check_size(layout, proto, len(j.records))
    if progress is None:
        from ..core.progress import automatic

        progress = automatic(len(j.records) * sum(r.kind != "column" for r in requests))
    scored = _score_all(requests, j, progress)
    groups = len(set(_group_of(j)))
    permutation = next((t for t in proto.tests if t in stats.PERMUTATION_TESTS), None)
    pairs = [(a, b) for i, a in enumerate(scored) for b in list(scored)[i + 1:]] if permutation else []
    work = resamples * groups * (len(scored) + len(pairs))
    out = {}
    with _bar(progress, work) as advance:
        for label, (values, signature, negated) in scored.items():
            result = stats.level_correlations(values, j.human, layout, n_boot=int(resamples), seed=int(seed),
                                              statistics=proto.statistics, average=proto.average,
                                              resample=proto.resample, epsilon=proto.epsilon, progress=advance)
            out[label] = MetricAgreement(label, next(r for r in requests if r.label == label), tuple(values),
                                         signature, negated, result)
        tested: dict[tuple[str, str], stats.Permutations] = {}
        for a, b in pairs:
            assert permutation is not None
            tested[a, b] = stats.permutations(scored[a][0], scored[b][0], j.human, layout, test=permutation,
                                              statistics=proto.statistics, average=proto.average,
                                              epsilon=proto.epsilon, n_perm=int(resamples), seed=int(seed),
                                              progress=advance)
    by_metric: dict[str, dict[str, tuple[float, float]]] = {}
    ranked: dict[str, list[list[str]]] = {}
    if permutation:
        def p_better(a: Hashable, b: Hashable, s: str) -> float:
            return tested[a, b].p(s) if (a, b) in tested else tested[b, a].p(s, reverse=True)  # type: ignore[index]

        if base is not None:
            by_metric = {label: {s: (p_better(label, base, s), out[label].result.point[s] - out[base].result.point[s])
                                 for s in proto.statistics} for label in out if label != base}
        for s in proto.statistics:
            points: dict[Hashable, float] = {label: m.result.point[s] for label, m in out.items()}
            ranked[s] = [[str(x) for x in c]
                         for c in stats.clusters(points, lambda a, b, s=s: p_better(a, b, s))]  # type: ignore[misc]
    return Agreement(j, out, base, int(resamples), int(seed), proto, by_metric, ranked)


def _protocol_layout(j: Judgments, proto: stats.Protocol) -> stats.Layout:
    """The judgments' layout with the systems and inputs the protocol needs at the segment level (averaged per
    system or input, resampled by them, or permuted by them), read from the records."""
    layout = j.core_layout()
    systems, inputs = layout.systems, layout.inputs
    if "system" in proto.needs and systems is None:
        systems = _read_labels(j, [SYSTEM], "the system")
    if "input" in proto.needs and inputs is None:
        if not j.input_fields:
            raise ValueError(f"correlate: average {proto.average!r}, resample {proto.resample!r} and tests "
                             f"{list(proto.tests)} need each output's input (document, source item): name its field "
                             f"(input_field, --input-field FIELD).")
        inputs = _read_labels(j, list(j.input_fields), "the input")
    return stats.Layout(layout.level, layout.groups, systems, inputs)


def _read_labels(j: Judgments, fields: Sequence[str], what: str) -> list[str]:
    """Each record's label of `fields` as the reader writes a level's labels (:func:`~.judgments.label_text` of
    :func:`~.judgments.read_labels`), refused as the reader refuses them."""
    labels = reader.read_labels(j.records, fields, j.where, what)
    assert labels is not None  # fields are named
    return [reader.label_text(x) for x in labels]


@contextmanager
def _bar(enabled: bool, total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar over the resamples and permutations, or nothing."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="movers: resampling", unit="resample", dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()
