"""``tandem report``: a self-contained HTML report of what tandem did, per workload, to look at.

    tandem report FILE... [--policy F]... [--config F] [--cluster C] [--sync-period S]
                  [--out DIR] [--workload NAME|KEY]... [--png auto|chromium|matplotlib|none] [--title T]

FILE is a recorded input stream (what ``tandem replay`` reads: the report runs the replay itself,
embedded, through :class:`scaling.engine.Engine`, the very code ``tandem replay`` runs) or an audit
file (CloudEvents, what ``tandem replay --out`` writes; applier results in it are shown too).  Each
file is classified by its first line.  ``DIR`` (default ``tandem-report``) receives:

* ``index.html``: one page, no script, no network: inline SVG charts and CSS.  Per workload, a strip
  with one mark per audit event (decisions above, blocked changes below, coloured by reason), the
  replicas over time with the policy's min/max and the HPA recommendation, and per container and
  resource the usage against requests and limits (and the VPA target).  Usage is the **per-pod
  average** of the container's samples at each metric event (the shaded band is the lowest to the
  highest pod), the unit requests and limits are set in.  Every mark sits at its event's tick on one
  time axis shared by all charts; hovering it shows the event.
* ``audit.jsonl``: the audit stream the report shows (``tandem audit explain KEY DIR/audit.jsonl``).
* ``<cluster>_<namespace>_<kind>_<name>.png`` per workload: drawn with matplotlib when it is
  installed, otherwise screenshots of the HTML by headless Chromium when a ``chromium`` binary is on
  the PATH, otherwise none (``index.html`` says so).  ``--png none`` skips them.

From an audit file alone there are no usage samples: replicas, requests and limits are then drawn
from the decisions' ``from``/``to`` values.  Exit codes: 0, 1 a bad line under ``--strict``, 2 a
usage error or a missing file.
"""

from __future__ import annotations

import html
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from analysis.audit import AuditEvent, _event_ts, describe_change, held_back, text_line

__all__ = ["ReportData", "WorkloadData", "build", "collect", "render_html"]

WIDTH = 1240  # SVG width (px)
LEFT, RIGHT = 78, 60  # plot margins (the right one holds the bound labels and the last time label)
DECISION_COLOR = "#0f766e"
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
USAGE, BAND, REQUEST, LIMIT, VPA, HPA, BOUND, REPLICAS = (
    "#2563eb",
    "#93c5fd",
    "#16a34a",
    "#dc2626",
    "#9333ea",
    "#f59e0b",
    "#64748b",
    "#0f172a",
)


# =============================================================================== data


@dataclass
class Usage:
    #: (ts, per-pod average, lowest pod, highest pod)
    points: list[tuple[float, float, float, float]] = field(default_factory=list)


@dataclass
class ResourceData:
    usage: Usage = field(default_factory=Usage)
    requests: list[tuple[float, float | None]] = field(default_factory=list)
    limits: list[tuple[float, float | None]] = field(default_factory=list)
    vpa: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class WorkloadData:
    key: str
    policy: dict[str, Any] | None = None
    #: (ts, min, max) whenever the bounds are known or change.
    bounds: list[tuple[float, int | None, int | None]] = field(default_factory=list)
    replicas: list[tuple[float, int]] = field(default_factory=list)
    hpa_desired: list[tuple[float, int]] = field(default_factory=list)
    containers: dict[str, dict[str, ResourceData]] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    series_target: dict[str, float] = field(default_factory=dict)
    events: list[AuditEvent] = field(default_factory=list)

    def resource(self, container: str, res: str) -> ResourceData:
        return self.containers.setdefault(container, {}).setdefault(res, ResourceData())


@dataclass
class ReportData:
    workloads: dict[str, WorkloadData] = field(default_factory=dict)
    audit: list[AuditEvent] = field(default_factory=list)
    t0: float = 0.0
    t1: float = 1.0
    from_stream: bool = False
    inputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def workload(self, key: str) -> WorkloadData:
        w = self.workloads.get(key)
        if w is None:
            w = self.workloads[key] = WorkloadData(key)
        return w


def _is_audit_file(path: str) -> bool:
    from streams.inputs import iter_lines

    for _, line in iter_lines(path):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        return isinstance(obj, dict) and "specversion" in obj
    return False


def _cores_or_bytes(res: str, milli: int) -> float:
    return milli / 1000.0


def _policy_bounds(manifest: Mapping[str, Any], ref: Any) -> tuple[int | None, int | None]:
    """The policy's replica bounds (:meth:`Policy.bounds`), when it declares both."""
    from scaling.policies import parse_policy

    try:
        bounds = parse_policy(manifest, ref).bounds()
    except Exception:
        return None, None
    if bounds.min_replicas is None or bounds.max_replicas is None:
        return None, None
    return bounds.min_replicas, bounds.max_replicas


