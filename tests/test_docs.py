"""Docs that cannot drift: every code block of README.md, the cards and the site's pages (``docs/**/*.md``) runs here,
and its printed output is compared. (The site's generated pages, the API reference, hold no examples: they are
written from the declarations when the site is built, ``tests/test_site.py``.)

Rules for a fenced block (``tests/test_docs.py`` is their only reader):

* ```python: a doctest when it has ``>>>`` lines (the expected output as printed), else a script that must run
  as it is (imports and inputs included); each block runs in a fresh namespace, in a temporary folder.
* ```console: ``$ command`` lines, each followed by its exact standard output; run with bash in one temporary
  folder per block, the test environment's ``bin`` first on PATH.
* ```bash: not run; the block must be preceded by ``<!-- docs: not run: <why> -->`` (installs, uploads, the test
  command itself, hour-long benchmarks). ```text and ```bibtex: prose, not run. A block without a language fails.

Numbers are compared as printed, under the reproducibility rule (:data:`movers.core.result.REGROUPING_ATOL`:
the same call on another CPU or thread count agrees to 1e-6, not bit for bit): a number printed with 7 or more
decimals may differ by the bound; one printed with fewer decimals may differ by one unit in its last place
(two values within the bound can round to neighbours). Everything else must match exactly, except the
versions of the libraries a signature names (``tf:``, ``torch:``, ``pot:``): a signature reports the versions
it ran with, and a fresh install may get a newer release than the docs were printed with. All docs print the
same versions, and a test warns when they are not the installed ones (regenerate the outputs then).
"""
from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "cards").glob("*.md")), *sorted((REPO / "docs").rglob("*.md"))]
RUN = {"python", "console"}
PROSE = {"text", "bibtex", "json", "yaml"}
_FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*docs:\s*(.*?)\s*-->\s*$")
_NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")
_LIBRARY_VERSION = re.compile(r"(?<=[|])(tf|torch|pot):[^|\s\"]+")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    body: str
    mark: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO).as_posix()}:{self.line}:{self.lang or '?'}"


def _blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").splitlines()
        mark = _MARK.search(before[-1]) if before else None
        out.append(Block(path, text[:m.start()].count("\n") + 1, m.group(1), m.group(2),
                         mark.group(1) if mark else ""))
    return out


BLOCKS = [b for path in DOCS for b in _blocks(path)]


def same_output(expected: str, got: str) -> bool:
    """Equal line by line (trailing blanks ignored); numbers printed with >= 7 decimals within the
    reproducibility bound, shorter ones within one unit in their last place."""
    from movers.core.result import REGROUPING_ATOL

    exp_lines = [_LIBRARY_VERSION.sub(r"\1:*", line.rstrip()) for line in expected.strip("\n").splitlines()]
    got_lines = [_LIBRARY_VERSION.sub(r"\1:*", line.rstrip()) for line in got.strip("\n").splitlines()]
    if len(exp_lines) != len(got_lines):
        return False
    for e, g in zip(exp_lines, got_lines, strict=True):
        if _NUMBER.sub("#", e) != _NUMBER.sub("#", g):
            return False
        for x, y in zip(_NUMBER.findall(e), _NUMBER.findall(g), strict=True):
            if x == y:
                continue
            decimals = len(x.split(".")[1].split("e")[0].split("E")[0])
            if "e" in x.lower() or "e" in y.lower() or decimals != len(y.split(".")[1]):
                return False  # another notation or precision is a real difference
            bound = REGROUPING_ATOL if decimals >= 7 else 10.0 ** -decimals * 1.000001
            if abs(float(x) - float(y)) > bound:
                return False
    return True


class _Checker(doctest.OutputChecker):
    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        return super().check_output(want, got, optionflags) or same_output(want, got)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1",
               PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_every_block_declares_how_it_is_checked():
    bad = [b.id for b in BLOCKS if b.lang not in RUN | PROSE | {"bash"}]
    assert not bad, f"code blocks without a known language (python, console, bash, text, bibtex): {bad}"
    unmarked = [b.id for b in BLOCKS if b.lang == "bash" and not b.mark.startswith("not run:")]
    assert not unmarked, f"bash blocks must say why they are not run (<!-- docs: not run: ... -->): {unmarked}"
    assert sum(b.lang in RUN for b in BLOCKS) >= 20


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=lambda b: b.id)
def test_python_block(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if ">>>" not in block.body:
        exec(compile(block.body, block.id, "exec"), {"__name__": "__docs__"})
        return
    test = doctest.DocTestParser().get_doctest(block.body, {"__name__": "__docs__"}, block.id, str(block.path),
                                               block.line)
    runner = doctest.DocTestRunner(checker=_Checker(), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output: list[str] = []
    runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)


def _commands(body: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], ""))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + line + "\n")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "console"], ids=lambda b: b.id)
def test_console_block(block, tmp_path):
    commands = _commands(block.body)
    assert commands, f"{block.id}: a console block needs `$ command` lines"
    for command, expected in commands:
        run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                             timeout=900)
        assert run.returncode == 0, f"{block.id}: `{command}` exited {run.returncode}:\n{run.stderr[-2000:]}"
        assert same_output(expected, run.stdout), (f"{block.id}: `{command}` printed\n{run.stdout}\n"
                                                   f"but the docs show\n{expected}")


