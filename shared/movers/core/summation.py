"""Exact sums of float64 values: the same bits however the values are split into parts and in whatever order
the parts are added (ranks, stream blocks, Ray blocks). Imports nothing heavy (Ray's workers read it)."""
from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

__all__ = ["ExactSum", "column_sum"]

_UNIT = 1 << 1074  # every finite float64 is an integer multiple of 2**-1074


class ExactSum:
    """A sum of float64 values kept exactly (an integer count of 2**-1074), so that sums of parts added in any
    grouping give the bits of ``math.fsum`` over all the values: ``float()`` rounds the exact sum once,
    correctly, as ``math.fsum`` does. Infinities and NaNs are added as floats (inf + -inf is NaN, as there).
    ΔBLEU sums its weighted counts with it; a Ray data set's mean score is one."""

    __slots__ = ("units", "special")

    def __init__(self, units: int = 0, special: float = 0.0) -> None:
        self.units = units
        self.special = special  # the sum of the non-finite values (0.0 while there are none)

    @classmethod
    def of(cls, values: Iterable[float]) -> ExactSum:
        total, special = 0, 0.0
        for value in values:
            value = float(value)
            if not math.isfinite(value):
                special += value
                continue
            num, den = value.as_integer_ratio()  # den is a power of two <= 2**1074
            total += num * (_UNIT // den)
        return cls(total, special)

    def __add__(self, other: Any) -> ExactSum:
        if isinstance(other, ExactSum):
            return ExactSum(self.units + other.units, self.special + other.special)
        if other == 0:
            return self
        return NotImplemented

    __radd__ = __add__

    def __float__(self) -> float:
        if not math.isfinite(self.special):
            return self.special
        return float(Fraction(self.units, _UNIT))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactSum) and (other.units, str(other.special)) == (self.units, str(self.special))

    def __hash__(self) -> int:
        return hash((self.units, str(self.special)))

    def __repr__(self) -> str:
        return f"ExactSum({float(self)!r})"


def column_sum(table: Any, column: str) -> Any:
    """One block's exact sum and count of a float column (a ``pyarrow.Table`` in, a one-row table out: the
    sum's units as text, its non-finite part, the count), for a reduction over blocks in any order."""
    import pyarrow as pa

    values = table.column(column).to_pylist()
    total = ExactSum.of(values)
    return pa.table({"units": [str(total.units)], "special": [total.special], "n": [len(values)]})
