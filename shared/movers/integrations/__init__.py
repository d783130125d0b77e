"""The integrations layer: movers' metrics where people use them.

The evaluate modules (generated from each spec) and their registration for offline bare-name loading,
``movers.explain`` / ``score_stream`` / ``fit_centering`` by name, the TRL reward, the Space page and
``movers space build``. Reads every metric fact from the registry (:mod:`movers.metrics`).
"""
