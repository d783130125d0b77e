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
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
from sacrebleu.metrics.bleu import BLEU, BLEUScore
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from ..core import cache as _cache
from ..core.options import Widget, option
from ..core.result import Scores
from ..core.scope import current_scope
from ..core.signature import Signature, library_versions, nrefs_label
from ..core.spec import Example, Inputs, MetricSpec, Output
from ..core.summation import ExactSum
from ..core.validation import check_choice, check_reference_weights
from ..pipeline.call import lang_option, unicode_option
from ..text.languages import language

__all__ = ["DELTA_BLEU", "DeltaBleuOptions", "TOKENIZERS", "MAX_NGRAM_ORDER"]


# sacreBLEU's tokenizers that run offline with sacreBLEU's own dependencies; the SentencePiece ones
# ('spm', 'flores101', 'flores200', 'spBLEU-1K') download their model at first use, so they are refused.
_NEEDS_DOWNLOAD = frozenset({"spm", "flores101", "flores200", "spBLEU-1K"})
TOKENIZERS = tuple(t for t in BLEU.TOKENIZERS if t not in _NEEDS_DOWNLOAD)

_FORK_SMOOTH_VALUE = 0.0  # sacreBLEU 1.4.1's SMOOTH_VALUE_DEFAULT, for 'floor' and 'add-k' alike


MAX_NGRAM_ORDER = 100
"""The largest `max_ngram_order`: n-grams of every order up to it are counted in every text, so the time grows with
it (an order of 1,000 takes seconds a pair); no text scored in practice has a matching 100-gram but a copy."""


@dataclass(frozen=True, kw_only=True)
class DeltaBleuOptions:
    variant: Literal["paper", "galley"] = option("paper", """"paper" (default: the formula above) or "galley"
        (Galley's sacreBLEU fork).""")
    tokenize: str | None = option(None, """A sacreBLEU tokenizer; None (default): sacreBLEU's choice for `lang`
        ("zh", "ja-mecab", "ko-mecab", else "13a"); "13a", "intl", "char", "none", ... (SentencePiece ones download
        a model: refused).""",
                                  widget=Widget("dropdown", ("(lang)", "13a", "intl", "zh", "ja-mecab", "ko-mecab",
                                                             "char", "none"), {"(lang)": None}))
    lowercase: bool = option(False, "Lowercase hypotheses and references (never the weights).")
    max_ngram_order: int = option(4, f"N; 4 as BLEU (the paper's experiments used 2); at most {MAX_NGRAM_ORDER}.",
                                  low=1, high=MAX_NGRAM_ORDER, integer=True)
    smooth_method: Literal["none", "floor", "add-k", "exp"] = option("exp", """sacreBLEU's smoothing, applied to
        the weighted counts.""")
    smooth_value: float | None = option(None, """For "floor" / "add-k"; None = the default of the sacreBLEU the
        variant follows (paper: 2.x, floor 0.1 / add-k 1; galley: 1.4.1, 0 for both).""", low=0)
    effective_order: bool = option(False, """Average log precisions only over orders the hypotheses have
        (sacreBLEU's sentence-level setting); applies to corpus and segment scores alike.""")
    unicode: Literal["nfc", "none"] = unicode_option()
    lang: str = lang_option()


