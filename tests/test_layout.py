"""The map of the package cannot drift from the tree: docs/layout.md's tree names every sub-package and module of
``shared/movers`` (and nothing that is not there), and every package's docstring names each of its rooms (its
modules and sub-packages)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .helpers import REPO

PACKAGE = REPO / "shared" / "movers"
SKIPPED = {"__init__.py", "__main__.py"}


def _rooms(folder: Path) -> list[Path]:
    """The modules and sub-packages directly in `folder` (a package)."""
    return sorted(p for p in folder.iterdir()
                  if (p.suffix == ".py" and p.name not in SKIPPED) or (p / "__init__.py").is_file())


def _tree() -> set[str]:
    """Every module and sub-package of the package, as a path under shared/movers (sub-packages end in '/')."""
    found: set[str] = set()
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        for room in _rooms(folder):
            rel = room.relative_to(PACKAGE).as_posix()
            found.add(rel + "/" if room.is_dir() else rel)
    return found


_NAME = re.compile(r"[\w.]+/|[\w]+\.py")


def _layout_tree(text: str) -> set[str]:
    """The paths that the tree block of docs/layout.md names under ``shared/movers/``: one level of indentation
    (two spaces) per folder; a line starts with one folder (``name/``) or one or more modules (``a.py b.py``),
    then, after two spaces or more, what they hold."""
    block = re.search(r"```text\n(shared/movers/.*?)```", text, re.S)
    assert block, "docs/layout.md has no ```text block that starts with shared/movers/"
    named: set[str] = set()
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    for line in block.group(1).splitlines()[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:  # the block goes on with the repository's other folders
            break
        head = re.split(r" {2,}", line.strip())[0]
        names = head.split(" ")
        if not all(_NAME.fullmatch(n) for n in names):
            continue  # a line that goes on with the description of the line above
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        for name in names:
            named.add(parent + name)
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, parent + names[0]))
    return named


def test_the_layout_page_names_every_room_of_the_package():
    tree, page = _tree(), _layout_tree((REPO / "docs" / "layout.md").read_text(encoding="utf-8"))
    assert not tree - page, f"in shared/movers, not in docs/layout.md's tree: {sorted(tree - page)}"
    assert not page - tree, f"in docs/layout.md's tree, not in shared/movers: {sorted(page - tree)}"


def test_every_package_docstring_names_its_rooms():
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for room in _rooms(init.parent):
            if not re.search(rf"\b{re.escape(room.stem)}\b", doc):
                missing.append(f"{init.relative_to(PACKAGE)} does not name {room.stem}")
    assert not missing, missing


def test_the_layout_reader_follows_the_indentation():
    """The reader of the page's tree: folders nest by indentation, several modules share a line, descriptions
    that go on below a line name nothing."""
    text = ("```text\nshared/movers/   the package\n  core/         1. pure\n    transport/  solvers\n"
            "      exact.py  emd\n    spec.py options.py   declarations\n                 and their checks\n"
            "  cli/          6. commands\n    score.py     movers score\ndocs/  the site\n```\n")
    assert _layout_tree(text) == {"core/", "core/transport/", "core/transport/exact.py", "core/spec.py",
                                  "core/options.py", "cli/", "cli/score.py"}


def test_the_wheel_lists_every_package_of_the_tree():
    """pyproject.toml names the packages the wheel ships one by one: each sub-package of shared/movers is there, and
    nothing else (the studies in shared/bench are not)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    declared = set(project["tool"]["setuptools"]["packages"])
    tree = {".".join(("movers", *init.parent.relative_to(PACKAGE).parts)) for init in PACKAGE.rglob("__init__.py")}
    assert declared == tree | {"movers.evaluate_modules"}


def test_the_longest_first_order_names_test_files():
    """The files that start first (tests/conftest.py) are test files of this folder: a renamed file would otherwise
    fall back to the end of the order without a word (the collection hook refuses it too)."""
    from .conftest import LONGEST_FIRST

    assert LONGEST_FIRST and all((REPO / "tests" / name).is_file() for name in LONGEST_FIRST), LONGEST_FIRST


COLLECTIONS = [((), "other"), (("-m", "system"), "system"), (("--with-system-tests",), "both"),
               (("-m", "system or not system"), "both")]
_SHARDED = "tests/test_sharded.py"

# the four collections in one pytest process (pytest.main once each): the process's start and imports are most of
# a collection's time
_COLLECT = """
import json, sys
import pytest

class Ids:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

runs = []
for args in json.loads(sys.argv[1]):
    ids = Ids()
    code = pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", *args, sys.argv[2]], plugins=[ids])
    runs.append([int(code), getattr(ids, "ids", [])])
print("COLLECTED " + json.dumps(runs))
"""


@pytest.fixture(scope="module")
def collected() -> dict[tuple[str, ...], tuple[int, list[str]]]:
    """{args: (exit status, the collected test ids)} of each run of COLLECTIONS on test_sharded.py."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _COLLECT, json.dumps([list(a) for a, _ in COLLECTIONS]), _SHARDED],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("COLLECTED "))
    return {args: tuple(done) for (args, _), done in zip(COLLECTIONS, json.loads(line[len("COLLECTED "):]),
                                                           strict=True)}


@pytest.mark.parametrize("args,kept", COLLECTIONS)
def test_a_plain_run_leaves_out_the_system_tests_and_the_marker_selects_them(args, kept, collected):
    """On test_sharded.py (torchrun tests marked `system` beside in-process ones): a run without -m collects only
    the unmarked tests, `-m system` only the marked ones, and `--with-system-tests` or an expression that names
    both, both."""
    tree = ast.parse((REPO / _SHARDED).read_text(encoding="utf-8"))
    marked = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
              and any(ast.unparse(d) == "pytest.mark.system" for d in f.decorator_list)}
    names = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")}
    assert marked and names - marked
    status, ids = collected[args]
    assert status == 0, (args, status)
    got = {nodeid.split("::")[1].split("[")[0] for nodeid in ids if nodeid.startswith(_SHARDED + "::")}
    want = {"other": names - marked, "system": marked, "both": names}[kept]
    assert got == want, (args, sorted(got ^ want))
