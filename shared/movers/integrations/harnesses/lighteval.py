"""movers metrics in Hugging Face LightEval (``lighteval`` 0.13), with corpus-exact scores.

:func:`metric` builds a LightEval corpus metric named ``movers_<slug>`` for a task's ``metrics`` list
(``metric("twmd")``, ``metric("moverscore", idf=True)``; LightEval's own parameter mechanism works too:
``metric("moverscore")(sample_params={"idf": True})`` is ``movers_moverscore:idf=True``, each parameter an
option of ``movers.<slug>``, checked when it is set); ``<slug>(**options)``, imported from here, is the same as
``metric("<slug>", **options)``. LightEval has no plugin entry points: a task file given to ``--custom-tasks``
imports this module; :data:`TASKS` is such a file (printed by ``movers lighteval tasks``).

A metric is a sample-level preparator and a corpus-level computation, as LightEval's own corpus BLEU. Each
sample's preparator checks and keeps what the corpus needs (:class:`MoversSample`: the generation, the doc's gold
references, the inputs a metric takes besides them, such as ΔBLEU's ``reference_weights`` from the doc's
``specific``, and the options); the corpus computation scores every sample in one ``movers.<slug>`` call, so the
number LightEval reports is ``movers.<slug>(predictions, references, **options).score`` on the whole set (per-call
IDF, TWMD's batch centring, ΔBLEU's corpus counts and fitted baselines included), never a mean of pairs scored one
by one. Each sample's ``score`` in LightEval's details is its segment score in that call, beside the call's
``signature``.

LightEval bootstraps a standard error for every corpus value that is not a mean, by calling the aggregation 1,000
times on resampled sets (in a process pool): the aggregation returns ``{name: value}``, for which LightEval
computes no standard error, so the corpus is scored once. A sample movers cannot score (a generation that is
not a string, a doc without gold, samples prepared with different options) raises :class:`SampleError` naming
the sample (doc id and task) before anything is scored.
"""
from __future__ import annotations

import copy
import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import missing_extra

try:
    from lighteval.metrics.metrics_corpus import CorpusLevelComputation
    from lighteval.metrics.sample_preparator import Preparator
    from lighteval.metrics.utils.metric_utils import CorpusLevelMetric
    from lighteval.tasks.requests import Doc, SamplingMethod
except ImportError as err:  # an optional extra
    raise ImportError(missing_extra("movers.integrations.harnesses.lighteval", "lighteval", "lighteval")) from err

from ... import metrics as registry
from ...core.result import Scores
from ...core.spec import MetricSpec
from . import LIGHTEVAL_TASKS
from .common import corpus_metric, data_path

__all__ = ["metric", "doc_from_record", "local_data", "MoversMetric", "MoversSample", "SampleError",
           "SampleTypeError", "TASKS", "PREFIX"]

logger = logging.getLogger("movers")

PREFIX = "movers_"
"""Names are ``movers_<slug>``: LightEval's own ``bleu`` and ``bert_score`` keep their meaning."""
TASKS = LIGHTEVAL_TASKS
"""The custom-task file for ``--custom-tasks``: the task ``movers_template`` scored by the six metrics."""


class SampleError(ValueError):
    """A sample that a movers metric cannot score, named by its doc id and task."""


class SampleTypeError(SampleError, TypeError):
    """A sample whose generation or gold is not a string (a ``TypeError`` too, as movers' own checks raise)."""


@dataclass
class MoversSample:
    """What a sample hands the corpus computation, and what LightEval's details show of it: the generation, the
    gold references, the inputs besides them (``extra``), the metric and its options (as JSON), where it comes
    from, and, once the corpus is scored, its segment score in that call and the call's signature."""

    prediction: str
    references: list[str]
    extra: str
    metric: str
    options: str
    doc_id: str
    task: str
    score: float | None = None
    signature: str | None = None

    def __post_init__(self) -> None:
        # the values themselves, for the call (not fields: LightEval's details save the fields, these may be objects)
        self.settings: dict[str, Any] = {}
        self.inputs: dict[str, Any] = {}

    @property
    def where(self) -> str:
        return _where(self.doc_id, self.task)


def _where(doc_id: Any, task: Any) -> str:
    return f"sample {doc_id!r} of task {task!r}" if task else f"sample {doc_id!r}"


def _json(options: Mapping[str, Any]) -> str:
    return json.dumps(dict(options), sort_keys=True, default=repr)