class DeltaBleu(MetricSpec[DeltaBleuOptions]):
    slug = "delta_bleu"
    title = "DeltaBLEU"
    Options = DeltaBleuOptions
    summary = """ΔBLEU (discriminative BLEU, Galley et al., ACL 2015) is multi-reference BLEU in which every
        reference carries a human quality weight in [-1, +1]: an n-gram earns the best weighted clipped count
        over the references that contain it, so matching a good reference is rewarded and matching a bad one
        penalised. Without weights it is exactly sacreBLEU's multi-reference BLEU. `variant="paper"` (default)
        follows the paper's formula; `variant="galley"` reproduces Galley's sacreBLEU fork. Scores are 0-100,
        higher is better; the corpus score comes from the summed statistics, the segment scores from each
        segment alone."""
    citation = """\
@inproceedings{galley-etal-2015-deltableu,
    title = "delta{BLEU}: A Discriminative Metric for Generation Tasks with Intrinsically Diverse Targets",
    author = "Galley, Michel and Brockett, Chris and Sordoni, Alessandro and Ji, Yangfeng and Auli, Michael and
              Quirk, Chris and Mitchell, Margaret and Gao, Jianfeng and Dolan, Bill",
    booktitle = "Proceedings of ACL-IJCNLP 2015 (Volume 2: Short Papers)",
    year = "2015",
    pages = "445--450",
    url = "https://aclanthology.org/P15-2073",
    doi = "10.3115/v1/P15-2073",
}
"""
    codebase_urls = ("https://github.com/mgalley/sacreBLEU", "https://github.com/mjpost/sacrebleu")
    reference_urls = ("https://aclanthology.org/P15-2073",)
    has_plan = False
    allow_empty_text = True
    corpus_from_segments = False
    extra_inputs = ("reference_weights",)
    configs = {"default": (), "weighted": ("reference_weights",)}
    scores_doc = "ΔBLEU of each segment scored on its own, input order, 0-100"
    outputs = (Output("precisions", "list of float", "corpus n-gram precisions, 0-100.", per_segment=False),
               Output("bp", "float", "the brevity penalty.", per_segment=False),
               Output("sys_len", "int", "hypothesis length (tokens).", per_segment=False),
               Output("ref_len", "int", "effective reference length.", per_segment=False),
               Output("counts", "list of float", "weighted matched n-gram counts of the corpus (negative sums set "
                      "to 0).", per_segment=False),
               Output("totals", "list of float", "weighted n-gram counts of the corpus.", per_segment=False))
    module_examples = """
    >>> delta_bleu = evaluate.load("delta_bleu")
    >>> predictions = ["i 'm not sure , let me look .", "yes , i think so ."]
    >>> references = [["i 'm not sure , let me look for you .", "we do n't have it ."],
    ...               ["yes , we have one copy left .", "i do n't think so ."]]
    >>> results = delta_bleu.compute(predictions=predictions, references=references)
    >>> round(results["score"], 2), [round(s, 2) for s in results["scores"]]
    (63.2, [71.2, 39.76])
    >>> results = delta_bleu.compute(predictions=predictions, references=references,
    ...                              reference_weights=[[0.9, -0.4], [0.7, -0.8]])
    >>> round(results["score"], 2), [round(s, 2) for s in results["scores"]]
    (48.85, [71.2, 0.0])
    >>> results["signature"].split("|")[:8]
    ['DeltaBLEU', 'variant:paper', 'nrefs:2', 'w:rated', 'order:4', 'case:mixed', 'eff:no', 'tok:13a']
"""
    space_examples = (
        Example("Galley et al.: a response against a good and a bad rated reference",
                "yes , we have it", "yes , we have one copy ||| no .", "0.8 ||| -0.5"),
        Example("Conversation responses, each with rated references",
                "i am going to the beach this weekend .\nthat sounds like a great idea .",
                "we are going to the beach on saturday . ||| i am staying home this weekend .\n"
                "what a great idea ! ||| that sounds terrible .",
                "0.9 ||| -0.6\n1.0 ||| -0.8"),
        Example("No weights: plain multi-reference BLEU (= sacreBLEU)",
                "The cat sat on the mat.", "The cat sat on a mat. ||| A cat was on the mat."))

    def check(self, o: DeltaBleuOptions) -> None:
        name = _tokenizer_name(o)
        if name in _NEEDS_DOWNLOAD:
            raise ValueError(f"delta_bleu: `tokenize` {name!r} downloads a SentencePiece model at run time, "
                             f"which movers does not do; choose one of {list(TOKENIZERS)}.")
        check_choice("delta_bleu", "tokenize", name, list(TOKENIZERS))
        try:  # a tokenizer whose extra packages are missing (MeCab for "ja-mecab") fails here, before any scoring;
            _cache.cached(("sacrebleu-tokenizer", name), lambda: BLEU(tokenize=name).tokenizer)  # once a process
        except RuntimeError as err:
            chosen = "" if o.tokenize is not None else f" (sacreBLEU's tokenizer for lang={o.lang!r})"
            extra = re.search(r"pip install (\S+)", str(err))
            how = f"pip install '{extra.group(1)}'" if extra else " ".join(str(err).split())
            raise ImportError(f"delta_bleu: `tokenize` {name!r}{chosen} needs packages that are not installed "
                              f"({how}); or pass another `tokenize`.") from None

    def resolve(self, o: DeltaBleuOptions) -> DeltaBleuOptions:
        return replace(o, tokenize=_tokenizer_name(o))

    def worst(self, o: DeltaBleuOptions) -> dict[str, Any]:
        """sacreBLEU scores an empty hypothesis 0."""
        return {"scores": 0.0}

    def inputs(self, name: str, predictions: Any, references: Any, extra: Mapping[str, Any], *,
               allow_empty_predictions: bool) -> Inputs:
        base = super().inputs(name, predictions, references, {}, allow_empty_predictions=True)
        given = extra.get("reference_weights")
        weights = None if given is None else check_reference_weights(name, given, base.references)
        return Inputs(base.predictions, base.references, {"reference_weights": weights})

    def run(self, o: DeltaBleuOptions, inputs: Inputs) -> Scores:
        """Corpus ΔBLEU and one ΔBLEU per segment (each segment scored as a one-segment corpus), 0-100.

        Numerators summed over a corpus (or one segment) that come out negative are set to 0 before
        smoothing, as in Galley's code: matching only negatively rated references scores like matching
        nothing. Denominators use the segment's largest weight, so each segment needs one w > 0. The brevity
        penalty takes the closest reference length over all references of a segment (ties to the shorter),
        whatever their weight, as BLEU and Galley's code do.
        """
        preds, refs, rated = inputs.predictions, inputs.references, inputs.extra.get("reference_weights")
        weights = rated if rated is not None else [[1.0] * len(r) for r in refs]
        order, bleu, score = o.max_ngram_order, _bleu(o), _Scorer(o)
        ngrams = _NgramCache(bleu, o.lowercase, order)
        segment = _paper_segment if o.variant == "paper" else _galley_segment
        # This process scores segments `part` (all of them unless scoring is distributed or streamed); the
        # corpus score comes from the statistics summed over the whole call.
        scope = current_scope()
        stats = [segment(ngrams(preds[i]), [ngrams(r) for r in refs[i]], weights[i], order)
                 for i in scope.part(len(preds))]
        # weighted counts summed exactly (ExactSum): sums of any parts (ranks, blocks) round once, as
        # math.fsum over the whole call does, so the corpus score is the same bits however the call is split
        totals = scope.total([float(sum(s[0] for s in stats)), float(sum(s[1] for s in stats)),
                              *(ExactSum.of(s[2][n] for s in stats) for n in range(order)),
                              *(ExactSum.of(s[3][n] for s in stats) for n in range(order))])
        sums = [float(x) for x in totals]  # type: ignore[arg-type]
        scope.statistics_done()
        scores = scope.gather([score(*s).score for s in stats])
        # per segment [hyp_len, ref_len, correct_1..N, total_1..N], sacreBLEU's order: what resampling tests sum
        statistics = scope.gather([[float(s[0]), float(s[1]), *s[2], *s[3]] for s in stats])
        corpus = score(int(sums[0]), int(sums[1]), sums[2:2 + order], sums[2 + order:])
        signature = Signature("DeltaBLEU", (
            ("variant", o.variant), ("nrefs", nrefs_label(refs)), ("w", "uniform" if rated is None else "rated"),
            ("order", order), ("case", "lc" if o.lowercase else "mixed"), ("eff", o.effective_order),
            ("tok", bleu.tokenizer.signature()), ("smooth", score.label),
        ), library_versions("sacrebleu"))
        extra = {"precisions": [float(p) for p in corpus.precisions], "bp": float(corpus.bp),
                 "sys_len": int(corpus.sys_len), "ref_len": int(corpus.ref_len),
                 "counts": [float(c) for c in corpus.counts], "totals": [float(t) for t in corpus.totals]}
        return Scores(score=float(corpus.score), scores=[float(s) for s in scores], signature=signature,
                      extra=extra, statistics=statistics)

    def corpus_from_statistics(self, o: DeltaBleuOptions, sums: np.ndarray) -> np.ndarray:
        """ΔBLEU of each row of summed segment statistics (negative numerator sums set to 0, as in `run`)."""
        order, score = o.max_ngram_order, _Scorer(o)
        return np.array([score(int(row[0]), int(row[1]), [float(c) for c in row[2:2 + order]],
                               [float(t) for t in row[2 + order:]]).score for row in np.asarray(sums)],
                        dtype=np.float64)

    def details(self, o: DeltaBleuOptions, prediction: str, references: list[str],
                weights: list[float] | None) -> dict[str, Any]:
        """The Space page's table for one segment: every n-gram of the prediction with its credit."""
        rows = delta_bleu_ngrams(prediction, references, weights, variant=o.variant, tokenize=_tokenizer_name(o),
                                 lowercase=o.lowercase, max_ngram_order=o.max_ngram_order)
        return {"caption": "each n-gram of the prediction, the reference whose weight it takes, and its credit "
                           "(numerator) and total (denominator) in the modified precision.",
                "headers": ["n-gram", "n", "count", "reference", "weight", "credit", "total"],
                "data": [[g["ngram"], g["n"], g["count"], g["reference"] or "-", g["weight"], g["credit"],
                          g["total"]] for g in rows]}


