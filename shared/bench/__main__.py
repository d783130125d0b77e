"""``python -m shared.bench STUDY [options]``: run one study or timing of movers from the checkout's root.

Each study is a module of this package with a ``main(argv) -> int``; ``python -m shared.bench STUDY --help``
gives its options. A missing data set is one line naming ``$MOVERS_DATA``, not a traceback.
"""
from __future__ import annotations

import importlib
import sys

__all__ = ["STUDIES", "main", "usage"]

STUDIES: dict[str, str] = {
    "correlation": "correlation",
    "correlate-scale": "correlate_scale",
    "suite": "suite",
    "validation": "validation",
    "long-texts": "long_texts",
    "speed": "speed",
    "cold-start": "cold_start",
    "gpu": "gpu",
    "scale": "scale",
    "systems": "systems",
    "ray": "ray",
    "baselines": "baselines",
    "docs": "docs",
    "cards": "cards",
}
"""Study name -> the module of this package that runs it."""


def usage() -> str:
    """The list of studies, each with the first paragraph of its module's docstring."""
    lines = ["usage: python -m shared.bench STUDY [options]   (at the checkout's root; STUDY --help for its options)",
             ""]
    for name, module in STUDIES.items():
        doc = (importlib.import_module(f".{module}", __package__).__doc__ or "").strip().split("\n\n")[0]
        summary = " ".join(doc.split())  # the docstring's first paragraph: ``python -m shared.bench NAME``: what
        lines.append(f"  {name:12} {summary.split('``: ', 1)[-1].replace('``', '')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in STUDIES:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"python -m shared.bench: error: unknown study {argv[0]!r}; the studies are listed below.",
                  file=sys.stderr)
        print(usage(), file=sys.stdout if argv[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(f".{STUDIES[name]}", __package__)
    try:
        return int(module.main(rest))
    except FileNotFoundError as err:  # no data folder: one line naming $MOVERS_DATA, not a traceback
        print(f"python -m shared.bench {name}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