def test_same_output_rule():
    assert same_output("score = 0.3284\n", "score = 0.3284")
    assert same_output("score = 0.3284", "score = 0.3285")  # a rounding flip within the bound
    assert not same_output("score = 0.3284", "score = 0.3286") and not same_output("0.3284", "0.32840")
    assert not same_output("score = 17.37", "score = 17.39") and not same_output("1.5e-07", "1.6e-07")
    assert same_output("[0.48631369486286813]", "[0.48631369486286900]")
    assert same_output("[0.4863136]", "[0.4863215]") and not same_output("[0.4863136]", "[0.4863336]")
    assert not same_output("a\nb", "a")


_PRINTED_VERSION = re.compile(r"[|](tf|torch|pot|sacrebleu):([^|\s\"]+)")


def test_every_printed_signature_names_the_same_library_versions():
    """A user copies the docs' signatures: one version per library across README, cards and pages, and a warning
    (not a failure: a new release must not turn a fresh install red) when it is not the installed one."""
    import ot
    import sacrebleu
    import torch
    import transformers

    seen: dict[str, set[str]] = {}
    for b in BLOCKS:
        for lib, version in _PRINTED_VERSION.findall(b.body):
            seen.setdefault(lib, set()).add(version)
    assert seen and all(len(v) == 1 for v in seen.values()), f"docs print several versions of a library: {seen}"
    installed = {"tf": transformers.__version__, "torch": torch.__version__, "pot": ot.__version__,
                 "sacrebleu": sacrebleu.__version__}
    stale = {lib: (v.pop(), installed[lib]) for lib, v in seen.items() if installed[lib] not in v}
    if stale:
        import warnings

        warnings.warn(f"the docs print library versions that are not installed here (printed, installed): {stale}; "
                      f"regenerate the printed outputs", UserWarning, stacklevel=1)


@pytest.mark.parametrize("slug", ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"])
def test_card_option_table_is_the_declaration(slug):
    """The card's option table is generated from the spec: run `python -m movers.integrations.hub.cards --write`."""
    import movers
    from movers.integrations.hub.cards import sync

    card = (REPO / "cards" / f"{slug}.md").read_text(encoding="utf-8")
    assert sync(card, movers.metrics.get(slug)) == card, (
        f"cards/{slug}.md's option table differs from its declaration; run "
        f"`python -m movers.integrations.hub.cards --write`")


def test_the_readme_table_lists_every_registered_metric():
    """The README's first table names each slug of the registry (``movers.metrics.slugs()``) once."""
    import movers

    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| module |"):].split("\n\n", 1)[0]
    named = re.findall(r"`([a-z_]+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:]))
    assert sorted(named) == sorted(movers.metrics.slugs()), named


def test_the_readme_is_a_front_page():
    """The README is the front page (what movers is, the two commands, an example of each API, the metric table,
    links into the site); the manual is the site (docs/, tests/test_site.py). 250 lines at most."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the detail to a page under docs/"
    assert "## Two commands" in lines and any(line.startswith("](docs/") or "](docs/" in line for line in lines)


def test_ci_runs_the_readmes_two_commands():
    """.ci/run sets up as the README's first command does (without the demo run) and runs the second command
    exactly as written."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Two commands"):readme.index("\n## ", readme.index("## Two commands") + 5)]
    first, second = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    setup = first.removesuffix(" && .venv/bin/movers demo")
    assert setup != first and "pip install ." in setup and "[test]" not in setup  # the metrics' needs only
    assert setup.replace(" install ", " install --quiet ") in ci
    assert f"'{second}'" in ci and "[test]" in second and second.endswith(".venv/bin/python -m pytest")


_TRACKER = re.compile(r"issue #?[0-9]+", re.I)


def test_no_tracker_numbers_where_users_read():
    """A reader has no access to the project's tracker: the README, cards, pages, module READMEs and the package
    (docstrings, help texts, comments) say what was decided and when, not "issue 22"."""
    paths = [REPO / "README.md", *sorted((REPO / "cards").glob("*.md")), *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "metrics").glob("*/README.md")),
             *sorted(p for p in (REPO / "shared" / "movers").rglob("*") if p.is_file() and p.suffix in
                     {".py", ".md", ".txt", ".yaml", ".yml", ".json", ".jsonl", ".html", ".js", ".css"})]
    found = [f"{p.relative_to(REPO)}:{n}: {m.group(0)}" for p in paths
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             for m in _TRACKER.finditer(line)]
    assert len(paths) > 100 and not found, found


def test_tables_are_markdown_not_console_output():
    """A table on a page is a Markdown table the site renders, not printed output in a code block (where it is
    cut at the page's edge); a command's Markdown output is included as Markdown and checked against it."""
    in_fences = [b.id for b in BLOCKS if b.path.is_relative_to(REPO / "docs")
                 and re.search(r"^\|.*\|\s*$\n^\|[-:| ]+\|\s*$", b.body, re.M)]
    assert not in_fences, f"Markdown tables inside code blocks: {in_fences}"


def test_pages_with_several_sections_have_headings():
    """Every page longer than a screen or two has sections the table of contents lists (## headings), not bold
    paragraphs standing for them."""
    flat = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 45 and sum(line.startswith("## ") for line in lines) < 2:
            flat.append(path.relative_to(REPO).as_posix())
    assert not flat, f"pages without ## sections: {flat}"
