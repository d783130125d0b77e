"""Benchmarks: ``movers bench correlation`` (human judgments) and ``movers bench speed`` (side-by-side timings)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import Any

__all__ = ["quiet_offline", "run_child"]


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
