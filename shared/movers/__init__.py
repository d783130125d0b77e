"""movers: optimal-transport metrics for generated text.

    >>> import movers
    >>> metric = movers.load("moverscore")          # the evaluate module, offline
    >>> movers.moverscore(["the cat sat"], ["a cat sat"]).score   # the typed core  # doctest: +SKIP

Heavy dependencies (torch, transformers, evaluate) are imported on first use, not at import.
"""
from __future__ import annotations

import importlib
from typing import Any

from .registry import _autoregister, load, module_dir, module_names, register

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "load",
    "module_dir",
    "module_names",
    "register",
    "Scores",
    "Encoder",
    "load_encoder",
    "clear_encoder_cache",
    "Idf",
    "Centering",
    "fit_centering",
    "explain",
    "Explanation",
    "plot_explanation",
    "moverscore",
    "sms",
    "wms",
    "s_wms",
    "twmd",
    "TwmdCentering",
    "delta_bleu",
    "lazy_emd",
    "lazy_emd_plot",
    "text_features",
    "MoversMetric",
    "reward",
    "Reward",
    "distributed_scoring",
    "score_stream",
]

# name -> submodule that defines it; resolved lazily (PEP 562) so `import movers` stays cheap.
_LAZY = {
    "Scores": "result",
    "Encoder": "embedding",
    "load_encoder": "embedding",
    "clear_encoder_cache": "embedding",
    "Idf": "idf",
    "Centering": "centering",
    "fit_centering": "centering",
    "explain": "explanation",
    "Explanation": "explanation",
    "plot_explanation": "explanation",
    "moverscore": "metrics.moverscore",
    "sms": "metrics.sms",
    "wms": "metrics.sms",
    "s_wms": "metrics.sms",
    "twmd": "metrics.twmd",
    "TwmdCentering": "metrics.twmd",
    "delta_bleu": "metrics.delta_bleu",
    "lazy_emd": "metrics.lazy_emd",
    "lazy_emd_plot": "metrics.lazy_emd",
    "text_features": "features",
    "MoversMetric": "module_base",
    "reward": "reward",
    "Reward": "reward",
    "distributed_scoring": "distributed",
    "score_stream": "streaming",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'movers' has no attribute {name!r}")


_autoregister()
