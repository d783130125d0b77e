"""Every family of encoder a user can name, read as the family is meant to be read, against an oracle that reads the
same models straight from transformers (tests/support/tiny_models.py), never through movers.

Twenty tiny random models (seven encoder-only, eight encoder-decoder, five decoder-only; WordPiece, byte-level BPE,
Unigram and ByT5 tokenizers trained here): movers' vectors equal the family's own hidden states (an encoder-decoder
model's encoder states) to float32 rounding; MoverScore over every token equals the formula computed from those
states with POT; every OT metric and ``explain`` run on each. A model that is none of these is refused naming
`model` before any scoring, with nothing left behind.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import ot
import pytest

import movers
from movers.core import cache as loaded
from movers.text.families import DECODER_ONLY, ENCODER_DECODER, ENCODER_ONLY
from movers.text.languages import language, languages

from .helpers import real_pairs
from .support.tiny_models import ENCODER, FAMILIES, build, oracle_vectors

NAMES = [name for name, recipe in FAMILIES.items() if recipe.available]

ATOL_VECTORS = 1e-5  # float32 rounding: another batch, other padding and kernels
TEXTS = ["The cat sat on the mat, happily.", "A cat was sitting on the mat.", "Dogs bark!",
         "He went to the store to buy milk, bread and a newspaper before the rain began."]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Each family's folder, built once: tokenizers trained on 400 real texts of the fixtures."""
    hyps, refs = real_pairs("wmt15_16")
    corpus = hyps + refs
    root = tmp_path_factory.mktemp("families")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folders = {name: build(name, root / name, corpus) for name in NAMES}
    yield folders
    movers.clear_encoder_cache()


def test_the_matrix_covers_the_three_families_and_the_tokenizer_kinds():
    kinds = [r.kind for r in FAMILIES.values()]
    assert len(FAMILIES) >= 10
    assert {kinds.count(k) >= 3 for k in set(kinds)} == {True} and len(set(kinds)) == 3
    assert {r.tokenizer for r in FAMILIES.values()} >= {"wordpiece", "bpe", "unigram"}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layer", [-1, 1])
def test_vectors_are_the_familys_own_hidden_states(models, name, layer):
    """Texts of different lengths batched together (padding, for a decoder-only model on the right whatever its
    tokenizer's padding side) give each text the vectors of that text alone, at the asked hidden state."""
    kind = FAMILIES[name].kind
    encoder = movers.load_encoder(str(models[name]), layer=layer, device="cpu")
    assert encoder.family is {ENCODER: ENCODER_ONLY, "encoder-decoder": ENCODER_DECODER,
                              "decoder-only": DECODER_ONLY}[kind]
    got = encoder.embed(TEXTS, batch_size=4)
    for k, text in enumerate(TEXTS):
        ids, want = oracle_vectors(models[name], kind, text, layer)
        assert got.ids[k] == ids, (name, text)
        np.testing.assert_allclose(got.vectors[k].double().numpy(), want, rtol=0, atol=ATOL_VECTORS,
                                   err_msg=f"{name}, layer {layer}: {text!r}")


def _oracle_moverscore(folder, kind, prediction, reference):
    """MoverScore's formula over every token (uniform masses, Euclidean cost between unit vectors, 1 - EMD), from
    the family's own last hidden states, solved by POT."""
    a = oracle_vectors(folder, kind, prediction, -1)[1]
    b = oracle_vectors(folder, kind, reference, -1)[1]
    a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
    cost = np.sqrt(np.maximum(((a[:, None] - b[None]) ** 2).sum(-1), 0))
    return 1 - ot.emd2(np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b)), cost)


@pytest.mark.parametrize("name", NAMES)
def test_moverscore_equals_the_formula_on_the_familys_states(models, name):
    kind = FAMILIES[name].kind
    out = movers.moverscore(TEXTS[:2], TEXTS[2:], model=str(models[name]), remove_subwords=False,
                            remove_punctuation=False)
    for k in range(2):
        assert out.scores[k] == pytest.approx(_oracle_moverscore(models[name], kind, TEXTS[k], TEXTS[k + 2]),
                                              abs=ATOL_VECTORS)
    label = out.signature.get("model")
    assert label == f"{name}@local[encoder]" if kind == "encoder-decoder" else label == f"{name}@local"


