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

from typing import Callable, Sequence

__all__ = ["MAX_TRANSPORT_ENTRIES", "check_content", "check_transport_size", "check_encoder_inputs", "text_labels"]

MAX_TRANSPORT_ENTRIES = 1 << 25
"""Largest ``n·m`` (tokens × tokens) of one transport problem: 33.5 M entries, 256 MiB per float64 matrix,
about 4,000 × 8,000 tokens (3,500 × 7,100 words of English news text with MiniLM, 1.13 tokens per word). Raise it (``movers.guards.
MAX_TRANSPORT_ENTRIES = ...``) on a machine with more memory; it never changes a score, only refuses."""


KeptTokens = Callable[[Sequence[str]], Sequence[int]]
"""A metric's token filter: all tokens of a text (special tokens included) -> the positions it keeps."""


def text_labels(n_predictions: int, references: Sequence[Sequence[str]]) -> list[str]:
    """Argument labels of ``predictions + [r for group in references for r in group]``."""
    labels = [f"predictions[{i}]" for i in range(n_predictions)]
    for i, group in enumerate(references):
        labels += [f"references[{i}]"] if len(group) == 1 else [f"references[{i}][{j}]" for j in range(len(group))]
    return labels


def check_encoder_inputs(metric: str, encoder, predictions: Sequence[str], references: Sequence[Sequence[str]],
                         *, kept: KeptTokens | None = None, filters: str = "", self_normalised: bool = False) -> None:
    """Both guards for a contextual-embedding metric, from the tokenizer alone (no model run).

    A text has content when one of its non-special tokens, as embedded (``long_texts`` applied), is
    not ``[UNK]`` and is kept by `kept`. Sizes count every token incl. special tokens; with
    `self_normalised` (TWMD), each text is also compared with itself, so ``max(n, m)²`` is bounded.
    """
    if not hasattr(encoder, "token_ids"):
        return  # a duck-typed encoder without a tokenizer (hand-made vectors in tests): nothing to inspect
    flat = [r for group in references for r in group]
    backbone = encoder.backbone
    tokenizer, lead, tail = backbone.tokenizer, len(backbone.prefix), len(backbone.suffix)
    unk = getattr(tokenizer, "unk_token_id", None)
    ids = encoder.token_ids(list(predictions) + flat)
    content = []
    for seq in ids:
        inner = range(lead, len(seq) - tail)
        positions = inner if kept is None else [p for p in kept(tokenizer.convert_ids_to_tokens(seq)) if p in inner]
        content.append(any(seq[p] != unk for p in positions))
    check_content(metric, text_labels(len(predictions), references), content, filters=filters)
    n_pred = len(predictions)
    owner = [i for i, group in enumerate(references) for _ in group]
    problems = []
    for k, i in enumerate(owner):
        n, m = len(ids[i]), len(ids[n_pred + k])
        side = max(n, m) if self_normalised else None
        problems.append((f"segment {i}", side or n, side or m))
    check_transport_size(metric, problems)


def check_content(metric: str, labels: Sequence[str], has_content: Sequence[bool], *, filters: str = "") -> None:
    """Raise ValueError naming every text (by its argument label, e.g. ``predictions[3]``) without content.

    `filters` describes what the metric's options remove (e.g. "punctuation, subword pieces"), for the message.
    """
    bad = [label for label, ok in zip(labels, has_content) if not ok]
    if not bad:
        return
    removed = f", or only tokens the options remove ({filters})" if filters else ""
    shown = ", ".join(dict.fromkeys(bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise ValueError(
        f"{metric}: {shown} {'has' if len(bad) == 1 else 'have'} no content token after tokenisation: only "
        f"[UNK] or nothing (emoji, zero-width, control or NUL characters){removed}. Scoring it would compare "
        f"special tokens only and give an arbitrary score; remove such texts or replace them with a "
        f"placeholder.")


def check_transport_size(metric: str, problems: Sequence[tuple[str, int, int]],
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
        f"matrix, several are held), above the limit movers.guards.MAX_TRANSPORT_ENTRIES = {limit:,}. "
        f"Score shorter units (paragraphs or sentences), pass long_texts='truncate', or raise the limit if "
        f"this machine has the memory.")
