"""Distributed scoring (torch.distributed, gloo on CPU, launched by torchrun) equals one process.

The expected values are a one-process call of each metric, itself checked against the original
implementations by each metric's parity tests; two ranks must reproduce it to float32 rounding
(max |Δ| <= 1e-6), in input order, with the same signature, on every rank.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter

import pytest

from movers.core.result import REGROUPING_ATOL
from movers.core.scope import ProcessGroupScope, Scope, distributed_scoring, shard_bounds

from .helpers import REFERENCE, REPO

WORKER = REPO / "tests" / "support" / "distributed_worker.py"
PAIRS = REFERENCE / "bertscore_L6_idf-off.jsonl"  # 210 real pairs (4 development sets) with their inputs inline
N_PAIRS = 210
TOL = REGROUPING_ATOL  # the reproducibility rule: ranks embed other batches than one process


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "shared"), env.get("PYTHONPATH", "")])
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args: str, cwd) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), *args]
    return subprocess.run(cmd, env=_env(), cwd=cwd, capture_output=True, text=True, timeout=900)


def _flat(value):
    """Nested lists of numbers/bools -> a flat list of floats (per_reference, precision, ...)."""
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [float(value)]


@pytest.mark.system
@pytest.mark.invariance
@pytest.mark.slow
def test_two_ranks_equal_one_process(tmp_path):
    one = subprocess.run([sys.executable, str(WORKER), str(PAIRS), str(N_PAIRS), str(tmp_path / "one.json")],
                         env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _torchrun(str(WORKER), str(PAIRS), str(N_PAIRS), str(tmp_path / "two.json"), cwd=tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    expected = json.loads((tmp_path / "one.json").read_text())
    ranks = [json.loads((tmp_path / f"two.json.rank{r}").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1]  # every rank returns the whole result
    got = ranks[0]
    assert set(got) == set(expected) and len(expected) == 7
    report = {}
    for key, want in expected.items():
        have = got[key]
        assert len(have["scores"]) == N_PAIRS
        assert have["signature"] == want["signature"], key
        delta = max(abs(a - b) for a, b in zip(have["scores"], want["scores"]))
        assert delta <= TOL, (key, delta)
        assert abs(have["score"] - want["score"]) <= TOL, key
        assert set(have["extra"]) == set(want["extra"]), key
        for name, value in want["extra"].items():
            if name == "iterations":  # the solver's stopping check runs every 10 iterations
                assert max(abs(a - b) for a, b in zip(_flat(have["extra"][name]), _flat(value))) <= 10, key
            else:
                a, b = _flat(have["extra"][name]), _flat(value)
                assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= TOL, (key, name)
        report[key] = delta
    print("max |Δ| per metric:", {k: f"{v:.1e}" for k, v in report.items()})


@pytest.mark.system
@pytest.mark.slow
def test_command_under_torchrun_equals_the_api(tmp_path):
    import movers

    hyps = ["The cat sat on the mat.", "A quick brown fox.", "He went home early today.", "Rain again."] * 5
    refs1 = ["A cat was sitting on the mat.", "The fast brown fox.", "She went home.", "More rain."] * 5
    refs2 = ["The cat is on the mat.", "A brown fox jumps.", "He left early.", "It rains again."] * 5
    for name, lines in (("h.txt", hyps), ("r1.txt", refs1), ("r2.txt", refs2)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _torchrun("-m", "movers", "score", "-m", "delta_bleu", "-c", "h.txt", "-r", "r1.txt", "-r", "r2.txt",
                    "--format", "json", "--per-segment", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)["delta_bleu"]  # rank 0 prints, rank 1 does not (one JSON document)
    want = movers.delta_bleu(hyps, [list(r) for r in zip(refs1, refs2)])
    assert out["scores"] == pytest.approx(want.scores, abs=1e-9)
    assert out["score"] == pytest.approx(want.score, abs=1e-9)  # corpus BLEU from the summed statistics
    assert out["signature"] == want.signature


@pytest.mark.system
@pytest.mark.invariance
@pytest.mark.slow
def test_several_systems_with_a_paired_test_under_torchrun(tmp_path):
    """`movers score -c A B C --paired-bs` under torchrun: every rank scores its shard of each system and rank 0
    prints one table, equal to movers.compare in one process: scores to float32 rounding (the ranks run one
    thread each; the token vectors are the same bits with 1 or 2 threads, the transport's arithmetic is not,
    ~2e-8 here), the same seeded resamples and so the same p-values."""
    import movers

    refs = ["A cat was sitting on the mat.", "The fast brown fox leaped.", "She went home early.", "More rain."] * 4
    systems = {"base.txt": ["The cat sat on the mat.", "A quick brown fox.", "He went home.", "Rain again."] * 4,
               "para.txt": ["A cat sat on a mat.", "The brown fox jumped.", "She left early.", "It rains more."] * 4,
               "off.txt": ["Stocks fell.", "The committee met.", "I will call.", "Weather is nice."] * 4}
    for name, lines in [*systems.items(), ("refs.txt", refs)]:
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _torchrun("-m", "movers", "score", "-m", "moverscore", "-r", "refs.txt", "-c", *systems,
                    "--paired-bs", "--paired-bs-n", "200", "-f", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)["moverscore"]  # rank 0 prints, rank 1 does not (one JSON document)
    want = movers.compare("moverscore", systems, refs, paired_bs=True, paired_bs_n=200)["moverscore"]
    assert list(got) == list(systems)
    for name in systems:
        assert abs(got[name]["score"] - want[name].score) <= TOL and got[name]["signature"] == want[name].signature
    assert [got[n]["p_value"] for n in ("para.txt", "off.txt")] == [want[n].p_value for n in ("para.txt", "off.txt")]


@pytest.mark.system
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread names from /proc/self/task")
def test_launched_scoring_leaves_no_process_group_behind(tmp_path):
    """The encoder is first loaded inside `launched_scoring` (transformers imports torch's FSDP modules
    lazily then): after the block no gloo thread may remain. One did (a default argument holding the
    destroyed group), and interpreter teardown aborted now and then after the output was printed."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import os, movers\n"
        "from movers.core.scope import launched_scoring\n"
        "with launched_scoring():\n"
        "    movers.moverscore(['The cat sat.', 'A dog ran.'], ['A cat sat.', 'The dog runs.'])\n"
        "names = [open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task')]\n"
        "open(f\"threads{os.environ['RANK']}.txt\", 'w').write(' '.join(sorted(names)))\n", encoding="utf-8")
    run = _torchrun(str(script), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    for rank in (0, 1):
        names = (tmp_path / f"threads{rank}.txt").read_text().split()
        assert names and not [n for n in names if "gloo" in n], (rank, names)


@pytest.mark.parametrize("n,world,multiple", [(400, 2, 1), (400, 2, 32), (7, 3, 1), (5, 4, 2), (1, 2, 1), (0, 2, 3)])
def test_shards_cover_the_call_in_order(n, world, multiple):
    bounds = [shard_bounds(n, world, r, multiple) for r in range(world)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    for (a, b), (c, _) in zip(bounds, bounds[1:]):
        assert b == c  # contiguous: gathering in rank order restores input order
    for a, b in bounds:
        assert a <= b and (a % multiple == 0 or a == n)  # whole batches of `multiple` segments


def test_default_scope_is_the_whole_call():
    scope = Scope()
    assert scope.part(5, multiple=2) == range(5)
    assert scope.total(Counter({3: 1})) == Counter({3: 1}) and scope.gather([1, 2]) == [1, 2]


def test_distributed_scoring_needs_a_process_group():
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(RuntimeError, match=r"no torch.distributed process group is initialised"):
        with distributed_scoring():
            pass


def test_one_rank_group_reduces_counters_and_sums(tmp_path):
    """The dense all-reduce of document frequencies and float sums, on a one-rank gloo group."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        scope = ProcessGroupScope()
        assert scope.total(Counter({2: 3, 7: 1})) == Counter({2: 3, 7: 1})
        assert scope.total(Counter()) == Counter()
        assert scope.total(5) == 5 and isinstance(scope.total(5), int)
        assert scope.total([1.5, 2.0]) == [1.5, 2.0]
        t = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
        assert torch.equal(scope.total(t), t)
        assert scope.gather(["a", "b"]) == ["a", "b"] and scope.part(10, multiple=4) == range(10)
        with pytest.raises(TypeError, match="cannot sum a str"):
            scope.total("x")
    finally:
        dist.destroy_process_group()


ACCELERATE_SCRIPT = """
import json, sys
import torch.distributed.fsdp   # before the group (the README says why)
from accelerate import Accelerator
import movers
acc = Accelerator(cpu=True)   # initialises the gloo process group the launcher set up
preds, refs = json.loads(open(sys.argv[1]).read())
with movers.distributed_scoring():
    out = movers.moverscore(preds, refs, idf=True)
if acc.is_main_process:
    open(sys.argv[2], "w").write(json.dumps({"world": acc.num_processes, "scores": out.scores,
                                             "signature": out.signature}))
acc.end_training()   # destroys the process group
"""


@pytest.mark.system
@pytest.mark.slow
def test_accelerate_launch_equals_one_process(tmp_path):
    """The README's `accelerate launch` recipe: on CPU, accelerate's `--multi_gpu` launcher is torchrun
    (its `--cpu` multi-process path is mpirun); Accelerator(cpu=True) then opens a gloo group."""
    pytest.importorskip("accelerate", reason="accelerate (in the test extra) is not installed")
    import movers

    preds = ["The cat sat on the mat.", "A dog ran.", "Hello world", "It rains today.", "Birds fly south."]
    refs = [["A cat was on the mat."], ["The dog was running.", "A dog ran fast."], ["Hi world"],
            ["Today it is raining."], ["Birds migrate."]]
    (tmp_path / "pairs.json").write_text(json.dumps([preds, refs]))
    (tmp_path / "s.py").write_text(ACCELERATE_SCRIPT)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(_free_port()), "s.py", "pairs.json", "out.json"]
    run = subprocess.run(cmd, env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads((tmp_path / "out.json").read_text())
    want = movers.moverscore(preds, refs, idf=True)  # per-call IDF over all five pairs, one process
    assert got["world"] == 2 and got["signature"] == want.signature
    assert max(abs(a - b) for a, b in zip(got["scores"], want.scores)) <= TOL
