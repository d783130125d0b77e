"""Options every embedding metric shares on top of its formula: empty predictions and baseline rescaling.

* ``empty_predictions``: what an empty or whitespace-only *prediction* scores. ``"worst"`` (default)
  gives it the metric's worst value (:func:`worst_values`) with a warning naming the positions and
  scores the other segments as if it were absent; ``"error"`` rejects it. Empty references are always
  an error. Recorded in the signature as ``empty:worst`` / ``empty:error``.
* ``baseline`` (similarity metrics): rescale ``s -> (s - b) / (1 - b)`` (bert-score's baseline
  rescaling; 1 is the metric's maximum), so that an unrelated pair scores about 0 and the numbers
  spread out. ``b`` is fitted on the call's own texts by random pairing (``"fit"``), shipped for the
  bundled encoder at default settings (``"bundled"``, see ``data/baselines.json``), or given as a
  number. Recorded in the signature as ``baseline:none`` / ``baseline:fit[...]`` / ... .

Both are applied around each metric function by :func:`with_scoring_options`, so that the formula
functions stay as they are.
"""
from __future__ import annotations

import functools
import inspect
import json
import math
import re
import warnings
from importlib import resources
from collections.abc import Iterator
from typing import Any, Callable, Literal, Sequence

import numpy as np

from . import progress
from ._validation import _check_list, check_choice, check_documents, normalise_references
from .result import Scores
from .signature import format_float, nrefs_label

__all__ = ["with_scoring_options", "worst_values", "EMPTY_CHOICES", "BASELINE_SEED", "bundled_baselines",
           "EmptyPredictions"]

EmptyPredictions = Literal["worst", "error"]
EMPTY_CHOICES = ("worst", "error")
BASELINE_SEED = 0
"""Seed of the random pairing for ``baseline="fit"`` (numpy ``default_rng``)."""

RESCALABLE = ("moverscore", "sms", "s_wms", "twmd")
"""Similarity metrics with maximum 1 (Lazy-EMD's scores are distances; ΔBLEU is a corpus n-gram score)."""

# Signature fields that do not describe the scoring itself (data shape, versions, these options).
_NOT_SETTINGS = {"nrefs", "agg", "empty", "baseline", "v", "tf", "torch", "pot", "nltk", "sacrebleu"}


def worst_values(metric: str, options: dict[str, Any]) -> dict[str, Any]:
    """The value of every per-segment output for an empty prediction: the metric's worst value.

    MoverScore: the largest ground cost between unit vectors (all mass moved at cost 2 for Euclidean,
    4 squared Euclidean, 2 for 1 - cos) through the transform, e.g. 1 - 2 = -1 for the default preset 1.0.3, 1/(1+2) = 1/3 for github; SMS
    and S+WMS: distance inf, score exp(-inf) = 0; TWMD: precision, recall and F -1 (the lowest cosine
    similarity); Lazy-EMD: distance 2 (all mass moved at the largest cost 1 - cos = 2), similarity -1.
    """
    if metric == "moverscore":
        from .metrics.moverscore import _COST_MAX, _TRANSFORMS, DEFAULT_PRESET, PRESETS

        preset = PRESETS.get(options.get("preset") or DEFAULT_PRESET, PRESETS[DEFAULT_PRESET])
        cost = options.get("cost") or preset.cost
        transform = options.get("transform") or preset.transform
        d = _COST_MAX[cost]
        score = _TRANSFORMS[transform](d)
        return {"scores": score, "distances": d}
    if metric in ("sms", "s_wms"):
        return {"scores": 0.0, "distances": math.inf}
    if metric == "twmd":
        return {"scores": -1.0, "precision": -1.0, "recall": -1.0, "f1": -1.0}
    if metric == "lazy_emd":
        return {"scores": 2.0, "similarities": -1.0, "converged": True, "iterations": 0}
    raise ValueError(f"worst_values: no worst value defined for {metric!r}.")


def _is_empty(prediction: Any) -> bool:
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


def _pair_count(metric: str, predictions: Any, references: Any, baseline: Any) -> int | None:
    """Prediction-reference pairs the call will transport (the progress bar's total); None if unknown."""
    try:
        n = sum(len(group) for group in _reference_groups(metric, list(predictions), references))
    except (TypeError, ValueError):
        return None  # the metric's own validation reports the problem
    return 2 * n if baseline == "fit" else n


def _reference_groups(metric: str, preds: list, references: Any) -> list[list[Any]]:
    """References as one list per segment, validated by the metric's own rules (empty ones are an error)."""
    segmented = bool(preds) and isinstance(preds[0], (list, tuple))
    stand_in = [["x"] if segmented else "x"] * len(preds)  # only the references are checked here
    if metric in ("sms", "s_wms"):
        return check_documents(metric, stand_in, references)[1]
    return normalise_references(metric, references, len(preds))