@pytest.mark.parametrize("name", NAMES)
def test_every_ot_metric_and_explain_run_on_each_family(models, name):
    folder = str(models[name])
    reading = "[encoder]" if FAMILIES[name].kind == "encoder-decoder" else ""
    hyps, refs = TEXTS[:2], TEXTS[2:]
    for slug, options in (("twmd", {"model": folder, "centering": "none"}), ("lazy_emd", {"model": folder}),
                          ("sms", {"embedding": folder}), ("s_wms", {"embedding": folder})):
        out = getattr(movers, slug)(hyps, refs, **options)
        assert all(math.isfinite(s) for s in out.scores), (slug, out.scores)
        field = "emb" if slug in ("sms", "s_wms") else "model"
        assert out.signature.get(field) == f"{name}@local{reading}", (slug, str(out.signature))
    # a text against itself: the best score the metric has, whatever the family
    same = movers.moverscore([TEXTS[3]], [TEXTS[3]], model=folder)
    assert same.scores == [1.0]
    for slug in ("moverscore", "twmd", "lazy_emd"):
        plan = movers.explain(slug, TEXTS[0], TEXTS[1], model=folder)
        assert plan.plan.shape == (len(plan.prediction_labels), len(plan.reference_labels))
        assert plan.plan.sum() > 0 and math.isfinite(plan.score)


def test_the_encoder_of_an_encoder_decoder_model_is_all_that_is_kept(models):
    """The decoder never runs and is not kept; T5-style models load the encoder's weights only."""
    for name in ("t5", "bart"):
        encoder = movers.load_encoder(str(models[name]), device="cpu")
        module = encoder.backbone.model
        names = [n for n, _ in module.named_parameters()]
        assert names and not any("decoder" in n for n in names), name


def test_modernbert_reads_its_8192_token_window(models):
    if "modernbert" not in models:
        pytest.skip("ModernBERT needs transformers 4.48 or newer")
    encoder = movers.load_encoder(str(models["modernbert"]), device="cpu")
    assert encoder.backbone.window == 8192
    assert encoder.span == 8190  # [CLS] and [SEP] take two positions


def test_a_large_vocabulary_is_read_once_per_tokenizer(tmp_path, monkeypatch):
    """A decoder-only model with a 150,000-token vocabulary: the tokenizer's tables are made once for two calls."""
    import tokenizers
    import torch
    import transformers

    from movers.text import tokens

    words = [f"w{k}" for k in range(150_000)]
    vocab = {w: i for i, w in enumerate(["<|endoftext|>", "[UNK]", *words])}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]",
                                         eos_token="<|endoftext|>").save_pretrained(tmp_path)
    torch.manual_seed(0)
    transformers.GPT2Model(transformers.GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=1, n_head=2,
                                                   n_positions=64)).save_pretrained(tmp_path)
    made = []
    of = tokens.Vocabulary.of.__func__
    monkeypatch.setattr(tokens.Vocabulary, "of", classmethod(lambda cls, t: made.append(1) or of(cls, t)))
    for _ in range(2):
        movers.moverscore(["w1 w2 w3", "w7 w8"], ["w2 w3 w4", "w9 w8"], model=str(tmp_path))
    assert len(made) == 1
    movers.clear_encoder_cache()


def test_a_model_that_is_no_text_encoder_is_refused_before_scoring_leaving_nothing(models, tmp_path):
    import shutil

    import transformers

    vit, whisper, bare, remote = (tmp_path / n for n in ("vit", "whisper", "bare", "remote"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.ViTModel(transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                     intermediate_size=64, image_size=32, patch_size=8)
                              ).save_pretrained(vit)
        transformers.WhisperModel(transformers.WhisperConfig(
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=600, pad_token_id=0, bos_token_id=0, eos_token_id=0,
            decoder_start_token_id=0)).save_pretrained(whisper)
    for f in models["gpt2"].iterdir():  # a tokenizer beside the speech model
        if "token" in f.name:
            shutil.copy(f, whisper)
    shutil.copytree(models["bert"], bare, ignore=shutil.ignore_patterns("*token*", "vocab*"))
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"model_type": "movers_secret", "auto_map": {
        "AutoConfig": "configuration_secret.SecretConfig", "AutoModel": "modeling_secret.SecretModel"}}))
    cache = tmp_path / "embedding-cache"
    languages(), language("en")  # the supported codes and English's rules, read once per process (a call reads them)
    for folder, why in ((vit, "is a vit model"), (whisper, "is a whisper model"), (bare, "has no tokenizer"),
                        (remote, "needs code of its own")):
        before = set(loaded._CACHE)
        for slug, option in (("moverscore", "model"), ("twmd", "model"), ("sms", "embedding")):
            with pytest.raises(ValueError) as err:
                getattr(movers, slug)(["A cat."], ["The cat."], cache=str(cache), **{option: str(folder)})
            message = str(err.value)
            assert "`model` (SMS: `embedding`)" in message and why in message, message
            assert "encoder-decoder (T5" in message and "decoder-only (GPT-2" in message  # what works
        assert set(loaded._CACHE) == before, folder.name
        assert not cache.exists() or not any(cache.rglob("*.npy"))


