"""The contract events of a window of Prometheus series (``tandem import prometheus``,
:mod:`streams.prometheus`), as ``tandem collect`` would have sent them had it run at every step.

Pods are mapped to workloads by kube-state-metrics' ownership series (pod -> ReplicaSet ->
Deployment, pod -> StatefulSet).  The series are read into per-pod and per-workload tables
(:func:`_read_pods`, :func:`_hpa_tables`, :func:`_vpa_table`), then walked step by step: a
``workload`` event where the workload's pods or replicas changed, ``hpa`` and ``vpa`` events where
their content changed, and one ``metric`` batch per workload per step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scaling.quantity import format_quantity
from streams.prometheus_api import Fetched, QuerySet, Series
from streams.prometheus_samples import Container, Member, in_contract, roster, samples, usage

__all__ = ["BuildState", "Built", "build_events"]


def _num(value: float) -> int | float:
    return int(value) if value.is_integer() else value


#: (namespace, pod)
_PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Timeline:
    """A value per step: ``value`` at the steps in ``steps`` (a value constant over a pod's life,
    the common case, kept once), or, when ``by_step`` is set, that map."""

    steps: Any  # a set or a dict's keys view
    value: Any
    by_step: dict[int, Any] | None

    def points(self) -> dict[int, Any]:
        return self.by_step if self.by_step is not None else dict.fromkeys(self.steps, self.value)


def _at(timelines: Mapping[tuple[str, str], _Timeline], key: tuple[str, str], t: int) -> Any:
    """The value of ``key``'s timeline at ``t``, ``()`` where it has none."""
    line = timelines.get(key)
    if line is None:
        return ()
    if line.by_step is not None:
        return line.by_step.get(t, ())
    return line.value if t in line.steps else ()


def _changes(points: Any, step_ms: int) -> set[int]:
    """The steps where ``points`` (a step -> value mapping, or the steps of a constant) starts,
    ends (the step after its last) or changes value: one set comparison for the common series,
    present at every step of a run with one value."""
    if not points:
        return set()
    lo, hi = min(points), max(points)
    values = points.values() if isinstance(points, Mapping) else None
    if len(points) == (hi - lo) // step_ms + 1 and (values is None or len(set(values)) == 1):
        return {lo, hi + step_ms}
    out: set[int] = set()
    before: tuple[int, Any] | None = None
    for t in sorted(points):
        v = points[t] if values is not None else True
        if before is None or t != before[0] + step_ms:
            out.add(t)
            if before is not None:
                out.add(before[0] + step_ms)
        elif v != before[1]:
            out.add(t)
        before = (t, v)
    assert before is not None
    out.add(before[0] + step_ms)
    return out


def _hpa_metrics(found: Iterable[tuple[str, str, float]]) -> tuple[list[dict[str, Any]] | None, str]:
    """An HPA's ``spec.metrics`` (autoscaling/v2) from ``kube_horizontalpodautoscaler_spec_target_metric``
    (metric name, target type, value), sorted by name; or ``None`` and why not.  kube-state-metrics
    names a metric and its target type but not its source type: ``cpu`` and ``memory`` are taken as
    ``Resource`` metrics (``utilization`` -> ``averageUtilization``, ``average`` -> ``averageValue``
    in cores or bytes), any other name could be a ``Pods``, ``Object`` or ``External`` metric, so an
    HPA with one gets no ``metrics`` rather than a wrong list
    (https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/horizontalpodautoscaler-metrics.md)."""
    out: list[dict[str, Any]] = []
    for name, kind, value in sorted(found):
        if name not in ("cpu", "memory"):
            return (
                None,
                f"metric {name!r} ({kind}) may be a Pods, Object or External metric (kube-state-metrics does not say)",
            )
        if kind == "utilization":
            target: dict[str, Any] = {"type": "Utilization", "averageUtilization": round(value)}
        elif kind == "average":
            target = {"type": "AverageValue", "averageValue": format_quantity(name, round(value * 1000))}
        else:
            return None, f"metric {name!r} has a {kind!r} target, which a Resource metric cannot have"
        out.append({"type": "Resource", "resource": {"name": name, "target": target}})
    return out, ""


