"""The names, defaults and bounds of ``movers correlate``, declared once: the levels, the statistics, how units
are averaged, what is resampled, the tests; the command line, ``movers.correlate``, the help texts and the
manual read them from here.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LEVELS", "STATISTICS", "ACCURACY", "STATS", "AVERAGES", "RESAMPLINGS", "TESTS", "PERMUTATION_TESTS",
           "DEFAULT_TESTS", "RESAMPLES", "MAX_RESAMPLES", "SEED", "CONFIDENCE", "ALPHA", "MIN_POINTS", "MAX_PAIRS",
           "CHUNK_CELLS", "SPA_PERMUTATIONS", "NEAR_CONSTANT", "POOLABLE", "PAIRWISE", "EPSILON_STATS",
           "Protocol", "statistics_of", "protocol"]

LEVELS = ("segment", "system", "summary")
"""The levels; the first is the default."""
STATISTICS = ("pearson", "spearman", "kendall")
"""The correlations every level reports by default."""
ACCURACY = "pairwise_accuracy"
"""The system level's fourth default statistic: the share of system pairs ordered as the human scores order them."""

STATS: dict[str, str] = {
    "pearson": "Pearson r (scipy.stats.pearsonr)",
    "spearman": "Spearman ρ: Pearson r of the average ranks (scipy.stats.spearmanr)",
    "kendall": "Kendall τ-b (scipy.stats.kendalltau; mt-metrics-eval KendallVariants 'b')",
    "kendall_c": "Kendall τ-c, Stuart's (scipy.stats.kendalltau variant='c'; mt-metrics-eval 'c')",
    "tau_23": "τ_23 of Deutsch et al. 2023: (C + T_both − D − T_metric − T_human) / pairs, metric pairs within "
              "--epsilon tied (mt-metrics-eval '23')",
    "acc23": "acc23 of Deutsch et al. 2023: (C + T_both) / pairs, metric pairs within --epsilon tied "
             "(mt-metrics-eval 'acc23')",
    "acc_eq": "acc23 with the tie threshold that maximises it (Deutsch et al. 2023; WMT23-25's acc_eq; "
              "mt-metrics-eval KendallWithTiesOpt), the threshold reported",
    "pairwise_accuracy": "the share of pairs ordered as the human scores order them, a tie agreeing only with a tie "
                         "(Kocmi et al. 2021; acc23 with no tie threshold)",
    "spa": "soft pairwise accuracy (Thompson et al. 2024; WMT24-25): 1 − mean |p_human − p_metric| over system "
           "pairs, p from paired permutation tests over the inputs (mt-metrics-eval PairwiseConfidenceError)",
}
"""Every statistic by its name (``--stat NAME``), with what it is; the order of the tables."""

PAIRWISE = ("kendall", "kendall_c", "tau_23", "acc23", "acc_eq", "pairwise_accuracy")
"""The statistics counted over pairs of units (concordant, discordant, tied)."""
EPSILON_STATS = ("tau_23", "acc23")
"""The statistics that take a tie threshold for the metric's scores (``--epsilon``)."""
POOLABLE = ("kendall", "tau_23", "acc23", "pairwise_accuracy", "spa")
"""The statistics that ``pooled`` can pool: sums of pair counts (or, for spa, of pair errors) across groups."""

AVERAGES: dict[str, str] = {
    "none": "one value per group over all its units (segments or system means), averaged over the groups",
    "sys": "per system over its segments, averaged over the systems (mt-metrics-eval average_by='sys')",
    "item": "per input over its systems' outputs, averaged over the inputs (mt-metrics-eval average_by='item'; the "
            "summary level)",
    "pooled": "the pairs of every group counted together, each pair within its group (WMT22's global accuracy)",
}
"""How the units of a level make one value (``--average``)."""

RESAMPLINGS: dict[str, str] = {
    "segments": "the records of each group, with replacement",
    "inputs": "the inputs of each group with all their outputs (SacreROUGE's BOOT-INPUTS)",
    "systems": "the systems of each group with all their outputs (BOOT-SYSTEMS)",
    "both": "systems and inputs at once, the outputs of the drawn systems for the drawn inputs (BOOT-BOTH)",
}
"""What the bootstrap draws with replacement (``--resample``)."""

