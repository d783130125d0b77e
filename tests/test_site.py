"""The documentation site (mkdocs.yml, docs/, shared.bench.site): it builds in strict mode with the command
the docs give (``python -m shared.bench docs --build``, at the checkout's root) and with MkDocs' own
(``mkdocs build``, there too), a planted broken link or anchor fails that build, the same command serves it
locally, and the API reference names every public name and every option of every metric, from the declarations.
A plain run builds the site once; the other builds and the server are system tests (tests/conftest.py).

The examples on the pages run in tests/test_docs.py; the built pages are checked here.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import movers
from shared.bench.site import (
    SEARCH_WORKER,
    RestRoles,
    doctest_lexer,
    include,
    public_names,
    reference_pages,
    relink,
    site_map,
)

from .helpers import REPO
from .test_cli import _PATH

pytest.importorskip("mkdocs", reason="the docs extra (part of the test extra) builds the site")
pytest.importorskip("mkdocstrings")


def _docs(*args: str) -> subprocess.CompletedProcess:
    """``python -m shared.bench docs ARGS`` at the checkout's root (MkDocs then takes the process's place)."""
    return subprocess.run([sys.executable, "-m", "shared.bench", "docs", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **_PATH}, timeout=600)


def _build(repo: Path, site: Path) -> subprocess.CompletedProcess:
    return _docs("--build", str(site), "--repo", str(repo))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by the documented command, in strict mode, from a copy of what the build reads: the copy
    that the broken-link test plants its links in, so this build is also that test's control."""
    work = tmp_path_factory.mktemp("site")
    out = work / "site"
    start = time.perf_counter()
    proc = _build(_copy_of_the_sources(work), out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"site built in {time.perf_counter() - start:.1f} s")
    return out


def _copy_of_the_sources(tmp_path: Path) -> Path:
    """What the build reads: the config, the pages, the README, the changelog, the cards, the declared addresses
    (pyproject.toml) and the package source (docstrings)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("mkdocs.yml", "README.md", "CHANGELOG.md", "pyproject.toml"):
        shutil.copy(REPO / name, repo / name)
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("docs", "cards"):
        shutil.copytree(REPO / name, repo / name, ignore=ignore)
    for name in ("movers", "bench"):
        shutil.copytree(REPO / "shared" / name, repo / "shared" / name, ignore=ignore)
    return repo


def test_the_site_builds_with_every_page(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    written = {p.relative_to(REPO / "docs").with_suffix(".html").as_posix() for p in (REPO / "docs").rglob("*.md")}
    cards = {Path(page).with_suffix(".html").as_posix() for page in site_map(REPO).values() if page.endswith(".md")}
    expected = written | cards | {Path(p).with_suffix(".html").as_posix() for p in reference_pages(REPO)}
    assert expected <= pages, sorted(expected - pages)
    for picture in [p for p in site_map(REPO).values() if p.endswith(".png")]:
        assert (site / picture).is_file(), picture
    front = (site / "index.html").read_text(encoding="utf-8")
    assert "Two commands" in front and 'href="getting-started.html#what-the-signature-means"' in front


class _Links(HTMLParser):
    """The ids of a built page and the targets of its links, scripts, stylesheets and pictures."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src"):
            if found.get(name) and not (tag == "link" and found.get("rel") in ("canonical", "alternate")):
                self.targets.append(str(found[name]))


def test_the_built_site_works_from_disk(site):
    """Opened from disk (file://, `python -m shared.bench docs --build DIR`), a browser neither lists folders nor
    adds index.html: every internal link, script, stylesheet and picture of every page must name a file of the
    site, and every #anchor an id of its page. The search runs there from scripts (search_index.js, worker.js), not fetches.
    (404.html is for a server, which shows it at any address: its links are absolute.)"""
    parsed: dict[Path, _Links] = {}
    for page in sorted(p for p in site.rglob("*.html") if p.name != "404.html"):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        parsed[page] = parser
    broken, checked = [], 0
    for page, parser in parsed.items():
        for target in parser.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc:
                assert parts.scheme in ("http", "https", "mailto"), f"{page.relative_to(site)}: {target}"
                continue
            checked += 1
            path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not path.is_file():
                broken.append(f"{page.relative_to(site)}: {target} (no such file)")
            elif parts.fragment and path.suffix == ".html" and unquote(parts.fragment) not in parsed[path].ids:
                broken.append(f"{page.relative_to(site)}: {target} (no such anchor)")
    assert not broken, broken[:20]
    assert checked > 1000
    head = (site / "index.html").read_text(encoding="utf-8")
    assert '<script src="javascripts/file-search.js">' in head.split("assets/javascripts/bundle.")[0]
    assert (site / "search" / "search_index.js").read_text(encoding="utf-8").startswith("var __index = {")
    assert (site / SEARCH_WORKER).read_text(encoding="utf-8").startswith("var __moversSearchWorker = \"")


