"""ΔBLEU: parity with Galley's sacreBLEU fork, the paper's formula on hand-computed cases, equality with
sacreBLEU when every weight is 1, properties of the definition, input checks and the evaluate module.

Expected values come from tests/reference/dbleu_* (the fork's outputs and the fixture generator's
independent paper-formula script), from sacreBLEU 2.x itself, from hand computation, and from a small
independent implementation of the paper's formula written below (`_paper_by_definition`).
"""
from __future__ import annotations

import inspect
import json
import math
import random
from collections import Counter

import pytest
import sacrebleu
from sacrebleu.metrics.bleu import BLEU

import movers
from movers import delta_bleu

from .helpers import ATOL_COUNT, data_path, reference_records

STATS = ("precisions", "bp", "sys_len", "ref_len", "counts", "totals")


def _streams_to_segments(streams):
    """sacreBLEU/fork orientation (streams[j][i]) -> evaluate orientation (segments[i][j])."""
    return None if streams is None else [list(x) for x in zip(*streams)]


def _max_diff(out, expected, keys=("score",) + STATS):
    worst = 0.0
    for key in keys:
        got = out.score if key == "score" else out.extra[key]
        want = expected[key]
        if isinstance(want, list):
            assert len(got) == len(want), key
            worst = max([worst] + [abs(a - b) for a, b in zip(got, want)])
        else:
            worst = max(worst, abs(got - want))
    return worst


# ---------------------------------------------------------------- parity with Galley's fork (variant="galley")

def test_galley_matches_fork_per_segment():
    records = reference_records("dbleu_dailydialog_segments")
    assert len(records) == 40
    for r in records:
        for key, weights in (("dbleu", [r["ref_weights"]]), ("dbleu_all_weights_1", [[1.0] * 4]),
                             ("bleu_no_weights", None)):
            out = delta_bleu([r["hypothesis"]], [r["references"]], weights, variant="galley")
            assert _max_diff(out, r[key]) <= ATOL_COUNT, (r["id"], key)
            assert out.scores[0] == pytest.approx(r[key]["score"], abs=ATOL_COUNT, rel=0)


def test_galley_matches_fork_per_corpus():
    records = reference_records("dbleu_dailydialog_corpus")
    assert [r["system"] for r in records][-1] == "ALL"
    for r in records:
        refs = _streams_to_segments(r["ref_streams"])
        weights = _streams_to_segments(r["ref_weight_streams"])
        for key, w in (("dbleu", weights), ("dbleu_all_weights_1", [[1.0] * 4] * len(refs)),
                       ("bleu_no_weights", None)):
            out = delta_bleu(r["hypotheses"], refs, w, variant="galley")
            assert _max_diff(out, r[key]) <= ATOL_COUNT, (r["system"], key)


def test_galley_matches_fork_repo_example_and_its_printed_lines():
    for r in reference_records("dbleu_repo_test_example"):
        refs = _streams_to_segments(r["ref_streams"])
        out = delta_bleu(r["hypotheses"], refs, _streams_to_segments(r["ref_weight_streams"]), variant="galley")
        assert _max_diff(out, r["result"]) <= ATOL_COUNT, r["id"]
        # the line test_deltableu.py prints: "BLEU = 33.11 77.3/54.4/28.6/10.0 (BP = 1.000 ...)"
        printed = f"BLEU = {out.score:.2f} " + "/".join(f"{p:.1f}" for p in out.extra["precisions"])
        assert r["expected_in_repo_comment"].startswith(printed), r["id"]


@pytest.mark.parametrize("variant", ["galley", "paper"])
def test_paper_vs_code_cases(variant):
    """`code_galley` is the fork's output; `paper_formula_computed_independently` the generator's own script."""
    records = reference_records("dbleu_paper_vs_code_cases")
    assert len(records) == 10
    for r in records:
        refs = _streams_to_segments(r["ref_streams"])
        out = delta_bleu(r["hypotheses"], refs, _streams_to_segments(r["ref_weight_streams"]), variant=variant)
        if variant == "galley":
            assert _max_diff(out, r["code_galley"]) <= ATOL_COUNT, r["id"]
        else:
            want = dict(r["paper_formula_computed_independently"])
            want["counts"], want["totals"] = want.pop("numerators"), want.pop("denominators")
            assert _max_diff(out, want, ("score", "precisions", "bp", "sys_len", "ref_len", "counts",
                                         "totals")) <= ATOL_COUNT, r["id"]
            assert (out.score != pytest.approx(r["code_galley"]["score"], abs=1e-6)) == r["differ"], r["id"]


