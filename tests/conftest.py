"""Shared test settings: tolerances (stated once), fixture locations, the real encoder.

The reference outputs of the original implementations are part of the repository (tests/reference/, with the
README that says how each was produced), so every parity test runs from a bare clone. The human-judgment data
sets are not (their licences): they are read from $MOVERS_DATA, else ../shared/data beside the checkout, and a test
that needs one skips naming it.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The suite runs offline, in a fresh Hugging Face home of its own (evaluate's module cache included): the same
# on a developer's machine as in CI, and the user's own HF_HOME is never written to. The bundled encoder and
# GloVe come from site-packages, so nothing needs the user's hub cache.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")          # lm-eval's tasks read local JSONL through datasets
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # MLflow would send usage events
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="movers-tests-hf-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ.pop("HF_MODULES_CACHE", None)

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "tests" / "reference"   # the originals' outputs, committed (tests/reference/README.md)
# The human-judgment data sets: $MOVERS_DATA (what the studies of shared/bench read), else $MOVERS_SHARED/data, else
# ../shared/data beside the checkout. Subprocesses (the studies' commands) are pointed at the same folder.
DATA = Path(os.environ.get("MOVERS_DATA") or Path(os.environ.get("MOVERS_SHARED", REPO.parent / "shared")) / "data")
os.environ.setdefault("MOVERS_DATA", str(DATA))

# The files that run longest (whole pytest sessions under other kernels, six Spaces in chromium, local Ray and
# torchrun clusters, every page's examples, the parity runs), longest first, as timed on the project's 2-core
# machine. pytest-xdist gives each worker one file at a time in collection order (--no-loadscope-reorder in
# pyproject.toml; by default it orders files by their number of tests, which put the longest file last and left one
# worker idle for three minutes): these start first and the short files fill in behind them.
LONGEST_FIRST = ("test_any_cpu.py", "test_space.py", "test_ray.py", "test_docs.py", "test_distributed.py",
                 "test_moverscore.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# Tolerances (see tests/reference/README.md).
ATOL_COUNT = 1e-9       # counting metrics (ΔBLEU)
ATOL_EMD = 1e-7         # exact EMD costs, float64
ATOL_SINKHORN = 1e-5    # entropic / unbalanced solvers
ATOL_MODEL = 1e-4       # model scores vs the original implementation (MoverScore issue: 1e-4)
ATOL_IDENTICAL = 1e-3   # MoverScore records whose hypothesis equals its reference (original's float32 noise)


def pytest_addoption(parser):
    parser.addoption("--torch-threads", default="", metavar="N,M",
                     help="run every test once per torch thread count (torch.set_num_threads, and OMP_NUM_THREADS "
                          "and MKL_NUM_THREADS for the subprocesses it starts); tests/test_any_cpu.py uses it")


def pytest_generate_tests(metafunc):
    counts = metafunc.config.getoption("--torch-threads")
    if counts and "torch_threads" in metafunc.fixturenames:
        metafunc.parametrize("torch_threads", [int(n) for n in counts.split(",")], indirect=True,
                             ids=lambda n: f"{n}thread")


@pytest.fixture(autouse=True)
def torch_threads(request, monkeypatch):
    """The torch thread count of this test when ``--torch-threads`` is given (else torch's own, untouched)."""
    count = getattr(request, "param", None)
    if count is None:
        yield None
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    monkeypatch.setenv("OMP_NUM_THREADS", str(count))
    monkeypatch.setenv("MKL_NUM_THREADS", str(count))
    try:
        yield count
    finally:
        torch.set_num_threads(before)


def regrouped(expected):
    """The reproducibility rule (:data:`movers.core.result.REGROUPING_ATOL`) as a pytest comparison: scores of
    the same texts grouped differently (batches, systems, caches, streams, shards, threads, CPUs) agree to
    float32 rounding, ``|got - expected| <= REGROUPING_ATOL`` each, and are never compared bit for bit."""
    from movers.core.result import REGROUPING_ATOL

    return pytest.approx(expected, rel=0, abs=REGROUPING_ATOL)


def reference_records(name: str) -> list[dict]:
    """Records of tests/reference/<name>.jsonl (a missing file is an error: the fixtures are in the repository)."""
    path = REFERENCE / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def real_pairs(group: str, n: int | None = None) -> tuple[list[str], list[str]]:
    """The first `n` (hypothesis, reference) pairs of fixture group `group` (bagel, stsb_dev, wmt15_16, summeval):
    real texts of the development sets, committed with the fixtures, for tests that need real pairs but are not
    about a data set."""
    records = [r for r in reference_records("bertscore_L6_idf-off") if r["group"] == group][:n]
    assert records, f"no fixture records of group {group!r}"
    return [r["hypothesis"] for r in records], [r["reference"] for r in records]


def dialogue_systems() -> tuple[dict[str, list[str]], list[list[str]]]:
    """The dialogue fixture as systems: {system: its 8 responses}, and the 4 reference streams (8 contexts of
    DailyDialog, 5 responders: CVAEf, dualencoder_train, hredf, human, seq2seqf), in the fixture's order."""
    records = reference_records("dbleu_dailydialog_segments")
    contexts = list(dict.fromkeys(r["context_id"] for r in records))
    by_system: dict[str, dict[str, dict]] = {}
    for r in records:
        by_system.setdefault(r["system"], {})[r["context_id"]] = r
    systems = {name: [rows[c]["hypothesis"] for c in contexts] for name, rows in by_system.items()}
    first = next(iter(by_system.values()))
    streams = [[first[c]["references"][k] for c in contexts] for k in range(len(first[contexts[0]]["references"]))]
    return systems, streams


def data_path(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"data set {name} not found in {DATA} (human-judgment data, not in the repository: set "
                    f"MOVERS_DATA to a folder holding it, or place it at ../shared/data beside the checkout)")
    return path


def groups(records: list[dict]) -> dict[str, list[dict]]:
    """Records by `group`, in file order (the originals were called once per group)."""
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["group"], []).append(r)
    return out


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """A movers wheel built from this checkout (the tests may run against an installed, non-editable movers, as in
    CI); shared by the tests that install it (the Space build, the Inspect entry point)."""
    from movers.integrations.spaces.build import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"), source=REPO)