def delta_bleu_ngrams(prediction: str, references: list[str], weights: list[float] | None, *,
                      variant: str = "paper", tokenize: str = "13a", lowercase: bool = False,
                      max_ngram_order: int = 4) -> list[dict[str, Any]]:
    """Every n-gram of `prediction` with the credit ΔBLEU gives it (one segment).

    Rows: ``ngram``, ``n``, ``count`` (in the prediction), ``reference`` (1-based index of the reference
    whose weight is used, 0 when no reference has the n-gram), ``weight``, ``credit`` (the numerator term:
    paper: ``max_j w_j · min(#g(h), #g(r_j))``; galley: ``max w_j · min(#g(h), max_j #g(r_j))``) and
    ``total`` (the denominator term ``max_j w_j · #g(h)``). Per order, the credits add up to the
    segment's weighted match counts before negative sums are set to 0. Tokenised with sacreBLEU's
    tokenizer exactly as the metric does.
    """
    weights = list(weights) if weights is not None else [1.0] * len(references)
    tok = BLEU(tokenize=tokenize, lowercase=lowercase, max_ngram_order=max_ngram_order).tokenizer

    def grams(text: str) -> Counter:
        return extract_all_word_ngrams(tok((text.lower() if lowercase else text).rstrip()), 1, max_ngram_order)[0]

    hyp = grams(prediction)
    refs = [grams(r) for r in references]
    max_w = max(weights)
    rows = []
    for gram, count in sorted(hyp.items(), key=lambda kv: (len(kv[0]), kv[0])):
        having = [(j, w, ref[gram]) for j, (ref, w) in enumerate(zip(refs, weights, strict=False)) if gram in ref]
        if not having:
            j, w, credit = -1, 0.0, 0.0
        elif variant == "galley":
            j, w, _ = max(having, key=lambda t: t[1])
            credit = w * min(count, max(k for _, _, k in having))
        else:
            j, w, k = max(having, key=lambda t: t[1] * min(count, t[2]))
            credit = w * min(count, k)
        rows.append({"ngram": " ".join(gram), "n": len(gram), "count": count, "reference": j + 1,
                     "weight": w, "credit": credit, "total": max_w * count})
    return rows