def test_fork_error_cases_become_clear_errors_or_work():
    cases = {r["label"]: r for r in reference_records("dbleu_error_cases")}
    kw = cases["all weights <= 0"]["call_kwargs"]
    for variant in ("paper", "galley"):
        with pytest.raises(ValueError, match=r"`reference_weights\[0\]` must contain at least one positive weight"):
            delta_bleu(kw["sys_stream"], _streams_to_segments(kw["ref_streams"]),
                       _streams_to_segments(kw["ref_weights"]), variant=variant)
    # The fork crashes on lowercase=True with weights (it lowercases the weights too); here it lowercases texts.
    kw = cases["lowercase=True with ref_weights"]["call_kwargs"]
    assert kw["sys_stream"] == ["It was ok"] and kw["ref_streams"] == [["it was ok"]]
    out = delta_bleu(kw["sys_stream"], _streams_to_segments(kw["ref_streams"]),
                     _streams_to_segments(kw["ref_weights"]), lowercase=True, max_ngram_order=3)
    assert out.score == pytest.approx(100.0, abs=ATOL_COUNT)  # identical once lowercased (3 tokens: orders 1-3)
    assert "case:lc" in out.signature


def test_lowercase_applies_to_texts_only():
    preds = ["The Cat sat .", "A DOG barked loudly"]
    refs = [["the cat sat on it .", "The Dog ."], ["a dog BARKED", "cats meow"]]
    weights = [[0.6, -0.3], [1.0, 0.2]]
    lowered = delta_bleu([p.lower() for p in preds], [[r.lower() for r in rs] for rs in refs], weights)
    out = delta_bleu(preds, refs, weights, lowercase=True)
    assert out.score == lowered.score and out.scores == lowered.scores
    assert out.extra == lowered.extra
    assert delta_bleu(preds, refs, weights).score < out.score


# ---------------------------------------------------------------- all weights 1 == sacreBLEU, exactly

SMALL_CORPUS = (
    ["The cat sat on the mat.", "", "Hello world, hello world!", "the the the the", "A quick test", "ok"],
    [["The cat is on the mat.", "There is a cat on the mat."], ["Nothing here."],
     ["Hello, world!", "hello world hello", "Hi world."], ["The cat.", "the the"],
     ["A quick brown test.", "Quick test a"], ["ok", "okay", "fine"]],
)


def _sacrebleu_streams(refs):
    """Ragged per-segment references -> sacreBLEU streams padded with None (its variable-reference form)."""
    width = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def _assert_equals_sacrebleu(preds, refs, **options):
    kwargs = dict(options)
    weights_one = [[1.0] * len(r) for r in refs]
    bleu = BLEU(tokenize=kwargs.get("tokenize", "13a"), lowercase=kwargs.get("lowercase", False),
                smooth_method=kwargs.get("smooth_method", "exp"), smooth_value=kwargs.get("smooth_value"),
                max_ngram_order=kwargs.get("max_ngram_order", 4),
                effective_order=kwargs.get("effective_order", False))
    want = bleu.corpus_score(preds, _sacrebleu_streams(refs))
    for weights in (None, weights_one):
        out = delta_bleu(preds, refs, weights, **kwargs)
        assert out.score == want.score, options
        for key in STATS:
            assert out.extra[key] == getattr(want, key), (key, options)
    out = delta_bleu(preds, refs, **kwargs)
    sentence = [bleu.sentence_score(p, r).score for p, r in zip(preds, refs)]
    assert out.scores == sentence, options


