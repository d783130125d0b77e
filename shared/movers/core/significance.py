"""Resampling tests of corpus scores: the bootstrap interval of one system, and the paired tests of several
systems against a baseline that sacreBLEU runs (``sacrebleu/significance.py``, v2.x).

A corpus score is recomputed from summed per-segment statistics: ``corpus(sums)`` maps summed rows
``[m, k]`` to ``m`` scores. A metric whose corpus score is the mean of its segment scores has ``k = 1``
(the scores) and ``corpus = sums[:, 0] / n``; ΔBLEU has BLEU's sufficient statistics
``[hyp_len, ref_len, correct_1..N, total_1..N]``. Definitions follow sacreBLEU exactly:

* paired bootstrap (Koehn, 2004): ``default_rng(seed).choice(n, (samples, n))`` draws every resample's
  segments; the baseline and each system are scored on the same resamples. With ``d_i`` the absolute
  score difference of resample i, ``p = (#{d_i - mean(d) > |observed|} + 1) / (samples + 1)``;
* paired approximate randomization (Riezler & Maxwell, 2005): ``default_rng(seed).integers(2, (trials,
  n), dtype=bool)`` chooses, per trial and segment, whether the two systems swap their statistics;
  ``p = (#{|a_t - b_t| > |observed|} + 1) / (trials + 1)``;
* the interval of a set of resampled scores (:func:`estimate_ci`): their mean, and half the distance
  between the sorted scores at positions ``m // 40`` and ``m - m // 40 - 1``;
* a fresh generator per system with the same seed (so every system sees the same resamples); the seed
  is 12345 unless ``$SACREBLEU_SEED`` is set, and ``none`` (any case) draws from the OS's entropy.

Statistics are summed in float64 (sacreBLEU sums bootstrap statistics in float32; integer counts are
exact in both).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Interval", "PairedResult", "DEFAULT_SEED", "BOOTSTRAP_SAMPLES", "RANDOMIZATION_TRIALS",
           "resolve_seed", "bootstrap_interval", "estimate_ci", "paired_bootstrap", "paired_randomization",
           "mean_statistics"]

DEFAULT_SEED = 12345  # sacreBLEU's default seed (SACREBLEU_SEED)
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's --confidence-n and --paired-bs-n
RANDOMIZATION_TRIALS = 10_000  # sacreBLEU's --paired-ar-n
SEED_VARIABLE = "SACREBLEU_SEED"
_CHUNK = 64  # resamples summed at a time: [chunk, n, k] floats in memory, not [samples, n, k]

Corpus = Callable[[np.ndarray], np.ndarray]
"""Summed statistics ``[m, k]`` -> ``m`` corpus scores."""


def resolve_seed(seed: int | str | None = None) -> int | None:
    """The seed of a resampling test: `seed` if given (``"none"``: unseeded, returns None), else
    ``$SACREBLEU_SEED`` read as sacreBLEU reads it, else 12345.

    Raises:
        ValueError: If the value is neither an integer nor ``none``.
    """
    if seed is None:
        seed = os.environ.get(SEED_VARIABLE, str(DEFAULT_SEED))
    if isinstance(seed, str):
        if seed.strip().lower() == "none":
            return None
        try:
            return int(seed)
        except ValueError:
            raise ValueError(f"seed: expected an integer or 'none', got {seed!r}.") from None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an integer or 'none', got {seed!r}.")
    return int(seed)


def seed_label(seed: int | None) -> str:
    """The signature's ``seed`` field (sacreBLEU writes an unseeded run as ``none``)."""
    return "none" if seed is None else str(seed)


@dataclass(frozen=True)
class Interval:
    """Bootstrap estimate of a corpus score: the mean over resamples and a 95% interval ``[low, high]``;
    ``half_width`` is half its width (sacreBLEU prints ``μ ± half_width``)."""

    mean: float
    half_width: float
    low: float
    high: float
    samples: int
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "half_width": self.half_width, "low": self.low, "high": self.high,
                "level": 0.95, "samples": self.samples, "seed": self.seed}


@dataclass(frozen=True)
class PairedResult:
    """One system in a paired test: its corpus score, its bootstrap interval (None where the test gives
    none) and its p-value against the baseline (None for the baseline itself)."""

    score: float
    interval: Interval | None
    p_value: float | None


def mean_statistics(scores: Sequence[float]) -> tuple[np.ndarray, Corpus]:
    """Statistics and corpus function of a metric whose corpus score is the mean of its segment scores."""
    values = np.asarray(scores, dtype=np.float64).reshape(-1, 1)
    n = len(values)
    return values, lambda sums: sums[:, 0] / n


