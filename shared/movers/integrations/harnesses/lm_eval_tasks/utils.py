"""Lets a task YAML beside this file name movers' metrics (``metric: !function utils.movers_<slug>``; importing
movers.integrations.harnesses.lm_eval also registers every ``movers_<slug>`` by name) and read its JSON lines beside it
(``custom_dataset: !function utils.dataset``). Copy it beside your own YAML."""
from pathlib import Path

from movers.integrations.harnesses.lm_eval import __getattr__, local_json  # noqa: F401


def dataset(**config):
    """The task's ``dataset_kwargs.data_files``, relative paths read beside this file (else the working directory)."""
    return local_json(Path(__file__).parent, **config)
