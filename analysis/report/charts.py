"""The report's SVG charts: one time axis, the event strip, replicas, resources and named series."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from analysis.audit import AuditEvent, describe_change, held_back, text_line
from analysis.report.collect import ResourceData, WorkloadData
from analysis.report.scales import (
    Bucket,
    ValueRange,
    WantedRange,
    band_visible,
    blocked_buckets,
    bucket_seconds,
    per_column,
    pod_spread,
    value_range,
    wanted_ranges,
)
from scaling.quantity import parse_quantity

WIDTH = 1240  # SVG width (px)
LEFT, RIGHT = 78, 60  # plot margins (the right one holds the bound labels and the last time label)
DECISION_COLOR = "#0f766e"
#: The forecasts of ``spec.predictive`` on the replicas chart.
FORECAST = "#9333ea"
REASON_COLORS = {
    "MinChange": "#db2777",
    "StabilizationWindow": "#d97706",
    "Weight": "#7c3aed",
    "Cooldown": "#ea580c",
    "MinFactor": "#ca8a04",
    "UpdatePolicy": "#475569",
    "MaintenanceWindow": "#0284c7",
    "ParadoxicalScaling": "#7f1d1d",
    "Bounds": "#b91c1c",
    "DryRun": "#64748b",
    "GatheringData": "#65a30d",
}
OTHER_REASON = "#6b7280"
#: The lowest-to-highest pod band: opaque enough to be seen beside the usage line drawn over it.
BAND_OPACITY = 0.45
#: Ranges of blocked values in the value charts: behind the lines, faint enough not to hide them.
WANTED_OPACITY = 0.3
USAGE, BAND, REQUEST, LIMIT, VPA, HPA, BOUND, REPLICAS = (
    "#2563eb",
    "#60a5fa",
    "#16a34a",
    "#dc2626",
    "#9333ea",
    "#f59e0b",
    "#64748b",
    "#0f172a",
)


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x) < 1e6 else f"{x:.0f}"


def _nice_step(span: float, target: int = 5) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


_TIME_STEPS = (60, 300, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400)


class Axis:
    """The time axis every chart of a report shares: x = LEFT + (t - t0) * scale."""

    def __init__(self, t0: float, t1: float, width: int = WIDTH) -> None:
        self.t0, self.t1 = t0, t1
        self.scale = (width - LEFT - RIGHT) / (t1 - t0)
        self.width = width

    def x(self, t: float) -> float:
        return LEFT + (min(max(t, self.t0), self.t1) - self.t0) * self.scale

    def attrs(self) -> str:
        """The axis on every SVG, for tools and tests: ``x = data-x0 + (t - data-t0) * data-scale``."""
        return f' data-t0="{self.t0!r}" data-t1="{self.t1!r}" data-x0="{LEFT}" data-scale="{self.scale!r}"'

    def bucket(self) -> int:
        """Seconds per bucket of blocked changes on this axis (:func:`scales.bucket_seconds`)."""
        return bucket_seconds(self.t1 - self.t0, self.width - LEFT - RIGHT)

    def ticks(self) -> list[tuple[float, str, bool]]:
        span = self.t1 - self.t0
        step = next((s for s in _TIME_STEPS if span / s <= 12), _TIME_STEPS[-1])
        first = math.ceil(self.t0 / step) * step
        out = []
        t = first
        while t <= self.t1:
            dt = datetime.fromtimestamp(t, UTC)
            midnight = dt.hour == 0 and dt.minute == 0
            label = dt.strftime("%b %d") if midnight or step >= 86400 else dt.strftime("%H:%M")
            out.append((t, label, midnight))
            t += step
        return out


def axis_label(value: float, div: float, suffix: str) -> str:
    v = value / div
    text = f"{v:.2f}".rstrip("0").rstrip(".") if v % 1 else f"{v:.0f}"
    return text + suffix


class Chart:
    """One SVG chart: a shared time axis, its own y axis, lines, steps, bands and marks."""

    def __init__(
        self,
        axis: Axis,
        height: int,
        y_max: float,
        y_label: str,
        *,
        div: float = 1.0,
        suffix: str = "",
        integer: bool = False,
        y_min: float = 0.0,
    ) -> None:
        self.axis, self.height = axis, height
        self.top, self.bottom = 14, height - 22
        # Five steps where there is room for their labels: the axis ends closer above the highest value.
        n = 5 if height >= 140 else 4
        step = _nice_step(y_max - y_min, n) if integer else _nice_step((y_max - y_min) / div, n) * div
        if integer:  # whole replicas: 2.5 becomes 2, anything below 1 becomes 1
            step = max(1.0, float(math.floor(step)))
        self.y_min = y_min
        self.y_max = max(y_min + step, math.ceil(y_max / step) * step)
        self.step, self.div, self.suffix, self.y_label = step, div, suffix, y_label
        self.parts: list[str] = []

    def y(self, v: float) -> float:
        frac = (v - self.y_min) / (self.y_max - self.y_min)
        return self.bottom - min(max(frac, -0.02), 1.04) * (self.bottom - self.top)

    def grid(self) -> None:
        a = self.axis
        p = self.parts
        for t, label, strong in a.ticks():
            x = a.x(t)
            p.append(
                f'<line x1="{_fmt(x)}" x2="{_fmt(x)}" y1="{self.top}" y2="{self.bottom}" '
                f'stroke="{"#94a3b8" if strong else "#e2e8f0"}" stroke-width="1"/>'
            )
            p.append(
                f'<text x="{_fmt(x)}" y="{self.height - 6}" text-anchor="middle" '
                f'class="{"tl strong" if strong else "tl"}">'
                f"{label}</text>"
            )
        v = self.y_min
        while v <= self.y_max + 1e-9 * max(1.0, self.y_max):
            y = self.y(v)
            p.append(f'<line x1="{LEFT}" x2="{a.width - RIGHT}" y1="{_fmt(y)}" y2="{_fmt(y)}" stroke="#eef2f7"/>')
            p.append(
                f'<text x="{LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end" class="yl">'
                f"{axis_label(v, self.div, self.suffix)}</text>"
            )
            v += self.step
        p.append(
            f'<text x="12" y="{_fmt((self.top + self.bottom) / 2)}" class="yt" '
            f'transform="rotate(-90 12 {_fmt((self.top + self.bottom) / 2)})" text-anchor="middle">'
            f"{html.escape(self.y_label)}</text>"
        )
        p.append(
            f'<rect x="{LEFT}" y="{self.top}" width="{a.width - LEFT - RIGHT}" height="{self.bottom - self.top}" '
            'fill="none" stroke="#cbd5e1"/>'
        )

    def band(self, points: Sequence[tuple[float, float, float, float]], color: str) -> None:
        pts = bucket_points(points, self.axis)
        if not pts:
            return
        upper = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(hi))}" for t, _, _, hi in pts)
        lower = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(lo))}" for t, _, lo, _ in reversed(pts))
        self.parts.append(
            f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="{BAND_OPACITY}" stroke="none"/>'
        )

    def line(self, points: Sequence[tuple[float, float]], color: str, width: float = 1.5, dash: str = "") -> None:
        if not points:
            return
        if len(points) > 2 * (self.axis.width - LEFT - RIGHT):
            points = [(t, avg) for t, avg, _, _ in bucket_points([(t, v, v, v) for t, v in points], self.axis)]
        d = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(v))}" for t, v in points)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{width}"{dash_attr} '
            'stroke-linejoin="round"/>'
        )

    def steps(
        self,
        points: Sequence[tuple[float, float | None]],
        color: str,
        width: float = 2.0,
        dash: str = "",
        until: float | None = None,
    ) -> None:
        """A step line: each value holds until the next; ``None`` breaks the line."""
        segs: list[list[tuple[float, float]]] = []
        cur: list[tuple[float, float]] = []
        last: float | None = None
        end = self.axis.t1 if until is None else until
        for i, (t, v) in enumerate(points):
            if v is None:
                if cur:
                    cur.append((t, cur[-1][1]))
                    segs.append(cur)
                cur, last = [], None
                continue
            if last is not None and v == last and i != len(points) - 1:
                continue
            if cur:
                cur.append((t, cur[-1][1]))
            cur.append((t, v))
            last = v
        if cur:
            cur.append((end, cur[-1][1]))
            segs.append(cur)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        for seg in segs:
            d = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(v))}" for t, v in seg)
            self.parts.append(
                f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{width}"{dash_attr}/>'
            )

    def mark(self, t: float, v: float, kind: str, color: str, title: str, *, up: bool = True, data: str = "") -> None:
        x, y = self.axis.x(t), self.y(v)
        tt = f"<title>{html.escape(title)}</title>"
        if kind == "decision":
            s = 5.0
            pts = (
                f"{_fmt(x)},{_fmt(y - s)} {_fmt(x - s)},{_fmt(y + s * 0.8)} {_fmt(x + s)},{_fmt(y + s * 0.8)}"
                if up
                else f"{_fmt(x)},{_fmt(y + s)} {_fmt(x - s)},{_fmt(y - s * 0.8)} {_fmt(x + s)},{_fmt(y - s * 0.8)}"
            )
            self.parts.append(
                f'<polygon points="{pts}" fill="{color}" stroke="#fff" stroke-width="1"{data}>{tt}</polygon>'
            )
        else:
            self.parts.append(
                f'<circle cx="{_fmt(x)}" cy="{_fmt(y)}" r="2.6" fill="none" stroke="{color}" stroke-opacity="0.75" '
                f'stroke-width="1.2"{data}>{tt}</circle>'
            )

    def ranges(self, ranges: Sequence[WantedRange], title: Callable[[WantedRange], str]) -> None:
        """One faint bar per bucket from the lowest to the highest value held back (at least 4 px tall)."""
        for r in ranges:
            x0, x1 = self.axis.x(r.start), self.axis.x(r.end)
            y_hi, y_lo = self.y(r.high), self.y(r.low)
            if y_lo - y_hi < 4:
                mid = (y_lo + y_hi) / 2
                y_hi, y_lo = mid - 2, mid + 2
            self.parts.append(
                f'<rect class="wanted" x="{_fmt(x0 + 0.5)}" y="{_fmt(y_hi)}" width="{_fmt(max(1.0, x1 - x0 - 1))}" '
                f'height="{_fmt(y_lo - y_hi)}" fill="{reason_color(r.reason)}" fill-opacity="{WANTED_OPACITY}" '
                f'data-start="{r.start!r}" data-end="{r.end!r}" data-count="{r.count}">'
                f"<title>{html.escape(title(r))}</title></rect>"
            )

    def svg(self, css_class: str = "chart") -> str:
        return (
            f'<svg class="{css_class}" width="{self.axis.width}" height="{self.height}" '
            f'viewBox="0 0 {self.axis.width} {self.height}" role="img"{self.axis.attrs()}>{"".join(self.parts)}</svg>'
        )


def bucket_points(
    points: Sequence[tuple[float, float, float, float]], axis: Axis
) -> list[tuple[float, float, float, float]]:
    """At most about one point per pixel column of ``axis`` (:func:`scales.per_column`)."""
    return per_column(points, axis.t0, axis.t1, max(1, axis.width - LEFT - RIGHT))


def reason_color(reason: str) -> str:
    return REASON_COLORS.get(reason, OTHER_REASON)


def _data_attrs(e: AuditEvent) -> str:
    return f' data-tick="{e.ts!r}" data-type="{e.type}" data-id="{html.escape(str(e.event.get("id", "")))}"'


def _title(e: AuditEvent) -> str:
    d = e.data
    when = datetime.fromtimestamp(e.ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if e.type == "decision":
        text = f"{when} decision: " + "; ".join(describe_change(d))
        if d.get("blocked"):
            text += "\nheld back: " + held_back(d["blocked"])
    elif e.type == "blocked":
        text = f"{when} blocked: " + held_back(d.get("blocked") or [])
    else:
        text = text_line(e)
    reasons = d.get("reasons")
    if isinstance(reasons, list) and reasons:
        text += "\nrule: " + "; ".join(map(str, reasons))
    return text


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def step_words(step: int) -> str:
    return f"{step // 3600} h" if step % 3600 == 0 else f"{step // 60} min"


def _bucket_title(b: Bucket, step: int) -> str:
    per = ", ".join(f"{n} {r}" for r, n in b.reasons)
    return f"{_when(b.start)} + {step_words(step)}: {b.count} blocked report(s) ({per})"


STRIP_BAR = 22  # px of the tallest bucket of blocked reports


def decision_strip(w: WorkloadData, axis: Axis) -> str:
    """Decisions one mark each at their tick; blocked reports counted per time bucket, a bar each.

    A bar's height is its count against the busiest bucket of the workload (named at the right),
    stacked by reason, so a busy workload reads as a histogram instead of a solid bar.
    """
    step = axis.bucket()
    buckets = blocked_buckets(w.events, step)
    peak = max((b.count for b in buckets), default=0)
    top_blocked, applied_y = 27, 27 + STRIP_BAR + 9
    h = applied_y + 8
    parts = []
    for t, _, strong in axis.ticks():
        x = axis.x(t)
        parts.append(
            f'<line x1="{_fmt(x)}" x2="{_fmt(x)}" y1="4" y2="{applied_y - 4}" '
            f'stroke="{"#94a3b8" if strong else "#e2e8f0"}"/>'
        )
    parts.append(f'<text x="{LEFT - 6}" y="17" text-anchor="end" class="yl">decisions</text>')
    parts.append(f'<text x="{LEFT - 6}" y="36" text-anchor="end" class="yl">blocked</text>')
    parts.append(f'<text x="{LEFT - 6}" y="48" text-anchor="end" class="yl">per {step_words(step)}</text>')
    parts.append(f'<line x1="{LEFT}" x2="{axis.width - RIGHT}" y1="24" y2="24" stroke="#cbd5e1"/>')
    if peak:
        parts.append(
            f'<text x="{axis.width - RIGHT + 4}" y="{top_blocked + STRIP_BAR}" class="bl">max {peak}</text>'
            f'<line x1="{axis.width - RIGHT}" x2="{axis.width - RIGHT + 3}" y1="{top_blocked + STRIP_BAR}" '
            f'y2="{top_blocked + STRIP_BAR}" stroke="#94a3b8"/>'
        )
    for b in buckets:
        x0, x1 = axis.x(b.start), axis.x(b.end)
        width = max(1.0, x1 - x0 - 1.5)
        title = f"<title>{html.escape(_bucket_title(b, step))}</title>"
        parts.append(
            f'<g class="bucket" data-start="{b.start!r}" data-end="{b.end!r}" data-count="{b.count}" '
            f'data-x="{_fmt(x0)}">{title}'
        )
        y = float(top_blocked)
        for reason, n in b.reasons:  # stacked downwards from the axis line, largest reason first
            seg = STRIP_BAR * n / peak
            parts.append(
                f'<rect x="{_fmt(x0 + 0.75)}" y="{_fmt(y)}" width="{_fmt(width)}" height="{_fmt(seg)}" '
                f'fill="{reason_color(reason)}"/>'
            )
            y += seg
        parts.append("</g>")
    for e in w.events:
        x = _fmt(axis.x(e.ts))
        title = f"<title>{html.escape(_title(e))}</title>"
        if e.type == "decision":
            color = "#94a3b8" if e.data.get("dry_run") else DECISION_COLOR
            parts.append(
                f'<rect class="ev" x="{float(x) - 1.5:.1f}" y="6" width="3" height="16" fill="{color}"'
                f"{_data_attrs(e)}>{title}</rect>"
            )
        elif e.type in ("applied", "apply_failed"):
            color = DECISION_COLOR if e.type == "applied" else "#b91c1c"
            parts.append(
                f'<circle class="ev" cx="{x}" cy="{applied_y}" r="2.5" fill="{color}"{_data_attrs(e)}>{title}</circle>'
            )
    return (
        f'<svg class="strip" width="{axis.width}" height="{h}" viewBox="0 0 {axis.width} {h}" role="img"{axis.attrs()}>'
        f"{''.join(parts)}</svg>"
    )


def _value_at(points: Sequence[tuple[float, Any]], t: float) -> Any:
    """The value of a step series at ``t`` (the last point at or before it)."""
    value = None
    for pt, v in points:
        if pt > t:
            break
        value = v
    return value


def replica_wanted(w: WorkloadData) -> Callable[[AuditEvent], list[tuple[float, str]]]:
    """(value, reason) of each blocked replicas change of an event (the replicas then when none is given)."""

    def wanted(e: AuditEvent) -> list[tuple[float, str]]:
        if e.type not in ("decision", "blocked"):
            return []
        out = []
        for b in e.data.get("blocked") or []:
            if b.get("target") != "replicas":
                continue
            v = b.get("wanted") if isinstance(b.get("wanted"), int) else _value_at(w.replicas, e.ts)
            if isinstance(v, int):
                out.append((float(v), str(b.get("reason"))))
        return out

    return wanted


def forecasts(w: WorkloadData) -> list[tuple[AuditEvent, float, float]]:
    """(event, time, load) of each forecast a decision pre-scaled for (``spec.predictive``: its
    ``inputs.forecast``, the load in replicas at the time it is for), drawn beside the replicas and
    the HPA's recommendation (the load as the HPA saw it, rounded up) it forecast."""
    out: list[tuple[AuditEvent, float, float]] = []
    for e in w.events:
        f = (e.data.get("inputs") or {}).get("forecast") if e.type == "decision" else None
        if isinstance(f, Mapping):
            at, load = f.get("at"), f.get("load")
            if isinstance(at, int | float) and isinstance(load, int | float):
                out.append((e, float(at), float(load)))
    return out


