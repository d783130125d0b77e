"""Labels of groups, systems and inputs: any hashable value (a text, a number, a tuple of several fields), turned
into integer codes once; labels are compared as themselves, never as their text.
"""
from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

__all__ = ["factorize", "sort_key", "label_texts"]


def sort_key(label: Hashable) -> tuple[Any, ...]:
    """The order of labels: by their text, part by part for a tuple (a text sorts as itself, so the order of
    text labels is Python's), then by their representation (1 before '1' stays deterministic)."""
    parts = label if isinstance(label, tuple) else (label,)
    return tuple(str(p) for p in parts), repr(label)


def factorize(labels: Sequence[Hashable]) -> tuple[np.ndarray, list[Hashable]]:
    """(codes, uniques): each label's index into `uniques`, the distinct labels in :func:`sort_key` order.

    Raises:
        TypeError: If a label cannot be hashed (a list, a dict).
    """
    index: dict[Hashable, int] = {}
    first = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        try:
            first[i] = index.setdefault(label, len(index))
        except TypeError:
            raise TypeError(f"correlate: a label must be hashable (a text, a number or a tuple), got "
                            f"{type(label).__name__}: {label!r}.") from None
    uniques = list(index)
    order = sorted(range(len(uniques)), key=lambda k: sort_key(uniques[k]))
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[order] = np.arange(len(uniques))
    return rank[first] if len(labels) else first, [uniques[k] for k in order]


def label_texts(labels: Sequence[Hashable]) -> dict[Hashable, str]:
    """label -> its text in tables and JSON keys: a text as itself, a one-part tuple as its part, a tuple of
    several parts as a JSON list (``["x.y", "z"]``), anything else as ``str``; where two labels would read the
    same, both are written as JSON (``1`` and ``"1"``)."""
    def plain(label: Hashable) -> str:
        if isinstance(label, tuple):
            return plain(label[0]) if len(label) == 1 else _json(label)
        return label if isinstance(label, str) else str(label)

    out = {label: plain(label) for label in labels}
    seen: dict[str, int] = {}
    for text in out.values():
        seen[text] = seen.get(text, 0) + 1
    return {label: (_json(label) if seen[text] > 1 else text) for label, text in out.items()}


def _json(label: Hashable) -> str:
    value = list(label) if isinstance(label, tuple) else label
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return repr(label)
