"""Token filters: subword pieces, punctuation and stop words (lists shipped as package data).

NLTK's stop-word corpus needs a download that does not work offline, so the English list is shipped:
``data/stopwords_en_153.txt`` is the 153-word NLTK English list used by MoverScore's summarisation
setup (AIPHES/emnlp19-moverscore ``examples/stopwords.txt``) and by the SMS fixtures.
"""
from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from importlib import resources

from ..core import cache as _cache
from ..core.signature import package_version

__all__ = ["stopwords", "spacy_stopwords", "PUNCTUATION", "is_subword", "subword_mask", "resolve_stopwords"]

PUNCTUATION = frozenset(string.punctuation)
"""Single ASCII punctuation characters (``string.punctuation``), as MoverScore filters them."""


def stopwords(name: str = "en") -> frozenset[str]:
    """The shipped stop-word list `name` (``"en"``: 153 lower-case English words)."""
    files = {"en": "stopwords_en_153.txt"}
    if name not in files:
        raise ValueError(f"stopwords: unknown list {name!r}; choose one of {sorted(files)}.")

    def read() -> frozenset[str]:
        text = resources.files("movers").joinpath("data").joinpath(files[name]).read_text(encoding="utf-8")
        return frozenset(w.strip() for w in text.splitlines() if w.strip())

    return _cache.cached(("stopwords", name), read)


def resolve_stopwords(spec: bool | str | Iterable[str] | None, lang: str = "en") -> tuple[frozenset[str], str]:
    """Turn a user stop-word option into (set, signature label).

    None/False -> no stop words; True -> the list of `lang`; "en" -> the shipped English list (153 NLTK words);
    another language code -> spaCy's list for it (label ``spacy-de@3.8.18``); an iterable -> those words.
    """
    if spec is None or spec is False:
        return frozenset(), "none"
    if spec is True:
        spec = lang
    if isinstance(spec, str) and spec != "en":
        from .languages import languages

        if spec not in languages():
            raise ValueError(f"stop_words: unknown list {spec!r}; pass True (the list of `lang`), a language code "
                             f"({', '.join(languages())}) or your own words.")
        return spacy_stopwords(spec), f"spacy-{spec}@{package_version('spacy')}"
    if isinstance(spec, str):
        return stopwords(spec), spec
    words = frozenset(str(w) for w in spec)
    return words, f"custom{len(words)}"


def spacy_stopwords(lang: str) -> frozenset[str]:
    """spaCy's stop-word list for `lang` (no tokenizer is made, so no extra package is needed)."""
    def read() -> frozenset[str]:
        import spacy.util

        return frozenset(spacy.util.get_lang_class(lang).Defaults.stop_words)

    return _cache.cached(("stopwords", "spacy", lang), read)


_MARKERS = ("Ġ", "▁")


def subword_mask(tokens: Sequence[str]) -> list[bool]:
    """:func:`is_subword` for every position of `tokens`, in one pass (O(L))."""
    marked = any(t.startswith(_MARKERS) for t in tokens)
    return [_is_subword(token, position, marked) for position, token in enumerate(tokens)]


def is_subword(token: str, position: int, tokens: Sequence[str]) -> bool:
    """True for a continuation piece: WordPiece ``##x`` (MoverScore tests ``'##' in token``),
    or a BPE / SentencePiece piece without its word-start marker (``Ġ``/``▁``) after the first token.

    One call scans `tokens` for word-start markers (O(L)); for every position of a text use
    :func:`subword_mask`, which scans once (O(L) in all, not O(L²)).
    """
    return _is_subword(token, position, any(t.startswith(_MARKERS) for t in tokens))


def _is_subword(token: str, position: int, marked: bool) -> bool:
    if "##" in token:
        return True
    if marked:
        return position > 1 and not token.startswith(_MARKERS) and token not in PUNCTUATION
    return False
