"""Shared test settings: tolerances (stated once), fixture locations, the real encoder.

The reference outputs of the original implementations are part of the repository (tests/reference/, with the
README that says how each was produced), so every parity test runs from a bare clone. The human-judgment data
sets are not (their licences): they are read from $MOVERS_SHARED/data, else ../shared/data beside the checkout,
and a test that needs one skips naming it.
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
SHARED = Path(os.environ.get("MOVERS_SHARED", REPO.parent / "shared"))
REFERENCE = REPO / "tests" / "reference"   # the originals' outputs, committed (tests/reference/README.md)
DATA = SHARED / "data"

# Tolerances (see tests/reference/README.md).
ATOL_COUNT = 1e-9       # counting metrics (ΔBLEU)
ATOL_EMD = 1e-7         # exact EMD costs, float64
ATOL_SINKHORN = 1e-5    # entropic / unbalanced solvers
ATOL_MODEL = 1e-4       # model scores vs the original implementation (MoverScore issue: 1e-4)
ATOL_IDENTICAL = 1e-3   # MoverScore records whose hypothesis equals its reference (original's float32 noise)


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


def data_path(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"data set {name} not found in {DATA} (human-judgment data, not in the repository: "
                    f"set MOVERS_SHARED to the folder holding data/, or place it at ../shared beside the checkout)")
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
    from movers.integrations.space import build_wheel

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
