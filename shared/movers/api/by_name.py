"""The entry points that take a metric by name: ``movers.explain``, ``movers.score_stream``,
``movers.fit_centering``. Each resolves the name in the registry and calls the pipeline."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .. import metrics as registry
from ..core.explanation import Explanation
from ..core.result import Scores
from ..core.spec import MetricSpec
from ..pipeline import fitting, streaming
from ..pipeline.call import MetricFunction
from ..pipeline.embedding import EmbeddingMetric
from ..text.centering import Centering

__all__ = ["explain", "score_stream", "fit_centering"]

Metric = str | MetricSpec | MetricFunction


def explain(metric: Metric, prediction: Any, reference: Any, **options: Any) -> Explanation:
    """The transport of one (prediction, reference) pair under `metric`, exactly as scoring computes it.

    Args:
        metric: A registered metric with a transport plan (``movers.metrics.slugs(plans=True)``).
        prediction: The prediction's text (for SMS-like metrics also a list of sentences).
        reference: The reference's text (for SMS-like metrics also a list of sentences).
        **options: The metric's keyword options (same names and defaults as ``movers.<metric>``).
    Returns:
        An :class:`~movers.core.explanation.Explanation` whose ``score`` equals
        ``movers.<metric>([prediction], [reference], **options).scores[0]`` and whose ``signature`` is
        that call's.
    Raises:
        ValueError: For an unknown metric, one without a plan, or when `options` sets ``return_plans``.
    """
    spec = registry.get(metric)
    if not spec.has_plan:
        raise ValueError(f"explain: `metric` must be one of {registry.slugs(plans=True)}, got {spec.slug!r}.")
    if "return_plans" in options:
        raise ValueError("explain: `return_plans` is set by explain itself; remove it from the options.")
    result = registry.function(spec)([prediction], [[reference]] if isinstance(reference, str) else [reference],
                                     return_plans=True, **options)
    return dataclasses.replace(result.extra["alignments"][0][0], signature=str(result.signature))


def score_stream(metric: Metric, predictions: Any, references: Any = None, *,
                 columns: Sequence[str] = ("prediction", "reference"), block_size: int = 1024,
                 **options: Any) -> Scores:
    """:func:`movers.pipeline.streaming.score_stream` of a registered metric (by name)."""
    try:
        spec = registry.get(metric)
    except ValueError:
        raise ValueError(f"score_stream: unknown `metric` {metric!r}; choose one of {registry.slugs()}.") from None
    return streaming.score_stream(spec, predictions, references, columns=columns, block_size=block_size, **options)


def fit_centering(metric: Metric, predictions: Sequence[Any], references: Sequence[Any], **options: Any) -> Centering:
    """Fixed token means of `predictions` and (all) `references`, with the tokens (or words) `metric` keeps
    under `options` (the same keyword options as the scoring call: model, layer, filters, ...).

    Pass the result as ``<metric>(..., centering=<it>)``: scores no longer depend on the call.
    """
    fit = [s for s in registry.specs() if isinstance(s, EmbeddingMetric)]
    spec = registry.get(metric) if isinstance(metric, (MetricSpec, MetricFunction)) or metric in registry.slugs() \
        else None
    if spec is None or not isinstance(spec, EmbeddingMetric):
        raise ValueError(f"fit_centering: `metric` must be one of {[s.slug for s in fit]}, got {metric!r}.")
    return fitting.fit_centering(spec, predictions, references, **options)
