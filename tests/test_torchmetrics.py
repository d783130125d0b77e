"""movers.torchmetrics: one torchmetrics.Metric per metric, equal to one ``movers.<metric>`` call, and exact
under DDP in a real ``lightning.Trainer.validate`` on 1 and 2 CPU processes (gloo; tests/support/lightning_worker.py).

Expected values are one ``movers.<metric>`` call on the same texts in dataset order (each metric's own tests
check that call against its original implementation); two ranks reproduce it to float32 rounding (1e-6).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import movers
from movers.core.result import REGROUPING_ATOL

from .helpers import REFERENCE, REPO, regrouped

mtm = pytest.importorskip("movers.torchmetrics", reason="torchmetrics is not installed (pip install 'movers[lightning]')")

SLUGS = ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"]
PREDS = ["The cat sat on the mat.", "A dog ran in the park.", "Dvořák's résumé was naïve.", "It rained all day.",
         "Prices went up again.", "He fixed his old bike."]
REFS = ["A cat sat on a mat.", ["The dog was running in the park.", "A dog ran."], "Dvořák's CV was naive.",
        "Rain fell all day long.", ["Prices rose again.", "Prices went up.", "Costs rose."], "He repaired the bicycle."]
TOL = REGROUPING_ATOL  # the reproducibility rule: other processes, shards and encoder batches


@pytest.mark.invariance
@pytest.mark.parametrize("slug", SLUGS)
def test_updates_then_compute_equal_one_call(slug):
    metric = mtm.metric_class(slug)()
    metric.update(PREDS[:2], REFS[:2])
    metric.update(tuple(PREDS[2:5]), tuple(REFS[2:5]))  # a collate function's tuples
    metric.update(PREDS[5:], REFS[5:])
    value = metric.compute()
    want = getattr(movers, slug)(PREDS, REFS)
    assert value.dtype == torch.float64 and value.item() == want.score
    assert metric.result.scores == want.scores and metric.result.signature == want.signature
    assert type(metric).higher_is_better is getattr(movers.metrics.get(slug), "higher_is_better")
    metric.reset()
    metric.update(PREDS[:1], REFS[:1])  # its vectors come from the object's cache: the first compute's batches
    assert metric.compute().item() == regrouped(getattr(movers, slug)(PREDS[:1], REFS[:1]).score)
    stepped = mtm.metric_class(slug)()
    for part in (slice(0, 2), slice(2, 5), slice(5, None)):  # Lightning's forward: scores each batch, then
        stepped(PREDS[part], REFS[part])                        # compute() scores all of them
    assert stepped.compute().item() == regrouped(want.score) and stepped.result.scores == regrouped(want.scores)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_set_dtype_keeps_the_texts(dtype):
    """torchmetrics' set_dtype (and .to/.half under a precision plugin) must not touch the states: they are UTF-8
    bytes with int64 lengths; in float16 a length above 2,048 rounds (bfloat16: 256) and every boundary after
    it shifts, so the metric would score corrupted texts."""
    long = " ".join(["the cat sat on the mat"] * 100)  # 2,299 bytes
    metric = mtm.MoverScore()
    metric.update([long, "a dog"], ["a cat", "the dog"])
    metric.update(["ünïcode ✓ text"], [["one reference", "and " + long]])
    metric.set_dtype(dtype)
    metric = metric.to("cpu")
    assert metric.text_lengths[0].dtype == torch.int64 and metric.text_bytes[0].dtype == torch.uint8
    preds, refs, _ = metric._corpus()
    assert preds == [long, "a dog", "ünïcode ✓ text"] and refs == [["a cat"], ["the dog"], ["one reference",
                                                                                          "and " + long]]
    assert metric.compute().item() == movers.moverscore(preds, refs).score


def test_options_are_checked_when_the_metric_is_made():
    """A bad option fails at construction with the message the function gives, not at the first compute."""
    with pytest.raises(TypeError, match="moverscore: `cache` must be None"):
        mtm.MoverScore(cache=True)
    with pytest.raises(TypeError, match="moverscore: `cache` must be None"):
        movers.moverscore(["a"], ["b"], cache=True)
    with pytest.raises(ValueError, match="twmd: `iterations` must be 1 for variant='trwmd'"):
        mtm.TWMD(variant="trwmd", iterations=3)
    with pytest.raises(TypeError, match="reward.*|moverscore: `cache` must be None"):
        movers.reward("moverscore", cache=True)


def test_options_and_torchmetrics_arguments():
    metric = mtm.MoverScore(idf=True, preset="github", sync_on_compute=False)
    assert metric.options == {"idf": True, "preset": "github"} and not metric.sync_on_compute
    metric.update(PREDS, REFS)
    assert metric.compute().item() == movers.moverscore(PREDS, REFS, idf=True, preset="github").score
    with pytest.raises(TypeError, match=r"moverscore\(\) got an unexpected keyword argument 'colour'"):
        mtm.MoverScore(colour="red")
    with pytest.raises(TypeError, match=r"`references` is an input of update\(\), not an option"):
        mtm.TextMetric("twmd", references=["x"])
    with pytest.raises(ValueError, match=r"`metric` must be one of .*got 'bleurt'"):
        mtm.TextMetric("bleurt")
    with pytest.raises(AttributeError, match=r"has no attribute 'BLEURT'; the metrics are \['DeltaBLEU', "):
        mtm.BLEURT  # noqa: B018
    assert sorted(mtm.classes()) == sorted(c.__name__ for c in map(mtm.metric_class, movers.metrics.slugs()))


def test_indices_restore_dataset_order_and_drop_padding_repeats():
    """What DistributedSampler hands two ranks for 5 examples: rank 0 gets 0, 2, 4; rank 1 gets 1, 3 and 0
    again (padding). Gathered rank by rank, with indices, TWMD (order-dependent batch centring) equals one call."""
    preds, refs = PREDS[:5], REFS[:5]
    metric = mtm.TWMD(centering_batch=2)
    metric.update([preds[i] for i in (0, 2, 4)], [refs[i] for i in (0, 2, 4)], indices=torch.tensor([0, 2, 4]))
    metric.update([preds[i] + " again" if i == 0 else preds[i] for i in (1, 3, 0)], [refs[i] for i in (1, 3, 0)],
                  indices=[1, 3, 0])  # a sampled generation may differ for the repeat: the first copy is kept
    want = movers.twmd(preds, refs, centering_batch=2)
    assert metric.compute().item() == want.score and metric.result.scores == want.scores
    unordered = mtm.TWMD(centering_batch=2)
    unordered.update([preds[i] for i in (0, 2, 4, 1, 3)], [refs[i] for i in (0, 2, 4, 1, 3)])
    assert unordered.compute().item() != pytest.approx(want.score, abs=1e-6)  # why indices matter


def test_bad_updates_are_named():
    metric = mtm.SMS()
    with pytest.raises(ValueError, match=r"compute\(\) before any update\(\)"):
        metric.compute()
    with pytest.raises(TypeError, match=r"sms: `predictions\[1\]` must be a string, got int 5"):
        metric.update(["a.", 5], ["b.", "c."])
    with pytest.raises(ValueError, match=r"`indices` must hold one non-negative dataset index per prediction"):
        metric.update(["a."], ["b."], indices=[0, 1])
    with pytest.raises(ValueError, match=r"`predictions\[0\]` must be valid Unicode text"):
        metric.update(["a\ud800"], ["b."])
    metric.update(["a."], ["b."], indices=[0])
    metric.update(["c."], ["d."])
    with pytest.raises(ValueError, match=r"`indices` were passed to some update\(\) calls and not others"):
        metric.compute()
    metric.reset()
    metric.update(["a."], ["b."], indices=[0])
    metric.update(["a."], ["other."], indices=[0])
    with pytest.raises(ValueError, match=r"dataset index 0 was updated twice with different references"):
        metric.compute()
    with pytest.raises(TypeError, match=r"sms: takes no `reference_weights`"):
        metric.update(["a."], ["b."], reference_weights=[[1.0]])


def test_delta_bleu_reference_weights():
    preds = ["yes , we have it", "i think so ."]
    refs = [["yes , we have one copy", "no ."], ["i do n't think so .", "i think so too ."]]
    weights = [[0.8, -0.5], [-0.7, 0.9]]
    metric = mtm.DeltaBLEU()
    metric.update(preds[1:], refs[1:], indices=[1], reference_weights=weights[1:])
    metric.update(preds[:1], refs[:1], indices=[0], reference_weights=weights[:1])
    assert metric.compute().item() == movers.delta_bleu(preds, refs, weights).score


@pytest.mark.system
@pytest.mark.slow
def test_lightning_validate_on_one_and_two_processes_equals_one_call(tmp_path):
    pytest.importorskip("lightning")
    data = REFERENCE / "bertscore_L6_idf-off.jsonl"  # real pairs, inputs inline: the first 13 are BAGEL's
    n = 13  # odd: two ranks get 7 each, DistributedSampler repeats example 0 on rank 1
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "shared"), env.get("PYTHONPATH", "")])
    runs = {}
    for devices in (1, 2):
        out = tmp_path / f"devices{devices}"
        out.mkdir()
        proc = subprocess.run([sys.executable, str(REPO / "tests" / "support" / "lightning_worker.py"), str(devices), str(data),
                               str(n), str(out)], env=env, cwd=out, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        runs[devices] = [json.loads((out / f"rank{r}.json").read_text()) for r in range(devices)]
    one, (rank0, rank1) = runs[1][0], runs[2]
    assert one["world"] == 1 and rank0["world"] == rank1["world"] == 2
    # rank 1 holds the padding repeat of example 0; the ranks' examples cover the set
    assert sorted(map(int, rank1["generated"])) == [0, 1, 3, 5, 7, 9, 11]
    assert sorted(map(int, rank0["generated"])) == [0, 2, 4, 6, 8, 10, 12]
    generated = {int(i): text for i, text in one["generated"].items()}
    assert {int(i): t for r in (rank0, rank1) for i, t in r["generated"].items()} == generated
    records = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()[:n]]
    preds, refs = [generated[i] for i in range(n)], [r["reference"] for r in records]
    assert rank0["results"] == rank1["results"]  # identical numbers on both ranks
    assert rank0["validate"] == rank1["validate"]
    for slug in SLUGS:
        want = getattr(movers, slug)(preds, refs)
        for run in (one, rank0):
            got = run["results"][slug]
            assert got["signature"] == str(want.signature)
            assert max(abs(a - b) for a, b in zip(got["scores"], want.scores, strict=True)) <= TOL, slug
            assert got["score"] == pytest.approx(want.score, abs=TOL) and got["tensor"] == got["score"]
            assert run["validate"][0][f"val_{slug}"] == pytest.approx(want.score, abs=1e-6)  # logged as float32
        if slug == "delta_bleu":
            assert want.score > 0  # the predictions share n-grams with the references (the worker's sources)


ALL_CLASSES = sorted(mtm.classes())  # the seven classes (WMS included)


@pytest.mark.parametrize("name", ALL_CLASSES)
def test_the_cached_score_stays_float64_after_a_dtype_change(name):
    """compute(), then a precision change, then compute() again: torchmetrics returns its cached score, and would
    round it to the new dtype (ΔBLEU 2.96875 for 2.967817 in bfloat16). The class promises float64 always."""
    metric = getattr(mtm, name)()
    metric.update(PREDS[:3], REFS[:3])
    want = getattr(movers, metric.spec.slug)(PREDS[:3], REFS[:3]).score
    assert metric.compute().item() == want
    for move in (lambda: metric.set_dtype(torch.bfloat16), lambda: metric.set_dtype(torch.float16),
                 lambda: metric.to(torch.float16), metric.half, lambda: metric.set_dtype(torch.float64)):
        move()
        again = metric.compute()
        assert again.dtype == torch.float64 and again.item() == want, (name, again)


@pytest.mark.parametrize("name", ALL_CLASSES)
def test_merge_state_after_compute_scores_the_merged_corpus(name):
    """torchmetrics keeps the score cached by compute() through merge_state; the merged corpus must be scored.
    torchmetrics concatenates list states incoming first, so the merged corpus is B's segments then A's."""
    a, b = getattr(mtm, name)(), getattr(mtm, name)()
    a.update(PREDS[:3], REFS[:3])
    b.update(PREDS[3:], REFS[3:])
    alone = a.compute().item()
    a.merge_state(b)
    merged = a.compute().item()
    want = getattr(movers, a.spec.slug)(PREDS[3:] + PREDS[:3], REFS[3:] + REFS[:3])
    assert merged == regrouped(want.score) and merged != alone
    assert a.result.scores == regrouped(want.scores)


@pytest.mark.parametrize("name", ALL_CLASSES)
@pytest.mark.parametrize("bad, message", [
    ("abc", r"`predictions` must be a list of strings, got a single str 'abc'; wrap it in a list"),
    ({"a cat": 1}, r"`predictions` must be a list of strings, got a dict \(its keys would be scored\)"),
    ({"a cat", "a dog"}, r"`predictions` must be a list of strings, got an unordered set"),
    (None, r"`predictions` must be a list of strings, got None"),
])
def test_update_refuses_what_the_functions_refuse(name, bad, message):
    """update() checks its inputs as the functions do, before anything iterates them (a str would be scored
    character by character, a dict by its keys, a set in hash order)."""
    metric = getattr(mtm, name)()
    refs = ["a.", "b.", "c."][:len(bad)] if bad is not None and not isinstance(bad, str) else ["a."]
    with pytest.raises(TypeError, match=message):
        metric.update(bad, refs)
    with pytest.raises(TypeError, match=message):  # the same message from the function
        getattr(movers, metric.spec.slug)(bad, refs)
