"""Streaming: score a corpus of any size block by block, with memory bounded by the block, not the corpus.

:func:`score_stream` feeds ``block_size`` segments at a time to a metric. Statistics that make a score
depend on the rest of the call (per-call IDF, corpus centring, ΔBLEU's corpus sums) are computed in a
first pass over the whole stream (the two passes of :mod:`movers.pipeline.passes`, which Ray Data's scoring
runs too): the first pass runs each block only up to the point where the metric has built them (tokenisation
for IDF, embedding for corpus centring, n-gram counting for ΔBLEU), the second pass scores each block with the
totals. The result equals one call on the whole corpus (to
float32 rounding), with the same signature. TWMD's batch centring needs no first pass: blocks are
whole centring batches.
"""
from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..core.result import Scores
from ..core.scope import use_scope
from ..core.spec import MetricSpec
from .call import make_options, score
from .passes import ScoringPass, StatisticsCollected, StatisticsPass, check_split, run_length

__all__ = ["score_stream"]

_END = object()


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
            yield from zip(chunk[pred_col], chunk[ref_col], strict=False)
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


def score_stream(spec: MetricSpec, predictions: Any, references: Any = None, *,
                 columns: Sequence[str] = ("prediction", "reference"), block_size: int = 1024,
                 **options: Any) -> Scores:
    """Score a corpus of any size in blocks: the result of one call of `spec`'s metric on all predictions
    and references with `options` (to float32 rounding, same signature), with memory bounded by the block.

    Args:
        spec: The metric (``movers.score_stream`` takes its slug).
        predictions: An iterable of predictions, or a ``datasets.Dataset`` (then `references` is None
            and `columns` names its prediction and reference columns; rows are read block by block
            from its memory-mapped Arrow table).
        references: An iterable aligned with `predictions` (a string or a list of strings each).
        block_size: Segments scored at a time (rounded up to whole centring batches with batch centring).
            Peak memory grows with it, never with the corpus; no score depends on it.
        **options: The metric's keyword options (``idf=True``, ``centering="corpus"``, ...).
    Returns:
        :class:`~movers.core.result.Scores` of the whole corpus: per-segment lists concatenated in input
        order, the corpus score as the metric defines it (mean of segments; ΔBLEU from its summed
        statistics), the one-call signature.
    Raises:
        ValueError: Bad `block_size`, unequal lengths, ``baseline="fit"`` (fitted per call, so a stream
            would fit one baseline per block), or a one-shot iterator where a first pass over the whole
            corpus is needed (per-call IDF, corpus centring, ΔBLEU).

    Call-level statistics take a first pass: tokenisation only for per-call IDF, n-gram counting for
    ΔBLEU, a full embedding pass for corpus centring (so that mode costs two encoder passes).
    """
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"score_stream: `block_size` must be a positive int, got {block_size!r}.")
    o = make_options(spec, options)
    check_split("score_stream", o, part="block")
    k = run_length(o)  # blocks of whole centring batches: batch centring stays block-local
    block_size = -(-block_size // k) * k

    def fn(preds: list, refs: list, offset: int) -> Scores:
        try:
            return score(spec, preds, refs, **options)
        except (ValueError, TypeError) as e:  # name the row of the stream, not of the block
            if not offset or not _POSITION.search(str(e)):
                raise
            raise type(e)(_POSITION.sub(lambda m: f"`{m[1]}[{int(m[2]) + offset}]", str(e))) from None

    first = StatisticsPass()
    reiterable = _reiterable(predictions) and _reiterable(references)
    blocks = _blocks(_rows(predictions, references, columns), block_size)
    size: int | None = 0
    head: list[tuple[list, list]] = []
    with use_scope(first), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warnings come from the second pass, with the whole-call totals
        for preds, refs in blocks:
            first.begin()
            try:
                fn(preds, refs, size or 0)
            except StatisticsCollected:
                pass
            size += len(preds)  # type: ignore[operator]
            if not first.asked:  # these options have no call-level statistics: one pass is enough
                size = len(predictions) if hasattr(predictions, "__len__") else None
                if not reiterable:
                    head = [(preds, refs)]
                break
            if not reiterable:
                raise ValueError(f"score_stream: {spec.slug} with these options needs a first pass over the whole "
                                 f"corpus (call-level statistics), but `predictions`/`references` is a one-shot "
                                 f"iterator; pass lists, a datasets.Dataset or another re-iterable.")
    if reiterable:
        blocks = _blocks(_rows(predictions, references, columns), block_size)
    second = ScoringPass(first.totals, size)
    results: list[Scores] = []
    offset = 0
    with use_scope(second):
        for preds, refs in itertools.chain(head, blocks):
            second.begin(offset)
            results.append(fn(preds, refs, offset))
            offset += len(preds)
    if not results:
        raise ValueError("score_stream: `predictions` is empty; expected at least one segment.")
    return _combine(spec, o, results)


_POSITION = re.compile(r"`(predictions|references)\[(\d+)\]")


def _combine(spec: MetricSpec, o: Any, results: list[Scores]) -> Scores:
    """One Scores from the blocks: concatenate per-segment outputs, the corpus rule of the spec, nrefs merged."""
    per_segment = set(spec.per_segment_outputs())
    segments: dict[str, Any] = {"scores": [s for r in results for s in r.scores]}
    last = results[-1]
    for key in last.extra:
        if key in per_segment and key != "per_reference":
            segments[key] = [v for r in results for v in r.extra[key]]
    if any("per_reference" in r.extra for r in results):
        segments["per_reference"] = [v for r in results for v in r.extra.get("per_reference", [[s] for s in r.scores])]
    offsets = itertools.accumulate([0, *(len(r.scores) for r in results)])
    empty = [start + i for r, start in zip(results, offsets, strict=False)
             for i in r.extra.get("empty_predictions", [])]
    signature = last.signature
    if len({str(r.signature.get("nrefs")) for r in results}) > 1:
        signature = signature.set("nrefs", "var")
    if spec.corpus_from_segments:
        score_value, corpus = spec.corpus(o, segments)
        extra = {**{k: v for k, v in last.extra.items() if k not in per_segment}, **corpus}
    else:  # corpus statistic summed over the whole stream: the last block computed it with the totals
        score_value, extra = last.score, {k: v for k, v in last.extra.items() if k not in per_segment}
    extra.update({k: v for k, v in segments.items() if k != "scores"})
    if empty:
        extra["empty_predictions"] = empty
    # per-segment sufficient statistics (ΔBLEU), for paired tests and intervals on a streamed corpus
    statistics = [row for r in results for row in r.statistics or ()] \
        if all(r.statistics is not None for r in results) else None
    return Scores(score=score_value, scores=segments["scores"], signature=signature, extra=extra,
                  statistics=statistics)
