"""The evaluate feature declarations shared by the movers modules.

evaluate picks, for the first batch, the first variant that encodes it, so the multi-reference variant
comes first; the single-reference variant accepts evaluate's usual ``references=[str, ...]``.
"""
from __future__ import annotations

__all__ = ["text_features"]


def text_features(*, segmented: bool = False) -> list:
    """Feature variants for (predictions, references): several references per prediction, or one;
    with `segmented`, also documents given as lists of sentences (SMS / S+WMS)."""
    import datasets

    string = datasets.Value("string", id="sequence")
    variants = [
        datasets.Features({"predictions": string, "references": datasets.Sequence(string, id="references")}),
        datasets.Features({"predictions": string, "references": string}),
    ]
    if segmented:
        sentences = datasets.Sequence(string)
        variants += [
            datasets.Features({"predictions": sentences,
                               "references": datasets.Sequence(sentences, id="references")}),
            datasets.Features({"predictions": sentences, "references": sentences}),
        ]
    return variants
