"""Lets a task YAML beside this file name movers' metrics: ``metric: !function utils.movers_<slug>`` (importing
movers.integrations.lm_eval also registers every ``movers_<slug>`` by name). Copy it beside your own YAML."""
from movers.integrations.lm_eval import __getattr__  # noqa: F401
