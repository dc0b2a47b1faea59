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

Three modules, one job each: :mod:`analysis.upstream_arms` (the manifests, parsed),
:mod:`analysis.upstream_pods` (the pods and what the HPA and the VPA's admission controller and
updater do to them) and this one (the closed loop).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.outcomes import GIB, Demand, Outcome
from analysis.upstream_arms import HpaArm, UpstreamArm, VpaArm, is_upstream, parse_upstream
from analysis.upstream_pods import (
    EVICT_AFTER_OOM_THRESHOLD,
    UPDATER_INTERVAL,
    PodSim,
    admit,
    hpa_inputs,
    hpa_units,
    updater_pass,
)
from scaling.quantity import format_quantity
from scaling.recommend import hpa as hpa_rec
from scaling.recommend import vpa as vpa_rec
from scaling.settings import Settings

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
    out = Outcome(policy_name, demand.workload.key)
    if not demand.points:
        return out
    loop = _Loop(demand, arm, settings, delay, out, record)
    for ts, totals in demand.points:
        loop.integrate(ts)
        ready = [p for p in loop.pods if p.ready(ts)]
        usage, by_container = loop.observe(ts, totals, ready)
        if arm.vpa is not None:
            loop.recommend(ts, by_container, arm.vpa)
        if arm.hpa is not None and (loop.last_hpa is None or ts - loop.last_hpa >= settings.sync_period):
            loop.hpa_sync(ts, usage, arm.hpa)
        if arm.vpa is not None and (loop.last_updater is None or ts - loop.last_updater >= UPDATER_INTERVAL):
            loop.updater(ts, arm.vpa)
        loop.book(ts, totals, ready, by_container)
    out.samples = len(demand.points)
    return out


