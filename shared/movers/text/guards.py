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

__all__ = ["MAX_TRANSPORT_ENTRIES", "check_content", "check_transport_size", "check_encoder_inputs", "text_labels"]

MAX_TRANSPORT_ENTRIES = 1 << 25
"""Largest ``n·m`` (tokens × tokens) of one transport problem: 33.5 M entries, 256 MiB per float64 matrix,
about 4,000 × 8,000 tokens (3,500 × 7,100 words of English news text with MiniLM, 1.13 tokens per word).
Raise it (``movers.text.guards.MAX_TRANSPORT_ENTRIES = ...``) on a machine with more memory; it never changes a
score, only refuses."""


KeptTokens = Callable[[Sequence[str]], Sequence[int]]
"""A metric's token filter: all tokens of a text (special tokens included) -> the positions it keeps."""


def text_labels(n_predictions: int, references: Sequence[Sequence[str]]) -> list[str]:
    """Argument labels of ``predictions + [r for group in references for r in group]``."""
    labels = [f"predictions[{i}]" for i in range(n_predictions)]
    for i, group in enumerate(references):
        labels += [f"references[{i}]"] if len(group) == 1 else [f"references[{i}][{j}]" for j in range(len(group))]
    return labels


def check_encoder_inputs(metric: str, encoder, predictions: Sequence[str], references: Sequence[Sequence[str]],
                         *, kept: KeptTokens | None = None, filters: str = "", self_normalised: bool = False
                         ) -> list[str]:
    """Both guards for a contextual-embedding metric, from the tokenizer alone (no model run).

    A text without any non-special token other than ``[UNK]``, as embedded (``long_texts`` applied),
    raises (:func:`check_content`): the encoder saw nothing of it. Sizes count every token incl.
    special tokens; with `self_normalised` (TWMD) each text is also compared with itself, so
    ``max(n, m)²`` is bounded. Returns the labels of the texts whose real tokens the metric's filter
    `kept` removes entirely (the caller warns: only special tokens, which did see the text, remain).
    """
    if not hasattr(encoder, "token_ids"):
        return []  # a duck-typed encoder without a tokenizer (hand-made vectors in tests): nothing to inspect
    flat = [r for group in references for r in group]
    backbone = encoder.backbone
    tokenizer, lead, tail = backbone.tokenizer, len(backbone.prefix), len(backbone.suffix)
    unk = getattr(tokenizer, "unk_token_id", None)
    # Text by text, keeping only lengths and flags (memory bounded for any call size); labels on demand.
    lengths, empty, filtered = [], [], []
    for j, seq in enumerate(encoder.iter_token_ids(list(predictions) + flat)):
        lengths.append(len(seq))
        real = [p for p in range(lead, len(seq) - tail) if seq[p] != unk]
        if not real:
            empty.append(j)
        elif kept is not None:
            keep = set(kept(tokenizer.convert_ids_to_tokens(seq)))
            if not any(p in keep for p in real):
                filtered.append(j)
    if empty or filtered:
        labels = text_labels(len(predictions), references)
        check_content(metric, [labels[j] for j in empty], [False] * len(empty))
        filtered_out = [labels[j] for j in filtered]
    else:
        filtered_out = []
    n_pred = len(predictions)

    def problem(k: int, i: int) -> tuple[str, int, int]:
        n, m = lengths[i], lengths[n_pred + k]
        return (f"segment {i}", *((max(n, m),) * 2 if self_normalised else (n, m)))

    owner = (i for i, group in enumerate(references) for _ in group)
    check_transport_size(metric, (problem(k, i) for k, i in enumerate(owner)))  # one problem at a time
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
