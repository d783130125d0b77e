"""The reproducibility rule on other CPUs (issue 27): the invariance tests (marker ``invariance``: cache, command
line against the API, several systems, streams, rewards, evaluate's bootstrap, torchrun) run again in a fresh
process under the kernels of other instruction sets, with 1 and 2 torch threads.

A machine cannot run kernels its CPU lacks, but MKL, oneDNN and ATen can be told to use older ones
(``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``): each setting picks other matrix
kernels for the same shapes, which is what moves a token vector's last bits on another CPU. The suite's own run
covers this CPU's default kernels with torch's default threads.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO

SETTINGS = {
    "default": {},
    "avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
    "sse4.2": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"},
}
CAPABILITY = {"avx2": "AVX2", "sse4.2": "DEFAULT"}  # what torch reports under each setting
_ISA_VARIABLES = {key for setting in SETTINGS.values() for key in setting}


_RANK = ["DEFAULT", "AVX2", "AVX512"]
HEAVY = "tests/test_distributed.py::test_two_ranks_equal_one_process"
"""Seven metrics on 210 pairs, once and on two ranks: the suite's own run has it; under the other kernels
torchrun is covered by the several-systems test under torchrun."""


def _capability(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _env(setting: str, threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ISA_VARIABLES}
    env.update(SETTINGS[setting], OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_invariance_tests_pass_under_other_instruction_sets(setting, threads):
    env = _env(setting, threads)
    probe = subprocess.run([sys.executable, "-c", "import json, torch; print(json.dumps([torch.backends.cpu."
                            "get_cpu_capability(), torch.get_num_threads()]))"],
                           env=env, capture_output=True, text=True, check=True)
    capability, got_threads = json.loads(probe.stdout)
    assert got_threads == threads
    if setting in CAPABILITY:  # the setting took effect (torch's kernels; MKL and oneDNN read theirs alike), or
        # the CPU lacks those kernels and runs its own older ones
        native = _capability(_env("default", threads))
        want = min(CAPABILITY[setting], native, key=_RANK.index)
        assert capability == want, (capability, want)
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "invariance", "-q", "-p", "no:cacheprovider",
                          "--deselect", HEAVY, str(REPO / "tests")],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=1800)
    tail = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"{setting}, {threads} thread(s), capability {capability}:\n{tail}"
    assert " passed" in run.stdout.splitlines()[-1] and " skipped" not in run.stdout.splitlines()[-1], tail
