"""The documentation site (``python -m shared.bench docs``): what MkDocs builds from the repository besides
``docs/``, made when the site is built. It runs from the checkout, beside the package it documents.

``mkdocs.yml`` names ``docs/hooks.py``, which hands three MkDocs events to this module:

* :func:`on_config`: one navigation entry per metric card, after ``metrics/index.md`` (from the registry);
* :func:`on_files`: the pages that are not files under ``docs/``: the README as the front page, the changelog,
  each card ``cards/<slug>.md`` as ``metrics/<slug>.md`` (with the pictures beside the cards), and the API
  reference, written from the declarations and docstrings (:func:`reference_pages`);
* :func:`on_page_markdown`: links written for GitHub (``../cards/twmd.md``, ``docs/cli.md``) point to the
  pages those files become, and so do absolute links to this site's declared address (the API reference, which
  the repository does not hold); ``<!-- include: FILE#section -->`` inserts a section of another file, and
  doctest blocks are shown with the ``pycon`` lexer, so that the copy button leaves out prompts and outputs;
* :func:`on_post_build`: the search index and the search worker as scripts, so that the site searches when it
  is opened from disk (``file://``; ``docs/javascripts/file-search.js`` starts the worker).

So every page stays valid Markdown on GitHub, and nothing is copied: the site reads the cards, the README and
the declarations when it is built (``python -m shared.bench docs``; ``tests/test_site.py`` builds it in strict mode).
:class:`RestRoles`, a griffe extension named in ``mkdocs.yml``, turns the docstrings' reST roles
(``:class:`~movers.Scores```) into code spans for mkdocstrings and leaves their doctest directives out.
"""
from __future__ import annotations

import inspect
import posixpath
import re
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import griffe
from markdown.extensions.toc import slugify
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from movers import metrics as registry
from movers.core.spec import MetricSpec
from movers.pipeline.call import MetricFunction, signature_of

from .cards import card_slugs, option_rows, project_urls, rewrite_links, site_map

__all__ = ["on_config", "on_files", "on_page_markdown", "on_post_build", "site_map", "reference_pages",
           "public_names", "relink", "include", "doctest_lexer", "RestRoles", "PublicName", "SEARCH_WORKER"]

METRICS_INDEX = "metrics/index.md"
"""The overview page after which the navigation lists one page per card."""
REFERENCE = "reference"
"""The site folder of the generated API reference."""


# ------------------------------------------------------------------------------------------ site files

def _repo(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _docs_prefix(config: MkDocsConfig) -> str:
    return Path(config.docs_dir).resolve().relative_to(_repo(config)).as_posix()


# --------------------------------------------------------------------------------- links and includes

_FENCE = re.compile(r"^(```|~~~)")
_INCLUDE = re.compile(r"^<!--\s*include:\s*(?P<path>[^#\s]+)#(?P<anchor>[\w-]+)\s*-->[ \t]*$", re.M)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def relink(text: str, source: str, page: str, mapping: dict[str, str], docs: str = "docs",
           site_url: str | None = None) -> str:
    """`text`, written at repository path `source`, with its relative links pointing from site page `page` to
    the site pages of the files they name, and its absolute links into this site (`site_url`, the declared
    ``Documentation`` address: ``<site_url>reference/metrics.html#x``) made relative too, so that the build checks
    them and the site works offline. Links to files the site does not hold are left for MkDocs to report (a
    broken link fails the strict build)."""

    def target(link: str) -> str | None:
        if site_url and link.startswith(site_url):
            path, hash_, anchor = link[len(site_url):].partition("#")
            path = (path or "index.html").removesuffix(".html") + ".md"
            return posixpath.relpath(path, posixpath.dirname(page) or ".") + hash_ + anchor
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link) or link.startswith(("#", "/")):
            return None
        path, hash_, anchor = link.partition("#")
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        site = repo_path[len(docs) + 1:] if repo_path.startswith(docs + "/") else mapping.get(repo_path)
        if site is None:
            return None
        return posixpath.relpath(site, posixpath.dirname(page) or ".") + hash_ + anchor

    return rewrite_links(text, target)


def section(text: str, anchor: str, where: str) -> str:
    """The body of the heading of `text` whose anchor is `anchor`, up to the next heading of its level or above."""
    lines = text.splitlines(keepends=True)
    fenced, start, level = False, None, 0
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            continue
        if start is not None and len(heading.group(1)) <= level:
            return "".join(lines[start:i]).strip("\n") + "\n"
        if start is None and slugify(heading.group(2).replace("`", ""), "-") == anchor:
            start, level = i + 1, len(heading.group(1))
    if start is None:
        raise PluginError(f"docs: {where} has no section #{anchor}.")
    return "".join(lines[start:]).strip("\n") + "\n"


