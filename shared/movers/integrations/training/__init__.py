"""Scores inside training loops: ``torchmetrics.Metric`` classes for Lightning, exact under DDP (:mod:`.torchmetrics`,
public as ``movers.torchmetrics``), and rewards for TRL's trainers (:mod:`.reward`, public as ``movers.reward``)."""
