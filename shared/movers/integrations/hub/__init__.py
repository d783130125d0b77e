"""The evaluate modules and the Hub: each metric as an ``evaluate.EvaluationModule`` generated from its declaration
(:mod:`.evaluate_module`), loaded and registered for offline bare-name ``evaluate.load`` (:mod:`.loading`). The
cards those modules show on the Hub are written from the same declarations in a checkout (``python -m shared.bench
cards``)."""
