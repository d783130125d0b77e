"""The evaluate modules and the Hub: each metric as an ``evaluate.EvaluationModule`` generated from its declaration
(:mod:`.evaluate_module`), loaded and registered for offline bare-name ``evaluate.load`` (:mod:`.loading`), and the
parts of its card (its README on the Hub) generated from the same declaration (:mod:`.cards`)."""
