"""``python -m shared.bench cards``: write the generated parts of the metric cards, and the module READMEs
made from them.

``cards/<slug>.md`` is each metric's card: its page in the documentation site, and, as
``metrics/<slug>/README.md``, what the Hub shows for its evaluate module and its Space. Two parts of a card come
from declarations, between markers that the tests check:

* the install lines (``<!-- install: ... -->``), from ``pyproject.toml``'s ``[project.urls]`` and the torch the
  Spaces pin;
* the option table (``<!-- options: ... -->``): every option that can change a score, with its default and what
  it does, read from the metric's options dataclass; the runtime options are named once, with their defaults and
  a link to the API reference, which has every option in full.

A card's links are written for the repository (``../docs/cli.md``): they work on GitHub and the site re-points
them at its pages. A module README is read from its folder alone (a Hub module or Space repository), so
:func:`module_readme` writes it with every link that leaves the folder made absolute, from the one base declared
in ``[project.urls]`` (``Documentation`` for the site's pages, ``Repository`` for other files).

    python -m shared.bench cards --write    # rewrite the generated parts of every card, and each README
"""
from __future__ import annotations

import argparse
import math
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from movers import metrics as registry
from movers.core.options import OptionField, type_text
from movers.core.spec import MetricSpec
from movers.integrations import TORCH_INDEX, TORCH_VERSION
from movers.pipeline.call import make_options

from . import CHECKOUT

__all__ = ["options_table", "option_rows", "install_block", "sync", "module_readme", "write_card", "project_urls",
           "site_map", "card_slugs", "rewrite_links", "outside_fences", "shared_options", "shared_table", "BEGIN",
           "END", "INSTALL_BEGIN", "INSTALL_END", "SHARED_BEGIN", "SHARED_END", "SHARED_PAGE", "CARDS"]

BEGIN = "<!-- options: generated from the metric's declaration by `python -m shared.bench cards --write` -->"
END = "<!-- /options -->"
INSTALL_BEGIN = "<!-- install: generated from pyproject.toml by `python -m shared.bench cards --write` -->"
INSTALL_END = "<!-- /install -->"

CARDS = "cards"
"""The folder of the metric cards (the one source of each metric's page and evaluate module README)."""


# ---------------------------------------------------------------------------------------- declarations

def project_urls(repo: str | Path | None = None) -> dict[str, str]:
    """The project's addresses: ``[project.urls]`` of the checkout's pyproject.toml, else the installed
    distribution's ``Project-URL`` metadata (which a build writes from the same table)."""
    root = Path(repo) if repo is not None else CHECKOUT
    if (root / "pyproject.toml").is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10: the installed metadata below
            pass
        else:
            text = (root / "pyproject.toml").read_text(encoding="utf-8")
            return dict(tomllib.loads(text)["project"]["urls"])
    from importlib import metadata

    out = {}
    for entry in metadata.metadata("movers").get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        out[label.strip()] = url.strip()
    return out


def card_slugs(repo: Path) -> list[str]:
    """The registered metrics that have a card (``wms`` is documented in the SMS card)."""
    return [s for s in registry.slugs() if (repo / CARDS / f"{s}.md").is_file()]


def site_map(repo: Path) -> dict[str, str]:
    """Repository path -> site path of every file the site takes from outside ``docs/``."""
    out = {name: page for name, page in (("README.md", "index.md"), ("CHANGELOG.md", "changelog.md"))
           if (repo / name).is_file()}
    out.update({f"{CARDS}/{slug}.md": f"metrics/{slug}.md" for slug in card_slugs(repo)})
    out.update({f"{CARDS}/{p.name}": f"metrics/{p.name}" for p in sorted((repo / CARDS).glob("*.png"))})
    return out


def _site_page(repo_path: str, repo: Path, docs: str = "docs") -> str | None:
    """The site path a repository file becomes, or None when the site does not hold it."""
    if repo_path.startswith(docs + "/"):
        return repo_path[len(docs) + 1:]
    return site_map(repo).get(repo_path)


# --------------------------------------------------------------------------------------------- links

_LINK = re.compile(r"(?P<code>(`+)(?:.|\n)*?\2)|(?P<open>\]\()(?P<target>[^)\s]+)(?P<close>(?:\s+\"[^\"]*\")?\))")
_FENCE = re.compile(r"^(```|~~~)")


def outside_fences(text: str) -> list[tuple[bool, str]]:
    """`text` cut into (inside a fenced code block?, lines) runs."""
    runs: list[tuple[bool, str]] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        inside = fenced or bool(_FENCE.match(line))
        if _FENCE.match(line):
            fenced = not fenced
        if runs and runs[-1][0] == inside:
            runs[-1] = (inside, runs[-1][1] + line)
        else:
            runs.append((inside, line))
    return runs