def forecast_title(e: AuditEvent, at: float, load: float) -> str:
    return f"forecast of {load:g} replicas' load for {_when(at)}, made {_when(e.ts)} (spec.predictive)"


def replica_range(w: WorkloadData, ranges: Sequence[WantedRange]) -> tuple[float, float]:
    """(low, high) of the replicas axis: every value drawn on it, from zero."""
    values: list[float] = [v for _, v in w.replicas] + [v for _, v in w.hpa_desired]
    values += [load for _, _, load in forecasts(w)]
    values += [b for _, lo, hi in w.bounds for b in (lo, hi) if b is not None]
    values += [r.high for r in ranges]
    for e in w.events:
        r = e.data.get("replicas")
        if e.type == "decision" and isinstance(r, Mapping) and isinstance(r.get("to"), int):
            values.append(r["to"])
    return 0.0, max(values or [1]) * 1.08


def _range_title(r: WantedRange, step: int, fmt: Callable[[float], str]) -> str:
    span = fmt(r.low) if r.low == r.high else f"{fmt(r.low)} to {fmt(r.high)}"
    return f"{_when(r.start)} + {step_words(step)}: {r.count} blocked change(s) wanting {span} (mostly {r.reason})"


def replicas_chart(w: WorkloadData, axis: Axis) -> str | None:
    decisions = [e for e in w.events if e.type in ("decision", "blocked")]
    if not w.replicas and not any("replicas" in e.data for e in decisions):
        return None
    step = axis.bucket()
    ranges = wanted_ranges(w.events, step, replica_wanted(w))
    _, top = replica_range(w, ranges)
    c = Chart(axis, 140, top, "replicas", integer=True)
    c.grid()
    if w.bounds:
        c.steps([(max(t, axis.t0), hi) for t, _, hi in w.bounds], BOUND, 1.2, "6 4")
        c.steps([(max(t, axis.t0), lo) for t, lo, _ in w.bounds], BOUND, 1.2, "6 4")
        lo, hi = w.bounds[-1][1], w.bounds[-1][2]
        for v, word in ((hi, "max"), (lo, "min")):
            if v is not None:
                c.parts.append(
                    f'<text x="{axis.width - RIGHT + 4}" y="{_fmt(c.y(v) + 4)}" class="bl">{word} {v}</text>'
                )
    # Held-back values behind the lines; the HPA recommendation over the replicas (it often equals
    # them and would vanish underneath), thinner and dashed so both can be told apart.
    c.ranges(ranges, lambda r: _range_title(r, step, lambda v: f"{v:g} replicas"))
    c.steps(w.replicas, REPLICAS, 2.6)
    c.steps(w.hpa_desired, HPA, 1.6, "5 4")
    for e, at, load in forecasts(w):  # hollow circles: what the forecaster expected
        c.mark(at, load, "forecast", FORECAST, forecast_title(e, at, load))
    for e in decisions:
        r = e.data.get("replicas")
        if e.type == "decision" and isinstance(r, Mapping) and isinstance(r.get("to"), int):
            up = not (isinstance(r.get("from"), int) and r["to"] < r["from"])
            color = "#94a3b8" if e.data.get("dry_run") else DECISION_COLOR
            c.mark(e.ts, r["to"], "decision", color, _title(e), up=up, data=_data_attrs(e))
    return c.svg()


