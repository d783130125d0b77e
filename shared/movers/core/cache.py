"""The package's one cache of loaded resources (encoders, models, GloVe, tokenizers, word lists).

Explicit rather than scattered ``lru_cache``s: everything loaded once per process sits in one dict,
keyed by what defines it (never by data), and :func:`clear` empties it
(``movers.clear_encoder_cache()``).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["cached", "clear", "forget"]

T = TypeVar("T")

_CACHE: dict[Hashable, Any] = {}


def cached(key: Hashable, load: Callable[[], T]) -> T:
    """The value stored under `key`, loading it with `load()` the first time."""
    if key not in _CACHE:
        _CACHE[key] = load()
    return _CACHE[key]


def clear() -> None:
    """Forget every loaded resource (memory is freed once nothing else holds them)."""
    _CACHE.clear()


def forget(unwanted: Callable[[Hashable], bool]) -> None:
    """Drop the entries whose key `unwanted` accepts (what a resource that failed to load completely left)."""
    for key in [k for k in list(_CACHE) if unwanted(k)]:
        _CACHE.pop(key, None)