@pytest.mark.parametrize("options", [
    {},
    {"tokenize": "intl"}, {"tokenize": "char"}, {"tokenize": "zh"}, {"tokenize": "none"},
    {"lowercase": True},
    {"max_ngram_order": 1}, {"max_ngram_order": 2}, {"max_ngram_order": 6},
    {"smooth_method": "none"}, {"smooth_method": "floor"}, {"smooth_method": "floor", "smooth_value": 0.3},
    {"smooth_method": "add-k"}, {"smooth_method": "add-k", "smooth_value": 2},
    {"effective_order": True}, {"effective_order": True, "smooth_method": "floor", "max_ngram_order": 3},
])
def test_all_weights_one_equal_sacrebleu_small_corpus(options):
    _assert_equals_sacrebleu(*SMALL_CORPUS, **options)


def test_sacrebleu_compat_function_with_defaults():
    preds, refs = SMALL_CORPUS
    want = sacrebleu.corpus_bleu(preds, _sacrebleu_streams(refs))
    out = delta_bleu(preds, refs)
    assert out.score == want.score and out.extra["counts"] == want.counts and out.extra["bp"] == want.bp
    # with effective order, segment scores are sacrebleu.sentence_bleu's defaults
    out = delta_bleu(preds, refs, effective_order=True)
    assert out.scores == [sacrebleu.sentence_bleu(p, r).score for p, r in zip(preds, refs)]


def _records(folder, limit=None):
    path = data_path(folder)
    lines = next(p for p in sorted(path.glob("*.jsonl")) if not p.name.endswith("_docs.jsonl")).read_text(encoding="utf-8").splitlines()[:limit]
    records = [json.loads(line) for line in lines if line.strip()]
    return [r["hypothesis"] for r in records], [list(r["references"]) for r in records]


@pytest.mark.parametrize("folder, limit, options", [
    ("dailydialog_multiref", None, {}),
    ("dailydialog_multiref", None, {"max_ngram_order": 2, "smooth_method": "add-k"}),
    ("bagel", None, {"lowercase": True, "tokenize": "intl"}),
    ("wmt15_16_da_seg_toen", 600, {}),
    ("wmt15_16_da_seg_toen", 600, {"smooth_method": "floor", "effective_order": True}),
    ("summeval", 80, {"tokenize": "char", "max_ngram_order": 3}),
])
def test_all_weights_one_equal_sacrebleu_on_data(folder, limit, options):
    _assert_equals_sacrebleu(*_records(folder, limit), **options)


# ---------------------------------------------------------------- the definition, independently

def _paper_by_definition(hyps, refs, weights, order):
    """The paper's p_n with whitespace tokens, no smoothing, negative sums set to 0; x100."""
    num, den, sys_len, ref_len = [0.0] * order, [0.0] * order, 0, 0
    for hyp, rs, ws in zip(hyps, refs, weights):
        h = hyp.split()
        sys_len += len(h)
        ref_len += min((len(r.split()) for r in rs), key=lambda n: (abs(n - len(h)), n))
        for n in range(1, order + 1):
            hc = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rcs = [Counter(tuple(r.split()[i:i + n]) for i in range(len(r.split()) - n + 1)) for r in rs]
            for gram, count in hc.items():
                credits = [w * min(count, rc[gram]) for rc, w in zip(rcs, ws) if rc[gram] > 0]
                if credits:
                    num[n - 1] += max(credits)
                den[n - 1] += max(ws) * count
    num = [max(x, 0.0) for x in num]
    if min(den) == 0 or min(num) == 0:
        return 0.0
    bp = 1.0 if sys_len >= ref_len else math.exp(1 - ref_len / sys_len)
    return 100 * bp * math.exp(sum(math.log(a / b) for a, b in zip(num, den)) / order)


def _random_corpus(rng, n_segments, vocab="a b c d e f".split(), positive_only=False):
    """Short texts over a tiny vocabulary, so that n-grams repeat within and across references."""
    def text():
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))

    preds, refs, weights = [], [], []
    for _ in range(n_segments):
        preds.append(text())
        k = rng.randint(1, 4)
        refs.append([text() for _ in range(k)])
        ws = [round(rng.uniform(0.05 if positive_only else -1, 1), 2) for _ in range(k)]
        if max(ws) <= 0:
            ws[rng.randrange(k)] = round(rng.uniform(0.05, 1), 2)
        weights.append(ws)
    return preds, refs, weights


