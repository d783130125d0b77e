"""movers metrics as Inspect (``inspect-ai``) scorers, each with a corpus metric over all samples.

One scorer per registered metric, registered as ``movers/<slug>`` (``movers/moverscore``, ``movers/twmd``, ...)
with the metric's options as its arguments (``movers/moverscore(idf=True)``; ``-S idf=true`` on the command
line). movers' ``inspect_ai`` entry point imports this module when Inspect meets a ``movers/`` name, so after
``pip install 'movers[inspect]'`` the scorers resolve by name: ``Task(scorer=...)`` with the objects here,
``inspect score LOG --scorer movers/twmd`` to score (or re-score) a saved log, or a task's scorer list.

Each sample's :class:`~inspect_ai.scorer.Score` holds the pair scored alone (``value``; per-call statistics
such as IDF or TWMD's batch centring then come from that pair only), the generation as ``answer``, the call's
signature as ``explanation``, and in ``metadata`` the ``reference`` (a string, or the list when the target
has several), the ``signature`` and what the corpus metric needs (``movers``: the metric and its options). An
empty generation gets the metric's worst value without a call; the first one a scorer meets is warned about
once.

The corpus metric, ``movers/corpus`` (shown as ``corpus``), scores every sample in one ``movers.<slug>``
call: the number Inspect reports is the metric's corpus score on the whole set, not a mean of the samples'
values. With several epochs it sees every epoch's generation (``scores="unreduced"``), each one segment of
that call. Extra inputs a metric takes (ΔBLEU's ``reference_weights``) come from the sample metadata key of
that name. Inspect also recomputes metrics on the samples finished so far, for its live display (throttled
to about a tenth of the run time; ``--no-score-display`` turns it off), so the corpus call stays silent: its
warnings would describe a partial set. Inspect keeps only numbers per metric: the samples' signatures stand
for the corpus call's (equal but for ``nrefs`` when the samples' reference counts differ).
"""
from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

from .. import missing_extra

try:
    from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
    from inspect_ai.solver import TaskState
except ImportError as err:  # an optional extra
    raise ImportError(missing_extra("movers.integrations.harnesses.inspect_ai", "inspect-ai", "inspect")) from err
try:  # the name Inspect's decorators register (a private helper of 0.3.x)
    from inspect_ai._util.registry import registry_name as _inspect_name
except ImportError:  # gone in a later Inspect: trust it to prefix the package
    def _inspect_name(o: object, name: str) -> str:
        return f"movers/{name}"

from ... import metrics as registry
from ...core.spec import MetricSpec
from .common import corpus_metric

__all__ = ["corpus", "scorer_factory", "scorers"]

_KEY = "movers"
"""The Score metadata key holding the metric's slug and options (what the corpus metric re-creates)."""


def _name(function: Callable[..., Any], name: str) -> str:
    """`name` for Inspect's decorators such that the registered name is ``movers/<name>``: Inspect prefixes the
    package of the function when it finds movers installed (site-packages, or an editable install it recognises),
    else the bare name would be registered and ``movers/...`` would not resolve."""
    return name if _inspect_name(function, name) == f"{_KEY}/{name}" else f"{_KEY}/{name}"


