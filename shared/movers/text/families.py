"""How a model of each family is read: which module runs, what the signature says of it, how many positions one
forward pass has and which special tokens the tokenizer puts around a text.

Declared once here; :mod:`movers.text.models` loads a model by these rules and no metric knows a model's family.
Nothing here imports torch; transformers only where a configuration is classified.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Family", "FAMILIES", "ENCODER_ONLY", "ENCODER_DECODER", "DECODER_ONLY", "model_family", "what_works",
           "window", "special_layout"]


@dataclass(frozen=True)
class Family:
    """How the models of one family are read: the module that runs, and what the signature says of it.

    Declared once here, where models are loaded; no metric knows a model's family."""

    name: str
    examples: str
    reading: str | None = None
    """The signature's note on the model when the reading is not the model's own forward pass (``[encoder]``)."""


ENCODER_ONLY = Family("encoder-only", "BERT, RoBERTa, XLM-R, DeBERTa-v2/v3, ELECTRA, ModernBERT, ...")
"""Read as they are: the model's hidden states."""
ENCODER_DECODER = Family("encoder-decoder", "T5, mT5, ByT5, BART, mBART, Pegasus, Marian, LED, ...", "encoder")
"""Read through the encoder stack alone, as bert-score reads them: `layer` indexes the encoder's hidden states, the
decoder never runs (its weights are not kept: T5-style models load the encoder's weights only)."""
DECODER_ONLY = Family("decoder-only", "GPT-2, Llama, Qwen2, Mistral, Gemma, ...")
"""Read as they are: the base model's hidden states over the text (causal attention; a text is padded on the right
under a mask, so its vectors are those of the text alone, whatever the tokenizer's padding side; no pad token is
needed)."""
FAMILIES = (ENCODER_ONLY, ENCODER_DECODER, DECODER_ONLY)

_POSITION_OFFSET = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "data2vec-text", "ibert",
                    "roberta-prelayernorm", "mpnet")
"""Model types whose position ids start at padding_idx + 1 (RoBERTa-style): two positions fewer than their
``max_position_embeddings`` are usable."""


def model_family(config: Any) -> Family | None:
    """The family a model's configuration belongs to, from transformers' own task mappings (an encoder-decoder text
    model: a sequence-to-sequence language model; an encoder-only one: a masked language model; a decoder-only one:
    a causal language model); None for anything else (vision, speech, a configuration transformers does not
    know)."""
    from transformers.models.auto import modeling_auto as auto

    kind = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        return ENCODER_DECODER if kind in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES else None
    if kind in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return ENCODER_ONLY
    if kind in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return DECODER_ONLY
    return None


def what_works() -> str:
    """The families movers reads, with examples: the end of a refusal's advice."""
    return "; ".join(f"{f.name} ({f.examples})" for f in FAMILIES)


def window(config: Any, tokenizer: Any, family: Family) -> int:
    """Tokens per forward pass, special tokens included: the positions the model (its encoder, for an
    encoder-decoder one) has, else the tokenizer's maximum length, else 512 (relative positions, as T5's)."""
    limit = None
    if family is ENCODER_DECODER:
        limit = getattr(config, "max_encoder_position_embeddings", None)
    limit = limit or getattr(config, "max_position_embeddings", None)
    limit = limit if isinstance(limit, int) and limit > 0 else None  # XLNet says -1: no limit of its own
    if limit and getattr(config, "model_type", "") in _POSITION_OFFSET:
        limit -= 2  # RoBERTa-style position ids start at padding_idx + 1
    told = int(tokenizer.model_max_length) if tokenizer.model_max_length < 1e6 else None
    return min(x for x in (limit, told) if x) if limit or told else 512


def special_layout(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The special ids the tokenizer adds before and after a text (found by encoding a probe)."""
    probe: Sequence[int] = tokenizer("movers", add_special_tokens=False)["input_ids"]
    full: Sequence[int] = tokenizer("movers", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(probe) + 1):
        if list(full[start:start + len(probe)]) == list(probe):
            return tuple(full[:start]), tuple(full[start + len(probe):])
    raise ValueError(f"Encoder: cannot locate the text among the special tokens of {type(tokenizer).__name__}.")
