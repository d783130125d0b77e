"""Tiny random models of many transformers families, built in the test: nothing is downloaded.

Each family's tokenizer is trained here on the texts a test passes (the ``tokenizers`` library: WordPiece, byte-level
BPE or Unigram, with the family's own special tokens around a text), its model is a seeded 2-layer, 32-wide one of
the family's configuration class, and both are saved in a folder that ``AutoTokenizer`` and ``AutoModel`` load.
:func:`oracle_vectors` reads a text's vectors straight from transformers, as the family is meant to be read (an
encoder-decoder model's encoder hidden states from the whole sequence-to-sequence model), never through movers.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ENCODER, ENCODER_DECODER, DECODER = "encoder-only", "encoder-decoder", "decoder-only"


@dataclass(frozen=True)
class Recipe:
    kind: str            # one of the three families
    tokenizer: str       # "wordpiece", "bpe" (byte-level) or "unigram"; "byt5": ByT5's byte tokenizer
    specials: tuple[str, ...]
    template: str | None  # the special tokens around a text ($A), None: none
    padding_side: str = "right"
    config: str = ""     # the configuration class, where the family is newer than the lowest transformers tested

    @property
    def available(self) -> bool:
        """Whether the installed transformers has the family (ModernBERT arrived in transformers 4.48)."""
        import transformers

        return not self.config or hasattr(transformers, self.config)


_BERT = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
_ROBERTA = ("<s>", "<pad>", "</s>", "<unk>")
_T5 = ("<pad>", "</s>", "<unk>")
_LLAMA = ("<unk>", "<s>", "</s>")

FAMILIES: dict[str, Recipe] = {
    "bert": Recipe(ENCODER, "wordpiece", _BERT, "[CLS] $A [SEP]"),
    "roberta": Recipe(ENCODER, "bpe", _ROBERTA, "<s> $A </s>"),
    "xlm-roberta": Recipe(ENCODER, "unigram", _ROBERTA, "<s> $A </s>"),
    "deberta-v2": Recipe(ENCODER, "unigram", ("[PAD]", "[CLS]", "[SEP]", "[UNK]"), "[CLS] $A [SEP]"),
    "electra": Recipe(ENCODER, "wordpiece", _BERT, "[CLS] $A [SEP]"),
    "modernbert": Recipe(ENCODER, "bpe", _BERT, "[CLS] $A [SEP]", config="ModernBertConfig"),
    "distilbert": Recipe(ENCODER, "wordpiece", _BERT, "[CLS] $A [SEP]"),
    "albert": Recipe(ENCODER, "unigram", _BERT, "[CLS] $A [SEP]"),
    "t5": Recipe(ENCODER_DECODER, "unigram", _T5, "$A </s>"),
    "mt5": Recipe(ENCODER_DECODER, "unigram", _T5, "$A </s>"),
    "byt5": Recipe(ENCODER_DECODER, "byt5", (), None),
    "bart": Recipe(ENCODER_DECODER, "bpe", _ROBERTA, "<s> $A </s>"),
    "mbart": Recipe(ENCODER_DECODER, "unigram", (*_ROBERTA, "en_XX"), "$A </s> en_XX"),
    "pegasus": Recipe(ENCODER_DECODER, "unigram", _T5, "$A </s>"),
    "marian": Recipe(ENCODER_DECODER, "unigram", ("</s>", "<unk>", "<pad>"), "$A </s>"),
    "led": Recipe(ENCODER_DECODER, "bpe", _ROBERTA, "<s> $A </s>"),
    "gpt2": Recipe(DECODER, "bpe", ("<|endoftext|>",), None),
    "llama": Recipe(DECODER, "unigram", _LLAMA, "<s> $A"),
    "qwen2": Recipe(DECODER, "bpe", ("<|endoftext|>",), None, padding_side="left"),
    "mistral": Recipe(DECODER, "unigram", _LLAMA, "<s> $A"),
    "gemma": Recipe(DECODER, "unigram", ("<pad>", "<eos>", "<bos>", "<unk>"), "<bos> $A"),
    "xlnet": Recipe(DECODER, "unigram", ("<unk>", "<s>", "</s>", "<pad>", "<sep>", "<cls>"), "$A <sep> <cls>",
                    padding_side="left"),
}
"""Twenty-two families: eight encoder-only, eight encoder-decoder, six decoder-only; the three tokenizer kinds and
ByT5's bytes. Qwen2's and XLNet's tokenizers pad on the left, as many decoder-only tokenizers do; XLNet's specials
follow the text and its configuration says -1 positions (relative attention, no limit of its own)."""


def train_tokenizer(kind: str, texts: Sequence[str], specials: Sequence[str], template: str | None,
                    vocab_size: int = 500):
    """A ``tokenizers.Tokenizer`` of `kind` trained on `texts`, adding `template`'s special tokens to a text."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    unk = next((s for s in specials if "unk" in s.lower()), None)
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=unk))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(specials))
    elif kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=list(specials), unk_token=unk)
    tok.train_from_iterator(list(texts), trainer=trainer)
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(s, tok.token_to_id(s)) for s in specials if s in template.split()])
    return tok