PERMUTATION_TESTS: dict[str, str] = {
    "perm-both": "each output's two scores swapped at random (SacreROUGE's PERM-BOTH; mt-metrics-eval "
                 "PermutationSigDiff)",
    "perm-inputs": "all outputs of an input swapped together (PERM-INPUTS)",
    "perm-systems": "all outputs of a system swapped together (PERM-SYSTEMS)",
    "perm-pairs": "each pair's comparison swapped, each metric with its own tie threshold (mt-metrics-eval "
                  "PairwisePermutationSigDiff, for the pairwise statistics)",
}
"""The permutation tests: the two metrics' (z-scored) scores exchanged at random under H0."""
TESTS: dict[str, str] = {
    "bootstrap": "the paired bootstrap: each metric minus --compare-to in every resample, an interval of the "
                 "difference",
    "williams": "Williams' test of Pearson r against --compare-to's (Graham & Baldwin 2014)",
    **PERMUTATION_TESTS,
}
"""The tests against ``--compare-to`` (``--test``); one-sided: the metric agrees better than it."""
DEFAULT_TESTS = ("bootstrap", "williams")
"""The tests run when none is named."""

RESAMPLES = 1000
"""Bootstrap resamples of an interval (and of a paired difference), and permutations of a test."""
MAX_RESAMPLES = 100_000
"""The most resamples (or permutations) a call takes: each statistic keeps its distribution, 8 bytes a resample
per group; the records are resampled a block at a time, so the memory does not grow with them."""
SEED = 0
"""The bootstrap's numpy seed."""
CONFIDENCE = 0.95
"""The intervals' coverage: the 2.5th and 97.5th percentiles of the resampled values."""
ALPHA = 0.05
"""The p-value at or below which a permutation test separates two metrics (a significance cluster's bound)."""
MIN_POINTS = 3
"""The fewest units a correlation is computed on (segments, systems, or an input's outputs): two points
always correlate perfectly."""
MAX_PAIRS = 4_000_000
"""The most pairs of units in one group that acc_eq, a tie threshold (--epsilon) or perm-pairs compares one by
one (every pair's difference is kept: about 100 bytes a pair); above it such a call is refused."""
CHUNK_CELLS = 1 << 21
"""Cells (resamples x units, or x pairs) evaluated at a time: the block that bounds the memory of resampling."""
SPA_PERMUTATIONS = 1000
"""The paired permutations behind each p-value of soft pairwise accuracy (mt-metrics-eval's default); every
sign vector instead when there are at most this many."""
NEAR_CONSTANT = math.ulp(1.0) ** 0.75
"""scipy's criterion of nearly constant input (pearsonr's ``NearConstantInputWarning``): a vector x with
‖x − x̄‖₂ < ε^0.75·|x̄|, ε the float64 machine epsilon, is rounding noise around its mean."""


def statistics_of(level: str) -> tuple[str, ...]:
    """The statistics reported at `level` by default: the three correlations, and at the system level pairwise
    accuracy."""
    return (*STATISTICS, ACCURACY) if level == "system" else STATISTICS


@dataclass(frozen=True)
class Protocol:
    """A call's checked choices: the level, the statistics, how units average, what the bootstrap resamples, the
    tests and the tie threshold of tau_23 and acc23."""

    level: str
    statistics: tuple[str, ...]
    average: str
    resample: str
    tests: tuple[str, ...]
    epsilon: float = 0.0

    @property
    def units(self) -> str:
        """What one value is computed over: ``segments`` or ``systems`` (system means)."""
        return "systems" if self.level == "system" else "segments"

    @property
    def needs(self) -> tuple[str, ...]:
        """The labels the protocol reads besides the groups: ``system`` and ``input``."""
        out = []
        if self.level == "system" or self.average == "sys" or self.resample in ("systems", "both") or \
                "perm-systems" in self.tests or "spa" in self.statistics:
            out.append("system")
        if self.level != "segment" or self.average == "item" or self.resample in ("inputs", "both") or \
                "perm-inputs" in self.tests:
            out.append("input")
        return tuple(out)