@dataclass
class BuildState:
    """What one window of the range hands to the next: who owns what (a fact about an object, not
    a time series, kept from every window so far) and the last event of each kind per workload (an
    event is sent only when its content changed, across windows too)."""

    rs_owner: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    owner: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    hpa_target: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    last: dict[tuple[str, tuple[str, str, str]], Any] = field(default_factory=dict)
    #: Warnings about single objects, once each (an HPA whose metrics cannot be told apart).
    warnings: dict[tuple[str, str], str] = field(default_factory=dict)
    #: What each workload's last ``workload`` event was built from (:func:`build_events`).
    fingerprints: dict[tuple[str, str, str], Any] = field(default_factory=dict)


#: (namespace, kind, name)
_WorkloadKey = tuple[str, str, str]


@dataclass(slots=True)
class _Pods:
    """What one window's series say of its pods and workloads (:func:`_read_pods`)."""

    #: pod -> its containers in order, with their cpu, memory and oom points
    containers_of: dict[_PodKey, list[Container]]
    requests: dict[_PodKey, _Timeline]
    limits: dict[_PodKey, _Timeline]
    ready: dict[_PodKey, dict[int, float]]
    has_ready: bool
    phases: dict[_PodKey, _Timeline]
    started: dict[_PodKey, _Timeline]
    #: whether the pods' readiness, phase or start time is known: workload events list the pods
    has_pods: bool
    replicas: dict[_WorkloadKey, dict[int, float]]
    #: workload -> (pod, the steps it is in the workload), sorted
    members: dict[_WorkloadKey, list[tuple[str, set[int] | Any]]]
    #: workload -> the steps where its workload event may change
    dirty: dict[_WorkloadKey, set[int]]
    #: pod -> the steps where it is ready
    ready_at: dict[_PodKey, set[int]]


def _owners(s: Mapping[str, list[Series]], lb: Mapping[str, str], state: BuildState) -> dict[_PodKey, set[int]]:
    """Who owns each pod (into ``state``, a ReplicaSet's pods to its Deployment); per pod, the steps
    with an owner series."""
    ns_l, pod_l = lb["namespace"], lb["pod"]
    rs_owner = state.rs_owner
    for labels, _ in s.get("replicaset_owner", []):
        rs_owner[(labels.get(ns_l, ""), labels.get(lb["replicaset"], ""))] = (
            labels.get(lb["owner_kind"], ""),
            labels.get(lb["owner_name"], ""),
        )
    owner = state.owner
    alive: dict[tuple[str, str], set[int]] = defaultdict(set)  # (ns, pod) -> steps with an owner series
    for labels, points in s.get("pod_owner", []):
        ns, pod = labels.get(ns_l, ""), labels.get(pod_l, "")
        kind, name = labels.get(lb["owner_kind"], ""), labels.get(lb["owner_name"], "")
        if kind == "ReplicaSet" and (ns, name) in rs_owner and rs_owner[(ns, name)][0] in ("Deployment",):
            kind, name = rs_owner[(ns, name)]
        if not kind or not name or kind == "<none>":
            continue
        owner[(ns, pod)] = (kind, name)
        alive[(ns, pod)].update(points)
    return alive