@pytest.mark.parametrize("order", [1, 2, 4])
def test_paper_variant_equals_the_definition(order):
    rng = random.Random(f"delta-bleu-definition-{order}")
    for trial in range(60):
        preds, refs, weights = _random_corpus(rng, rng.randint(1, 6))
        out = delta_bleu(preds, refs, weights, smooth_method="none", tokenize="none", max_ngram_order=order)
        assert out.score == pytest.approx(_paper_by_definition(preds, refs, weights, order), abs=ATOL_COUNT)
        for i in range(len(preds)):  # sentence level = the definition on a one-segment corpus
            want = _paper_by_definition(preds[i:i + 1], refs[i:i + 1], weights[i:i + 1], order)
            assert out.scores[i] == pytest.approx(want, abs=ATOL_COUNT), (trial, i)


def test_the_largest_order_is_scored_by_the_definition_and_a_larger_one_is_refused_before_any_work():
    from movers.metrics.delta_bleu import MAX_NGRAM_ORDER

    rng = random.Random("delta-bleu-longest-order")
    words = [rng.choice("abcdefgh") for _ in range(MAX_NGRAM_ORDER + 7)]
    preds, refs, weights = [" ".join(words)], [[" ".join(words), " ".join(words[::-1])]], [[1.0, -0.5]]
    out = delta_bleu(preds, refs, weights, smooth_method="none", tokenize="none", max_ngram_order=MAX_NGRAM_ORDER)
    assert out.score == pytest.approx(_paper_by_definition(preds, refs, weights, MAX_NGRAM_ORDER), abs=ATOL_COUNT)
    for order in (MAX_NGRAM_ORDER + 1, 10 ** 11):  # 10**11 counted n-grams of each order for hours
        with pytest.raises(ValueError, match=rf"^delta_bleu: `max_ngram_order` must be <= {MAX_NGRAM_ORDER}, got "
                                             rf"{order}\.$"):
            delta_bleu(preds, refs, weights, max_ngram_order=order)


@pytest.mark.parametrize("variant", ["paper", "galley"])
def test_segment_score_is_a_one_segment_corpus_and_corpus_is_order_free(variant):
    preds, refs, weights = _random_corpus(random.Random("delta-bleu-segments"), 12)
    out = delta_bleu(preds, refs, weights, variant=variant)
    for i in range(len(preds)):
        assert out.scores[i] == delta_bleu(preds[i:i + 1], refs[i:i + 1], weights[i:i + 1], variant=variant).score
    perm = list(range(len(preds)))
    random.Random(1).shuffle(perm)
    shuffled = delta_bleu([preds[i] for i in perm], [refs[i] for i in perm], [weights[i] for i in perm],
                          variant=variant)
    assert shuffled.score == out.score  # corpus sums are exactly rounded (math.fsum): order-free
    assert shuffled.scores == [out.scores[i] for i in perm]


@pytest.mark.parametrize("variant", ["paper", "galley"])
@pytest.mark.parametrize("factor", [0.5, 0.13])
def test_scaling_all_weights_changes_nothing_without_smoothing(variant, factor):
    """p_n is a ratio of weighted sums, so a common positive factor cancels (not for smoothed zero orders,
    whose value depends on the weighted total: see the card)."""
    preds, refs, weights = _random_corpus(random.Random("delta-bleu-scale"), 10)
    base = delta_bleu(preds, refs, weights, variant=variant, smooth_method="none")
    scaled = delta_bleu(preds, refs, [[w * factor for w in ws] for ws in weights], variant=variant,
                        smooth_method="none")
    assert scaled.score == pytest.approx(base.score, abs=ATOL_COUNT)
    assert scaled.scores == pytest.approx(base.scores, abs=ATOL_COUNT)
    assert scaled.extra["counts"] == pytest.approx([c * factor for c in base.extra["counts"]], abs=ATOL_COUNT)
    assert scaled.extra["totals"] == pytest.approx([t * factor for t in base.extra["totals"]], abs=ATOL_COUNT)


def test_scaling_one_segment_keeps_its_sentence_score():
    preds, refs, weights = _random_corpus(random.Random("delta-bleu-scale-one"), 8)
    base = delta_bleu(preds, refs, weights, smooth_method="none")
    weights[3] = [w * 0.3 for w in weights[3]]
    out = delta_bleu(preds, refs, weights, smooth_method="none")
    assert out.scores == pytest.approx(base.scores, abs=ATOL_COUNT)