def corpus() -> Metric:
    """The corpus score of a movers scorer's samples: one ``movers.<slug>`` call on all of them (the slug and
    options are read from each Score's metadata, which the movers scorers write)."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        if not scores:  # Inspect asks every metric for a value on zero samples (before any is scored): an empty
            return {}   # mapping is its "no value" (it shows what it shows for any metric then), not a warning

        first = scores[0].score.metadata or {}
        if _KEY not in first:
            raise ValueError(f"movers/corpus: needs the scores of a movers scorer (movers/<slug>), got a Score "
                             f"without `{_KEY}` metadata from {scores[0].scorer or 'an unknown scorer'}.")
        setting = first[_KEY]
        if any((s.score.metadata or {}).get(_KEY) != setting for s in scores):
            raise ValueError("movers/corpus: the samples were scored with different movers metrics or options.")
        metric_ = corpus_metric(setting["metric"], setting["options"])
        columns = {key: [(s.sample_metadata or {}).get(key) for s in scores] for key in metric_.spec.extra_inputs}
        extra = {key: (None if any(v is None for v in values) else values) for key, values in columns.items()}
        with warnings.catch_warnings():  # also run on partial sets (the live display): see the module docs
            warnings.simplefilter("ignore")
            result = metric_.score([s.score.answer or "" for s in scores],
                                   [(s.score.metadata or {})["reference"] for s in scores], **extra)
        return float(result.score)

    return compute


corpus = metric(name=_name(corpus, "corpus"), scores="unreduced")(corpus)


def _references(target: Target) -> str | list[str]:
    refs = list(target.target)
    return refs[0] if len(refs) == 1 else refs


def scorer_factory(metric_: str | MetricSpec) -> Callable[..., Scorer]:
    """The registered scorer factory ``movers/<slug>`` of a metric: ``factory(**options) -> Scorer``."""
    spec = registry.get(metric_)
    return _FACTORIES[spec.slug] if spec.slug in _FACTORIES else _make(spec)


def _make(spec: MetricSpec) -> Callable[..., Scorer]:
    def factory(**options: Any) -> Scorer:
        scored = corpus_metric(spec, options)  # unknown or bad options fail here, when the task is built
        setting = {"metric": spec.slug, "options": dict(options)}
        warned: list[Any] = []

        async def score(state: TaskState, target: Target) -> Score:
            answer = state.output.completion
            references = _references(target)
            metadata: dict[str, Any] = {"reference": references, _KEY: setting}
            if scored.skips_empty(answer):
                if not warned:
                    warned.append(state.sample_id)
                    warnings.warn(f"movers/{spec.slug}: sample {state.sample_id!r} generated nothing; empty "
                                  f"generations are scored as the metric's worst value, {scored.worst:g} "
                                  f"(empty_predictions='worst'; 'error' rejects them), without another warning.",
                                  RuntimeWarning, stacklevel=2)
                return Score(value=scored.worst, answer=answer, explanation="empty generation: the worst value",
                             metadata=metadata)
            extra = {key: [state.metadata.get(key)] if state.metadata.get(key) is not None else None
                     for key in spec.extra_inputs}
            with warnings.catch_warnings():  # the pair alone: per-call statistics warn in the corpus call
                warnings.simplefilter("ignore")
                result = scored.score([answer], [references], **extra)
            metadata["signature"] = str(result.signature)
            return Score(value=float(result.scores[0]), answer=answer, explanation=str(result.signature),
                         metadata=metadata)

        return score

    factory.__name__ = factory.__qualname__ = spec.slug
    factory.__module__ = __name__  # Inspect names a scorer after the package its factory is defined in: movers/
    factory.__doc__ = (f"{spec.title} of each sample (the pair scored alone) with the corpus score of all samples "
                       f"(movers/corpus); options: those of movers.{spec.slug}.")
    keyword = inspect.Parameter.KEYWORD_ONLY
    factory.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f.name, keyword, default=f.default) for f in spec.options], return_annotation=Scorer)
    registered = scorer(metrics=[corpus()], name=_name(factory, spec.slug))(factory)
    _FACTORIES[spec.slug] = registered
    return registered


_FACTORIES: dict[str, Callable[..., Scorer]] = {}


def scorers() -> dict[str, Callable[..., Scorer]]:
    """Slug -> registered scorer factory, for every registered metric (registering any added since)."""
    return {slug: scorer_factory(slug) for slug in registry.slugs()}


def __getattr__(name: str) -> Any:
    """``movers.integrations.harnesses.inspect_ai.<slug>``: that metric's scorer factory."""
    if registry.is_slug(name):
        return scorer_factory(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


scorers()
