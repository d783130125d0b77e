"""``python -m shared.bench.child OUT MODULE FUNCTION KWARGS``: one measurement in a fresh process.

:func:`shared.bench.harness.fresh` starts it: ``FUNCTION(**KWARGS)`` of this package's MODULE (KWARGS as JSON);
what it returns is written to the file OUT as JSON, with the process's peak resident set (``peak_rss_mb``, from
``ru_maxrss``). A function that returns None (a torchrun rank other than 0) writes nothing.
"""
from __future__ import annotations

import importlib
import json
import resource
import sys
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str]) -> int:
    out, module, function, kwargs = argv
    result = getattr(importlib.import_module(f".{module}", __package__), function)(**json.loads(kwargs))
    if result is not None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        Path(out).write_text(json.dumps({**result, "peak_rss_mb": peak}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