def test_adding_a_zero_weight_reference_changes_nothing_in_the_paper_variant():
    """With the other weights positive and the new reference no closer in length than the chosen one."""
    rng = random.Random("delta-bleu-zero-ref")
    for _ in range(40):
        preds, refs, weights = _random_corpus(rng, 6, positive_only=True)
        base = delta_bleu(preds, refs, weights)
        more_refs, more_weights = [], []
        for hyp, rs, ws in zip(preds, refs, weights):
            n = len(hyp.split())
            closest = min((len(r.split()) for r in rs), key=lambda k: (abs(k - n), k))
            extra = " ".join(rng.choice("a b c d e f".split()) for _ in range(closest))
            slot = rng.randint(0, len(rs))
            more_refs.append(rs[:slot] + [extra] + rs[slot:])
            more_weights.append(ws[:slot] + [0.0] + ws[slot:])
        out = delta_bleu(preds, more_refs, more_weights)
        assert out.score == base.score and out.scores == base.scores and out.extra == base.extra


def test_zero_weight_reference_overrides_a_penalty_as_the_formula_says():
    """max_j includes the rated-0 reference's 0 credit: 'b' then counts 0 instead of -0.5 (card, 'Choices')."""
    base = delta_bleu(["a b"], [["a", "b"]], [[1.0, -0.5]], max_ngram_order=1)
    out = delta_bleu(["a b"], [["a", "b", "b"]], [[1.0, -0.5, 0.0]], max_ngram_order=1)
    assert base.extra["counts"] == [0.5] and out.extra["counts"] == [1.0]


@pytest.mark.parametrize("variant", ["paper", "galley"])
def test_reference_order_and_weaker_duplicates_change_nothing(variant):
    rng = random.Random("delta-bleu-permute")
    preds, refs, weights = _random_corpus(rng, 10)
    base = delta_bleu(preds, refs, weights, variant=variant)
    perm_refs, perm_weights, dup_refs, dup_weights = [], [], [], []
    for rs, ws in zip(refs, weights):
        order = list(range(len(rs)))
        rng.shuffle(order)
        perm_refs.append([rs[k] for k in order])
        perm_weights.append([ws[k] for k in order])
        k = rng.randrange(len(rs))
        dup_refs.append(rs + [rs[k]])
        dup_weights.append(ws + [max(-1.0, ws[k] - 0.3)])
    for r, w in ((perm_refs, perm_weights), (dup_refs, dup_weights)):
        out = delta_bleu(preds, r, w, variant=variant)
        assert out.score == base.score and out.scores == base.scores and out.extra == base.extra


def test_paper_never_credits_more_than_galley_with_non_negative_weights():
    rng = random.Random("delta-bleu-paper-le-galley")
    for _ in range(30):
        preds, refs, weights = _random_corpus(rng, 5, positive_only=True)
        paper = delta_bleu(preds, refs, weights).extra["counts"]
        galley = delta_bleu(preds, refs, weights, variant="galley").extra["counts"]
        assert all(p <= g + 1e-12 for p, g in zip(paper, galley))


def test_a_more_negative_rating_never_raises_the_paper_score():
    rng = random.Random("delta-bleu-monotone")
    for _ in range(40):
        preds, refs, weights = _random_corpus(rng, 4)
        i = rng.randrange(len(preds))
        negatives = [j for j, w in enumerate(weights[i]) if w < 0]
        if not negatives:
            continue
        lower = [list(ws) for ws in weights]
        lower[i][negatives[0]] = -1.0
        before = delta_bleu(preds, refs, weights, smooth_method="none")
        after = delta_bleu(preds, refs, lower, smooth_method="none")
        assert after.score <= before.score + 1e-12
        assert after.scores[i] <= before.scores[i] + 1e-12