def test_a_checkpoint_missing_weights_the_reading_uses_is_named(models, tmp_path):
    """A BERT saved without one attention weight and without its pooler: the first is random in the reading, so a
    warning names it; the pooler's output is never read, so it is not named."""
    import shutil

    import transformers

    model = transformers.AutoModel.from_pretrained(models["bert"])
    gone = "encoder.layer.0.attention.self.query.weight"
    state = {k: v for k, v in model.state_dict().items() if k != gone and not k.startswith("pooler.")}
    model.save_pretrained(tmp_path, state_dict=state)
    for f in models["bert"].iterdir():
        if "token" in f.name or f.name.startswith("vocab"):
            shutil.copy(f, tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"has no weights for 1 parameters the reading uses \({gone}\)"):
        movers.moverscore(["A cat."], ["The cat."], model=str(tmp_path))
    movers.clear_encoder_cache()


def test_the_pages_table_of_families_is_the_matrix():
    """docs/encoders-and-languages.md lists each family this file tests, with its kind and tokenizer, and no other."""
    from .helpers import REPO

    page = (REPO / "docs" / "encoders-and-languages.md").read_text(encoding="utf-8")
    table = page[page.index("| model type | family | tokenizer |"):].split("\n\n", 1)[0].splitlines()[2:]
    rows = {cells[0].strip("`"): cells[1:3] for cells in ([c.strip() for c in r.strip("|").split("|")] for r in table)}
    tokenizers = {"wordpiece": "WordPiece", "bpe": "byte-level BPE", "unigram": "Unigram", "byt5": "bytes"}
    assert list(rows) == list(FAMILIES)
    for name, recipe in FAMILIES.items():
        kind, tokenizer = rows[name]
        assert kind == recipe.kind and tokenizer.startswith(tokenizers[recipe.tokenizer]), (name, rows[name])


def test_a_model_folder_that_does_not_hold_together_is_refused_naming_model_leaving_nothing(models, tmp_path,
                                                                                             monkeypatch):
    """A tokenizer with more ids than the embedding table (torch's IndexError otherwise), weights shaped otherwise
    than config.json says (transformers' ignore_mismatched_sizes error), symbolic link loops (pathlib's RuntimeError
    while the message was built; a relative one was taken for a hub id) and a `model` that is no str or path: each
    refused naming `model` and the mismatch, before any score, with nothing of it left in the cache; a good model
    scores as before afterwards."""
    import os
    import shutil

    import transformers

    good = str(models["bert"])
    texts = (["A cat sat."], ["The cat sat."])
    first = {slug: getattr(movers, slug)(*texts, **{option: good}).scores
             for slug, option in (("moverscore", "model"), ("twmd", "model"), ("sms", "embedding"))}
    small, wide = tmp_path / "small-table", tmp_path / "wide-config"
    config = transformers.AutoConfig.from_pretrained(good)
    config.vocab_size = 50  # the tokenizer has ~500 ids
    transformers.AutoModel.from_config(config).save_pretrained(small)
    shutil.copytree(models["bert"], wide)
    for f in models["bert"].iterdir():
        if "token" in f.name or f.name.startswith("vocab"):
            shutil.copy(f, small)
    settings = json.loads((wide / "config.json").read_text())
    (wide / "config.json").write_text(json.dumps({**settings, "hidden_size": 64}))
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    os.symlink("relative-loop", "relative-loop")
    cache = tmp_path / "embedding-cache"
    before = set(loaded._CACHE)
    for model, why in ((small, r"has a tokenizer of \d+ token ids but an embedding table of 50 rows"),
                       (wide, r"has weights that do not fit its config.json: \d+ tensors differ in shape \(.*\[32\] in "
                              r"the checkpoint, \[64\] by config.json"),
                       (tmp_path / "loop", "is not a folder \\(a symbolic link loop"),
                       (str(tmp_path / "loop"), "is not a folder \\(a symbolic link loop"),
                       ("relative-loop", "is not a folder \\(a symbolic link loop")):
        for slug, option in (("moverscore", "model"), ("twmd", "model"), ("sms", "embedding")):
            with pytest.raises(ValueError, match=r"`model` \(SMS: `embedding`\) '.*' " + why):
                getattr(movers, slug)(*texts, cache=str(cache), **{option: str(model) if slug == "sms" else model})
        assert set(loaded._CACHE) == before, model
        assert not cache.exists() or not any(cache.rglob("*.npy"))
    for slug in ("moverscore", "twmd", "lazy_emd"):
        with pytest.raises(TypeError, match=r"`model` \(SMS: `embedding`\) must be a Hugging Face model id or a "
                                            r"local folder \(str or path\), got int 5"):
            getattr(movers, slug)(*texts, model=5)
    with pytest.raises(TypeError, match="`model`.*got int 5"):
        movers.load_encoder(5)
    assert set(loaded._CACHE) == before
    for slug, option in (("moverscore", "model"), ("twmd", "model"), ("sms", "embedding")):
        assert getattr(movers, slug)(*texts, **{option: good}).scores == first[slug]