def include(text: str, source: str, page: str, repo: Path, mapping: dict[str, str], docs: str = "docs",
            site_url: str | None = None) -> str:
    """`text` with each ``<!-- include: FILE#anchor -->`` line (FILE relative to `source`) replaced by that
    section of FILE, its links re-pointed from `page`."""

    def insert(match: re.Match[str]) -> str:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), match.group("path")))
        if not (repo / path).is_file():
            raise PluginError(f"docs: {source} includes {match.group('path')}, which does not exist.")
        body = section((repo / path).read_text(encoding="utf-8"), match.group("anchor"), path)
        return relink(body, path, page, mapping, docs, site_url).rstrip("\n")

    return _INCLUDE.sub(insert, text)


_PYTHON_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def doctest_lexer(text: str) -> str:
    """`text` with each ```python block that holds ``>>>`` lines marked ```pycon: Pygments' console lexer
    marks the prompts and the printed output, which the site's copy button leaves out (``extra.css``). The
    sources keep ```python (GitHub, the Hub and ``tests/test_docs.py`` read them)."""

    def mark(match: re.Match[str]) -> str:
        if not re.search(r"^>>> ", match.group(2), re.M):
            return match.group(0)
        return "```pycon" + match.group(0)[len("```python"):]

    return _PYTHON_FENCE.sub(mark, text)


# ------------------------------------------------------------------------------------------ MkDocs events