def test_order_two_by_hand():
    """Hyp 'a a b', refs 'a a c' (0.2) and 'a d e' (1.0) (notes/originals.md §3.2), N = 2.

    Paper: unigrams a: max(0.2*2, 1.0*1) = 1.0, b: none -> 1.0 / (1.0*3); bigrams 'a a': 0.2*1, 'a b': none
    -> 0.2 / (1.0*2); BP = 1 (all lengths 3). ΔBLEU = 100*sqrt(1/3 * 1/10).
    Galley: unigram a: 1.0 * min(2, 2) = 2.0 -> 2/3; bigrams 0.2 * 1 -> 0.2/2. ΔBLEU = 100*sqrt(2/3 * 1/10).
    """
    args = (["a a b"], [["a a c", "a d e"]], [[0.2, 1.0]])
    paper = delta_bleu(*args, max_ngram_order=2)
    galley = delta_bleu(*args, max_ngram_order=2, variant="galley")
    assert paper.extra["counts"] == pytest.approx([1.0, 0.2], abs=1e-12)
    assert paper.score == pytest.approx(100 * math.sqrt(1 / 3 * 1 / 10), abs=ATOL_COUNT)
    assert galley.extra["counts"] == pytest.approx([2.0, 0.2], abs=1e-12)
    assert galley.score == pytest.approx(100 * math.sqrt(2 / 3 * 1 / 10), abs=ATOL_COUNT)


def test_negative_sum_is_zero_and_variants_differ_only_in_the_no_match_rule():
    # Everything the hypothesis shares is with the -0.8 reference: numerators clipped to 0.
    args = (["i do n't think so ."], [["yes , we have one copy left .", "i do n't think so ."]], [[0.7, -0.8]])
    paper = delta_bleu(*args)
    galley = delta_bleu(*args, variant="galley")
    assert paper.extra["counts"] == galley.extra["counts"] == [0.0, 0.0, 0.0, 0.0]
    assert paper.score == 0.0  # sacreBLEU 2.x: no match at any order -> 0
    # sacreBLEU 1.4.1 (the fork): 'exp' smoothing still applies: p_n = 100 / (2^n * 0.7 * (6 - n + 1)), BP 1
    want = 100 * math.exp(sum(math.log(1 / (2 ** n * 0.7 * (6 - n + 1))) for n in range(1, 5)) / 4)
    assert galley.score == pytest.approx(want, abs=ATOL_COUNT)


def test_galley_smoothing_follows_sacrebleu_1_4_1():
    """Hyp 'a b c d', ref 'a b x d': matches 3/4, 1/3, 0/2, 0/1.

    sacreBLEU 1.4.1 (the fork) applies add-k from order 3 (its 0-based loop tests n > 1) and defaults
    every smoothing value to 0; sacreBLEU 2.x (paper variant) applies add-k from order 2, default k = 1.
    """
    args = (["a b c d"], [["a b x d"]])
    galley = delta_bleu(*args, variant="galley", smooth_method="add-k", smooth_value=1)
    assert galley.score == pytest.approx(100 * (3 / 4 * 1 / 3 * 1 / 3 * 1 / 2) ** 0.25, abs=ATOL_COUNT)
    paper = delta_bleu(*args, smooth_method="add-k")
    assert paper.score == pytest.approx(100 * (3 / 4 * 2 / 4 * 1 / 3 * 1 / 2) ** 0.25, abs=ATOL_COUNT)
    assert "smooth:add-k[1.00]" in paper.signature
    floor = delta_bleu(*args, variant="galley", smooth_method="floor")  # floor 0: a zero precision stays 0
    assert floor.score == 0.0 and "smooth:floor[0.00]" in floor.signature
    assert delta_bleu(*args, smooth_method="floor").score == pytest.approx(
        100 * (3 / 4 * 1 / 3 * 0.1 / 2 * 0.1 / 1) ** 0.25, abs=ATOL_COUNT)


def test_empty_hypotheses_score_zero_not_nan():
    out = delta_bleu(["", "a b"], [["a b"], ["c"]], [[1.0], [0.5]])
    assert out.scores[0] == 0.0 and not math.isnan(out.score)
    out = delta_bleu([""], [["a b"]], variant="galley")
    assert out.score == 0.0 and out.extra["bp"] == 0.0


# ---------------------------------------------------------------- inputs, options, signature

