"""One pair's transport as the scoring path computed it (:class:`Explanation`), and a heatmap of it.

Every optimal-transport metric takes ``return_plans=True`` and then reports, per segment and reference,
an :class:`Explanation` (both sides' labels and masses, the cost matrix, the plan, the score);
``movers.explain`` is that option on a single pair, so an explained score is the scored one by
construction (tested).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .histogram import Alignment, Histogram

__all__ = ["Explanation", "plot_explanation"]


@dataclass(frozen=True)
class Explanation:
    """One pair: rows are the prediction's points, columns the reference's.

    ``cost`` is the ground cost as the solver saw it (``cost_label`` names it), ``plan`` the plan as
    scored (after any post-solve mask), ``score`` the pair's score (before any reference aggregation),
    ``distance`` the transport cost when the metric has one.
    """

    metric: str
    prediction_labels: list[str]
    reference_labels: list[str]
    prediction_mass: np.ndarray
    reference_mass: np.ndarray
    cost: np.ndarray
    plan: np.ndarray
    score: float
    distance: float | None
    cost_label: str
    signature: str = ""

    @classmethod
    def of(cls, metric: str, prediction: Histogram, reference: Histogram, alignment: Alignment, *,
           cost_label: str) -> Explanation:
        """Assemble from the formula layer's histograms and alignment (computed with the plan kept)."""
        if alignment.plan is None or alignment.cost is None:
            raise ValueError(f"{metric}: the alignment was computed without its plan (return_plans=False).")
        return cls(metric=metric, prediction_labels=list(prediction.labels), reference_labels=list(reference.labels),
                   prediction_mass=_numpy(prediction.mass), reference_mass=_numpy(reference.mass),
                   cost=np.asarray(alignment.cost, dtype=np.float64), plan=np.asarray(alignment.plan, dtype=np.float64),
                   score=float(alignment.score),
                   distance=None if alignment.distance is None else float(alignment.distance),
                   cost_label=cost_label)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: arrays as nested lists."""
        out = dataclasses.asdict(self)
        for key in ("prediction_mass", "reference_mass", "cost", "plan"):
            out[key] = np.asarray(out[key]).tolist()
        return out

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """:func:`plot_explanation` of this pair."""
        return plot_explanation(self, ax=ax, **kwargs)


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def plot_explanation(explanation: Explanation, *, ax: Any = None, annotate: bool = True, title: str | None = None,
                     hide_massless: bool = True, max_label: int = 40) -> Any:
    """Draw the plan as a heatmap: prediction points as rows, reference points as columns.

    Args:
        explanation: From ``movers.explain`` (or ``extra["alignments"][i][j]``).
        ax: Axes to draw on (default: a new figure sized to the labels).
        annotate: Write each plan entry, as a percentage of the moved mass, in its cell (>= 0.5%).
        title: Default: metric, score and distance.
        hide_massless: Drop rows and columns that have no mass and receive none (e.g. [CLS]/[SEP] in
            Lazy-EMD); they carry nothing to look at.
        max_label: Longer labels (sentences) are shortened to this many characters.
    Returns:
        The matplotlib Axes (matplotlib is imported here only).
    """
    import matplotlib.pyplot as plt  # without a display matplotlib picks its Agg backend by itself

    e = explanation
    plan = np.asarray(e.plan, dtype=np.float64)
    rows = list(range(plan.shape[0]))
    cols = list(range(plan.shape[1]))
    if hide_massless:
        rows = [i for i in rows if e.prediction_mass[i] > 0 or plan[i].sum() > 0] or rows
        cols = [j for j in cols if e.reference_mass[j] > 0 or plan[:, j].sum() > 0] or cols
    shown = plan[np.ix_(rows, cols)]
    total = float(plan.sum()) or 1.0
    share = shown / total

    def short(text: str) -> str:
        return text if len(text) <= max_label else text[: max_label - 1] + "…"

    row_labels = [short(e.prediction_labels[i]) for i in rows]
    col_labels = [short(e.reference_labels[j]) for j in cols]
    if ax is None:
        width = 1.6 + 0.5 * len(cols) + 0.06 * max((len(t) for t in row_labels), default=0)
        height = 1.4 + 0.42 * len(rows) + 0.05 * max((len(t) for t in col_labels), default=0)
        # at least 5.2 x 3 in: the two-line title of a one-sentence SMS plan must not be clipped
        _, ax = plt.subplots(figsize=(min(max(width, 5.2), 30), min(max(height, 3.0), 30)))
    top = float(share.max()) if share.size else 0.0
    image = ax.imshow(share, cmap="Blues", vmin=0.0, vmax=max(top, 1e-12), aspect="auto")
    ax.set_xticks(range(len(cols)), col_labels, rotation=45, ha="right", fontsize=9)
    ax.set_yticks(range(len(rows)), row_labels, fontsize=9)
    ax.set_xlabel("reference")
    ax.set_ylabel("prediction")
    if annotate and share.size <= 900:
        for i in range(share.shape[0]):
            for j in range(share.shape[1]):
                if share[i, j] >= 0.005:
                    ax.text(j, i, f"{100 * share[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if share[i, j] > 0.6 * top else "black")
    if title is None:
        title = f"{e.metric}: score {e.score:.4f}"
        if e.distance is not None:
            title += f", distance {e.distance:.4f}"
        title += f"\nplan (% of moved mass), cost {e.cost_label}"
    ax.set_title(title, fontsize=10)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the moved mass")
    ax.figure.tight_layout()
    return ax