def resource_marks(w: WorkloadData, cname: str, res: str) -> list[tuple[AuditEvent, float, str, str, bool]]:
    """(event, value, "decision", colour, upwards) of the decisions on one container resource."""
    marks: list[tuple[AuditEvent, float, str, str, bool]] = []
    for e in w.events:
        if e.type != "decision":
            continue
        for section in ("requests", "limits"):
            ch = ((e.data.get("containers") or {}).get(cname) or {}).get(section, {}).get(res)
            if isinstance(ch, Mapping):
                try:
                    to = parse_quantity(ch["to"]) / 1000
                    before = parse_quantity(ch["from"]) / 1000 if ch.get("from") is not None else None
                except Exception:
                    continue
                color = "#94a3b8" if e.data.get("dry_run") else (DECISION_COLOR if section == "requests" else LIMIT)
                marks.append((e, to, "decision", color, before is None or to >= before))
    return marks


def resource_wanted(cname: str, res: str) -> Callable[[AuditEvent], list[tuple[float, str]]]:
    """(value, reason) of each blocked change of one container resource in an event."""
    target = f"{cname}/{res}"

    def wanted(e: AuditEvent) -> list[tuple[float, str]]:
        out = []
        for b in e.data.get("blocked") or []:
            if b.get("target") == target and b.get("wanted") is not None:
                try:
                    out.append((parse_quantity(b["wanted"]) / 1000, str(b.get("reason"))))
                except Exception:
                    continue
        return out

    return wanted


