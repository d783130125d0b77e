"""One progress bar per metric call (``verbose=True``): encoding and transport on one tqdm bar, by pairs; and a
tally of what the calls did (:func:`tally`: the texts encoded, the time spent in the transport).

The metric wrapper opens the bar (total = prediction-reference pairs); the encoder reports its batches
as the bar's postfix instead of opening bars of its own, and the transport loops advance it by the
pairs they have solved. With ``verbose=False`` nothing is imported or printed.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROGRESS_MIN_PAIRS", "automatic", "call_progress", "active", "encoding", "pairs_done", "Tally", "tally",
           "encoded", "transport"]

_BAR: ContextVar[Any] = ContextVar("movers_progress_bar", default=None)

PROGRESS_MIN_PAIRS = 500
"""Long work: the commands show a progress bar by default from this many pairs x metrics (on a terminal)."""


def automatic(pairs: int) -> bool:
    """The commands' default: a bar when standard error is a terminal and the work is long."""
    import sys

    return sys.stderr.isatty() and pairs >= PROGRESS_MIN_PAIRS


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


@dataclass
class Tally:
    """What the metric calls made inside :func:`tally` did (the timings study reads it)."""

    texts_encoded: int = 0
    """Texts the encoder ran on: each distinct text of an encoder call that no cache or shared embedding held."""
    transport_seconds: float = 0.0
    """Wall time in the formula (cost matrices and solvers); pairs solved on threads at once count once."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


_TALLY: ContextVar[Tally | None] = ContextVar("movers_tally", default=None)


@contextlib.contextmanager
def tally() -> Iterator[Tally]:
    """Count what the metric calls inside the block do (in this thread and the threads they start)::

        with tally() as done:
            movers.moverscore(predictions, references)
        done.texts_encoded, done.transport_seconds
    """
    record = Tally()
    token = _TALLY.set(record)
    try:
        yield record
    finally:
        _TALLY.reset(token)


def encoded(n: int) -> None:
    """The encoder ran on `n` texts (counted inside :func:`tally`)."""
    record = _TALLY.get()
    if record is not None:
        with record._lock:
            record.texts_encoded += n


@contextlib.contextmanager
def transport() -> Iterator[None]:
    """The block solves transport problems: its wall time is added inside :func:`tally`."""
    record = _TALLY.get()
    start = time.perf_counter()
    try:
        yield
    finally:
        if record is not None:
            with record._lock:
                record.transport_seconds += time.perf_counter() - start
