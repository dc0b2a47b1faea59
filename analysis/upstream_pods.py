"""The simulated pods of an upstream arm (:mod:`analysis.upstream`) and what upstream's controllers
do to them: the HPA reads them (:func:`hpa_inputs`), the VPA admission controller sets a new pod's
requests and limits (:func:`admit`), the VPA updater evicts (:func:`updater_pass`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from analysis.upstream_arms import VpaArm
from scaling.recommend import hpa as hpa_rec
from scaling.recommend import vpa as vpa_rec

__all__ = [
    "EVICTION_TOLERANCE",
    "EVICT_AFTER_OOM_THRESHOLD",
    "MIN_CHANGE_PRIORITY",
    "POD_LIFETIME_UPDATE_THRESHOLD",
    "UPDATER_INTERVAL",
    "PodSim",
    "admit",
    "hpa_inputs",
    "hpa_units",
    "updater_pass",
]

# The VPA updater's flags and constants, upstream defaults (kubernetes/autoscaler
# vertical-pod-autoscaler/pkg/updater/main.go; "Vertical Pod Autoscaler Flags", "What are the
# parameters to VPA updater?": https://github.com/kubernetes/autoscaler/blob/master/vertical-pod-autoscaler/docs/flags.md).
#: ``--updater-interval``: how often the updater runs.
UPDATER_INTERVAL = 60.0
#: ``--eviction-tolerance``: the fraction of configured replicas that may be evicted at once.
EVICTION_TOLERANCE = 0.5
#: ``--pod-update-threshold``: the least relative change that updates a pod inside the bounds.
MIN_CHANGE_PRIORITY = 0.1
#: ``--in-recommendation-bounds-eviction-lifetime-threshold``: a pod inside the bounds is left alone younger than this.
POD_LIFETIME_UPDATE_THRESHOLD = 12 * 3600.0
#: ``--evict-after-oom-threshold``: an OOM kill this soon after the pod started is a "quick OOM".
EVICT_AFTER_OOM_THRESHOLD = 600.0


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
            self._hpa_requests = hpa_units(self.requests)
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


def hpa_units(values: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Milli-units to the HPA's units (cpu millicores, memory bytes)."""
    return {c: {r: (v if r == "cpu" else v // 1000) for r, v in res.items()} for c, res in values.items()}