def test_doctest_blocks_are_shown_as_python_sessions():
    """The site shows a block with >>> lines in Pygments' pycon lexer (prompts and output marked, so the copy button
    leaves them out); other python blocks stay python."""
    text = "```python\n>>> 1 + 1\n2\n```\n\n```python\nx = '>>> not a prompt'\n```\n"
    assert doctest_lexer(text) == "```pycon\n>>> 1 + 1\n2\n```\n\n```python\nx = '>>> not a prompt'\n```\n"


PLANTED = {  # a broken link of each kind, planted in a page: what the strict build must name
    "[a page that is not there](no-such-page.md)": "no-such-page.md",
    "[a section that is not there](cli.md#no-such-section)": "no-such-section",
    "[a repository file that is not a page](../tests/test_site.py)": "test_site.py",
}


@pytest.mark.system
def test_a_broken_internal_link_fails_the_build(tmp_path):
    """One build of a copy with a broken link of each kind planted: the strict build fails and names every one
    (a kind it let through would be missing from its output). A second whole build: a system test, as are the
    server and MkDocs' own command below; a plain run builds the site once (the `site` fixture), in strict mode."""
    repo = _copy_of_the_sources(tmp_path)
    page = repo / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + "".join(f"\nSee {link}.\n" for link in PLANTED),
                    encoding="utf-8")
    proc = _build(repo, tmp_path / "site")
    assert proc.returncode != 0, "the strict build accepted a broken link"
    assert "Aborted with" in proc.stdout + proc.stderr, proc.stdout + proc.stderr[-3000:]
    missed = [complaint for complaint in PLANTED.values() if complaint not in proc.stderr]
    assert not missed, f"the build did not name {missed}:\n{proc.stderr[-3000:]}"


def test_the_copy_builds_without_the_planted_link(site):
    """The failures above come from the planted link, not from the copy: the copy alone builds (the `site`
    fixture builds it) into every page."""
    assert (site / "index.html").is_file() and (site / "getting-started.html").is_file()


def test_nested_lists_are_indented_by_four_spaces():
    """GitHub and the Hub nest a list item indented by 2 or 3 spaces; Python-Markdown (the site) needs 4 and
    otherwise flattens the list. Four spaces nest on both."""
    bad = []
    for path in [REPO / "README.md", *sorted((REPO / "cards").glob("*.md")), *sorted((REPO / "docs").rglob("*.md"))]:
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            fenced = fenced != line.startswith("```")
            indent = len(line) - len(line.lstrip(" "))
            if not fenced and indent % 4 and re.match(r" +([-*+]|\d+\.) ", line):
                bad.append(f"{path.relative_to(REPO)}:{number}")
    assert not bad, bad


def test_the_api_reference_lists_every_public_name(site):
    names = public_names()
    assert [n.name for n in names] == list(movers.__all__)
    index = reference_pages(REPO)["reference/index.md"]
    html = {page: (site / "reference" / f"{page}.html").read_text(encoding="utf-8") for page in ("api", "metrics")}
    for entry in names:
        assert f"[`movers.{entry.name}`]" in index, entry.name
        page = "metrics" if entry.kind == "metric" else "api"
        assert f'id="{entry.path}"' in html[page], f"no section for movers.{entry.name} ({entry.path})"
    assert not re.search(r":(class|func|meth|data|mod|attr):", html["api"]), "a reST role reached the page"


def test_no_built_page_shows_a_doctest_directive(site):
    """The docstrings' examples keep their directives for the test runner (`# doctest: +SKIP`); the API reference
    shows them as a reader copies them. (The written pages hold none: tests/test_docs.py.)"""
    shown = [p.relative_to(site).as_posix() for p in site.rglob("*.html")
             if re.search(r"doctest:\s*[+-]", p.read_text(encoding="utf-8"))]
    assert not shown, shown
    assert RestRoles.convert(">>> movers.x()   # doctest: +SKIP\n1") == ">>> movers.x()\n1"


def test_the_api_reference_lists_every_option_with_its_default(site):
    text = reference_pages(REPO)["reference/metrics.md"]
    html = (site / "reference" / "metrics.html").read_text(encoding="utf-8")
    for spec in movers.metrics.specs():
        section = text[text.index(f"## `movers.{spec.slug}`"):]
        section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
        for f in spec.options:
            row = f"| `{f.name}` | "
            assert row in section, f"{spec.slug}: option {f.name} missing"
            line = section[section.index(row):].split("\n", 1)[0]
            assert f"| `{f.default!r}` | " in line and " ".join(f.info.doc.split())[:40] in line, line
        assert f'id="movers.{spec.slug}"' in html


def test_a_metric_registered_later_gets_its_reference_section():
    from .test_declared_metric import ToyWmd

    movers.metrics.register(ToyWmd())
    try:
        text = reference_pages(REPO)["reference/metrics.md"]
    finally:
        movers.metrics.unregister("toy_wmd")
    assert "## `movers.toy_wmd` {#movers.toy_wmd}" in text
    assert "| `layer` | int | `-1` | hidden_states index (-1 = the last layer). |" in text


