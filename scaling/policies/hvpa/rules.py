"""HVPA's rules as pure functions (reference hvpa.md section 2): the VPA weight of the current
stage, minimum changes, limits scaled with requests, VPA readiness, update windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ...quantity import bytes_of
from .spec import Change, Interval, ScaleType, Window

__all__ = [
    "min_change_threshold",
    "scaled_limit",
    "scaling_limited",
    "vpa_usable",
    "vpa_weight",
    "weight_texts",
    "weighted_delta",
]

# HVPA: getThreshold defaults when neither value nor percentage is set (reference hvpa.md 2.6).
DEFAULT_MIN_CHANGE = {"cpu": 200, "memory": 200_000_000 * 1000}

_ONE = Fraction(1)
_ZERO = Fraction(0)


def _trunc_times(amount: int, w: Fraction) -> int:
    """trunc(amount x w) toward zero, as Go's integer conversion does, in integers (the same
    value ``int(amount * w)`` gives, without building a ``Fraction``)."""
    n = amount * w.numerator
    return n // w.denominator if n >= 0 else -(-n // w.denominator)


def vpa_weight(intervals: Sequence[Interval], current: int, desired: int, min_r: int, max_r: int) -> Fraction:
    """HVPA ``getVpaWeightFromIntervals`` (reference hvpa.md 2.3).

    The first interval containing the *current* replicas wins.  A weight-100 stage borrows: on
    scale-in the last fractional weight seen before it, on scale-out the next fractional one.
    """
    last_fraction = _ONE
    found = False
    for iv in intervals:
        start = iv.start or min_r
        last = iv.last or max_r
        w = iv.weight
        fractional = w.numerator < w.denominator  # w < 1, without Fraction arithmetic
        if not found and start <= current <= last:
            if fractional:
                return w
            if desired < current:
                return last_fraction
            if desired == current:
                return _ONE
            found = True  # scale-out from a 100 % stage: keep walking for the next fraction
            continue
        if fractional:
            if found:
                return w
            last_fraction = w
    return _ONE if found else _ZERO


def min_change_threshold(change: Change | None, current: int, resource: str) -> int:
    """HVPA ``getThreshold``: the smaller of value and percentage of the current request (2.6)."""
    if change is None or (change.value is None and change.percentage is None):
        return DEFAULT_MIN_CHANGE[resource]
    by_pct = current * change.percentage // 100 if change.percentage is not None else None
    if change.value is None:
        assert by_pct is not None
        return by_pct
    if by_pct is None:
        return change.value
    return min(change.value, by_pct)


def scaled_limit(resource: str, old_req: int, old_lim: int, new_req: int, gap: Change | None) -> int | None:
    """HVPA ``getScaledResourceLimit`` (reference hvpa.md 2.7); ``None`` means "set no limit"."""
    if old_lim <= 0:
        return None
    if old_req <= 0 or old_req == old_lim:
        return new_req
    if gap is None or (gap.value is None and not gap.percentage):
        # Proportional, integer milli maths, truncating, capped at MaxInt64.
        limit = min(old_lim * new_req // old_req, 2**63 - 1)
    else:
        # PR #72: the larger of the percentage- and value-based candidates.
        by_pct = new_req + new_req * (gap.percentage or 0) // 100
        by_value = new_req + (gap.value or 0)
        limit = max(by_pct, by_value)
    return round_kb(limit) if resource == "memory" else limit


def round_kb(milli: int) -> int:
    b = bytes_of(milli)
    return -(-b // 1000) * 1000 * 1000


def vpa_usable(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """HVPA PR #68: ignore a recommendation flagged before ``RecommendationProvided`` (2.5)."""
    if not conditions:
        return True  # an empty list is accepted
    for c in conditions:
        t, s = c.get("type"), c.get("status", "True")
        if t in ("ConfigUnsupported", "ConfigDeprecated", "LowConfidence") and s == "True":
            return False
        if t == "RecommendationProvided":
            return bool(s == "True")
    return False


def scale_off(st: ScaleType, window: Window | None, now: float) -> bool:
    return st.mode == "Off" or (st.mode == "MaintenanceWindow" and (window is None or not window.contains(now)))


def within_duration(last: float | None, duration: float, now: float) -> bool:
    # HVPA: blocked iff now - lastScaleTime < duration; unset means "infinitely long ago" (2.9).
    return last is not None and now - last < duration


def scaling_limited(conditions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the HPA says ScalingLimited (HVPA 2.2): all that HVPA reads of its conditions."""
    return any(c.get("type") == "ScalingLimited" and c.get("status", "True") == "True" for c in conditions)


def weighted_delta(res: str, target: int, req: int, num: int, den: int) -> int:
    """trunc((target - current) × w), w = num/den: Go integer division toward zero (reference
    hvpa.md 2.5), in integers as :func:`_trunc_times` computes it.

    CPU works in millicores, memory in whole bytes (``Value()``), so memory is truncated at
    the byte before it comes back as milli-bytes.
    """
    if res == "memory":
        n = (bytes_of(target) - bytes_of(req)) * num
        return (n // den if n >= 0 else -(-n // den)) * 1000
    n = (target - req) * num
    return n // den if n >= 0 else -(-n // den)


@lru_cache(maxsize=256)
def weight_texts(numerator: int, denominator: int, form: str) -> tuple[str, str]:
    """The vpaWeight and hpaWeight as the reasons write them (a policy has a few weights);
    remembered by the weight's integers (a ``Fraction`` hashes slowly)."""
    weight = Fraction(numerator, denominator)
    return _fmt_weight(weight, form), _fmt_weight(1 - weight, form)


def _fmt_weight(w: Fraction, form: str) -> str:
    if form == "released":
        return str(int(w * 100)) if (w * 100).denominator == 1 else str(float(w * 100))
    return str(float(w))
