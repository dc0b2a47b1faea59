"""The report's data side of drawing: time buckets for blocked changes, units and value ranges per axis.

Both painters (the SVG page and the matplotlib PNGs) draw from these, so a chart means the same in
either, and the rules are plain functions with exact tests rather than pixels:

* **Blocked changes per time bucket.**  A busy workload (the example's ``encoder``: 435 blocked
  reports in 72 h) drew one mark per report, hundreds of them: the strip became a solid bar and the
  circles hid the replicas line.  They are counted per bucket instead, the bucket a round time step
  (15 min, 1 h, ...) at least :data:`MIN_BUCKET_PX` pixels wide on the shared time axis, aligned to
  multiples of the step in UTC like the axis ticks.  Decisions stay one mark each.
* **Units from the axis' range, one rule for every workload.**  CPU in cores when the axis reaches
  one core, else in millicores; memory in GiB from 1 GiB up, else MiB (Kubernetes' own suffixes).
* **Value range.**  The axis covers what the chart is about (usage and its band, requests, the VPA
  target, the values of decisions and blocked changes) from zero.  A limit far above that (more
  than :data:`FAR` times the top) would squash everything into the bottom of the chart, the
  "mostly empty" memory charts; it is left above the axis and named at its edge instead.
* **The pod band only where it can be seen.**  The lowest-to-highest pod band is drawn, and listed
  in the legend, when at some event the pods differ by at least :data:`BAND_MIN` of the axis
  (about a pixel on the page); otherwise the usage line's legend says the pods agree.  In the
  example every pod reports the same memory, so the memory charts listed a band nobody could see.
* **One colour for the held-back ranges in a legend.**  Each range is coloured by its own main
  reason; a chart's legend swatch takes the reason of most of that chart's held-back changes
  (:func:`main_reason`), not the workload's or the first range's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from analysis.audit import AuditEvent

__all__ = [
    "BAND_MIN",
    "BUCKET_STEPS",
    "FAR",
    "MIN_BUCKET_PX",
    "Bucket",
    "Unit",
    "ValueRange",
    "WantedRange",
    "band_visible",
    "blocked_buckets",
    "bucket_seconds",
    "choose_unit",
    "first_reason",
    "main_reason",
    "pod_spread",
    "value_range",
    "wanted_ranges",
]

#: The narrowest bucket of blocked changes, in pixels of the time axis: wide enough for a bar
#: that can be told from its neighbours.
MIN_BUCKET_PX = 8.0
#: Round bucket widths in seconds, the smallest that is at least MIN_BUCKET_PX wide is used.
BUCKET_STEPS = (60, 300, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)
#: A limit more than this many times the rest of a chart's top is left above the axis.
FAR = 1.5
#: Headroom above the highest value shown.
HEADROOM = 1.08
#: The pod band is drawn when its widest point is at least this share of the axis' height.
BAND_MIN = 0.01

_MIB, _GIB = 2**20, 2**30


def bucket_seconds(span: float, plot_px: float) -> int:
    """The bucket width for blocked changes on an axis of ``span`` seconds over ``plot_px`` pixels."""
    per_px = span / max(plot_px, 1.0)
    for step in BUCKET_STEPS:
        if step / per_px >= MIN_BUCKET_PX:
            return step
    return BUCKET_STEPS[-1]


def first_reason(e: AuditEvent) -> str:
    """The reason a blocked report is filed (and coloured) under: its first held-back change's."""
    blocked = e.data.get("blocked") or []
    return str(blocked[0].get("reason")) if blocked else ""


@dataclass(frozen=True)
class Bucket:
    """The blocked reports whose tick is in ``[start, end)``."""

    start: float
    end: float
    count: int
    #: Reports per reason (their first one), largest first; the counts add up to ``count``.
    reasons: tuple[tuple[str, int], ...]
    ids: tuple[str, ...] = field(repr=False)


def _start(ts: float, step: int) -> float:
    return float(math.floor(ts / step) * step)


def blocked_buckets(events: Iterable[AuditEvent], step: int) -> list[Bucket]:
    """The blocked reports of ``events`` counted per ``step``-second bucket (empty buckets left out)."""
    groups: dict[float, list[AuditEvent]] = {}
    for e in events:
        if e.type == "blocked":
            groups.setdefault(_start(e.ts, step), []).append(e)
    out = []
    for start in sorted(groups):
        members = groups[start]
        per: dict[str, int] = {}
        for e in members:
            per[first_reason(e)] = per.get(first_reason(e), 0) + 1
        reasons = tuple(sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))
        ids = tuple(str(e.event.get("id", "")) for e in members)
        out.append(Bucket(start, start + step, len(members), reasons, ids))
    return out


