"""What the LLM evaluation harness integrations share: a metric with fixed options, scored on a whole set.

lm-evaluation-harness, Inspect, MLflow and LightEval each hand a third-party metric the evaluation set in their own
way (:mod:`movers.integrations.harnesses.lm_eval`, :mod:`movers.integrations.harnesses.inspect_ai`,
:mod:`movers.integrations.harnesses.mlflow`, :mod:`movers.integrations.harnesses.lighteval`). Each of them ends in
:class:`CorpusMetric`: one ``movers.<slug>`` call on every (prediction, references) pair of the set, so that the
harness's number is the metric's corpus score, per-call statistics (IDF, TWMD's batch centring, ΔBLEU's corpus
counts) included, never a mean of pairs scored one by one. Task files find their data with :func:`data_path`.
Imports no harness.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import metrics as registry
from ...core.result import Scores
from ...core.spec import MetricSpec
from ...pipeline.call import checked_options, is_empty
from ...text.embedding_cache import object_cache_options

__all__ = ["CorpusMetric", "corpus_metric", "data_path"]

_INPUTS = ("predictions", "references")


class _Holder:
    """Owner of the process's one in-memory embedding cache for every harness metric (made on first use)."""

    _movers_cache: Any = None


_HOLDER = _Holder()
_LOCK = threading.Lock()
_METRICS: dict[tuple[str, str], CorpusMetric] = {}


class CorpusMetric:
    """Metric `metric` (a registered slug or spec) with `options`, for a harness.

    The options are checked when it is built (an unknown one raises movers' ``TypeError`` naming it, a bad
    value its ``ValueError``). :meth:`score` runs one metric call on a whole set, with the process's
    in-memory embedding cache (:data:`~movers.text.embedding_cache.OBJECT_CACHE_BYTES`, shared by every harness
    metric: references met again by a second metric on the same encoder, a re-scored log or the next
    evaluation are embedded once; ``cache=False`` or ``MOVERS_CACHE`` as for any call), and remembers its
    last result, so that a harness asking twice for the same set (the number, then the signature) gets the
    same :class:`~movers.core.result.Scores` without a second call (or a second empty-prediction warning).
    """

    def __init__(self, metric: str | MetricSpec, options: Mapping[str, Any] | None = None) -> None:
        self.spec = registry.get(metric)
        self.options = dict(options or {})
        for key in (*_INPUTS, *self.spec.extra_inputs):
            if key in self.options:
                raise TypeError(f"{self.spec.slug}: `{key}` is an input, not an option; the harness passes it.")
        self.resolved = checked_options(self.spec, self.options)  # every check a call makes, without inputs
        self._function = registry.function(self.spec)
        self._last: tuple[str, Scores] | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The prefix of the metric's messages (SMS: its variant)."""
        return self.spec.name(self.resolved)

    @property
    def worst(self) -> float:
        """The segment score of an empty prediction (``empty_predictions="worst"``)."""
        return float(self.spec.worst(self.resolved)["scores"])

    def skips_empty(self, prediction: Any) -> bool:
        """Whether `prediction` is an empty generation that the metric scores as its worst value without
        scoring it (metrics with ``empty_predictions="worst"``; ΔBLEU scores empty texts itself)."""
        return getattr(self.resolved, "empty_predictions", None) == "worst" and is_empty(prediction)

    def score(self, predictions: Sequence[Any], references: Sequence[Any], **extra: Any) -> Scores:
        """``movers.<slug>(predictions, references, **extra, **options)`` on the whole set (or the remembered
        result of the same call)."""
        key = json.dumps([list(predictions), list(references), extra], sort_keys=True, default=repr)
        with self._lock:
            if self._last is not None and self._last[0] == key:
                return self._last[1]
        with _LOCK:
            options = object_cache_options(_HOLDER, self.spec, self.options)
        given = {k: v for k, v in extra.items() if v is not None}
        result = self._function(list(predictions), list(references), **given, **options)
        with self._lock:
            self._last = (key, result)
        return result

    def __repr__(self) -> str:
        return f"CorpusMetric({self.spec.slug!r}, {self.options!r})"


def corpus_metric(metric: str | MetricSpec, options: Mapping[str, Any] | None = None) -> CorpusMetric:
    """The :class:`CorpusMetric` of `metric` with `options`, one per process for the same settings (so its
    memory of the last result serves every harness object that asks with those settings)."""
    spec = registry.get(metric)
    key = (spec.slug, json.dumps(dict(options or {}), sort_keys=True, default=repr))
    with _LOCK:
        found = _METRICS.get(key)
    if found is None or found.spec is not spec:
        found = CorpusMetric(spec, options)
        with _LOCK:
            _METRICS[key] = found
    return found


def data_path(folder: str | Path, name: str | Path, *, what: str, kind: str = "file") -> Path:
    """A task's data `name` (a file, or with ``kind="dir"`` a folder): itself when absolute, else beside the task
    (`folder`) when it is there, else in the working directory. The harnesses read relative paths from the working
    directory only, so a task copied beside its data would not find it from elsewhere. `what` opens the message
    of the ``FileNotFoundError`` raised when it is nowhere."""
    def found(path: Path) -> bool:
        return path.is_dir() if kind == "dir" else path.is_file()

    path = Path(name).expanduser()
    if not path.is_absolute():
        path = Path(folder, path) if found(Path(folder, path)) else Path.cwd() / path
    if not found(path):
        raise FileNotFoundError(f"{what} was found neither beside the task ({folder}) nor in the working directory "
                                f"({Path.cwd()}).")
    return path
