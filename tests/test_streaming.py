"""movers.score_stream: block-by-block scoring equals one call on the whole corpus.

Expected values: the one-call result of each metric (checked against the originals elsewhere). Blocks
are deliberately small (and not divisors of the corpus size) so that call-level statistics (per-call
IDF, corpus and batch centring, ΔBLEU's corpus sums) must come from the whole stream to match.
"""
from __future__ import annotations

import pytest

import movers
from movers.core.result import REGROUPING_ATOL

PAIRS = [
    ("The cat sat on the mat.", ["A cat was sitting on the mat.", "The cat is on the mat."]),
    ("A quick brown fox jumps over the lazy dog.", ["The fast brown fox leaped over a lazy dog."]),
    ("He went to the store to buy milk.", ["She stayed at home and read a book."]),
    ("The weather is nice today.", ["Today the weather is pleasant."]),
    ("Stocks fell sharply on Monday.", ["Shares dropped steeply on Monday.", "Markets slid on Monday."]),
    ("The committee approved the new budget.", ["The new budget was approved by the committee."]),
    ("I will call you tomorrow morning.", ["I'll phone you tomorrow in the morning."]),
]
N = 45
PREDS = [f"{p} ({i})" if i % 4 == 0 else p for i, (p, _) in enumerate(PAIRS * 7)][:N]
REFS = [r for _, r in PAIRS * 7][:N]
TOL = REGROUPING_ATOL  # the reproducibility rule: blocks embed other batches than one call


def _same(stream: movers.Scores, full: movers.Scores) -> None:
    assert len(stream.scores) == len(full.scores)
    assert max(abs(a - b) for a, b in zip(stream.scores, full.scores)) <= TOL
    assert stream.score == pytest.approx(full.score, abs=TOL)
    assert stream.signature == full.signature
    assert set(stream.extra) == set(full.extra)


@pytest.mark.invariance
@pytest.mark.slow
@pytest.mark.parametrize("metric,options", [
    ("moverscore", {"idf": True}),
    ("twmd", {"centering": "corpus"}),
    ("twmd", {"centering": "batch", "centering_batch": 4}),
    ("lazy_emd", {"idf": True}),
    ("sms", {}),
    ("delta_bleu", {}),
])
def test_stream_equals_one_call(metric, options):
    full = getattr(movers, metric)(PREDS, REFS, **options)
    stream = movers.score_stream(metric, PREDS, REFS, block_size=10, **options)
    _same(stream, full)
    if metric == "delta_bleu":  # a corpus statistic, not a mean of segments
        assert stream.extra["counts"] == pytest.approx(full.extra["counts"], abs=1e-9)
        assert stream.score != pytest.approx(sum(stream.scores) / len(stream.scores), abs=1e-3)
        # the per-segment sufficient statistics (paired tests, intervals) are one call's, block by block
        assert stream.statistics is not None and len(stream.statistics) == N
        assert [list(row) for row in stream.statistics] == [list(row) for row in full.statistics]
    else:
        assert stream.statistics is None and full.statistics is None


def test_stream_reads_a_dataset_by_columns():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"hyp": PREDS, "refs": REFS})
    full = movers.delta_bleu(PREDS, REFS)
    _same(movers.score_stream("delta_bleu", ds, columns=("hyp", "refs"), block_size=8), full)
    with pytest.raises(ValueError, match=r"`columns` names 'prediction'"):
        movers.score_stream("delta_bleu", ds)


def test_one_shot_iterators_stream_in_one_pass_when_no_statistics_are_needed():
    full = movers.sms(PREDS, REFS)
    _same(movers.score_stream("sms", iter(PREDS), iter(REFS), block_size=16), full)
    with pytest.raises(ValueError, match=r"delta_bleu with these options needs a first pass .* one-shot iterator"):
        movers.score_stream("delta_bleu", iter(PREDS), iter(REFS))


@pytest.mark.parametrize("kwargs,match", [
    ({"metric": "bleu"}, r"unknown `metric` 'bleu'"),
    ({"block_size": 0}, r"`block_size` must be a positive int, got 0"),
    ({"references": REFS[:-1]}, r"must have the same length; one ends after 44 items"),
])
def test_bad_stream_arguments(kwargs, match):
    args = {"metric": "delta_bleu", "predictions": PREDS, "references": REFS, **kwargs}
    with pytest.raises(ValueError, match=match):
        movers.score_stream(args.pop("metric"), args.pop("predictions"), args.pop("references"), **args)


def test_stream_rejects_the_metrics_bad_options_with_its_message():
    with pytest.raises(ValueError, match=r"delta_bleu: unknown `variant`|delta_bleu: .*variant"):
        movers.score_stream("delta_bleu", PREDS, REFS, variant="nope")
