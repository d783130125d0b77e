"""The core layer: pure pieces with no model and no text processing. Imports nothing from the layers above.

* ``transport``: the optimal-transport solvers (exact, unbalanced, tempered; ragged batches);
* ``spec`` and ``options``: the metric declaration and its option fields; ``validation``: input checks and their
  messages;
* ``histogram``, ``references``, ``result``, ``signature``: the weighted histograms a metric compares, references
  per segment and their reductions, the result and its reproducibility signature;
* ``scope``: which part of a call a process scores (one process, ranks, blocks of a stream) and how call-level
  statistics add up; ``summation``: exact float sums, the same bits in any order;
* ``significance``: paired bootstrap, approximate randomization and bootstrap intervals; ``agreement``: correlations
  with human judgments at three levels, their bootstrap intervals, pairwise accuracy and the Williams test;
* ``parallel``, ``progress``, ``cache``, ``explanation``: transport threads, one progress bar, loaded resources,
  one pair's transport plan and its heatmap;
* ``packed``, ``pairs``: per-text data of many texts as flat arrays (index ranges, padded gathers, the one copy to
  the device); point sets and a bucket of pairs gathered on the device (cosines, unit distances).
"""
