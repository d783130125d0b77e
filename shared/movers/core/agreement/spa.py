"""Soft pairwise accuracy (Thompson et al. 2024, "Improving Statistical Significance in Human Evaluation of
Automatic Metrics via Soft Pairwise Accuracy"; WMT24-25's system-level statistic; mt-metrics-eval ``pce.py``).

For every pair of systems (a, b), a paired permutation test over the inputs gives p(a better than b): with
d_j = score_a(j) − score_b(j) over the inputs j that both systems have, the share of sign vectors s with
Σ s_j d_j ≥ Σ d_j (the observed difference among them). Once from the human scores, once from the metric's:

    SPA = 1 − mean over system pairs of |p_human(a > b) − p_metric(a > b)|.

The sign vectors are every one of the 2^n when there are at most :data:`SPA_PERMUTATIONS`, else that many
random ones, the same for every pair, for the human and the metric scores, and for every resample.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from .declarations import CHUNK_CELLS, SPA_PERMUTATIONS

__all__ = ["Signs", "pairwise_p", "spa"]


class Signs:
    """The sign vectors of a group's paired permutations: all 2^n when 2^n <= `permutations`, else `permutations`
    random ones from `seed`, made a block at a time (the same blocks every time), so that their memory stays
    bounded whatever the number of inputs."""

    def __init__(self, n: int, seed: np.random.SeedSequence, permutations: int = SPA_PERMUTATIONS) -> None:
        self.n, self.seed, self.permutations = n, seed, permutations
        self.exhaustive = n <= math.floor(math.log2(permutations))
        self.count = 2 ** n if self.exhaustive else permutations

    def blocks(self) -> Iterator[np.ndarray]:
        """[k, n] blocks of ±1 sign vectors, `count` rows in all."""
        if self.exhaustive:
            yield np.array(list(itertools.product((1.0, -1.0), repeat=self.n))).reshape(-1, self.n)
            return
        rng = np.random.default_rng(self.seed)
        step = max(1, CHUNK_CELLS // max(self.n, 1))
        for start in range(0, self.permutations, step):
            k = min(step, self.permutations - start)
            yield np.where(rng.random((k, self.n)) < 0.5, -1.0, 1.0)


def pairwise_p(cells: np.ndarray, sign: Signs) -> np.ndarray:
    """[S, S] p-values: entry (a, b) the share of sign vectors under which the permuted difference of a and b
    is at least the observed one (a better than b); `cells` [S, n] the systems' scores on the n inputs (NaN where
    a system has none; a pair uses the inputs both have). The diagonal is 1 (no difference)."""
    s = cells.shape[0]
    out = np.ones((s, s))
    a_idx, b_idx = np.triu_indices(s, 1)
    if not len(a_idx):
        return out
    with np.errstate(invalid="ignore"):
        d = cells[a_idx] - cells[b_idx]
    d = np.where(np.isnan(d), 0.0, d)  # an input one of the two lacks does not count
    test = d.sum(1)
    slack = d.shape[1] * np.finfo(float).eps * np.abs(d).sum(1)  # the rounding of a sum of n terms
    above, below = np.zeros(len(a_idx)), np.zeros(len(a_idx))
    for block in sign.blocks():
        null = block @ d.T  # [k, pairs]
        above += (null >= test - slack).sum(0)
        below += (-null >= -test - slack).sum(0)
    out[a_idx, b_idx] = above / sign.count
    out[b_idx, a_idx] = below / sign.count
    return out


def spa(human: np.ndarray, metric: np.ndarray, sign: Signs, systems: np.ndarray | None = None) -> tuple[float, int]:
    """(Σ over system pairs of |p_human − p_metric|, number of pairs); SPA = 1 − the first / the second.

    Args:
        human, metric: [S, n] the systems' mean scores per input (NaN where a system has none).
        sign: The sign vectors (:class:`Signs`).
        systems: the systems of a resample, with repeats (default: each once); a pair of copies of one system
            has p = 1 on both sides.
    """
    ph, pm = pairwise_p(human, sign), pairwise_p(metric, sign)
    chosen = np.arange(human.shape[0]) if systems is None else np.asarray(systems)
    i, j = np.triu_indices(len(chosen), 1)
    err = np.abs(ph[chosen[i], chosen[j]] - pm[chosen[i], chosen[j]])
    return float(err.sum()), len(i)
