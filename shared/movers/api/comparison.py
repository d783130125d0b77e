"""``movers.compare``: several systems scored against the same references by one or more metrics, with
sacreBLEU's paired significance tests against the first system (:mod:`movers.core.significance`).

Each system is scored by its own metric call, so its result is the result of a separate run (per-call
statistics such as IDF or TWMD's centring stay per system); the calls share one embedding memo
(:func:`movers.text.embedding.shared_embeddings`), so the references are encoded once.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .. import metrics as registry
from ..core import significance as sig
from ..core.result import Scores
from ..core.significance import Interval
from ..core.spec import MetricSpec
from ..pipeline.call import MetricFunction, make_options
from ..text.embedding import shared_embeddings

__all__ = ["compare", "Comparison", "SystemScore", "SYSTEM_NOTE"]

Metric = str | MetricSpec | MetricFunction
SYSTEM_NOTE = "movers.compare system: "
"""Prefix of the note (``BaseException.__notes__``) naming the system whose metric call raised."""


@dataclass(frozen=True)
class SystemScore:
    """One system under one metric: its full result, the signature with the test's fields appended
    (``|bs:1000|seed:12345``, sacreBLEU's), its 95% interval and its p-value against the baseline
    (None for the baseline, or without a paired test)."""

    system: str
    result: Scores
    signature: str
    interval: Interval | None = None
    p_value: float | None = None

    @property
    def score(self) -> float:
        return self.result.score

    @property
    def significant(self) -> bool:
        """p < 0.05 (the ``*`` mark)."""
        return self.p_value is not None and self.p_value < 0.05

    def to_dict(self, *, per_segment: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "signature": self.signature}
        if per_segment:
            out["scores"] = list(self.result.scores)
        if self.interval is not None:
            out["confidence"] = self.interval.to_dict()
        if self.p_value is not None:
            out["p_value"] = self.p_value
        return out


@dataclass(frozen=True)
class Comparison:
    """Scores of several systems under several metrics: ``comparison[slug][system]`` is a
    :class:`SystemScore`. `test` is ``"bs"`` (paired bootstrap), ``"ar"`` (approximate randomization) or
    None; `samples` its resamples or trials; `seed` its seed (None: unseeded); the first system is the
    baseline."""

    systems: tuple[str, ...]
    metrics: tuple[str, ...]
    results: Mapping[str, Mapping[str, SystemScore]]
    test: Literal["bs", "ar"] | None = None
    samples: int | None = None
    seed: int | None = None

    @property
    def baseline(self) -> str:
        return self.systems[0]

    def __getitem__(self, metric: str) -> Mapping[str, SystemScore]:
        return self.results[metric]

    def to_dict(self, *, per_segment: bool = False) -> dict[str, Any]:
        """``{slug: {system: {"score", "signature", ["scores"], ["confidence"], ["p_value"]}}}``."""
        return {slug: {name: r.to_dict(per_segment=per_segment) for name, r in by_system.items()}
                for slug, by_system in self.results.items()}


def compare(metrics: Metric | Sequence[Metric], systems: Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]],
            references: Any, *, paired_bs: bool = False, paired_bs_n: int = sig.BOOTSTRAP_SAMPLES,
            paired_ar: bool = False, paired_ar_n: int = sig.RANDOMIZATION_TRIALS, ar_confidence_n: int = 0,
            seed: int | str | None = None, metric_options: Mapping[str, Mapping[str, Any]] | None = None,
            **options: Any) -> Comparison:
    """Score every system against `references` with every metric; optionally test each system against the
    first (the baseline) as sacreBLEU's ``--paired-bs`` / ``--paired-ar`` do.

        >>> c = movers.compare("delta_bleu", {"a": hyps_a, "b": hyps_b}, refs, paired_bs=True)  # doctest: +SKIP
        >>> c["delta_bleu"]["b"].p_value                                                   # doctest: +SKIP

    Args:
        metrics: A slug (or spec, or ``movers.<slug>``), or several.
        systems: ``{name: predictions}`` in order, or a list of prediction lists (named ``system 1``, ...).
        references: As for the metric functions: one per segment, or a list per segment.
        paired_bs: Paired bootstrap resampling (Koehn, 2004), `paired_bs_n` resamples (default 1,000).
        paired_ar: Paired approximate randomization (Riezler & Maxwell, 2005), `paired_ar_n` trials
            (default 10,000); `ar_confidence_n` > 0 adds a bootstrap interval per system.
        seed: numpy seed of the test; None: ``$SACREBLEU_SEED`` or 12345 (sacreBLEU's rule); ``"none"``:
            unseeded.
        metric_options: ``{slug: {option: value}}`` for one metric each.
        **options: Options for every metric that has them (with one metric: passed as they are).
    Returns:
        A :class:`Comparison`; each system's ``result`` equals the metric called on that system alone.
    Raises:
        ValueError: For no systems, a test with one system, both tests, or systems whose lengths differ
            from the references'. A metric's own error carries a note naming the system.
    """
    specs = [registry.get(m) for m in ([metrics] if isinstance(metrics, (str, MetricSpec, MetricFunction))
                                       else metrics)]
    if not specs:
        raise ValueError("compare: `metrics` is empty; name at least one metric.")
    named = _named(systems, references)
    if paired_bs and paired_ar:
        raise ValueError("compare: choose one of `paired_bs` and `paired_ar`, not both.")
    test: Literal["bs", "ar"] | None = "bs" if paired_bs else "ar" if paired_ar else None
    if test is not None and len(named) < 2:
        raise ValueError(f"compare: a paired test needs a baseline and at least one system, got {len(named)} "
                         f"system.")
    samples = paired_bs_n if test == "bs" else paired_ar_n if test == "ar" else None
    if samples is not None and samples < 1:
        raise ValueError(f"compare: `paired_{test}_n` must be >= 1, got {samples}.")
    kwargs = _routed(specs, options, metric_options or {})
    results: dict[str, dict[str, Scores]] = {spec.slug: {} for spec in specs}
    with shared_embeddings():  # the references (and texts the systems share) are embedded once
        for name, predictions in named.items():
            for spec in specs:
                try:
                    results[spec.slug][name] = registry.function(spec)(predictions, references, **kwargs[spec.slug])
                except (TypeError, ValueError) as e:
                    # PEP 678's add_note, written so that Python 3.10 keeps the note too
                    e.__dict__.setdefault("__notes__", []).append(f"{SYSTEM_NOTE}{name}")
                    raise
    resolved = sig.resolve_seed(seed) if test is not None else None
    out: dict[str, dict[str, SystemScore]] = {}
    for spec in specs:
        by_system = results[spec.slug]
        tested = _tested(spec, kwargs[spec.slug], list(by_system.values()), test, samples, resolved,
                         ar_confidence_n)
        suffix = "" if test is None else _test_fields(test, samples, ar_confidence_n, resolved)
        out[spec.slug] = {name: SystemScore(name, res, f"{res.signature}{suffix}",
                                            None if t is None else t.interval, None if t is None else t.p_value)
                          for (name, res), t in zip(by_system.items(), tested, strict=True)}
    return Comparison(tuple(named), tuple(s.slug for s in specs), out, test, samples, resolved)


def _test_fields(test: str, samples: int | None, ar_confidence_n: int, seed: int | None) -> str:
    """sacreBLEU's signature fields of a paired test, in its order: ``|bs:N|seed:S``, ``|ar:N|seed:S``, or
    ``|bs:M|ar:N|seed:S`` for approximate randomization with a bootstrap interval."""
    fields: list[tuple[str, object]] = [("bs", ar_confidence_n)] if test == "ar" and ar_confidence_n > 0 else []
    fields += [(test, samples), ("seed", sig.seed_label(seed))]
    return "".join(f"|{key}:{value}" for key, value in fields)


def _named(systems: Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]], references: Any) -> dict[str, list[Any]]:
    """Systems as ``{name: list}``, each as long as the references."""
    if isinstance(systems, Mapping):
        named = {str(k): list(v) for k, v in systems.items()}
    elif isinstance(systems, (str, bytes)) or not isinstance(systems, Sequence):
        raise ValueError(f"compare: `systems` must be a dict of name -> predictions or a list of prediction "
                         f"lists, got {type(systems).__name__}.")
    else:
        named = {f"system {i + 1}": list(v) for i, v in enumerate(systems)}
    if not named:
        raise ValueError("compare: `systems` is empty; pass at least one system.")
    n = len(references) if isinstance(references, Sequence) and not isinstance(references, str) else None
    for name, predictions in named.items():
        if n is not None and len(predictions) != n:
            raise ValueError(f"compare: system {name!r} has {len(predictions)} predictions, the references "
                             f"{n} segments.")
    return named


def _routed(specs: list[MetricSpec], options: dict[str, Any],
            metric_options: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Keyword arguments per metric: `options` to each metric that accepts them, then its own."""
    unknown = [s for s in metric_options if s not in {spec.slug for spec in specs}]
    if unknown:
        raise ValueError(f"compare: `metric_options` names {unknown}, not among the metrics "
                         f"{[s.slug for s in specs]}.")
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        accepted = {f.name for f in spec.options} | set(spec.extra_inputs)
        mine = dict(options) if len(specs) == 1 else {k: v for k, v in options.items() if k in accepted}
        out[spec.slug] = {**mine, **metric_options.get(spec.slug, {})}
    if len(specs) > 1:
        taken = set().union(*({f.name for f in s.options} | set(s.extra_inputs) for s in specs))
        stray = sorted(set(options) - taken)
        if stray:
            raise TypeError(f"compare() got an option no metric accepts: {stray[0]!r}.")
    return out


def _tested(spec: MetricSpec, kwargs: dict[str, Any], results: list[Scores], test: str | None,
            samples: int | None, seed: int | None, ar_confidence_n: int) -> list[sig.PairedResult | None]:
    """The paired test of one metric over the systems' results (None per system without a test)."""
    if test is None or samples is None:
        return [None] * len(results)
    scores = [r.score for r in results]
    if spec.corpus_from_segments:
        pairs = [sig.mean_statistics(r.scores) for r in results]
        statistics = [p[0] for p in pairs]
        corpus = pairs[0][1]
    else:
        if any(r.statistics is None for r in results):
            raise ValueError(f"compare: {spec.slug} returned no segment statistics to resample.")
        statistics = [np.asarray(r.statistics, dtype=np.float64) for r in results]
        settings = {k: v for k, v in kwargs.items() if k not in spec.extra_inputs}
        corpus = functools.partial(spec.corpus_from_statistics, spec.resolve(make_options(spec, settings)))
    if test == "bs":
        return list(sig.paired_bootstrap(statistics, scores, corpus, samples=samples, seed=seed))
    return list(sig.paired_randomization(statistics, scores, corpus, trials=samples, seed=seed,
                                         confidence=ar_confidence_n))