def test_a_damaged_weights_file_is_refused_naming_model_leaving_nothing(models, tmp_path):
    """A weights file cut short, empty, or not a checkpoint fails inside safetensors or torch's unpickler with their
    own exception types (SafetensorError, KeyError, ...): each is refused as an OSError naming `model` and the file,
    nothing of it is left in the cache, and the intact folder scores as before afterwards."""
    import shutil

    good = models["bert"]
    texts = (["A cat sat."], ["The cat sat."])
    first = movers.moverscore(*texts, model=str(good)).scores
    weights = (good / "model.safetensors").read_bytes()
    damaged = {"cut-short": ("model.safetensors", weights[: len(weights) * 9 // 10]),
               "empty": ("model.safetensors", b""),
               "not-a-checkpoint": ("pytorch_model.bin", b"junk\n")}
    before = set(loaded._CACHE)
    for name, (file, content) in damaged.items():
        folder = tmp_path / name
        shutil.copytree(good, folder, ignore=shutil.ignore_patterns("model.safetensors"))
        (folder / file).write_bytes(content)
        for slug, option in (("moverscore", "model"), ("sms", "embedding")):
            with pytest.raises(OSError, match=r"`model` \(SMS: `embedding`\) '.*" + name + r"': its weights file "
                                              r"could not be read \(\w+: .*\): it is damaged or incomplete"):
                getattr(movers, slug)(*texts, **{option: str(folder)})
        assert set(loaded._CACHE) == before, name
    assert movers.moverscore(*texts, model=str(good)).scores == first


def test_tokenizers_without_an_unknown_token_never_warn_and_a_wordpiece_one_does(models):
    """ByT5 reads bytes and byte-level BPE (GPT-2's, without an unknown token of its own; RoBERTa's, whose <unk> no
    byte reaches) has an id for every character: Japanese text is read, never [UNK], so no warning and zero counts,
    and two different texts do not score as one. The WordPiece tokenizer trained here on English texts lacks these
    characters: it warns (the control)."""
    texts = (["The cat: 今日は嬉しい。"], ["The cat: 今日は楽しい。"])
    for name in ("byt5", "gpt2", "roberta", "bert"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = movers.moverscore(*texts, model=str(models[name]), remove_subwords=False)
        unknown = [str(w.message) for w in caught if "unknown token" in str(w.message)]
        if name == "bert":
            assert len(unknown) == 1 and out.extra["unknown_tokens"][0] > 0, unknown
        else:
            assert unknown == [] and out.extra["unknown_tokens"] == [0], (name, unknown)
            assert out.scores[0] < 1.0, name


def test_the_download_advice_names_a_program_this_environment_installs(monkeypatch):
    """A message about a model missing from the Hugging Face cache names the download command of the installed
    huggingface-hub (``hf download``; ``huggingface-cli download`` before it had ``hf``): a program it declares,
    installed beside this Python. The pages name no other."""
    import re
    import shutil
    import sys
    from importlib.metadata import distribution
    from pathlib import Path

    from movers.text.models import download_command, hub_problem

    from .helpers import REPO

    command = download_command("org/never-downloaded")
    program = command.split()[0]
    declared = {e.name for e in distribution("huggingface_hub").entry_points if e.group == "console_scripts"}
    assert program in declared and command == f"{program} download org/never-downloaded"
    assert shutil.which(program, path=str(Path(sys.executable).parent)), program
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert f"(`{command}`, those variables unset)" in hub_problem("org/never-downloaded")
    pages = [REPO / "README.md", *(REPO / "cards").glob("*.md"), *(REPO / "docs").rglob("*.md")]
    named = {found for page in pages for found in re.findall(r"\b(hf|huggingface-cli) download\b",
                                                             page.read_text(encoding="utf-8"))}
    assert named <= {program}, named
