"""What teams run today, simulated: an upstream HPA and VPA on one workload, unaware of each other.

``tandem simulate --policy FILE`` takes, besides tandem's own policy kinds, a file of upstream
``HorizontalPodAutoscaler`` (``autoscaling/v2``) and ``VerticalPodAutoscaler``
(``autoscaling.k8s.io/v1``) manifests.  Each workload of such a file runs as the upstream
controllers would run it, pod by pod (the VPA makes pods of one workload differ):

* the HPA (tandem's own copy of the controller, :mod:`scaling.recommend.hpa`) every sync period,
  on the utilization of each pod's *own* current requests, so it reacts to a resize the VPA just
  made (a pod re-admitted with twice the CPU request halves the utilization it reports);
* the VPA recommender (tandem's own copy, :mod:`scaling.recommend.vpa`) once per
  ``recommender_interval`` on the pods' samples;
* the VPA updater once a minute (``--updater-interval``, default 1m) in ``Recreate`` and ``Auto``
  mode: the eviction rule of kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/updater``
  (:func:`updater_pass`);
* the VPA admission controller on every pod created (HPA scale-up, a pod re-created after an
  eviction) unless the mode is ``Off``: requests = the target; limits scaled in proportion
  (:func:`admit`).

This is a simulation-only arm: it decides nothing in tandem's core and needs no policy kind.
The pod model and its assumptions are in docs/evaluation.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.outcomes import GIB, Demand, Outcome
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies import policy_target
from scaling.quantity import format_quantity
from scaling.recommend import hpa as hpa_rec
from scaling.recommend import vpa as vpa_rec
from scaling.settings import Settings
from scaling.spelling import did_you_mean

__all__ = [
    "HpaArm",
    "PodSim",
    "UpstreamArm",
    "VpaArm",
    "admit",
    "hpa_inputs",
    "is_upstream",
    "parse_upstream",
    "simulate_upstream",
    "updater_pass",
]

HPA_KIND = ("HorizontalPodAutoscaler", "autoscaling/v2")
VPA_KIND = ("VerticalPodAutoscaler", "autoscaling.k8s.io/v1")
UPDATE_MODES = ("Off", "Initial", "Recreate", "Auto")

# The VPA updater's flags and constants, upstream defaults (kubernetes/autoscaler
# vertical-pod-autoscaler/pkg/updater/main.go; "Vertical Pod Autoscaler Flags", "What are the
# parameters to VPA updater?": https://github.com/kubernetes/autoscaler/blob/master/vertical-pod-autoscaler/docs/flags.md).
#: ``--updater-interval``: how often the updater runs.
UPDATER_INTERVAL = 60.0
#: ``--min-replicas``: no eviction while a workload has fewer live pods (``updatePolicy.minReplicas`` overrides).
MIN_REPLICAS = 2
#: ``--eviction-tolerance``: the fraction of configured replicas that may be evicted at once.
EVICTION_TOLERANCE = 0.5
#: ``--pod-update-threshold``: the least relative change that updates a pod inside the bounds.
MIN_CHANGE_PRIORITY = 0.1
#: ``--in-recommendation-bounds-eviction-lifetime-threshold``: a pod inside the bounds is left alone younger than this.
POD_LIFETIME_UPDATE_THRESHOLD = 12 * 3600.0
#: ``--evict-after-oom-threshold``: an OOM kill this soon after the pod started is a "quick OOM".
EVICT_AFTER_OOM_THRESHOLD = 600.0


@dataclass(frozen=True)
class HpaArm:
    """An ``autoscaling/v2`` HPA: what :func:`scaling.recommend.hpa.recommend` takes."""

    name: str
    metrics: tuple[Mapping[str, Any], ...]
    behavior: Mapping[str, Any] | None
    min_replicas: int
    max_replicas: int


@dataclass(frozen=True)
class VpaArm:
    """An ``autoscaling.k8s.io/v1`` VPA: its update mode and container policies."""

    name: str
    mode: str
    policies: Mapping[str, vpa_rec.ContainerPolicy]
    min_replicas: int = MIN_REPLICAS


@dataclass(frozen=True)
class UpstreamArm:
    """One workload's upstream autoscalers from one policy file (either may be absent, not both)."""

    workload: WorkloadRef
    hpa: HpaArm | None
    vpa: VpaArm | None