def _add_fields(signature: str, fields: list[tuple[str, str]], nrefs: Any) -> str:
    """Insert fields before the version tail (``|v:``); restore the full call's ``nrefs`` when given."""
    if nrefs is not None:
        signature = re.sub(r"\|nrefs:[^|]*", f"|nrefs:{nrefs}", signature, count=1)
    text = "".join(f"|{k}:{v}" for k, v in fields)
    head, sep, tail = signature.partition("|v:")
    return f"{head}{text}{sep}{tail}" if sep else signature + text


def _settings(signature: str) -> str:
    """The signature's fields that define the scoring (no data shape, no versions, no options of this module).

    Tokenizer and sentence-splitter versions (SMS's ``tok:spacy-en@3.8.18``, ``seg:punkt-en@2.2.1``) are
    dropped too: the baseline is a mean over 1,000 pairs, which a tokenizer release does not move.
    """
    name, *fields = signature.split("|")
    kept = []
    for field in fields:
        key = field.split(":", 1)[0]
        if key in _NOT_SETTINGS:
            continue
        kept.append(field.split("@", 1)[0] if key in ("tok", "seg") else field)
    return "|".join([name] + kept)


def bundled_baselines() -> dict[str, dict[str, Any]]:
    """``data/baselines.json``: per metric, the baseline and the settings it was computed with."""
    text = resources.files("movers").joinpath("data/baselines.json").read_text(encoding="utf-8")
    return json.loads(text)["baselines"]


def with_scoring_options(metric: str) -> Callable[[Callable[..., Scores]], Callable[..., Scores]]:
    """Decorate a metric function with ``empty_predictions=`` (and ``baseline=`` for similarity metrics)."""
    rescalable = metric in RESCALABLE

    def decorate(function: Callable[..., Scores]) -> Callable[..., Scores]:
        @functools.wraps(function)
        def wrapper(predictions: Any, references: Any, *, empty_predictions: EmptyPredictions = "worst",
                    baseline: None | float | str = None, **options: Any) -> Scores:
            predictions, references = _materialise(predictions), _materialise(references)  # generators: read once
            verbose = bool(options.get("verbose", False))
            total = _pair_count(metric, predictions, references, baseline) if verbose else None
            with progress.call_progress(metric, total, verbose):
                return _call(predictions, references, empty_predictions, baseline, options)

        def _call(predictions: Any, references: Any, empty_predictions: str, baseline: Any,
                  options: dict[str, Any]) -> Scores:
            check_choice(metric, "empty_predictions", empty_predictions, list(EMPTY_CHOICES))
            if baseline is not None and not rescalable:
                raise TypeError(f"{metric}: `baseline` is only for the similarity metrics {list(RESCALABLE)}.")
            _check_baseline(metric, baseline, options)
            # movers' own container check first: a dict's keys, a set or a bare string are never scored
            preds = _check_list(metric, "predictions", predictions, "a list of strings")
            empty = [] if empty_predictions == "error" else [i for i, p in enumerate(preds) if _is_empty(p)]
            if not empty:
                result = function(predictions, references, **options)
                refs, nrefs = None, None
            else:
                result, refs = _score_without(metric, function, preds, references, empty, options)
                nrefs = nrefs_label(refs)
            fields = [("empty", empty_predictions)]
            if rescalable:
                if baseline == "fit" and refs is None:
                    refs = _reference_groups(metric, preds, references)
                result, label = _rescale(metric, function, result, baseline, preds, refs, options)
                fields.append(("baseline", label))
            signature = _add_fields(result.signature, fields, nrefs)
            return Scores(score=result.score, scores=result.scores, signature=signature, extra=result.extra)

        base = inspect.signature(function)
        extra_params = [inspect.Parameter("empty_predictions", inspect.Parameter.KEYWORD_ONLY, default="worst",
                                          annotation="Literal['worst', 'error']")]
        if rescalable:
            extra_params.append(inspect.Parameter("baseline", inspect.Parameter.KEYWORD_ONLY, default=None,
                                                  annotation="float | Literal['fit', 'bundled'] | None"))
        wrapper.__signature__ = base.replace(parameters=[*base.parameters.values(), *extra_params])  # type: ignore[attr-defined]
        wrapper.__wrapped_formula__ = function  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _score_without(metric: str, function: Callable[..., Scores], preds: list, references: Any,
                   empty: list[int], options: dict[str, Any]) -> tuple[Scores, list[list[str]]]:
    """Score the non-empty predictions alone; put the worst values at the empty positions."""
    refs = _reference_groups(metric, preds, references)  # empty references stay an error
    warnings.warn(f"{metric}: predictions {empty[:10]}{'...' if len(empty) > 10 else ''} are empty; scored as the "
                  f"metric's worst value (empty_predictions='worst'; 'error' rejects them).",
                  RuntimeWarning, stacklevel=3)
    keep = [i for i in range(len(preds)) if i not in set(empty)]
    if keep:
        part = function([preds[i] for i in keep], [refs[i] for i in keep], **options)
    else:  # nothing to score: one call on a stand-in pair gives the signature (nrefs restored later)
        part = function([refs[0][0]], [refs[0]], **options)
    n = len(preds)
    worst = [worst_values(metric, options)] * n
    position = {i: k for k, i in enumerate(keep)}

    def merged(values: Sequence[Any], key: str) -> list[Any]:
        # per-segment outputs without a worst value (e.g. return_plans' alignments) are None there
        fill = [[w["scores"]] * len(refs[i]) if key == "per_reference" else w.get(key) for i, w in enumerate(worst)]
        return [values[position[i]] if i in position else fill[i] for i in range(n)]

    scores = merged(part.scores if keep else [], "scores")
    extra: dict[str, Any] = {}
    for key, value in part.extra.items():
        if isinstance(value, (list, tuple)) and len(value) == len(part.scores):  # one entry per segment
            extra[key] = merged(value if keep else [], key)
        elif keep:
            extra[key] = value
    if "similarity" in part.extra and "similarities" in extra:  # Lazy-EMD's mean similarity, over all segments
        extra["similarity"] = float(np.mean(extra["similarities"]))
    if any(len(r) > 1 for r in refs) and "per_reference" not in extra and metric != "twmd":
        extra["per_reference"] = merged([[s] for s in part.scores] if keep else [], "per_reference")
    extra["empty_predictions"] = list(empty)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=part.signature, extra=extra), refs


