"""Independent transport problems solved at once, on threads: the solvers release the GIL (POT's network
simplex, numpy's and torch's array operations), so a call's pairs or size buckets use every core.

The number of threads is a call's ``transport_threads`` option, else the environment variable
:data:`THREADS_ENV`, else torch's intra-op thread count (``torch.get_num_threads()``: what torch itself uses for
the encoder). A call never runs more threads than it has problems in flight (a pair, or a size bucket), so a
count above the work is the work. Results come back in input order and each problem is solved exactly as it would
be alone, so the thread count never changes a number: the same bits with 1 thread or 16.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["THREADS_ENV", "transport_threads", "Solver", "solver"]

THREADS_ENV = "MOVERS_TRANSPORT_THREADS"
"""Environment variable: transport threads when a call does not set ``transport_threads``."""

T = TypeVar("T")
R = TypeVar("R")


def transport_threads(requested: int | None = None) -> int:
    """`requested`, else ``$MOVERS_TRANSPORT_THREADS``, else ``torch.get_num_threads()``; at least 1.

    Raises:
        ValueError: `requested` or the environment variable is not an integer >= 1.
    """
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"movers: `transport_threads` must be an integer >= 1 or None, got {requested!r}.")
        return requested
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        # str.isdigit() accepts digits int() refuses ('²'): parse, and name the variable either way
        try:
            threads = int(env) if env.isascii() else 0
        except ValueError:
            threads = 0
        if threads < 1:
            raise ValueError(f"movers: ${THREADS_ENV} must be an integer >= 1, got {env!r}.")
        return threads
    import torch

    return max(1, torch.get_num_threads())


class Solver:
    """Maps a function over independent problems, in order, on ``threads`` threads (inline for one)."""

    def __init__(self, threads: int, pool: ThreadPoolExecutor | None) -> None:
        self.threads = threads
        self._pool = pool

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]``, computed concurrently on at most ``min(threads, len(items))`` threads;
        exceptions are raised in input order."""
        if self._pool is None:
            return [fn(x) for x in items]
        return list(self._pool.map(fn, items))


@contextmanager
def solver(threads: int) -> Iterator[Solver]:
    """A :class:`Solver` for one call (its pool lives as long as the block)."""
    if threads <= 1:
        yield Solver(1, None)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="movers-transport") as pool:
        yield Solver(threads, pool)

