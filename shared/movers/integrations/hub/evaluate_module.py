"""The `evaluate` modules of every registered metric: one class per spec, movers' checks before evaluate's.

:func:`module_class` builds a metric's `evaluate.Metric` subclass from its spec (description, citation,
argument and output docs with the doctest examples, features per configuration, ``_compute`` with the
spec's option signature): ``metrics/<slug>/<slug>.py`` is a three-line shim that subclasses it, and
``movers.load("<slug>")`` instantiates it directly for a metric registered at run time.

:class:`MoversMetric`, the base of those classes, runs movers' input checks before evaluate's:

evaluate casts every batch to its Arrow features before the metric sees it: an int becomes ``"5"``,
a bare string becomes a list of characters, and a failed batch leaves its writer (and the feature
variant it picked) behind, so that the next valid call on the same object fails. Here `add`,
`add_batch` and `compute` first run the same checks as the core functions (``movers._validation``),
raising their `TypeError`/`ValueError` that names the argument and position before evaluate's
writer sees anything, and hand evaluate one normalised form (references always one list per
prediction), so that flat and ragged batches can be mixed. A `compute` that fails discards what was
added (as a successful one does), leaving the object ready for the next call.

Empty or whitespace-only texts pass this layer: each metric's core decides about them (the metric's
worst value by default, with a warning), with the options given to `compute`.
"""
from __future__ import annotations

import logging
import os
import re
import textwrap
import threading
import warnings
from typing import Any

import datasets
import evaluate

from ... import metrics as registry
from ...core import validation as v
from ...core.options import type_text
from ...core.spec import MetricSpec
from ...pipeline.call import signature_of
from ...text.embedding_cache import object_cache_options

logger = logging.getLogger("movers")

__all__ = ["MoversMetric", "module_class", "evaluate_module", "text_features", "kwargs_description", "instance",
           "configurations", "corpus_config", "CORPUS"]