def bootstrap_interval(scores: Sequence[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int | None = DEFAULT_SEED,
                       corpus: Callable[[Any], float] | None = None) -> Interval:
    """``--confidence`` of one system: resample the segments with replacement `samples` times (numpy
    ``default_rng(seed).integers``).

    Each resample's corpus score is the mean of its segment scores, or ``corpus(indices)`` for a
    metric whose corpus score is not a mean. Returns the mean of the resampled scores and their 2.5th and
    97.5th percentiles (numpy's linear interpolation).
    """
    values = np.asarray(scores, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(samples, len(values)))
    if corpus is None:
        stats = values[idx].mean(axis=1)
    else:
        stats = np.array([corpus(row) for row in idx], dtype=np.float64)
    low, high = np.percentile(stats, [2.5, 97.5])
    return Interval(mean=float(stats.mean()), half_width=float((high - low) / 2), low=float(low),
                    high=float(high), samples=samples, seed=seed)


def estimate_ci(scores: np.ndarray, seed: int | None) -> Interval:
    """sacreBLEU's ``estimate_ci``: the mean of the resampled scores and the sorted scores 1/40 from
    either end (a 95% interval); ``half_width`` is half their distance."""
    ordered = np.sort(np.asarray(scores, dtype=np.float64))
    lower = len(ordered) // 40
    low, high = float(ordered[lower]), float(ordered[len(ordered) - lower - 1])
    return Interval(mean=float(ordered.mean()), half_width=0.5 * (high - low), low=low, high=high,
                    samples=len(ordered), seed=seed)


def _resampled(stats: np.ndarray, idx: np.ndarray, corpus: Corpus) -> np.ndarray:
    """Corpus scores of the resamples `idx` ``[m, n]`` of per-segment statistics `stats` ``[n, k]``."""
    sums = np.concatenate([stats[idx[i:i + _CHUNK]].sum(axis=1) for i in range(0, len(idx), _CHUNK)])
    return np.asarray(corpus(sums), dtype=np.float64)


def _p_value(statistics: np.ndarray, observed: float) -> float:
    """(count of `statistics` > `observed` + 1) / (count + 1): sacreBLEU's ``_compute_p_value``."""
    return (int(np.sum(statistics > observed)) + 1) / (len(statistics) + 1)


def _check(statistics: Sequence[Any], scores: Sequence[float], count: int, what: str) -> list[np.ndarray]:
    if len(statistics) < 2 or len(statistics) != len(scores):
        raise ValueError(f"{what}: expected statistics and scores of a baseline and at least one system, "
                         f"got {len(statistics)} and {len(scores)}.")
    if count < 1:
        raise ValueError(f"{what}: the number of resamples must be >= 1, got {count}.")
    arrays = [np.asarray(s, dtype=np.float64) for s in statistics]
    if any(a.ndim != 2 or a.shape != arrays[0].shape for a in arrays) or len(arrays[0]) == 0:
        raise ValueError(f"{what}: every system needs statistics of the same shape [segments, k], got "
                         f"{[a.shape for a in arrays]}.")
    return arrays


def paired_bootstrap(statistics: Sequence[Any], scores: Sequence[float], corpus: Corpus, *,
                     samples: int = BOOTSTRAP_SAMPLES, seed: int | None = DEFAULT_SEED) -> list[PairedResult]:
    """Paired bootstrap resampling (Koehn, 2004) of every system against the first (the baseline).

    Args:
        statistics: Per system, per-segment statistics ``[n, k]`` (the baseline first).
        scores: Per system, its corpus score (the observed differences are taken from these).
        corpus: Summed statistics ``[m, k]`` -> ``m`` corpus scores.
        samples: Resamples (sacreBLEU's ``--paired-bs-n``).
        seed: numpy ``default_rng`` seed; None draws from the OS.
    Returns:
        One :class:`PairedResult` per system: the interval of its resampled scores, and (not for the
        baseline) the p-value of its difference from the baseline.
    """
    stats = _check(statistics, scores, samples, "paired_bootstrap")
    n = len(stats[0])

    def indices() -> np.ndarray:  # a fresh generator per system, as sacreBLEU
        return np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)

    baseline = _resampled(stats[0], indices(), corpus)
    out = [PairedResult(float(scores[0]), estimate_ci(baseline, seed), None)]
    for system, score in zip(stats[1:], scores[1:], strict=True):
        resampled = _resampled(system, indices(), corpus)
        diffs = np.abs(resampled - baseline)
        p = _p_value(diffs - diffs.mean(), abs(float(scores[0]) - float(score)))
        out.append(PairedResult(float(score), estimate_ci(resampled, seed), p))
    return out


def paired_randomization(statistics: Sequence[Any], scores: Sequence[float], corpus: Corpus, *,
                         trials: int = RANDOMIZATION_TRIALS, seed: int | None = DEFAULT_SEED,
                         confidence: int = 0) -> list[PairedResult]:
    """Paired approximate randomization (Riezler & Maxwell, 2005) of every system against the first.

    Args:
        statistics, scores, corpus: As :func:`paired_bootstrap`.
        trials: Random swaps (sacreBLEU's ``--paired-ar-n``).
        seed: numpy ``default_rng`` seed; None draws from the OS.
        confidence: Bootstrap resamples for each system's interval (sacreBLEU's ``n_ar_confidence``; 0: no
            interval, as sacreBLEU's command line). The baseline's come from a generator of their own, the
            systems' from the trial generator after the swaps, as in sacreBLEU.
    Returns:
        One :class:`PairedResult` per system, p-values for all but the baseline.
    """
    stats = _check(statistics, scores, trials, "paired_randomization")
    n = len(stats[0])
    baseline_interval = None
    if confidence > 0:
        idx = np.random.default_rng(seed).choice(n, size=(confidence, n), replace=True)
        baseline_interval = estimate_ci(_resampled(stats[0], idx, corpus), seed)
    out = [PairedResult(float(scores[0]), baseline_interval, None)]
    for system, score in zip(stats[1:], scores[1:], strict=True):
        rng = np.random.default_rng(seed)
        swap = rng.integers(2, size=(trials, n), dtype=bool)
        keep = ~swap
        # pseudo-systems: per trial, each segment's statistics from one system or the other
        a = swap.astype(np.float64) @ stats[0] + keep.astype(np.float64) @ system
        b = keep.astype(np.float64) @ stats[0] + swap.astype(np.float64) @ system
        diffs = np.abs(np.asarray(corpus(a), dtype=np.float64) - np.asarray(corpus(b), dtype=np.float64))
        p = _p_value(diffs, abs(float(scores[0]) - float(score)))
        interval = None
        if confidence > 0:
            idx = rng.choice(n, size=(confidence, n), replace=True)
            interval = estimate_ci(_resampled(system, idx, corpus), seed)
        out.append(PairedResult(float(score), interval, p))
    return out
