"""Tiny language models for the tests, built here: nothing is downloaded. ``build_tiny_lm``: a causal one for the
harness tests, saved in a folder; ``tiny_bart``: a sequence-to-sequence one for the Trainer and Lightning tests.

A 1-layer GPT-2 (16 dimensions, untied output layer, seeded) over a word-level tokenizer whose vocabulary is
the words of the test texts, so that what it generates is real words (greedy decoding: the same words on
every run). lm-eval's and Inspect's ``hf`` providers load it with ``AutoModelForCausalLM`` and
``AutoTokenizer`` from the folder.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path


def words(texts: Iterable[str]) -> list[str]:
    return sorted({w for t in texts for w in re.findall(r"[a-z]+|[^\sa-z]", t.lower())})


def build_tiny_lm(folder: Path, texts: Iterable[str]) -> Path:
    """Save the model and its tokenizer in `folder`; return it."""
    import tokenizers
    import torch
    import transformers
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[EOS]", *words(texts)])}
    backend = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece()  # joins words with spaces, punctuation attached
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]",
                                                     pad_token="[PAD]", eos_token="[EOS]")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=16, n_layer=1, n_head=2,
                                     bos_token_id=2, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_bart(tokenizer):
    """A seeded 1-layer BART (32 dimensions) over `tokenizer`'s vocabulary: [CLS] starts a sequence, [SEP] ends it."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id, decoder_start_token_id=tokenizer.cls_token_id,
        forced_eos_token_id=None)
    return transformers.BartForConditionalGeneration(config)
