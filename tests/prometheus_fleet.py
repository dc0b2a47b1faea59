"""A generated fleet of known usage, as the OpenMetrics text ``promtool tsdb create-blocks-from
openmetrics`` loads into a real Prometheus, and the truth ``tandem import prometheus`` must give back.

cAdvisor and kube-state-metrics series as their exporters name them, scraped every ``SCRAPE``
seconds.  A container's CPU counter grows at one rate per step window ``(t - STEP, t]`` and its
working set holds one value per window, so a ``rate(...[STEP])`` at a step ``t`` is exactly that
window's rate (the window holds samples at both of its ends: nothing to extrapolate) and the
working set at ``t`` is that window's value.  Prometheus is started with a lookback delta just
under the step: blocks made by promtool carry no staleness markers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
STEP = 60
SCRAPE = 15
MINUTES = 40
END = T0 + MINUTES * STEP
MIB = 1024 * 1024


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    owner_kind: str  # ReplicaSet or StatefulSet
    owner_name: str
    workload: tuple[str, str, str]  # namespace, kind, name
    containers: tuple[str, ...]
    start: int  # first sample (a multiple of STEP)
    end: int  # last sample
    unready_until: int = 0
    pending_until: int = 0  # phase Pending before this sample, Running from it
    cpu_reset_at: int | None = None  # the CPU counter restarts from 0 just after this sample
    oom_at: int | None = None  # a restart, last terminated OOMKilled, at this sample
    gap: tuple[int, int] | None = None  # cAdvisor's samples strictly between the two are missing


REQUESTS: dict[str, dict[str, float]] = {
    "app": {"cpu": 0.25, "memory": 256 * MIB},
    "sidecar": {"cpu": 0.05},
    "postgres": {"cpu": 1, "memory": 2048 * MIB},
}
LIMITS: dict[str, dict[str, float]] = {"app": {"memory": 512 * MIB}, "postgres": {"memory": 4096 * MIB}}

PODS = (
    Pod("shop", "web-5d8f-a", "ReplicaSet", "web-5d8f", ("shop", "Deployment", "web"), ("app", "sidecar"), T0, END),
    Pod("shop", "web-5d8f-b", "ReplicaSet", "web-5d8f", ("shop", "Deployment", "web"), ("app", "sidecar"), T0, END),
    # comes at 10 min, unready for 2 min, goes at 25 min
    Pod(
        "shop",
        "web-5d8f-c",
        "ReplicaSet",
        "web-5d8f",
        ("shop", "Deployment", "web"),
        ("app", "sidecar"),
        T0 + 600,
        T0 + 1500,
        unready_until=T0 + 720,
        pending_until=T0 + 660,
    ),
    Pod(
        "shop",
        "db-0",
        "StatefulSet",
        "db",
        ("shop", "StatefulSet", "db"),
        ("postgres",),
        T0,
        END,
        cpu_reset_at=T0 + 1200,
    ),
    Pod("shop", "db-1", "StatefulSet", "db", ("shop", "StatefulSet", "db"), ("postgres",), T0, END, oom_at=T0 + 1200),
    # its kubelet was not scraped for 3 minutes: cAdvisor's series have a gap, kube-state-metrics' do not
    Pod(
        "other",
        "batch-77c-a",
        "ReplicaSet",
        "batch-77c",
        ("other", "Deployment", "batch"),
        ("app",),
        T0,
        END,
        gap=(T0 + 1800, T0 + 1980),
    ),
)
REPLICASETS = {("shop", "web-5d8f"): "web", ("other", "batch-77c"): "batch"}


def web_replicas(t: int) -> int:
    return 3 if T0 + 600 <= t <= T0 + 1500 else 2


def cpu_rate(pod: Pod, container: str, window_end: int) -> float:
    """Cores used in the step window ending at ``window_end``: a known, varied value."""
    k = (window_end - T0) // STEP
    seed = sum(map(ord, pod.name + container))
    return round(0.05 + ((seed * 7 + k * 13) % 37) / 40, 6)


def memory(pod: Pod, container: str, window_end: int) -> int:
    k = (window_end - T0) // STEP
    seed = sum(map(ord, pod.name + container))
    return (100 + (seed * 11 + k * 17) % 300) * MIB + seed


def _in_gap(pod: Pod, s: int) -> bool:
    return pod.gap is not None and pod.gap[0] < s < pod.gap[1]


def _window_end(s: int) -> int:
    """The end of the step window ``(t - STEP, t]`` that holds the sample at ``s``."""
    return T0 + -(-(s - T0) // STEP) * STEP


@dataclass
class _Out:
    families: dict[str, list[str]] = field(default_factory=dict)

    def add(self, metric: str, labels: dict[str, str], points: list[tuple[int, float]]) -> None:
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines = self.families.setdefault(metric, [])
        lines.extend(f"{metric}{{{text}}} {v!r} {t}" for t, v in points)


def openmetrics(*, statefulset_replicas: bool = False) -> str:
    """The fleet's series (without ``kube_statefulset_replicas`` unless asked: a missing
    kube-state-metrics series the import must warn about)."""
    out = _Out()
    for pod in PODS:
        samples = range(pod.start, pod.end + 1, SCRAPE)
        base = {"namespace": pod.namespace, "pod": pod.name}
        for c in pod.containers:
            labels = {**base, "container": c, "id": f"/kubepods/{pod.name}/{c}", "image": f"example/{c}:1"}
            counter, points = 1000.0, []
            for s in samples:
                if s > pod.start:
                    counter += cpu_rate(pod, c, _window_end(s)) * SCRAPE
                if pod.cpu_reset_at is not None and s == pod.cpu_reset_at + SCRAPE:
                    counter = cpu_rate(pod, c, _window_end(s)) * SCRAPE
                points.append((s, counter))
            scraped = [s for s in samples if not _in_gap(pod, s)]
            out.add("container_cpu_usage_seconds_total", labels, [(s, v) for s, v in points if not _in_gap(pod, s)])
            out.add(
                "container_memory_working_set_bytes", labels, [(s, memory(pod, c, _window_end(s))) for s in scraped]
            )
            if pod.oom_at is not None:
                # the OOM-killed container's cgroup, still reported for three minutes under an id of
                # its own, using less: two series of one container, merged as max by would (the
                # import must keep the truth, whichever series Prometheus lists last)
                old = {**labels, "id": f"/kubepods/{pod.name}/{c}-oomkilled"}
                after = range(pod.oom_at, pod.oom_at + 181, SCRAPE)
                out.add("container_cpu_usage_seconds_total", old, [(s, 5.0 + (s - pod.oom_at) * 0.001) for s in after])
                out.add("container_memory_working_set_bytes", old, [(s, float(MIB)) for s in after])
            for kind, table in (("requests", REQUESTS), ("limits", LIMITS)):
                for res, v in table.get(c, {}).items():
                    unit = "core" if res == "cpu" else "byte"
                    out.add(
                        f"kube_pod_container_resource_{kind}",
                        {**base, "container": c, "resource": res, "unit": unit},
                        [(s, float(v)) for s in samples],
                    )
            if pod.oom_at is not None:
                out.add(
                    "kube_pod_container_status_restarts_total",
                    {**base, "container": c},
                    [(s, 1.0 if s >= pod.oom_at else 0.0) for s in samples],
                )
                out.add(
                    "kube_pod_container_status_last_terminated_reason",
                    {**base, "container": c, "reason": "OOMKilled"},
                    [(s, 1.0) for s in samples if s >= pod.oom_at],
                )
        out.add(
            "kube_pod_owner",
            {**base, "owner_kind": pod.owner_kind, "owner_name": pod.owner_name, "owner_is_controller": "true"},
            [(s, 1.0) for s in samples],
        )
        out.add(
            "kube_pod_status_ready",
            {**base, "condition": "true"},
            [(s, 0.0 if s < pod.unready_until else 1.0) for s in samples],
        )
        for phase, pending in (("Pending", True), ("Running", False)):
            points = [(s, 1.0 if (s < pod.pending_until) == pending else 0.0) for s in samples]
            out.add("kube_pod_status_phase", {**base, "phase": phase}, points)
        out.add("kube_pod_start_time", base, [(s, float(started(pod))) for s in samples])
    everywhere = range(T0, END + 1, SCRAPE)
    for (ns, rs), deployment in REPLICASETS.items():
        out.add(
            "kube_replicaset_owner",
            {"namespace": ns, "replicaset": rs, "owner_kind": "Deployment", "owner_name": deployment},
            [(s, 1.0) for s in everywhere],
        )
    out.add(
        "kube_deployment_spec_replicas",
        {"namespace": "shop", "deployment": "web"},
        [(s, float(web_replicas(s))) for s in everywhere],
    )
    out.add(
        "kube_deployment_spec_replicas", {"namespace": "other", "deployment": "batch"}, [(s, 1.0) for s in everywhere]
    )
    if statefulset_replicas:
        out.add("kube_statefulset_replicas", {"namespace": "shop", "statefulset": "db"}, [(s, 2.0) for s in everywhere])
    hpa = {"namespace": "shop", "horizontalpodautoscaler": "web"}
    out.add(
        "kube_horizontalpodautoscaler_info",
        {
            **hpa,
            "scaletargetref_kind": "Deployment",
            "scaletargetref_name": "web",
            "scaletargetref_api_version": "apps/v1",
        },
        [(s, 1.0) for s in everywhere],
    )
    out.add(
        "kube_horizontalpodautoscaler_status_desired_replicas", hpa, [(s, float(web_replicas(s))) for s in everywhere]
    )
    out.add("kube_horizontalpodautoscaler_spec_min_replicas", hpa, [(s, 2.0) for s in everywhere])
    out.add("kube_horizontalpodautoscaler_spec_max_replicas", hpa, [(s, 10.0) for s in everywhere])
    for (name, kind), value in HPA_TARGETS.items():
        out.add(
            "kube_horizontalpodautoscaler_spec_target_metric",
            {**hpa, "metric_name": name, "metric_target_type": kind},
            [(s, value) for s in everywhere],
        )
    # an HPA on a custom metric: kube-state-metrics does not say its source type (Pods, Object, External)
    batch = {"namespace": "other", "horizontalpodautoscaler": "batch"}
    out.add(
        "kube_horizontalpodautoscaler_info",
        {**batch, "scaletargetref_kind": "Deployment", "scaletargetref_name": "batch"},
        [(s, 1.0) for s in everywhere],
    )
    for metric, value in (("status_desired_replicas", 1.0), ("spec_min_replicas", 1.0), ("spec_max_replicas", 4.0)):
        out.add(f"kube_horizontalpodautoscaler_{metric}", batch, [(s, value) for s in everywhere])
    out.add(
        "kube_horizontalpodautoscaler_spec_target_metric",
        {**batch, "metric_name": "queue_depth", "metric_target_type": "average"},
        [(s, 30.0) for s in everywhere],
    )
    lines = [line for family in out.families.values() for line in family]
    return "\n".join([*lines, "# EOF", ""])


#: The web HPA's spec.metrics as kube-state-metrics exports them: (metric_name, metric_target_type) -> value.
HPA_TARGETS = {("cpu", "utilization"): 70.0, ("memory", "average"): 400.0 * MIB}


def started(pod: Pod) -> int:
    """``kube_pod_start_time``: the kubelet started the pod 30 s before its first sample."""
    return pod.start - 30


def pods_at(t: int) -> list[Pod]:
    return [p for p in PODS if p.start <= t <= p.end]


def truth(t: int, pod: Pod, container: str) -> dict[str, object] | None:
    """The sample the import must give for ``pod``'s ``container`` at step ``t`` (None: none)."""
    if _in_gap(pod, t):  # no sample within the lookback delta
        return None
    sample: dict[str, object] = {"pod": pod.name, "container": container}
    if t - STEP >= pod.start and not _in_gap(pod, t - STEP):  # the rate needs the window's both ends
        sample["cpu"] = cpu_rate(pod, container, t)
    sample["memory"] = memory(pod, container, t)
    if t < pod.unready_until:
        sample["ready"] = False
    if pod.oom_at == t:
        sample["oom"] = True
    return sample
