"""Input checks shared by every metric: one place, one message format.

Messages follow ``"<metric>: `<arg>` must be <expectation>, got <actual>."`` so that a user can tell
which argument of which metric was wrong, and at which position.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = [
    "check_predictions",
    "check_references",
    "check_pairs",
    "check_choice",
    "check_number",
    "normalise_references",
]


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_predictions(metric: str, predictions: Any, *, allow_empty_text: bool = False) -> list[str]:
    """Validate a list of hypothesis strings and return it as a list."""
    return _check_texts(metric, "predictions", predictions, allow_empty_text=allow_empty_text)


def _check_texts(metric: str, arg: str, texts: Any, *, allow_empty_text: bool) -> list[str]:
    if texts is None:
        raise TypeError(f"{metric}: `{arg}` must be a list of strings, got None.")
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{metric}: `{arg}` must be a list of strings, got a single {type(texts).__name__}; "
                        f"wrap it in a list.")
    if not isinstance(texts, Sequence) and not hasattr(texts, "__iter__"):
        raise TypeError(f"{metric}: `{arg}` must be a list of strings, got {type(texts).__name__}.")
    texts = list(texts)
    if not texts:
        raise ValueError(f"{metric}: `{arg}` must be a non-empty list of strings, got an empty list.")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{metric}: `{arg}[{i}]` must be a string, got {type(text).__name__} "
                            f"{_describe(text)}.")
        if not allow_empty_text and not text.strip():
            raise ValueError(f"{metric}: `{arg}[{i}]` must be a non-empty text, got {_describe(text)}; "
                             f"empty texts have no tokens to transport.")
    return texts


def normalise_references(metric: str, references: Any, n: int, *, allow_empty_text: bool = False,
                         arg: str = "references") -> list[list[str]]:
    """Return references as one non-empty list of strings per prediction (ragged lists allowed).

    A flat list of strings means one reference per prediction (evaluate's convention).
    """
    if references is None:
        raise TypeError(f"{metric}: `{arg}` must be a list of strings or of lists of strings, got None.")
    if isinstance(references, (str, bytes)):
        raise TypeError(f"{metric}: `{arg}` must be a list, got a single {type(references).__name__}.")
    references = list(references)
    if len(references) != n:
        raise ValueError(f"{metric}: `predictions` and `{arg}` must have the same length, "
                         f"got {n} and {len(references)}.")
    out: list[list[str]] = []
    for i, refs in enumerate(references):
        if isinstance(refs, str):
            refs = [refs]
        elif refs is None or isinstance(refs, bytes) or not hasattr(refs, "__iter__"):
            raise TypeError(f"{metric}: `{arg}[{i}]` must be a string or a list of strings, "
                            f"got {type(refs).__name__} {_describe(refs)}.")
        refs = list(refs)
        if not refs:
            raise ValueError(f"{metric}: `{arg}[{i}]` must hold at least one reference, got an empty list.")
        for j, ref in enumerate(refs):
            if not isinstance(ref, str):
                raise TypeError(f"{metric}: `{arg}[{i}][{j}]` must be a string, got {type(ref).__name__} "
                                f"{_describe(ref)}.")
            if not allow_empty_text and not ref.strip():
                raise ValueError(f"{metric}: `{arg}[{i}][{j}]` must be a non-empty text, got {_describe(ref)}.")
        out.append(refs)
    return out


def check_references(metric: str, references: Any, n: int, **kwargs: Any) -> list[list[str]]:
    """Alias of :func:`normalise_references` kept for symmetry with :func:`check_predictions`."""
    return normalise_references(metric, references, n, **kwargs)


def check_pairs(metric: str, predictions: Any, references: Any, *,
                allow_empty_text: bool = False) -> tuple[list[str], list[list[str]]]:
    """Validate `predictions` and `references` together; references come back as lists."""
    preds = check_predictions(metric, predictions, allow_empty_text=allow_empty_text)
    refs = normalise_references(metric, references, len(preds), allow_empty_text=allow_empty_text)
    return preds, refs


def check_choice(metric: str, arg: str, value: Any, choices: Sequence[Any]) -> Any:
    """Raise unless `value` is one of `choices`; the message lists them."""
    if value not in choices:
        raise ValueError(f"{metric}: `{arg}` must be one of {list(choices)}, got {_describe(value)}.")
    return value


def check_number(metric: str, arg: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, integer: bool = False) -> Any:
    """Raise unless `value` is a finite real (optionally an int) within [low, high] (or (low, high])."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise TypeError(f"{metric}: `{arg}` must be {kind}, got {type(value).__name__} {_describe(value)}.")
    if not math.isfinite(value):
        raise ValueError(f"{metric}: `{arg}` must be finite, got {value}.")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{metric}: `{arg}` must be {'>' if low_open else '>='} {low}, got {value}.")
    if high is not None and value > high:
        raise ValueError(f"{metric}: `{arg}` must be <= {high}, got {value}.")
    return value