def _resources(s: Mapping[str, list[Series]], lb: Mapping[str, str], name: str) -> dict[_PodKey, _Timeline]:
    """The requests or limits (``name``) of each pod: step -> ((container, ((resource, value), ...)),
    ...), the containers and resources sorted."""
    ns_l, pod_l, ctr_l, res_l = lb["namespace"], lb["pod"], lb["container"], lb["resource"]
    per_pod: dict[_PodKey, dict[tuple[str, str], dict[int, float]]] = defaultdict(dict)
    for labels, points in s.get(name, []):
        k = (labels.get(ctr_l, ""), labels.get(res_l, ""))
        pod_series = per_pod[(labels.get(ns_l, ""), labels.get(pod_l, ""))]
        pod_series[k] = {**pod_series[k], **points} if k in pod_series else points
    out: dict[_PodKey, _Timeline] = {}
    for pk, series in per_pod.items():
        items = sorted(series.items())
        first = items[0][1]
        if all(p.keys() == first.keys() and len(set(p.values())) == 1 for _, p in items):
            # every series of the pod constant over the same steps (the common case): one value
            grouped: dict[str, list[tuple[str, float]]] = {}
            for (ctr, res), p in items:
                grouped.setdefault(ctr, []).append((res, next(iter(p.values()))))
            out[pk] = _Timeline(first.keys(), tuple((c, tuple(r)) for c, r in grouped.items()), None)
            continue
        steps: dict[int, dict[str, list[tuple[str, float]]]] = defaultdict(dict)
        for (ctr, res), p in items:
            for t, v in p.items():
                steps[t].setdefault(ctr, []).append((res, v))
        out[pk] = _Timeline((), (), {t: tuple((c, tuple(r)) for c, r in at_t.items()) for t, at_t in steps.items()})
    return out


