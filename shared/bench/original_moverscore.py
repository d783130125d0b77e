"""Runtime adapter for the original PyPI ``moverscore==1.0.3`` (``moverscore_v2``), offline on CPU.

``moverscore_v2`` loads ``distilbert-base-uncased`` onto ``cuda:0`` at import, uses the removed
``tokenizer.max_len`` and ``np.float``. Without touching any installed file, before the import we:

1. point ``from_pretrained`` of ``transformers.DistilBert{Config,Tokenizer,Model}`` at Auto* loaders
   of the chosen local model folder (restored right after the import); the model wrapper returns the
   DistilBERT output tuple the code expects, and ignores the import-time ``.to('cuda:0')``;
2. give the tokenizer ``max_len = model_max_length``; 3. re-add ``np.float = float``.

The recipe is ``../shared/notes/originals.md`` §8.3 (the one that produced the parity fixtures).
Install the original with ``pip install moverscore==1.0.3 pyemd`` (``movers[bench]``).
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__all__ = ["load_original"]


def load_original(model_path: str) -> ModuleType:
    """Import ``moverscore_v2`` bound to the local model at `model_path`; returns the module."""
    import numpy as np
    import torch
    import transformers

    if "moverscore_v2" in sys.modules:
        return sys.modules["moverscore_v2"]
    if not hasattr(np, "float"):
        np.float = float  # type: ignore[attr-defined]  # removed alias used by word_mover_score

    class _Config:
        @staticmethod
        def from_pretrained(name, **kw):
            return transformers.AutoConfig.from_pretrained(model_path, **kw)

    class _Tokenizer:
        @staticmethod
        def from_pretrained(name, **kw):
            tok = transformers.AutoTokenizer.from_pretrained(model_path, **kw)
            tok.max_len = tok.model_max_length
            return tok

    class _Model(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        @classmethod
        def from_pretrained(cls, name, config=None, **kw):
            return cls(transformers.AutoModel.from_pretrained(model_path, config=config, **kw))

        def to(self, *args, **kwargs):  # the import-time .to('cuda:0')
            return self

        def forward(self, input_ids=None, attention_mask=None, **kw):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                             output_attentions=True)
            return out.last_hidden_state, out.hidden_states, out.attentions

    # The original's `from transformers import *` returns the real DistilBert* classes even when the
    # module attributes are replaced (transformers 5 lazy module), so patch their loaders instead.
    targets: dict[Any, Any] = {transformers.DistilBertConfig: _Config.from_pretrained,
               transformers.DistilBertTokenizer: _Tokenizer.from_pretrained,
               transformers.DistilBertModel: _Model.from_pretrained}
    saved = {cls: cls.__dict__.get("from_pretrained") for cls in targets}
    for cls, loader in targets.items():
        cls.from_pretrained = staticmethod(loader)
    try:
        return importlib.import_module("moverscore_v2")
    finally:
        for cls, original in saved.items():
            if original is None:
                del cls.from_pretrained
            else:
                cls.from_pretrained = original