class MoversPreparator(Preparator):
    """The sample level of ``movers_<slug>``: checks a sample and keeps what the corpus call needs.

    LightEval's ``Metric.__call__(sample_params)`` sets each parameter as an attribute of this object: here each is
    an option of ``movers.<slug>``, checked when it is set (an unknown one raises movers' ``TypeError``)."""

    def __init__(self, slug: str, options: Mapping[str, Any]) -> None:
        self.__dict__.update(slug=slug, options=dict(options))

    def __setattr__(self, key: str, value: Any) -> None:
        options = {**self.options, key: value}
        corpus_metric(self.slug, options)
        self.__dict__["options"] = options

    def __getattr__(self, key: str) -> Any:  # an option read back (LightEval reads a parameter it set)
        options = self.__dict__.get("options") or {}
        if key in options:
            return options[key]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {key!r}")

    def prepare(self, doc: Doc, model_response: Any, **kwargs: Any) -> MoversSample:
        """The sample's :class:`MoversSample`: its first generation (``model_response.final_text[0]``), the doc's gold
        references (``doc.choices`` at ``doc.gold_index``) and the metric's other inputs from ``doc.specific``."""
        name, slug = PREFIX + self.slug, self.slug
        doc_id, task = getattr(doc, "id", None), getattr(doc, "task_name", None)
        where = _where(doc_id, task)
        texts = getattr(model_response, "final_text", None)
        if not isinstance(texts, (list, tuple)) or not texts:
            raise SampleError(f"{name}: {where} has no generation: the model's response holds {texts!r} where a "
                              f"list with the generated text was expected.")
        prediction = texts[0]
        if not isinstance(prediction, str):
            raise SampleTypeError(f"{name}: {where}: the generation must be a string, got "
                                  f"{type(prediction).__name__} {prediction!r}.")
        references = _golds(name, where, doc)
        spec = registry.get(slug)
        extra = {key: (doc.specific or {}).get(key) for key in spec.extra_inputs}
        sample = MoversSample(prediction=prediction, references=references, extra=_json(extra), metric=slug,
                              options=_json(self.options), doc_id=str(doc_id), task=str(task or ""))
        sample.settings, sample.inputs = dict(self.options), extra
        return sample


def _golds(name: str, where: str, doc: Any) -> list[str]:
    """The doc's gold references (``choices`` at ``gold_index``), each a string; at least one."""
    choices: Any = getattr(doc, "choices", None)
    gold_index: Any = getattr(doc, "gold_index", None)
    indices: list[Any] = list(gold_index) if isinstance(gold_index, (list, tuple)) else [gold_index]
    if not isinstance(choices, (list, tuple)) or not indices or any(
            not isinstance(i, int) or isinstance(i, bool) or not -len(choices) <= i < len(choices) for i in indices):
        raise SampleError(f"{name}: {where} has no gold reference: movers compares the generation with the doc's "
                          f"gold choices (doc.choices[doc.gold_index]), got choices={choices!r}, "
                          f"gold_index={gold_index!r}.")
    golds = [choices[i] for i in indices]
    wrong = [g for g in golds if not isinstance(g, str)]
    if wrong:
        raise SampleTypeError(f"{name}: {where}: each gold reference must be a string, got "
                              f"{type(wrong[0]).__name__} {wrong[0]!r}.")
    return golds


class MoversCorpus(CorpusLevelComputation):
    """The corpus level of ``movers_<slug>``: every sample's :class:`MoversSample` scored in one movers call."""

    def __init__(self, slug: str) -> None:
        self.slug = slug

    def compute_corpus(self, items: list[Any]) -> float:
        """``movers.<slug>(predictions, references, **options).score`` on all samples."""
        return float(score_samples(self.slug, items).score)


def score_samples(slug: str, items: Sequence[Any]) -> Scores:
    """One ``movers.<slug>`` call on the samples `items` (what :class:`MoversPreparator` made), with their options;
    each sample's ``score`` and ``signature`` are set from it. Refuses, naming the sample, anything else."""
    name = PREFIX + slug
    if not items:
        raise SampleError(f"{name}: no samples to score.")
    wrong = next((i for i, x in enumerate(items) if not isinstance(x, MoversSample) or x.metric != slug), None)
    if wrong is not None:
        raise SampleError(f"{name}: the corpus computation needs the samples that {name}'s preparator makes "
                          f"(movers.integrations.harnesses.lighteval.metric), got {items[wrong]!r} at position "
                          f"{wrong}.")
    first = items[0]
    other = next((x for x in items if x.options != first.options), None)
    if other is not None:
        raise SampleError(f"{name}: {other.where} was prepared with the options {other.options}, {first.where} with "
                          f"{first.options}; one call scores a task's samples with one set of options (give "
                          f"differently-set metrics different names).")
    spec = registry.get(slug)
    extra: dict[str, Any] = {}
    for key in spec.extra_inputs:
        given = [x for x in items if x.inputs.get(key) is not None]
        if given and len(given) < len(items):
            missing = next(x for x in items if x.inputs.get(key) is None)
            raise SampleError(f"{name}: {missing.where} has no `{key}` in doc.specific, {given[0].where} has; give "
                              f"it for every sample of the task or for none.")
        extra[key] = [x.inputs[key] for x in items] if given else None
    predictions = [x.prediction for x in items]
    references = [x.references[0] if len(x.references) == 1 else list(x.references) for x in items]
    scored = corpus_metric(slug, first.settings)
    try:
        result = scored.score(predictions, references, **extra)
    except (TypeError, ValueError) as err:  # an input movers refuses: its message, with the sample it names
        raise _naming(err, items) from None
    for item, value in zip(items, result.scores, strict=True):
        item.score, item.signature = float(value), str(result.signature)
    logger.info("%s = %.4f on %d samples (%s)", name, result.score, len(items), result.signature)
    return result