def collect(
    stream_paths: Sequence[str],
    audit_paths: Sequence[str],
    *,
    settings: Any,
    policies: Iterable[Mapping[str, Any]] = (),
    strict: bool = False,
    err: IO[str] | None = None,
) -> ReportData:
    """Replay the streams (embedded) and read the audit files; gather every chart's data."""
    from analysis.audit import read_file
    from scaling.engine import Engine
    from scaling.quantity import parse_quantity
    from streams.runner import ReplayStats, no_policy_warning, read_sorted, run

    err = err if err is not None else sys.stderr
    data = ReportData(from_stream=bool(stream_paths), inputs=[*stream_paths, *audit_paths])
    engine = Engine(settings)
    for manifest in policies:
        ref = engine.add_policy(manifest)
        w = data.workload(ref.key)
        lo, hi = _policy_bounds(manifest, ref)
        if lo is not None:
            w.bounds.append((-math.inf, lo, hi))
    audit_raw: list[dict[str, Any]] = []

    def emitted(items: list[tuple[str, dict[str, Any]]]) -> None:
        for kind, ev in items:
            if kind == "audit":
                audit_raw.append(ev)
            elif kind == "hpa" and isinstance(ev.get("desired_replicas"), int):
                data.workload(_key(ev["workload"])).hpa_desired.append((ev["ts"], ev["desired_replicas"]))
            elif kind == "vpa":
                w = data.workload(_key(ev["workload"]))
                for cname, rec in (ev.get("containers") or {}).items():
                    for res, q in (rec.get("target") or {}).items():
                        w.resource(cname, res).vpa.append((ev["ts"], _cores_or_bytes(res, parse_quantity(q))))

    if stream_paths:
        stats = ReplayStats()

        def report(msg: str) -> None:
            err.write(msg + "\n")

        events = read_sorted(stream_paths, report, stats, strict=strict)
        run(engine, events, emitted, report, each=lambda event: _gather(data, event))
        warning = no_policy_warning(engine)
        if warning is not None:
            report(f"tandem report: {warning}")
        if events:
            data.t0, data.t1 = events[0][0], events[-1][0]

    seq = 0
    seen: set[str] = set()
    for ev in audit_raw:
        ts = _event_ts(ev)
        if ts is None:
            continue
        seen.add(str(ev.get("id")))
        data.audit.append(AuditEvent(orjson.dumps(ev), ev, ts, seq))
        seq += 1
    for path in audit_paths:
        for ae in read_file(path, err):
            if ae.type in ("decision", "blocked") and str(ae.event.get("id")) in seen:
                continue  # the replay made the same decision (same id)
            seen.add(str(ae.event.get("id")))
            data.audit.append(AuditEvent(ae.raw, ae.event, ae.ts, seq))
            seq += 1
    for ae in data.audit:
        w = data.workload("/".join(ae.workload))
        w.events.append(ae)
        if ae.type in ("decision", "blocked") and w.policy is None:
            w.policy = dict(ae.data.get("policy") or {})
    for w in data.workloads.values():
        w.events.sort(key=lambda e: (e.ts, e.seq))
        _from_decisions(w, data.from_stream)
    times = [e.ts for e in data.audit]
    if not data.from_stream and times:
        data.t0, data.t1 = min(times), max(times)
    elif times:
        data.t0, data.t1 = min(data.t0, *times), max(data.t1, *times)
    if data.t1 <= data.t0:
        data.t1 = data.t0 + 60.0
    return data


