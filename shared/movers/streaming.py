"""Streaming: score a corpus of any size block by block, with memory bounded by the block, not the corpus.

:func:`score_stream` feeds ``block_size`` segments at a time to a metric. Statistics that make a score
depend on the rest of the call (per-call IDF, corpus centring, ΔBLEU's corpus sums) are computed in a
first pass over the whole stream, through the same :class:`~movers.distributed.Scope` hooks that
distributed scoring uses: the first pass runs each block only up to the point where the metric has
built them (tokenisation for IDF, embedding for corpus centring, n-gram counting for ΔBLEU), the
second pass scores each block with the totals. The result equals one call on the whole corpus (to
float32 rounding), with the same signature. TWMD's batch centring needs no first pass: blocks are
whole centring batches.
"""
from __future__ import annotations

import inspect
import itertools
import re
import warnings
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .distributed import Scope, use_scope
from .result import Scores

__all__ = ["score_stream", "METRICS"]

METRICS = ("moverscore", "sms", "wms", "s_wms", "twmd", "lazy_emd", "delta_bleu")
_END = object()


class _Collected(Exception):
    """Raised at ``statistics_done`` in the first pass: the block's statistics are recorded."""


class _FirstPass(Scope):
    """Records each block's local sums (in the order the metric asks for them) and stops the metric."""

    def __init__(self) -> None:
        self.totals: list[Any] = []
        self._k = 0
        self.asked = False

    def begin(self) -> None:
        self._k = 0

    def total(self, value):
        self.asked = True
        if self._k == len(self.totals):
            self.totals.append(value)
        elif isinstance(value, list):
            self.totals[self._k] = [a + b for a, b in zip(self.totals[self._k], value)]
        elif hasattr(value, "update") and not hasattr(value, "shape"):  # Counter
            self.totals[self._k].update(value)
        else:
            self.totals[self._k] = self.totals[self._k] + value
        self._k += 1
        return value

    def statistics_done(self) -> None:
        raise _Collected


class _SecondPass(Scope):
    """Hands the metric the stream's totals; each block is one whole-call part starting at `offset`."""

    def __init__(self, totals: list[Any], size: int | None) -> None:
        self.totals, self.size, self.offset, self._k = totals, size, 0, 0

    def begin(self, offset: int) -> None:
        self.offset, self._k = offset, 0

    def part(self, n: int, *, multiple: int = 1) -> range:
        if self.offset % multiple:
            raise ValueError(f"score_stream: block at segment {self.offset} does not start a batch of {multiple} "
                             f"segments; choose a `block_size` that is a multiple of {multiple}.")
        return range(n)

    def total(self, value):
        if not self.totals:  # no first pass was needed
            return value
        out = self.totals[self._k]
        self._k += 1
        return out

    def call_size(self, n: int) -> int:
        return self.size if self.size is not None else n


def _rows(predictions: Any, references: Any, columns: Sequence[str]) -> Iterator[tuple[Any, Any]]:
    """(prediction, reference) pairs from a datasets.Dataset (row slices of its memory-mapped columns)
    or from two aligned iterables."""
    if references is None:
        if not hasattr(predictions, "column_names"):
            raise TypeError("score_stream: pass `references`, or a datasets.Dataset as `predictions` with "
                            "`columns` naming its prediction and reference columns.")
        pred_col, ref_col = columns
        for name in (pred_col, ref_col):
            if name not in predictions.column_names:
                raise ValueError(f"score_stream: `columns` names {name!r}, but the dataset has columns "
                                 f"{predictions.column_names}.")
        step = 1024
        for start in range(0, len(predictions), step):
            chunk = predictions[start:start + step]
            yield from zip(chunk[pred_col], chunk[ref_col])
        return
    for i, (p, r) in enumerate(itertools.zip_longest(predictions, references, fillvalue=_END)):
        if p is _END or r is _END:
            raise ValueError(f"score_stream: `predictions` and `references` must have the same length; one "
                             f"ends after {i} items.")
        yield p, r


def _blocks(rows: Iterable[tuple[Any, Any]], size: int) -> Iterator[tuple[list, list]]:
    it = iter(rows)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield [p for p, _ in chunk], [r for _, r in chunk]


def _reiterable(x: Any) -> bool:
    return x is None or hasattr(x, "column_names") or iter(x) is not x


