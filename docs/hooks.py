"""MkDocs hooks (named in mkdocs.yml; not a page): the generated pages, the README and the cards as pages, and the
link map live in ``shared.bench.site`` (beside the package, run from the checkout), where ruff, mypy and the tests
see them."""
from shared.bench.site import on_config, on_files, on_page_markdown, on_post_build

__all__ = ["on_config", "on_files", "on_page_markdown", "on_post_build"]
