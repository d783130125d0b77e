"""``movers cache``: show or empty an embedding cache folder.

    movers cache info [--cache DIR]     entries, size and bound of the folder (default: $MOVERS_CACHE)
    movers cache clear [--cache DIR]    remove every entry
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from ..text.embedding_cache import CACHE_ENV, EmbeddingCache
from .common import CommandParser, UsageError, guarded

__all__ = ["main"]

PROG = "movers cache"


def run(argv: Sequence[str]) -> int:
    p = CommandParser(prog=PROG, description="Show or empty an embedding cache folder (see `movers score --cache`).")
    p.add_argument("action", choices=["info", "clear"])
    p.add_argument("--cache", metavar="DIR", default=None,
                   help=f"the cache folder (default: the {CACHE_ENV} environment variable)")
    args = p.parse_args(list(argv))
    folder = args.cache or os.environ.get(CACHE_ENV)
    if not folder:
        raise UsageError(f"no cache folder: pass --cache DIR or set {CACHE_ENV}.")
    if not os.path.isdir(folder):
        raise UsageError(f"--cache {folder!r} is not a folder.")
    cache = EmbeddingCache(folder)
    if args.action == "clear":
        print(f"removed {cache.clear()} entries from {folder}")
        return 0
    info = cache.info()
    print(f"{info.location}: {info.entries} entries, {info.bytes / 2**20:.1f} MiB "
          f"(bound {info.max_bytes / 2**20:.0f} MiB, least recently used removed first)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(PROG, run, argv)