def _choice(what: str, value: object, choices: Sequence[str] | dict[str, str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"correlate: unknown {what} {value!r}; choose one of {list(choices)}.")
    return value


def protocol(level: str = LEVELS[0], statistics: Sequence[str] | str | None = None, average: str | None = None,
             resample: str | None = None, tests: Sequence[str] | str | None = None,
             epsilon: float = 0.0) -> Protocol:
    """The checked protocol of a call, its defaults filled in: the level's statistics; ``none`` averaging
    (``item`` at the summary level); resampled, the unit averaged over (inputs for ``item``, systems for
    ``sys``), else segments at the segment level and inputs at the system level; the paired bootstrap and
    Williams' test. Raises ValueError naming the choice and what is allowed."""
    level = _choice("level", level, LEVELS)
    average = _choice("average", "item" if level == "summary" else "none", AVERAGES) if average is None \
        else _choice("average", average, AVERAGES)
    if level == "system" and average in ("sys", "item"):
        raise ValueError(f"correlate: average {average!r} splits the segments of a group; the system level "
                         f"correlates one mean per system: choose 'none' or 'pooled' there.")
    if level == "summary" and average != "item":
        raise ValueError(f"correlate: the summary level is the average per input ('item'); for average "
                         f"{average!r} use the segment level.")
    names = [statistics] if isinstance(statistics, str) else list(statistics or statistics_of(level))
    if not names:
        raise ValueError("correlate: name at least one statistic.")
    for name in names:
        _choice("statistic", name, list(STATS))
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:
        raise ValueError(f"correlate: statistic {twice[0]!r} is named twice.")
    if "spa" in names and level != "system":
        raise ValueError("correlate: spa (soft pairwise accuracy) compares systems: use it at the system level.")
    if average == "pooled":
        bad = [s for s in names if s not in POOLABLE]
        if bad:
            raise ValueError(f"correlate: average 'pooled' counts pairs across groups; {bad[0]!r} is not a sum of "
                             f"pair counts: choose from {list(POOLABLE)} (or average 'none').")
    if resample is None:  # the unit averaged over (today's summary level: inputs), else segments or inputs
        resample = {"sys": "systems", "item": "inputs"}.get(average, "segments" if level == "segment" else "inputs")
    resample = _choice("resample", resample, list(RESAMPLINGS))
    test_names = [tests] if isinstance(tests, str) else list(DEFAULT_TESTS if tests is None else tests)
    for name in test_names:
        _choice("test", name, list(TESTS))
    permuted = [t for t in dict.fromkeys(test_names) if t in PERMUTATION_TESTS]
    if len(permuted) > 1:
        raise ValueError(f"correlate: name one permutation test per call, got {permuted}.")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or \
            epsilon < 0:
        raise ValueError(f"correlate: `epsilon` (the tie threshold of tau_23 and acc23) must be a finite number "
                         f">= 0, got {epsilon!r}.")
    if epsilon and {"tau_23", "acc23"} & set(names) and \
            {"perm-both", "perm-inputs", "perm-systems"} & set(test_names):
        raise ValueError("correlate: a tie threshold (--epsilon) is in the metric's units, which a permutation of "
                         "scores mixes; test tau_23 and acc23 with a threshold by perm-pairs (each metric keeps "
                         "its own).")
    if "spa" in names and resample == "segments":
        raise ValueError("correlate: spa's p-values are over the inputs; resample inputs, systems or both.")
    if "perm-pairs" in test_names:
        bad = [s for s in names if s not in ("kendall", "tau_23", "acc23", "acc_eq", ACCURACY)]
        if bad:
            raise ValueError(f"correlate: perm-pairs swaps pairwise comparisons; {bad[0]!r} is not computed from "
                             f"them: choose from kendall, tau_23, acc23, acc_eq, {ACCURACY}, or another test.")
    return Protocol(level, tuple(names), average, resample, tuple(dict.fromkeys(test_names)), float(epsilon))
