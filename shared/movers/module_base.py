"""The `evaluate.Metric` base class of the six movers modules: movers' input checks before evaluate's.

evaluate casts every batch to its Arrow features before the metric sees it: an int becomes ``"5"``,
a bare string becomes a list of characters, and a failed batch leaves its writer (and the feature
variant it picked) behind, so that the next valid call on the same object fails. Here `add`,
`add_batch` and `compute` first run the same checks as the core functions (``movers._validation``),
raising their `TypeError`/`ValueError` that names the argument and position before evaluate's
writer sees anything, and hand evaluate one normalised form (references always one list per
prediction), so that flat and ragged batches can be mixed. A `compute` that fails discards what was
added (as a successful one does), leaving the object ready for the next call.

Empty or whitespace-only texts pass this layer: each metric's core decides about them (an error by
default), with the options given to `compute`.
"""
from __future__ import annotations

import re
from typing import Any

import datasets
import evaluate

from . import _validation as v

__all__ = ["MoversMetric"]


class MoversMetric(evaluate.Metric):
    """`evaluate.Metric` whose inputs are checked by movers before evaluate stores them.

    Subclasses define `_info` and `_compute` only. The inputs are ``predictions`` and ``references``
    (texts, or, when a feature variant declares sentence lists, pre-segmented documents) and
    optionally ``reference_weights`` (ΔBLEU's "weighted" configuration).
    """

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (checked by movers first; see the module card).
        """
        batch = self._movers_check(predictions, references, kwargs)
        fresh = self.writer is None
        try:
            return super().add_batch(**batch)
        except BaseException:
            if fresh:
                self._movers_discard()
            raise

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and its reference(s) (checked by movers first; see the module card).
        """
        columns = {k: [value] for k, value in kwargs.items()}
        batch = self._movers_check([prediction], [reference], columns, single=True)
        fresh = self.writer is None
        try:
            return super().add(prediction=batch["predictions"][0], reference=batch["references"][0],
                               **{k: col[0] for k, col in batch.items() if k not in ("predictions", "references")})
        except BaseException:
            if fresh:
                self._movers_discard()
            raise

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score the added examples and those given here (checked by movers first; see the module card).

        A failed call discards the examples added so far, so the object stays usable.
        """
        # evaluate leaves file_paths/filelocks of the last successful compute behind; cleared here so that a
        # failure below discards only files this call holds (another module or process may own that path now).
        self.file_paths = self.filelocks = None
        try:
            out = super().compute(predictions=predictions, references=references, **kwargs)
        except BaseException:
            self._movers_discard()
            raise
        self.file_paths = self.filelocks = None
        return out

    # ------------------------------------------------------------------ internals

    def _movers_check(self, predictions: Any, references: Any, extra: dict, single: bool = False) -> dict:
        """movers' checks on one batch; returns the batch in the form handed to evaluate's writer."""
        try:
            return self._movers_normalise(predictions, references, extra)
        except (TypeError, ValueError) as err:
            if not single:
                raise
            # add(prediction=, reference=) checks a batch of one: name the arguments as the caller wrote them.
            message = re.sub(r"`(prediction|reference)s\[0\]", r"`\1", str(err))
            message = message.replace("`predictions` and `references` must", "`prediction` and `reference` must")
            raise type(err)(message) from None

    def _movers_normalise(self, predictions: Any, references: Any, extra: dict) -> dict:
        name = self.name
        columns = self._feature_names()
        unknown = sorted(set(extra) - set(columns))
        if unknown:  # evaluate would say the same, without naming the metric
            raise ValueError(f"{name}: unknown input column(s) {unknown}; the inputs are {columns} "
                             f"(options go to compute()).")
        variants = self.features if isinstance(self.features, list) else [self.features]
        if any(isinstance(f["predictions"], datasets.Sequence) for f in variants):  # SMS, S+WMS
            preds, refs, segmented = v.check_documents(name, predictions, references, allow_empty_text=True)
            if segmented:
                preds = [list(doc) for doc in preds]
                refs = [[list(doc) for doc in group] for group in refs]
        else:
            preds, refs = v.check_pairs(name, predictions, references, allow_empty_text=True)
        # numpy strings become str; references always one list per prediction (the first feature variant),
        # so that batches with one and with several references can be added to the same object.
        batch: dict = {"predictions": [str(p) if isinstance(p, str) else p for p in preds],
                       "references": [[str(r) if isinstance(r, str) else r for r in group] for group in refs]}
        if "reference_weights" in columns:  # ΔBLEU "weighted": the same shape as the references
            if extra.get("reference_weights") is None:
                raise TypeError(f"{name}: `reference_weights` is required by this configuration (one number "
                                f"per reference, in [-1, 1]); load the default configuration for plain BLEU.")
            batch["reference_weights"] = v.check_reference_weights(name, extra["reference_weights"], refs)
        return batch

    def _movers_discard(self) -> None:
        """Drop the pending writer, cache file and lock, as a successful `compute` does: only what this object
        holds now (its open cache file, or the files the failing `compute` gathered)."""
        import os

        if self.writer is not None:
            try:
                self.writer.finalize()
            except Exception:  # a half-written batch may not finalise; it is dropped anyway
                pass
        paths = list(self.file_paths or []) + ([self.cache_file_name] if self.cache_file_name else [])
        locks = list(self.filelocks or []) + ([self.filelock] if self.filelock is not None else [])
        for path in paths:
            if path and os.path.exists(path):
                os.remove(path)
        for lock in locks:
            try:
                lock.release()
            except Exception:
                pass
        self.writer = self.buf_writer = self.data = self.selected_feature_format = None
        self.cache_file_name = self.filelock = self.file_paths = self.filelocks = None