def _pod_status(
    s: Mapping[str, list[Series]], lb: Mapping[str, str]
) -> tuple[dict[_PodKey, dict[int, float]], dict[_PodKey, _Timeline], dict[_PodKey, _Timeline]]:
    """Each pod's readiness points, phase and start time."""
    ns_l, pod_l = lb["namespace"], lb["pod"]
    ready: dict[_PodKey, dict[int, float]] = {}
    for labels, points in s.get("ready", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        ready[pk] = {**ready[pk], **points} if pk in ready else points
    phases: dict[_PodKey, _Timeline] = {}
    phase_points: dict[_PodKey, dict[int, str]] = defaultdict(dict)
    for labels, points in s.get("pod_phase", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        phase = labels.get(lb["phase"], "")
        phase_points[pk].update((t, phase) for t, v in points.items() if v > 0)
    for pk, by_step in phase_points.items():
        names = set(by_step.values())
        phases[pk] = _Timeline(by_step.keys(), names.pop(), None) if len(names) == 1 else _Timeline((), "", by_step)
    started: dict[_PodKey, _Timeline] = {}
    for labels, points in s.get("pod_started", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        merged = {**started[pk].points(), **points} if pk in started else points
        times = set(merged.values())
        started[pk] = _Timeline(merged.keys(), times.pop(), None) if len(times) == 1 else _Timeline((), 0.0, merged)
    return ready, phases, started


def _replicas(s: Mapping[str, list[Series]], lb: Mapping[str, str]) -> dict[_WorkloadKey, dict[int, float]]:
    """The replicas of each Deployment and StatefulSet, per step."""
    replicas: dict[tuple[str, str, str], dict[int, float]] = {}
    for query, kind, label in (
        ("deployment_replicas", "Deployment", lb["deployment"]),
        ("statefulset_replicas", "StatefulSet", lb["statefulset"]),
    ):
        for labels, points in s.get(query, []):
            wk = (labels.get(lb["namespace"], ""), kind, labels.get(label, ""))
            replicas[wk] = {**replicas[wk], **points} if wk in replicas else points
    return replicas


def _members(
    alive: Mapping[_PodKey, set[int]],
    containers_of: Mapping[_PodKey, list[Container]],
    owner: Mapping[_PodKey, tuple[str, str]],
) -> dict[_WorkloadKey, list[tuple[str, set[int] | Any]]]:
    """Each workload's pods and the steps each is in it: where it has an owner series or a usage sample."""
    members: dict[tuple[str, str, str], list[tuple[str, set[int] | Any]]] = defaultdict(list)
    for pk in alive.keys() | (containers_of.keys() & owner.keys()):
        steps: set[int] | Any = alive.get(pk, set())
        for _, cp, mp, _ in containers_of.get(pk, ()):
            for p in (cp, mp):
                if p is not None and not p.keys() <= steps:
                    steps = steps | p.keys()
        ns, pod = pk
        members[(ns, *owner[pk])].append((pod, steps))
    for listed in members.values():
        listed.sort()
    return members


def _dirty(pods: _Pods, start_ms: int, step_ms: int) -> dict[_WorkloadKey, set[int]]:
    """The steps where a workload's event may change: where one of its pods comes, goes or changes
    requests, limits, readiness, phase or start time, or its replicas change; and the window's
    first (the last window's event is compared).  At the others, most steps of most workloads,
    the workload event is not even looked at."""
    dirty: dict[tuple[str, str, str], set[int]] = {}
    for wk in pods.members.keys() | pods.replicas.keys():
        changes = {start_ms}
        counted = pods.replicas.get(wk)
        if counted is not None:
            changes |= _changes(counted, step_ms)
        ns = wk[0]
        for pod, steps in pods.members.get(wk, ()):
            pk = (ns, pod)
            changes |= _changes(steps, step_ms)
            for lines in (pods.requests, pods.limits, pods.phases, pods.started):
                line = lines.get(pk)
                if line is not None:
                    changes |= _changes(line.points() if line.by_step is not None else line.steps, step_ms)
            readiness = pods.ready.get(pk)
            if readiness is not None:
                changes |= _changes(readiness, step_ms)
        dirty[wk] = changes
    return dirty


def _read_pods(
    s: Mapping[str, list[Series]], lb: Mapping[str, str], state: BuildState, start_ms: int, step_ms: int
) -> _Pods:
    """Everything the workload and metric events of one window are built from."""
    alive = _owners(s, lb, state)
    containers_of = usage(s, lb)
    ready, phases, started = _pod_status(s, lb)
    has_ready = bool(s.get("ready"))
    pods = _Pods(
        containers_of=containers_of,
        requests=_resources(s, lb, "requests"),
        limits=_resources(s, lb, "limits"),
        ready=ready,
        has_ready=has_ready,
        phases=phases,
        started=started,
        has_pods=has_ready or bool(phases) or bool(started),
        replicas=_replicas(s, lb),
        members=_members(alive, containers_of, state.owner),
        dirty={},
        ready_at={pk: {t for t, v in points.items() if v > 0} for pk, points in ready.items()},
    )
    pods.dirty = _dirty(pods, start_ms, step_ms)
    return pods


#: step -> (namespace, HPA) -> desired_replicas, min_replicas, max_replicas
_HpaAt = dict[int, dict[tuple[str, str], dict[str, int]]]
#: step -> (namespace, HPA) -> (metric name, target type, value) of each metric
_HpaMetricsAt = dict[int, dict[tuple[str, str], list[tuple[str, str, float]]]]
#: step -> workload -> container -> target/lower_bound/upper_bound -> resource -> value
_VpaAt = dict[int, dict[_WorkloadKey, dict[str, dict[str, dict[str, float]]]]]


def _hpa_tables(
    s: Mapping[str, list[Series]], lb: Mapping[str, str], state: BuildState
) -> tuple[_HpaAt, _HpaMetricsAt]:
    """Each HPA's target (into ``state``), and per step its replicas and its metrics' targets."""
    ns_l = lb["namespace"]
    hpa_target = state.hpa_target
    for labels, _ in s.get("hpa_info", []):
        hpa_target[(labels.get(ns_l, ""), labels.get(lb["hpa"], ""))] = (
            labels.get(lb["hpa_target_kind"], ""),
            labels.get(lb["hpa_target_name"], ""),
        )
    hpa_at: _HpaAt = defaultdict(lambda: defaultdict(dict))
    for query, fname in (("hpa_desired", "desired_replicas"), ("hpa_min", "min_replicas"), ("hpa_max", "max_replicas")):
        for labels, points in s.get(query, []):
            for t, v in points.items():
                hpa_at[t][(labels.get(ns_l, ""), labels.get(lb["hpa"], ""))][fname] = int(v)

    hpa_metrics_at: _HpaMetricsAt = defaultdict(lambda: defaultdict(list))
    for labels, points in s.get("hpa_target_metric", []):
        metric = (labels.get(lb["hpa_metric_name"], ""), labels.get(lb["hpa_metric_target_type"], ""))
        for t, v in points.items():
            hpa_at_key = (labels.get(ns_l, ""), labels.get(lb["hpa"], ""))
            hpa_metrics_at[t][hpa_at_key].append((*metric, v))
    return hpa_at, hpa_metrics_at


def _vpa_table(s: Mapping[str, list[Series]], lb: Mapping[str, str]) -> _VpaAt:
    """Per step, each VPA's recommendation (target and bounds) per container and resource."""
    vpa_at: _VpaAt = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(dict))))
    for query, part in (
        ("vpa_target", "target"),
        ("vpa_lower_bound", "lower_bound"),
        ("vpa_upper_bound", "upper_bound"),
    ):
        for labels, points in s.get(query, []):
            key = (
                labels.get(lb["namespace"], ""),
                labels.get(lb["vpa_target_kind"], ""),
                labels.get(lb["vpa_target_name"], ""),
            )
            if not key[1] or not key[2]:
                continue
            for t, v in points.items():
                vpa_at[t][key][labels.get(lb["vpa_container"], "")][part][labels.get(lb["resource"], "")] = v
    return vpa_at


