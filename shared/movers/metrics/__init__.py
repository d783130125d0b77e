"""The registry: every metric movers knows, by slug. The one module outside the metric files that names them.

Each metric file declares one spec (:class:`movers.core.spec.MetricSpec`): ``moverscore``, ``sms`` (SMS, S+WMS and
WMS), ``twmd`` (TWMD, TRWMD), ``lazy_emd`` and ``delta_bleu``; ``examples`` holds the texts their examples share.
:func:`register` adds a spec here and every surface reads it from here: ``movers.<slug>`` (:func:`function`), the
evaluate modules, the command line, the Space pages, streaming, explain, reward and centring fits. To add a metric,
declare its spec in one file and register it (in this list, or at run time for your own)::

    from movers.metrics import register
    register(MY_SPEC)            # movers.my_slug, movers.load("my_slug"), movers score -m my_slug, ...
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: naming the slugs (a command's --help) imports no metric, numpy or torch
    from ..core.spec import MetricSpec
    from ..pipeline.call import MetricFunction

__all__ = ["register", "unregister", "get", "function", "slugs", "specs", "exports", "DEMO", "WITHOUT_PLAN"]


# The shipped metrics, each imported when it is first asked for (a metric file imports what its formula
# needs; scoring TWMD should not import SMS's sentence splitter or ΔBLEU's sacreBLEU).
def _moverscore() -> MetricSpec:
    from .moverscore import MOVERSCORE
    return MOVERSCORE


def _sms() -> MetricSpec:
    from .sms import SMS
    return SMS


def _s_wms() -> MetricSpec:
    from .sms import S_WMS
    return S_WMS


def _wms() -> MetricSpec:
    from .sms import WMS
    return WMS


def _twmd() -> MetricSpec:
    from .twmd import TWMD
    return TWMD


def _lazy_emd() -> MetricSpec:
    from .lazy_emd import LAZY_EMD
    return LAZY_EMD


def _delta_bleu() -> MetricSpec:
    from .delta_bleu import DELTA_BLEU
    return DELTA_BLEU


_SHIPPED: dict[str, Callable[[], MetricSpec]] = {
    "moverscore": _moverscore, "sms": _sms, "s_wms": _s_wms, "wms": _wms, "twmd": _twmd, "lazy_emd": _lazy_emd,
    "delta_bleu": _delta_bleu}
WITHOUT_PLAN = frozenset({"delta_bleu"})
"""The shipped metrics that have no transport plan (their specs' ``has_plan`` is False; a test holds the two
together): :func:`slugs` names the others without importing a metric file (``movers explain --help``)."""
DEMO = "moverscore"
"""The metric ``movers demo`` (the README's first command) and ``python -m shared.bench speed`` run by default."""

_SPECS: dict[str, MetricSpec] = {}
_FUNCTIONS: dict[str, MetricFunction] = {}


def register(spec: MetricSpec, *, replace: bool = False) -> MetricFunction:
    """Add `spec` under its slug; returns its function (``movers.<slug>``)."""
    from ..core.spec import MetricSpec
    from ..pipeline.call import MetricFunction

    if not isinstance(spec, MetricSpec):
        raise TypeError(f"register: expected a movers MetricSpec instance, got {type(spec).__name__}.")
    taken = spec.slug in _SPECS and _SPECS[spec.slug] is not spec
    if (taken or (spec.slug in _SHIPPED and _SHIPPED[spec.slug]() is not spec)) and not replace:
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


def _load(slug: str) -> MetricSpec | None:
    if slug not in _SPECS and slug in _SHIPPED:
        from ..pipeline.call import MetricFunction

        spec = _SHIPPED[slug]()
        _SPECS[slug], _FUNCTIONS[slug] = spec, MetricFunction(spec)
    return _SPECS.get(slug)


def get(metric: str | MetricSpec | MetricFunction) -> MetricSpec:
    """The spec of a slug (or of a function, or the spec itself); an unknown slug lists the known ones."""
    from ..core.spec import MetricSpec
    from ..pipeline.call import MetricFunction

    if isinstance(metric, MetricSpec):
        return metric
    if isinstance(metric, MetricFunction):
        return metric.spec
    spec = _load(metric) if isinstance(metric, str) else None
    if spec is None:
        raise ValueError(f"unknown metric {metric!r}; choose one of {slugs()}.")
    return spec


def function(metric: str | MetricSpec | MetricFunction) -> MetricFunction:
    """``movers.<slug>`` of a registered metric."""
    return _FUNCTIONS[get(metric).slug]


def slugs(*, plans: bool | None = None) -> list[str]:
    """Registered slugs (with `plans`, only the metrics that have (or have not) a transport plan)."""
    names = list(dict.fromkeys([*_SHIPPED, *_SPECS]))
    if plans is None:
        return names
    return [s for s in names if (_SPECS[s].has_plan if s in _SPECS else s not in WITHOUT_PLAN) == plans]


def specs() -> list[MetricSpec]:
    return [get(s) for s in slugs()]


def exports() -> dict[str, Any]:
    """Public names the metric files add to ``movers``: each metric's function and its declared exports."""
    out: dict[str, Any] = {}
    for spec in specs():
        out[spec.slug] = _FUNCTIONS[spec.slug]
        out.update(spec.exports)
    return out


def is_slug(name: str) -> bool:
    """Whether `name` is a registered slug (without importing any metric file)."""
    return name in _SHIPPED or name in _SPECS