def is_upstream(doc: Mapping[str, Any]) -> bool:
    """Whether a manifest is an upstream HPA or VPA (by ``kind``; its ``apiVersion`` is checked later)."""
    return doc.get("kind") in (HPA_KIND[0], VPA_KIND[0])


def _check_fields(where: str, raw: Mapping[str, Any], known: Sequence[str]) -> None:
    for key in raw:
        if key not in known:
            raise InvalidPolicy(f"{where}.{key}", f"unknown field{did_you_mean(str(key), known)}")


def _int(raw: Any, where: str, default: int | None = None, least: int = 0) -> int:
    if raw is None and default is not None:
        return default
    if type(raw) is not int or raw < least:
        raise InvalidPolicy(where, f"expected an integer >= {least}, got {raw!r}")
    return raw


def _parse_hpa(doc: Mapping[str, Any]) -> HpaArm:
    if doc.get("apiVersion") != HPA_KIND[1]:
        raise InvalidPolicy(
            "apiVersion", f"expected {HPA_KIND[1]} for a HorizontalPodAutoscaler, got {doc.get('apiVersion')!r}"
        )
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidPolicy("spec", "expected an object")
    _check_fields("spec", spec, ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior"))
    metrics = spec.get("metrics")
    if not metrics:
        # autoscaling/v2 defaulting (pkg/apis/autoscaling/v2/defaults.go): no metrics is 80% CPU.
        metrics = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    try:
        hpa_rec.parse_metrics(metrics, path="spec.metrics")
        hpa_rec.parse_behavior(spec.get("behavior"))
    except ValueError as exc:
        if isinstance(exc, InvalidPolicy):
            raise
        field_name, _, why = str(exc).partition(": ")
        raise InvalidPolicy(field_name if why else "spec", why or field_name) from None
    min_replicas = _int(spec.get("minReplicas"), "spec.minReplicas", default=1, least=1)
    max_replicas = _int(spec.get("maxReplicas"), "spec.maxReplicas", least=1)
    if max_replicas < min_replicas:
        raise InvalidPolicy("spec.maxReplicas", f"{max_replicas} is below minReplicas {min_replicas}")
    meta = doc.get("metadata") or {}
    return HpaArm(str(meta.get("name") or "hpa"), tuple(metrics), spec.get("behavior"), min_replicas, max_replicas)


def _parse_vpa(doc: Mapping[str, Any]) -> VpaArm:
    if doc.get("apiVersion") != VPA_KIND[1]:
        raise InvalidPolicy(
            "apiVersion", f"expected {VPA_KIND[1]} for a VerticalPodAutoscaler, got {doc.get('apiVersion')!r}"
        )
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidPolicy("spec", "expected an object")
    _check_fields("spec", spec, ("targetRef", "updatePolicy", "resourcePolicy", "recommenders"))
    update = spec.get("updatePolicy") or {}
    if not isinstance(update, Mapping):
        raise InvalidPolicy("spec.updatePolicy", "expected an object")
    _check_fields("spec.updatePolicy", update, ("updateMode", "minReplicas", "evictionRequirements"))
    mode = update.get("updateMode") or "Auto"  # the API's default
    if mode not in UPDATE_MODES:
        raise InvalidPolicy(
            "spec.updatePolicy.updateMode",
            f"{mode!r} is not simulated (expected one of {', '.join(UPDATE_MODES)})"
            + did_you_mean(str(mode), UPDATE_MODES),
        )
    if update.get("evictionRequirements"):
        raise InvalidPolicy("spec.updatePolicy.evictionRequirements", "is not simulated")
    min_replicas = _int(update.get("minReplicas"), "spec.updatePolicy.minReplicas", default=MIN_REPLICAS, least=1)
    resource_policy = spec.get("resourcePolicy")
    if resource_policy is not None and not isinstance(resource_policy, Mapping):
        raise InvalidPolicy("spec.resourcePolicy", "expected an object")
    try:
        policies = vpa_rec.policies_from_resource_policy(resource_policy)
    except InvalidPolicy as exc:
        raise exc.within("spec.resourcePolicy") from None
    meta = doc.get("metadata") or {}
    return VpaArm(str(meta.get("name") or "vpa"), str(mode), policies, min_replicas)


def parse_upstream(docs: Sequence[Mapping[str, Any]], cluster: str) -> list[UpstreamArm]:
    """The upstream arms of a policy file, one per workload, in the order the workloads appear.

    Raises :class:`InvalidPolicy` naming the document (``document N (kind ns/name)``) and field.
    """
    hpas: dict[str, HpaArm] = {}
    vpas: dict[str, VpaArm] = {}
    refs: dict[str, WorkloadRef] = {}
    for i, doc in enumerate(docs, 1):
        raw_meta = doc.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        what = f"document {i} ({doc.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name') or '?'})"
        try:
            if not is_upstream(doc):
                raise InvalidPolicy(
                    "kind",
                    "a file of upstream HorizontalPodAutoscaler/VerticalPodAutoscaler manifests holds nothing else",
                )
            ref = policy_target(doc, cluster)
            if doc["kind"] == HPA_KIND[0]:
                if ref.key in hpas:
                    raise InvalidPolicy("spec.scaleTargetRef", f"a second HPA for {ref.key}")
                hpas[ref.key] = _parse_hpa(doc)
            else:
                if ref.key in vpas:
                    raise InvalidPolicy("spec.targetRef", f"a second VPA for {ref.key}")
                vpas[ref.key] = _parse_vpa(doc)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"{what}: {exc.field}", exc.reason) from None
        refs.setdefault(ref.key, ref)
    return [UpstreamArm(ref, hpas.get(key), vpas.get(key)) for key, ref in refs.items()]


