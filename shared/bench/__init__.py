"""The studies, timings and release chores of movers: run from a checkout of the repository, never shipped.

``python -m shared.bench STUDY [options]`` at the checkout's root (``shared.bench.__main__`` lists the studies).
The package imports the installed ``movers`` by absolute imports and its own modules relatively; the
human-judgment data sets are read from ``$MOVERS_DATA``, else ``../shared/data`` beside the checkout
(:mod:`shared.bench.data`); every timing uses the one harness, :mod:`shared.bench.harness`.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKOUT"]

CHECKOUT = Path(__file__).resolve().parents[2]
"""The root of the checkout this package is part of (the folder holding ``shared/``, ``docs/`` and ``cards/``)."""
