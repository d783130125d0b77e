"""The pipeline layer: one path from a metric call to its scores.

:mod:`~movers.pipeline.call` (the front every metric shares: options, inputs, empty predictions,
baseline, signature; the ``movers.<slug>`` function), :mod:`~movers.pipeline.embedding` (the pipeline of
the embedding metrics), :mod:`~movers.pipeline.token_metric` (the token metrics' chunk: one packed batch on
the encoder's device, pairs scored in buckets), :mod:`~movers.pipeline.passes` (a call scored in parts:
the statistics pass, the scoring pass, partials that merge, and what a split call refuses),
:mod:`~movers.pipeline.streaming` and :mod:`~movers.pipeline.fitting`. Names no metric; imports only
:mod:`movers.core` and :mod:`movers.text`.
"""
