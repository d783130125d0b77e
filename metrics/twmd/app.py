"""Hub Space demo for this module: the movers page (examples, option widgets, score with signature,
per-segment table, alignment view); the card is this folder's README.md. `movers space build twmd <dir>`
makes the deployable folder (it adds the movers wheel and a bootstrap that imports movers from it).
"""
from pathlib import Path

from movers.integrations.spaces.page import launch

launch("twmd", card=Path(__file__).with_name("README.md"))