class _Loop:
    """An upstream arm over one workload's demand, sample by sample: the pods' usage
    (:meth:`observe`), the VPA recommender (:meth:`recommend`), the HPA (:meth:`hpa_sync`), the VPA
    updater and admission controller (:meth:`updater`, :meth:`start`), and the outcome bookkeeping
    (:meth:`integrate`, :meth:`book`: rates held from one sample to the next)."""

    def __init__(
        self,
        demand: Demand,
        arm: UpstreamArm,
        settings: Settings,
        delay: float,
        out: Outcome,
        record: list[dict[str, Any]] | None,
    ) -> None:
        self.demand = demand
        self.vpa = arm.vpa
        self.hpa = arm.hpa
        self.settings = settings
        self.cfg = settings.vpa_config
        self.delay = delay
        self.out = out
        self.record = record
        t0 = demand.points[0][0]
        self.serial = 0
        self.pods = [
            self.new_pod(
                {c: dict(v) for c, v in demand.requests.items()},
                {c: dict(v) for c, v in demand.limits.items()},
                t0,
                t0,
            )
            for _ in range(demand.replicas)
        ]
        self.replicas = demand.replicas
        self.admitted = (demand.requests, demand.limits)  # the spec new pods were last started with
        self.states: dict[str, vpa_rec.ContainerState] = {}
        self.recs: dict[str, vpa_rec.Recommendation] = {}
        self.hstate = hpa_rec.HpaState()
        self.last_vpa: float | None = None
        self.last_updater: float | None = None
        self.last_hpa: float | None = None
        self.last_gc: float | None = None
        self.cursor = t0
        # The rates held from one sample to the next (as analysis.closed_loop integrates tandem's arm).
        self.cpu_rate = self.mem_rate = self.short_rate = 0.0
        self.over = 0
        self.short = 0.0
        self.container_requests = hpa_units(demand.requests)
        self.changed = True  # whether the pods changed at this sample (the timeline, the rates)

    def new_pod(
        self, req: dict[str, dict[str, int]], lim: dict[str, dict[str, int]], ts: float, ready: float
    ) -> PodSim:
        self.serial += 1
        return PodSim(f"up-{self.serial}", req, lim, ts, ready)

    def start(self, ts: float) -> PodSim:
        """A new pod, as the VPA admission controller admits it (:func:`admit`)."""
        req, lim = admit(self.demand.requests, self.demand.limits, self.recs, self.vpa)
        if (req, lim) != self.admitted:
            self.out.resizes += 1
            self.admitted = (req, lim)
        return self.new_pod(req, lim, ts, ts + self.delay)

    def integrate(self, ts: float) -> None:
        """The outcomes up to ``ts``, at the rates held since the last sample."""
        if ts > self.cursor:
            out = self.out
            hours = (ts - self.cursor) / 3600
            out.cpu_core_hours += self.cpu_rate * hours
            out.memory_gib_hours += self.mem_rate * hours
            out.cpu_shortfall_core_hours += self.short_rate * hours
            if self.over & 1:
                out.hours_over_requests += hours
            if self.over & 2:
                out.hours_over_limits += hours
            self.cursor = ts

    def observe(
        self, ts: float, totals: Mapping[str, tuple[float, float]], ready: Sequence[PodSim]
    ) -> tuple[dict[str, dict[str, dict[str, int]]], dict[str, list[tuple[str, float, int, bool]]]]:
        """What each ready pod uses: the demand split evenly (a Service balances by connection,
        not by pod size; memory on top of each pod's own ``Demand.memory_at_rest``), its OOM
        kills, its CPU beyond its limit (or request without a limit).
        Returns the HPA's usage (pod -> container -> cpu, memory) and per container the pods'
        (name, cpu, memory, oom)."""
        out = self.out
        n = len(ready)
        rest = self.demand.memory_at_rest
        over = 0
        short = 0.0
        usage: dict[str, dict[str, dict[str, int]]] = {}
        by_container: dict[str, list[tuple[str, float, int, bool]]] = {}
        for c, (cpu, mem) in sorted(totals.items()):
            if n == 0:
                short += cpu
                continue
            per_cpu = cpu / n
            per_pod_mem = rest + mem / n  # rest 0.0: mem / n, the same float
            used_mem = per_pod_mem * 1000
            per_mem = int(per_pod_mem)
            for p in ready:
                req = p.requests.get(c, {})
                lim = p.limits.get(c, {})
                used = per_cpu * 1000
                cap = lim.get("cpu", req.get("cpu"))
                if cap is not None and used > cap:
                    short += (used - cap) / 1000
                if ("cpu" in req and used > req["cpu"]) or ("memory" in req and used_mem > req["memory"]):
                    over |= 1
                oom = "memory" in lim and per_mem * 1000 > lim["memory"]
                if ("cpu" in lim and used > lim["cpu"]) or ("memory" in lim and used_mem > lim["memory"]):
                    over |= 2
                if oom:
                    out.oom_kills += 1
                    if ts - p.created < EVICT_AFTER_OOM_THRESHOLD:
                        p.quick_oom = True
                by_container.setdefault(c, []).append((p.name, per_cpu, per_mem, oom))
                v = math.ceil(per_cpu * 1000 - 1e-6)
                usage.setdefault(p.name, {})[c] = {"cpu": v, "memory": per_mem}
        self.over = over
        self.short = short
        return usage, by_container

    def recommend(self, ts: float, by_container: Mapping[str, list[tuple[str, float, int, bool]]], vpa: VpaArm) -> None:
        """The VPA recommender: fed every sample (as scaling.own.observe feeds tandem's own VPA),
        recommending once per ``recommender_interval``."""
        cfg = self.cfg
        states = self.states
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
        if self.last_vpa is None or ts - self.last_vpa >= cfg.recommender_interval:
            self.last_vpa = ts
            live = {p.name for p in self.pods}
            for cs in states.values():
                cs.forget_pods(live)
            self.recs = vpa_rec.recommend(states, ts, cfg, vpa.policies)
            self.last_gc = vpa_rec.collect_garbage(states, ts, self.last_gc, cfg)

    def hpa_sync(self, ts: float, usage: Mapping[str, Mapping[str, Mapping[str, int]]], hpa: HpaArm) -> None:
        """One HPA sync: its desired replicas, new pods admitted by the VPA, or the ReplicaSet's
        choice of pods to delete."""
        self.last_hpa = ts
        infos, inputs = hpa_inputs(self.pods, usage, self.container_requests, ts)
        result, self.hstate = hpa_rec.recommend(
            hpa.metrics,
            hpa.behavior,
            hpa.min_replicas,
            hpa.max_replicas,
            self.replicas,
            len(self.pods),
            infos,
            inputs,
            self.hstate,
            ts,
            self.settings.hpa_config,
        )
        desired = result.desired_replicas
        replicas = self.replicas
        if desired != replicas:
            self.out.replica_changes += 1
            self.out.decisions += 1
            if desired > replicas:
                self.pods.extend(self.start(ts) for _ in range(desired - replicas))
            else:
                # The ReplicaSet deletes not-ready pods first, then the newest
                # (pkg/controller/replicaset getPodsToDelete, ActivePodsWithRanks).
                order = sorted(self.pods, key=lambda p: (p.ready(ts), -p.created, p.name))
                gone = {p.name for p in order[: replicas - desired]}
                self.pods = [p for p in self.pods if p.name not in gone]
            self.replicas = desired
            self.changed = True

    def updater(self, ts: float, vpa: VpaArm) -> None:
        """One VPA updater run: the pods it evicts, re-created by the ReplicaSet and admitted."""
        self.last_updater = ts
        evict = updater_pass(self.pods, self.replicas, self.recs, vpa, ts)
        if evict:
            gone = {p.name for p in evict}
            self.pods = [p for p in self.pods if p.name not in gone]
            self.out.evictions += len(evict)
            self.out.pod_restarts += len(evict)
            self.out.decisions += 1
            self.pods.extend(self.start(ts) for _ in evict)  # the ReplicaSet re-creates them, admitted
            self.changed = True

    def book(
        self,
        ts: float,
        totals: Mapping[str, tuple[float, float]],
        ready: Sequence[PodSim],
        by_container: Mapping[str, list[tuple[str, float, int, bool]]],
    ) -> None:
        """The sample's bookkeeping: the timeline and the report's stream, the rates held until
        the next sample, saturation."""
        out, pods, replicas, record = self.out, self.pods, self.replicas, self.record
        if self.changed and _changed_timeline(out, replicas, pods):
            out.timeline.append((ts, replicas, _mean_requests(pods)))
            if record is not None:  # the spec for the report: the pods' mean requests, the template's limits
                record.append(self.spec_event(ts))
        if record is not None:  # after the spec of this sample: the report reads the spec first
            record.append(
                {
                    "type": "metric",
                    "ts": ts,
                    "workload": self.demand.workload.as_dict(),
                    "samples": [
                        {"pod": name, "container": c, "cpu": cpu, "memory": mem, "oom": oom}
                        for c, group in by_container.items()
                        for name, cpu, mem, oom in group
                    ],
                }
            )
        if self.changed:
            # The rates until the pods change: every pod's requests are paid for, started or not.
            self.cpu_rate = sum(r.get("cpu", 0) for p in pods for r in p.requests.values()) / 1000
            self.mem_rate = sum(r.get("memory", 0) for p in pods for r in p.requests.values()) / 1000 / GIB
            self.changed = False
        self.short_rate = self.short
        hpa = self.hpa
        if hpa is not None and replicas >= hpa.max_replicas:
            capacity = sum(r.get("cpu", 0) for p in ready for r in p.requests.values()) / 1000
            if sum(cpu for cpu, _ in totals.values()) > capacity:
                out.saturated_samples += 1

    def spec_event(self, ts: float) -> dict[str, Any]:
        """The workload event of the report's stream: the pods' mean requests, the template's limits."""
        return {
            "type": "workload",
            "ts": ts,
            "workload": self.demand.workload.as_dict(),
            "replicas": self.replicas,
            "containers": {
                c: {
                    "requests": {r: format_quantity(r, v) for r, v in sorted(res.items())},
                    "limits": {r: format_quantity(r, v) for r, v in sorted(self.demand.limits.get(c, {}).items())},
                }
                for c, res in sorted(self.out.timeline[-1][2].items())
            },
        }


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
