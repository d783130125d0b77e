"""The reproducibility rule on other CPUs: the invariance tests (marker ``invariance``: cache, command line against
the API, several systems, streams, rewards, evaluate's bootstrap, torchrun) run again in a fresh process under the
kernels of other instruction sets, each at 1 and 2 torch threads.

A machine cannot run kernels its CPU lacks, but MKL, oneDNN and ATen can be told to use older ones
(``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``): each setting picks other matrix
kernels for the same shapes, which is what moves a token vector's last bits on another CPU. The instruction set
is read when a process starts, so each setting is one process; the thread count is not, so that process runs
each test at 1 and at 2 threads (``--torch-threads``: ``torch.set_num_threads`` in the process, and
``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` for the subprocesses a test starts). It collects only the files that hold
invariance tests. The suite's own runs (plain and ``-m system``) cover this CPU's default kernels at torch's default
thread count, so the default setting skips that one count rather than run it twice.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO

pytestmark = pytest.mark.system

SETTINGS = {
    "default": {},
    "avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
    "sse4.2": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"},
}
CAPABILITY = {"avx2": "AVX2", "sse4.2": "DEFAULT"}  # what torch reports under each setting
_ISA_VARIABLES = {key for setting in SETTINGS.values() for key in setting}


_RANK = ["DEFAULT", "AVX2", "AVX512"]
HEAVY = "tests/test_distributed.py::test_two_ranks_equal_one_process"
"""Seven metrics on 210 pairs, once and on two ranks: the system tests' own run has it; under the other kernels
torchrun is covered by the several-systems test under torchrun."""


def _capability(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _env(setting: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in _ISA_VARIABLES}, **SETTINGS[setting]}


def _files_with_invariance_tests() -> list[str]:
    return [str(p) for p in sorted((REPO / "tests").glob("test_*.py"))
            if p.name != Path(__file__).name and "\n@pytest.mark.invariance\n" in p.read_text(encoding="utf-8")]


@pytest.mark.slow
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_invariance_tests_pass_under_other_instruction_sets(setting, tmp_path):
    import xml.etree.ElementTree as ET

    import torch

    threads = [n for n in (1, 2) if not (setting == "default" and n == torch.get_num_threads())]
    env = _env(setting)
    capability = _capability(env)
    if setting in CAPABILITY:  # the setting took effect (torch's kernels; MKL and oneDNN read theirs alike), or
        # the CPU lacks those kernels and runs its own older ones
        want = min(CAPABILITY[setting], _capability(_env("default")), key=_RANK.index)
        assert capability == want, (capability, want)
    report = tmp_path / "report.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "invariance", "-q", "-p", "no:cacheprovider",
                          "-n", "0", "--torch-threads", ",".join(map(str, threads)), "--deselect", HEAVY,
                          f"--junitxml={report}", *_files_with_invariance_tests()],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=1800)
    tail = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"{setting}, {threads} thread(s), capability {capability}:\n{tail}"
    cases = ET.parse(report).getroot().iter("testcase")
    outcomes = [(case.get("name"), [child.tag for child in case]) for case in cases]
    assert outcomes and all(not tags for _, tags in outcomes), [o for o in outcomes if o[1]]  # none skipped
    for n in threads:  # every test ran at each thread count
        assert sum(f"{n}thread" in name for name, _ in outcomes) == len(outcomes) // len(threads), (n, outcomes)
