"""``movers.torchmetrics``: the public path of :mod:`movers.integrations.training.torchmetrics` (one
``torchmetrics.Metric`` per movers metric: ``from movers.torchmetrics import MoverScore``)."""
from .integrations.training.torchmetrics import TextMetric, classes, metric_class
from .integrations.training.torchmetrics import __doc__ as _doc
from .integrations.training.torchmetrics import __getattr__ as __getattr__

__doc__ = _doc
__all__ = ["TextMetric", "metric_class", "classes"]
