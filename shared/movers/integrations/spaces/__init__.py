"""Hugging Face Spaces: the page every metric's Space runs (:mod:`.page`) and ``movers space build``, which makes a
deployable Space folder with the movers wheel inside (:mod:`.build`)."""
