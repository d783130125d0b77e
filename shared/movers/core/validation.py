"""Input checks shared by every metric: one place, one message format.

Messages follow ``"<metric>: `<arg>` must be <expectation>, got <actual>."`` so that a user can tell
which argument of which metric was wrong, and at which position.
"""
from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence, Set
from typing import Any

__all__ = [
    "check_predictions",
    "check_references",
    "check_pairs",
    "check_choice",
    "check_number",
    "normalise_references",
    "check_documents",
    "check_reference_weights",
    "check_text",
    "check_texts",
    "check_list",
    "short_repr",
    "MAX_TEXT_CHARS",
    "max_text_chars",
    "universal",
]


def universal(text: Any) -> Any:
    """``\\r\\n`` and ``\\r`` as ``\\n`` (str or bytes), as Python's text mode reads them."""
    crlf, cr, lf = ("\r\n", "\r", "\n") if isinstance(text, str) else (b"\r\n", b"\r", b"\n")
    return text.replace(crlf, lf).replace(cr, lf)


def short_repr(value: Any) -> str:
    """`value` as ``repr`` shows it, cut to 60 characters (for messages that quote a bad value)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_predictions(metric: str, predictions: Any, *, allow_empty_text: bool = False) -> list[str]:
    """Validate a list of hypothesis strings and return it as a list."""
    return _check_texts(metric, "predictions", predictions, allow_empty_text=allow_empty_text)


def check_texts(metric: str, arg: str, texts: Any) -> list[str]:
    """A non-empty list of valid strings (blank ones allowed), e.g. a corpus to fit a table on."""
    return _check_texts(metric, arg, texts, allow_empty_text=True)


def check_list(metric: str, arg: str, value: Any, expected: str) -> list:
    """`value` as a list when it is an ordered collection (list, tuple, numpy array, ...).

    Rejected with a TypeError: None, a single str/bytes (iterating it would give characters), a mapping
    (iterating it would give its keys) and a set (no order to align with the other argument).
    """
    if value is None:  # "NoneType None" at a position, as for any other wrong element type
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got {'NoneType None' if '[' in arg else 'None'}.")
    if isinstance(value, str):
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got a single str {short_repr(value)}; "
                        f"wrap it in a list.")
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got {type(value).__name__} {short_repr(value)}; "
                        f"decode it to str.")
    if isinstance(value, Mapping):
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got a {type(value).__name__} (its keys would be "
                        f"scored); pass a list, e.g. list(d.values()).")
    if isinstance(value, (Set, frozenset)):
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got an unordered {type(value).__name__}; "
                        f"pass a list so that positions line up.")
    if getattr(value, "ndim", 1) == 0 or not hasattr(value, "__iter__"):
        raise TypeError(f"{metric}: `{arg}` must be {expected}, got {type(value).__name__} {short_repr(value)}.")
    return list(value)


MAX_TEXT_CHARS = 200_000
"""The longest text (or sentence) any metric takes, in characters, unless the environment variable
``MOVERS_MAX_TEXT_CHARS`` sets another: about 60,000 wordpieces of English. Measured at this size against a
one-sentence reference on CPU: MoverScore 37 s and 1.35 GB peak, Lazy-EMD 33 s, SMS / S+WMS 4 s, ΔBLEU 1 s;
at 1,000,000 characters MoverScore takes 180 s and 4.5 GB, and a tokenizer handed 50 MB aborts the process.
A longer text is refused before tokenisation; the limit never changes a score, it only refuses."""

def max_text_chars() -> int:
    """The limit in force: ``MOVERS_MAX_TEXT_CHARS`` if set (a positive integer), else :data:`MAX_TEXT_CHARS`."""
    raw = os.environ.get("MOVERS_MAX_TEXT_CHARS")
    if raw is None:
        return MAX_TEXT_CHARS
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"the environment variable MOVERS_MAX_TEXT_CHARS must be a positive integer, got {raw!r}.")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(metric: str, arg: str, text: str) -> None:
    """One text's own rules, the same for both APIs and the command line: at most :func:`max_text_chars`
    characters, and only valid code points (a lone surrogate, e.g. from bytes decoded with
    ``surrogateescape``, is no character: it is refused naming its position)."""
    limit = max_text_chars()
    if len(text) > limit:
        raise ValueError(f"{metric}: `{arg}` has {len(text):,} characters, above the limit of {limit:,}; split it "
                         f"into smaller units (paragraphs, sentences) or raise the limit with the environment "
                         f"variable MOVERS_MAX_TEXT_CHARS.")
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise ValueError(f"{metric}: `{arg}` must be valid Unicode text, got the lone surrogate "
                         f"U+{ord(bad.group()):04X} at character {bad.start()} (bytes that are not UTF-8, decoded "
                         f"with errors='surrogateescape'?); decode the input strictly or replace such characters.")


def _check_strings(metric: str, arg: str, items: Sequence[Any], *, allow_empty_text: bool, noun: str = "text",
                   why: str = "") -> None:
    """Every ``items[j]`` is a valid string (:func:`check_text`), non-blank unless `allow_empty_text`; errors
    name ``arg[j]``."""
    for j, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{metric}: `{arg}[{j}]` must be a string, got {type(item).__name__} {short_repr(item)}.")
        check_text(metric, f"{arg}[{j}]", item)
        if not allow_empty_text and not item.strip():
            raise ValueError(f"{metric}: `{arg}[{j}]` must be a non-empty {noun}, got {short_repr(item)}{why}.")


def _check_texts(metric: str, arg: str, texts: Any, *, allow_empty_text: bool) -> list[str]:
    texts = check_list(metric, arg, texts, "a list of strings")
    if not texts:
        raise ValueError(f"{metric}: `{arg}` must be a non-empty list of strings, got an empty list.")
    _check_strings(metric, arg, texts, allow_empty_text=allow_empty_text,
                   why="; empty texts have no tokens to transport")
    return texts


def normalise_references(metric: str, references: Any, n: int, *, allow_empty_text: bool = False,
                         arg: str = "references") -> list[list[str]]:
    """Return references as one non-empty list of strings per prediction (ragged lists allowed).

    A flat list of strings means one reference per prediction (evaluate's convention).
    """
    references = check_list(metric, arg, references, "a list of strings or of lists of strings")
    if len(references) != n:
        raise ValueError(f"{metric}: `predictions` and `{arg}` must have the same length, "
                         f"got {n} and {len(references)}.")
    out: list[list[str]] = []
    for i, refs in enumerate(references):
        if isinstance(refs, str):
            refs = [refs]
        refs = check_list(metric, f"{arg}[{i}]", refs, "a string or a list of strings")
        if not refs:
            raise ValueError(f"{metric}: `{arg}[{i}]` must hold at least one reference, got an empty list.")
        _check_strings(metric, f"{arg}[{i}]", refs, allow_empty_text=allow_empty_text)
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


def check_documents(metric: str, predictions: Any, references: Any, *, allow_empty_text: bool = False,
                    allow_empty_predictions: bool | None = None) -> tuple[list, list[list], bool]:
    """Validate texts, or documents given as lists of sentences (SMS, S+WMS).

    The form of ``predictions[0]`` decides: a string -> texts, checked as by :func:`check_pairs`;
    a list -> pre-segmented documents, where ``references[i]`` is one document (a list of sentence
    strings) or a non-empty list of documents. Returns (predictions, references as one list of
    documents per prediction, segmented); a document comes back as a tuple of sentences.
    `allow_empty_predictions` (default: `allow_empty_text`) lets blank predictions pass alone.
    """
    allow_preds = allow_empty_text if allow_empty_predictions is None else allow_empty_predictions
    preds = check_list(metric, "predictions", predictions, "a list of strings")
    if not preds or not isinstance(preds[0], (list, tuple)):
        preds = check_predictions(metric, preds, allow_empty_text=allow_preds)
        return preds, normalise_references(metric, references, len(preds), allow_empty_text=allow_empty_text), False
    # a blank prediction (every sentence blank) may pass; a blank sentence in a document never does
    docs = [_check_sentences(metric, f"predictions[{i}]", p, allow_preds and _blank_document(p))
            for i, p in enumerate(preds)]
    references = check_list(metric, "references", references, "a list with one entry per prediction")
    if len(references) != len(docs):
        raise ValueError(f"{metric}: `predictions` and `references` must have the same length, "
                         f"got {len(docs)} and {len(references)}.")
    refs: list[list] = []
    for i, group in enumerate(references):
        arg = f"references[{i}]"
        if isinstance(group, str) or not isinstance(group, (list, tuple)):
            raise TypeError(f"{metric}: `{arg}` must be a list of sentences (pre-segmented predictions need "
                            f"pre-segmented references) or a list of such lists, got {type(group).__name__} "
                            f"{short_repr(group)}.")
        if not group:
            raise ValueError(f"{metric}: `{arg}` must hold at least one reference, got an empty list.")
        if all(isinstance(x, str) for x in group):
            refs.append([_check_sentences(metric, arg, group, allow_empty_text)])
        else:
            refs.append([_check_sentences(metric, f"{arg}[{j}]", r, allow_empty_text) for j, r in enumerate(group)])
    return docs, refs, True


def _blank_document(doc: Any) -> bool:
    return isinstance(doc, (list, tuple)) and all(isinstance(s, str) and not s.strip() for s in doc)


def _check_sentences(metric: str, arg: str, doc: Any, allow_empty_text: bool) -> tuple[str, ...]:
    if isinstance(doc, str) or not isinstance(doc, (list, tuple)):
        raise TypeError(f"{metric}: `{arg}` must be a list of sentence strings (pre-segmented input), got "
                        f"{type(doc).__name__} {short_repr(doc)}.")
    if not doc:
        raise ValueError(f"{metric}: `{arg}` must hold at least one sentence, got an empty list.")
    _check_strings(metric, arg, doc, allow_empty_text=allow_empty_text, noun="sentence")
    return tuple(doc)


def check_reference_weights(metric: str, weights: Any, refs: list[list[str]]) -> list[list[float]]:
    """ΔBLEU's human ratings: one float list per segment, aligned with `refs` (as returned by
    :func:`normalise_references`), each in [-1, 1] with one > 0 per segment; all 1.0 when None."""
    if weights is None:
        return [[1.0] * len(r) for r in refs]
    weights = check_list(metric, "reference_weights", weights,
                          "a list of lists of numbers (the shape of `references`) or None")
    if len(weights) != len(refs):
        raise ValueError(f"{metric}: `predictions` and `reference_weights` must have the same length, "
                         f"got {len(refs)} and {len(weights)}.")
    out = []
    for i, (row, seg_refs) in enumerate(zip(weights, refs, strict=False)):
        if _is_number(row):
            row = [row]
        row = check_list(metric, f"reference_weights[{i}]", row, "a list of numbers")
        if len(row) != len(seg_refs):
            raise ValueError(f"{metric}: `reference_weights[{i}]` must hold one weight per reference of segment "
                             f"{i} ({len(seg_refs)}), got {len(row)}.")
        for j, w in enumerate(row):
            if not _is_number(w):
                raise TypeError(f"{metric}: `reference_weights[{i}][{j}]` must be a number in [-1, 1], "
                                f"got {type(w).__name__} {short_repr(w)}.")
            if not (-1.0 <= float(w) <= 1.0):  # also catches NaN
                raise ValueError(f"{metric}: `reference_weights[{i}][{j}]` must be a number in [-1, 1], got {w}.")
        row = [float(w) for w in row]
        if max(row) <= 0:
            raise ValueError(f"{metric}: `reference_weights[{i}]` must contain at least one positive weight (the "
                             f"denominator of ΔBLEU is the largest weight of the segment), got {row}.")
        out.append(row)
    return out


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_choice(metric: str, arg: str, value: Any, choices: Sequence[Any]) -> Any:
    """Raise unless `value` is one of `choices`; the message lists them."""
    if value not in choices:
        raise ValueError(f"{metric}: `{arg}` must be one of {list(choices)}, got {short_repr(value)}.")
    return value


def check_number(metric: str, arg: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, integer: bool = False) -> Any:
    """Raise unless `value` is a finite real (optionally an int) within [low, high] (or (low, high])."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise TypeError(f"{metric}: `{arg}` must be {kind}, got {type(value).__name__} {short_repr(value)}.")
    if not math.isfinite(value):
        raise ValueError(f"{metric}: `{arg}` must be finite, got {value}.")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{metric}: `{arg}` must be {'>' if low_open else '>='} {low}, got {value}.")
    if high is not None and value > high:
        raise ValueError(f"{metric}: `{arg}` must be <= {high}, got {value}.")
    return value
