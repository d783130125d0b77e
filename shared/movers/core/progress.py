"""One progress bar per metric call (``verbose=True``): encoding and transport on one tqdm bar, by pairs.

The metric wrapper opens the bar (total = prediction-reference pairs); the encoder reports its batches
as the bar's postfix instead of opening bars of its own, and the transport loops advance it by the
pairs they have solved. With ``verbose=False`` nothing is imported or printed.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["call_progress", "active", "encoding", "pairs_done"]

_BAR: ContextVar[Any] = ContextVar("movers_progress_bar", default=None)


@contextlib.contextmanager
def call_progress(desc: str, total: int | None, enabled: bool) -> Iterator[Any]:
    """A tqdm bar for one metric call, or nothing when not `enabled` (or when a bar is already open)."""
    if not enabled or _BAR.get() is not None:
        yield _BAR.get()
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=f"movers: {desc}", unit="pair", dynamic_ncols=True)
    token = _BAR.set(bar)
    try:
        yield bar
    finally:
        _BAR.reset(token)
        bar.close()


def active() -> bool:
    """True inside a metric call's bar: the encoder then reports to it instead of opening its own."""
    return _BAR.get() is not None


def encoding(done: int, total: int) -> None:
    bar = _BAR.get()
    if bar is not None:
        bar.set_postfix_str(f"encoding batch {done}/{total}")


def pairs_done(n: int) -> None:
    bar = _BAR.get()
    if bar is not None:
        bar.set_postfix_str("transport", refresh=False)
        bar.update(n)