@dataclass(frozen=True)
class WantedRange:
    """Blocked changes of one target in ``[start, end)``: how many, and the lowest and highest value wanted."""

    start: float
    end: float
    count: int
    low: float
    high: float
    #: The reason most of them were held back for (ties: the alphabetically first).
    reason: str


def wanted_ranges(
    events: Iterable[AuditEvent], step: int, wanted: Callable[[AuditEvent], Sequence[tuple[float, str]]]
) -> list[WantedRange]:
    """Per ``step``-second bucket, the range of values ``wanted(event)`` (value, reason) gives."""
    groups: dict[float, list[tuple[float, str]]] = {}
    for e in events:
        for value, reason in wanted(e):
            groups.setdefault(_start(e.ts, step), []).append((value, reason))
    out = []
    for start in sorted(groups):
        values = groups[start]
        per: dict[str, int] = {}
        for _, r in values:
            per[r] = per.get(r, 0) + 1
        reason = min(per, key=lambda r: (-per[r], r))
        out.append(
            WantedRange(start, start + step, len(values), min(v for v, _ in values), max(v for v, _ in values), reason)
        )
    return out


def main_reason(ranges: Iterable[WantedRange]) -> str | None:
    """The reason of most of the changes in ``ranges`` (each range counted as its own reason; ties:
    the alphabetically first), or None without any: the colour of a chart's legend swatch."""
    per: dict[str, int] = {}
    for r in ranges:
        per[r.reason] = per.get(r.reason, 0) + r.count
    return min(per, key=lambda r: (-per[r], r)) if per else None


@dataclass(frozen=True)
class Unit:
    """How an axis writes its values: ``value / div`` followed by ``suffix``; ``name`` labels the axis."""

    div: float
    suffix: str
    name: str


def choose_unit(resource: str, top: float) -> Unit:
    """The unit for an axis whose highest value is ``top`` (cores for CPU, bytes for memory)."""
    if resource == "cpu":
        return Unit(1.0, "", "CPU (cores)") if top >= 1.0 else Unit(0.001, "m", "CPU (millicores)")
    if resource == "memory":
        return Unit(_GIB, "Gi", "memory (GiB)") if top >= _GIB else Unit(_MIB, "Mi", "memory (MiB)")
    return Unit(1.0, "", resource)


@dataclass(frozen=True)
class ValueRange:
    """An axis from ``low`` to ``high`` in ``unit``; ``above`` are the limits left above it."""

    low: float
    high: float
    unit: Unit
    above: tuple[float, ...]


def value_range(resource: str, shown: Iterable[float], limits: Iterable[float]) -> ValueRange:
    """The y axis of a resource chart: ``shown`` values always, ``limits`` when not far above them."""
    core = [v for v in shown if math.isfinite(v)]
    lims = sorted({v for v in limits if math.isfinite(v)})
    if core:
        ceiling = max(core) * FAR
        inside = [v for v in lims if v <= ceiling]
        above = tuple(v for v in lims if v > ceiling)
    else:  # nothing but limits (an audit file with limit decisions only): show them
        inside, above = lims, ()
    top = max([*core, *inside], default=1.0) or 1.0
    high = top * HEADROOM
    return ValueRange(0.0, high, choose_unit(resource, high), above)


def pod_spread(points: Iterable[tuple[float, float, float, float]]) -> float:
    """The widest gap between the lowest and the highest pod at any one event of ``points``
    ((tick, average, lowest, highest), the usage a report draws); 0 without points."""
    return max((hi - lo for _, _, lo, hi in points), default=0.0)


def band_visible(spread: float, vr: ValueRange) -> bool:
    """Whether a pod band ``spread`` tall at its widest can be seen on the axis ``vr``."""
    return spread > 0 and spread >= BAND_MIN * (vr.high - vr.low)


def per_column(
    points: Sequence[tuple[float, float, float, float]], t0: float, t1: float, columns: int
) -> list[tuple[float, float, float, float]]:
    """At most about one point per column of ``columns`` over ``t0``..``t1``: per column the mean
    of the times and of the averages, the lowest low and the highest high."""
    if len(points) <= columns:
        return list(points)
    width = (t1 - t0) / columns
    out: list[tuple[float, float, float, float]] = []
    cur: list[tuple[float, float, float, float]] = []
    cur_b = None
    for p in points:
        b = int((p[0] - t0) / width)
        if cur and b != cur_b:
            out.append(_merge(cur))
            cur = []
        cur.append(p)
        cur_b = b
    if cur:
        out.append(_merge(cur))
    return out


def _merge(ps: Sequence[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    return (
        sum(p[0] for p in ps) / len(ps),
        sum(p[1] for p in ps) / len(ps),
        min(p[2] for p in ps),
        max(p[3] for p in ps),
    )
