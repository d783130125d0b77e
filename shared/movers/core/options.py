"""Options as declarations: one frozen dataclass per metric, each field declared once with its documentation.

A metric's options dataclass is the single source of its keyword arguments: the core function's signature
and docstring, the evaluate module's ``_compute`` signature and argument docs, the card's option table,
the Space widgets and ``movers score --opt`` typing are all read from it. A field is declared with
:func:`option`::

    layer: int | None = option(None, "hidden_states index; None = the preset's", integer=True)

Choices come from ``Literal`` annotations; numeric bounds from the keyword arguments of :func:`option`.
:func:`check_options` applies both with movers' message format (``"<metric>: `<arg>` must be ..."``).
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from .validation import check_choice, check_number, short_repr

__all__ = ["option", "OptionInfo", "OptionField", "Widget", "option_fields", "check_options", "choices_of",
           "type_text", "scalar_kind"]


@dataclass(frozen=True)
class Widget:
    """How a Space page shows an option: `kind` in radio / dropdown / checkbox / number / text; `values`
    maps what the page shows to the keyword argument (e.g. ``{"(preset)": None}``); `choices` what it offers.
    """

    kind: str
    choices: tuple[Any, ...] = ()
    values: Mapping[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OptionInfo:
    """What a field's annotation and default do not say: its documentation and its bounds.

    `runtime` options never change a number beyond float32 rounding (batch size, device, progress, returning
    plans, the embedding cache; :data:`movers.core.result.REGROUPING_ATOL`): they are not in the signature, not
    on a Space page. `widget` overrides the widget derived from the type;
    ``False`` shows none. `cli` False keeps an option out of ``movers score --opt`` (Python objects).
    """

    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    integer: bool = False
    runtime: bool = False
    widget: Widget | bool | None = None
    cli: bool = True
    checked: bool = True
    """False: the metric checks the value itself (e.g. a strength in [0, inf], where inf is meaningful)."""

    @property
    def short(self) -> str:
        """The first sentence of `doc` (widget captions, one-line help)."""
        head = self.doc.split(". ")[0].split("; ")[0]
        return head.rstrip(".")


def option(default: Any, doc: str, **info: Any) -> Any:
    """A dataclass field with a default and its :class:`OptionInfo` (doc, bounds, runtime, widget)."""
    return field(default=default, metadata={"movers": OptionInfo(" ".join(doc.split()), **info)})


@dataclass(frozen=True)
class OptionField:
    """One option as the surfaces read it: name, default, resolved type hint, info."""

    name: str
    default: Any
    hint: Any
    info: OptionInfo


_FIELDS: dict[type, tuple[OptionField, ...]] = {}


def option_fields(cls: type) -> tuple[OptionField, ...]:
    """The options of dataclass `cls` in declaration order (fields without :func:`option` are not options)."""
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[cls] = tuple(OptionField(f.name, f.default, hints[f.name], f.metadata["movers"])
                             for f in dataclasses.fields(cls) if "movers" in f.metadata)
    return _FIELDS[cls]


def _members(hint: Any) -> tuple[Any, ...]:
    """The members of a Union (``X | Y``), or the hint itself."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def choices_of(hint: Any) -> tuple[Any, ...] | None:
    """The ``Literal`` values a hint allows (None is not listed), or None when it has no Literal."""
    values = [v for m in _members(hint) if typing.get_origin(m) is Literal for v in typing.get_args(m)]
    return tuple(values) if values else None


def scalar_kind(hint: Any) -> str:
    """'str' for text-only options (str, Literal of str, paths; None allowed), 'int', 'float' or 'bool'
    for plain scalars, else 'any' (a JSON literal on the command line)."""
    members = [m for m in _members(hint) if m is not type(None)]
    if members and all(m is str or (typing.get_origin(m) is Literal and all(isinstance(v, str) for v in
                                                                           typing.get_args(m)))
                       or getattr(m, "__name__", "") == "PathLike" for m in members):
        return "str"
    names = {getattr(m, "__name__", str(m)) for m in members}
    if names in ({"int"}, {"float"}, {"bool"}):
        return names.pop()
    if names == {"int", "float"}:
        return "float"
    return "any"


def type_text(hint: Any) -> str:
    """A short human reading of a type hint for documentation: ``str``, ``int or None``, ``"a", "b"``."""
    parts = []
    for m in _members(hint):
        if m is type(None):
            parts.append("None")
        elif typing.get_origin(m) is Literal:
            parts.append(", ".join(repr(v) for v in typing.get_args(m)))
        elif typing.get_origin(m) in (tuple, list, typing.get_origin(typing.Sequence[int])):
            parts.append(f"{getattr(typing.get_origin(m), '__name__', 'sequence')}")
        else:
            parts.append(getattr(m, "__name__", str(m).replace("typing.", "")))
    return " or ".join(dict.fromkeys(parts))


def check_options(name: str, options: Any, names: typing.Iterable[str] | None = None) -> None:
    """Validate the fields `names` (default: all) of an options dataclass from their declarations:
    ``Literal`` choices, ``bool`` types, and numbers with their bounds. Other types (tables, encoders,
    unions of objects) are the metric's own to check."""
    wanted = None if names is None else set(names)
    for f in option_fields(type(options)):
        if (wanted is not None and f.name not in wanted) or not f.info.checked:
            continue
        value = getattr(options, f.name)
        members = _members(f.hint)
        choices = choices_of(f.hint)
        literal_only = all(typing.get_origin(m) is Literal or m is type(None) for m in members)
        if choices is not None and literal_only:
            if value is None and type(None) in members:
                continue
            check_choice(name, f.name, value, list(choices))
            continue
        if value is None and type(None) in members:
            continue
        kind = scalar_kind(f.hint)
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError(f"{name}: `{f.name}` must be a bool, got {type(value).__name__} {short_repr(value)}.")
        elif kind in ("int", "float") or f.info.low is not None or f.info.high is not None:
            if kind == "any" and not isinstance(value, (int, float)):
                continue  # a union with other types (e.g. a bool or a threshold): the metric checks it
            check_number(name, f.name, value, low=f.info.low, high=f.info.high, low_open=f.info.low_open,
                         integer=f.info.integer or kind == "int")
