"""The integrations layer: movers' metrics where people use them, one room per audience.

* :mod:`.hub`: the evaluate modules generated from each declaration, their offline bare-name registration and the
  generated parts of their cards;
* :mod:`.spaces`: the Hub Space page and ``movers space build``;
* :mod:`.harnesses`: lm-evaluation-harness, Inspect, MLflow and LightEval (optional extras, imported only when
  asked for);
* :mod:`.training`: torchmetrics/Lightning metrics and TRL rewards;
* :mod:`.ray`: a Ray Data set scored as one call (the ``ray`` extra).

Every metric fact is read from the registry (:mod:`movers.metrics`); the library's own functions by name
(``movers.explain``, ``score_stream``, ``compare``) are in :mod:`movers.api`.
"""

from __future__ import annotations

__all__ = ["missing_extra", "TORCH_VERSION", "TORCH_INDEX"]

TORCH_VERSION = "2.13.0+cpu"
"""The torch build a Space pins in its requirements.txt and a card's install lines name: the CPU build, so that a
Space does not pull several GB of CUDA packages."""
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
"""Where that build is found (PyPI's torch is the CUDA one)."""


def missing_extra(module: str, package: str, extra: str) -> str:
    """The message of the ImportError that `module` raises when the optional `package` is missing: the extra that
    brings it, and the requirement that extra declares (read from movers' installed metadata, so the versions are
    stated once, in pyproject.toml)."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    wanted = package
    try:
        for line in importlib.metadata.requires("movers") or ():
            req = Requirement(line)
            if canonicalize_name(req.name) == canonicalize_name(package) and req.marker is not None \
                    and req.marker.evaluate({"extra": extra}):
                wanted = f"{req.name}{req.specifier}"
                break
    except importlib.metadata.PackageNotFoundError:  # a source checkout on sys.path, not installed
        pass
    return f"{module} needs {package}: pip install 'movers[{extra}]' (or pip install '{wanted}')."
