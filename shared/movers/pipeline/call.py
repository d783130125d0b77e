"""The front of every metric call: options, inputs, empty predictions, baseline rescaling, the signature.

:func:`score` is what ``movers.<metric>(...)`` runs for every metric:

1. the options dataclass is built from the keyword arguments (an unknown one is a ``TypeError`` naming
   it and listing the options), the front's own options are checked;
2. the inputs are validated once (:meth:`~movers.core.spec.MetricSpec.inputs`), then every other option,
   cross-option rules and presets (:meth:`~movers.core.spec.MetricSpec.resolve`);
3. empty or whitespace-only predictions (``empty_predictions="worst"``, the default) are set aside and
   get the metric's worst value (:meth:`~movers.core.spec.MetricSpec.worst`), with a warning; the
   others are scored by :meth:`~movers.core.spec.MetricSpec.run` exactly as in a call without them;
4. ``baseline=`` (similarity metrics) rescales every score as (s - b) / (1 - b), with b fitted on the
   call's own texts (``"fit"``: each prediction against another segment's references, a random cyclic
   order, numpy ``default_rng(BASELINE_SEED)``), shipped for the default settings (``"bundled"``,
   ``data/baselines.json``) or given as a number;
5. the signature gains ``empty:`` and ``baseline:`` fields.

:class:`MetricFunction` is the callable ``movers.<metric>``: its signature and docstring are generated
from the spec, so they cannot drift from it.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any, Literal

import numpy as np

from ..core import progress
from ..core.options import Widget, check_options, option, type_text
from ..core.result import Scores
from ..core.scope import Scope, current_scope
from ..core.signature import Signature, format_float, nrefs_label
from ..core.spec import Inputs, MetricSpec
from ..core.validation import check_list
from ..text.languages import DEFAULT_LANG, language, language_code, languages
from ..text.tokens import call_tokens
from .passes import check_split

__all__ = ["MetricFunction", "score", "make_options", "checked_options", "settings_of", "EMPTY_CHOICES",
           "BASELINE_SEED", "bundled_baselines", "unicode_option", "lang_option", "normalised",
           "empty_predictions_option", "baseline_option", "is_empty", "EmptyPredictions"]

EmptyPredictions = Literal["worst", "error"]
EMPTY_CHOICES = ("worst", "error")
BASELINE_SEED = 0
"""Seed of the random pairing for ``baseline="fit"`` (numpy ``default_rng``)."""

_FRONT = ("empty_predictions", "baseline")
_NOT_SETTINGS = ("nrefs", "agg", "empty", "baseline")
"""Signature fields that do not describe the scoring (data shape, this module's options)."""


def unicode_option() -> Any:
    """The ``unicode`` field of every metric: the Unicode rule for its texts."""
    return option("nfc", """"nfc" (default): texts are put in Unicode normal form C before tokenisation and
        lookup, so decomposed accents (NFD) score as composed ones; "none": texts as given (the originals).""")


def lang_option() -> Any:
    """The ``lang`` field of every metric: the language of its texts (:mod:`movers.text.languages`)."""
    return option(DEFAULT_LANG, """The language of the texts, an ISO 639-1 code: "en" (default) or any language
        spaCy ships rules for ("de", "fr", "ru", "zh", "ja", ...), or a language tag read by its language ("de-DE",
        "pt_BR" and "zh-Hans" are "de", "pt" and "zh"). It chooses the default encoder (the bundled
        MiniLM for English, a published multilingual one otherwise), the sentence, word, punctuation and stop-word
        rules, and ΔBLEU's tokenizer; named in the signature (lang:de) when it is not English.""",
                  widget=Widget("dropdown", languages()))


def normalised(inputs: Inputs, form: str) -> Inputs:
    """`inputs` with every text (and every sentence of a document) in Unicode normal form `form` ("nfc")."""
    if form == "none":
        return inputs
    name: Literal["NFC"] = "NFC"

    def norm(text: Any) -> Any:
        if isinstance(text, str):
            return text if unicodedata.is_normalized(name, text) else unicodedata.normalize(name, text)
        return tuple(norm(s) for s in text)

    return Inputs([norm(p) for p in inputs.predictions], [[norm(r) for r in group] for group in inputs.references],
                  inputs.extra, inputs.segmented)


def empty_predictions_option() -> Any:
    """The ``empty_predictions`` field every metric with embeddings declares."""
    return option("worst", """"worst" (default): an empty or whitespace-only prediction gets the metric's worst
        value, with a warning; "error": rejected. Empty references are always an error.""")


def baseline_option() -> Any:
    """The ``baseline`` field of the similarity metrics (maximum 1)."""
    return option(None, """None (default); "fit" (b from random pairs of this call's own texts), "bundled"
        (shipped for the default settings) or a number b < 1: scores become (s - b) / (1 - b), so that
        unrelated texts score about 0.""", widget=False)


# ----------------------------------------------------------------------------------------- options

def make_options(spec: MetricSpec, options: dict[str, Any], name: str | None = None) -> Any:
    """The spec's options dataclass from keyword arguments (pinned options added); unknown keys raise."""
    allowed = {f.name for f in spec.options}
    unknown = [key for key in options if key not in allowed]
    if "baseline" in unknown and not spec.rescalable:
        raise TypeError(f"{name or spec.slug}: `baseline` is only for the similarity metrics (maximum 1); "
                        f"{spec.slug} has no such option.")
    if unknown:
        raise TypeError(f"{name or spec.slug}() got an unexpected keyword argument {unknown[0]!r}; its options "
                        f"are {sorted(allowed)}.")
    o = spec.Options(**{**options, **spec.fixed})
    lang = getattr(o, "lang", None)
    if isinstance(lang, str):  # a tag ("de-DE") is its language's code from here on: the rules and the signature
        try:
            code = language_code(lang)
        except ValueError:
            return o  # refused by the front's checks, naming the metric
        if code != lang:
            o = dataclasses.replace(o, lang=code)
    return o


def checked_options(spec: MetricSpec, options: dict[str, Any]) -> Any:
    """Every check a call makes of its options, without inputs, and the options resolved (presets applied).
    Objects that keep options for later calls (torchmetrics metrics, rewards) run it when they are made, so
    a bad option fails there, with the message a call would give, not at the first ``compute``."""
    o = make_options(spec, options)
    name = spec.name(o)
    _check_front(name, spec, o)
    return _checked(name, spec, o)


def _checked(name: str, spec: MetricSpec, o: Any) -> Any:
    """The options' declared checks, the metric's own rules, the cache's type; then presets resolved."""
    check_options(name, o)
    spec.check(o)
    if hasattr(o, "cache"):  # embedding metrics only: the cache module imports torch, which ΔBLEU never needs
        from ..text.embedding_cache import check_cache

        check_cache(name, o.cache)
    o = spec.resolve(o)
    if getattr(o, "baseline", None) is not None and not spec.can_rescale(o):
        raise ValueError(f"{name}: `baseline` rescales similarities with maximum 1; these options give "
                         f"distances.")
    return o


def _check_front(name: str, spec: MetricSpec, o: Any) -> None:
    present = [key for key in _FRONT if hasattr(o, key)]
    check_options(name, o, present)
    if hasattr(o, "lang"):
        language(o.lang, name)
    baseline = getattr(o, "baseline", None)
    if baseline is None or baseline in ("fit", "bundled"):
        return
    if isinstance(baseline, str):
        raise ValueError(f"{name}: `baseline` must be None, 'fit', 'bundled' or a number < 1, got {baseline!r}.")
    if isinstance(baseline, bool) or not isinstance(baseline, (int, float)) or not math.isfinite(baseline) \
            or baseline >= 1:
        raise ValueError(f"{name}: `baseline` must be None, 'fit', 'bundled' or a finite number < 1, "
                         f"got {baseline!r}.")


def is_empty(prediction: Any) -> bool:
    """Empty text, or (SMS's pre-segmented documents) a list of sentences that are all empty."""
    if isinstance(prediction, str):
        return not prediction.strip()
    if isinstance(prediction, (list, tuple)) and all(isinstance(s, str) for s in prediction):
        return not any(s.strip() for s in prediction)
    return False


def _materialise(texts: Any) -> Any:
    """Read a one-shot iterator (a generator) into a list; leave every other value to the checks
    (a dict or a set must be refused there, not turned into its keys here)."""
    return list(texts) if isinstance(texts, Iterator) else texts


# -------------------------------------------------------------------------------------------- score

def score(spec: MetricSpec, predictions: Any, references: Any, extra: dict[str, Any] | None = None,
          **options: Any) -> Scores:
    """Score with `spec`: the steps of this module's docstring. ``movers.<metric>`` calls it."""
    predictions, references = _materialise(predictions), _materialise(references)
    scope = current_scope()
    # a process group's ranks agree on the call first; a sharded scope tells every rank of a failure inside, a bad
    # option's included
    with scope.call(spec, options, (predictions, references, extra)):
        o = make_options(spec, options)
        return scope.finish(spec, o, _score(spec, predictions, references, extra, o, scope))


def _score(spec: MetricSpec, predictions: Any, references: Any, extra: dict[str, Any] | None, o: Any,
           scope: Scope) -> Scores:
    name = spec.name(o)
    _check_front(name, spec, o)
    if scope.partial:
        check_split(name, o, part="rank")
    verbose = bool(getattr(o, "verbose", False))
    # one progress bar for the call; each distinct text tokenised once (checks, statistics, encoder: the same ids)
    with progress.call_progress(name, _pair_count(spec, name, predictions, references, o) if verbose else None,
                                verbose), call_tokens():
        check_list(name, "predictions", predictions, "a list of strings")
        worst = getattr(o, "empty_predictions", None) == "worst"
        inputs = spec.inputs(name, predictions, references, extra or {}, allow_empty_predictions=worst)
        o = _checked(name, spec, o)
        inputs = normalised(inputs, getattr(o, "unicode", "none"))
        empty = [i for i, p in enumerate(inputs.predictions) if is_empty(p)] if worst else []
        result = _score_without(spec, o, name, inputs, empty) if empty else spec.run(o, inputs)
        signature = result.signature
        if empty:
            signature = signature.set("nrefs", nrefs_label(inputs.references))
        if hasattr(o, "unicode"):
            signature = signature.add(("unicode", o.unicode))
        if getattr(o, "lang", DEFAULT_LANG) != DEFAULT_LANG:
            signature = signature.add(("lang", o.lang))
        if hasattr(o, "empty_predictions"):
            signature = signature.add(("empty", o.empty_predictions))
        if hasattr(o, "baseline"):
            result, label = _rescale(spec, o, name, dataclasses.replace(result, signature=signature), inputs)
            signature = signature.add(("baseline", label))
        return dataclasses.replace(result, signature=signature)


def _pair_count(spec: MetricSpec, name: str, predictions: Any, references: Any, o: Any) -> int | None:
    """Prediction-reference pairs the call will transport (the progress bar's total); None if unknown."""
    try:
        inputs = spec.inputs(name, predictions, references, {}, allow_empty_predictions=True)
    except (TypeError, ValueError):
        return None  # reported by the call itself
    n = sum(len(group) for group in inputs.references)
    return 2 * n if getattr(o, "baseline", None) == "fit" else n


def _score_without(spec: MetricSpec, o: Any, name: str, inputs: Inputs, empty: list[int]) -> Scores:
    """Score the non-empty predictions alone; put the worst values at the empty positions."""
    warnings.warn(f"{name}: predictions {empty[:10]}{'...' if len(empty) > 10 else ''} are empty; scored as the "
                  f"metric's worst value (empty_predictions='worst'; 'error' rejects them).",
                  RuntimeWarning, stacklevel=4)
    skip = set(empty)
    keep = [i for i in range(len(inputs)) if i not in skip]
    refs = inputs.references
    if keep:
        part = _run_renumbered(spec, o, inputs.select(keep), keep)
    else:  # nothing to score: one call on a stand-in pair gives the signature (nrefs restored by the caller)
        part = spec.run(o, Inputs([refs[0][0]], [refs[0]], {}, inputs.segmented))
    worst = spec.worst(o)
    position = {i: k for k, i in enumerate(keep)}
    per_segment = set(spec.per_segment_outputs())

    def merged(values: Sequence[Any], key: str) -> list[Any]:
        def fill(i: int) -> Any:  # outputs without a worst value (e.g. return_plans' alignments) are None
            return [worst["scores"]] * len(refs[i]) if key == "per_reference" else worst.get(key)
        return [values[position[i]] if i in position else fill(i) for i in range(len(inputs))]

    segments: dict[str, Any] = {"scores": merged(part.scores if keep else [], "scores")}
    corpus_keys = []
    for key, value in part.extra.items():
        if key in per_segment:
            segments[key] = merged(value if keep else [], key)
        else:
            corpus_keys.append(key)
    if any(len(r) > 1 for r in refs) and "per_reference" not in segments:
        segments["per_reference"] = merged([[s] for s in part.scores] if keep else [], "per_reference")
    score_value, corpus = spec.corpus(o, segments)
    extra = {key: value for key, value in segments.items() if key != "scores"}
    for key in corpus_keys:
        extra[key] = corpus.get(key, part.extra[key]) if keep else corpus.get(key)
    extra["empty_predictions"] = list(empty)
    return Scores(score=score_value, scores=segments["scores"], signature=part.signature, extra=extra)


_INDEXED = re.compile(r"\b(predictions|references)\[(\d+)\]")
"""A text's place in a message: ``predictions[3]``, ``references[3][1]`` (the first index is the segment's)."""


def _run_renumbered(spec: MetricSpec, o: Any, part: Inputs, keep: list[int]) -> Scores:
    """``spec.run`` on the non-empty segments `part` (segment k is the call's segment ``keep[k]``), its warnings and
    refusals naming each text by its place in the call, not in `part`."""
    def placed(text: str) -> str:
        return _INDEXED.sub(lambda m: f"{m.group(1)}[{keep[int(m.group(2))]}]" if int(m.group(2)) < len(keep)
                            else m.group(0), text)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = spec.run(o, part)
        except (TypeError, ValueError) as e:
            if type(e) in (TypeError, ValueError) and len(e.args) == 1 and isinstance(e.args[0], str):
                raise type(e)(placed(e.args[0])) from None
            raise
    for w in caught:
        warnings.warn(placed(str(w.message)), w.category, stacklevel=5)
    return result


# ----------------------------------------------------------------------------------------- baseline

def settings_of(signature: Signature) -> str:
    """The fields of a signature that define the scoring (no data shape, no versions, no option of this
    module): what a shipped baseline is matched against. Tokenizer and sentence-splitter versions (SMS's
    ``tok:spacy-en@3.8.18``) are dropped too: a mean over 1,000 pairs does not move with a tokenizer release."""
    return signature.settings(exclude=_NOT_SETTINGS, strip_versions=("tok", "seg"))


def bundled_baselines() -> dict[str, dict[str, Any]]:
    """``data/baselines.json``: per metric, the baseline and the settings it was computed with."""
    text = resources.files("movers").joinpath("data/baselines.json").read_text(encoding="utf-8")
    return dict(json.loads(text)["baselines"])


def _rescale(spec: MetricSpec, o: Any, name: str, result: Scores, inputs: Inputs) -> tuple[Scores, str]:
    baseline = o.baseline
    if baseline is None:
        return result, "none"
    if baseline == "fit":
        b, label = _fit(spec, o, name, inputs)
    elif baseline == "bundled":
        entry = bundled_baselines().get(spec.slug)
        mine = settings_of(result.signature)
        if entry is None:
            raise ValueError(f"{name}: no baseline is bundled for {spec.slug} (bundled: "
                             f"{', '.join(sorted(bundled_baselines()))}); pass baseline='fit' (fitted on your "
                             f"texts) or a number.")
        if entry["settings"] != mine:
            raise ValueError(f"{name}: `baseline='bundled'` was computed with {entry['settings']!r}, "
                             f"but this call uses {mine!r}; pass baseline='fit' (fitted on your texts) or a number.")
        b, label = float(entry["baseline"]), f"bundled[{entry['corpus_id']},b={format_float(entry['baseline'])}]"
    else:
        b, label = float(baseline), format_float(baseline)
    scores = [(s - b) / (1.0 - b) for s in result.scores]
    extra = dict(result.extra, raw_scores=list(result.scores), raw_score=result.score, baseline=b)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=result.signature, extra=extra), label


