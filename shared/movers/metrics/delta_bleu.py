"""ΔBLEU, discriminative BLEU (Galley et al., ACL 2015): multi-reference BLEU with rated references.

Segment i has a hypothesis h_i and references r_ij, each rated by humans with a weight w_ij in
[-1, +1]. For every n-gram g of h_i, with #g(x) its count in x, the paper's modified precision is

    p_n = sum_i sum_g max_{j: g in r_ij} w_ij * min(#g(h_i), #g(r_ij))
          ------------------------------------------------------------
          sum_i sum_g max_j w_ij * #g(h_i)

and ΔBLEU = BP * exp(sum_n log(p_n) / N), with BLEU's brevity penalty (closest reference length).
With every weight 1 this is multi-reference BLEU, and the code is then sacreBLEU's own (tokenizers,
`BLEU.compute_bleu`), so the numbers are identical. `variant="galley"` reproduces Galley's sacreBLEU
fork (mgalley/sacreBLEU @813fc0a, on sacreBLEU 1.4.1), which credits g with
``max{w_ij : g in r_ij} * min(#g(h_i), max_j #g(r_ij))`` instead, and keeps sacreBLEU 1.4.1's scoring
(no early return of 0 when nothing matches; add-k from order 3; smoothing values 0 by default).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Literal, Sequence

from sacrebleu.metrics.bleu import BLEU, BLEUScore
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from .._validation import (_describe, check_choice, check_number, check_predictions, check_reference_weights,
                           normalise_references)
from ..distributed import current_scope
from ..result import Scores
from ..signature import format_signature, library_versions, nrefs_label

__all__ = ["delta_bleu", "HIGHER_IS_BETTER", "VARIANTS", "TOKENIZERS"]

HIGHER_IS_BETTER = True
VARIANTS = ("paper", "galley")
SMOOTH_METHODS = tuple(BLEU.SMOOTH_DEFAULTS)  # ('none', 'floor', 'add-k', 'exp')
# sacreBLEU's tokenizers that run offline with sacreBLEU's own dependencies; the SentencePiece ones
# ('spm', 'flores101', 'flores200', 'spBLEU-1K') download their model at first use, so they are refused.
_NEEDS_DOWNLOAD = frozenset({"spm", "flores101", "flores200", "spBLEU-1K"})
TOKENIZERS = tuple(t for t in BLEU.TOKENIZERS if t not in _NEEDS_DOWNLOAD)

_NAME = "delta_bleu"
_FORK_SMOOTH_VALUE = 0.0  # sacreBLEU 1.4.1's SMOOTH_VALUE_DEFAULT, for 'floor' and 'add-k' alike


def delta_bleu(predictions: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]],
               reference_weights: Sequence[float] | Sequence[Sequence[float]] | None = None, *,
               variant: Literal["paper", "galley"] = "paper", tokenize: str = "13a", lowercase: bool = False,
               max_ngram_order: int = 4, smooth_method: str = "exp", smooth_value: float | None = None,
               effective_order: bool = False) -> Scores:
    """Corpus ΔBLEU and one ΔBLEU per segment (each segment scored as a one-segment corpus), 0-100.

    Higher is better. Numerators summed over a corpus (or one segment) that come out negative are set to
    0 before smoothing, as in Galley's code: matching only negatively rated references scores like
    matching nothing. Denominators use the segment's largest weight, so each segment needs one w > 0.
    The brevity penalty takes the closest reference length over all references of a segment (ties to
    the shorter), whatever their weight, as BLEU and Galley's code do.

    Args:
        predictions: Hypotheses, one per segment (empty strings allowed, as in sacreBLEU).
        references: One reference per segment (str) or a non-empty list per segment (ragged allowed).
        reference_weights: Same shape as `references` (a number where the reference is a str), each
            in [-1, 1] with at least one > 0 per segment; None = all 1 (plain multi-reference BLEU).
        variant: "paper" (the formula above) or "galley" (Galley's sacreBLEU fork).
        tokenize: A sacreBLEU tokenizer name ("13a", "intl", "zh", "char", "none", ...).
        lowercase: Lowercase hypotheses and references (never the weights).
        max_ngram_order: N; 4 as BLEU (the paper's experiments used 2).
        smooth_method, smooth_value: sacreBLEU's smoothing ("exp", "floor", "add-k", "none"), applied
            to the weighted counts; value None = the default of the sacreBLEU the variant follows
            (paper: 2.x, floor 0.1 / add-k 1; galley: 1.4.1, 0 for both).
        effective_order: Average log precisions only over orders the hypotheses have (sacreBLEU's
            sentence-level setting); applies to corpus and segment scores alike.
    Returns:
        :class:`~movers.result.Scores` with ``score`` (corpus ΔBLEU), ``scores`` (per segment,
        input order), ``signature``, and in ``extra``: ``precisions`` (0-100), ``bp``, ``sys_len``,
        ``ref_len``, ``counts`` (weighted matches, negative sums set to 0), ``totals`` (weighted counts).
    Raises:
        ValueError / TypeError: On malformed inputs or options (the message names the argument and,
        for weights, the segment index).

    >>> out = delta_bleu(["yes , we have it"], [["yes , we have one copy", "no ."]], [[0.8, -0.5]])
    >>> round(out.score, 2), [round(c, 2) for c in out.extra["counts"]], round(out.extra["bp"], 4)
    (54.75, [3.2, 2.4, 1.6, 0.8], 0.8187)
    """
    preds = check_predictions(_NAME, predictions, allow_empty_text=True)
    refs = normalise_references(_NAME, references, len(preds), allow_empty_text=True)
    weights = check_reference_weights(_NAME, reference_weights, refs)
    check_choice(_NAME, "variant", variant, list(VARIANTS))
    if tokenize in _NEEDS_DOWNLOAD:
        raise ValueError(f"{_NAME}: `tokenize` {tokenize!r} downloads a SentencePiece model at run time, which "
                         f"movers does not do; choose one of {list(TOKENIZERS)}.")
    check_choice(_NAME, "tokenize", tokenize, list(TOKENIZERS))
    check_choice(_NAME, "smooth_method", smooth_method, list(SMOOTH_METHODS))
    if smooth_value is not None:
        check_number(_NAME, "smooth_value", smooth_value, low=0)
    check_number(_NAME, "max_ngram_order", max_ngram_order, low=1, integer=True)
    for arg, value in (("lowercase", lowercase), ("effective_order", effective_order)):
        if not isinstance(value, bool):
            raise TypeError(f"{_NAME}: `{arg}` must be a bool, got {type(value).__name__} {_describe(value)}.")

    # sacreBLEU's own tokenizer object; texts are prepared exactly as BLEU._preprocess_segment does.
    bleu = BLEU(lowercase=lowercase, tokenize=tokenize, smooth_method=smooth_method, smooth_value=smooth_value,
                max_ngram_order=max_ngram_order, effective_order=effective_order)
    cache: dict[str, tuple[Counter, int]] = {}

    def ngrams(text: str) -> tuple[Counter, int]:
        if text not in cache:
            prepared = bleu.tokenizer((text.lower() if lowercase else text).rstrip())
            cache[text] = extract_all_word_ngrams(prepared, 1, max_ngram_order)
        return cache[text]

    segment = _paper_segment if variant == "paper" else _galley_segment
    finish = _paper_score if variant == "paper" else _galley_score
    if smooth_value is None:  # the default of the sacreBLEU version each variant follows
        smooth_value = (BLEU.SMOOTH_DEFAULTS[smooth_method] if variant == "paper"
                        else _FORK_SMOOTH_VALUE if smooth_method in ("floor", "add-k") else None)
    options = dict(smooth_method=smooth_method, smooth_value=smooth_value, effective_order=effective_order,
                   max_ngram_order=max_ngram_order)

    # This process scores segments `part` (all of them unless scoring is distributed or streamed); the
    # corpus score comes from the statistics summed over the whole call.
    scope = current_scope()
    part = scope.part(len(preds))
    stats = []
    for i in part:
        stats.append(segment(ngrams(preds[i]), [ngrams(r) for r in refs[i]], weights[i], max_ngram_order))
    sums = scope.total([float(sum(s[0] for s in stats)), float(sum(s[1] for s in stats)),
                        *(math.fsum(s[2][n] for s in stats) for n in range(max_ngram_order)),
                        *(math.fsum(s[3][n] for s in stats) for n in range(max_ngram_order))])
    scope.statistics_done()
    scores = scope.gather([finish(*s, **options).score for s in stats])
    corpus = finish(int(sums[0]), int(sums[1]), sums[2:2 + max_ngram_order], sums[2 + max_ngram_order:], **options)

    smooth_label = f"{smooth_method}[{smooth_value:.2f}]" if smooth_method in ("floor", "add-k") else smooth_method
    signature = format_signature("DeltaBLEU", [
        ("variant", variant),
        ("nrefs", nrefs_label(refs)),
        ("w", "uniform" if reference_weights is None else "rated"),
        ("order", max_ngram_order),
        ("case", "lc" if lowercase else "mixed"),
        ("eff", effective_order),
        ("tok", bleu.tokenizer.signature()),
        ("smooth", smooth_label),
        *library_versions("sacrebleu"),
    ])
    extra = {"precisions": [float(p) for p in corpus.precisions], "bp": float(corpus.bp),
             "sys_len": int(corpus.sys_len), "ref_len": int(corpus.ref_len),
             "counts": [float(c) for c in corpus.counts], "totals": [float(t) for t in corpus.totals]}
    return Scores(score=float(corpus.score), scores=[float(s) for s in scores], signature=signature, extra=extra)


# ---------------------------------------------------------------- input checks

# ---------------------------------------------------------------- segment statistics
# Each returns (hyp_len, closest_ref_len, correct[N], total[N]); correct may be negative.

def _closest_length(hyp_len: int, ref_lens: list[int]) -> int:
    """BLEU's effective reference length: the closest one, ties resolved to the shorter."""
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


def _segment_statistics(hyp: tuple[Counter, int], refs: list[tuple[Counter, int]], weights: list[float],
                        order: int, credit) -> tuple[int, int, list[float], list[float]]:
    """Weighted BLEU statistics of one segment: every hypothesis n-gram adds ``max(w) * count`` to its
    order's total and ``credit(count, [(count in ref, w) for each reference holding it])`` to its matches."""
    hyp_ngrams, hyp_len = hyp
    max_w = max(weights)
    correct, total = [0.0] * order, [0.0] * order
    for gram, count in hyp_ngrams.items():
        n = len(gram) - 1
        total[n] += max_w * count
        containing = [(ref[gram], w) for (ref, _), w in zip(refs, weights) if gram in ref]
        if containing:
            correct[n] += credit(count, containing)
    return hyp_len, _closest_length(hyp_len, [length for _, length in refs]), correct, total


def _paper_segment(hyp, refs, weights, order):
    """Galley et al. (2015) §3: each n-gram takes its best per-reference weighted clipped count."""
    return _segment_statistics(hyp, refs, weights, order,
                               lambda count, containing: max(w * min(count, k) for k, w in containing))


def _galley_segment(hyp, refs, weights, order):
    """mgalley/sacreBLEU `weighted_ref_stats` + `corpus_bleu`: max weight times max-reference clipping."""
    return _segment_statistics(hyp, refs, weights, order, lambda count, containing: (
        max(w for _, w in containing) * min(count, max(k for k, _ in containing))))


# ---------------------------------------------------------------- from statistics to a score

def _paper_score(sys_len: int, ref_len: int, correct: list[float], total: list[float], *, smooth_method: str,
                 smooth_value: float | None, effective_order: bool, max_ngram_order: int) -> BLEUScore:
    """sacreBLEU 2.x's own `BLEU.compute_bleu` on the weighted statistics (negative sums set to 0)."""
    return BLEU.compute_bleu([max(c, 0.0) for c in correct], list(total), sys_len, ref_len,
                             smooth_method=smooth_method, smooth_value=smooth_value,
                             effective_order=effective_order, max_ngram_order=max_ngram_order)


def _galley_score(sys_len: int, ref_len: int, correct: list[float], total: list[float], *, smooth_method: str,
                  smooth_value: float | None, effective_order: bool, max_ngram_order: int) -> BLEUScore:
    """sacreBLEU 1.4.1's `compute_bleu`, which Galley's fork calls. It differs from 2.x in three ways:
    no early return of 0 when no n-gram matches (so 'exp' smoothing still gives a positive score),
    'add-k' starts at order 3 (its 0-based loop tests ``n > 1``; 2.x starts at order 2), and the
    default smoothing value is 0 (`_FORK_SMOOTH_VALUE`, resolved by the caller)."""
    correct = [max(c, 0.0) for c in correct]
    total = list(total)
    precisions = [0.0] * max_ngram_order
    smooth_mteval = 1.0
    eff_order = max_ngram_order
    for n in range(max_ngram_order):
        if smooth_method == "add-k" and n > 1:
            correct[n] += smooth_value
            total[n] += smooth_value
        if total[n] == 0:
            break
        if effective_order:
            eff_order = n + 1
        if correct[n] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n] = 100.0 / (smooth_mteval * total[n])
            elif smooth_method == "floor":
                precisions[n] = 100.0 * smooth_value / total[n]
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    log_sum = sum(math.log(p) if p > 0 else -9999999999 for p in precisions[:eff_order])  # sacreBLEU's my_log
    score = bp * math.exp(log_sum / eff_order)
    return BLEUScore(score, correct, total, precisions, bp, sys_len, ref_len)
