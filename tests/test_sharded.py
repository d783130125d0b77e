"""Sharded torch.distributed (`movers.distributed_scoring(sharded=True)`): two gloo ranks under torchrun, each
passing only its own unequal shard of real texts (tests/reference/), return the corpus score and signature of
one call on the union (rank order) and the scores of their own segments; a failing rank fails the call on
every rank with its reason; a rank that never arrives is named when the timeout runs out.

Expected values: one-process calls on the union (each metric's parity with its original is tested elsewhere)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from .conftest import REPO, regrouped

WORKER = REPO / "tests" / "sharded_worker.py"


def _torchrun(*args: str, cwd, timeout: int = 300) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "shared"), str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(port), str(WORKER), *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_two_ranks_with_their_own_unequal_shards_equal_one_call(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    from sharded_worker import CONFIGS, SPLIT, pairs

    import movers

    run = _torchrun("score", str(tmp_path / "out.json"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"out.json.rank{r}").read_text()) for r in (0, 1)]
    preds, refs, weights = pairs()
    for slug, options in [*CONFIGS, ("delta_bleu", {"reference_weights": weights})]:
        key = slug + "".join(f"|{k}" for k in options)
        want = getattr(movers, slug)(preds, refs, **options)
        for rank, got in enumerate(ranks):
            have = got[key]
            assert have["signature"] == str(want.signature), key
            mine = want.scores[:SPLIT] if rank == 0 else want.scores[SPLIT:]
            if slug == "delta_bleu":  # sums of exact parts: the same bits
                assert have["score"] == want.score and have["scores"] == mine, key
            else:
                assert have["score"] == regrouped(want.score), key
                assert have["scores"] == regrouped(mine), key
    # a centring run split between ranks is refused on both, with the reason
    for got in ranks:
        assert "batch centring averages runs of 5 consecutive segments" in got["split_run"]
        assert "rank 1's segments start at segment 8" in got["split_run"]


@pytest.mark.slow
def test_a_failing_rank_fails_the_call_on_every_rank_with_its_reason(tmp_path):
    run = _torchrun("fail", str(tmp_path / "out.json"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    errors = [json.loads((tmp_path / f"out.json.rank{r}").read_text())["error"] for r in (0, 1)]
    assert errors[1].startswith("TypeError: moverscore: `predictions[2]`"), errors[1]  # its own error
    assert errors[0].startswith("RankFailed: rank 1 failed: TypeError: moverscore: `predictions[2]`"), errors[0]


@pytest.mark.slow
def test_a_rank_that_never_arrives_is_named_when_the_timeout_runs_out(tmp_path):
    run = _torchrun("hang", str(tmp_path / "out.json"), cwd=tmp_path, timeout=120)
    error = json.loads((tmp_path / "out.json.rank0").read_text())["error"]
    assert error.startswith("RankFailed: distributed_scoring(sharded=True): rank 0 of 2 gave up waiting"), error
    assert "Ranks 1 failed to pass monitoredBarrier in 3000 ms" in error, error  # gloo names the missing rank
    assert run.returncode != 0 or (tmp_path / "out.json.rank1").exists()
