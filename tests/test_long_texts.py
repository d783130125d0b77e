"""Long outputs on every core (issue 29): transport threads that never change a number, the encoder reading
ahead on an accelerator, and the length benchmark.

Expected values are the same calls on one thread (the code path that solves one problem after another); a
thread count or a read-ahead must give the same bits, since every problem is solved as it would be alone.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import movers
from movers.core import parallel

from .conftest import data_path

PREDS = ["The cat sat on the mat while the dog slept by the door.", "A quick brown fox jumps over the lazy dog.",
         "He went to the store to buy milk and bread.", "Stocks fell sharply on Monday as rates rose.",
         "The committee approved the new budget after a long debate.", ""]
REFS = [["A cat was sitting on the mat.", "The dog was asleep near the door."],
        ["The fast brown fox leaped over a lazy dog."], ["She stayed at home and read a book."],
        ["Shares dropped steeply on Monday."], ["The new budget was approved by the committee."], ["Nothing."]]


@pytest.mark.parametrize("slug, options", [("moverscore", {"idf": True}), ("wms", {}), ("sms", {}),
                                           ("lazy_emd", {}), ("twmd", {"centering": "corpus"})])
def test_transport_threads_give_the_same_bits(slug, options):
    fn = getattr(movers, slug)
    with pytest.warns(RuntimeWarning):  # the empty prediction
        one = fn(PREDS, REFS, transport_threads=1, return_plans=True, **options)
    for threads in (2, 3):
        with pytest.warns(RuntimeWarning):
            many = fn(PREDS, REFS, transport_threads=threads, return_plans=True, **options)
        assert many.scores == one.scores and many.signature == one.signature  # runtime only
        flat = [[x for seg in r.extra["alignments"] for x in (seg or [None])] for r in (one, many)]
        for a, b in zip(*flat, strict=True):
            assert (a is None and b is None) or (np.array_equal(a.plan, b.plan) and a.score == b.score)


def test_transport_threads_option_and_environment(monkeypatch):
    import torch

    assert parallel.transport_threads() == torch.get_num_threads()
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    assert parallel.transport_threads() == 3 and parallel.transport_threads(5) == 5
    for bad in ("many", "²", "0", "-2", "3.5"):  # "²".isdigit() is True, int("²") fails: still named
        monkeypatch.setenv(parallel.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=rf"\$MOVERS_TRANSPORT_THREADS must be an integer >= 1, got '{bad}'"):
            parallel.transport_threads()
    monkeypatch.delenv(parallel.THREADS_ENV)
    with pytest.raises(ValueError, match=r"moverscore: `transport_threads` must be .*>= 1"):
        movers.moverscore(PREDS[:1], REFS[:1], transport_threads=0)
    with parallel.solver(3) as pool:  # in order, exceptions raised where they belong
        assert pool.map(lambda x: x * x, range(7)) == [x * x for x in range(7)]
        with pytest.raises(ZeroDivisionError):
            pool.map(lambda x: 1 / (x - 4), range(7))


@pytest.mark.parametrize("slug", ["moverscore", "twmd"])
def test_reading_the_next_chunk_ahead_gives_the_same_bits(slug, monkeypatch):
    """On an accelerator the next chunk is embedded while the current one is solved: forced here on the CPU,
    with chunks of 2 segments, the scores equal the chunks read one after the other."""
    import movers.pipeline.embedding as pipeline

    monkeypatch.setattr(pipeline, "CHUNK", 2)
    preds, refs = PREDS[:5], REFS[:5]
    options = {"centering": "batch", "centering_batch": 2} if slug == "twmd" else {}
    plain = getattr(movers, slug)(preds, refs, **options)
    loads = []
    original = pipeline.EmbeddingMetric._load

    def counted(self, *args):
        import threading

        loads.append(threading.current_thread().name)
        return original(self, *args)

    monkeypatch.setattr(pipeline.EmbeddingMetric, "_load", counted)
    monkeypatch.setattr(pipeline, "read_ahead", lambda encoder: True)
    ahead = getattr(movers, slug)(preds, refs, **options)
    assert ahead.scores == plain.scores
    assert len(loads) == 3 and loads[0] == "MainThread" and all(n != "MainThread" for n in loads[1:])


def test_length_benchmark_pairs_and_table(capsys, tmp_path):
    data_path("summeval")
    from movers.bench.lengths import main, pairs

    preds, refs = pairs(40, row_words=200)
    words = " ".join(json.loads(line)["source"] for line in
                     (data_path("summeval") / "summeval_docs.jsonl").read_text(encoding="utf-8").splitlines()).split()
    assert len(preds) == 5 and all(len(p.split()) == 40 == len(r.split()) for p, r in zip(preds, refs, strict=True))
    assert preds[1] == " ".join(words[80:120]) and refs[1] == " ".join(words[100:140])  # half a passage later
    assert main(["--lengths", "30,60", "--row-words", "120", "--metric", "moverscore", "--metric", "delta_bleu",
                 "--no-bertscore", "--threads", "1", "--json", str(tmp_path / "l.json")]) == 0
    out = capsys.readouterr().out
    assert "| L words (pairs) | floor | windows | moverscore | delta_bleu |" in out
    assert "| 30 (4) |" in out and "| 60 (2) |" in out and "bert-score truncates" in out
    saved = json.loads((tmp_path / "l.json").read_text())
    row = saved["rows"]["30"]
    assert set(row) == {"floor", "windows", "moverscore", "delta_bleu"} and row["delta_bleu"]["transport"] == 0
    assert 0 < row["moverscore"]["transport"] < row["moverscore"]["seconds"] and row["floor"]["peak_rss_mb"] > 100
