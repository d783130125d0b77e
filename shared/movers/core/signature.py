"""Reproducibility signatures: sacreBLEU's ``key:value|key:value`` format, fields passed explicitly.

Every result carries one string naming every input that can move a number (metric, preset, model and
revision, layer, weights, filters, solver, transform) followed by the library versions. A resource that an
installed package provides is labelled with that package's version (``tok:spacy-en@3.8.18``). Format changes are
in CHANGELOG.md; tests pin the exact strings.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from importlib import metadata

from . import cache

__all__ = ["Signature", "format_signature", "library_versions", "format_float", "nrefs_label", "package_version",
           "LIBRARIES", "SACREBLEU_VERSION_KEY", "library_versions_in", "without_library_versions"]

LIBRARIES = {"transformers": "tf", "torch": "torch", "pot": "pot", "sacrebleu": "sacrebleu", "nltk": "nltk"}
"""The libraries a signature can name after movers' own version (``v``), by distribution: the key of the version
(sacreBLEU's and bert_score's short names)."""
SACREBLEU_VERSION_KEY = "version"
"""The key of sacreBLEU's version in sacreBLEU's own signatures (``sacrebleu.sentence_chrf|version:2.6.0``: how
``movers correlate`` names its sentence-level baselines)."""

Field = tuple[str, object]


class Signature(str):
    """A metric's reproducibility signature: its name, the ordered ``(key, value)`` fields that can move a
    number, and the library versions, as an object. It *is* its rendering (a ``str``: compare it, print it,
    put it in JSON), made once from the fields; every change goes through the fields (:meth:`add`,
    :meth:`set`, :meth:`without`) and a new rendering, never by editing or parsing the text.

        >>> sig = Signature("MoverScore", (("preset", "1.0.3"), ("nrefs", 1)), (("v", "0.1.0"),))
        >>> sig.add(("empty", "worst"))
        'MoverScore|preset:1.0.3|nrefs:1|empty:worst|v:0.1.0'
        >>> sig.get("nrefs"), sig.set("nrefs", "var")
        (1, 'MoverScore|preset:1.0.3|nrefs:var|v:0.1.0')
    """

    name: str
    fields: tuple[Field, ...]
    versions: tuple[Field, ...]

    def __new__(cls, name: str, fields: Iterable[Field], versions: Iterable[Field] = ()) -> Signature:
        fields, versions = tuple(fields), tuple(versions)
        self = super().__new__(cls, format_signature(name, [*fields, *versions]))
        self.name, self.fields, self.versions = name, fields, versions
        return self

    def __getnewargs__(self) -> tuple[str, tuple[Field, ...], tuple[Field, ...]]:  # type: ignore[override]
        return self.name, self.fields, self.versions

    def __repr__(self) -> str:
        return str.__repr__(self)

    def add(self, *fields: Field) -> Signature:
        """The signature with `fields` appended after the existing ones (before the versions)."""
        return Signature(self.name, (*self.fields, *fields), self.versions)

    def set(self, key: str, value: object) -> Signature:
        """The signature with field `key` set to `value` (it must exist)."""
        if key not in dict(self.fields):
            raise KeyError(f"signature: no field {key!r} in {self.name}.")
        return Signature(self.name, tuple((k, value if k == key else v) for k, v in self.fields), self.versions)

    def without(self, *keys: str) -> Signature:
        """The signature without the fields `keys`."""
        return Signature(self.name, tuple((k, v) for k, v in self.fields if k not in keys), self.versions)

    def get(self, key: str, default: object = None) -> object:
        """The value of field `key` (`default` if absent)."""
        return dict(self.fields).get(key, default)

    def settings(self, exclude: Iterable[str] = (), strip_versions: Iterable[str] = ()) -> str:
        """The rendered name and fields without the versions and without the `exclude` keys; the fields in
        `strip_versions` lose an ``@version`` suffix (what a shipped baseline is matched against)."""
        skip, strip = set(exclude), set(strip_versions)
        kept = [(k, str(v).split("@", 1)[0] if k in strip else v) for k, v in self.fields if k not in skip]
        return format_signature(self.name, kept)


def format_float(x: float) -> str:
    """Floats in signatures use ``format(x, "g")`` so that 0.1 reads ``0.1`` and 1e-9 reads ``1e-09``."""
    return format(float(x), "g")


def nrefs_label(references: Sequence[Sequence[object]]) -> int | str:
    """The ``nrefs`` field: references per segment, or ``"var"`` when the lists are ragged (sacreBLEU).

    >>> nrefs_label([["a"], ["b"]]), nrefs_label([["a"], ["b", "c"]])
    (1, 'var')
    """
    counts = {len(group) for group in references}
    return counts.pop() if len(counts) == 1 else "var"


def format_signature(name: str, fields: Sequence[tuple[str, object]]) -> str:
    """Join ordered (key, value) pairs as ``Name|k:v|k:v``; bools become yes/no; None is an error.

    >>> format_signature("MoverScore", [("nrefs", 1), ("idf", True), ("p", 0.5)])
    'MoverScore|nrefs:1|idf:yes|p:0.5'
    """
    parts = [name]
    for key, value in fields:
        if value is None:
            raise ValueError(f"signature: field `{key}` is None; every field must be resolved.")
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, float):
            text = format_float(value)
        else:
            text = str(value)
        if "|" in text or "|" in key:
            raise ValueError(f"signature: field `{key}` must not contain '|', got {text!r}.")
        parts.append(f"{key}:{text}")
    return "|".join(parts)


def package_version(dist: str) -> str:
    """The installed version of distribution `dist`, or ``"none"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def library_versions(*dists: str) -> tuple[tuple[str, str], ...]:
    """Versions for the signature tail: movers first (``v``), then the named distributions of :data:`LIBRARIES`
    under their keys (``tf`` for transformers, ``torch``, ``pot``, ...)."""
    unknown = [dist for dist in dists if dist not in LIBRARIES]
    if unknown:
        raise ValueError(f"signature: library {unknown[0]!r} has no key; name one of {sorted(LIBRARIES)}.")
    return cache.cached(("versions", dists), lambda: (("v", package_version("movers")), *(
        (LIBRARIES[dist], package_version(dist)) for dist in dists)))