def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Add one navigation entry per metric card after ``metrics/index.md`` (titled by the card's ``title``)."""
    pages: list[Any] = [f"metrics/{slug}.md" for slug in card_slugs(_repo(config))]

    def visit(items: list[Any]) -> bool:
        for i, item in enumerate(items):
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if value == METRICS_INDEX:
                items[i + 1:i + 1] = pages
                return True
            if isinstance(value, list) and visit(value):
                return True
        return False

    if not visit(config.nav or []):
        raise PluginError(f"docs: mkdocs.yml's nav must list {METRICS_INDEX}; the metric cards follow it.")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the README, the changelog, the cards and their pictures, and the generated API reference."""
    repo = _repo(config)
    added = [File.generated(config, site, abs_src_path=str(repo / path)) for path, site in site_map(repo).items()]
    added += [File.generated(config, site, content=text) for site, text in reference_pages(repo).items()]
    for file in added:
        if files.get_file_from_path(file.src_uri) is not None:
            raise PluginError(f"docs: {config.docs_dir}/{file.src_uri} would hide a generated page; remove it.")
        files.append(file)
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Insert the includes and re-point the links of a page that comes from a repository file."""
    repo, docs = _repo(config), _docs_prefix(config)
    mapping = site_map(repo)
    site = page.file.src_uri
    sources = {v: k for k, v in mapping.items()}
    if site in sources:
        source = sources[site]
    elif page.file.abs_src_path and Path(page.file.abs_src_path).resolve().is_relative_to(Path(config.docs_dir)
                                                                                           .resolve()):
        source = f"{docs}/{site}"
    else:
        return markdown  # a generated page: its links are site paths already
    url = _site_url(repo)
    return doctest_lexer(relink(include(markdown, source, site, repo, mapping, docs, url), source, site, mapping, docs,
                                url))


def _site_url(repo: Path) -> str:
    """The declared address of this site (``[project.urls]`` Documentation), ending in a slash."""
    return project_urls(repo)["Documentation"].rstrip("/") + "/"


SEARCH_WORKER = "search/worker.js"
"""Where :func:`on_post_build` writes Material's search worker as a string (``docs/javascripts/file-search.js``
reads it when the site is opened from disk)."""


def on_post_build(config: MkDocsConfig) -> None:
    """Write what the search needs from ``file://``: the index as a script (``search/search_index.js``, which
    Material's bundle loads from a file instead of fetching the JSON) and the worker's source as a string
    (:data:`SEARCH_WORKER`), which a browser cannot start from a file URL."""
    import json

    site = Path(config.site_dir)
    index = site / "search" / "search_index.json"
    workers = sorted(p for p in (site / "assets" / "javascripts" / "workers").glob("search.*.js"))
    if not index.is_file() or not workers:
        raise PluginError("docs: the site has no search index or search worker; mkdocs.yml's search plugin and "
                          "the Material theme write them.")
    (site / "search" / "search_index.js").write_text("var __index = " + index.read_text(encoding="utf-8"),
                                                     encoding="utf-8")
    source = workers[0].read_text(encoding="utf-8")
    (site / SEARCH_WORKER).write_text(f"var __moversSearchWorker = {json.dumps(source)};\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------- API reference

@dataclass(frozen=True)
class PublicName:
    """One name of ``movers.__all__`` as the reference shows it: where it is defined and its first line."""

    name: str
    kind: str
    """'metric' (``movers.<slug>``), 'module', 'class', 'function' or 'constant'."""
    path: str
    """Where mkdocstrings finds it (``movers.core.result.Scores``); ``movers.<slug>`` for a metric."""
    summary: str

    @property
    def layer(self) -> str:
        """The package layer that defines it (``core``, ``text``, ..., or ``movers`` for the top)."""
        parts = self.path.split(".")
        return parts[1] if self.kind != "metric" and len(parts) > 2 else "movers"


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return RestRoles.convert(doc.strip().split("\n\n")[0].replace("\n", " "))


def public_names() -> list[PublicName]:
    """Every name of ``movers.__all__``, in its order."""
    import movers

    lazy: dict[str, str] = movers._LAZY  # name -> the submodule that defines it
    out = []
    for name in movers.__all__:
        obj = getattr(movers, name)
        if isinstance(obj, MetricFunction):
            out.append(PublicName(name, "metric", f"movers.{name}", " ".join(obj.spec.summary.split())))
        elif isinstance(obj, types.ModuleType):
            out.append(PublicName(name, "module", obj.__name__, _first_line(obj)))
        elif inspect.isclass(obj) or inspect.isfunction(obj):
            out.append(PublicName(name, "class" if inspect.isclass(obj) else "function",
                                  f"{obj.__module__}.{obj.__qualname__}", _first_line(obj)))
        else:
            where = f"movers.{lazy[name]}" if name in lazy else "movers"
            out.append(PublicName(name, "constant", f"{where}.{name}", f"`{obj!r}`"))
    return out


_LAYERS = {
    "movers": "The package",
    "core": "Results, signatures, explanations and scopes (`movers.core`)",
    "text": "Encoders, the embedding cache, IDF and centring (`movers.text`)",
    "metrics": "The registry and what the metric files export (`movers.metrics`)",
    "api": "Explain, stream, fit, compare and correlate by a metric's name (`movers.api`)",
    "integrations": "Loading, evaluate modules and rewards (`movers.integrations`)",
}


def _anchor(entry: PublicName) -> str:
    page = "metrics.md" if entry.kind == "metric" else "api.md"
    return f"{page}#{entry.path}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _reference_index(names: list[PublicName]) -> str:
    from movers import cli

    lines = ["# API reference", "",
             f"Every public name of `movers` (`movers.__all__`, {len(names)} names), generated when this site is "
             "built: the [metric functions](metrics.md) and their options from the metrics' declarations "
             "(`movers.metrics.specs()`), everything else from its docstring ([classes and functions](api.md)), "
             "and the [`movers.torchmetrics`](torchmetrics.md) classes. Nothing on these pages is written by "
             "hand.", "", "| name | kind | what it is |", "|---|---|---|"]
    for entry in names:
        lines.append(f"| [`movers.{entry.name}`]({_anchor(entry)}) | {entry.kind} | {_cell(entry.summary)} |")
    lines += ["", "## Command line", "", "`movers --help` (each command's own `--help` lists its options):", "",
              "```text", cli.USAGE.strip("\n"), "```", ""]
    return "\n".join(lines)


def _signature_text(spec: MetricSpec) -> str:
    params = list(signature_of(spec).parameters.values())
    words = [f"{p.name}," for p in params if p.kind != inspect.Parameter.KEYWORD_ONLY] + ["*,"]
    words += [f"{p.name}={p.default!r}," for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY]
    body = textwrap.fill(" ".join(words).rstrip(","), width=76, initial_indent="    ", subsequent_indent="    ",
                         break_long_words=False, break_on_hyphens=False)
    return f"movers.{spec.slug}(\n{body}\n) -> movers.Scores"


def _metric_section(spec: MetricSpec, carded: set[str]) -> list[str]:
    card = (f"The card: [{spec.title}](../metrics/{spec.slug}.md) (formula, signature fields, agreement with the "
            "original, correlations)." if spec.slug in carded else
            f"Options pinned by this slug: {', '.join(f'`{k}={v!r}`' for k, v in spec.fixed.items()) or 'none'}.")
    lines = [f"## `movers.{spec.slug}` {{#movers.{spec.slug}}}", "", "```python", _signature_text(spec), "```", "",
             " ".join(spec.summary.split()), "", card, "",
             f"Higher is better: {'yes' if spec.higher_is_better else 'no'}. `predictions`: hypotheses, one per "
             f"segment{' (texts, or documents as lists of sentences)' if spec.documents else ''}; `references`: "
             "one reference per segment (str) or a non-empty list per segment (ragged allowed)"
             + "".join(f"; `{name}`: shaped like the references" for name in spec.extra_inputs) + ".", "",
             f"**Options** of `movers.{spec.slug}`, `evaluate.load(\"{spec.slug}\").compute(...)`, "
             f"`movers score -m {spec.slug} --opt` and `movers.torchmetrics.{spec.class_title()}`:", "",
             *option_rows(spec), "",
             f"**Returns** a `movers.Scores`: `score` (the corpus score), `scores` ({spec.scores_doc}), `signature`"
             + (", and in `extra`:" if spec.outputs else "."), ""]
    if spec.outputs:
        lines += ["| output | type | what it is |", "|---|---|---|"]
        lines += [f"| `{o.name}` | {_cell(o.type)} | {_cell(o.doc)} |" for o in spec.outputs]
        lines.append("")
    return lines


def _metric_functions(repo: Path) -> str:
    carded = set(card_slugs(repo))
    lines = ["# Metric functions", "",
             "`movers.<slug>(predictions, references, **options)` for every registered metric "
             "(`movers.metrics.slugs()`), generated from its declaration: every option with its type, default and "
             "documentation, read from the metric's options dataclass (`spec.options`). The evaluate module, "
             "`movers score --opt`, the Space page and the torchmetrics class take the same options.", ""]
    for spec in registry.specs():
        lines += _metric_section(spec, carded)
    return "\n".join(lines)


def _mkdocstrings(path: str, heading: str, **options: Any) -> list[str]:
    lines = [f"::: {path}", "    options:", f"      heading: \"{heading}\""]
    lines += [f"      {key}: {value}" for key, value in options.items()]
    return [*lines, ""]


def _api(names: list[PublicName]) -> str:
    lines = ["# Classes and functions", "",
             "Every name of `movers.__all__` that is not a [metric function](metrics.md), from its docstring, "
             "grouped by the layer that defines it ([layout](../layout.md)).", ""]
    for layer, title in _LAYERS.items():
        group = [e for e in names if e.layer == layer and e.kind != "metric"]
        if not group:
            continue
        lines += [f"## {title}", ""]
        for entry in group:
            lines += _mkdocstrings(entry.path, f"movers.{entry.name}", heading_level=3)
    return "\n".join(lines)


def _torchmetrics() -> str:
    lines = ["# movers.torchmetrics", "",
             "One `torchmetrics.Metric` class per registered metric (`pip install \"movers[lightning]\"`), options "
             "as keywords, the same as the metric function's; see [Lightning and torchmetrics](../lightning.md).",
             "", "| class | metric | options |", "|---|---|---|"]
    for spec in registry.specs():
        lines.append(f"| `movers.torchmetrics.{spec.class_title()}` | `{spec.slug}` | "
                     f"[`movers.{spec.slug}`](metrics.md#movers.{spec.slug}) |")
    lines += ["", *_mkdocstrings("movers.integrations.training.torchmetrics", "movers.torchmetrics", heading_level=2,
                                 members="[TextMetric, metric_class, classes]")]
    return "\n".join(lines)


def reference_pages(repo: Path | None = None) -> dict[str, str]:
    """Site path -> Markdown of the generated API reference pages."""
    repo = repo or Path.cwd()
    names = public_names()
    return {f"{REFERENCE}/index.md": _reference_index(names), f"{REFERENCE}/metrics.md": _metric_functions(repo),
            f"{REFERENCE}/api.md": _api(names), f"{REFERENCE}/torchmetrics.md": _torchmetrics()}


# ----------------------------------------------------------------------------------------- docstrings

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):`(?P<tilde>~?)(?P<text>[^`<]*?)"
                   r"(?:\s*<(?P<target>[^>`]+)>)?`")


_DIRECTIVE = re.compile(r"[ \t]*#\s*doctest:[^\n]*$", re.M)
"""A doctest directive at the end of an example line (``# doctest: +SKIP``): for the test runner, not the reader."""


class RestRoles(griffe.Extension):
    """Docstrings written for Sphinx (``:class:`~movers.Scores```, a paragraph ending in ``::``) as Markdown
    code spans and paragraphs, before mkdocstrings parses them (Google style); doctest directives are left out."""

    @staticmethod
    def convert(text: str) -> str:
        def role(match: re.Match[str]) -> str:
            shown = match.group("text").strip()
            if match.group("tilde") and not match.group("target"):
                shown = shown.split(".")[-1]
            return f"`{shown}`"

        text = _DIRECTIVE.sub("", _ROLE.sub(role, text))
        return re.sub(r"(?<=\S)::$", ":", re.sub(r"^\s*::\s*$", "", text, flags=re.M), flags=re.M)

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = self.convert(obj.docstring.value)
