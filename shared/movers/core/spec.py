"""A metric as a declaration: :class:`MetricSpec`.

Each metric file declares one spec (a subclass instance): its options (a frozen dataclass of
:func:`~movers.core.options.option` fields), direction, worst value, whether it can be rescaled, its
outputs and documentation, and the hooks the one scoring pipeline calls. Every surface (the core
function, the evaluate module, the command line, the Space page, streaming, distributed scoring,
explain, reward, centring fits, the bench) reads the spec; nothing outside the metric files names a
metric. A registry (:mod:`movers.metrics`) lists the specs.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from . import validation as v
from .options import OptionField, option_fields
from .result import Scores

__all__ = ["MetricSpec", "Inputs", "Output", "Example", "SEGMENT_OUTPUTS", "LongTextStudy"]

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class Inputs:
    """A call's validated inputs: predictions (texts, or documents as tuples of sentences), references
    as one non-empty list per prediction, and any extra per-reference input (ΔBLEU's weights)."""

    predictions: list[Any]
    references: list[list[Any]]
    extra: Mapping[str, Any] = field(default_factory=dict)
    segmented: bool = False

    def __len__(self) -> int:
        return len(self.predictions)

    def select(self, indices: Sequence[int], references: Sequence[Sequence[Any]] | None = None) -> Inputs:
        """The segments `indices` (with other `references` when given: a baseline's random pairing)."""
        refs = [list(references[k]) for k in range(len(indices))] if references is not None else \
            [self.references[i] for i in indices]
        extra = {key: None if value is None else [value[i] for i in indices] for key, value in self.extra.items()}
        return Inputs([self.predictions[i] for i in indices], refs, extra, self.segmented)


@dataclass(frozen=True)
class Output:
    """One output key: its documentation and whether it has one value per segment."""

    name: str
    type: str
    doc: str
    per_segment: bool = True
    table: bool = True
    """Shown as a column of the Space page's per-segment table (per-segment numbers only)."""


SEGMENT_OUTPUTS = ("scores", "per_reference", "alignments", "raw_scores")
"""Per-segment outputs every metric with references per segment may return besides its own."""


@dataclass(frozen=True)
class Example:
    """A clickable example of a Space page: one prediction per line, references separated by ``|||``."""

    label: str
    predictions: str
    references: str
    weights: str = ""


@dataclass(frozen=True)
class LongTextStudy:
    """How ``python -m shared.bench long-texts`` scores a metric on summaries against their source articles.

    ``options``: the settings scored (SMS: its contextual encoder). ``partial``: the options, and ``output`` the
    output read, of the metric's transport that fits a short text against a long one, described by ``partial``
    with its direction. ``windows``: whether the metric reads a whole text with the encoder, so that the ways
    of reading a text longer than the window apply (False: SMS embeds one sentence at a time).
    """

    partial: Mapping[str, Any]
    partial_label: str
    options: Mapping[str, Any] = field(default_factory=dict)
    output: str = "scores"
    windows: bool = True


class MetricSpec(ABC, Generic[OptionsT]):
    """One metric's declaration and the hooks of the pipeline that scores it.

    Class attributes declare the facts every surface needs; methods give the per-options facts (worst
    value, reward, corpus rule) and the scoring itself (:meth:`run`, implemented once for all embedding
    metrics by :class:`movers.pipeline.embedding.EmbeddingMetric`).
    """

    slug: ClassVar[str]
    """Module name: ``movers.<slug>``, ``evaluate.load("<slug>")``, ``movers score -m <slug>``."""
    title: ClassVar[str]
    """Display name and the signature's first field (``MoverScore``)."""

    @classmethod
    def class_title(cls) -> str:
        """The title as a Python class name (``S+WMS`` -> ``S_WMS``): ``movers.torchmetrics.<class_title>``."""
        return re.sub(r"\W", "_", cls.title)

    Options: ClassVar[type]
    """The frozen options dataclass."""
    summary: ClassVar[str]
    """One paragraph: what the metric measures, its paper, direction and range."""
    citation: ClassVar[str] = ""
    codebase_urls: ClassVar[tuple[str, ...]] = ()
    reference_urls: ClassVar[tuple[str, ...]] = ()
    higher_is_better: ClassVar[bool] = True
    rescalable: ClassVar[bool] = False
    """Similarities with maximum 1: ``baseline=`` rescales them (s - b) / (1 - b)."""
    fixed: ClassVar[Mapping[str, Any]] = {}
    """Options this slug pins (S+WMS is SMS with ``variant="s+wms"``); not in its signature or docs."""
    documents: ClassVar[bool] = False
    """Predictions may be documents given as lists of sentences (SMS)."""
    allow_empty_text: ClassVar[bool] = False
    """Empty texts are valid input scored by the metric itself (ΔBLEU: sacreBLEU's rule)."""
    has_plan: ClassVar[bool] = True
    """An optimal-transport metric: ``return_plans`` and ``movers.explain`` show its transport."""
    corpus_from_segments: ClassVar[bool] = True
    """The corpus score is the mean of the segment scores (False: from summed statistics, ΔBLEU)."""
    extra_inputs: ClassVar[tuple[str, ...]] = ()
    """Inputs beside predictions and references, shaped like the references (ΔBLEU's weights)."""
    configs: ClassVar[Mapping[str, tuple[str, ...]]] = {"default": ()}
    """evaluate configurations: name -> extra input columns added batch by batch."""
    outputs: ClassVar[tuple[Output, ...]] = ()
    """The metric's outputs besides ``score``, ``scores``, ``per_reference``, ``alignments``, ``signature``."""
    scores_doc: ClassVar[str] = "one score per segment, in input order"
    module_examples: ClassVar[str] = ""
    """Doctest of the evaluate module (run by the tests)."""
    space_examples: ClassVar[tuple[Example, ...]] = ()
    bench_options: ClassVar[Mapping[str, Any]] = {}
    """The options the speed and scale benches run with (the call-level statistics switched on)."""
    original_options: ClassVar[Mapping[str, Any] | None] = None
    """The options that restore the original implementation's settings where the default departs from them
    (``{}``: the default is the original's). ``python -m shared.bench validation`` scores the default and, when this is
    not empty, the original's settings beside it; None leaves the metric out of the validation tables."""
    long_text_study: ClassVar[LongTextStudy | None] = None
    """How the long-text study (``python -m shared.bench long-texts``) scores the metric; None leaves it out."""
    exports: ClassVar[Mapping[str, Any]] = {}
    """Public names of the metric file (``movers.<name>``), e.g. a table class to fit."""

    # ------------------------------------------------------------------------------------- options

    @property
    def options(self) -> tuple[OptionField, ...]:
        """The options a caller may set (the pinned ones excluded): the metric's own in declaration order,
        then those its options class inherits (shared by several metrics)."""
        own = self.Options.__dict__.get("__annotations__", {})
        fields = [f for f in option_fields(self.Options) if f.name not in self.fixed]
        return tuple(sorted(fields, key=lambda f: (f.name not in own, list(own).index(f.name) if f.name in own
                                                   else 0)))

    def has_option(self, name: str) -> bool:
        """Whether callers may set option `name` (e.g. ``cache``, ``model``)."""
        return any(f.name == name for f in self.options)

    def name(self, options: OptionsT) -> str:
        """The prefix of error messages and warnings (SMS: its variant's slug)."""
        return self.slug

    def check(self, options: OptionsT) -> None:
        """Rules between options and checks of values the declarations cannot express."""

    def resolve(self, options: OptionsT) -> OptionsT:
        """Options with presets applied (fields left None take the preset's value)."""
        return options

    # --------------------------------------------------------------------------- per-options facts

    def worst(self, options: OptionsT) -> dict[str, Any]:
        """The per-segment outputs of an empty prediction (``empty_predictions="worst"``): the worst value."""
        raise NotImplementedError(f"{self.slug}: no worst value declared")

    def reward(self, options: OptionsT, score: float) -> float:
        """A segment score as a higher-is-better reward (the default: the score, negated for distances)."""
        return score if self.higher_is_better else -score

    def corpus(self, options: OptionsT, segments: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
        """The corpus score and corpus-level outputs from the per-segment outputs (mean of the scores)."""
        return float(np.mean(segments["scores"])), {}

    def corpus_from_statistics(self, options: OptionsT, sums: np.ndarray) -> np.ndarray:
        """Corpus scores from summed sufficient statistics, one per row of `sums` ``[m, k]`` (the rows of
        :attr:`Scores.statistics <movers.core.result.Scores.statistics>` summed over a resample); only for
        metrics whose corpus score is not a mean (``corpus_from_segments = False``)."""
        raise NotImplementedError(f"{self.slug}: no corpus score from statistics declared")

    def details(self, options: OptionsT, prediction: Any, references: list[Any],
                weights: list[float] | None) -> dict[str, Any] | None:
        """A table explaining one segment where there is no transport plan (ΔBLEU's n-gram credits):
        ``{"caption", "headers", "data"}``; None when the metric has none."""
        return None

    def can_rescale(self, options: OptionsT) -> bool:
        """Whether ``baseline=`` applies with these options (a similarity with maximum 1)."""
        return self.rescalable

    # ------------------------------------------------------------------------------------ scoring

    def inputs(self, name: str, predictions: Any, references: Any, extra: Mapping[str, Any], *,
               allow_empty_predictions: bool) -> Inputs:
        """Validate a call's inputs once (messages name the argument and position, prefixed with `name`)."""
        allow = self.allow_empty_text or allow_empty_predictions
        if self.documents:
            preds, refs, segmented = v.check_documents(name, predictions, references,
                                                       allow_empty_text=self.allow_empty_text,
                                                       allow_empty_predictions=allow)
            return Inputs(preds, refs, {}, segmented)
        preds = v.check_predictions(name, predictions, allow_empty_text=allow)
        refs = v.normalise_references(name, references, len(preds), allow_empty_text=self.allow_empty_text)
        return Inputs(preds, refs, dict(extra))

    @abstractmethod
    def run(self, options: OptionsT, inputs: Inputs) -> Scores:
        """Score validated inputs with resolved options (the pipeline's part after the front)."""

    # ------------------------------------------------------------------------------------- helpers

    def per_segment_outputs(self) -> tuple[str, ...]:
        return (*SEGMENT_OUTPUTS, *(o.name for o in self.outputs if o.per_segment))