def venv_with_our_dependencies(folder: Path) -> Path:
    """A fresh virtual environment whose only extra path is this environment's site-packages (a .pth line, so
    that torch & co. need no install; .pth files of that folder, e.g. an editable movers, are not run)."""
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "dependencies-of-the-test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def split_pairs() -> tuple[list[str], list[list[str]], list[list[float]]]:
    """The inputs of the tests that split one call over Ray blocks or torch.distributed ranks: 20 real
    DailyDialog segments of tests/reference/, segment i with its 1 + i % 2 best-rated references (ragged, so
    that ``nrefs`` is ``var``; ΔBLEU needs a positive weight in each segment) and their human weights."""
    records = reference_records("dbleu_dailydialog_segments")[:20]
    rated = [sorted(zip(r["ref_weights"], r["references"], strict=True), key=lambda x: -x[0])[:1 + i % 2]
             for i, r in enumerate(records)]
    return ([r["hypothesis"] for r in records], [[ref for _, ref in row] for row in rated],
            [[w for w, _ in row] for row in rated])


@pytest.fixture(scope="session")
def one_call():
    """``one_call(slug, **options)``: ``movers.<slug>`` on all of :func:`split_pairs` in one process (the expected
    values of the split runs), computed once per session; ``reference_weights="weights"`` passes their weights."""
    import warnings

    import movers

    preds, refs, weights = split_pairs()
    done: dict[tuple, object] = {}

    def call(slug: str, **options):
        key = (slug, tuple(sorted(options.items())))
        if key not in done:
            kwargs = {k: weights if v == "weights" else v for k, v in options.items()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a segment without content words (SMS): tested elsewhere
                done[key] = getattr(movers, slug)(preds, refs, **kwargs)
        return done[key]

    return call
