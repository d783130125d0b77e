"""What the tests share that is not a fixture: the repository's paths, the tolerances (stated once), the reference
outputs and the real texts of tests/reference/, the human-judgment data sets ($MOVERS_DATA), a fresh virtual
environment with this one's dependencies.

The reference outputs of the original implementations are part of the repository (tests/reference/, with the
README that says how each was produced), so every parity test runs from a bare clone. The human-judgment data
sets are not (their licences): they are read from $MOVERS_DATA, else ../shared/data beside the checkout, and a test
that needs one skips naming it. Also: the message of an optional extra's missing package, as a fresh process sees it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "tests" / "reference"   # the originals' outputs, committed (tests/reference/README.md)
# The human-judgment data sets: $MOVERS_DATA (what the studies of shared/bench read), else $MOVERS_SHARED/data, else
# ../shared/data beside the checkout. Subprocesses (the studies' commands) are pointed at the same folder.
DATA = Path(os.environ.get("MOVERS_DATA") or Path(os.environ.get("MOVERS_SHARED", REPO.parent / "shared")) / "data")

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


def check_missing_extra(module: str, package: str, extra: str, import_name: str) -> None:
    """Importing `module` where `import_name` is missing raises movers' ImportError naming `extra` and quoting the
    requirement on `package` that pyproject.toml declares for that extra (a fresh Python process)."""
    import re
    import subprocess
    import sys

    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"][extra]
    (requirement,) = [Requirement(r) for r in declared if Requirement(r).name == package]
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.modules[{import_name!r}] = None\nimport {module}"],
                         capture_output=True, text=True)
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith(f"ImportError: {module} needs {package}: pip install 'movers[{extra}]' "
                              f"(or pip install '{package}"), message
    quoted = re.search(rf"pip install '{re.escape(package)}([^']*)'", message).group(1)
    assert Requirement(package + quoted).specifier == requirement.specifier, (quoted, requirement)
