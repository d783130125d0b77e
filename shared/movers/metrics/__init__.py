"""The registry: every metric movers knows, by slug. The one module outside the metric files that names them.

Each metric file declares one spec (:class:`movers.core.spec.MetricSpec`); :func:`register` adds it here
and every surface reads it from here: ``movers.<slug>`` (:func:`function`), the evaluate modules, the
command line, the Space pages, streaming, explain, reward, centring fits and the bench. To add a metric,
declare its spec in one file and register it (in this list, or at run time for your own)::

    from movers.metrics import register
    register(MY_SPEC)            # movers.my_slug, movers.load("my_slug"), movers score -m my_slug, ...
"""
from __future__ import annotations

from typing import Any

from ..core.spec import MetricSpec
from ..pipeline.call import MetricFunction
from .delta_bleu import DELTA_BLEU
from .lazy_emd import LAZY_EMD
from .moverscore import MOVERSCORE
from .sms import S_WMS, SMS, WMS
from .twmd import TWMD

__all__ = ["register", "unregister", "get", "function", "slugs", "specs", "exports", "DEMO"]

DEMO = MOVERSCORE.slug
"""The metric ``movers demo`` (the README's first command) and ``movers bench speed`` run by default."""

_SPECS: dict[str, MetricSpec] = {}
_FUNCTIONS: dict[str, MetricFunction] = {}


def register(spec: MetricSpec, *, replace: bool = False) -> MetricFunction:
    """Add `spec` under its slug; returns its function (``movers.<slug>``)."""
    if not isinstance(spec, MetricSpec):
        raise TypeError(f"register: expected a movers MetricSpec instance, got {type(spec).__name__}.")
    if spec.slug in _SPECS and _SPECS[spec.slug] is not spec and not replace:
        raise ValueError(f"register: a metric {spec.slug!r} is already registered; pass replace=True.")
    _SPECS[spec.slug] = spec
    _FUNCTIONS[spec.slug] = MetricFunction(spec)
    return _FUNCTIONS[spec.slug]


def unregister(slug: str) -> None:
    """Remove a metric registered at run time (the shipped ones stay)."""
    if slug in _SHIPPED:
        raise ValueError(f"unregister: {slug!r} ships with movers and cannot be removed.")
    _SPECS.pop(slug, None)
    _FUNCTIONS.pop(slug, None)


def get(metric: str | MetricSpec | MetricFunction) -> MetricSpec:
    """The spec of a slug (or of a function, or the spec itself); an unknown slug lists the known ones."""
    if isinstance(metric, MetricSpec):
        return metric
    if isinstance(metric, MetricFunction):
        return metric.spec
    if not isinstance(metric, str) or metric not in _SPECS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {slugs()}.")
    return _SPECS[metric]


def function(metric: str | MetricSpec | MetricFunction) -> MetricFunction:
    """``movers.<slug>`` of a registered metric."""
    return _FUNCTIONS[get(metric).slug]


def slugs(*, plans: bool | None = None) -> list[str]:
    """Registered slugs (with `plans`, only the metrics that have (or have not) a transport plan)."""
    return [s for s, spec in _SPECS.items() if plans is None or spec.has_plan == plans]


def specs() -> list[MetricSpec]:
    return list(_SPECS.values())


def exports() -> dict[str, Any]:
    """Public names the metric files add to ``movers``: each metric's function and its declared exports."""
    out: dict[str, Any] = {}
    for spec in _SPECS.values():
        out[spec.slug] = _FUNCTIONS[spec.slug]
        out.update(spec.exports)
    return out


for _spec in (MOVERSCORE, SMS, S_WMS, WMS, TWMD, LAZY_EMD, DELTA_BLEU):
    register(_spec)
_SHIPPED = frozenset(_SPECS)