def _gather(data: ReportData, event: Any) -> None:
    """What one input event the engine took adds to the charts: usage, spec, recommendations, bounds."""
    from scaling.events import HpaEvent, MetricEvent, PolicyEvent, VpaEvent, WorkloadEvent

    w = data.workload(event.workload.key)
    if isinstance(event, MetricEvent):
        by_container: dict[tuple[str, str], list[float]] = {}
        for s in event.samples:
            if s.cpu is not None:
                by_container.setdefault((s.container, "cpu"), []).append(s.cpu)
            if s.memory is not None:
                by_container.setdefault((s.container, "memory"), []).append(float(s.memory))
        for (cname, res), values in by_container.items():
            w.resource(cname, res).usage.points.append(
                (event.ts, sum(values) / len(values), min(values), max(values))
            )
        per_series: dict[str, list[float]] = {}
        for ss in event.series:
            per_series.setdefault(ss.series, []).append(ss.value)
        for name, values in per_series.items():
            w.series.setdefault(name, []).append((event.ts, sum(values) / len(values)))
    elif isinstance(event, WorkloadEvent):
        w.replicas.append((event.ts, event.replicas))
        for cname, cres in event.containers.items():
            for section in ("requests", "limits"):
                values = getattr(cres, section)
                for res in ("cpu", "memory"):
                    q = values.get(res)
                    getattr(w.resource(cname, res), section).append(
                        (event.ts, None if q is None else _cores_or_bytes(res, q.milli))
                    )
    elif isinstance(event, HpaEvent):
        if event.source != "tandem":
            w.hpa_desired.append((event.ts, event.desired_replicas))
        if not w.bounds and event.min_replicas is not None and event.max_replicas is not None:
            w.bounds.append((-math.inf, event.min_replicas, event.max_replicas))
    elif isinstance(event, VpaEvent):
        if event.source != "tandem":
            for cname, rec in event.containers.items():
                for res, q in rec.target.items():
                    w.resource(cname, res).vpa.append((event.ts, _cores_or_bytes(res, q.milli)))
    elif isinstance(event, PolicyEvent) and event.manifest is not None:
        lo, hi = _policy_bounds(event.manifest, event.workload)
        if lo is not None:
            w.bounds.append((event.ts, lo, hi))


def _key(workload: Mapping[str, str]) -> str:
    return f"{workload['cluster']}/{workload['namespace']}/{workload['kind']}/{workload['name']}"


def _from_decisions(w: WorkloadData, from_stream: bool) -> None:
    """What the decisions say: custom-metric targets, Tortoise's moving bounds, and (audit only) steps."""
    from scaling.quantity import parse_quantity

    for e in w.events:
        if e.type not in ("decision", "blocked"):
            continue
        d = e.data
        metric = (d.get("inputs") or {}).get("metric")
        if isinstance(metric, Mapping) and isinstance(metric.get("target"), int | float):
            w.series_target.setdefault(str(metric.get("series")), float(metric["target"]))
        hpa = d.get("hpa") or {}
        if e.type == "decision" and ("min_replicas" in hpa or "max_replicas" in hpa) and not d.get("dry_run"):
            lo, hi = (w.bounds[-1][1], w.bounds[-1][2]) if w.bounds else (None, None)
            lo = hpa.get("min_replicas", {}).get("to", lo)
            hi = hpa.get("max_replicas", {}).get("to", hi)
            w.bounds.append((e.ts, lo, hi))
        if from_stream or e.type != "decision" or d.get("dry_run"):
            continue
        r = d.get("replicas")
        if isinstance(r, Mapping):
            if isinstance(r.get("from"), int):
                w.replicas.append((e.ts - 1e-6, r["from"]))
            w.replicas.append((e.ts, r["to"]))
        for cname, sections in (d.get("containers") or {}).items():
            for section in ("requests", "limits"):
                for res, ch in (sections.get(section) or {}).items():
                    series = getattr(w.resource(cname, res), section)
                    try:
                        if ch.get("from") is not None:
                            series.append((e.ts - 1e-6, _cores_or_bytes(res, parse_quantity(ch["from"]))))
                        series.append((e.ts, _cores_or_bytes(res, parse_quantity(ch["to"]))))
                    except Exception:
                        continue
    w.bounds.sort(key=lambda b: b[0])


# =============================================================================== drawing


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


def _unit(res: str, top: float) -> tuple[float, str, str]:
    """(divisor, axis suffix, name) for a resource whose values reach ``top``."""
    if res == "cpu":
        return (0.001, "m", "CPU (millicores)") if top < 1.5 else (1.0, "", "CPU (cores)")
    if res == "memory":
        return (2**30, "Gi", "memory (GiB)") if top >= 2 * 2**30 else (2**20, "Mi", "memory (MiB)")
    return (1.0, "", res)


def _label(value: float, div: float, suffix: str) -> str:
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
        step = max(1.0, _nice_step(y_max - y_min, 4)) if integer else _nice_step((y_max - y_min) / div, 4) * div
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
                f"{_label(v, self.div, self.suffix)}</text>"
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
        pts = _bucket(points, self.axis)
        if not pts:
            return
        upper = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(hi))}" for t, _, _, hi in pts)
        lower = " ".join(f"{_fmt(self.axis.x(t))},{_fmt(self.y(lo))}" for t, _, lo, _ in reversed(pts))
        self.parts.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.35" stroke="none"/>')

    def line(self, points: Sequence[tuple[float, float]], color: str, width: float = 1.5, dash: str = "") -> None:
        if not points:
            return
        if len(points) > 2 * (self.axis.width - LEFT - RIGHT):
            points = [(t, avg) for t, avg, _, _ in _bucket([(t, v, v, v) for t, v in points], self.axis)]
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
            s = 6.0
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

    def svg(self, css_class: str = "chart") -> str:
        return (
            f'<svg class="{css_class}" width="{self.axis.width}" height="{self.height}" '
            f'viewBox="0 0 {self.axis.width} {self.height}" role="img"{self.axis.attrs()}>{"".join(self.parts)}</svg>'
        )