@dataclass
class PodSim:
    """One simulated pod: its own requests and limits (container -> resource -> milli-units)."""

    name: str
    requests: dict[str, dict[str, int]]
    limits: dict[str, dict[str, int]]
    created: float
    ready_at: float
    #: an OOM kill within ``EVICT_AFTER_OOM_THRESHOLD`` of its start (the updater's "quick OOM")
    quick_oom: bool = False
    #: what the HPA reads of the pod, made once per readiness state (the pod's spec never changes)
    _info: tuple[bool, hpa_rec.PodInfo] | None = field(default=None, repr=False, compare=False)
    _hpa_requests: dict[str, dict[str, int]] | None = field(default=None, repr=False, compare=False)

    def ready(self, ts: float) -> bool:
        return self.ready_at <= ts

    def info(self, ts: float) -> hpa_rec.PodInfo:
        """The pod as the HPA's ``groupPods`` sees it at ``ts``."""
        ready = self.ready_at <= ts
        cached = self._info
        if cached is None or cached[0] != ready:
            since = self.ready_at if ready else None
            cached = self._info = (ready, hpa_rec.PodInfo(self.name, ready, "Running", self.created, since))
        return cached[1]

    def hpa_requests(self) -> dict[str, dict[str, int]]:
        """The pod's requests in the HPA's units (cpu millicores, memory bytes)."""
        if self._hpa_requests is None:
            self._hpa_requests = _hpa_units(self.requests)
        return self._hpa_requests