def _check_baseline(metric: str, baseline: Any, options: dict[str, Any]) -> None:
    if baseline is None or baseline in ("fit", "bundled"):
        return
    if isinstance(baseline, str):
        raise ValueError(f"{metric}: `baseline` must be None, 'fit', 'bundled' or a number < 1, got {baseline!r}.")
    if isinstance(baseline, bool) or not isinstance(baseline, (int, float)) or not math.isfinite(baseline) \
            or baseline >= 1:
        raise ValueError(f"{metric}: `baseline` must be None, 'fit', 'bundled' or a finite number < 1, "
                         f"got {baseline!r}.")
    if metric == "moverscore" and options.get("transform") == "d":
        raise ValueError(f"{metric}: `baseline` rescales similarities; transform='d' gives distances.")


def _rescale(metric: str, function: Callable[..., Scores], result: Scores, baseline: Any, preds: list | None,
             refs: list[list[Any]] | None, options: dict[str, Any]) -> tuple[Scores, str]:
    if baseline is None:
        return result, "none"
    if metric == "moverscore" and options.get("transform") == "d":
        raise ValueError(f"{metric}: `baseline` rescales similarities; transform='d' gives distances.")
    if baseline == "fit":
        b, label = _fit(metric, function, preds or [], refs or [], options)
    elif baseline == "bundled":
        entry = bundled_baselines().get(metric)
        mine = _settings(result.signature)
        if entry is None or entry["settings"] != mine:
            raise ValueError(f"{metric}: `baseline='bundled'` was computed with {entry and entry['settings']!r}, "
                             f"but this call uses {mine!r}; pass baseline='fit' (fitted on your texts) or a number.")
        b, label = float(entry["baseline"]), f"bundled[{entry['corpus_id']},b={format_float(entry['baseline'])}]"
    else:
        b, label = float(baseline), format_float(baseline)
    scores = [(s - b) / (1.0 - b) for s in result.scores]
    extra = dict(result.extra, raw_scores=list(result.scores), raw_score=result.score, baseline=b)
    return Scores(score=float(np.mean(scores)), scores=scores, signature=result.signature, extra=extra), label


def _fit(metric: str, function: Callable[..., Scores], preds: list, refs: list[list[str]],
         options: dict[str, Any]) -> tuple[float, str]:
    """Mean score of each (non-empty) prediction against the references of another segment (a random
    cyclic order, numpy ``default_rng(BASELINE_SEED)``, so no segment meets its own references)."""
    keep = [i for i, p in enumerate(preds) if not _is_empty(p)]
    if len(keep) < 2:
        raise ValueError(f"{metric}: `baseline='fit'` pairs predictions with other segments' references and "
                         f"needs at least 2 non-empty predictions, got {len(keep)}.")
    order = [keep[k] for k in np.random.default_rng(BASELINE_SEED).permutation(len(keep))]
    partner = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
    result = function([preds[i] for i in keep], [refs[partner[i]] for i in keep], **options)
    b = float(np.mean(result.scores))
    if not b < 1:
        raise ValueError(f"{metric}: the fitted baseline is {b}; rescaling needs a baseline below 1.")
    return b, f"fit[n={len(keep)},seed={BASELINE_SEED},b={format_float(b)}]"