def score_stream(metric: str, predictions: Any, references: Any = None, *,
                 columns: Sequence[str] = ("prediction", "reference"), block_size: int = 1024,
                 **options: Any) -> Scores:
    """Score a corpus of any size in blocks: the result of ``movers.<metric>(all predictions, all
    references, **options)`` (to float32 rounding, same signature) with memory bounded by the block.

    Args:
        metric: One of "moverscore", "sms", "wms", "s_wms", "twmd", "lazy_emd", "delta_bleu".
        predictions: An iterable of predictions, or a ``datasets.Dataset`` (then `references` is None
            and `columns` names its prediction and reference columns; rows are read block by block
            from its memory-mapped Arrow table).
        references: An iterable aligned with `predictions` (a string or a list of strings each).
        block_size: Segments scored at a time (rounded up to whole centring batches for TWMD). Peak
            memory grows with it, never with the corpus; no score depends on it.
        **options: The metric's keyword options (``idf=True``, ``centering="corpus"``, ...).
    Returns:
        :class:`~movers.result.Scores` of the whole corpus: per-segment lists concatenated in input
        order, the corpus score as the metric defines it (mean of segments; ΔBLEU from its summed
        statistics), the one-call signature.
    Raises:
        ValueError: Unknown metric, bad `block_size`, unequal lengths, or a one-shot iterator where a
            first pass over the whole corpus is needed (per-call IDF, corpus centring, ΔBLEU).

    Call-level statistics take a first pass: tokenisation only for per-call IDF, n-gram counting for
    ΔBLEU, a full embedding pass for TWMD's corpus centring (so that mode costs two encoder passes).
    """
    import movers

    if metric not in METRICS:
        raise ValueError(f"score_stream: unknown `metric` {metric!r}; choose one of {list(METRICS)}.")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"score_stream: `block_size` must be a positive int, got {block_size!r}.")
    fn = getattr(movers, metric)
    if metric == "twmd":  # blocks of whole centring batches: batch centring stays block-local
        k = options.get("centering_batch", inspect.signature(fn).parameters["centering_batch"].default)
        block_size = -(-block_size // k) * k

    first = _FirstPass()
    reiterable = _reiterable(predictions) and _reiterable(references)
    blocks = _blocks(_rows(predictions, references, columns), block_size)
    size: int | None = 0
    head: list[tuple[list, list]] = []
    with use_scope(first), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warnings come from the second pass, with the whole-call totals
        for preds, refs in blocks:
            first.begin()
            size += len(preds)  # type: ignore[operator]
            try:
                fn(preds, refs, **options)
            except _Collected:
                pass
            if not first.asked:  # these options have no call-level statistics: one pass is enough
                size = len(predictions) if hasattr(predictions, "__len__") else None
                if not reiterable:
                    head = [(preds, refs)]
                break
            if not reiterable:
                raise ValueError(f"score_stream: {metric} with these options needs a first pass over the whole "
                                 f"corpus (call-level statistics), but `predictions`/`references` is a one-shot "
                                 f"iterator; pass lists, a datasets.Dataset or another re-iterable.")
    if reiterable:
        blocks = _blocks(_rows(predictions, references, columns), block_size)
    second = _SecondPass(first.totals, size)
    results: list[Scores] = []
    offset = 0
    with use_scope(second):
        for preds, refs in itertools.chain(head, blocks):
            second.begin(offset)
            results.append(fn(preds, refs, **options))
            offset += len(preds)
    if not results:
        raise ValueError("score_stream: `predictions` is empty; expected at least one segment.")
    return _combine(metric, results)


def _combine(metric: str, results: list[Scores]) -> Scores:
    """One Scores from the blocks: concatenate per-segment lists, recompute means, merge nrefs."""
    scores = [s for r in results for s in r.scores]
    nrefs = {re.search(r"\|nrefs:([^|]*)", r.signature).group(1) for r in results}  # type: ignore[union-attr]
    signature = results[-1].signature
    if len(nrefs) > 1:
        signature = re.sub(r"\|nrefs:[^|]*", "|nrefs:var", signature)
    extra: dict[str, Any] = {}
    multiple = any("per_reference" in r.extra for r in results)
    for key, value in results[-1].extra.items():
        if isinstance(value, list) and len(value) == len(results[-1].scores):
            extra[key] = [v for r in results for v in r.extra[key]]
        else:
            extra[key] = value  # corpus-level (ΔBLEU: from the whole stream's sums)
    if multiple:
        extra["per_reference"] = [v for r in results
                                  for v in r.extra.get("per_reference", [[s] for s in r.scores])]
    if metric == "delta_bleu":
        score = results[-1].score  # corpus BLEU from the summed statistics of the whole stream
    else:
        score = float(np.mean(scores))
    if metric == "lazy_emd":
        extra["similarity"] = float(np.mean(extra["similarities"]))
    return Scores(score=score, scores=scores, signature=signature, extra=extra)
