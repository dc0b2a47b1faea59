"""The report's data: the embedded replay (:mod:`streams.runner`) and the audit files, gathered per workload."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from analysis.audit import AuditEvent, event_ts, read_file
from scaling.engine import Engine
from scaling.events import HpaEvent, MetricEvent, PolicyEvent, VpaEvent, WorkloadEvent
from scaling.policies import parse_policy
from scaling.quantity import parse_quantity
from streams.inputs import iter_lines
from streams.replay import policy_warning
from streams.runner import ReplayStats, read_ordered, run


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


def is_audit_file(path: str) -> bool:
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
    refused_policies: Sequence[str] = (),
) -> ReportData:
    """Replay the streams (embedded) and read the audit files; gather every chart's data.

    ``refused_policies``: as for :func:`streams.replay.replay`, words the "no policy" warning."""

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

        events, _ = read_ordered(stream_paths, report, stats, strict=strict)  # streamed when in order
        run(engine, events, emitted, report, stats=stats, each=lambda event: _gather(data, event))
        warning = policy_warning(engine, refused_policies)
        if warning is not None:
            report(f"tandem report: {warning}")
        if stats.first_ts is not None and stats.last_ts is not None:
            data.t0, data.t1 = stats.first_ts, stats.last_ts

    _add_audit(data, audit_raw, audit_paths, err)
    _span(data)
    return data


def _add_audit(data: ReportData, audit_raw: Sequence[dict[str, Any]], audit_paths: Sequence[str], err: IO[str]) -> None:
    """The replay's audit events, then the audit files' (a decision the replay made too, by id,
    once), to their workloads in event-time order; each workload's policy from its first decision."""
    seq = 0
    seen: set[str] = set()
    for ev in audit_raw:
        ts = event_ts(ev)
        if ts is None:
            continue
        seen.add(str(ev.get("id")))
        data.audit.append(AuditEvent(orjson.dumps(ev), ev, ts, seq))
        seq += 1
    for path in audit_paths:
        for ae in read_file(path, err):
            if ae.type in ("decision", "blocked", "learned") and str(ae.event.get("id")) in seen:
                continue  # the replay made the same decision, or learned the same envelope (same id)
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


def _span(data: ReportData) -> None:
    """The time axis: the streams' span, widened to the audit events' (at least a minute)."""
    times = [e.ts for e in data.audit]
    if not data.from_stream and times:
        data.t0, data.t1 = min(times), max(times)
    elif times:
        data.t0, data.t1 = min(data.t0, *times), max(data.t1, *times)
    if data.t1 <= data.t0:
        data.t1 = data.t0 + 60.0


def _gather(data: ReportData, event: Any) -> None:
    """What one input event the engine took adds to the charts: usage, spec, recommendations, bounds."""
    w = data.workload(event.workload.key)
    if isinstance(event, MetricEvent):
        by_container: dict[tuple[str, str], list[float]] = {}
        for s in event.samples:
            if s.cpu is not None:
                by_container.setdefault((s.container, "cpu"), []).append(s.cpu)
            if s.memory is not None:
                by_container.setdefault((s.container, "memory"), []).append(float(s.memory))
        for (cname, res), values in by_container.items():
            w.resource(cname, res).usage.points.append((event.ts, sum(values) / len(values), min(values), max(values)))
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
