"""movers metrics in MLflow's ``mlflow.models.evaluate``, with corpus-exact scores.

    >>> from movers.integrations.harnesses.mlflow import metric                       # doctest: +SKIP
    >>> result = mlflow.models.evaluate(data=df, predictions="prediction", targets="reference",
    ...                                 extra_metrics=[metric("twmd"), metric("moverscore", idf=True)])
    >>> result.metrics["twmd"], result.tables["eval_results_table"]["twmd/score"]

:func:`metric` builds an ``mlflow.metrics.make_metric`` metric whose ``eval_fn(predictions, targets)`` sees
the whole evaluation set and scores it in one ``movers.<slug>`` call: ``result.metrics["<name>"]`` is the
metric's corpus score (per-call IDF, TWMD's batch centring and ΔBLEU's corpus counts included), the
per-row scores of that call are the ``<name>/score`` column of the eval table, and the call's signature is
the run tag ``movers.<name>.signature``. A targets column may hold several references per row, beside rows of
one reference string: every metric takes a row's list, tuple or NumPy array of strings as that row's references.
Where single strings stand beside them, give those rows as tuples or NumPy arrays (as a Parquet file or Spark's
``toPandas`` gives them), not Python lists: MLflow hashes the data set before any metric runs (its digest) and
fails on a list beside strings with pandas' ``unhashable type: 'list'``, which the metric never sees. A
column named like a metric's extra input (ΔBLEU's ``reference_weights``) is passed too; MLflow's hash takes a list
of weights in every row, or a number in every row (one reference each), not numbers beside lists.

MLflow calls ``eval_fn`` on the first row alone before the whole set (a probe); the probe's score is
replaced by the full call's, and its empty-generation warning is held back unless the set is that one row.
An input that movers rejects stops the evaluation with movers' error (quoted in an ``MlflowException`` when
the first row is at fault: MLflow wraps every exception of its probe).

No scorer for ``mlflow.genai.evaluate``: it scores rows one by one (in worker threads) and its aggregations
receive only the per-row numbers, so a corpus statistic cannot be computed there: a mean of pairs scored
alone is what this module exists to avoid.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np

from .. import missing_extra

try:
    import mlflow
    from mlflow.metrics import MetricValue, make_metric
except ImportError as err:  # an optional extra
    raise ImportError(missing_extra("movers.integrations.harnesses.mlflow", "mlflow", "mlflow")) from err

from ... import metrics as registry
from ...core.spec import MetricSpec
from .common import corpus_metric

__all__ = ["metric", "signature_tag"]


def signature_tag(name: str) -> str:
    """The run tag holding the signature of metric `name`'s call."""
    return f"movers.{name}.signature"


def _rows(values: Any) -> list[Any]:
    """A pandas Series (or any sequence) as a list: numpy arrays (a row's references) as lists, numpy scalars
    as Python ones (so that movers' checks name them)."""
    return [v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v for v in list(values)]


def metric(metric: str | MetricSpec, *, name: str | None = None, **options: Any) -> Any:
    """An MLflow ``EvaluationMetric`` scoring the whole evaluation set with ``movers.<slug>(**options)``.

    Args:
        metric: A registered metric (``movers.metrics.slugs()``).
        name: The name in ``result.metrics`` and the eval table (default: the slug).
        **options: Keyword options of that metric (checked now: an unknown one raises movers' TypeError).
    """
    spec = registry.get(metric)
    scored = corpus_metric(spec, options)  # unknown or bad options fail here, not inside MLflow
    label = name or spec.slug
    held: list[tuple[str, list[warnings.WarningMessage]]] = []  # the one-row probe's warnings, held back

    def eval_fn(predictions: Any, targets: Any, *extra: Any) -> MetricValue:
        preds, refs = _rows(predictions), _rows(targets)
        inputs = {key: _rows(col) if col is not None else None for key, col in zip(spec.extra_inputs, extra,
                                                                                      strict=False)}
        key = repr((preds, refs, inputs))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = scored.score(preds, refs, **inputs)
        if len(preds) == 1 and not held:  # MLflow's probe of the first row (or a one-row set: shown below)
            held.append((key, list(caught)))
        else:
            if held and held[0][0] == key:  # the one-row set, scored again: its probe's warnings are its own
                caught = held[0][1]
            held.clear()
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if mlflow.active_run() is not None:
            mlflow.set_tag(signature_tag(label), str(result.signature))
        return MetricValue(scores=[float(s) for s in result.scores], aggregate_results={label: float(result.score)})

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    eval_fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("predictions", kind), inspect.Parameter("targets", kind),
         *(inspect.Parameter(key, kind, default=None) for key in spec.extra_inputs)])
    eval_fn.__name__ = label
    return make_metric(eval_fn=eval_fn, greater_is_better=spec.higher_is_better, name=label,
                       long_name=f"{spec.title} (movers, corpus score of one call)",
                       metric_details=" ".join(spec.summary.split()))