def _tokenizer_name(o: DeltaBleuOptions) -> str:
    """The sacreBLEU tokenizer a call uses: `tokenize`, or the one sacreBLEU picks for the target language."""
    return o.tokenize if o.tokenize is not None else language(o.lang, "delta_bleu").bleu_tokenizer


def _bleu(o: DeltaBleuOptions) -> BLEU:
    """sacreBLEU's own BLEU object (its tokenizer prepares texts exactly as BLEU._preprocess_segment does)."""
    return BLEU(lowercase=o.lowercase, tokenize=_tokenizer_name(o), smooth_method=o.smooth_method,
                smooth_value=o.smooth_value, max_ngram_order=o.max_ngram_order, effective_order=o.effective_order)


class _NgramCache:
    """n-gram counts and length of each text, tokenised once per call."""

    def __init__(self, bleu: BLEU, lowercase: bool, order: int) -> None:
        self.bleu, self.lowercase, self.order = bleu, lowercase, order
        self.cache: dict[str, tuple[Counter, int]] = {}

    def __call__(self, text: str) -> tuple[Counter, int]:
        if text not in self.cache:
            prepared = self.bleu.tokenizer((text.lower() if self.lowercase else text).rstrip())
            self.cache[text] = extract_all_word_ngrams(prepared, 1, self.order)
        return self.cache[text]