def _bucket(points: Sequence[tuple[float, float, float, float]], axis: Axis) -> list[tuple[float, float, float, float]]:
    """At most about one point per pixel column: mean of the averages, lowest low, highest high."""
    px = max(1, axis.width - LEFT - RIGHT)
    if len(points) <= px:
        return list(points)
    width = (axis.t1 - axis.t0) / px
    out: list[tuple[float, float, float, float]] = []
    cur: list[tuple[float, float, float, float]] = []
    cur_b = None
    for p in points:
        b = int((p[0] - axis.t0) / width)
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


def _reason_color(reason: str) -> str:
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


def _strip(w: WorkloadData, axis: Axis) -> str:
    """One mark per audit event of the workload at its tick: decisions on top, blocked below."""
    h = 54
    parts = []
    for t, _, strong in axis.ticks():
        x = axis.x(t)
        parts.append(
            f'<line x1="{_fmt(x)}" x2="{_fmt(x)}" y1="4" y2="{h - 16}" stroke="{"#94a3b8" if strong else "#e2e8f0"}"/>'
        )
    parts.append(f'<text x="{LEFT - 6}" y="17" text-anchor="end" class="yl">decisions</text>')
    parts.append(f'<text x="{LEFT - 6}" y="36" text-anchor="end" class="yl">blocked</text>')
    parts.append(f'<line x1="{LEFT}" x2="{axis.width - RIGHT}" y1="24" y2="24" stroke="#cbd5e1"/>')
    for e in w.events:
        x = _fmt(axis.x(e.ts))
        title = f"<title>{html.escape(_title(e))}</title>"
        if e.type == "decision":
            color = "#94a3b8" if e.data.get("dry_run") else DECISION_COLOR
            parts.append(
                f'<rect class="ev" x="{float(x) - 1.5:.1f}" y="6" width="3" height="16" fill="{color}"'
                f"{_data_attrs(e)}>{title}</rect>"
            )
        elif e.type == "blocked":
            reasons = [str(b.get("reason")) for b in e.data.get("blocked") or []]
            color = _reason_color(reasons[0] if reasons else "")
            parts.append(
                f'<rect class="ev" x="{float(x) - 1:.1f}" y="27" width="2" height="12" fill="{color}"'
                f"{_data_attrs(e)}>{title}</rect>"
            )
        elif e.type in ("applied", "apply_failed"):
            color = DECISION_COLOR if e.type == "applied" else "#b91c1c"
            parts.append(
                f'<circle class="ev" cx="{x}" cy="{h - 10}" r="2.5" fill="{color}"{_data_attrs(e)}>{title}</circle>'
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


def _replicas_chart(w: WorkloadData, axis: Axis) -> str | None:
    decisions = [e for e in w.events if e.type in ("decision", "blocked")]
    if not w.replicas and not any("replicas" in e.data for e in decisions):
        return None
    values = [v for _, v in w.replicas] + [v for _, v in w.hpa_desired]
    values += [b for _, lo, hi in w.bounds for b in (lo, hi) if b is not None]
    for e in decisions:
        r = e.data.get("replicas")
        if isinstance(r, Mapping):
            values.append(r.get("to", 0))
        for b in e.data.get("blocked") or []:
            if b.get("target") == "replicas" and isinstance(b.get("wanted"), int):
                values.append(b["wanted"])
    c = Chart(axis, 140, max(values or [1]) * 1.08, "replicas", integer=True)
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
    c.steps(w.hpa_desired, HPA, 1.2, "2 3")
    c.steps(w.replicas, REPLICAS, 2.2)
    for e in decisions:
        r = e.data.get("replicas")
        if e.type == "decision" and isinstance(r, Mapping) and isinstance(r.get("to"), int):
            up = not (isinstance(r.get("from"), int) and r["to"] < r["from"])
            color = "#94a3b8" if e.data.get("dry_run") else DECISION_COLOR
            c.mark(e.ts, r["to"], "decision", color, _title(e), up=up, data=_data_attrs(e))
        for b in e.data.get("blocked") or []:
            if b.get("target") != "replicas":
                continue
            v = b.get("wanted") if isinstance(b.get("wanted"), int) else _value_at(w.replicas, e.ts)
            if isinstance(v, int):
                c.mark(e.ts, v, "blocked", _reason_color(str(b.get("reason"))), _title(e), data=_data_attrs(e))
    return c.svg()


def _resource_marks(w: WorkloadData, cname: str, res: str) -> list[tuple[AuditEvent, float, str, str, bool]]:
    """(event, value, "decision"|"blocked", colour, upwards) for one container resource's chart."""
    from scaling.quantity import parse_quantity

    target = f"{cname}/{res}"
    marks: list[tuple[AuditEvent, float, str, str, bool]] = []
    for e in w.events:
        if e.type not in ("decision", "blocked"):
            continue
        for section in ("requests", "limits"):
            ch = ((e.data.get("containers") or {}).get(cname) or {}).get(section, {}).get(res)
            if e.type == "decision" and isinstance(ch, Mapping):
                try:
                    to = parse_quantity(ch["to"]) / 1000
                    before = parse_quantity(ch["from"]) / 1000 if ch.get("from") is not None else None
                except Exception:
                    continue
                color = "#94a3b8" if e.data.get("dry_run") else (DECISION_COLOR if section == "requests" else LIMIT)
                marks.append((e, to, "decision", color, before is None or to >= before))
        for b in e.data.get("blocked") or []:
            if b.get("target") == target and b.get("wanted") is not None:
                try:
                    marks.append(
                        (e, parse_quantity(b["wanted"]) / 1000, "blocked", _reason_color(str(b.get("reason"))), True)
                    )
                except Exception:
                    continue
    return marks


def _resource_chart(w: WorkloadData, cname: str, res: str, rd: ResourceData, axis: Axis) -> str | None:
    marks = _resource_marks(w, cname, res)
    if not (rd.usage.points or rd.requests or rd.limits or marks):
        return None
    values = [hi for _, _, _, hi in rd.usage.points] + [v for _, v in rd.requests if v is not None]
    values += [v for _, v in rd.limits if v is not None] + [v for _, v in rd.vpa] + [m[1] for m in marks]
    top = max(values or [1.0]) * 1.08
    div, suffix, name = _unit(res, top)
    c = Chart(axis, 150, top, name, div=div, suffix=suffix)
    c.grid()
    c.band(rd.usage.points, BAND)
    c.line([(t, avg) for t, avg, _, _ in rd.usage.points], USAGE, 1.3)
    c.steps(rd.vpa, VPA, 1.2, "2 3")
    c.steps(rd.limits, LIMIT, 2.0, "7 4")
    c.steps(rd.requests, REQUEST, 2.2)
    for e, v, kind, color, up in marks:
        c.mark(e.ts, v, kind, color, _title(e), up=up, data=_data_attrs(e))
    return c.svg()


def _series_chart(w: WorkloadData, name: str, points: list[tuple[float, float]], axis: Axis) -> str:
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


# =============================================================================== page

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#0f172a;
margin:24px;background:#f8fafc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0}
.sub{color:#475569;margin:0 0 12px}
section{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:14px 16px 8px;margin:0 0 18px;width:1240px}
.head{display:flex;gap:14px;align-items:baseline;flex-wrap:wrap;margin-bottom:2px}
.pol{color:#334155}.counts{color:#475569;font-size:13px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12.5px;color:#334155;margin:10px 0 2px 78px}
.legend b{font-weight:600;color:#0f172a;margin-right:4px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:22px;height:0;border-top:3px solid}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;border:2px solid;background:#fff}
.tri{display:inline-block;width:0;height:0;border-left:6px solid transparent;border-right:6px solid transparent;
border-bottom:11px solid}
.box{display:inline-block;width:16px;height:10px}
svg{display:block}svg text{font-family:inherit}
.tl{font-size:11px;fill:#64748b}.tl.strong{fill:#0f172a;font-weight:600}
.yl{font-size:11px;fill:#64748b}.yt{font-size:11.5px;fill:#334155}.bl{font-size:10.5px;fill:#475569}
table{border-collapse:collapse;margin:6px 0 16px;background:#fff}
td,th{border:1px solid #e2e8f0;padding:4px 9px;text-align:left;font-size:13px}th{background:#f1f5f9}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#92400e;background:#fffbeb;border:1px solid #fde68a;border-radius:6px;padding:6px 10px;margin:0 0 12px;
width:1216px}
"""


def _legend(items: Sequence[tuple[str, str]], title: str = "") -> str:
    head = f"<b>{html.escape(title)}</b>" if title else ""
    body = "".join(f"<span>{sw}{html.escape(label)}</span>" for sw, label in items)
    return f'<div class="legend">{head}{body}</div>'


def _sw(color: str, dash: bool = False, width: int = 3) -> str:
    style = f"border-top:{width}px {'dashed' if dash else 'solid'} {color}"
    return f'<i class="sw" style="{style}"></i>'


def _reason_counts(events: Sequence[AuditEvent]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in events:
        for b in e.data.get("blocked") or []:
            counts[str(b.get("reason"))] = counts.get(str(b.get("reason")), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _limit_decisions(w: WorkloadData, cname: str, res: str) -> bool:
    return any(
        e.type == "decision" and res in (((e.data.get("containers") or {}).get(cname) or {}).get("limits") or {})
        for e in w.events
    )


def _section(w: WorkloadData, axis: Axis, from_stream: bool) -> str:
    pol = w.policy or {}
    decisions = [e for e in w.events if e.type == "decision"]
    blocked = [e for e in w.events if e.type == "blocked"]
    applied = [e for e in w.events if e.type == "applied"]
    failed = [e for e in w.events if e.type == "apply_failed"]
    reasons = _reason_counts(w.events)
    counts = f"{len(decisions)} decision(s), {len(blocked)} blocked report(s)"
    if applied or failed:
        counts += f", {len(applied)} applied, {len(failed)} apply failure(s)"
    if reasons:
        counts += " · held back: " + ", ".join(f"{n} {r}" for r, n in reasons.items())
    out = [f'<section id="{html.escape(w.key)}">']
    out.append(
        f'<div class="head"><h2>{html.escape(w.key)}</h2>'
        f'<span class="pol">{html.escape(str(pol.get("kind", "no policy")))} '
        f"{html.escape(str(pol.get('name', '')))} · mode {html.escape(str(pol.get('mode', '-')))}</span></div>"
    )
    out.append(f'<div class="counts">{html.escape(counts)}</div>')
    legend: list[tuple[str, str]] = [
        (f'<i class="tri" style="border-bottom-color:{DECISION_COLOR}"></i>', "decision (at the new value)")
    ]
    for r in reasons:
        legend.append((f'<i class="dot" style="border-color:{_reason_color(r)}"></i>', f"blocked: {r}"))
    out.append(_legend(legend))
    out.append(_strip(w, axis))
    rep = _replicas_chart(w, axis)
    if rep:
        items = [(_sw(REPLICAS), "replicas" + (" (observed)" if from_stream else " (from the decisions)"))]
        if w.hpa_desired:
            items.append((_sw(HPA, True, 2), "HPA recommendation"))
        if w.bounds:
            items.append((_sw(BOUND, True, 2), "policy min / max"))
        out.append(_legend(items, "replicas") + rep)
    for cname in sorted(w.containers):
        for res in ("cpu", "memory", *sorted(set(w.containers[cname]) - {"cpu", "memory"})):
            rd = w.containers[cname].get(res)
            if rd is None:
                continue
            svg = _resource_chart(w, cname, res, rd, axis)
            if not svg:
                continue
            items = []
            if rd.usage.points:
                items += [
                    (_sw(USAGE), "usage (per-pod average)"),
                    ('<i class="box" style="background:#93c5fd99"></i>', "lowest to highest pod"),
                ]
            items += [(_sw(REQUEST), "request"), (_sw(LIMIT, True), "limit")]
            if rd.vpa:
                items.append((_sw(VPA, True, 2), "VPA target"))
            if _limit_decisions(w, cname, res):
                items.append((f'<i class="tri" style="border-bottom-color:{LIMIT}"></i>', "decision on the limit"))
            out.append(_legend(items, f"{cname} {res}") + svg)
    for name in sorted(w.series):
        items = [(_sw(USAGE), "value (mean over the samples of an event)")]
        if name in w.series_target:
            items.append((_sw(BOUND, True, 2), "policy target"))
        out.append(_legend(items, f"series {name}"))
        out.append(_series_chart(w, name, w.series[name], axis))
    out.append("</section>")
    return "".join(out)


def render_html(data: ReportData, title: str, keys: Sequence[str] | None = None, notes: Sequence[str] = ()) -> str:
    """The whole page (or only the sections of ``keys``), self-contained."""
    axis = Axis(data.t0, data.t1)
    keys = sorted(data.workloads) if keys is None else list(keys)
    span_h = (data.t1 - data.t0) / 3600
    when = (
        f"{datetime.fromtimestamp(data.t0, UTC):%Y-%m-%d %H:%M} to "
        f"{datetime.fromtimestamp(data.t1, UTC):%Y-%m-%d %H:%M} UTC"
        f" ({span_h:.1f} h of event time)"
    )
    src = ", ".join(os.path.basename(p) for p in data.inputs)
    how = "replayed through the decision core" if data.from_stream else "from the audit stream alone (no usage samples)"
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(src)}, {how}: {when}.</p>',
    ]
    for n in [*data.notes, *notes]:
        out.append(f'<div class="note">{html.escape(n)}</div>')
    if len(keys) > 1:
        out.append(
            "<table><tr><th>workload</th><th>policy</th><th>decisions</th><th>blocked reports</th>"
            "<th>replicas</th></tr>"
        )
        for k in keys:
            w = data.workloads[k]
            pol = w.policy or {}
            reps = [v for _, v in w.replicas]
            rng = f"{min(reps)}..{max(reps)}" if reps else "-"
            out.append(
                f'<tr><td><a href="#{html.escape(k)}">{html.escape(k)}</a></td>'
                f"<td>{html.escape(str(pol.get('kind', '-')))} "
                f"{html.escape(str(pol.get('name', '')))}</td>"
                f'<td class="n">{sum(e.type == "decision" for e in w.events)}</td>'
                f'<td class="n">{sum(e.type == "blocked" for e in w.events)}</td><td class="n">{rng}</td></tr>'
            )
        out.append("</table>")
    for k in keys:
        out.append(_section(data.workloads[k], axis, data.from_stream))
    out.append("</body></html>")
    return "".join(out)


# =============================================================================== PNG


def _slug(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in key)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _page_height(w: WorkloadData) -> int:
    """Enough window height for one workload's page (the screenshot is of the window)."""
    n_res = sum(len(c) for c in w.containers.values())
    return 250 + 70 + 180 + n_res * 190 + len(w.series) * 160


def screenshot(chromium: str, html_path: Path, png_path: Path, width: int, height: int, timeout: float = 90.0) -> None:
    """A PNG of a local HTML file by headless Chromium (no network, a throwaway profile)."""
    with tempfile.TemporaryDirectory(prefix="tandem-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png_path}",
            f"--window-size={width},{height}",
            html_path.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        if proc.returncode != 0 or not png_path.is_file():
            raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-400:]}")


def _pngs_chromium(data: ReportData, title: str, out: Path, chromium: str) -> list[Path]:
    made = []
    with tempfile.TemporaryDirectory(prefix="tandem-report-") as tmp:
        for key in sorted(data.workloads):
            page = Path(tmp) / f"{_slug(key)}.html"
            page.write_text(render_html(data, f"{title}: {key}", [key]), encoding="utf-8")
            png = out / f"{_slug(key)}.png"
            screenshot(chromium, page, png, WIDTH + 80, _page_height(data.workloads[key]))
            made.append(png)
    return made


def _pngs_matplotlib(data: ReportData, title: str, out: Path) -> list[Path]:  # pragma: no cover - optional
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    def dt(ts: Sequence[float]) -> list[datetime]:
        return [datetime.fromtimestamp(max(t, data.t0), UTC) for t in ts]

    made = []
    for key in sorted(data.workloads):
        w = data.workloads[key]
        resources = [(c, r, rd) for c in sorted(w.containers) for r, rd in sorted(w.containers[c].items())]
        n = 1 + len(resources) + len(w.series)
        fig, axes = plt.subplots(n, 1, figsize=(14, 2.6 * n), sharex=True, squeeze=False)
        ax = axes[0][0]
        if w.replicas:
            ax.step(
                dt([t for t, _ in w.replicas] + [data.t1]),
                [v for _, v in w.replicas] + [w.replicas[-1][1]],
                where="post",
                color=REPLICAS,
                label="replicas",
            )
        if w.hpa_desired:
            ax.step(
                dt([t for t, _ in w.hpa_desired]),
                [v for _, v in w.hpa_desired],
                where="post",
                color=HPA,
                ls=":",
                label="HPA recommendation",
            )
        for _, lo, hi in w.bounds[-1:]:
            for v in (lo, hi):
                if v is not None:
                    ax.axhline(v, color=BOUND, ls="--", lw=1)
        for e in w.events:
            r = e.data.get("replicas")
            if e.type == "decision" and isinstance(r, Mapping):
                ax.plot(dt([e.ts]), [r["to"]], marker="^", color=DECISION_COLOR, ls="")
            for b in e.data.get("blocked") or []:
                if b.get("target") == "replicas" and isinstance(b.get("wanted"), int):
                    ax.plot(dt([e.ts]), [b["wanted"]], marker="o", mfc="none", ls="", ms=4,
                            color=_reason_color(str(b.get("reason"))))  # fmt: skip
        ax.set_ylabel("replicas")
        ax.legend(loc="upper left", fontsize=8)
        for i, (cname, res, rd) in enumerate(resources, 1):
            ax = axes[i][0]
            values = [p[3] for p in rd.usage.points] + [v for _, v in rd.requests + rd.limits if v is not None]
            div, _, unit = _unit(res, max(values or [1.0]))
            pts = [(t, a / div, lo / div, hi / div) for t, a, lo, hi in rd.usage.points]
            if pts:
                ax.fill_between(
                    dt([p[0] for p in pts]), [p[2] for p in pts], [p[3] for p in pts], color=BAND, alpha=0.35
                )
                ax.plot(
                    dt([p[0] for p in pts]), [p[1] for p in pts], color=USAGE, lw=1, label="usage (per-pod average)"
                )
            for series, color, ls, label in ((rd.requests, REQUEST, "-", "request"), (rd.limits, LIMIT, "--", "limit")):
                s = [(t, v / div) for t, v in series if v is not None]
                if s:
                    ax.step(
                        dt([t for t, _ in s] + [data.t1]),
                        [v for _, v in s] + [s[-1][1]],
                        where="post",
                        color=color,
                        ls=ls,
                        label=label,
                    )
            for e, v, kind, color, up in _resource_marks(w, cname, res):
                marker = ("^" if up else "v") if kind == "decision" else "o"
                ax.plot(dt([e.ts]), [v / div], marker=marker, ls="", ms=5 if kind == "decision" else 4, color=color,
                        mfc=color if kind == "decision" else "none")  # fmt: skip
            ax.set_ylabel(f"{cname} {unit}")
            ax.legend(loc="upper left", fontsize=8)
        for j, name in enumerate(sorted(w.series), 1 + len(resources)):
            ax = axes[j][0]
            ax.plot(dt([t for t, _ in w.series[name]]), [v for _, v in w.series[name]], color=USAGE, lw=1)
            if name in w.series_target:
                ax.axhline(w.series_target[name], color=BOUND, ls="--", lw=1)
            ax.set_ylabel(name)
        axes[-1][0].xaxis.set_major_formatter(mdates.DateFormatter("%b %d %H:%M"))
        fig.suptitle(f"{title}: {key}")
        fig.tight_layout()
        png = out / f"{_slug(key)}.png"
        fig.savefig(png, dpi=80)
        plt.close(fig)
        made.append(png)
    return made


def make_pngs(data: ReportData, title: str, out: Path, how: str, err: IO[str]) -> tuple[list[Path], str | None]:
    """PNGs per workload; returns them and a note when none could be made."""
    if how == "none":
        return [], None
    if how in ("auto", "matplotlib"):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            if how == "matplotlib":
                return [], "No PNGs: matplotlib is not installed."
        else:
            return _pngs_matplotlib(data, title, out), None
    chromium = find_chromium()
    if chromium is None:
        return [], "No PNGs: neither matplotlib nor a headless Chromium (chromium on the PATH) is installed."
    try:
        return _pngs_chromium(data, title, out, chromium), None
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        err.write(f"tandem report: PNG screenshots failed: {exc}\n")
        return [], f"No PNGs: headless Chromium failed ({str(exc)[:200]})."


# =============================================================================== build


def build(
    files: Sequence[str],
    out: Path,
    *,
    settings: Any,
    policies: Sequence[Mapping[str, Any]] = (),
    workloads: Sequence[str] = (),
    png: str = "auto",
    title: str = "tandem report",
    strict: bool = False,
    err: IO[str] | None = None,
) -> tuple[ReportData, list[Path]]:
    """Everything ``tandem report`` does after parsing its options; returns the data and the PNGs."""
    err = err if err is not None else sys.stderr
    audit_paths = [p for p in files if p != "-" and _is_audit_file(p)]
    stream_paths = [p for p in files if p not in audit_paths]
    data = collect(stream_paths, audit_paths, settings=settings, policies=policies, strict=strict, err=err)
    if workloads:
        keep = {k for k in data.workloads if any(k == w or k.endswith("/" + w) for w in workloads)}
        data.workloads = {k: v for k, v in data.workloads.items() if k in keep}
        data.audit = [e for e in data.audit if "/".join(e.workload) in keep]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "audit.jsonl", "wb") as fh:
        for e in data.audit:
            fh.write(e.raw + b"\n")
    pngs, note = make_pngs(data, title, out, png, err)
    (out / "index.html").write_text(render_html(data, title, notes=[note] if note else ()), encoding="utf-8")
    return data, pngs