@pytest.mark.parametrize("weights, error, pattern", [
    ([[1.0, 0.5]], ValueError, r"`predictions` and `reference_weights` must have the same length, got 2 and 1"),
    ([[1.0, 0.5], [1.0]], ValueError, r"`reference_weights\[1\]` must hold one weight per reference of segment 1 \(2\), got 1"),
    ([[1.0, 0.5], [1.0, 1.5]], ValueError, r"`reference_weights\[1\]\[1\]` must be a number in \[-1, 1\], got 1.5"),
    ([[1.0, -1.01], [1.0, 1.0]], ValueError, r"`reference_weights\[0\]\[1\]` must be a number in \[-1, 1\], got -1.01"),
    ([[1.0, float("nan")], [1.0, 1.0]], ValueError, r"`reference_weights\[0\]\[1\]` must be a number in \[-1, 1\], got nan"),
    ([[1.0, 1.0], [float("inf"), 1.0]], ValueError, r"`reference_weights\[1\]\[0\]` must be a number in \[-1, 1\], got inf"),
    ([[1.0, 1.0], [0.0, -0.2]], ValueError, r"`reference_weights\[1\]` must contain at least one positive weight"),
    ([[1.0, "0.5"], [1.0, 1.0]], TypeError, r"`reference_weights\[0\]\[1\]` must be a number in \[-1, 1\], got str"),
    ([[True, 1.0], [1.0, 1.0]], TypeError, r"`reference_weights\[0\]\[0\]` must be a number"),
    ([None, [1.0, 1.0]], TypeError, r"`reference_weights\[0\]` must be a list of numbers, got NoneType"),
    (0.5, TypeError, r"`reference_weights` must be a list of lists of numbers"),
])
def test_weight_errors_name_argument_and_segment(weights, error, pattern):
    with pytest.raises(error, match=r"^delta_bleu: " + pattern):
        delta_bleu(["a b", "c d"], [["a b", "a"], ["c d", "d"]], weights)


@pytest.mark.parametrize("kwargs, pattern", [
    ({"variant": "code"}, r"`variant` must be one of \['paper', 'galley'\]"),
    ({"tokenize": "spm"}, r"`tokenize` 'spm' downloads a SentencePiece model"),
    ({"tokenize": "moses"}, r"`tokenize` must be one of"),
    ({"smooth_method": "add-n"}, r"`smooth_method` must be one of \['none', 'floor', 'add-k', 'exp'\]"),
    ({"smooth_value": -1}, r"`smooth_value` must be >= 0"),
    ({"max_ngram_order": 0}, r"`max_ngram_order` must be >= 1"),
])
def test_option_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=r"^delta_bleu: " + pattern):
        delta_bleu(["a b"], [["a b"]], **kwargs)
    with pytest.raises(TypeError, match=r"^delta_bleu: `lowercase` must be a bool"):
        delta_bleu(["a b"], [["a b"]], lowercase="yes")
    with pytest.raises(ValueError, match=r"^delta_bleu: `predictions` and `references` must have the same length"):
        delta_bleu(["a b", "c"], [["a b"]])


def test_flat_references_take_flat_weights_and_numpy_rows():
    np = pytest.importorskip("numpy")
    out = delta_bleu(["a b c", "d e"], ["a b c", "d f"], [0.5, 1.0])
    assert out.score == delta_bleu(["a b c", "d e"], [["a b c"], ["d f"]], [[0.5], [1.0]]).score
    rows = np.array([[0.5, -0.25], [1.0, 0.3]], dtype=np.float32)
    refs = [["a b c", "a"], ["d f", "d e"]]
    assert delta_bleu(["a b c", "d e"], refs, rows).score == delta_bleu(["a b c", "d e"], refs, rows.tolist()).score


def test_signature_is_pinned():
    out = delta_bleu(["a b"], [["a b", "a"]], [[1.0, -0.5]])
    version = sacrebleu.__version__
    assert out.signature == (f"DeltaBLEU|variant:paper|nrefs:2|w:rated|order:4|case:mixed|eff:no|tok:13a|smooth:exp"
                             f"|unicode:nfc|v:{movers.__version__}|sacrebleu:{version}")
    out = delta_bleu(["a b", "c"], [["a b"], ["c", "d"]], variant="galley", lowercase=True, tokenize="intl",
                     max_ngram_order=2, smooth_method="floor", effective_order=True)
    assert out.signature == (f"DeltaBLEU|variant:galley|nrefs:var|w:uniform|order:2|case:lc|eff:yes|tok:intl"
                             f"|smooth:floor[0.00]|unicode:nfc|v:{movers.__version__}|sacrebleu:{version}")