class _Scorer:
    """Statistics -> BLEUScore with the variant's scoring and smoothing (value None: the default of the
    sacreBLEU version each variant follows); `label` is the signature's ``smooth`` field."""

    def __init__(self, o: DeltaBleuOptions) -> None:
        self.o = o
        value = o.smooth_value
        if value is None:
            value = (BLEU.SMOOTH_DEFAULTS[o.smooth_method] if o.variant == "paper"
                     else _FORK_SMOOTH_VALUE if o.smooth_method in ("floor", "add-k") else None)
        self.value = value
        self.label = f"{o.smooth_method}[{value:.2f}]" if value is not None and o.smooth_method in ("floor", "add-k") \
            else o.smooth_method

    def __call__(self, sys_len: int, ref_len: int, correct: list[float], total: list[float]) -> BLEUScore:
        finish = _paper_score if self.o.variant == "paper" else _galley_score
        return finish(sys_len, ref_len, correct, total, smooth_method=self.o.smooth_method, smooth_value=self.value,
                      effective_order=self.o.effective_order, max_ngram_order=self.o.max_ngram_order)


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
        containing = [(ref[gram], w) for (ref, _), w in zip(refs, weights, strict=False) if gram in ref]
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
    # sacreBLEU annotates the counts as ints; weighted counts are floats, which its arithmetic takes as they are
    return BLEU.compute_bleu(cast(list[int], [max(c, 0.0) for c in correct]), cast(list[int], list(total)),
                             sys_len, ref_len,
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
    value = 0.0 if smooth_value is None else smooth_value  # resolved by the caller for 'floor' and 'add-k'
    precisions = [0.0] * max_ngram_order
    smooth_mteval = 1.0
    eff_order = max_ngram_order
    for n in range(max_ngram_order):
        if smooth_method == "add-k" and n > 1:
            correct[n] += value
            total[n] += value
        if total[n] == 0:
            break
        if effective_order:
            eff_order = n + 1
        if correct[n] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n] = 100.0 / (smooth_mteval * total[n])
            elif smooth_method == "floor":
                precisions[n] = 100.0 * value / total[n]
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    log_sum = sum(math.log(p) if p > 0 else -9999999999 for p in precisions[:eff_order])  # sacreBLEU's my_log
    score = bp * math.exp(log_sum / eff_order)
    return BLEUScore(score, cast(list[int], correct), cast(list[int], total), precisions, bp, sys_len, ref_len)


DELTA_BLEU = DeltaBleu()