class _Out:
    """The events of a window, and the last content of each kind per workload (an event is sent
    only when its content changed)."""

    __slots__ = ("cluster", "events", "last")

    def __init__(self, cluster: str, last: dict[tuple[str, tuple[str, str, str]], Any]) -> None:
        self.cluster = cluster
        self.last = last
        self.events: list[dict[str, Any]] = []

    def ref(self, ns: str, kind: str, name: str) -> dict[str, str]:
        return {"cluster": self.cluster, "namespace": ns, "kind": kind, "name": name}

    def changed(self, kind: str, key: tuple[str, str, str], content: Any) -> bool:
        if self.last.get((kind, key)) == content:
            return False
        self.last[(kind, key)] = content
        return True


class Built(NamedTuple):
    """A window's contract events (:func:`build_events`)."""

    events: list[dict[str, Any]]
    #: every ``metric`` event is known to pass the contract's checks
    #: (:func:`streams.prometheus_samples.in_contract`); the other events are the caller's to check
    metrics_checked: bool


def build_events(
    fetched: Fetched,
    queries: QuerySet,
    cluster: str,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    state: BuildState | None = None,
) -> Built:
    """The contract events of ``fetched`` (the series of the steps ``start..end``), in event-time
    order (at one ``ts``: workloads, hpa, vpa, then metrics, each by workload key).  ``state``
    carries what an earlier window of the same import knew (:class:`BuildState`)."""
    state = state if state is not None else BuildState()
    lb = queries.labels
    s = fetched.series
    pods = _read_pods(s, lb, state, start_ms, step_ms)
    hpa_at, hpa_metrics_at = _hpa_tables(s, lb, state)
    vpa_at = _vpa_table(s, lb)
    out = _Out(cluster, state.last)
    events = out.events
    members, replicas, dirty = pods.members, pods.replicas, pods.dirty
    workload_keys = sorted(members.keys() | replicas.keys())
    ready_at = pods.ready_at if pods.has_ready else None
    rosters = {wk: roster(pods.containers_of, ready_at, wk[0], listed) for wk, listed in members.items()}
    empty: tuple[Any, ...] = ()
    for t in range(start_ms, end_ms + 1, step_ms):
        ts = t / 1000
        here: list[tuple[tuple[str, str, str], list[Member]]] = []  # workloads with pods at t, sorted
        for wk in workload_keys:
            present = [m for m in rosters.get(wk, empty) if t in m[1]]
            counted = replicas.get(wk)
            count = counted.get(t) if counted is not None else None
            if not present and count is None:
                continue
            if present:
                here.append((wk, present))
            if t not in dirty[wk]:
                continue  # nothing the workload event says changed since the last step
            body = _workload_body(pods, wk, [m[0] for m in present], count, t, state.fingerprints)
            if body is not None and out.changed("workload", wk, body):
                events.append({"type": "workload", "ts": ts, "workload": out.ref(*wk), **body})
        _hpa_events(out, hpa_at.get(t, {}), hpa_metrics_at.get(t, {}), state, ts)
        _vpa_events(out, vpa_at.get(t, {}), ts)
        for wk, present in here:
            batch = samples(present, t)
            if batch:
                events.append({"type": "metric", "ts": ts, "workload": out.ref(*wk), "samples": batch})
    return Built(events, in_contract(pods.containers_of, members.keys(), cluster, start_ms, end_ms))


