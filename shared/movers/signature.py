"""Reproducibility signatures: sacreBLEU's ``key:value|key:value`` format, fields passed explicitly.

Every result carries one string naming every input that can move a number (metric, preset, model and
revision, layer, weights, filters, solver, transform) followed by the library versions. Format
history is in the README's "Signature" section; a test pins the exact strings.
"""
from __future__ import annotations

from importlib import metadata
from typing import Sequence

from . import _cache

__all__ = ["format_signature", "library_versions", "format_float", "nrefs_label", "package_version"]


def format_float(x: float) -> str:
    """Floats in signatures use ``format(x, "g")`` so that 0.1 reads ``0.1`` and 1e-9 reads ``1e-09``."""
    return format(float(x), "g")


def nrefs_label(references: Sequence[Sequence[object]]) -> int | str:
    """The ``nrefs`` field: references per segment, or ``"var"`` when the lists are ragged (sacreBLEU).

    >>> nrefs_label([["a"], ["b"]]), nrefs_label([["a"], ["b", "c"]])
    (1, 'var')
    """
    counts = {len(group) for group in references}
    return counts.pop() if len(counts) == 1 else "var"


def format_signature(name: str, fields: Sequence[tuple[str, object]]) -> str:
    """Join ordered (key, value) pairs as ``Name|k:v|k:v``; bools become yes/no; None is an error.

    >>> format_signature("MoverScore", [("nrefs", 1), ("idf", True), ("p", 0.5)])
    'MoverScore|nrefs:1|idf:yes|p:0.5'
    """
    parts = [name]
    for key, value in fields:
        if value is None:
            raise ValueError(f"signature: field `{key}` is None; every field must be resolved.")
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, float):
            text = format_float(value)
        else:
            text = str(value)
        if "|" in text or "|" in key:
            raise ValueError(f"signature: field `{key}` must not contain '|', got {text!r}.")
        parts.append(f"{key}:{text}")
    return "|".join(parts)


def package_version(dist: str) -> str:
    """The installed version of distribution `dist`, or ``"none"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def library_versions(*dists: str) -> tuple[tuple[str, str], ...]:
    """Versions for the signature tail: movers first, then the named distributions.

    Short keys follow sacreBLEU/bert_score: ``v`` (movers), ``tf`` (transformers), ``torch``, ``pot``.
    """
    short = {"transformers": "tf", "pot": "pot", "torch": "torch", "sacrebleu": "sacrebleu",
             "nltk": "nltk"}
    return _cache.cached(("versions", dists), lambda: (("v", package_version("movers")), *(
        (short.get(dist, dist), package_version(dist)) for dist in dists)))
