"""The library's functions that take a metric by name, above the metric declarations: ``movers.explain``,
``movers.score_stream`` and ``movers.fit_centering`` (:mod:`.by_name`), and ``movers.compare`` for several systems
with paired significance tests (:mod:`.comparison`), and ``movers.correlate``, agreement with human judgments
(:mod:`.agreement`, reading the judgments file with :mod:`.judgments`). ``movers.<slug>`` itself is each metric's
function (:mod:`movers.metrics`)."""
