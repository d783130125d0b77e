"""Lazy-EMD as a Hugging Face `evaluate` module.

Everything this module declares (inputs, options and their defaults, outputs, examples) is read from the
metric's one declaration in the movers package, movers/metrics/lazy_emd.py; the card is README.md.
"""
import evaluate
import movers  # From: movers


class LazyEmd(movers.evaluate_module("lazy_emd")):
    pass