def test_worked_example_by_hand():
    """docs/metrics/index.md, 'ΔBLEU worked by hand': the hypothesis "i 'm not sure , i do n't know ." against
    four rated references, N = 2, computed from the paper's formula step by step (the page's doctest prints the
    same numbers from the code)."""
    refs = [["i 'm not sure , let me look for you .", "yes , we have one copy left .",
             "we do n't sell books .", "i do n't know ."]]
    weights = [[0.9, 0.6, -0.4, -0.8]]
    hyp = "i 'm not sure , i do n't know ."
    # order 1: six unigrams earn +0.9 (i counts its best reference), do and n't -0.4, know -0.8; 10 tokens x 0.9
    p1 = (6 * 0.9 - 0.4 - 0.4 - 0.8) / (0.9 * 10)
    # order 2: four bigrams earn +0.9; "i do", "n't know", "know ." -0.8, "do n't" -0.4; 9 bigrams x 0.9
    p2 = (4 * 0.9 - 3 * 0.8 - 0.4) / (0.9 * 9)
    bp = math.exp(1 - 11 / 10)  # the closest reference has 11 tokens
    paper = delta_bleu([hyp], refs, weights, max_ngram_order=2)
    assert paper.score == pytest.approx(100 * bp * math.sqrt(p1 * p2), abs=1e-9)
    assert f"{paper.score:.2f}" == "18.48"
    # BLEU without weights counts "i do n't know ." as a match: p1 = 9/10, p2 = 8/9
    bleu = delta_bleu([hyp], refs, max_ngram_order=2)
    assert bleu.score == pytest.approx(100 * bp * math.sqrt(9 / 10 * 8 / 9), abs=1e-9)
    galley = delta_bleu([hyp], refs, weights, max_ngram_order=2, variant="galley")
    assert galley.score == pytest.approx(paper.score, abs=1e-9)


# ---------------------------------------------------------------- the evaluate module

@pytest.fixture(scope="module")
def module():
    return movers.load("delta_bleu")


def test_module_without_weights_is_bleu_and_takes_weights_as_argument(module):
    preds, refs = SMALL_CORPUS
    out = module.compute(predictions=preds, references=refs)
    assert out == delta_bleu(preds, refs).to_dict()
    assert out["score"] == sacrebleu.corpus_bleu(preds, _sacrebleu_streams(refs)).score
    weights = [[0.3] + [-0.2] * (len(r) - 1) for r in refs]
    out = module.compute(predictions=preds, references=refs, reference_weights=weights, variant="galley")
    assert out == delta_bleu(preds, refs, weights, variant="galley").to_dict()
    single = module.compute(predictions=["a b c d"], references=["a b c d"])
    assert single["score"] == pytest.approx(100.0)


def test_weighted_configuration_accumulates_batches():
    metric = movers.load("delta_bleu", "weighted")
    preds, refs = SMALL_CORPUS
    weights = [[0.2] + [0.9] * (len(r) - 1) for r in refs]
    metric.add_batch(predictions=preds[:3], references=refs[:3], reference_weights=weights[:3])
    metric.add(prediction=preds[3], reference=refs[3], reference_weights=weights[3])
    out = metric.compute(predictions=preds[4:], references=refs[4:], reference_weights=weights[4:])
    assert out == delta_bleu(preds, refs, weights).to_dict()
    # the same rule as add_batch: a missing column of the configuration is a TypeError naming it
    with pytest.raises(TypeError, match="`reference_weights` is required by this configuration"):
        metric.compute(predictions=preds, references=refs)


def test_unknown_configuration_is_refused():
    with pytest.raises(ValueError, match=r"delta_bleu: unknown configuration 'rated'"):
        movers.load("delta_bleu", "rated")


def test_module_defaults_are_the_core_defaults(module):
    core = inspect.signature(delta_bleu).parameters
    wrapper = inspect.signature(module._compute).parameters
    for name, param in wrapper.items():
        if name in ("predictions", "references"):
            continue
        assert core[name].default == param.default, name
    assert set(core) == set(wrapper)
