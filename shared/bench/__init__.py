"""The studies, timings and release chores of movers: run from a checkout of the repository, never shipped.

``python -m shared.bench STUDY [options]`` at the checkout's root (``shared.bench.__main__`` lists the studies).
The package imports the installed ``movers`` by absolute imports and its own modules relatively; the
human-judgment data sets are read from ``$MOVERS_DATA``, else ``../shared/data`` beside the checkout
(:mod:`shared.bench.data`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["CHECKOUT", "quiet_offline", "run_child"]

CHECKOUT = Path(__file__).resolve().parents[2]
"""The root of the checkout this package is part of (the folder holding ``shared/``, ``docs/`` and ``cards/``)."""


def quiet_offline(*, category: type[Warning] = Warning) -> None:
    """Set up a timing run: offline flags, warnings of `category` ignored, transformers' logs and bars off."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    warnings.simplefilter("ignore", category)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def run_child(code: str, args: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    """Run `code` (``python -c``) with `args` in a fresh process under `env`; return the JSON object on the last
    line of its output. A failure raises RuntimeError naming `what`, with the end of the child's stderr."""
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
