"""``movers.torchmetrics``: the public path of :mod:`movers.integrations.torchmetrics` (one
``torchmetrics.Metric`` per movers metric: ``from movers.torchmetrics import MoverScore``)."""
from .integrations.torchmetrics import TextMetric, classes, metric_class
from .integrations.torchmetrics import __doc__ as _doc
from .integrations.torchmetrics import __getattr__ as __getattr__

__doc__ = _doc
__all__ = ["TextMetric", "metric_class", "classes"]
