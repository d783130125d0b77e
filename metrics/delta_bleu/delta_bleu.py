"""ΔBLEU (discriminative BLEU) as a Hugging Face `evaluate` module.

Everything this module declares (inputs, options and their defaults, outputs, examples) is read from the
metric's one declaration in the movers package, movers/metrics/delta_bleu.py; the card is README.md.
"""
import evaluate
import movers  # From: movers


class DeltaBleu(movers.evaluate_module("delta_bleu")):
    pass