def _config(name: str, vocab: int, ids: dict[str, int]):
    import transformers as t

    small = {"vocab_size": vocab}
    bert_like = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    if name in ("bert", "electra"):
        extra = {"embedding_size": 16} if name == "electra" else {}
        return (t.BertConfig if name == "bert" else t.ElectraConfig)(
            **bert_like, max_position_embeddings=128, pad_token_id=ids["[PAD]"], **extra, **small)
    if name == "distilbert":
        return t.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128,
                                  pad_token_id=ids["[PAD]"], **small)
    if name in ("roberta", "xlm-roberta"):
        return (t.RobertaConfig if name == "roberta" else t.XLMRobertaConfig)(
            **bert_like, max_position_embeddings=130, pad_token_id=ids["<pad>"], bos_token_id=ids["<s>"],
            eos_token_id=ids["</s>"], **small)
    if name == "albert":
        return t.AlbertConfig(**bert_like, embedding_size=16, max_position_embeddings=128,
                              pad_token_id=ids["[PAD]"], **small)
    if name == "xlnet":
        return t.XLNetConfig(d_model=32, n_layer=2, n_head=2, d_inner=64, pad_token_id=ids["<pad>"],
                             bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], **small)
    if name == "deberta-v2":
        return t.DebertaV2Config(**bert_like, max_position_embeddings=128, pad_token_id=ids["[PAD]"], **small)
    if name == "modernbert":  # the 8,192-token window of the real ones
        return t.ModernBertConfig(**bert_like, max_position_embeddings=8192, pad_token_id=ids["[PAD]"],
                                  bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"], cls_token_id=ids["[CLS]"],
                                  sep_token_id=ids["[SEP]"], global_attn_every_n_layers=2, local_attention=16,
                                  **small)
    if name in ("t5", "mt5", "byt5"):
        return (t.MT5Config if name == "mt5" else t.T5Config)(
            d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2, pad_token_id=ids["<pad>"],
            eos_token_id=ids["</s>"], decoder_start_token_id=ids["<pad>"], **small)
    if name in ("bart", "mbart", "pegasus", "marian", "led"):
        kw = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
              "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "pad_token_id": ids["<pad>"],
              "eos_token_id": ids["</s>"], "decoder_start_token_id": ids.get("<s>", ids["<pad>"]),
              "forced_eos_token_id": None}
        if name == "led":
            kw.update(max_encoder_position_embeddings=256, max_decoder_position_embeddings=256, attention_window=[8, 8])
        else:
            kw.update(max_position_embeddings=128)
        if name == "marian":
            kw.update(decoder_vocab_size=vocab)
        config = {"bart": t.BartConfig, "mbart": t.MBartConfig, "pegasus": t.PegasusConfig, "marian": t.MarianConfig,
                  "led": t.LEDConfig}[name]
        return config(**kw, **small)
    if name == "gpt2":
        return t.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=128, bos_token_id=ids["<|endoftext|>"],
                            eos_token_id=ids["<|endoftext|>"], **small)
    kw = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "num_key_value_heads": 1, "max_position_embeddings": 128}
    if name == "gemma":
        return t.GemmaConfig(**kw, head_dim=16, pad_token_id=ids["<pad>"], bos_token_id=ids["<bos>"],
                             eos_token_id=ids["<eos>"], **small)
    if name == "qwen2":
        return t.Qwen2Config(**kw, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"], **small)
    config = {"llama": t.LlamaConfig, "mistral": t.MistralConfig}[name]
    return config(**kw, bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], **small)