def _fit(spec: MetricSpec, o: Any, name: str, inputs: Inputs) -> tuple[float, str]:
    """Mean score of each (non-empty) prediction against the references of another segment (a random
    cyclic order, numpy ``default_rng(BASELINE_SEED)``, so no segment meets its own references)."""
    keep = [i for i, p in enumerate(inputs.predictions) if not is_empty(p)]
    if len(keep) < 2:
        raise ValueError(f"{name}: `baseline='fit'` pairs predictions with other segments' references and "
                         f"needs at least 2 non-empty predictions, got {len(keep)}.")
    order = [keep[k] for k in np.random.default_rng(BASELINE_SEED).permutation(len(keep))]
    partner = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
    shuffled = inputs.select(keep, references=[inputs.references[partner[i]] for i in keep])
    result = spec.run(o, shuffled)
    b = float(np.mean(result.scores))
    if not b < 1:
        raise ValueError(f"{name}: the fitted baseline is {b}; rescaling needs a baseline below 1.")
    return b, f"fit[n={len(keep)},seed={BASELINE_SEED},b={format_float(b)}]"


# ------------------------------------------------------------------------------------ the function

class MetricFunction:
    """``movers.<slug>``: a metric as a function of (predictions, references, **options) -> Scores.

    Its ``__signature__`` and ``__doc__`` are generated from the spec's options declaration (so
    ``inspect.signature`` and ``help`` show every option with its default and documentation); unknown
    keyword arguments raise a ``TypeError`` naming them. Static type checkers see ``**options: Any``.
    """

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.__name__ = self.__qualname__ = spec.slug
        self.__module__ = "movers"
        self.__doc__ = _docstring(spec)

    def __call__(self, predictions: Any, references: Any, *args: Any, **options: Any) -> Scores:
        extra = dict(zip(self.spec.extra_inputs, args, strict=False))
        if len(args) > len(self.spec.extra_inputs):
            raise TypeError(f"{self.spec.slug}() takes {2 + len(self.spec.extra_inputs)} positional arguments "
                            f"but {2 + len(args)} were given; options are keyword-only.")
        for key in self.spec.extra_inputs:
            if key in options:
                extra[key] = options.pop(key)
        return score(self.spec, predictions, references, extra, **options)

    @property
    def __signature__(self) -> inspect.Signature:
        return signature_of(self.spec)

    def __repr__(self) -> str:
        return f"<movers metric {self.spec.slug}>"


def signature_of(spec: MetricSpec, *, self_param: bool = False) -> inspect.Signature:
    """(predictions, references, [extra inputs], *, options...) as an ``inspect.Signature``."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", kind)] if self_param else []
    params += [inspect.Parameter("predictions", kind), inspect.Parameter("references", kind)]
    params += [inspect.Parameter(name, kind, default=None) for name in spec.extra_inputs]
    params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.hint)
               for f in spec.options]
    return inspect.Signature(params, return_annotation=Scores)


def _docstring(spec: MetricSpec) -> str:
    lines = [" ".join(spec.summary.split()), "", "Args:",
             "    predictions: Hypotheses, one per segment" + (" (texts, or documents as lists of sentences)."
                                                              if spec.documents else "."),
             "    references: One reference per segment (str) or a non-empty list per segment (ragged allowed)."]
    for f in spec.options:
        lines.append(f"    {f.name} ({type_text(f.hint)}, default {f.default!r}): {f.info.doc}")
    lines += ["Returns:", "    movers.Scores: ``score``, ``scores`` (" + spec.scores_doc + "), ``signature`` and "
              "in ``extra``: " + ", ".join(f"``{o.name}``" for o in spec.outputs) + "."]
    return "\n".join(lines)
