"""Metrics as rewards for reinforcement learning: a callable with TRL's reward-function signature.

The SMS paper (Clark et al., ACL 2019, §6) trains summarizers with SMS as the reward. ``movers.reward``
turns any movers metric into ``f(completions, **dataset_columns) -> list[float]``, the signature
``trl.GRPOTrainer(reward_funcs=...)`` calls (TRL passes ``prompts``, ``completions``,
``completion_ids``, ``trainer_state`` and every dataset column as keyword arguments).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ... import metrics as registry
from ...core.spec import MetricSpec
from ...pipeline.call import checked_options
from ...text.embedding_cache import object_cache_options

__all__ = ["reward", "Reward"]


def _completion_text(completion: Any, i: int) -> str:
    """Plain text of a completion: a string, or a conversation (list of messages) -> its last message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, Sequence) and completion and all(isinstance(m, dict) for m in completion):
        content = completion[-1].get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, Sequence):  # multimodal content parts: keep the text parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if content is None:
            return ""
    raise TypeError(f"reward: `completions[{i}]` must be a string or a conversation (a list of "
                    f"{{'role': ..., 'content': ...}} messages), got {type(completion).__name__}.")


class Reward:
    """A movers metric as a TRL reward function; build it with :func:`reward`.

    Calling it scores all completions of the batch in one metric call (the encoder is loaded once per
    process and reused); empty or whitespace-only completions get :attr:`worst` without being scored. The
    object keeps the token vectors it computed in an in-memory cache
    (:data:`~movers.text.embedding_cache.OBJECT_CACHE_BYTES`), so a prompt's references, met again with every
    group of completions and every epoch, are embedded once; ``cache=False`` turns it off, rewards agree to
    float32 rounding (:data:`movers.core.result.REGROUPING_ATOL`).
    """

    def __init__(self, metric: str | MetricSpec, *, reference_column: str, options: dict[str, Any]) -> None:
        try:
            self.spec = registry.get(metric)
        except ValueError:
            raise ValueError(f"reward: `metric` must be one of {registry.slugs()}, got {metric!r}.") from None
        if not isinstance(reference_column, str) or not reference_column:
            raise TypeError(f"reward: `reference_column` must be a column name, got {reference_column!r}.")
        for key in ("predictions", "references", "verbose", "return_matching"):
            if key in options:
                raise TypeError(f"reward: `{key}` is set by the reward itself; remove it from the options.")
        self.metric = self.spec.slug
        self.reference_column = reference_column
        self.options = dict(options)
        self._function = registry.function(self.spec)
        self._resolved = checked_options(self.spec, self.options)  # a bad option fails here, not at the first batch
        self.__name__ = f"movers_{self.metric}"  # TRL logs rewards under the callable's name
        self.worst = float(self.spec.reward(self._resolved, self.spec.worst(self._resolved)["scores"]))
        self.signature: str | None = None
        self._movers_cache = None

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        if self.reference_column not in kwargs:
            columns = sorted(k for k in kwargs if k not in ("trainer_state", "log_extra", "log_metric",
                                                            "completion_ids", "environments"))
            raise KeyError(f"reward: no `{self.reference_column}` keyword argument; the dataset columns passed "
                           f"are {columns}. Pass reference_column='<column with the references>'.")
        references = list(kwargs[self.reference_column])
        texts = [_completion_text(c, i) for i, c in enumerate(completions)]
        if len(references) != len(texts):
            raise ValueError(f"reward: `completions` and `{self.reference_column}` must have the same length, "
                             f"got {len(texts)} and {len(references)}.")
        keep = [i for i, t in enumerate(texts) if t.strip()]
        rewards = [self.worst] * len(texts)
        if keep:
            options = object_cache_options(self, self.spec, self.options)
            result = self._function([texts[i] for i in keep], [references[i] for i in keep], **options)
            self.signature = str(result.signature)
            values = [self.spec.reward(self._resolved, s) for s in result.scores]
            if any(not math.isfinite(v) for v in values):
                raise ValueError(f"reward: {self.metric} returned a non-finite score; check the options "
                                 f"{self.options!r}.")
            for i, value in zip(keep, values, strict=False):
                rewards[i] = float(value)
        return rewards

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_movers_cache": None}  # the in-memory cache stays in its process

    def __repr__(self) -> str:
        return f"movers.reward({self.metric!r}, reference_column={self.reference_column!r}, **{self.options!r})"


def reward(metric: str | MetricSpec, *, reference_column: str = "reference", **options: Any) -> Reward:
    """A reward function for TRL (``GRPOTrainer(reward_funcs=[movers.reward("sms")])``) from a movers metric.

    The callable takes ``completions`` (strings, or conversations whose last message is the completion)
    and the dataset's reference column as a keyword argument (``reference`` by default: a string or a
    list of strings per row), ignores TRL's other keyword arguments, and returns one float per
    completion, higher is better for every metric: each metric's own reward rule
    (``MetricSpec.reward``: the segment score for similarities, Lazy-EMD's similarity ``1 - distance``,
    a distance negated). Empty or whitespace-only completions get the reward of the metric's worst value
    (``Reward.worst``) without being scored.

    Args:
        metric: A registered metric (``movers.metrics.slugs()``).
        reference_column: Name of the dataset column holding the references.
        **options: Keyword options of that metric (e.g. ``preset``, ``model``, ``batch_size``).
    """
    return Reward(metric, reference_column=reference_column, options=options)