def rewrite_links(text: str, target: Callable[[str], str | None]) -> str:
    """`text` with the target of every Markdown link and picture outside code replaced by ``target(link)``
    (kept where it returns None)."""

    def one(match: re.Match[str]) -> str:
        if match.group("code"):
            return match.group(0)
        new = target(match.group("target"))
        return match.group(0) if new is None else match.group("open") + new + match.group("close")

    return "".join(chunk if fenced else _LINK.sub(one, chunk) for fenced, chunk in outside_fences(text))


def module_readme(card: str, slug: str, repo: Path | None = None) -> str:
    """The README of ``metrics/<slug>/``: the card with every link that leaves the folder absolute. A page of the
    site becomes ``<Documentation><page>.html``, another repository file ``<Repository>/blob/main/<path>``; a
    file beside the card (a picture the module folder holds too) stays relative."""
    repo = repo or CHECKOUT
    urls = project_urls(repo)
    docs, source = urls["Documentation"].rstrip("/") + "/", urls["Repository"].rstrip("/")

    def absolute(link: str) -> str | None:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link) or link.startswith(("#", "/")):
            return None
        path, hash_, anchor = link.partition("#")
        if "/" not in path and not path.endswith(".md"):
            return None  # a picture beside the card: the module folder holds it too
        repo_path = posixpath.normpath(posixpath.join(CARDS, path))
        page = _site_page(repo_path, repo)
        if page is not None and page.endswith(".md"):
            return docs + page[:-3] + ".html" + hash_ + anchor
        return f"{source}/blob/main/{repo_path}{hash_}{anchor}"

    return rewrite_links(card, absolute)


def write_card(repo: Path, slug: str, text: str) -> None:
    """Write ``cards/<slug>.md`` and the module README made from it (``metrics/<slug>/README.md``)."""
    (repo / CARDS / f"{slug}.md").write_text(text, encoding="utf-8")
    folder = repo / "metrics" / slug
    if folder.is_dir():
        (folder / "README.md").write_text(module_readme(text, slug, repo), encoding="utf-8")


# ------------------------------------------------------------------------------------- generated parts

def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _worst(spec: MetricSpec) -> str:
    o = spec.resolve(make_options(spec, {}))
    value = spec.worst(o)["scores"]
    return "inf" if isinstance(value, float) and math.isinf(value) else format(value, "g")


def _doc(spec: MetricSpec, name: str, doc: str) -> str:
    return doc + (f" The worst value at the default options: {_worst(spec)}." if name == "empty_predictions" else "")


def option_rows(spec: MetricSpec) -> list[str]:
    """Every option of the spec as a Markdown table, in declaration order, with its type, default and
    documentation (the API reference's)."""
    lines = ["| option | type | default | what it does |", "|---|---|---|---|"]
    for f in spec.options:
        doc = _doc(spec, f.name, f.info.doc)
        runtime = " Runtime only: never changes a score." if f.info.runtime and "untime only" not in doc else ""
        lines.append(f"| `{f.name}` | {_cell(type_text(f.hint))} | `{f.default!r}` | {_cell(doc + runtime)} |")
    return lines


def reference_url(spec: MetricSpec, repo: Path | None = None) -> str:
    """The API reference's section of the metric function (every option with its type, default and documentation)."""
    return project_urls(repo)["Documentation"].rstrip("/") + f"/reference/metrics.html#movers.{spec.slug}"


def shared_options() -> list[tuple[OptionField, list[str]]]:
    """The options that two or more metrics declare alike (the same name, default and documentation, in different
    options dataclasses: SMS, S+WMS and WMS are one declaration), with the slugs of the metrics that have them, in
    the order first met: said once, on the input rules' page, and named in each card."""
    groups: list[tuple[OptionField, list[str], set[type]]] = []
    for spec in registry.specs():
        for f in spec.options:
            same = next((g for g in groups if g[0].name == f.name and g[0].default == f.default
                         and g[0].info == f.info), None)
            if same is None:
                groups.append((f, [spec.slug], {spec.Options}))
            else:
                same[1].append(spec.slug)
                same[2].add(spec.Options)
    return [(f, slugs) for f, slugs, classes in groups if len(classes) > 1 and not f.info.runtime]


def _is_shared(spec: MetricSpec, f: OptionField) -> bool:
    return any(spec.slug in slugs and g.name == f.name for g, slugs in shared_options())