_LIBRARY_VERSION = re.compile(
    r"(?<=\|)(?:(?P<key>{keys}):|[\w-]+:(?P<label>[^|\s\"'@:]+)@)(?P<version>[^|\s\"',)]+)".format(
        keys="|".join(sorted({*LIBRARIES.values(), SACREBLEU_VERSION_KEY}, key=len, reverse=True))))


def _library_versions_in(text: str) -> list[re.Match[str]]:
    from packaging.version import InvalidVersion, Version

    found = []
    for m in _LIBRARY_VERSION.finditer(text):
        try:
            Version(m.group("version"))
        except InvalidVersion:
            continue  # not a release: "none" (not installed), "local", a model revision
        if m.group("key") or "." in m.group("version"):  # a revision of seven digits parses as a version
            found.append(m)
    return found


def library_versions_in(text: str) -> list[tuple[str, str]]:
    """``(name, version)`` of every other library's version that a signature in `text` names: the key of the tail
    (:data:`LIBRARIES`) or of sacreBLEU's own signature (:data:`SACREBLEU_VERSION_KEY`), or the label of a resource
    that a package provides (``tok:spacy-en@3.8.18``: ``spacy-en``). movers' own ``v``, every setting and a model's
    revision (``@<sha7>``, ``@local``) are not among them, nor a version that is not a release (``pot:none``).

        >>> library_versions_in("X|tok:spacy-en@3.8.18|model:bert@86b5e09|v:0.1.0|tf:5.25.0|torch:2.13.0+cpu")
        [('spacy-en', '3.8.18'), ('tf', '5.25.0'), ('torch', '2.13.0+cpu')]
    """
    return [(m.group("key") or m.group("label"), m.group("version")) for m in _library_versions_in(text)]


def without_library_versions(text: str) -> str:
    """`text` with each version :func:`library_versions_in` finds written ``*``: what two installs of the same
    movers share when a dependency has had a release in between (the docs' tests compare printed output so).

        >>> without_library_versions("X|tok:spacy-en@3.8.18|model:bert@86b5e09|v:0.1.0|tf:5.25.0|torch:2.13.0+cpu")
        'X|tok:spacy-en@*|model:bert@86b5e09|v:0.1.0|tf:*|torch:*'
    """
    out, end = [], 0
    for m in _library_versions_in(text):
        out += [text[end:m.start("version")], "*"]
        end = m.end("version")
    return "".join(out) + text[end:]