def resource_range(
    rd: ResourceData, res: str, marks: Sequence[tuple[AuditEvent, float, str, str, bool]], ranges: Sequence[WantedRange]
) -> ValueRange:
    """The y axis of one container resource (:func:`scales.value_range`), for both painters."""
    shown = [hi for _, _, _, hi in rd.usage.points] + [v for _, v in rd.requests if v is not None]
    shown += [v for _, v in rd.vpa] + [m[1] for m in marks] + [r.high for r in ranges]
    return value_range(res, shown, [v for _, v in rd.limits if v is not None])


def usage_band(rd: ResourceData, vr: ValueRange) -> tuple[bool, str]:
    """Whether the pod band is drawn on the axis ``vr`` (:func:`scales.band_visible`), and the usage
    line's legend text: without a band it says why there is none."""
    spread = pod_spread(rd.usage.points)
    if band_visible(spread, vr):
        return True, "usage (per-pod average)"
    if spread == 0:
        return False, "usage (per-pod average; no spread between pods)"
    return False, "usage (per-pod average; pods within 1 % of the axis)"


def resource_chart(w: WorkloadData, cname: str, res: str, rd: ResourceData, axis: Axis) -> str | None:
    marks = resource_marks(w, cname, res)
    step = axis.bucket()
    ranges = wanted_ranges(w.events, step, resource_wanted(cname, res))
    if not (rd.usage.points or rd.requests or rd.limits or marks or ranges):
        return None
    vr = resource_range(rd, res, marks, ranges)
    u = vr.unit
    c = Chart(axis, 150, vr.high, u.name, div=u.div, suffix=u.suffix, y_min=vr.low)
    c.grid()
    c.ranges(ranges, lambda r: _range_title(r, step, lambda v: axis_label(v, u.div, u.suffix)))
    if usage_band(rd, vr)[0]:
        c.band(rd.usage.points, BAND)
    c.line([(t, avg) for t, avg, _, _ in rd.usage.points], USAGE, 1.3)
    c.steps(rd.vpa, VPA, 1.4, "3 3")
    # A limit above the axis is not drawn at its edge (it would read as a value there); it is named.
    c.steps([(t, v if v is None or v <= c.y_max else None) for t, v in rd.limits], LIMIT, 2.0, "7 4")
    c.steps(rd.requests, REQUEST, 2.2)
    if vr.above:
        c.parts.append(
            f'<text x="{axis.width - RIGHT + 4}" y="{c.top + 4}" class="bl">limit</text>'
            f'<text x="{axis.width - RIGHT + 4}" y="{c.top + 16}" class="bl">'
            f"\u2191 {axis_label(vr.above[-1], u.div, u.suffix)}</text>"
        )
    for e, v, kind, color, up in marks:
        c.mark(e.ts, v, kind, color, _title(e), up=up, data=_data_attrs(e))
    return c.svg()


def series_chart(w: WorkloadData, name: str, points: list[tuple[float, float]], axis: Axis) -> str:
    target = w.series_target.get(name)
    top = max([v for _, v in points] + ([target] if target is not None else [])) * 1.08
    c = Chart(axis, 120, top or 1.0, "value")
    c.grid()
    if target is not None:
        c.steps([(axis.t0, target)], BOUND, 1.2, "6 4")
        c.parts.append(
            f'<text x="{axis.width - RIGHT + 4}" y="{_fmt(c.y(target) + 4)}" class="bl">target {target:g}</text>'
        )
    c.line(points, USAGE, 1.3)
    return c.svg()