def admit(
    template_requests: Mapping[str, Mapping[str, int]],
    template_limits: Mapping[str, Mapping[str, int]],
    recs: Mapping[str, vpa_rec.Recommendation] | None,
    vpa: VpaArm | None,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """The requests and limits the VPA admission controller gives a new pod of this template.

    kubernetes/autoscaler vertical-pod-autoscaler/pkg/admission-controller/resource/pod/recommendation
    (recommendation_provider.go GetContainersResourcesForPod): each recommended resource's request
    becomes the target; with ``controlledValues: RequestsAndLimits`` (the default) its limit is
    scaled in proportion, ``limit × target / original request``
    (pkg/utils/vpa/limit_and_request_scaling.go GetProportionalLimit); with ``RequestsOnly`` the
    limit is kept, and the target was capped to it first (pkg/utils/vpa/capping.go
    capRecommendationToContainerLimit).  Mode ``Off`` (or no recommendation yet): the template.
    Resources in milli-units (``cpu`` millicores, ``memory`` milli-bytes), as the simulator's spec.
    """
    requests = {c: dict(v) for c, v in template_requests.items()}
    limits = {c: dict(v) for c, v in template_limits.items()}
    if vpa is None or vpa.mode == "Off" or not recs:
        return requests, limits
    for c, rec in recs.items():
        policy = vpa.policies.get(c) or vpa.policies.get("*")
        if policy is not None and policy.mode == "Off":
            continue
        lim_bytes = {r: (v if r == "cpu" else v // 1000) for r, v in limits.get(c, {}).items()}
        rec, _ = vpa_rec.cap_to_container_limits(rec, lim_bytes, policy)
        values = policy.controlled_values if policy is not None else "RequestsAndLimits"
        for r, amount in rec.target.items():
            new = amount if r == "cpu" else amount * 1000
            old = template_requests.get(c, {}).get(r)
            requests.setdefault(c, {})[r] = new
            old_limit = template_limits.get(c, {}).get(r)
            if values == "RequestsAndLimits" and old_limit is not None and old:
                # GetProportionalLimit: originalLimit * recommendedRequest / originalRequest, in
                # integer milli-units (big.Int there: exact, truncated).
                limits[c][r] = old_limit * new // old
    return requests, limits


@dataclass
class _Priority:
    outside: bool
    scale_up: bool
    diff: float


def _priority(pod: PodSim, recs: Mapping[str, vpa_rec.Recommendation], vpa: VpaArm) -> _Priority:
    """kubernetes/autoscaler vertical-pod-autoscaler/pkg/updater/priority/priority_processor.go
    (defaultPriorityProcessor.GetUpdatePriority): for each of the pod's containers with a
    recommendation, per recommended resource, a request below the lower bound or above the upper
    bound (or absent) is outside the recommended range; a target above the request is a
    scale-up; ``ResourceDiff`` sums |total request - total target| / total request over the
    resources (milli-values).  The recommendation is first processed for this pod as the
    updater's ``recommendationProcessor.Apply`` does: capped to the pod's limits under
    ``RequestsOnly`` (pkg/utils/vpa/capping.go)."""
    outside = scale_up = False
    req_total: dict[str, int] = {}
    rec_total: dict[str, int] = {}
    for c in sorted(set(pod.requests) | set(pod.limits)):
        raw = recs.get(c)
        if raw is None:
            continue
        policy = vpa.policies.get(c) or vpa.policies.get("*")
        limits = {r: (v if r == "cpu" else v // 1000) for r, v in pod.limits.get(c, {}).items()}
        rec, _ = vpa_rec.cap_to_container_limits(raw, limits, policy)
        for r, target in rec.target.items():
            scale = 1 if r == "cpu" else 1000  # the recommendation's millicores or bytes, in milli-units
            target *= scale
            rec_total[r] = rec_total.get(r, 0) + target
            request = pod.requests.get(c, {}).get(r)
            if request is None:
                scale_up = outside = True
                continue
            req_total[r] = req_total.get(r, 0) + request
            if target > request:
                scale_up = True
            lower = rec.lower_bound.get(r)
            upper = rec.upper_bound.get(r)
            if (lower is not None and request < lower * scale) or (upper is not None and request > upper * scale):
                outside = True
    diff = 0.0
    for r, total in rec_total.items():
        req = max(float(req_total.get(r, 0)), 1.0)
        diff += abs(req - float(total)) / req
    return _Priority(outside, scale_up, diff)


def updater_pass(
    pods: Sequence[PodSim], replicas: int, recs: Mapping[str, vpa_rec.Recommendation], vpa: VpaArm, now: float
) -> list[PodSim]:
    """The pods one VPA updater run evicts, in eviction order.

    kubernetes/autoscaler vertical-pod-autoscaler/pkg/updater:

    * priority/update_priority_calculator.go (AddPod): a pod is a candidate if a request is outside
      the recommended range, or it was OOM-killed within ``--evict-after-oom-threshold`` of its
      start and its resources would change; else only if it has lived
      ``--in-recommendation-bounds-eviction-lifetime-threshold`` (12 h) and its ResourceDiff is at
      least ``--pod-update-threshold`` (0.1).  Candidates are sorted scale-ups first, then by
      larger ResourceDiff (PodPriority.Less).
    * restriction/pods_restriction_factory.go (GetCreatorMaps): no eviction at all while the
      workload has fewer live pods than ``minReplicas`` (``updatePolicy.minReplicas``, else
      ``--min-replicas`` 2); ``evictionTolerance = int(configured × --eviction-tolerance)``.
    * restriction/pods_eviction_restriction.go (CanEvict, Evict) and isPodDisruptable: a pending
      pod may always be evicted; another only while ``running - evicted > configured - tolerance``,
      or when all configured pods run, the tolerance is 0 and nothing was evicted yet.

    Here a pod not yet ready counts as pending (docs/evaluation.md), ``configured`` is the
    workload's replicas.
    """
    if vpa.mode not in ("Recreate", "Auto") or not recs or len(pods) < vpa.min_replicas:
        return []
    candidates: list[tuple[_Priority, int, PodSim]] = []
    for i, pod in enumerate(pods):
        prio = _priority(pod, recs, vpa)
        young = now < pod.created + POD_LIFETIME_UPDATE_THRESHOLD
        if not prio.outside and not pod.quick_oom and (young or prio.diff < MIN_CHANGE_PRIORITY):
            continue
        if pod.quick_oom and prio.diff == 0:
            continue
        candidates.append((prio, i, pod))
    # Stable: equal priorities keep the pods' order (Go's slices.SortFunc is not stable; the
    # order among equals is not specified upstream).
    candidates.sort(key=lambda t: (not t[0].scale_up, -t[0].diff, t[1]))
    configured = replicas
    tolerance = int(configured * EVICTION_TOLERANCE)
    running = sum(1 for p in pods if p.ready(now))
    evicted = 0
    out: list[PodSim] = []
    for _, _, pod in candidates:
        if not pod.ready(now):
            out.append(pod)  # CanEvict: a pending pod always
            continue
        alive = running - evicted
        if alive > configured - tolerance or (configured == running and tolerance == 0 and evicted == 0):
            out.append(pod)
            evicted += 1
    return out


def hpa_inputs(
    pods: Sequence[PodSim],
    usage: Mapping[str, Mapping[str, Mapping[str, int]]],
    template_requests: Mapping[str, Mapping[str, int]],
    ts: float,
) -> tuple[tuple[hpa_rec.PodInfo, ...], hpa_rec.MetricInputs]:
    """What the HPA controller reads at ``ts``: every pod (ready or still starting), the ready pods'
    usage (``usage``: pod -> container -> cpu millicores, memory bytes) and each pod's *own*
    requests.  Upstream's utilization divides by the requests in each pod's spec
    (pkg/controller/podautoscaler/metrics/utilization.go GetResourceUtilizationRatio, fed by
    replica_calculator.go calculatePodRequests), so a pod the VPA re-admitted with twice the
    request reports half the utilization for the same usage."""
    infos = tuple([p.info(ts) for p in pods])
    inputs = hpa_rec.MetricInputs(
        pod_usage=usage,
        container_requests=template_requests,
        pod_requests={p.name: p.hpa_requests() for p in pods},
        sample_ts={p.name: ts for p in pods if p.ready(ts)},
    )
    return infos, inputs


def _hpa_units(values: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Milli-units to the HPA's units (cpu millicores, memory bytes)."""
    return {c: {r: (v if r == "cpu" else v // 1000) for r, v in res.items()} for c, res in values.items()}


def simulate_upstream(
    demand: Demand,
    arm: UpstreamArm,
    policy_name: str,
    settings: Settings,
    delay: float,
    record: list[dict[str, Any]] | None = None,
) -> Outcome:
    """Run an upstream HPA and/or VPA over one workload's demand, pod by pod, in closed loop.

    ``delay``: a new or re-created pod's start-up time, during which it is requested (and paid
    for) but serves nothing.  The outcomes are those of :class:`analysis.simulate.Outcome`.
    """
    ref = demand.workload
    out = Outcome(policy_name, ref.key)
    if not demand.points:
        return out
    hpa, vpa = arm.hpa, arm.vpa
    cfg = settings.vpa_config
    t0 = demand.points[0][0]
    serial = 0

    def new_pod(req: dict[str, dict[str, int]], lim: dict[str, dict[str, int]], ts: float, ready: float) -> PodSim:
        nonlocal serial
        serial += 1
        return PodSim(f"up-{serial}", req, lim, ts, ready)

    pods = [
        new_pod(
            {c: dict(v) for c, v in demand.requests.items()}, {c: dict(v) for c, v in demand.limits.items()}, t0, t0
        )
        for _ in range(demand.replicas)
    ]
    replicas = demand.replicas
    admitted = (demand.requests, demand.limits)  # the spec new pods were last started with
    states: dict[str, vpa_rec.ContainerState] = {}
    recs: dict[str, vpa_rec.Recommendation] = {}
    hstate = hpa_rec.HpaState()
    last_vpa = last_updater = last_hpa = None
    last_gc: float | None = None
    cursor = t0
    # The rates held from one sample to the next (as analysis.simulate integrates tandem's arm).
    cpu_rate = mem_rate = short_rate = 0.0
    over = 0
    container_requests = _hpa_units(demand.requests)

    def start(ts: float) -> PodSim:
        nonlocal admitted
        req, lim = admit(demand.requests, demand.limits, recs, vpa)
        if (req, lim) != admitted:
            out.resizes += 1
            admitted = (req, lim)
        return new_pod(req, lim, ts, ts + delay)

    changed = True  # whether the pods changed at this sample (the timeline, the rates)
    for ts, totals in demand.points:
        if ts > cursor:
            hours = (ts - cursor) / 3600
            out.cpu_core_hours += cpu_rate * hours
            out.memory_gib_hours += mem_rate * hours
            out.cpu_shortfall_core_hours += short_rate * hours
            if over & 1:
                out.hours_over_requests += hours
            if over & 2:
                out.hours_over_limits += hours
            cursor = ts
        ready = [p for p in pods if p.ready(ts)]
        n = len(ready)
        # What each ready pod uses: the demand split evenly (a Service balances by connection,
        # not by pod size), its OOM kills, its CPU beyond its limit (or request without a limit).
        over = 0
        short = 0.0
        usage: dict[str, dict[str, dict[str, int]]] = {}
        by_container: dict[str, list[tuple[str, float, int, bool]]] = {}
        for c, (cpu, mem) in sorted(totals.items()):
            if n == 0:
                short += cpu
                continue
            per_cpu = cpu / n
            per_mem = int(mem / n)
            for p in ready:
                req = p.requests.get(c, {})
                lim = p.limits.get(c, {})
                used = per_cpu * 1000
                cap = lim.get("cpu", req.get("cpu"))
                if cap is not None and used > cap:
                    short += (used - cap) / 1000
                if ("cpu" in req and used > req["cpu"]) or ("memory" in req and mem / n * 1000 > req["memory"]):
                    over |= 1
                oom = "memory" in lim and per_mem * 1000 > lim["memory"]
                if ("cpu" in lim and used > lim["cpu"]) or ("memory" in lim and mem / n * 1000 > lim["memory"]):
                    over |= 2
                if oom:
                    out.oom_kills += 1
                    if ts - p.created < EVICT_AFTER_OOM_THRESHOLD:
                        p.quick_oom = True
                by_container.setdefault(c, []).append((p.name, per_cpu, per_mem, oom))
                v = math.ceil(per_cpu * 1000 - 1e-6)
                usage.setdefault(p.name, {})[c] = {"cpu": v, "memory": per_mem}
        if vpa is not None:
            # The recommender's feed (as scaling.own.observe feeds tandem's own VPA).
            for c, group in by_container.items():
                cs = states.get(c)
                if cs is None:
                    cs = states[c] = vpa_rec.ContainerState()
                cs.add_cpu_samples(ts, [g[1] for g in group], cfg, [g[0] for g in group])
                for name, _, mem, oom in group:
                    if oom:
                        cs.record_oom(ts, mem, cfg, pod=name)
                    else:
                        cs.add_memory_sample(ts, mem, cfg, pod=name)
            if last_vpa is None or ts - last_vpa >= cfg.recommender_interval:
                last_vpa = ts
                live = {p.name for p in pods}
                for cs in states.values():
                    cs.forget_pods(live)
                recs = vpa_rec.recommend(states, ts, cfg, vpa.policies)
                last_gc = vpa_rec.collect_garbage(states, ts, last_gc, cfg)
        if hpa is not None and (last_hpa is None or ts - last_hpa >= settings.sync_period):
            last_hpa = ts
            infos, inputs = hpa_inputs(pods, usage, container_requests, ts)
            result, hstate = hpa_rec.recommend(
                hpa.metrics,
                hpa.behavior,
                hpa.min_replicas,
                hpa.max_replicas,
                replicas,
                len(pods),
                infos,
                inputs,
                hstate,
                ts,
                settings.hpa_config,
            )
            desired = result.desired_replicas
            if desired != replicas:
                out.replica_changes += 1
                out.decisions += 1
                if desired > replicas:
                    pods.extend(start(ts) for _ in range(desired - replicas))
                else:
                    # The ReplicaSet deletes not-ready pods first, then the newest
                    # (pkg/controller/replicaset getPodsToDelete, ActivePodsWithRanks).
                    order = sorted(pods, key=lambda p: (p.ready(ts), -p.created, p.name))
                    gone = {p.name for p in order[: replicas - desired]}
                    pods = [p for p in pods if p.name not in gone]
                replicas = desired
                changed = True
        if vpa is not None and (last_updater is None or ts - last_updater >= UPDATER_INTERVAL):
            last_updater = ts
            evict = updater_pass(pods, replicas, recs, vpa, ts)
            if evict:
                gone = {p.name for p in evict}
                pods = [p for p in pods if p.name not in gone]
                out.evictions += len(evict)
                out.pod_restarts += len(evict)
                out.decisions += 1
                pods.extend(start(ts) for _ in evict)  # the ReplicaSet re-creates them, admitted
                changed = True
        if changed and _changed_timeline(out, replicas, pods):
            out.timeline.append((ts, replicas, _mean_requests(pods)))
            if record is not None:  # the spec for the report: the pods' mean requests, the template's limits
                record.append(
                    {
                        "type": "workload",
                        "ts": ts,
                        "workload": ref.as_dict(),
                        "replicas": replicas,
                        "containers": {
                            c: {
                                "requests": {r: format_quantity(r, v) for r, v in sorted(res.items())},
                                "limits": {
                                    r: format_quantity(r, v) for r, v in sorted(demand.limits.get(c, {}).items())
                                },
                            }
                            for c, res in sorted(out.timeline[-1][2].items())
                        },
                    }
                )
        if record is not None:  # after the spec of this sample: the report reads the spec first
            record.append(
                {
                    "type": "metric",
                    "ts": ts,
                    "workload": ref.as_dict(),
                    "samples": [
                        {"pod": name, "container": c, "cpu": cpu, "memory": mem, "oom": oom}
                        for c, group in by_container.items()
                        for name, cpu, mem, oom in group
                    ],
                }
            )
        if changed:
            # The rates until the pods change: every pod's requests are paid for, started or not.
            cpu_rate = sum(r.get("cpu", 0) for p in pods for r in p.requests.values()) / 1000
            mem_rate = sum(r.get("memory", 0) for p in pods for r in p.requests.values()) / 1000 / GIB
            changed = False
        short_rate = short
        if hpa is not None and replicas >= hpa.max_replicas:
            capacity = sum(r.get("cpu", 0) for p in ready for r in p.requests.values()) / 1000
            if sum(cpu for cpu, _ in totals.values()) > capacity:
                out.saturated_samples += 1
    out.samples = len(demand.points)
    return out


def _mean_requests(pods: Sequence[PodSim]) -> dict[str, dict[str, int]]:
    """The pods' mean requests (container -> resource -> milli-units), for the report's timeline."""
    total: dict[str, dict[str, int]] = {}
    for p in pods:
        for c, res in p.requests.items():
            for r, v in res.items():
                total.setdefault(c, {})[r] = total.get(c, {}).get(r, 0) + v
    n = max(len(pods), 1)
    return {c: {r: v // n for r, v in res.items()} for c, res in total.items()}


def _changed_timeline(out: Outcome, replicas: int, pods: Sequence[PodSim]) -> bool:
    if not out.timeline:
        return True
    _, n, req = out.timeline[-1]
    return n != replicas or req != _mean_requests(pods)
