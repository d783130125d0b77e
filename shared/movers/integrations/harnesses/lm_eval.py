"""movers metrics in EleutherAI's lm-evaluation-harness (``lm-eval`` 0.4.x), with corpus-exact scores.

Importing this module registers, for every registered metric, an lm-eval metric and aggregation named
``movers_<slug>`` (and its ``higher_is_better``): a task's ``metric_list`` then names them like lm-eval's
own (``- metric: movers_twmd``), with the metric's options as further keys of the entry
(``idf: true``). lm-eval 0.4 has no plugin entry points, so a task YAML imports this module itself:
``metric: !function utils.movers_<slug>`` with the two-line ``utils.py`` of the task folder shipped here
(:data:`TASKS`, printed by ``movers lm-eval tasks``; point ``--include_path`` at it, or copy ``utils.py``
beside your own YAML), or ``!function movers.integrations.harnesses.lm_eval.movers_<slug>`` from anywhere. In Python,
``simple_evaluate(tasks=[{...task config...}], task_manager=TaskManager(include_defaults=False))`` after this
import needs no YAML (and skips indexing lm-eval's own 14,000 task files).

lm-eval calls a metric once per document with ``references=[gold], predictions=[generation]`` and hands
what it returned, for every document, to the metric's aggregation. Here the per-document function only
passes the pair through, and the aggregation scores all of them in one ``movers.<slug>`` call, so the
reported number is the metric's corpus score on the whole set (per-call IDF, TWMD's batch centring and
ΔBLEU's corpus counts included), not a mean of pairs scored one by one. The call's signature is reported
beside the number, as ``movers_<slug>_signature`` in the task's results.

What lm-eval cannot express: several references per document (a ``doc_to_target`` returning a list makes
lm-eval score each target separately and keep ``any()``; the aggregation then refuses the result), inputs
besides the gold and the generation (ΔBLEU's reference weights), and a confidence interval (lm-eval
bootstraps only its own aggregations; the stderr column says ``N/A``). An option that movers rejects is
raised as a ``ValueError`` carrying movers' message: lm-eval retries a metric that raises ``TypeError``
with another calling convention, which would hide it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .. import missing_extra

try:
    import lm_eval.api.metrics  # noqa: F401  (lm-eval's own metrics: its registries fill lazily only while empty)
    from lm_eval.api import registry as lm_registry
except ImportError as err:  # an optional extra
    raise ImportError(missing_extra("movers.integrations.harnesses.lm_eval", "lm-eval", "lm-eval")) from err

from ... import metrics as registry
from ...core.spec import MetricSpec
from .common import corpus_metric, data_path

__all__ = ["register", "metric_name", "document_metric", "aggregation", "local_json", "TASKS", "PREFIX", "SIGNATURE"]

logger = logging.getLogger("movers")

PREFIX = "movers_"
"""Names are ``movers_<slug>``: lm-eval's own ``bleu`` and ``bertscore`` keep their meaning."""
SIGNATURE = "_signature"
"""Suffix of the result that holds the signature of the call behind ``movers_<slug>``."""
TASKS = Path(__file__).resolve().with_name("lm_eval_tasks")
"""The task folder for ``--include_path``: ``utils.py`` (the import) and ``movers_template.yaml``."""


class Pair(tuple):
    """What the per-document metric passes to the aggregation: (reference, generation, options)."""


class SignaturePair(Pair):
    """The same pair under ``movers_<slug>_signature``: the aggregation returns the call's signature."""


def metric_name(metric: str | MetricSpec) -> str:
    """``movers_<slug>``, the name of `metric` in lm-eval."""
    return PREFIX + registry.get(metric).slug


_DOCUMENT: dict[str, Any] = {}
_AGGREGATION: dict[str, Any] = {}