def options_table(spec: MetricSpec, repo: Path | None = None) -> str:
    """The card's option table: the metric's own options that can change a score, in declaration order, with
    their defaults; the options it shares with other metrics named with their defaults (the input rules' page
    has them in full), and the runtime options named with their defaults, with the link to the API reference."""
    own = [f for f in spec.options if not f.info.runtime and not _is_shared(spec, f)]
    lines = [BEGIN, "", "| option | default | what it does |", "|---|---|---|"]
    lines += [f"| `{f.name}` | `{f.default!r}` | {_cell(_doc(spec, f.name, f.info.doc))} |" for f in own]
    shared = [f"`{f.name}` (`{f.default!r}`" + (f"; the worst value here: {_worst(spec)})"
                                                if f.name == "empty_predictions" else ")")
              for f in spec.options if not f.info.runtime and _is_shared(spec, f)]
    runtime = [f"`{f.name}={f.default!r}`" for f in spec.options if f.info.runtime]
    lines += [""]
    if shared:
        lines += [f"Shared with other metrics ([what each does](../docs/inputs.md#options-the-metrics-share)): "
                  f"{', '.join(shared)}."]
    if runtime:
        lines += ["", f"Runtime options, at their defaults (they never change a score beyond float32 rounding): "
                      f"{', '.join(runtime)}."]
    lines += ["", f"Every option with its type: [the API reference]({reference_url(spec, repo)}). What every module "
              f"shares: [evaluate and the Trainer](../docs/evaluate.md#what-every-module-shares).", "", END]
    return "\n".join(lines)


SHARED_BEGIN = ("<!-- shared options: generated from the metrics' declarations by "
                "`python -m shared.bench cards --write` -->")
SHARED_END = "<!-- /shared options -->"
SHARED_PAGE = "docs/inputs.md"
"""The page that holds the options the metrics share, in full."""


def shared_table() -> str:
    """The input rules' table of the options several metrics declare alike: default, metrics, what it does."""
    lines = [SHARED_BEGIN, "", "| option | default | metrics | what it does |", "|---|---|---|---|"]
    for f, slugs in shared_options():
        lines.append(f"| `{f.name}` | `{f.default!r}` | {', '.join(f'`{s}`' for s in slugs)} | {_cell(f.info.doc)} |")
    return "\n".join([*lines, "", SHARED_END])


def install_block(repo: Path | None = None) -> str:
    """How to install a module's needs: torch (the Spaces' CPU build) and movers from its repository."""
    source = project_urls(repo)["Repository"].rstrip("/")
    torch = TORCH_VERSION.split("+")[0]
    return "\n".join([
        INSTALL_BEGIN, "",
        "<!-- docs: cannot run: it installs from PyTorch's index and GitHub; .ci/run installs the same way from a "
        "clone -->", "```bash",
        f"pip install torch=={torch} --index-url {TORCH_INDEX}   # CPU; on a GPU machine, the CUDA build of torch",
        f"pip install \"movers @ git+{source}\"", "```", "", INSTALL_END])


def _replace(text: str, begin: str, end: str, block: str, where: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"cards: {where} has no generated block ({begin} ... {end}).")
    return pattern.sub(lambda _: block, text, count=1)


def sync(text: str, spec: MetricSpec, repo: Path | None = None) -> str:
    """`text` with its generated blocks replaced by the current ones (the card must hold both pairs of markers)."""
    text = _replace(text, INSTALL_BEGIN, INSTALL_END, install_block(repo), f"the card of {spec.slug}")
    return _replace(text, BEGIN, END, options_table(spec, repo), f"the card of {spec.slug}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench cards", description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the cards and READMEs (default: list the stale ones)")
    p.add_argument("--repo", default=str(CHECKOUT), help="the repository root")
    args = p.parse_args(argv)
    repo = Path(args.repo)
    stale = []
    for spec in registry.specs():
        card = repo / CARDS / f"{spec.slug}.md"
        if not card.is_file():
            continue
        text = card.read_text(encoding="utf-8")
        new = sync(text, spec, repo)
        readme = repo / "metrics" / spec.slug / "README.md"
        if new != text or (readme.is_file() and readme.read_text(encoding="utf-8") != module_readme(new, spec.slug,
                                                                                                     repo)):
            stale.append(spec.slug)
        if args.write:
            write_card(repo, spec.slug, new)
    page = repo / SHARED_PAGE
    text = page.read_text(encoding="utf-8")
    new = _replace(text, SHARED_BEGIN, SHARED_END, shared_table(), SHARED_PAGE)
    if new != text:
        stale.append(SHARED_PAGE)
        if args.write:
            page.write_text(new, encoding="utf-8")
    print(("rewrote " if args.write else "stale: ") + (", ".join(stale) or "none"))
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    raise SystemExit(main())
