"""Fixed centring tables: the token means of a corpus with the tokens (or words) a metric keeps.

A fitted :class:`~movers.text.centering.Centering` passed as ``centering=`` makes every segment's score
independent of the rest of the call: shards, streams and single pairs score as one call over the corpus.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..core.options import check_options
from ..core.references import CHUNK, ReferenceGroups
from ..text.centering import Centering, corpus_sums, means_of
from ..text.tokens import call_tokens
from .call import make_options, normalised
from .embedding import EmbeddingMetric

__all__ = ["fit_centering"]


def fit_centering(spec: EmbeddingMetric, predictions: Sequence[Any], references: Sequence[Any],
                  **options: Any) -> Centering:
    """Token means (float64) of `predictions` and of all `references`, over the vectors `spec` centres under
    `options` (the same keyword options as the scoring call: model, layer, filters, ...), embedded
    ``CHUNK`` texts at a time. The table records the model, layer and token selection; a metric refuses
    a table fitted with others."""
    if not isinstance(spec, EmbeddingMetric):
        raise ValueError(f"fit_centering: {spec.slug} has no token vectors to centre.")
    o = make_options(spec, options)
    name = spec.name(o)
    inputs = spec.inputs(name, predictions, references, {}, allow_empty_predictions=False)
    check_options(name, o)
    inputs = normalised(inputs, getattr(o, "unicode", "none"))
    spec.check(o)
    o = spec.resolve(o)
    ctx = spec.context(o)
    if ctx.encoder is None:
        raise ValueError(f"{name}: centring applies to contextual encoders only, got the static vectors of "
                         f"these options.")
    texts = list(inputs.predictions) + ReferenceGroups.of(inputs.references).flat
    n = len(inputs.predictions)
    sums = torch.zeros(2, ctx.dim + 1, dtype=torch.float64)
    with call_tokens():
        for start in range(0, len(texts), CHUNK):
            part = texts[start:start + CHUNK]
            sums += corpus_sums(*spec.centring_sums(ctx, spec.embed(ctx, part), max(0, min(n - start, len(part)))))
    prediction_mean, reference_mean = means_of(sums)
    return Centering(prediction_mean=prediction_mean, reference_mean=reference_mean, model=ctx.encoder.name,
                     layer=ctx.encoder.layer_label, preset=ctx.kept_label,
                     n_tokens=(int(sums[0, -1]), int(sums[1, -1])))