class MoversMetric(evaluate.Metric):
    """`evaluate.Metric` whose inputs are checked by movers before evaluate stores them.

    Subclasses define `_info` and `_compute` only. The inputs are ``predictions`` and ``references``
    (texts, or, when a feature variant declares sentence lists, pre-segmented documents) and
    optionally ``reference_weights`` (ΔBLEU's "weighted" configuration).

    Threads: one object may be shared between threads (a Space or a web service handling several requests).
    ``compute(predictions=..., references=...)`` with nothing added before scores straight from the checked
    inputs, without evaluate's Arrow writer, so concurrent calls never share state; ``add``/``add_batch`` and
    a ``compute`` of added examples hold the object's lock, so they run one at a time. A cache folder that
    cannot be written (read-only, full or broken ``HF_HOME``) makes the object keep added examples in memory.

    Embeddings: the object keeps the token vectors of the texts it scored in an in-memory cache of at most
    :data:`~movers.text.embedding_cache.OBJECT_CACHE_BYTES` (least recently used first out), so that a
    training loop's repeated ``compute`` calls embed the same references once; scores agree with and without
    it (``cache=False``) to float32 rounding (:data:`movers.core.result.REGROUPING_ATOL`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._movers_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_movers_lock", None)
        state.pop("_movers_cache", None)
        return state

    def _movers_cache_options(self, spec: MetricSpec, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with the object's own in-memory embedding cache (:func:`object_cache_options`): repeated
        ``compute`` calls of one object (a training loop's evaluations) embed the same references once."""
        with self._movers_lock:
            return object_cache_options(self, spec, options)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._movers_lock = threading.RLock()

    def _build_data_dir(self) -> str:
        """evaluate's cache folder; where it cannot be made, keep examples in memory (one process) or say where."""
        try:
            return str(super()._build_data_dir())
        except OSError as err:
            path = os.path.join(self._data_dir_root, self.name, self.config_name)
            if self.num_process != 1:
                raise OSError(f"{self.name}: evaluate's cache folder {path} cannot be written "
                              f"({err.strerror or err}); distributed evaluate needs it: set HF_HOME (or cache_dir=) "
                              f"to a writable folder.") from None
            warnings.warn(f"{self.name}: evaluate's cache folder {path} cannot be written ({err.strerror or err}); "
                          f"added examples are kept in memory instead.", RuntimeWarning, stacklevel=4)
            self.keep_in_memory = True
            return path

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (checked by movers first; see the module card).
        """
        return self._movers_write(self._movers_check(predictions, references, kwargs))

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and its reference(s) (checked by movers first; see the module card).
        """
        columns = {k: [value] for k, value in kwargs.items()}
        # written as a batch of one: datasets before 5.0 writes a batch before the single examples added ahead of
        # it (ArrowWriter.write_batch did not flush them), so add() then add_batch() would score them out of order
        return self._movers_write(self._movers_check([prediction], [reference], columns, single=True))

    def _movers_write(self, batch):
        """Write a checked batch under the module's lock; a failed first write leaves no writer behind."""
        with self._movers_lock:
            fresh = self.writer is None
            try:
                return super().add_batch(**batch)
            except BaseException:
                if fresh:
                    self._movers_discard()
                raise

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score the added examples and those given here (checked by movers first; see the module card).

        A failed call discards the examples added so far, so the object stays usable.
        """
        columns = set(self._feature_names())
        if (predictions is not None or references is not None) and self.num_process == 1 \
                and getattr(self, "writer", None) is None:
            # Everything is here: score the checked inputs as they are (what evaluate's Arrow round trip gives),
            # no shared writer, no cache file.
            batch = self._movers_check(predictions, references, {k: v for k, v in kwargs.items() if k in columns})
            options = {k: v for k, v in kwargs.items() if k not in columns}
            # No temp_seed: it swaps numpy's and torch's global generators, which threads share, and the metrics
            # draw no random numbers (a fitted baseline uses its own seeded generator).
            return self._compute(**batch, **options)
        with self._movers_lock:
            # evaluate leaves file_paths/filelocks of the last successful compute behind; cleared here so that a
            # failure below discards only files this call holds (another module or process may own that path now).
            self.file_paths = self.filelocks = None
            try:
                out = super().compute(predictions=predictions, references=references, **kwargs)
            except BaseException:
                self._movers_discard()
                raise
            self.file_paths = self.filelocks = None
            return out

    # ------------------------------------------------------------------ internals

    def _movers_check(self, predictions: Any, references: Any, extra: dict, single: bool = False) -> dict:
        """movers' checks on one batch; returns the batch in the form handed to evaluate's writer."""
        try:
            return self._movers_normalise(predictions, references, extra)
        except (TypeError, ValueError) as err:
            if not single:
                raise
            # add(prediction=, reference=) checks a batch of one: name the arguments as the caller wrote them.
            message = re.sub(r"`(prediction|reference)s\[0\]", r"`\1", str(err))
            message = message.replace("`predictions` and `references` must", "`prediction` and `reference` must")
            raise type(err)(message) from None

    def _movers_normalise(self, predictions: Any, references: Any, extra: dict) -> dict:
        name = self.name
        columns = self._feature_names()
        unknown = sorted(set(extra) - set(columns))
        if unknown:  # evaluate would say the same, without naming the metric
            raise ValueError(f"{name}: unknown input column(s) {unknown}; the inputs are {columns} "
                             f"(options go to compute()).")
        variants = self.features if isinstance(self.features, list) else [self.features]
        if any(isinstance(f["predictions"], datasets.Sequence) for f in variants):  # SMS, S+WMS
            preds, refs, segmented = v.check_documents(name, predictions, references, allow_empty_text=True)
            if segmented:
                preds = [list(doc) for doc in preds]
                refs = [[list(doc) for doc in group] for group in refs]
        else:
            preds, refs = v.check_pairs(name, predictions, references, allow_empty_text=True)
        # numpy strings become str; references always one list per prediction (the first feature variant),
        # so that batches with one and with several references can be added to the same object.
        batch: dict = {"predictions": [str(p) if isinstance(p, str) else p for p in preds],
                       "references": [[str(r) if isinstance(r, str) else r for r in group] for group in refs]}
        if "reference_weights" in columns:  # ΔBLEU "weighted": the same shape as the references
            if extra.get("reference_weights") is None:
                raise TypeError(f"{name}: `reference_weights` is required by this configuration (one number "
                                f"per reference, in [-1, 1]); load the default configuration for plain BLEU.")
            batch["reference_weights"] = v.check_reference_weights(name, extra["reference_weights"], refs)
        return batch

    def _movers_discard(self) -> None:
        """Drop the pending writer, cache file and lock, as a successful `compute` does: only what this object
        holds now (its open cache file, or the files the failing `compute` gathered)."""
        writer: Any = getattr(self, "writer", None)
        if writer is not None:
            try:
                writer.finalize()
            except Exception as err:  # a half-written batch may not finalise; it is dropped anyway
                logger.debug("%s: discarding a writer that did not finalise: %s", self.name, err)
        cache_file: Any = getattr(self, "cache_file_name", None)
        own_lock: Any = getattr(self, "filelock", None)
        paths = list(self.file_paths or []) + ([cache_file] if cache_file else [])
        locks = list(self.filelocks or []) + ([own_lock] if own_lock is not None else [])
        for path in paths:
            if path and os.path.exists(path):
                os.remove(path)
        for lock in locks:
            try:
                lock.release()
            except Exception as err:  # a lock of a process that is gone; nothing to release
                logger.debug("%s: could not release %s: %s", self.name, lock, err)
        self.writer = self.buf_writer = self.data = self.selected_feature_format = None
        self.cache_file_name = self.filelock = self.file_paths = self.filelocks = None


# ---------------------------------------------------------------------------------- from the spec

def text_features(*, segmented: bool = False, weights: tuple[str, ...] = ()) -> list:
    """Feature variants for (predictions, references): several references per prediction, or one; with
    `segmented`, also documents given as lists of sentences (SMS); `weights` adds float64 columns shaped
    like the references (ΔBLEU's "weighted" configuration; float32 would turn 0.2 into 0.20000000298).

    evaluate picks, for the first batch, the first variant that encodes it, so the multi-reference variant
    comes first; the single-reference variant accepts evaluate's usual ``references=[str, ...]``.
    """
    string = datasets.Value("string", id="sequence")
    multi = {"predictions": string, "references": datasets.Sequence(string, id="references")}
    single = {"predictions": string, "references": string}
    for column in weights:
        multi[column] = datasets.Sequence(datasets.Value("float64"), id=column)
        single[column] = datasets.Value("float64")
    variants = [datasets.Features(multi), datasets.Features(single)]
    if segmented:
        sentences = datasets.Sequence(string)
        variants += [
            datasets.Features({"predictions": sentences, "references": datasets.Sequence(sentences, id="references")}),
            datasets.Features({"predictions": sentences, "references": sentences}),
        ]
    return variants


def kwargs_description(spec: MetricSpec) -> str:
    """The module's argument docs (Args, Returns, Examples), generated from the spec's declarations."""
    def item(name: str, kind: str, doc: str) -> str:
        return textwrap.fill(f"{name} ({kind}): {doc}", width=110, initial_indent="    ",
                             subsequent_indent="        ")

    text_kind = "`list` of `str` or of lists of sentences" if spec.documents else "`list` of `str`"
    lines = ["Args:", item("predictions", text_kind, "Hypotheses, one per segment."),
             item("references", f"{text_kind}, or `list` of lists", "One reference per segment, or a non-empty "
                  "list per segment (ragged lists allowed).")]
    for name in spec.extra_inputs:
        lines.append(item(name, "`list` of `list` of `float`", "Shaped like `references`; a compute argument, or "
                          "a column added batch by batch with the configuration that declares it "
                          f"({', '.join(c for c, cols in configurations(spec).items() if name in cols)})."))
    for f in spec.options:
        if f.info.cli or f.info.runtime:
            lines.append(item(f.name, f"{type_text(f.hint)}; default {f.default!r}", f.info.doc))
    lines += ["Returns:", item("score", "`float`", "the corpus score (mean of `scores`)" if spec.corpus_from_segments
                               else "the corpus score, from the summed statistics"),
              item("scores", "`list` of `float`", spec.scores_doc + ".")]
    lines += [item(o.name, o.type, o.doc) for o in spec.outputs]
    if spec.has_plan:
        lines.append(item("per_reference", "`list` of `list` of `float`", "only with several references per "
                          "segment: the score against each reference."))
    lines.append(item("signature", "`str`", "the reproducibility signature; report it with the score."))
    if spec.module_examples.strip():
        lines += ["Examples:", spec.module_examples.strip("\n")]
    return "\n" + "\n".join(lines) + "\n"


_CLASSES: dict[str, type] = {}

CORPUS = "corpus"


def corpus_config(name: str) -> str:
    """The scalar-only twin of configuration `name`: "corpus" for "default", "<name>-corpus" otherwise."""
    return CORPUS if name == "default" else f"{name}-{CORPUS}"


def configurations(spec: MetricSpec) -> dict[str, tuple[str, ...]]:
    """Every evaluate configuration of `spec`: its declared ones (name -> extra input columns) and, for each,
    a scalar-only twin (:func:`corpus_config`) whose ``compute`` returns only the numeric corpus-level outputs,
    as evaluate's bootstrap (``evaluator(...).compute(strategy="bootstrap")``) resamples every key it gets."""
    return {**spec.configs, **{corpus_config(name): cols for name, cols in spec.configs.items()}}


def scalar_outputs(result: dict[str, Any]) -> dict[str, Any]:
    """The float scalars of a result (``score`` and corpus-level values such as ΔBLEU's ``bp``; no counts, lists
    or signature: resampling a count gives a degenerate interval)."""
    return {k: v for k, v in result.items()
            if isinstance(v, float)}


def class_name(slug: str) -> str:
    """The class name whose `evaluate` module name (``camelcase_to_snakecase``) is the slug."""
    return "".join(part[:1].upper() + part[1:] for part in slug.split("_"))


def module_class(metric: str | MetricSpec) -> type:
    """The `evaluate.Metric` subclass of a registered metric (one per spec; the shim subclasses it)."""
    spec = registry.get(metric)
    if spec.slug in _CLASSES and _CLASSES[spec.slug].__movers_spec__ is spec:  # type: ignore[attr-defined]
        return _CLASSES[spec.slug]
    function = registry.function(spec)
    description = " ".join(spec.summary.split())
    inputs_description = kwargs_description(spec)

    class Base(MoversMetric):
        __doc__ = f"{description}\n{inputs_description}"
        __movers_spec__ = spec

        def _info(self) -> evaluate.MetricInfo:
            configs = configurations(spec)
            if self.config_name not in configs:
                raise ValueError(f"{spec.slug}: unknown configuration {self.config_name!r}; choose one of "
                                 f"{list(configs)}.")
            return evaluate.MetricInfo(
                description=description, citation=spec.citation, inputs_description=inputs_description,
                features=text_features(segmented=spec.documents, weights=configs[self.config_name]),
                codebase_urls=list(spec.codebase_urls), reference_urls=list(spec.reference_urls))

        def _compute(self, predictions: Any, references: Any, **options: Any) -> dict[str, Any]:
            options = self._movers_cache_options(spec, options)
            result = function(predictions, references, **options).to_dict()
            if self.config_name == CORPUS or self.config_name.endswith(f"-{CORPUS}"):
                self.last_signature = result["signature"]  # the scalars' signature (a string is not resampled)
                return scalar_outputs(result)
            return result

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            cls.__doc__ = cls.__doc__ or Base.__doc__  # the shim's class shows the generated docs

    Base._compute.__signature__ = signature_of(spec, self_param=True)  # type: ignore[attr-defined]
    Base.__name__ = Base.__qualname__ = f"{class_name(spec.slug)}Module"
    base = Base
    _CLASSES[spec.slug] = base
    return base


def instance(metric: str | MetricSpec, **kwargs: Any) -> evaluate.Metric:
    """A module object of a registered metric without a module folder (``movers.load`` of a run-time metric)."""
    spec = registry.get(metric)
    cls = type(class_name(spec.slug), (module_class(spec),), {"__module__": __name__})
    return cls(**kwargs)
evaluate_module = module_class