def document_metric(metric: str | MetricSpec) -> Any:
    """The per-document function lm-eval calls, ``f(references=[gold], predictions=[generation], **options)``
    (the options: the other keys of the task's ``metric_list`` entry). Checks the options, then returns the
    pair under ``movers_<slug>`` and ``movers_<slug>_signature`` for the aggregation."""
    spec = registry.get(metric)
    if spec.slug not in _DOCUMENT:
        name = metric_name(spec)

        def document(references: Any = None, predictions: Any = None, **options: Any) -> dict[str, Pair]:
            try:
                corpus_metric(spec, options)
            except TypeError as err:  # lm-eval retries on TypeError with `fn([gold, generation])`
                raise ValueError(f"{err} (an option of the `{name}` entry of the task's metric_list)") from None
            if not isinstance(references, (list, tuple)) or not isinstance(predictions, (list, tuple)) \
                    or len(references) != 1 or len(predictions) != 1:
                raise ValueError(f"{name}: expected lm-eval's call f(references=[gold], predictions=[generation]), "
                                 f"got references={references!r}, predictions={predictions!r}.")
            pair = (references[0], predictions[0], options)
            return {name: Pair(pair), name + SIGNATURE: SignaturePair(pair)}

        document.__name__ = document.__qualname__ = name
        document.__module__ = __name__
        document.__doc__ = f"lm-eval metric {name}: passes (gold, generation) to the corpus aggregation."
        _DOCUMENT[spec.slug] = document
    return _DOCUMENT[spec.slug]


class _Aggregation:
    """The corpus aggregation of one metric: every document's pair, scored in one movers call."""

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.__name__ = metric_name(spec)

    def __call__(self, items: list[Any]) -> float | str:
        name = self.__name__
        wrong = next((x for x in items if not isinstance(x, Pair)), None)
        if wrong is not None or not items:
            raise ValueError(f"{name}: the aggregation needs the (reference, generation) pairs of the metric "
                             f"{name}, got {wrong!r}. If the task's doc_to_target returns a list, lm-eval scores "
                             f"each target on its own and keeps any() of them: give one reference per document.")
        options = items[0][2]
        if any(x[2] != options for x in items):
            raise ValueError(f"{name}: the documents were scored with different options; one metric_list entry "
                             f"per metric and task.")
        metric = corpus_metric(self.spec, options)
        result = metric.score([x[1] for x in items], [x[0] for x in items])
        if isinstance(items[0], SignaturePair):
            return str(result.signature)
        logger.info("%s = %.4f on %d documents (%s)", name, result.score, len(items), result.signature)
        return float(result.score)

    def __repr__(self) -> str:
        return f"<movers lm-eval aggregation {self.__name__}>"


def aggregation(metric: str | MetricSpec) -> Any:
    """The aggregation registered as ``movers_<slug>``: the corpus score of all documents' pairs (or, for
    ``movers_<slug>_signature``, the signature of that call)."""
    spec = registry.get(metric)
    if spec.slug not in _AGGREGATION:
        _AGGREGATION[spec.slug] = _Aggregation(spec)
    return _AGGREGATION[spec.slug]


def local_json(folder: str | Path, data_files: str | dict[str, str] | None = None, **_: Any) -> Any:
    """A task's JSON lines as a ``datasets.DatasetDict`` (lm-eval's ``custom_dataset``): each relative path of
    `data_files` ({split: path}, or one path for the ``test`` split) is read from `folder` (the task's own folder)
    when the file is there, else from the working directory. lm-eval's ``dataset_path: json`` reads relative
    paths from the working directory only, so a task copied elsewhere would not find its data."""
    import datasets

    if data_files is None:
        raise ValueError("movers lm-eval task: `dataset_kwargs.data_files` must name the task's JSON lines file(s).")
    files = {"test": data_files} if isinstance(data_files, str) else dict(data_files)
    resolved = {split: str(data_path(folder, name, what=f"movers lm-eval task: data file {name!r} of split {split!r}"))
                for split, name in files.items()}
    return datasets.load_dataset("json", data_files=resolved)


def register() -> list[str]:
    """Register ``movers_<slug>`` (metric, aggregation, higher_is_better) in lm-eval for every registered
    metric; again after ``movers.metrics.register`` adds one. Returns the names."""
    names = []
    for spec in registry.specs():
        name = metric_name(spec)
        if name not in lm_registry.aggregation_registry:
            lm_registry.register_aggregation(name)(aggregation(spec))
        if name not in lm_registry.metric_registry:
            lm_registry.register_metric(metric=name, higher_is_better=spec.higher_is_better,
                                        aggregation=name)(document_metric(spec))
        names.append(name)
    return names


def __getattr__(name: str) -> Any:
    """``movers_<slug>``: the per-document metric, for ``metric: !function ...movers_<slug>`` in a task YAML."""
    if name.startswith(PREFIX) and registry.is_slug(name[len(PREFIX):]):
        register()
        return document_metric(name[len(PREFIX):])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register()
