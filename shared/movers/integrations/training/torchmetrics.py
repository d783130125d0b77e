"""movers metrics as ``torchmetrics.Metric`` objects (PyTorch Lightning's metric API), exact under DDP.

    >>> from movers.torchmetrics import MoverScore                      # doctest: +SKIP
    >>> metric = MoverScore()                                           # options as keywords: MoverScore(idf=True)
    >>> metric.update(["the cat sat on the mat"], ["a cat sat on the mat"])
    >>> metric.compute()                                                # tensor(0.4887, dtype=torch.float64)
    >>> metric.result.signature                                         # the full movers.Scores of that compute

One class per registered metric (``MoverScore``, ``SMS``, ``S_WMS``, ``WMS``, ``TWMD``, ``LazyEMD``,
``DeltaBLEU``; ``TextMetric("<slug>", **options)`` for any). ``update(preds, target)`` takes a batch of
strings and, per prediction, a reference string or a list of them; ``compute()`` scores everything updated
since the last ``reset()`` in one movers call and returns the corpus score as a float64 scalar tensor
(``result`` holds the per-segment scores and the signature). The object keeps the token vectors it computed in
an in-memory cache (:data:`~movers.text.embedding_cache.OBJECT_CACHE_BYTES`; ``reset()`` keeps it), so each
epoch's validation embeds the same references once; ``cache=False`` turns it off, scores agree to float32
rounding (:data:`movers.core.result.REGROUPING_ATOL`: another grouping of the texts in encoder batches; so does a
``forward`` per batch then ``compute`` compared with one ``update`` of everything).

Under DDP (torch.distributed, e.g. Lightning's ``strategy="ddp"``) torchmetrics syncs tensors only, so the
texts travel as UTF-8 bytes in ``uint8`` states (with their lengths), gathered by torchmetrics' own sync.
Every rank then holds the whole corpus, and the scoring itself is shared: inside ``compute`` every rank
embeds and scores ``1/world`` of the segments (:func:`movers.distributed_scoring`) and all return the same
result, equal to one ``movers.<metric>`` call on the whole corpus (to float32 rounding).

**Pass the dataset indices** (``update(preds, target, indices=batch["index"])``: your ``Dataset`` returns
each example's position) to get exactly that call: ``DistributedSampler`` deals examples to ranks
round-robin and pads the last round with repeats of the first examples, so the gathered order is
interleaved and holds duplicates. With indices, ``compute`` restores dataset order and keeps the first
copy of a repeated index (rank 0's; a repeat must carry the same references, its prediction may differ
when generation samples). That matters for every corpus statistic
(per-call IDF, ΔBLEU's sums) and for TWMD's order-dependent batch centring. Without indices the metric
scores the gathered segments as they come (rank by rank), duplicates included.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import missing_extra

try:
    import torchmetrics
except ImportError as err:  # an optional extra
    raise ImportError(missing_extra("movers.torchmetrics", "torchmetrics", "lightning")) from err
from torchmetrics.utilities.data import dim_zero_cat

from ... import metrics as registry
from ...core import validation as v
from ...core.result import Scores
from ...core.scope import distributed_scoring
from ...core.spec import MetricSpec
from ...pipeline.call import checked_options
from ...text.embedding_cache import object_cache_options

__all__ = ["TextMetric", "metric_class"]

_STATES = ("text_bytes", "text_lengths", "reference_counts", "indices", "weights")
_TORCHMETRICS_ARGS = {"compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn",
                      "distributed_available_fn", "sync_on_compute", "compute_with_cache"}


class TextMetric(torchmetrics.Metric):
    """A movers metric (`metric`: a registered slug) with `options` (its keyword options), as a torchmetrics
    ``Metric``; torchmetrics' own arguments (``sync_on_compute``, ``process_group``, ...) are accepted too.
    `share_scoring` (default True): under DDP, every rank scores a part of the synced corpus; False: every
    rank scores all of it alone (no collective inside ``compute``; same result)."""

    is_differentiable = False
    full_state_update = False
    higher_is_better: bool | None = None  # each metric's class states its own (Lazy-EMD: a distance)
    # states (lists of tensors per update; one gathered tensor each after a DDP sync)
    text_bytes: list[torch.Tensor]
    text_lengths: list[torch.Tensor]
    reference_counts: list[torch.Tensor]
    indices: list[torch.Tensor]
    weights: list[torch.Tensor]
    # torchmetrics' caches of the last compute() and forward() results (moved with the module by _apply)
    _computed: Any
    _forward_cache: Any

    def __init__(self, metric: str | MetricSpec, *, share_scoring: bool = True, **options: Any) -> None:
        tm_args = {k: options.pop(k) for k in list(options) if k in _TORCHMETRICS_ARGS}
        super().__init__(**tm_args)
        try:
            self.spec = registry.get(metric)
        except ValueError:
            raise ValueError(f"movers.torchmetrics: `metric` must be one of {registry.slugs()}, "
                             f"got {metric!r}.") from None
        for key in ("predictions", "references", "reference_weights"):
            if key in options:
                raise TypeError(f"{self.spec.slug}: `{key}` is an input of update(), not an option.")
        self.options = dict(options)
        checked_options(self.spec, self.options)  # a bad option fails here, as a call would, not at compute
        self.share_scoring = bool(share_scoring)
        self._function = registry.function(self.spec)
        self._movers_cache = None
        self.result: Scores | None = None
        self.add_state("text_bytes", default=[], dist_reduce_fx="cat")      # uint8: UTF-8 of every text
        self.add_state("text_lengths", default=[], dist_reduce_fx="cat")    # int64: bytes per text
        self.add_state("reference_counts", default=[], dist_reduce_fx="cat")  # int64: references per segment
        self.add_state("indices", default=[], dist_reduce_fx="cat")         # int64: dataset index, or -1
        self.add_state("weights", default=[], dist_reduce_fx="cat")         # float64: reference weights (ΔBLEU)

    # ---------------------------------------------------------------------------------------- update

    def update(self, preds: Sequence[str], target: Sequence[str | Sequence[str]],
               indices: Sequence[int] | torch.Tensor | None = None,
               reference_weights: Sequence[Sequence[float]] | None = None) -> None:
        """Add a batch: `preds` (strings), `target` (a reference string or a list of them per prediction),
        optionally `indices` (each example's position in the dataset; see the module docs) and, for metrics
        that take them (ΔBLEU), `reference_weights` shaped like the references."""
        name = self.spec.slug
        # checked as given: list() of a str, dict or set would score its characters, keys or hash order
        preds, refs = v.check_pairs(name, preds, _listed(target), allow_empty_text=True)
        n = len(preds)
        if indices is None:
            index = torch.full((n,), -1, dtype=torch.int64)
        else:
            index = torch.as_tensor(indices).detach().to("cpu", torch.int64).flatten()
            if index.numel() != n or bool((index < 0).any()):
                raise ValueError(f"{name}: `indices` must hold one non-negative dataset index per prediction, "
                                 f"got {index.tolist()[:10]} for {n} predictions.")
        if reference_weights is not None:
            if "reference_weights" not in self.spec.extra_inputs:
                raise TypeError(f"{name}: takes no `reference_weights`.")
            weights = v.check_reference_weights(name, reference_weights, refs)
            self.weights.append(torch.tensor([w for row in weights for w in row], dtype=torch.float64))
        texts = [t.encode("utf-8") for p, group in zip(preds, refs, strict=True) for t in (p, *group)]
        blob = b"".join(texts)
        self.text_bytes.append(torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob
                               else torch.zeros(0, dtype=torch.uint8))
        self.text_lengths.append(torch.tensor([len(t) for t in texts], dtype=torch.int64))
        self.reference_counts.append(torch.tensor([len(g) for g in refs], dtype=torch.int64))
        self.indices.append(index)

    # --------------------------------------------------------------------------------------- compute

    def compute(self) -> torch.Tensor:
        """Score the corpus in one movers call (shared across ranks under DDP); the corpus score as a float64
        scalar tensor. The full :class:`~movers.core.result.Scores` is kept in :attr:`result`."""
        preds, refs, weights = self._corpus()
        call = {"reference_weights": weights} if weights is not None else {}
        options = object_cache_options(self, self.spec, self.options)
        if self.share_scoring and self._is_synced and _world(self.process_group) > 1:
            with distributed_scoring(self.process_group):
                result = self._function(preds, refs, **call, **options)
        else:
            result = self._function(preds, refs, **call, **options)
        self.result = result
        return torch.tensor(result.score, dtype=torch.float64)

    def _apply(self, fn: Any, exclude_state: Sequence[str] = ()) -> torch.nn.Module:
        """Move the states with the module (``.to(device)``, ``.cuda()``) but never change their dtype: they
        are texts as UTF-8 bytes with int64 lengths and counts, and float64 reference weights, which
        ``set_dtype(torch.float16)`` or a half-precision ``.to`` would round (a byte length above 2,048 in
        float16, 256 in bfloat16), shifting every text boundary after it. The score is float64 either way: the
        score torchmetrics caches after ``compute`` (and ``forward``'s) moves with the module but keeps float64,
        where torchmetrics would round it to the new dtype."""
        computed, forwarded = self._computed, self._forward_cache
        this = super()._apply(fn, exclude_state=(*exclude_state, *_STATES))
        device = fn(torch.zeros(1, device=self.device)).device
        for key in _STATES:
            value = getattr(this, key)
            setattr(this, key, value.to(device) if isinstance(value, torch.Tensor) else [t.to(device) for t in value])
        self._computed = computed.to(device) if isinstance(computed, torch.Tensor) else computed  # this is self
        self._forward_cache = forwarded.to(device) if isinstance(forwarded, torch.Tensor) else forwarded
        return this

    def merge_state(self, incoming_state: dict[str, Any] | torchmetrics.Metric) -> None:
        """torchmetrics' ``merge_state``: the segments of `incoming_state` join this metric's (before them: the
        order torchmetrics gives concatenated states), and the score cached by an earlier ``compute`` is dropped,
        so the next ``compute`` scores the merged corpus."""
        super().merge_state(incoming_state)
        self._computed = None
        self.result = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_movers_cache"] = None  # the in-memory cache is the process's own: not pickled or deep-copied
        return state

    def _corpus(self) -> tuple[list[str], list[list[str]], list[list[float]] | None]:
        """The updated segments (every rank's after a sync), in dataset order without repeats when indexed."""
        name = self.spec.slug
        counts = _cat(self.reference_counts, torch.int64).tolist()
        if not counts:
            raise ValueError(f"{name}: compute() before any update(); add predictions and references first.")
        lengths = _cat(self.text_lengths, torch.int64).tolist()
        blob = _cat(self.text_bytes, torch.uint8).cpu().numpy().tobytes()
        index = _cat(self.indices, torch.int64).tolist()
        flat_weights = _cat(self.weights, torch.float64).tolist()
        if flat_weights and len(flat_weights) != len(lengths) - len(counts):
            raise ValueError(f"{name}: `reference_weights` were passed to some update() calls and not others.")
        texts, at = [], 0
        for size in lengths:
            texts.append(blob[at:at + size].decode("utf-8"))
            at += size
        segments, t, w = [], 0, 0
        for k in counts:
            segments.append((texts[t], texts[t + 1:t + 1 + k], flat_weights[w:w + k] if flat_weights else None))
            t, w = t + 1 + k, w + k
        if any(i >= 0 for i in index):
            if any(i < 0 for i in index):
                raise ValueError(f"{name}: `indices` were passed to some update() calls and not others; pass them "
                                 f"to every call (or to none).")
            by_index: dict[int, Any] = {}
            for i, segment in zip(index, segments, strict=True):
                # a repeat keeps the first copy (rank 0's for DistributedSampler's padding); its prediction
                # may differ (sampled generation), its references may not
                if i in by_index and by_index[i][1:] != segment[1:]:
                    raise ValueError(f"{name}: dataset index {i} was updated twice with different references; "
                                     f"`indices` must be positions in the dataset, not in the batch.")
                by_index.setdefault(i, segment)
            segments = [by_index[i] for i in sorted(by_index)]
        preds = [p for p, _, _ in segments]
        refs = [list(r) for _, r, _ in segments]
        weights = [list(ws or ()) for _, _, ws in segments] if flat_weights else None
        return preds, refs, weights

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={val!r}" for k, val in self.options.items())
        return f"{type(self).__name__}({options})"


def _listed(target: Any) -> Any:
    """References as given, with tuples of references (a collate function's output) as lists."""
    if isinstance(target, (list, tuple)):
        return [list(t) if isinstance(t, tuple) else t for t in target]
    return target


def _cat(state: Any, dtype: torch.dtype) -> torch.Tensor:
    """A list state (before a sync) or its gathered tensor (after one) as one flat tensor."""
    if isinstance(state, list):
        return dim_zero_cat(state).to(dtype) if state else torch.zeros(0, dtype=dtype)
    return state.flatten().to(dtype)


def _world(group: Any) -> int:
    import torch.distributed as dist

    return dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1


_CLASSES: dict[str, type[TextMetric]] = {}


def metric_class(metric: str | MetricSpec) -> type[TextMetric]:
    """The ``TextMetric`` subclass of a registered metric (``movers.torchmetrics.<Title>``)."""
    spec = registry.get(metric)
    if spec.slug not in _CLASSES:
        title = spec.class_title()

        def __init__(self: TextMetric, *, share_scoring: bool = True, **options: Any) -> None:
            TextMetric.__init__(self, spec, share_scoring=share_scoring, **options)

        doc = (f"{spec.title} as a torchmetrics Metric: ``{title}(**options)`` takes the keyword options of "
               f"``movers.{spec.slug}``; see :class:`TextMetric` and the module docs (DDP, indices).")
        _CLASSES[spec.slug] = type(title, (TextMetric,), {"__init__": __init__, "__doc__": doc,
                                                          "__module__": "movers.torchmetrics",
                                                          "higher_is_better": spec.higher_is_better})
    return _CLASSES[spec.slug]


def classes() -> dict[str, type[TextMetric]]:
    """Class name -> class, for every registered metric."""
    return {cls.__name__: cls for cls in (metric_class(s) for s in registry.slugs())}


def __getattr__(name: str) -> Any:
    found = classes().get(name)
    if found is None:
        raise AttributeError(f"module 'movers.torchmetrics' has no attribute {name!r}; the metrics are "
                             f"{sorted(classes())}.")
    return found
