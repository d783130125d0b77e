"""Example texts that several metrics' Space pages offer (each metric lists its own in its spec)."""
from __future__ import annotations

from ..core.spec import Example

__all__ = ["WMT_PAIRS", "SLICKER", "SUMMARY", "ESSAY"]

WMT_PAIRS = Example(
    "WMT16-style pairs: close, paraphrase, unrelated",
    "The cat sat on the mat.\nA quick brown fox jumps over the lazy dog.\nHe went to the store to buy milk.",
    "A cat was sitting on the mat.\nThe fast brown fox leaped over a lazy dog.\nShe stayed at home and read a book.")
SLICKER = Example(
    "Lazy-EMD paper: the young man in a slicker",
    "The boy in a coat.\nThe man in a coat.",
    "The young man in a slicker.\nThe young man in a slicker.")
SUMMARY = Example(
    "Multi-sentence summaries (SMS's setting)",
    "Heavy rain flooded the city centre on Monday. Schools were closed and buses stopped running. "
    "The river is expected to fall by Wednesday.",
    "Schools and bus services shut down after Monday's storm flooded the city centre. "
    "Forecasters say the river will go down by midweek. ||| Monday's rain closed the schools.")
ESSAY = Example(
    "Multi-sentence: same facts, different order",
    "The museum opened in 1902. It holds over ten thousand paintings. Visitors come from all over the world.",
    "Tourists from every country visit the museum. It has more than 10,000 paintings. It first opened in 1902.")
