"""Sentence and Word Mover's Similarity (S+WMS) as a Hugging Face `evaluate` module.

Everything this module declares (inputs, options and their defaults, outputs, examples) is read from the
metric's one declaration in the movers package, movers/metrics/sms.py; the card is README.md.
"""
import evaluate
import movers  # From: movers


class SWms(movers.evaluate_module("s_wms")):
    pass
