"""Guards applied after tokenisation, before any model run: texts with no content token, and transport
problems too large for memory.

* **No content.** A text can be non-empty and still give the encoder nothing to compare: emoji become
  ``[UNK]``; zero-width, control and NUL characters are dropped by the tokenizer; a metric's own
  filters can remove every token (MoverScore's punctuation, subword and stop-word filters). Scoring
  such a text compares special tokens or ``[UNK]`` vectors only, which gives an arbitrary (often a
  perfect) score, so the embedding metrics raise instead (:func:`check_content`).
* **Size.** Exact EMD, unbalanced Sinkhorn and TWMD's self-normalisation each hold dense float64
  ``[n, m]`` matrices per text pair. :data:`MAX_TRANSPORT_ENTRIES` bounds ``n·m``;
  :func:`check_transport_size` raises before the encoder runs, naming the limit and the fix.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from .token_batch import TokenTexts

__all__ = ["MAX_TRANSPORT_ENTRIES", "check_content", "check_transport_size", "check_encoder_inputs", "text_labels"]

MAX_TRANSPORT_ENTRIES = 1 << 25
"""Largest ``n·m`` (tokens × tokens) of one transport problem: 33.5 M entries, 256 MiB per float64 matrix,
about 4,000 × 8,000 tokens (3,500 × 7,100 words of English news text with MiniLM, 1.13 tokens per word).
Raise it (``movers.text.guards.MAX_TRANSPORT_ENTRIES = ...``) on a machine with more memory; it never changes a
score, only refuses."""


Filtered = Callable[[TokenTexts], np.ndarray]
"""A metric's token filter: texts' tokens (ids and classes) -> [T] bool, the tokens its filters remove."""


def text_labels(n_predictions: int, references: Sequence[Sequence[str]]) -> list[str]:
    """Argument labels of ``predictions + [r for group in references for r in group]``."""
    labels = [f"predictions[{i}]" for i in range(n_predictions)]
    for i, group in enumerate(references):
        labels += [f"references[{i}]"] if len(group) == 1 else [f"references[{i}][{j}]" for j in range(len(group))]
    return labels


def check_encoder_inputs(metric: str, encoder, predictions: Sequence[str], references: Sequence[Sequence[str]],
                         *, filtered: Filtered | None = None, self_normalised: bool = False) -> list[str]:
    """Both guards for a contextual-embedding metric, from the tokenizer alone (no model run).

    A text without any non-special token other than ``[UNK]``, as embedded (``long_texts`` applied),
    raises (:func:`check_content`): the encoder saw nothing of it. Sizes count every token incl.
    special tokens; with `self_normalised` (TWMD) each text is also compared with itself, so
    ``max(n, m)²`` is bounded. Returns the labels of the texts whose real tokens the metric's filter
    `filtered` removes entirely (the caller warns: only special tokens, which did see the text, remain).
    """
    if not hasattr(encoder, "packed_ids"):
        return []  # a duck-typed encoder without a tokenizer (hand-made vectors in tests): nothing to inspect
    flat = [r for group in references for r in group]
    backbone = encoder.backbone
    lead, tail = len(backbone.prefix), len(backbone.suffix)
    unk = getattr(backbone.tokenizer, "unk_token_id", None)
    # Some thousands of texts at a time, keeping only lengths and flags (memory bounded for any call size).
    length_parts, empty, filtered_texts = [], [], []
    for start, packed in encoder.iter_packed_ids(list(predictions) + flat):
        lengths = packed.lengths
        length_parts.append(lengths)
        position = packed.position
        real = (position >= lead) & (position < lengths[packed.text_of] - tail)
        if unk is not None:
            real &= packed.ids != unk
        has_real = packed.count(real) > 0
        empty += (start + np.flatnonzero(~has_real)).tolist()
        if filtered is not None:
            kept = real & ~filtered(TokenTexts(packed, encoder.vocabulary))
            filtered_texts += (start + np.flatnonzero(has_real & (packed.count(kept) == 0))).tolist()
    if empty or filtered_texts:
        labels = text_labels(len(predictions), references)
        check_content(metric, [labels[j] for j in empty], [False] * len(empty))
        filtered_out = [labels[j] for j in filtered_texts]
    else:
        filtered_out = []
    lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, dtype=np.int64)
    n_pred = len(predictions)
    owner = np.fromiter((i for i, group in enumerate(references) for _ in group), dtype=np.int64, count=len(flat))
    n, m = lengths[owner], lengths[n_pred:]
    if self_normalised:
        n = m = np.maximum(n, m)
    if len(owner):
        worst = int(np.argmax(n * m))
        i, k = int(owner[worst]), int(worst)  # named by its arguments (Ray and streams name their rows from them)
        label = f"predictions[{i}] with " + (f"references[{i}]" if len(references[i]) == 1 else
                                             f"references[{i}][{k - int(np.flatnonzero(owner == i)[0])}]")
        check_transport_size(metric, [(label, int(n[worst]), int(m[worst]))])
    return filtered_out


def check_content(metric: str, labels: Sequence[str], has_content: Sequence[bool]) -> None:
    """Raise ValueError naming every text (by its argument label, e.g. ``predictions[3]``) without content.
    """
    bad = [label for label, ok in zip(labels, has_content, strict=False) if not ok]
    if not bad:
        return
    shown = ", ".join(dict.fromkeys(bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise ValueError(
        f"{metric}: {shown} {'has' if len(bad) == 1 else 'have'} no content token after tokenisation: only "
        f"[UNK] or nothing (emoji, zero-width, control or NUL characters). The encoder saw nothing of it, "
        f"so any score would be arbitrary (two such texts would even match perfectly); remove such texts or replace "
        f"them with a placeholder.")


def check_transport_size(metric: str, problems: Iterable[tuple[str, int, int]],
                         limit: int | None = None) -> None:
    """Raise ValueError when one problem ``(label, n, m)`` has ``n·m`` above `limit`
    (default :data:`MAX_TRANSPORT_ENTRIES`, read at call time)."""
    limit = MAX_TRANSPORT_ENTRIES if limit is None else limit
    worst = max(problems, key=lambda p: p[1] * p[2], default=None)
    if worst is None or worst[1] * worst[2] <= limit:
        return
    label, n, m = worst
    gib = n * m * 8 / 2**30
    raise ValueError(
        f"{metric}: {label} needs a {n} x {m} transport problem ({n * m:,} entries, {gib:.1f} GiB per float64 "
        f"matrix, several are held), above the limit movers.text.guards.MAX_TRANSPORT_ENTRIES = {limit:,}. "
        f"Score shorter units (paragraphs or sentences), pass long_texts='truncate', or raise the limit if "
        f"this machine has the memory.")
