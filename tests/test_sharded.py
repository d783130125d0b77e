"""Sharded torch.distributed (`movers.distributed_scoring(sharded=True)`): two gloo ranks under torchrun, each
passing only its own unequal shard of real texts (tests/reference/), return the corpus score and signature of
one call on the union (rank order) and the scores of their own segments; a failing rank fails the call on
every rank with its reason; a rank that never arrives is named when the timeout runs out; `movers score
--shard` under torchrun reads only each rank's lines and prints the union's result. One torchrun run serves
the library's cases (tests/support/sharded_worker.py), one the command line's.

Expected values: one-process calls on the union (each metric's parity with its original is tested elsewhere),
and ``math.fsum`` for the exact sums that make ΔBLEU the same bits however a call is split."""
from __future__ import annotations

import json
import math
import os
import random
import re
import socket
import subprocess
import sys

import pytest

from .helpers import REPO, regrouped, split_pairs

WORKER = REPO / "tests" / "support" / "sharded_worker.py"


def _torchrun(*args: str, cwd, timeout: int = 300) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "shared"), str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(port), *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of the two ranks of one torchrun run of tests/support/sharded_worker.py returned or raised."""
    tmp = tmp_path_factory.mktemp("sharded")
    run = _torchrun(str(WORKER), str(tmp / "out.json"), cwd=tmp)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads((tmp / f"out.json.rank{r}").read_text()) for r in (0, 1)]


@pytest.mark.system
@pytest.mark.slow
def test_two_ranks_with_their_own_unequal_shards_equal_one_call(ranks, one_call):
    from .support.sharded_worker import CONFIGS, SPLIT

    for slug, options in CONFIGS:
        key = slug + "".join(f"|{k}" for k in options)
        want = one_call(slug, **options)
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


@pytest.mark.system
@pytest.mark.slow
def test_ranks_that_make_different_calls_fail_alike_with_the_option_and_each_ranks_value(ranks, one_call):
    """Before the first collective of a call the ranks compare what they call: another option value, another
    metric or another kind of inputs makes the call fail on both ranks with one error naming the option and each
    rank's value (before, ΔBLEU with lowercase on one rank returned a score on both, per-call IDF on one rank or
    centring by corpus on one and by batch on the other waited forever), and the group stays usable."""
    from .support.sharded_worker import DISAGREE

    said = {
        "lowercase": "`lowercase` is True on rank 0 and False (the default) on rank 1",
        "metric": "call different metrics: `metric` is moverscore on rank 0 and lazy_emd on rank 1",
        "idf": "`idf` is True on rank 0 and False on rank 1",
        "centering": "`centering` is 'corpus' on rank 0 and 'batch' on rank 1",
        "max_ngram_order": "`max_ngram_order` is 2 on rank 0 and 4 (the default) on rank 1",
        "reference_weights": "`reference_weights` is given on rank 0 and not given on rank 1",
        "whole_inputs": "pass different `inputs`",
        "whole_idf": "`idf` is True on rank 0 and False (the default) on rank 1",
    }
    assert set(said) == set(DISAGREE)
    for name, text in said.items():
        errors = [got[f"disagree|{name}"] for got in ranks]
        assert errors[0] == errors[1], name  # one error, the same on both ranks
        assert errors[0].startswith("RanksDisagree: distributed_scoring: the ranks "), errors[0]
        assert text in errors[0], (name, errors[0])
    preds, refs, _ = split_pairs()
    import movers

    assert [got["after"] for got in ranks] == [movers.delta_bleu(preds, refs).score] * 2


@pytest.mark.system
@pytest.mark.slow
def test_a_failing_rank_fails_the_call_on_every_rank_with_its_reason(ranks):
    errors = [got["fail"] for got in ranks]
    assert errors[1].startswith("TypeError: moverscore: `predictions[2]`"), errors[1]  # its own error
    assert errors[0].startswith("RankFailed: rank 1 failed: TypeError: moverscore: `predictions[2]`"), errors[0]


@pytest.mark.system
@pytest.mark.slow
def test_a_rank_that_never_arrives_is_named_when_the_timeout_runs_out(ranks):
    error = ranks[0]["hang"]
    assert error.startswith("RankFailed: distributed_scoring(sharded=True): rank 0 of 2 gave up waiting"), error
    assert "Ranks 1 failed to pass monitoredBarrier in 2000 ms" in error, error  # gloo names the missing rank


@pytest.mark.system
@pytest.mark.slow
def test_command_line_shard_reads_only_its_lines_and_prints_the_union(tmp_path, one_call):
    import movers

    preds, refs, _ = split_pairs()
    first = [r[0] for r in refs]
    (tmp_path / "hyps.txt").write_text("".join(p + "\n" for p in preds), encoding="utf-8")
    (tmp_path / "refs.txt").write_text("".join(r + "\n" for r in first), encoding="utf-8")
    run = _torchrun("-m", "movers", "score", "--shard", "-m", "twmd", "--opt", "centering_batch=3", "-r",
                    "refs.txt", "-c", "hyps.txt", "-f", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout)  # rank 0 alone prints
    want = movers.twmd(preds, first, centering_batch=3)  # batches of 3 of the whole file
    assert printed["twmd"]["score"] == regrouped(want.score)
    assert printed["twmd"]["signature"] == str(want.signature)


def test_command_line_shard_refuses_a_rank_without_lines(tmp_path):
    from movers.cli.common import UsageError
    from movers.cli.shard import read_shard

    path = tmp_path / "hyps.txt"
    path.write_text("a\nb\nc\n", encoding="utf-8")
    assert [read_shard(str(path), "hypothesis", r, 2) for r in (0, 1)] == [["a"], ["b", "c"]]
    assert [read_shard(str(path), "hypothesis", r, 2, multiple=2) for r in (0, 1)] == [["a", "b"], ["c"]]
    with pytest.raises(UsageError, match=r"--shard: hypothesis file .* has 3 lines in runs of 4 \(batch centring\), "
                                         r"too few for 2 ranks: rank 0 would have none"):
        read_shard(str(path), "hypothesis", 1, 2, multiple=4)


def test_exact_sums_of_any_parts_in_any_order_are_the_bits_of_fsum():
    from movers.core.summation import ExactSum

    rng = random.Random(7)
    values = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(2000)] + [0.1] * 1000 + [5e-324]
    rng.shuffle(values)
    cuts = sorted(rng.sample(range(1, len(values)), 40))
    parts = [ExactSum.of(values[a:b]) for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    rng.shuffle(parts)
    assert float(sum(parts, ExactSum())) == math.fsum(values)
    assert float(sum(values)) != math.fsum(values)  # plain float sums of these values depend on the order
    assert math.isnan(float(ExactSum.of([1.0, math.inf]) + ExactSum.of([-math.inf])))


@pytest.mark.parametrize("case,said", [
    ("utf8", r"hypothesis file 'hyps\.txt' is not UTF-8 text: line 3 has invalid start byte .*"),
    ("empty", r"hypothesis file 'hyps\.txt' is empty; expected one text per line\."),
    ("unequal", r"files must have the same number of lines, got hyps\.txt: 4, refs\.txt: 3\."),
    ("missing", r"hypothesis file 'nope\.txt' does not exist \(--shard reads files, not standard input\)\."),
])
def test_command_line_shard_file_problems_are_one_line(tmp_path, case, said):
    """Each rank sees the same files and refuses alike before any collective, with one line naming the file (one
    rank here, as under torchrun's first check). Before, bytes that are not UTF-8 ended in a traceback, and
    files of unequal lengths could pass on one rank and not on another."""
    from .test_cli import one_line_error, run

    hyps = "the cat sat .\na dog .\nhello there .\nyes .\n"
    (tmp_path / "hyps.txt").write_bytes({"utf8": b"ok .\nfine .\nbad \xff .\nyes .\n", "empty": b""}.get(
        case, hyps.encode()))
    (tmp_path / "refs.txt").write_text(hyps if case != "unequal" else "a\nb\nc\n", encoding="utf-8")
    hyp = "nope.txt" if case == "missing" else "hyps.txt"
    proc = run("score", "--shard", "-m", "delta_bleu", "-r", "refs.txt", "-c", hyp, cwd=tmp_path)
    line = one_line_error(proc)
    assert re.fullmatch(r"movers score: error: " + said, line), line
