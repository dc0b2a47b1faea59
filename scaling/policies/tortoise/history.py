"""Replica history for Tortoise's min/max replicas: four weeks of per-slot peaks, bounded by construction.

The seed (Tortoise's "Horizontal scaling", https://github.com/mercari/tortoise/blob/main/docs/horizontal.md)
defines::

    maxReplicas = max{replicas at the same time on the same weekday over the last 4 weeks} × 2
    minReplicas = max{replicas at the same time on the same weekday over the last 4 weeks} × 1/2

so the history is, per workload, the **peak replica count per time slot** (weekday × hour, the
slot width being Tortoise's ``RangeOfMinMaxReplicasRecommendationHours``) for each of the last
four weeks.  It is a fixed ring: ``WEEKS`` rows, each ``7 × 24 / width`` integers plus the index of
the week it belongs to.  A sample of a new week recycles the row of the week four weeks earlier, so
the size never grows, whatever the length of the stream.  ``-1`` marks a slot without a sample.

Weeks start on Sunday in the history's time zone (Tortoise lists its slots Sunday..Saturday and
converts ``now`` to the admin ``TimeZone``); a week index is ``date.toordinal() // 7`` of the local
date (ordinal 7, 0001-01-07, was a Sunday).  ``to_dict``/``from_dict`` give a compact JSON value for
the policy memory and Faust tables.

Tortoise itself keeps one decaying running max per slot instead (reference ``tortoise.md`` 2.a);
``docs/tortoise.md`` explains why tandem follows the seed.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["EMPTY", "PERIODS", "WEEKS", "ReplicaHistory", "learn_replicas", "replica_bounds"]

#: Weeks kept (the seed's "last 4 weeks").
WEEKS = 4
#: A slot without any sample.
EMPTY = -1
#: Peaks are stored as int32; tandem's events refuse replica counts above 1,000,000 anyway.
_INT32_MAX = 2**31 - 1
#: A serialised row: peaks of at most 10 digits, or -1, joined by commas.
_ROW = re.compile(r"(?:-1|[0-9]{1,10})(?:,(?:-1|[0-9]{1,10}))*")
#: ``weekly``: the same slot on the same weekday of the last 4 weeks; ``daily``: the same slot of
#: the last 4 days (Tortoise's ``GatheringDataPeriodType``).
PERIODS = ("weekly", "daily")


class ReplicaHistory:
    """Peak replicas per (week, weekday, slot) for the last :data:`WEEKS` weeks."""

    __slots__ = ("_text", "_zone", "per_day", "rows", "timezone", "weeks", "width")

    def __init__(self, timezone: str = "Asia/Tokyo", width_hours: int = 1) -> None:
        if isinstance(width_hours, bool) or not isinstance(width_hours, int) or not 1 <= width_hours <= 24:
            raise ValueError(f"slot width {width_hours!r} is not 1..24 hours")
        if 24 % width_hours:
            raise ValueError(f"slot width {width_hours} h does not divide a day")
        try:
            self._zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise ValueError(f"unknown time zone {timezone!r}") from None
        self.timezone = timezone
        self.width = width_hours
        self.per_day = 24 // width_hours
        #: Week index held by each row (``EMPTY`` for a row never used).
        self.weeks: list[int] = [EMPTY] * WEEKS
        #: ``rows[r][day * per_day + slot]``: the peak replicas seen in that slot of week ``weeks[r]``
        #: (int32: 4 bytes a slot).
        self.rows: list[array[int]] = [array("i", [EMPTY]) * (7 * self.per_day) for _ in range(WEEKS)]
        #: Serialised rows, ``None`` once a row changed (``to_dict`` re-encodes only those).
        self._text: list[str | None] = [None] * WEEKS

    # --- time -------------------------------------------------------------------------------

    def locate(self, ts: float) -> tuple[int, int]:
        """(local date ordinal, slot of the day) of Unix time ``ts``."""
        local = datetime.fromtimestamp(ts, self._zone)
        return local.toordinal(), local.hour // self.width

    def _cell(self, ordinal: int, slot: int) -> int:
        """Value stored for ``slot`` of the local day ``ordinal``, ``EMPTY`` if not held."""
        week, day = divmod(ordinal, 7)
        r = week % WEEKS
        if self.weeks[r] != week:
            return EMPTY
        return self.rows[r][day * self.per_day + slot]

    # --- updates ----------------------------------------------------------------------------

    def observe(self, ts: float, replicas: int) -> bool:
        """Fold ``replicas`` seen at ``ts`` into its slot; ``True`` if the history changed.

        A sample older than the ring (its week's row already holds a newer week) is dropped.
        """
        if replicas < 0:
            raise ValueError(f"replicas {replicas} < 0")
        ordinal, slot = self.locate(ts)
        week, day = divmod(ordinal, 7)
        r = week % WEEKS
        held = self.weeks[r]
        changed = False
        if held != week:
            if held > week:
                return False  # a newer week already took this row: the sample is > 4 weeks old
            self.weeks[r] = week
            self.rows[r] = array("i", [EMPTY]) * len(self.rows[r])
            changed = True
        row = self.rows[r]
        pos = day * self.per_day + slot
        if replicas > row[pos]:
            row[pos] = min(replicas, _INT32_MAX)
            changed = True
        if changed:
            self._text[r] = None
        return changed

    # --- queries ----------------------------------------------------------------------------

    def window(self, ts: float, period: str = "weekly") -> list[int]:
        """The samples of ``ts``'s slot in the four periods ending at ``ts`` (newest first, no gaps)."""
        ordinal, slot = self.locate(ts)
        step = 7 if period == "weekly" else 1
        out = []
        for k in range(WEEKS):
            v = self._cell(ordinal - k * step, slot)
            if v != EMPTY:
                out.append(v)
        return out

    def peak(self, ts: float, period: str = "weekly") -> int | None:
        """max{replicas in ``ts``'s slot over the last four weeks (days)}, ``None`` without samples."""
        values = self.window(ts, period)
        return max(values) if values else None

    def covered(self, ts: float, period: str = "weekly") -> bool:
        """Every slot has at least one sample in the four periods ending at ``ts``.

        This is tandem's form of Tortoise's "no slot is still 0" test that ends data gathering.
        """
        ordinal, _ = self.locate(ts)
        if period == "weekly":
            week = ordinal // 7
            rows = [row for r, row in enumerate(self.rows) if week - WEEKS < self.weeks[r] <= week]
            if not rows:
                return False
            if len(rows) == 1:
                return min(rows[0]) != EMPTY
            return bool(min(map(max, zip(*rows, strict=True))) != EMPTY)
        for slot in range(self.per_day):
            if all(self._cell(ordinal - k, slot) == EMPTY for k in range(WEEKS)):
                return False
        return True

    # --- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """``{"tz", "width", "weeks": [4 ints], "max": [4 strings]}``: each row as its peaks joined by
        commas, ``-1`` for a slot without sample (``"3,3,-1,12,..."``; a JSON array without brackets,
        so that decoding is one ``json.loads``)."""
        text = self._text
        for r, t in enumerate(text):
            if t is None:
                text[r] = ",".join(map(str, self.rows[r]))
        return {"tz": self.timezone, "width": self.width, "weeks": list(self.weeks), "max": list(text)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaHistory:
        """Rebuild from :meth:`to_dict`; ``ValueError`` for anything that is not exactly that shape."""
        if not isinstance(d, Mapping):
            raise ValueError("history: expected an object")
        width = d.get("width")
        if not isinstance(width, int) or isinstance(width, bool):
            raise ValueError(f"history: slot width {width!r} is not an integer")
        h = cls(str(d.get("tz")), width)
        weeks, rows = d.get("weeks"), d.get("max")
        if not isinstance(weeks, list) or len(weeks) != WEEKS or not all(_is_int(w) for w in weeks):
            raise ValueError(f"history: expected {WEEKS} week indexes")
        size = 7 * h.per_day
        if not isinstance(rows, list) or len(rows) != WEEKS or not all(isinstance(r, str) for r in rows):
            raise ValueError(f"history: expected {WEEKS} rows")
        parsed = []
        for text in rows:
            if _ROW.fullmatch(text) is None:
                raise ValueError("history: a row is integers >= -1 joined by commas")
            try:
                row = array("i", json.loads(f"[{text}]"))
            except OverflowError:
                raise ValueError("history: a peak does not fit in 32 bits") from None
            if len(row) != size:
                raise ValueError(f"history: expected rows of {size} slots")
            parsed.append(row)
        h.weeks = list(weeks)
        h.rows = parsed
        h._text = list(rows)
        return h


def learn_replicas(memory: dict[str, Any], peaks: Sequence[tuple[float, int]], timezone: str, width_hours: int) -> None:
    """Fold past replica peaks (``(slot start, peak)``, 15-minute slots, oldest first) into the
    history a policy memory keeps under ``"hist"``: what a history envelope taught
    (docs/contract.md §3, ``history``), whether it came before the policy or after it.

    A slot's peak is the most replicas of the workload in it, as the ticks that would have seen
    them fold in; every time zone's offset is a multiple of 15 minutes, so each slot falls in one
    slot of the history whatever its ``TimeZone`` and width.  Folding takes maxima: learning the
    same peaks again changes nothing.  A history of another time zone or width starts again, as
    the policy's own does (``TortoisePolicy._history``).
    """
    raw = memory.get("hist")
    h: ReplicaHistory | None = None
    if isinstance(raw, Mapping):
        try:
            h = ReplicaHistory.from_dict(raw)
        except ValueError:
            h = None
    if h is None or h.timezone != timezone or h.width != width_hours:
        h = ReplicaHistory(timezone, width_hours)
    for ts, peak in peaks:
        h.observe(ts, peak)
    memory["hist"] = h.to_dict()


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def replica_bounds(
    peak: int,
    *,
    min_multiplier: float = 0.5,
    max_multiplier: float = 2.0,
    minimum_min_replicas: int = 3,
) -> tuple[int, int]:
    """(minReplicas, maxReplicas) of a slot whose peak is ``peak``: the seed's ×1/2 and ×2.

    Tortoise's multipliers and floors (``updateReplicasRecommendation``, reference 2.a): candidates
    are ``ceil(peak × multiplier)`` in float64; a min candidate below ``MinimumMinReplicas`` becomes
    ``MinimumMinReplicas``; a max candidate below ``MinimumMinReplicas`` (sic: not below the floor
    itself) becomes ``trunc(MinimumMinReplicas × MaxMultiplier / MinMultiplier)`` (12 by default).
    Tortoise folds candidates, tandem folds the peak; both are monotonic, so the results agree.
    The caps (``MaximumMinReplicas``, ``spec.maxReplicas``, ``MaximumMaxReplicas``) apply when
    the HPA is written.
    """
    lo = math.ceil(peak * min_multiplier)
    hi = math.ceil(peak * max_multiplier)
    if lo < minimum_min_replicas:
        lo = minimum_min_replicas
    if hi < minimum_min_replicas:
        hi = int(minimum_min_replicas * max_multiplier / min_multiplier)
    return lo, hi