def _roles(recipe: Recipe) -> dict[str, str]:
    """The tokenizer's named special tokens (pad, unk, bos/cls, eos/sep), as the family names them."""
    roles: dict[str, str] = {}
    for s in recipe.specials:
        if "pad" in s.lower():
            roles["pad_token"] = s
        elif "unk" in s.lower():
            roles["unk_token"] = s
        elif s in ("<s>", "<bos>"):
            roles["bos_token"] = s
        elif s in ("[CLS]", "<cls>"):
            roles["cls_token"] = s
        elif s in ("[SEP]", "<sep>"):
            roles["sep_token"] = s
        elif s in ("</s>", "<eos>", "<|endoftext|>"):
            roles["eos_token"] = s
    return roles


def build(name: str, folder: Path, texts: Sequence[str]) -> Path:
    """Family `name`'s tiny model and its tokenizer, trained on `texts`, saved in `folder`."""
    import torch
    import transformers

    recipe = FAMILIES[name]
    if recipe.tokenizer == "byt5":
        tokenizer = transformers.ByT5Tokenizer()
        ids = {"<pad>": tokenizer.pad_token_id, "</s>": tokenizer.eos_token_id}
        vocab = len(tokenizer)
    else:
        backend = train_tokenizer(recipe.tokenizer, texts, recipe.specials, recipe.template)
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, padding_side=recipe.padding_side,
                                                         **_roles(recipe))
        ids = {s: backend.token_to_id(s) for s in recipe.specials}
        vocab = backend.get_vocab_size()
    torch.manual_seed(0)
    config = _config(name, vocab, ids)
    head = transformers.AutoModelForSeq2SeqLM if recipe.kind == ENCODER_DECODER else transformers.AutoModel
    head.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def oracle_vectors(folder: Path, kind: str, text: str, layer: int) -> tuple[list[int], object]:
    """(ids, vectors [n, d] float64 numpy) of `text` alone, straight from transformers: the tokenizer's ids with its
    special tokens, and hidden state `layer` of the family's own forward pass (an encoder-decoder model: the
    whole sequence-to-sequence model run with one decoder token, its ``encoder_hidden_states``)."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    enc = tokenizer(text, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        if kind == ENCODER_DECODER:
            model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
            out = model(**enc, decoder_input_ids=enc["input_ids"][:, :1], output_hidden_states=True)
            states = out.encoder_hidden_states
        else:
            model = transformers.AutoModel.from_pretrained(folder).eval()
            states = model(**enc, output_hidden_states=True).hidden_states
    return enc["input_ids"][0].tolist(), states[layer][0].double().numpy()


def into_hub_cache(folder: Path, repo_id: str, hub_cache: Path | None = None) -> str:
    """Place the model in `folder` in the Hugging Face hub cache (``$HF_HOME/hub`` unless given) as `repo_id`, laid
    out as huggingface_hub lays out a download (``models--org--name/snapshots/<sha>/``, ``refs/main``); returns
    the snapshot's commit hash."""
    import hashlib
    import shutil

    root = Path(hub_cache or Path(os.environ["HF_HOME"]) / "hub") / ("models--" + repo_id.replace("/", "--"))
    sha = hashlib.sha1(repo_id.encode()).hexdigest()
    shutil.copytree(folder, root / "snapshots" / sha, dirs_exist_ok=True)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(sha)
    return sha
