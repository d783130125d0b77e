"""The core layer: pure pieces with no model and no text processing.

Transport solvers (:mod:`~movers.core.transport`), histograms and alignments, references per segment,
the result and signature types, option declarations and the metric spec, input validation, the scope
of a call (distributed, streamed), progress, the resource cache and the explanation of a plan. Imports
nothing from the layers above.
"""
