"""movers: optimal-transport metrics for generated text.

    >>> import movers
    >>> metric = movers.load("moverscore")          # the evaluate module, offline
    >>> result = movers.moverscore(["the cat sat"], ["a cat sat"])   # the typed core

The package is layered; each layer imports only the ones before it:
``core`` (transport, histograms, references, results, signatures, options, the metric spec, scopes) <
``text`` (encoders, static vectors, filters, sentences, IDF, centring, guards) < ``pipeline`` (the one
scoring pipeline, its front, the two-pass protocol, streaming, centring fits) < ``metrics`` (one declaration per
metric and the registry) < ``api`` (explain, stream, fit, compare and correlate by a metric's name) < ``integrations``
(evaluate modules and the Hub, Spaces, the harnesses, training loops, Ray) < ``cli`` (the ``movers`` command).
``torchmetrics`` is the public path of the torchmetrics classes (``from movers.torchmetrics import TWMD``).

``movers.<slug>`` is each registered metric's function (see :mod:`movers.metrics`). Heavy dependencies
(torch, transformers, evaluate) are imported on first use, not at import.
"""
from __future__ import annotations

import importlib
from typing import Any

from .integrations.hub import loading as _loading
from .integrations.hub.loading import load as load
from .integrations.hub.loading import module_dir as module_dir
from .integrations.hub.loading import module_names as module_names
from .integrations.hub.loading import register as register

__version__ = "0.1.0"
"""The version of movers (a signature's ``v:`` field)."""

# name -> submodule that defines it; resolved lazily (PEP 562) so `import movers` stays cheap. The metric
# functions and their exports (e.g. `TwmdCentering`) come from the registry, `movers.metrics`.
_LAZY = {
    "Scores": "core.result",
    "REGROUPING_ATOL": "core.result",
    "Signature": "core.signature",
    "Explanation": "core.explanation",
    "plot_explanation": "core.explanation",
    "distributed_scoring": "core.scope",
    "Encoder": "text.embedding",
    "load_encoder": "text.embedding",
    "clear_encoder_cache": "text.embedding",
    "EmbeddingCache": "text.embedding_cache",
    "Idf": "text.idf",
    "Centering": "text.centering",
    "explain": "api.by_name",
    "compare": "api.comparison",
    "Comparison": "api.comparison",
    "correlate": "api.agreement",
    "Agreement": "api.agreement",
    "fit_centering": "api.by_name",
    "score_stream": "api.by_name",
    "MoversMetric": "integrations.hub.evaluate_module",
    "evaluate_module": "integrations.hub.evaluate_module",
    "reward": "integrations.training.reward",
    "Reward": "integrations.training.reward",
    "metrics": "metrics",
}

_STATIC = ["__version__", "load", "module_dir", "module_names", "register", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        value = module if name == "metrics" else getattr(module, name)
    elif name == "__all__":
        value = [*_STATIC, *importlib.import_module(".metrics", __name__).exports()]
    else:
        registry = importlib.import_module(".metrics", __name__)
        if registry.is_slug(name):  # imports that metric's file only
            return registry.function(name)  # not cached: a metric registered later must resolve too
        exports = registry.exports()
        if name not in exports:
            raise AttributeError(f"module 'movers' has no attribute {name!r}")
        return exports[name]
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_STATIC, *importlib.import_module(".metrics", __name__).exports()})


if not _loading.launched_as_command():  # the command registers in main(), after its one-line warning format is set
    _loading.autoregister()
