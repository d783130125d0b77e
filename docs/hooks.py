"""MkDocs hooks (named in mkdocs.yml; not a page): the generated pages, the README and the cards as pages, and the
link map live in ``shared.bench.site`` (beside the package, in the checkout), where ruff, mypy and the tests
see them.

MkDocs loads this file by its path, so ``shared`` is importable only where the checkout's root is on
``sys.path``: this file puts it there first, the folder holding ``mkdocs.yml`` (found from this file's own place,
not from the current directory), so that ``mkdocs build`` and ``mkdocs serve`` work as well as
``python -m shared.bench docs``; the griffe extension named in ``mkdocs.yml`` (``shared.bench.site:RestRoles``)
is imported from the same place."""
import sys
from pathlib import Path

_CHECKOUT = str(Path(__file__).resolve().parents[1])
if sys.path[:1] != [_CHECKOUT]:
    sys.path.insert(0, _CHECKOUT)

from shared.bench.site import on_config, on_files, on_page_markdown, on_post_build  # noqa: E402

__all__ = ["on_config", "on_files", "on_page_markdown", "on_post_build"]