def test_links_written_for_github_point_to_the_site_pages():
    mapping = {"README.md": "index.md", "cards/twmd.md": "metrics/twmd.md", "cards/p.png": "metrics/p.png"}
    text = ("[card](../../cards/twmd.md#options) ![plot](../../cards/p.png) [page](cli.md#x) [out](https://x.org/a.md)"
            " `[code](../../cards/twmd.md)` [test](../../tests/t.py)\n```python\nx = [a](../../cards/twmd.md)\n```\n")
    got = relink(text, "docs/sub/page.md", "sub/page.md", mapping)
    assert got.startswith("[card](../metrics/twmd.md#options) ![plot](../metrics/p.png) [page](cli.md#x) "
                          "[out](https://x.org/a.md) `[code](../../cards/twmd.md)` [test](../../tests/t.py)\n")
    assert "x = [a](../../cards/twmd.md)" in got  # code blocks are left alone
    assert relink("[docs](docs/cli.md) [card](cards/twmd.md)", "README.md", "index.md", mapping) == \
        "[docs](cli.md) [card](metrics/twmd.md)"
    # the site's own declared address (links into the API reference, which the repository does not hold)
    site = "https://example.org/docs/"
    assert relink(f"[api]({site}reference/metrics.html#movers.twmd) [home]({site}) [other](https://x.org/)",
                  "cards/twmd.md", "metrics/twmd.md", mapping, site_url=site) == \
        "[api](../reference/metrics.md#movers.twmd) [home](../index.md) [other](https://x.org/)"


def test_include_inserts_a_section_with_its_links_re_pointed(tmp_path):
    (tmp_path / "README.md").write_text("# T\n\n## Two commands\n\nRun [it](docs/cli.md).\n\n```bash\n# not a heading"
                                        "\n```\n\n## Next\n\nno\n", encoding="utf-8")
    page = "Intro\n\n<!-- include: ../README.md#two-commands -->\n\nEnd\n"
    got = include(page, "docs/start.md", "start.md", tmp_path, {"README.md": "index.md"})
    assert got == "Intro\n\nRun [it](cli.md).\n\n```bash\n# not a heading\n```\n\nEnd\n"


@pytest.mark.system
def test_the_docs_command_serves_the_site_offline(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "shared.bench", "docs", "--addr", f"127.0.0.1:{port}"], cwd=REPO,
                            env={**os.environ, **_PATH}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, page = time.monotonic() + 300, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/reference/metrics.html", timeout=5) as r:
                    page = r.read().decode("utf-8")
                break
            except OSError:
                time.sleep(1)
        assert page is not None, proc.stderr.read()[-3000:] if proc.poll() is not None else "no answer in 300 s"
        assert 'id="movers.moverscore"' in page and "fonts.googleapis.com" not in page
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.system
def test_mkdocs_own_command_builds_the_site_at_the_checkout_root(tmp_path):
    """`mkdocs build` as a reader or a documentation host types it, at the checkout's root: MkDocs loads
    docs/hooks.py by its path, with neither the current directory nor the checkout's root on sys.path (only
    the package's own folder, shared/, as for any installed movers), so the hook must find `shared.bench` from
    its own place. Same strict build: `strict: true` in mkdocs.yml, and --strict."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.is_file():
        pytest.skip(f"no mkdocs executable beside {sys.executable}")
    path = os.pathsep.join(p for p in _PATH.get("PYTHONPATH", os.environ.get("PYTHONPATH", "")).split(os.pathsep)
                           if p and Path(p).resolve() != REPO)
    env = {**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ModuleNotFoundError" not in proc.stderr
    assert 'id="movers.moverscore"' in (tmp_path / "site" / "reference" / "metrics.html").read_text(encoding="utf-8")


def test_the_docs_command_on_a_folder_without_the_site_says_what_to_pass(tmp_path):
    proc = _docs("--build", str(tmp_path / "site"), "--repo", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.startswith("python -m shared.bench docs: error: no mkdocs.yml in "), \
        proc.stderr


def test_the_docs_command_into_an_unwritable_folder_is_one_line(tmp_path):
    """Not MkDocs' traceback at its first write: a folder below a regular file can be created by no one (root
    included, unlike a folder without write permission)."""
    (tmp_path / "a-file").write_text("x")
    proc = _docs("--build", str(tmp_path / "a-file" / "site"))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("python -m shared.bench docs: error: cannot build into ") and "a-file" in line, line


def test_the_docs_extra_is_in_the_test_extra():
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]

    def expanded(extra: str) -> set[str]:  # `movers[a,b]` inside an extra brings extras a and b
        out = set()
        for line in extras[extra]:
            req = Requirement(line)
            out |= set().union(*(expanded(e) for e in req.extras)) if req.name == "movers" else {line}
        return out

    assert set(extras["docs"]) <= expanded("test"), "CI installs the test extra: it must build the site"