def _workload_body(
    pods: _Pods,
    wk: _WorkloadKey,
    present: list[str],
    count: float | None,
    t: int,
    last_seen: dict[tuple[str, str, str], Any],
) -> dict[str, Any] | None:
    """What the workload event of ``wk`` at step ``t`` says, or ``None`` when its fingerprint is
    that of the last one (compared before the event is built: most steps change nothing)."""
    ns = wk[0]
    fingerprint = (
        count,
        tuple(
            (
                p,
                _at(pods.requests, (ns, p), t),
                _at(pods.limits, (ns, p), t),
                t in pods.ready_at.get((ns, p), ()) if pods.has_ready else True,
                _at(pods.phases, (ns, p), t),
                _at(pods.started, (ns, p), t),
            )
            for p in present
        ),
    )
    if last_seen.get(wk) == fingerprint:
        return None
    last_seen[wk] = fingerprint
    containers: dict[str, dict[str, dict[str, int | float]]] = {}
    for _, rq, lm, _, _, _ in fingerprint[1]:
        for sig, part in ((rq, "requests"), (lm, "limits")):
            for ctr, res in sig:
                spec = containers.setdefault(ctr, {})
                if part not in spec:
                    spec[part] = {r: _num(v) for r, v in res}
    body: dict[str, Any] = {
        "replicas": int(count) if count is not None else len(present),
        "containers": containers,
    }
    if pods.has_pods:
        # as the collector: failed pods are left out (the HPA controller ignores them)
        shown = [f for f in fingerprint[1] if f[4] != "Failed"]
        body["ready_replicas"] = sum(f[3] for f in shown)
        body["pods"] = [
            {
                "name": p,
                "ready": r,
                "phase": phase or "Running",
                "started": _num(when) if when != () else None,
            }
            for p, _, _, r, phase, when in shown
        ]
    return body


def _hpa_events(
    out: _Out,
    hpa_at: Mapping[tuple[str, str], dict[str, int]],
    hpa_metrics_at: Mapping[tuple[str, str], list[tuple[str, str, float]]],
    state: BuildState,
    ts: float,
) -> None:
    """The ``hpa`` events of one step: each HPA whose target is known, when its content changed."""
    for (ns, hpa), fields in sorted(hpa_at.items()):
        target = state.hpa_target.get((ns, hpa))
        if target is None or "desired_replicas" not in fields or not all(target):
            continue
        key = (ns, *target)
        body = {**fields, "name": hpa, "source": "cluster"}
        targets = hpa_metrics_at.get((ns, hpa))
        if targets:
            metrics, why = _hpa_metrics(targets)
            if metrics is not None:
                body["metrics"] = metrics
            elif (ns, hpa) not in state.warnings:
                state.warnings[(ns, hpa)] = f"HPA {ns}/{hpa}: {why}; its hpa events carry no metrics"
        if out.changed("hpa", key, body):
            out.events.append({"type": "hpa", "ts": ts, "workload": out.ref(*key), **body})


def _vpa_events(out: _Out, vpa_at: Mapping[_WorkloadKey, dict[str, dict[str, dict[str, float]]]], ts: float) -> None:
    """The ``vpa`` events of one step: each VPA with a target, when its recommendation changed."""
    for key, per in sorted(vpa_at.items()):
        recs = {
            c: {part: {r: _num(v) for r, v in sorted(res.items())} for part, res in sorted(parts.items())}
            for c, parts in sorted(per.items())
            if "target" in parts
        }
        if recs and out.changed("vpa", key, recs):
            out.events.append(
                {"type": "vpa", "ts": ts, "workload": out.ref(*key), "containers": recs, "source": "cluster"}
            )