def _naming(err: Exception, items: Sequence[MoversSample]) -> Exception:
    """movers' error about ``predictions[i]`` (or ``references[i]``, ...), its message ending with the sample that
    is (the same error where it names none)."""
    found = re.search(r"`(\w+)\[(\d+)\]", str(err))
    if found is None or int(found.group(2)) >= len(items):
        return err
    try:
        return type(err)(f"{err} ({found.group(1)}[{found.group(2)}] is {items[int(found.group(2))].where}.)")
    except TypeError:  # an error class that takes other arguments: movers' own message is still its words
        return err


class MoversMetric(CorpusLevelMetric):
    """A LightEval corpus metric scored by movers (see :func:`metric`)."""

    def get_corpus_aggregations(self) -> dict:
        """``{name: aggregation}``, where the aggregation returns ``{name: corpus value}``: LightEval bootstraps a
        standard error for a number (1,000 calls of the aggregation), not for a mapping."""
        name = self.metric_name
        compute = self.corpus_level_fn.compute_corpus

        def aggregate(items: list[Any]) -> dict[str, float]:
            return {name: compute(items)}

        aggregate.__name__ = aggregate.__qualname__ = str(name)
        return {name: aggregate}

    def __call__(self, sample_params: dict | None) -> MoversMetric:
        """A copy with `sample_params` as options, named ``movers_<slug>:key=value`` (LightEval's mechanism; as its
        own ``Metrics`` enum does, the metric called is left as it is)."""
        copied = copy.deepcopy(self)
        return CorpusLevelMetric.__call__(copied, sample_params) if sample_params else copied


def metric(metric: str | MetricSpec, *, name: str | None = None, **options: Any) -> MoversMetric:
    """The LightEval metric ``movers_<slug>``: the corpus score of ``movers.<slug>(**options)`` on a task's samples.

    Args:
        metric: A registered metric (``movers.metrics.slugs()``).
        name: The name in LightEval's results (default ``movers_<slug>``); two metrics of one task need two names.
        **options: Keyword options of that metric (checked now: an unknown one raises movers' TypeError).
    """
    spec = registry.get(metric)
    corpus_metric(spec, options)  # unknown or bad options fail here, when the task is built
    return MoversMetric(metric_name=name or PREFIX + spec.slug, higher_is_better=spec.higher_is_better,
                        category=SamplingMethod.GENERATIVE, sample_level_fn=MoversPreparator(spec.slug, options),
                        corpus_level_fn=MoversCorpus(spec.slug))


def doc_from_record(line: Mapping[str, Any], task_name: str = "") -> Doc:
    """A task's prompt function for JSON lines with ``source`` (the prompt) and ``reference`` (a string) or
    ``references`` (a list), and optional ``reference_weights`` (ΔBLEU's, one per reference): the references are
    the doc's gold choices (``gold_index`` a list in every doc, so that LightEval's saved details keep one type
    where docs have one reference and several), the weights its ``specific``."""
    if "source" not in line:
        raise ValueError(f"movers LightEval task {task_name!r}: row {line.get('__index', '?')} has no `source` (the "
                         f"prompt); its fields are {sorted(k for k in line if not k.startswith('__'))}.")
    references = line.get("references", line.get("reference"))
    golds = [references] if isinstance(references, str) else list(references or [])
    specific = {"reference_weights": line["reference_weights"]} if line.get("reference_weights") is not None else None
    return Doc(query=line["source"], choices=golds, gold_index=list(range(len(golds))), specific=specific,
               task_name=task_name)


def local_data(task_file: str | Path, folder: str) -> str:
    """The data folder of a task file (LightEval's ``hf_repo``: a folder of JSON lines, ``test.jsonl`` for the
    ``test`` split): `folder` beside the task file when it is there, else in the working directory."""
    where = Path(task_file).resolve().parent
    return str(data_path(where, folder, what=f"movers LightEval task: data folder {folder!r}", kind="dir"))


def __getattr__(name: str) -> Any:
    """``movers.integrations.harnesses.lighteval.<slug>``: :func:`metric` of that metric, ``twmd(**options)``."""
    if registry.is_slug(name):
        return functools.partial(metric, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
