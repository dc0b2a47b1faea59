"""A seasonal load forecaster for ``spec.predictive`` (issue 36): small, explainable, replayable.

What it forecasts is the HPA's *load*: the replicas the workload would need at the HPA's target,
``currentReplicas × max over metrics (current / target)`` before rounding (the ratio the HPA
controller computes, https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details).
A forecast of 7.4 therefore reads "about 7.4 pods' worth of load", and ``ceil`` of it is the
replica count that serves it.

It keeps, per workload, the same shape of history as Tortoise's replica history
(``scaling/policies/tortoise/history.py``: the same time slot on the same weekday over the last four weeks, from
Tortoise's "Horizontal scaling", https://github.com/mercari/tortoise/blob/main/docs/horizontal.md),
but with the *mean* load per 15-minute slot instead of the hourly peak: a ring of :data:`DAYS`
days × :data:`PER_DAY` slots, integers in milli-replicas.  From it:

* **the seasonal profile** at a time ``t``: the mean of ``t``'s slot on the same weekday of the
  last four weeks (those held); with no such week yet, the mean of the same slot on the last
  :data:`RECENT_DAYS` days.  Between slot centres the profile is interpolated linearly, so a ramp
  inside a slot is followed as a ramp; a forecast takes the larger of that and the slot's own
  mean, so that a step is seen at the slot's start;
* **the short-term level**: how today compares with the profile, ``load / slot mean`` smoothed over
  about :data:`LEVEL_TAU` seconds (event time), bounded to 1/4..4; the forecast is
  ``profile(t + horizon) × level``.  A level shift (a launch, a holiday) moves the forecast
  within half an hour, without waiting four weeks;
* **its own recent error**: at the first sample of each slot it writes down what it expects that
  slot's mean load to be; when the slot closes, ``|mean - expected| / mean`` enters a moving average
  over about the last four slots (an hour).  The policy acts only while this error is small;
* **whether the profile beats "no change"**: the same closed slots also score the naive forecast
  "this slot as the one before" (what a reactive rule assumes).  Over about the last day
  (:data:`SKILL_SLOTS` slots) the mean absolute errors of both are kept; their ratio
  (:attr:`Forecast.versus_naive`) is below 1 where the load has a pattern the profile knows, and
  above it where the load only wanders (a random walk is best forecast by its last value, and a
  seasonal profile of it forecasts the mean it reverts to, half the time above the load).

Everything is an integer (milli-replicas, level in millionths, error in tenths of a percent), so
:meth:`LoadProfile.to_dict` and :meth:`LoadProfile.from_dict` round-trip exactly and a state saved
and restored mid-stream forecasts the same bytes as one that never stopped.  Event time only: the
caller passes each tick's time.  Days and slots are in UTC.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Mapping
from typing import Any, NamedTuple

from .quantity import parse_quantity

__all__ = ["DAYS", "PER_DAY", "SLOT", "Forecast", "LoadProfile", "load_of"]

#: Slot width in seconds (15 minutes): fine enough that a morning ramp spans several slots.
SLOT = 900
#: Slots per day.
PER_DAY = 86400 // SLOT
#: Days kept: four weeks, as Tortoise's history.
DAYS = 28
#: Days averaged when no same-weekday week is held yet.
RECENT_DAYS = 3
#: Time constant of the short-term level, seconds of event time.
LEVEL_TAU = 1800.0
#: Bounds of the level (millionths): a forecast is at most 4× or at least 1/4 of the profile.
_LEVEL_MIN, _LEVEL_MAX, _ONE = 250_000, 4_000_000, 1_000_000
#: Weight of a new slot's error in the moving average (about the last four slots).
_ERROR_WEIGHT = 4
#: Slots (about a day) over which the profile's errors are compared with the naive forecast's.
SKILL_SLOTS = 96
#: Slots scored before that comparison is given (a day: until then the profile has the benefit of
#: the doubt, so a pattern is used from its second day on).
SKILL_MIN = SKILL_SLOTS
#: A slot without a sample.
EMPTY = -1
#: A serialised row: milli-replicas (or -1) joined by commas.
_ROW = re.compile(r"(?:-1|[0-9]{1,12})(?:,(?:-1|[0-9]{1,12}))*")


class Forecast(NamedTuple):
    """A forecast of the load at ``at`` and what it rests on (what the audit says of it)."""

    #: The load forecast, replicas (not rounded).
    load: float
    #: The time it is for (event time, seconds).
    at: float
    #: ``"weekday"`` (the same weekday of past weeks) or ``"daily"`` (the same time of the last days).
    basis: str
    #: How many weeks (``weekday``) or days (``daily``) the profile averaged.
    periods: int
    #: The recent error in percent (one decimal), ``None`` before a slot could be checked.
    error: float | None
    #: The profile's mean absolute error over the naive forecast's ("as the slot before") over about
    #: the last day; ``None`` before :data:`SKILL_MIN` slots were scored.
    versus_naive: float | None = None

    def describe(self) -> str:
        """``same weekday, 4 weeks, recent error 6 %``: the clause the audit puts after a pre-scale."""
        if self.basis == "weekday":
            basis = f"same weekday, {self.periods} week{'s' if self.periods != 1 else ''}"
        else:
            basis = f"same time of day, {self.periods} day{'s' if self.periods != 1 else ''}"
        error = "recent error not measured yet" if self.error is None else f"recent error {self.error:g} %"
        return f"{basis}, {error}"


def load_of(
    current_replicas: int, metrics: tuple[Mapping[str, Any], ...] | None, current: tuple[Mapping[str, Any], ...] | None
) -> float | None:
    """The HPA's unrounded desired replicas: ``current_replicas × max(current / target)`` over the
    metrics whose target and current value are both known; ``None`` when none is.

    ``metrics`` is the HPA's ``spec.metrics`` (autoscaling/v2), ``current`` its
    ``status.currentMetrics`` in the same order (as the controller writes them).  Utilization
    targets compare ``averageUtilization``; value targets ``averageValue`` or ``value``.
    """
    if not metrics or not current or len(metrics) != len(current) or current_replicas < 0:
        return None
    best: float | None = None
    for spec, cur in zip(metrics, current, strict=True):
        mtype = spec.get("type")
        if not isinstance(mtype, str) or cur.get("type") != mtype:
            continue
        key = mtype[0].lower() + mtype[1:]
        target = (spec.get(key) or {}).get("target") or {}
        now = (cur.get(key) or {}).get("current") or {}
        ratio = None
        for field in ("averageUtilization", "averageValue", "value"):
            t, c = _number(target.get(field)), _number(now.get(field))
            if t is not None and c is not None and t > 0:
                ratio = c / t
                break
        if ratio is not None and (best is None or ratio > best):
            best = ratio
    return None if best is None else current_replicas * best


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_quantity(value) / 1000
        except ValueError:
            return None
    return None


class LoadProfile:
    """Mean load per (day, 15-minute slot) over the last four weeks, a level and a recent error."""

    __slots__ = (
        "_text",
        "days",
        "error",
        "expected",
        "first",
        "level",
        "level_ts",
        "naive",
        "rows",
        "slot",
        "slot_n",
        "slot_sum",
    )

    def __init__(self) -> None:
        #: Day index (``ts // 86400``) held by each row, ``EMPTY`` for a row never used.
        self.days: list[int] = [EMPTY] * DAYS
        #: ``rows[day % DAYS][slot]``: the mean load of that slot, milli-replicas.
        self.rows: list[array[int]] = [array("q", [EMPTY]) * PER_DAY for _ in range(DAYS)]
        self._text: list[str | None] = [None] * DAYS
        #: The slot being filled (absolute index ``ts // SLOT``), its sum and count of samples.
        self.slot = EMPTY
        self.slot_sum = 0
        self.slot_n = 0
        #: What the slot being filled was expected to average (milli-replicas), ``EMPTY`` for no forecast.
        self.expected = EMPTY
        #: The short-term level (millionths) and when it was last moved.
        self.level = _ONE
        self.level_ts: float | None = None
        #: The recent error, tenths of a percent (``EMPTY`` before any slot was checked).
        self.error = EMPTY
        #: Event time of the first sample.
        self.first: float | None = None
        #: [the last closed slot's mean (milli), the profile's and the naive forecast's mean
        #: absolute errors (milli-replicas, floats: JSON round-trips them exactly), slots scored].
        self.naive: list[Any] = [EMPTY, 0.0, 0.0, 0]

    # --- the profile -------------------------------------------------------------------------

    def _cell(self, day: int, slot: int) -> int:
        r = day % DAYS
        return self.rows[r][slot] if self.days[r] == day else EMPTY

    def seasonal_slot(self, absolute: int) -> tuple[float, str, int] | None:
        """(mean load, basis, periods) of slot ``absolute`` (``ts // SLOT``) from past days only."""
        day, slot = divmod(absolute, PER_DAY)
        weekly = [v for k in range(1, DAYS // 7 + 1) if (v := self._cell(day - 7 * k, slot)) != EMPTY]
        if weekly:
            return sum(weekly) / len(weekly) / 1000, "weekday", len(weekly)
        daily = [v for k in range(1, RECENT_DAYS + 1) if (v := self._cell(day - k, slot)) != EMPTY]
        if daily:
            return sum(daily) / len(daily) / 1000, "daily", len(daily)
        return None

    def seasonal(self, ts: float) -> tuple[float, str, int] | None:
        """The profile at ``ts``, interpolated between the centres of the two nearest slots (either
        alone where the other has no history)."""
        pos = ts / SLOT - 0.5
        lo = math.floor(pos)
        frac = pos - lo
        a, b = self.seasonal_slot(lo), self.seasonal_slot(lo + 1)
        if a is None or b is None:
            return a or b
        first = a if frac <= 0.5 else b
        return a[0] * (1 - frac) + b[0] * frac, first[1], first[2]

    # --- updates -----------------------------------------------------------------------------

    def observe(self, ts: float, load: float) -> None:
        """Fold the load seen at ``ts`` into its slot, the level and (when a slot closes) the error.

        Samples must come in event-time order; one older than the slot being filled is ignored.
        """
        if self.first is None:
            self.first = ts
        milli = max(0, round(load * 1000))
        absolute = int(ts // SLOT)
        if absolute != self.slot:
            if absolute < self.slot:
                return
            self._close()
            self.slot, self.slot_sum, self.slot_n = absolute, 0, 0
            expected = self.seasonal_slot(absolute)
            # replicas × millionths / 1000 = milli-replicas
            self.expected = EMPTY if expected is None else round(expected[0] * self.level / 1000)
        self.slot_sum += milli
        self.slot_n += 1
        # Against the slot's own mean, not the interpolation: next to a step the interpolation
        # leans on the neighbour slot and would pull the level away from 1 for nothing.
        season = self.seasonal_slot(absolute)
        if season is not None and (season[0] > 0 or milli == 0):
            # Nothing where the profile expects nothing (a service closed at night) is today agreeing
            # with the profile: the level relaxes towards 1, so the level a closing slot pulls down
            # (load gone, that slot's mean not yet) does not cut the next opening's forecast.  A load
            # where the profile has none has no ratio and leaves the level as it is.
            ratio = _ONE if season[0] == 0 else min(_LEVEL_MAX, max(_LEVEL_MIN, round(load / season[0] * _ONE)))
            dt = LEVEL_TAU if self.level_ts is None else ts - self.level_ts
            weight = min(1.0, max(0.0, dt / LEVEL_TAU))
            self.level = round(self.level + (ratio - self.level) * weight)
            self.level_ts = ts

    def _close(self) -> None:
        """Store the mean of the slot being filled and check what it was expected to be."""
        if self.slot == EMPTY or self.slot_n == 0:
            return
        mean = self.slot_sum // self.slot_n
        day, slot = divmod(self.slot, PER_DAY)
        r = day % DAYS
        if self.days[r] != day:
            if self.days[r] > day:
                return
            self.days[r] = day
            self.rows[r] = array("q", [EMPTY]) * PER_DAY
        self.rows[r][slot] = mean
        self._text[r] = None
        last, profile_err, naive_err, scored = self.naive
        if self.expected != EMPTY and last != EMPTY:
            scored += 1
            w = 1 / min(scored, SKILL_SLOTS)
            profile_err += (abs(mean - self.expected) - profile_err) * w
            naive_err += (abs(mean - last) - naive_err) * w
        self.naive = [mean, profile_err, naive_err, scored]
        if self.expected != EMPTY and mean > 0:
            e = round(abs(mean - self.expected) * 1000 / mean)  # tenths of a percent
            self.error = e if self.error == EMPTY else self.error + (e - self.error) // _ERROR_WEIGHT
            if self.error < 0:
                self.error = 0

    # --- queries -----------------------------------------------------------------------------

    def history(self, ts: float) -> float:
        """Seconds of history behind ``ts`` (since the first sample, at most four weeks)."""
        return 0.0 if self.first is None else min(ts - self.first, DAYS * 86400.0)

    def forecast(self, at: float) -> Forecast | None:
        """The load forecast at ``at``: the profile there times the short-term level.

        The profile is here the larger of the interpolation and the mean of ``at``'s own slot: a
        step (everyone starts at 09:00) is a ramp between slot centres to the interpolation, and a
        forecast that only feeds scale-ups should rather see it half a slot early than late.
        """
        season = self.seasonal(at)
        if season is None:
            return None
        value, basis, periods = season
        own = self.seasonal_slot(int(at // SLOT))
        if own is not None and own[0] > value:
            value, basis, periods = own
        error, versus = self.quality()
        return Forecast(value * self.level / _ONE, at, basis, periods, error, versus)

    def quality(self) -> tuple[float | None, float | None]:
        """(the recent error in percent, the error over the naive forecast's) as :class:`Forecast`
        has them: ``None`` for what is not measured yet."""
        error = None if self.error == EMPTY else self.error / 10
        _, profile_err, naive_err, scored = self.naive
        versus: float | None = None
        if scored >= SKILL_MIN:
            versus = profile_err / naive_err if naive_err > 0 else (0.0 if profile_err == 0 else math.inf)
        return error, versus

    # --- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A compact JSON value (rows as integers joined by commas, re-encoded only when changed)."""
        text = self._text
        for r, t in enumerate(text):
            if t is None:
                text[r] = ",".join(map(str, self.rows[r]))
        return {
            "days": list(self.days),
            "rows": list(text),
            "slot": [self.slot, self.slot_sum, self.slot_n, self.expected],
            "level": [self.level, self.level_ts],
            "error": self.error,
            "first": self.first,
            "naive": list(self.naive),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadProfile:
        """Rebuild from :meth:`to_dict`; ``ValueError`` for anything that is not that shape."""
        if not isinstance(d, Mapping):
            raise ValueError("load profile: expected an object")
        p = cls()
        days, rows, slot, level = d.get("days"), d.get("rows"), d.get("slot"), d.get("level")
        if not isinstance(days, list) or len(days) != DAYS or not all(_is_int(v) for v in days):
            raise ValueError(f"load profile: expected {DAYS} day indexes")
        if not isinstance(rows, list) or len(rows) != DAYS or not all(isinstance(r, str) for r in rows):
            raise ValueError(f"load profile: expected {DAYS} rows")
        parsed = []
        for text in rows:
            if _ROW.fullmatch(text) is None:
                raise ValueError("load profile: a row is integers >= -1 joined by commas")
            row = array("q", json.loads(f"[{text}]"))
            if len(row) != PER_DAY:
                raise ValueError(f"load profile: expected rows of {PER_DAY} slots")
            parsed.append(row)
        if not isinstance(slot, list) or len(slot) != 4 or not all(_is_int(v) for v in slot):
            raise ValueError("load profile: slot is [index, sum, count, expected]")
        if (
            not isinstance(level, list)
            or len(level) != 2
            or not _is_int(level[0])
            or not (level[1] is None or isinstance(level[1], int | float))
        ):
            raise ValueError("load profile: level is [millionths, ts]")
        error, first = d.get("error"), d.get("first")
        if not isinstance(error, int) or isinstance(error, bool):
            raise ValueError("load profile: error is an integer")
        if not (first is None or isinstance(first, int | float)):
            raise ValueError("load profile: bad error or first")
        p.days, p.rows, p._text = list(days), parsed, list(rows)
        p.slot, p.slot_sum, p.slot_n, p.expected = slot
        p.level, p.level_ts = level[0], level[1]
        naive = d.get("naive")
        if (
            not isinstance(naive, list)
            or len(naive) != 4
            or not _is_int(naive[0])
            or not all(isinstance(v, float) for v in naive[1:3])
            or not _is_int(naive[3])
        ):
            raise ValueError("load profile: naive is [last mean, profile error, naive error, slots]")
        p.error, p.first, p.naive = error, first, list(naive)
        return p


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
