"""``python -m shared.bench docs``: build the documentation site of a movers checkout and serve it locally, offline.

The site is built from the repository (``mkdocs.yml``, ``docs/``, the README, the cards and the package's
docstrings and declarations, through ``docs/hooks.py`` and :mod:`shared.bench.site`), so the command runs in a
checkout, not from an installed wheel. It runs MkDocs in strict mode: a broken link, a missing reference or any
warning stops the build.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from . import CHECKOUT

__all__ = ["main", "mkdocs_command"]

MKDOCS_2_NOTICE = "NO_MKDOCS_2_WARNING"
"""mkdocs-material prints a notice about MkDocs 2.0 and its own end of life on every build; docs/about.md says
what it means for this site, so the command does not repeat it (set the variable empty to see it)."""


def mkdocs_command(repo: Path, *, build: str | None = None, addr: str = "127.0.0.1:8000") -> list[str]:
    """The MkDocs command line: ``build`` into a folder, or ``serve`` at `addr` (rebuilt on every change)."""
    config = str(repo / "mkdocs.yml")
    if build is not None:
        return [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", config, "--site-dir",
                str(Path(build).resolve())]
    return [sys.executable, "-m", "mkdocs", "serve", "--strict", "--config-file", config, "--dev-addr", addr]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench docs", description=__doc__.split("\n\n")[0])
    p.add_argument("--build", metavar="DIR", help="build the site into DIR and exit (default: build and serve)")
    p.add_argument("--addr", default="127.0.0.1:8000", help="where to serve (default 127.0.0.1:8000)")
    p.add_argument("--repo", default=str(CHECKOUT), help="the movers checkout (default: this one)")
    args = p.parse_args(argv)
    repo = Path(args.repo).resolve()
    if not (repo / "mkdocs.yml").is_file():
        print(f"python -m shared.bench docs: error: no mkdocs.yml in {repo}; pass --repo DIR, a movers checkout "
              f"(the site is built from the repository).", file=sys.stderr)
        return 2
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        print("python -m shared.bench docs: error: MkDocs is not installed; install the docs extra: "
              "pip install \".[docs]\" (the test extra includes it).", file=sys.stderr)
        return 2
    if args.build is not None:  # MkDocs would fail at its first write, with a traceback of 40 lines
        problem = _unwritable(Path(args.build))
        if problem:
            print(f"python -m shared.bench docs: error: cannot build into {args.build!r}: {problem}.", file=sys.stderr)
            return 2
    env = {**os.environ, MKDOCS_2_NOTICE: os.environ.get(MKDOCS_2_NOTICE, "1")}
    command = mkdocs_command(repo, build=args.build, addr=args.addr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(repo)
    os.execve(command[0], command, env)  # MkDocs takes this process's place: Ctrl-C and signals reach it


def _unwritable(folder: Path) -> str | None:
    """Why the site cannot be written into `folder` (created if missing), or None when it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".movers-docs-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return err.strerror or type(err).__name__
    return None
