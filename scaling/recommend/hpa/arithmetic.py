"""Go integer semantics and Kubernetes quantities, as the HPA's arithmetic depends on them.

Upstream computes in int64/int32 milli-units (``resource.Quantity.MilliValue()``) and integer percent, and
several upstream expectations depend on its truncations; these helpers give Python ints the same
behaviour (Go division truncating toward zero, int64 wrap-around, the int32 ceiling of
``replica_calculator.go``) and format milli-values as ``resource.Quantity`` prints them
(k8s.io/apimachinery ``pkg/api/resource``).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal

from ...quantity import parse_decimal, parse_quantity

__all__ = ["format_milli_quantity"]

MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)
MAX_INT64 = 2**63 - 1


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero; Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def wrap_int64(v: int) -> int:
    """Two's-complement int64 wrap-around, as Go's ``+`` overflows."""
    return (v + 2**63) % 2**64 - 2**63


def ceil_int32(x: float) -> int:
    """``int32(math.Ceil(x))`` guarded the way the current controller guards it (capped at int32)."""
    if math.isnan(x):
        return 0
    if x > MAX_INT32:
        return MAX_INT32
    if x < MIN_INT32:
        return MIN_INT32
    return math.ceil(x)


def milli_of_number(value: object, scale: int) -> int:
    """Milli-units of a sample: ``scale`` is 1 for millicores and 1000 for base units.

    Fractions round up, as ``Quantity.MilliValue()`` does; floats go through their shortest decimal
    form so that ``0.1`` is 100 milli-units, not 101.
    """
    if type(value) is int:  # the common case first: samples are ints of millicores or bytes
        return value * scale
    if isinstance(value, bool):
        raise ValueError("a metric value must be a number")
    if isinstance(value, int):
        return value * scale
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"metric value {value!r} is not finite")
        return int((Decimal(repr(value)) * scale).to_integral_value(rounding=ROUND_CEILING))
    if isinstance(value, str):
        milli = parse_quantity(value)
        return milli if scale == 1000 else -(-milli // 1000)
    raise ValueError(f"a metric value must be a number, got {type(value).__name__}")


def format_milli_quantity(milli: int) -> str:
    """``resource.NewMilliQuantity(milli, DecimalSI).String()``: the canonical DecimalSI form.

    ``20666`` -> ``"20666m"``, ``20000`` -> ``"20"``, ``2_000_000`` -> ``"2k"``.
    """
    if milli % 1000 != 0:
        return f"{milli}m"
    n = milli // 1000
    if n == 0:
        return "0"
    exp = 0
    while n % 1000 == 0 and exp < 18:
        n //= 1000
        exp += 3
    return f"{n}{_DECIMAL_SUFFIX[exp]}"


_DECIMAL_SUFFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def quantity_float(value: object) -> float:
    """A quantity as the nearest float (``Quantity.AsApproximateFloat64``), for tolerances.

    Not :func:`parse_quantity`: a tolerance such as ``"0.0005"`` is finer than a milli-unit.
    """
    if isinstance(value, bool):
        raise ValueError("must be a quantity")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not finite")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"must be a quantity, got {type(value).__name__}")
    number = parse_decimal(value)
    return float(number)
