"""Benchmarks: ``movers bench correlation`` (human judgments) and ``movers bench speed`` (side-by-side timings)."""
from __future__ import annotations

import os
import warnings

__all__ = ["quiet_offline"]


def quiet_offline(*, category: type[Warning] = Warning) -> None:
    """Set up a timing run: offline flags, warnings of `category` ignored, transformers' logs and bars off."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    warnings.simplefilter("ignore", category)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
