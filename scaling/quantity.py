"""Kubernetes quantities and Go durations, parsed exactly.

Requests and limits are compared and scaled with integer arithmetic by every upstream controller
(HVPA works on ``MilliValue()`` for CPU and ``Value()`` for memory; hvpa-v2 on milli-values for
both), so tandem never holds a request in a float: a quantity is an ``int`` of *milli-units*
(millicores for CPU, milli-bytes for memory).  ``Decimal`` does the parsing so that ``"1.1Gi"`` or
``"0.1"`` carry no binary rounding error.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache

__all__ = [
    "MAX_MILLI",
    "bytes_of",
    "format_cpu",
    "format_memory",
    "format_quantity",
    "parse_decimal",
    "parse_duration",
    "parse_quantity",
]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# k8s.io/apimachinery/pkg/api/resource: <signedNumber><suffix>, suffix binary | decimal | exponent.
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")

#: Upper bound of a quantity, in milli-units.  Kubernetes caps quantities at int64; tandem also
#: refuses absurd values (a 2**63 milli-byte request is a bug upstream, not a recommendation).
MAX_MILLI = 2**63 - 1


def parse_quantity(value: object) -> int:
    """Return ``value`` in milli-units, rounding up as ``Quantity.MilliValue()`` does.

    ``value`` is a quantity string (``"250m"``, ``"1.5Gi"``, ``"2e3"``) or a plain JSON number in
    base units (cores, bytes).  Raises ``ValueError`` with a reason for anything else, for
    negative values and for values beyond int64.
    """
    if type(value) is str:
        return _parse_text(value)
    if isinstance(value, bool):
        raise ValueError("expected a quantity, got a boolean")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"quantity {value!r} is not finite")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        number = parse_decimal(value)
    else:
        raise ValueError(f"expected a quantity string or number, got {type(value).__name__}")
    return _milli(value, number)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> int:
    """:func:`parse_quantity` of a string, remembered: streams and policies repeat a handful of
    quantity strings (``"500m"``, ``"1Gi"``) on every event, and the ``Decimal`` parse is the cost.
    Errors are not remembered (``lru_cache`` does not keep exceptions), so they stay exact."""
    return _milli(text, parse_decimal(text))


def _milli(value: object, number: Decimal) -> int:
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    milli = int((number * 1000).to_integral_value(rounding=ROUND_CEILING))
    if milli > MAX_MILLI:
        raise ValueError(f"{value!r} is out of range")
    return milli


def parse_decimal(text: str) -> Decimal:
    """The exact value of a quantity string in base units (cores, bytes, or a plain number).

    Shared by :func:`parse_quantity` and the HPA's tolerances, which are finer than a milli-unit.
    """
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number = Decimal(m.group(1))
    suffix = m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > 30:
        raise ValueError(f"{text!r}: exponent out of range")
    return number.scaleb(exponent)


def bytes_of(milli: int) -> int:
    """Whole bytes of a milli-byte amount, rounded up (``Quantity.Value()``)."""
    return -(-milli // 1000)


def format_cpu(milli: int) -> str:
    """Canonical CPU quantity: whole cores as ``"2"``, anything else in millicores (``"2500m"``)."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_memory(milli: int) -> str:
    """Memory in whole bytes, written in kilobytes when it is a whole number of them.

    HVPA rounds new memory requests up to whole kB and writes them as ``"1320000k"`` (reference
    hvpa.md 2.5); tandem keeps that form so that outputs compare as strings with upstream's, and
    writes any other amount (a ``maxAllowed`` of ``4Gi``, say) in exact bytes rather than rounding
    it past a bound.
    """
    b = bytes_of(milli)
    if b == 0:
        return "0"
    return f"{b // 1000}k" if b % 1000 == 0 else str(b)


def format_quantity(resource: str, milli: int) -> str:
    """Format ``milli`` for ``resource`` (``cpu`` in cores/millicores, everything else as memory)."""
    return format_cpu(milli) if resource == "cpu" else format_memory(milli)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNIT = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


def parse_duration(value: object) -> float:
    """Seconds of a Go duration (``"3m"``, ``"1h30m"``, ``"90s"``) or a plain number of seconds.

    HVPA's ``stabilizationDuration`` is a Go ``time.Duration`` string; validation rejects one that
    does not parse (reference hvpa.md 1.1), so tandem does too.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration, got a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"duration {value!r} must be a finite number >= 0")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration string, got {type(value).__name__}")
    text = value.strip()
    if text in ("0", ""):
        if text == "":
            raise ValueError("empty duration")
        return 0.0
    pos = 0
    total = Decimal(0)
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None:
            raise ValueError(f"{value!r} is not a duration (like '3m' or '1h30m')")
        total += Decimal(m.group(1)) * _DURATION_UNIT[m.group(2)]
        pos = m.end()
    return float(total)
