"""The package's structure, held by tests: ruff and mypy at zero, the layers, one place that names metrics,
short functions in the metric files.

* ruff (rules E, F, B, I, UP; settings in pyproject.toml) and mypy on ``shared/movers`` and on the studies beside
  it, ``shared/bench``, report nothing;
* layers: core < text < pipeline < metrics < integrations < cli; a module imports only from its own layer
  or those below (``movers/__init__`` sits on top);
* outside the metric files only the registry (``movers/metrics/__init__.py``) names a metric: no string
  constant in the rest of the package equals a registered slug;
* no function in a metric file has a body longer than 40 lines.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import movers

from .helpers import REPO

PACKAGE = REPO / "shared" / "movers"
BENCH = REPO / "shared" / "bench"  # the studies and timings, run from the checkout: linted and typed like the package
LAYERS = ["core", "text", "pipeline", "metrics", "api", "integrations", "cli"]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _tool(name: str) -> list[str]:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; it is part of the test extra (pip install '.[test]').")
    return [found]


def test_ruff_reports_nothing():
    out = subprocess.run([*_tool("ruff"), "check", "--no-cache", str(PACKAGE), str(BENCH)], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_mypy_reports_nothing():
    out = subprocess.run([*_tool("mypy"), "--config-file", str(REPO / "pyproject.toml"), "--no-incremental",
                          "--cache-dir", os.devnull, "-p", "movers", "-p", BENCH.name], cwd=REPO / "shared",
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _layer(path: Path) -> int | None:
    parts = path.relative_to(PACKAGE).parts
    return LAYERS.index(parts[0]) if len(parts) > 1 and parts[0] in LAYERS else None


def _imported_layers(path: Path) -> set[str]:
    """The movers sub-packages a module imports from (relative and absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = list(path.relative_to(PACKAGE).parent.parts)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
                names = [[*target, alias.name] for alias in node.names] if not node.module else [target]
            elif node.module and node.module.split(".")[0] == "movers":
                names = [node.module.split(".")[1:]]
            else:
                continue
            found.update(n[0] for n in names if n)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("movers."))
    return found


def test_every_import_runs_down_the_layers():
    wrong = []
    for path in _modules():
        layer = _layer(path)
        if layer is None:
            continue
        for target in _imported_layers(path) & set(LAYERS):
            if LAYERS.index(target) > layer:
                wrong.append(f"{path.relative_to(PACKAGE)} imports movers.{target}")
    assert not wrong, "imports that run back up the layers: " + "; ".join(wrong)


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings}


def _private_imports(path: Path) -> list[str]:
    """The underscore names that `path` imports from another module (``from x import _name``)."""
    return [f"{path.name}:{node.lineno} from {'.' * node.level}{node.module or ''} import {alias.name}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ImportFrom)
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_private_names(tmp_path):
    """What one module takes from another is public: an underscore name stays in its module (the package and the
    studies beside it)."""
    sample = tmp_path / "sample.py"
    sample.write_text("from .scope import _FirstPass, use_scope\nfrom . import __version__\n", encoding="utf-8")
    assert _private_imports(sample) == ["sample.py:1 from .scope import _FirstPass"]
    found = [hit for path in [*_modules(), *sorted(BENCH.rglob("*.py"))] for hit in _private_imports(path)]
    assert not found, found


def test_only_the_registry_names_a_metric():
    slugs = set(movers.metrics.slugs())
    assert {"moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"} <= slugs
    naming = []
    for path in _modules():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "metrics":
            continue
        named = _string_constants(path) & slugs
        if named:
            naming.append(f"{rel}: {sorted(named)}")
    assert not naming, "modules outside the metric files that name metrics: " + "; ".join(naming)


def test_metric_functions_are_short():
    long = []
    for path in sorted((PACKAGE / "metrics").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]  # the docstring
                if body and body[-1].end_lineno - body[0].lineno + 1 > 40:  # type: ignore[operator]
                    long.append(f"{path.name}:{node.name}")
    assert not long, f"function bodies over 40 lines: {long}"


def test_the_lowest_constraints_pin_exactly_the_declared_lower_bounds():
    """tests/constraints-lowest.txt (what .ci/run installs to test the lower bounds) pins `name==X` for every
    `name>=X` of pyproject.toml's dependencies, torch aside, and nothing else."""
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    declared = {}
    for line in tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]:
        req = Requirement(line)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{line}: one lower bound expected"
        declared[req.name] = lows[0]
    declared.pop("torch")
    pinned = {}
    for line in (REPO / "tests" / "constraints-lowest.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pinned[req.name] = spec.version
    assert pinned == declared
