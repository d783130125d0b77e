"""The integrations layer: movers' metrics where people use them.

The evaluate modules (generated from each spec) and their registration for offline bare-name loading,
``movers.explain`` / ``score_stream`` / ``fit_centering`` by name, the TRL reward, the Space page and
``movers space build``, and the LLM evaluation harnesses (``lm_eval``, ``inspect_ai``, ``mlflow``: optional
extras, imported only when asked for). Reads every metric fact from the registry (:mod:`movers.metrics`).
"""
