"""Agreement of metric scores with human judgments: correlations and pairwise statistics at three levels,
bootstrap intervals that every metric shares, paired tests (Williams, the paired bootstrap, permutations) and
significance clusters. Pure numpy and scipy; the statistics of ``movers.correlate`` (:mod:`movers.api.agreement`).

- ``segment``: every judged output is a unit (WMT's segment level); averaged per system or per input
  (mt-metrics-eval's ``average_by``) or pooled across groups.
- ``system``: each system's mean metric score against its mean human score, within each group (WMT's system
  level); pairwise accuracy counts the system pairs that the metric orders as the humans do (Kocmi et al. 2021),
  soft pairwise accuracy compares the p-values of every system pair (Thompson et al. 2024).
- ``summary``: for each input (document, source item), the correlation across the systems' outputs for it,
  averaged over inputs (the summary level of REALSumm, Bhandari et al. 2020, and SummEval, Fabbri et al. 2021).

Pearson, Spearman and Kendall's tau-b and tau-c follow scipy.stats' definitions; tau_23, acc23 and acc_eq
Deutsch et al. (2023) as mt-metrics-eval computes them. With groups (language pairs), each group is correlated
and resampled on its own and the values are averaged, as WMT averages over language pairs. The 95% percentile
bootstrap resamples segments, inputs, systems or both (SacreROUGE's BOOT-*) within each group. The resamples
depend only on the layout (groups, systems, inputs) and the seed, never on the scores or on which records have a
human score, so two metrics scored on the same records get the same resamples and subtracting their
distributions gives a paired interval.

Modules: ``declarations`` (every name, default and bound), ``labels``, ``weighted`` (the statistics of
weighted rows), ``spa``, ``units`` (a level's units in many rows), ``levels`` (a level's values and bootstrap),
``comparison`` (the tests and clusters).
"""
from __future__ import annotations

from .comparison import (
                         Permutations,
                         assign_ranks,
                         clusters,
                         paired_difference,
                         permutation_test,
                         permutations,
                         williams_by_group,
                         williams_test,
)
from .declarations import (
                         ACCURACY,
                         ALPHA,
                         AVERAGES,
                         CHUNK_CELLS,
                         CONFIDENCE,
                         DEFAULT_TESTS,
                         EPSILON_STATS,
                         LEVELS,
                         MAX_PAIRS,
                         MAX_RESAMPLES,
                         MIN_POINTS,
                         NEAR_CONSTANT,
                         PAIRWISE,
                         PERMUTATION_TESTS,
                         POOLABLE,
                         RESAMPLES,
                         RESAMPLINGS,
                         SEED,
                         SPA_PERMUTATIONS,
                         STATISTICS,
                         STATS,
                         TESTS,
                         Protocol,
                         protocol,
                         statistics_of,
)
from .labels import factorize, label_texts
from .levels import (
                         GroupResult,
                         Layout,
                         LevelResult,
                         check_size,
                         interval,
                         level_correlations,
                         pairwise_accuracy,
                         rowwise,
)

__all__ = ["LEVELS", "STATISTICS", "ACCURACY", "STATS", "AVERAGES", "RESAMPLINGS", "TESTS", "PERMUTATION_TESTS",
           "DEFAULT_TESTS", "RESAMPLES", "MAX_RESAMPLES", "SEED", "CONFIDENCE", "ALPHA", "MIN_POINTS", "MAX_PAIRS",
           "CHUNK_CELLS", "SPA_PERMUTATIONS", "NEAR_CONSTANT", "POOLABLE", "PAIRWISE", "EPSILON_STATS", "Protocol",
           "protocol", "statistics_of", "Layout", "GroupResult", "LevelResult", "level_correlations", "rowwise",
           "pairwise_accuracy", "interval", "check_size", "williams_test", "paired_difference", "williams_by_group",
           "permutation_test", "permutations", "Permutations", "clusters", "assign_ranks", "factorize", "label_texts"]
