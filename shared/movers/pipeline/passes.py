"""Scoring a call in parts, with the result of one call: the two-pass protocol of streaming, Ray and shards.

A metric's score for one segment can depend on the rest of the call: per-call IDF, batch or corpus centring,
ΔBLEU's corpus sums. Every metric builds those statistics through the hooks of the active
:class:`~movers.core.scope.Scope`, so a call can be scored in parts that no process holds together:

1. a **statistics pass**: each part runs the metric under a :class:`StatisticsPass` up to the point where it has
   built its call-level statistics (``scope.statistics_done()``); the pass records the part's local sums, in the
   order the metric asks for them. With ``signature_only`` the metric goes on to its signature without scoring;
2. the parts' sums merge in any order (:class:`Partial`, :func:`~movers.core.scope.add_totals`: Counters, lists,
   float64 tensors and exact sums);
3. a **scoring pass**: each part is scored under a :class:`ScoringPass`, which hands the metric the merged sums
   instead of its own.

:func:`movers.score_stream` runs both passes over the blocks of a stream in one process, Ray Data
(:mod:`movers.integrations.ray`) over a data set's blocks on a cluster, with the partials merged on the driver;
``distributed_scoring(sharded=True)`` (:mod:`movers.core.scope`) sums the same hooks with collectives instead, in
one pass. What a split call cannot do is declared here once: :func:`run_length` (batch centring averages runs of
consecutive segments, which a part must hold whole) and :func:`check_split` (the options a split call refuses).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.scope import Scope, add_totals

__all__ = ["StatisticsPass", "ScoringPass", "StatisticsCollected", "Partial", "run_length", "check_split"]


def run_length(options: Any) -> int:
    """Segments per run that a part must hold whole: ``centering_batch`` when the options centre each run of that
    many consecutive segments by its own means (``centering="batch"``, TWMD's default), else 1."""
    centering = getattr(options, "centering", None)
    return int(options.centering_batch) if isinstance(centering, str) and centering == "batch" else 1


def check_split(name: str, options: Any, *, part: str, unordered: str | None = None, rows: bool = False) -> None:
    """Refuse the options that a call split into parts cannot score as one call, naming the reason.

    Args:
        name: The caller, for the message (``"score_stream"``, the metric's name, ...).
        options: The metric's options dataclass.
        part: What one part is (``"block"``, ``"rank"``), for the message.
        unordered: Why the parts keep no input order, and how to give one, when they do not (Ray's blocks): batch
            centring is refused then. None: the parts are in input order.
        rows: Whether per-segment outputs become rows of a data set (Ray): ``return_plans`` is refused then.
    Raises:
        ValueError: ``baseline="fit"`` (fitted on random pairs of the whole call's texts), ``return_plans`` with
            `rows`, batch centring with `unordered`.
    """
    if getattr(options, "baseline", None) == "fit":
        raise ValueError(f"{name}: baseline='fit' is fitted on random pairs of the whole call's texts, which no "
                         f"{part} holds; fit it once (a call with baseline='fit' gives extra['baseline']) and pass "
                         f"that number, or baseline='bundled'.")
    if rows and getattr(options, "return_plans", False):
        raise ValueError(f"{name}: return_plans is refused on Ray: return_plans keeps a transport plan per pair for "
                         f"inspection, which is not a column to write for a whole data set; explain chosen rows "
                         f"with movers.explain.")
    k = run_length(options)
    if unordered is not None and k > 1:
        raise ValueError(f"{name}: centering='batch' averages runs of {k} consecutive rows of the input, and "
                         f"{unordered}, or use centering='corpus' or a fitted table.")


class StatisticsCollected(Exception):
    """Raised by :meth:`StatisticsPass.statistics_done`: the part's statistics are recorded, nothing is scored."""


class StatisticsPass(Scope):
    """The statistics pass over parts: records each part's local sums (in the order the metric asks for them,
    added up over the parts run under it) and the longest run of consecutive segments a metric keeps whole; then
    stops the metric (:class:`StatisticsCollected`), or, with `signature_only`, lets it return its signature with
    placeholder scores."""

    def __init__(self, *, signature_only: bool = False) -> None:
        self.totals: list[Any] = []
        self.asked = False
        self.multiple = 1
        self.signature_only = signature_only
        self._k = 0

    def begin(self) -> None:
        """Start a part: its sums add to the earlier parts' in the same order."""
        self._k = 0

    def part(self, n: int, *, multiple: int = 1) -> range:
        self.multiple = max(self.multiple, multiple)
        return range(n)

    def total(self, value: Any) -> Any:
        self.asked = True
        if self._k == len(self.totals):
            self.totals.append(value)
        else:
            self.totals[self._k] = add_totals(self.totals[self._k], value)
        self._k += 1
        return value

    def statistics_done(self) -> None:
        if not self.signature_only:
            raise StatisticsCollected

    def to_partial(self, n: int, **extra: Any) -> Partial:
        """What this pass recorded over `n` segments, as a :class:`Partial` to merge with other parts'."""
        return Partial(self.totals, self.asked, self.multiple, n, **extra)


class ScoringPass(Scope):
    """The scoring pass: hands the metric the merged sums of the whole call (none recorded: its own); each part
    is one whole-call part starting at segment `offset` of a call of `size` segments (None: unknown)."""

    def __init__(self, totals: list[Any], size: int | None) -> None:
        self.totals, self.size, self.offset, self._k = totals, size, 0, 0

    def begin(self, offset: int = 0) -> None:
        self.offset, self._k = offset, 0

    def part(self, n: int, *, multiple: int = 1) -> range:
        if self.offset % multiple:
            raise ValueError(f"score_stream: block at segment {self.offset} does not start a batch of {multiple} "
                             f"segments; choose a `block_size` that is a multiple of {multiple}.")
        return range(n)

    def total(self, value: Any) -> Any:
        if not self.totals:  # no statistics pass was needed
            return value
        out = self.totals[self._k]
        self._k += 1
        return out

    def call_size(self, n: int) -> int:
        return self.size if self.size is not None else n


@dataclass
class Partial:
    """One part's statistics: its sums (:attr:`StatisticsPass.totals`), whether the metric asked for any, the
    longest run it keeps whole, its number of segments, and what else a surface reduces alongside (``extra``: the
    signature, ``nrefs`` ranges, an index column's range), merged by :meth:`merged`."""

    totals: list[Any]
    asked: bool
    multiple: int
    n: int
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, totals: list[Any], asked: bool, multiple: int, n: int, **extra: Any) -> None:
        self.totals, self.asked, self.multiple, self.n, self.extra = totals, asked, multiple, n, extra

    def merged(self, other: Partial | None) -> Partial:
        """The two parts' statistics added up (any order). ``extra`` values merge by kind: ``(low, high)`` ranges
        widen, ``(low, high, sum)`` column summaries widen and add, anything else is kept from either part."""
        if other is None:
            return self
        totals = add_totals(self.totals, other.totals) if self.totals and other.totals else \
            self.totals or other.totals
        extra = dict(other.extra)
        for key, mine in self.extra.items():
            theirs = other.extra.get(key)
            if mine is None or theirs is None:
                extra[key] = theirs if mine is None else mine
            elif isinstance(mine, tuple) and len(mine) in (2, 3):
                extra[key] = (min(mine[0], theirs[0]), max(mine[1], theirs[1]), *((mine[2] + theirs[2],)
                                                                                  if len(mine) == 3 else ()))
            else:
                extra[key] = mine
        return Partial(totals, self.asked or other.asked, max(self.multiple, other.multiple), self.n + other.n,
                       **extra)
