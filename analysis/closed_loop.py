"""tandem's policies in closed loop (``tandem simulate``, :mod:`analysis.simulate`): one policy over
one workload's demand, through the very decision core the worker runs (``scaling.engine.Engine``).

* a simulated workload starts from the first recorded spec (replicas, requests, limits);
* at each sample time its per-pod usage is demand divided over the *simulated* replicas (memory:
  each pod's own ``Demand.memory_at_rest`` plus its share of the rest), sent to
  the core as ``metric`` samples, so tandem's own HPA and VPA recommenders see the simulated usage;
  memory above the simulated limit is an OOM kill (``"oom": true``);
* every decision is applied after ``delay`` seconds (pod start-up), and the simulated workload
  reports its new spec as a ``workload`` event, as a collector would;
* named series are replayed as recorded, per-pod ones over the simulated pods (:func:`series_over_pods`).

Three jobs, one place each: the policy's decisions (:meth:`_Loop.take`, :meth:`_Loop.hpa_scale`),
the pods' start-up (:meth:`_Loop.start_due`, :class:`_Sim`), the outcome bookkeeping (:class:`_Books`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from analysis.holt_winters import HoltWinters, baseline_horizon, baseline_of
from analysis.outcomes import GIB, Demand, Outcome
from scaling.engine import Engine, policy_event
from scaling.events import ContainerSample, MetricEvent, PolicyEvent, WorkloadRef
from scaling.policies import parse_policy
from scaling.quantity import format_quantity, parse_quantity
from scaling.reconcile import Emitted, flush, ingest
from scaling.settings import Settings
from scaling.vocabulary import DECISION

__all__ = ["HPA_OBJECT_KINDS", "series_over_pods", "simulate_one"]

_NONE: dict[str, int] = {}  # a container without requests or limits (read only)


_POD_NAMES: list[str] = []


def _pod_names(n: int) -> list[str]:
    """``sim-0`` .. ``sim-{n-1}``: the simulated pods' names, written once, not per sample."""
    while len(_POD_NAMES) < n:
        _POD_NAMES.append(f"sim-{len(_POD_NAMES)}")
    return _POD_NAMES[:n]


#: How long before the recording's first sample its pods are assumed to have started: longer than
#: the HPA's CPU initialization period (5 min), so that they count as ready from the first tick.
_RUNNING_BEFORE = 3600.0


@dataclass
class _Sim:
    replicas: int
    requests: dict[str, dict[str, int]]
    limits: dict[str, dict[str, int]]
    #: when each pod (``sim-0``, ``sim-1``...) started, listed in the workload events
    started: list[float] = field(default_factory=list)

    def workload_event(self, ref: WorkloadRef, ts: float) -> dict[str, Any]:
        """The simulated spec as a collector reports it, with the pods that exist: the HPA lists
        these (upstream's podLister), so a pod removed by a scale-down stops counting at once
        instead of lingering while its last sample is fresh (``scaling.own.USAGE_MAX_AGE``)."""
        return {
            "type": "workload",
            "ts": ts,
            "workload": ref.as_dict(),
            "replicas": self.replicas,
            "containers": {
                c: {
                    "requests": {r: format_quantity(r, v) for r, v in sorted(self.requests.get(c, {}).items())},
                    "limits": {r: format_quantity(r, v) for r, v in sorted(self.limits.get(c, {}).items())},
                }
                for c in sorted(set(self.requests) | set(self.limits))
            },
            "pods": [
                {"name": name, "ready": True, "phase": "Running", "started": t}
                for name, t in zip(_pod_names(self.replicas), self.started, strict=True)
            ],
        }

    def apply(self, data: dict[str, Any], created: float) -> tuple[bool, bool]:
        """Apply a decision; new or re-created pods started at ``created`` (and are ready now)."""
        replica_change = "replicas" in data
        if replica_change:
            self.replicas = data["replicas"]["to"]
        vertical = False
        for c, sections in data.get("containers", {}).items():
            for section in ("requests", "limits"):
                for r, ch in sections.get(section, {}).items():
                    getattr(self, section).setdefault(c, {})[r] = parse_quantity(ch["to"])
                    vertical = True
        if vertical:  # a rollout re-creates every pod
            self.started = [created] * self.replicas
        else:  # a scale-down removes the last pods (the newest names), a scale-up adds new ones
            del self.started[self.replicas :]
            self.started.extend([created] * (self.replicas - len(self.started)))
        return replica_change, vertical


def simulate_one(
    demand: Demand,
    manifest: dict[str, Any],
    policy_name: str,
    settings: Settings,
    delay: float,
    record: list[dict[str, Any]] | None = None,
) -> Outcome:
    """Run one policy over one workload's demand in closed loop."""
    ref = demand.workload
    out = Outcome(policy_name, ref.key)
    engine = Engine(settings)
    raw_policy = policy_event(manifest, settings.cluster)
    raw_policy["workload"] = ref.as_dict()
    raw_policy["ts"] = demand.points[0][0] if demand.points else 0.0
    policy = parse_policy(manifest, ref)
    max_replicas = policy.bounds().max_replicas
    if not demand.points:
        return out
    t0 = demand.points[0][0]
    engine.process(raw_policy, PolicyEvent(t0, ref, manifest))
    loop = _Loop(demand, out, engine, settings, delay, record, policy.kind in HPA_OBJECT_KINDS, max_replicas)
    if baseline_of(manifest) == "holt-winters" and loop.state.policy is not None:
        # the Holt-Winters baseline (analysis/holt_winters.py)
        loop.state.policy = HoltWinters(loop.state.policy, horizon=baseline_horizon(manifest))
    loop.feed(loop.sim.workload_event(ref, t0))
    for ts, point in demand.points:
        loop.start_due(ts)
        loop.step(ts, point)
    out.samples = len(demand.points)
    return out


class _Loop:
    """One policy over one workload's demand, sample by sample: the policy's decisions (what the
    core emits, :meth:`take`, and the HPA it runs, :meth:`hpa_scale`), the pods' start-up
    (:meth:`start_due`: a decision takes effect ``delay`` after its tick) and the outcome
    bookkeeping (:class:`_Books`, integrated from one change or sample to the next)."""

    __slots__ = (
        "books",
        "bounds",
        "cursor",
        "delay",
        "engine",
        "hpa_acts",
        "hpa_desired",
        "max_replicas",
        "n",
        "names",
        "next_series",
        "out",
        "over",
        "pending",
        "per_pod_series",
        "record",
        "ref",
        "rest",
        "series",
        "settings",
        "short",
        "sim",
        "state",
        "totals",
    )

    def __init__(
        self,
        demand: Demand,
        out: Outcome,
        engine: Engine,
        settings: Settings,
        delay: float,
        record: list[dict[str, Any]] | None,
        hpa_acts: bool,
        max_replicas: int | None,
    ) -> None:
        ref = self.ref = demand.workload
        t0 = demand.points[0][0]
        self.out = out
        self.engine = engine
        self.settings = settings
        self.delay = delay
        self.record = record
        self.max_replicas = max_replicas
        self.rest = demand.memory_at_rest  # each pod's own memory at rest, bytes (Demand)
        self.sim = _Sim(
            demand.replicas,
            {c: dict(v) for c, v in demand.requests.items()},
            {c: dict(v) for c, v in demand.limits.items()},
            [t0 - _RUNNING_BEFORE] * demand.replicas,
        )
        # The one workload's state: each tick's samples and reconcile go to it directly (the engine's
        # own ``process`` and ``flush`` look it up, and flush sorts the keys of its one state).
        self.state = engine.state_for(ref.key)
        self.hpa_acts = hpa_acts
        # The own hpa/vpa events would be dropped here: not built at all, but for a policy whose HPA
        # scales the workload (its events carry the HPA's desired replicas).
        self.state.publish_own = hpa_acts
        self.pending: list[tuple[float, dict[str, Any]]] = []
        self.hpa_desired: list[float] = []  # (tick, desired replicas) of the policy's HPA, when it acts
        self.series = iter(demand.series)
        self.per_pod_series: list[dict[str, Any]] = []  # the last recorded per-pod series samples
        self.next_series = next(self.series, None)
        self.cursor = t0  # outcomes are integrated up to here
        self.totals: dict[str, tuple[float, float]] = demand.points[0][1]
        self.respec()

    def respec(self) -> None:
        """What the outcomes read of the simulated spec, worked out when a decision changes it, not
        on every sample (the same sums and values, so the same floats)."""
        self.n = self.sim.replicas
        self.books = books = _Books(self.sim, self.rest)
        self.names = _pod_names(self.n)
        self.bounds = books.bounds
        # Whether the usage since the last sample is over requests (bit 1) or limits (bit 2): worked
        # out with each sample's per-pod usage (:meth:`observe`), and again when the spec changes.
        self.over = books.over(self.totals)
        self.short = books.shortfall(self.totals)  # the CPU cores the pods cannot serve since the last sample

    def take(self, emitted: list[Emitted]) -> None:
        """Queue the applied decisions among ``emitted`` for ``delay`` after their tick."""
        for kind, ev in emitted:
            if kind == "audit" and ev["type"] == DECISION and not ev["data"]["dry_run"]:
                self.pending.append((ev["data"]["tick"] + self.delay, ev["data"]))
                self.out.decisions += 1
            elif kind == "hpa" and self.hpa_acts:
                self.hpa_desired[:] = [ev["ts"], ev["desired_replicas"]]

    def hpa_scale(self) -> None:
        """The policy's HPA rescales the workload as the HPA controller would (``delay`` to the
        new pods' readiness, as for a decision): to its desired replicas, whenever these differ
        from what the workload has or is about to have."""
        if not self.hpa_desired:
            return
        tick, desired = self.hpa_desired
        have = self.sim.replicas
        for _, data in self.pending:
            if "replicas" in data:
                have = data["replicas"]["to"]
        if desired != have:
            self.pending.append((tick + self.delay, {"replicas": {"from": have, "to": int(desired)}}))
            self.out.decisions += 1

    def feed(self, raw: dict[str, Any], event: Any = None) -> None:
        if self.record is not None and raw:
            self.record.append(raw)
        self.take(self.engine.process(raw, event))

    def start_due(self, ts: float) -> None:
        """The pods' start-up: the decisions due by ``ts`` take effect, each at its time (the
        outcomes up to it with the spec before it), and the workload reports its new spec."""
        out = self.out
        pending = self.pending
        while pending and pending[0][0] <= ts:
            due, data = pending.pop(0)
            if due > self.cursor:  # the outcomes up to the change, with the spec before it
                self.books.accumulate(out, due - self.cursor, self.over, self.short)
                self.cursor = due
            replica_change, vertical = self.sim.apply(data, due - self.delay)
            self.respec()
            n = self.n
            out.replica_changes += replica_change
            out.rolling_updates += vertical
            if vertical:  # a rollout: every pod re-created with the new spec (docs/evaluation.md)
                out.resizes += 1
                out.pod_restarts += n
            out.timeline.append((due, n, {c: dict(v) for c, v in self.sim.requests.items()}))
            self.feed(self.sim.workload_event(self.ref, due))
            if replica_change and self.per_pod_series:
                # The load per pod changes with the pods: the series reports it from the change on.
                self.feed(
                    {
                        "type": "metric",
                        "ts": due,
                        "workload": self.ref.as_dict(),
                        "samples": series_over_pods(self.per_pod_series, self.names),
                    }
                )

    def step(self, ts: float, totals: dict[str, tuple[float, float]]) -> None:
        """One recorded sample: the outcomes up to it, the recorded series, the simulated pods'
        usage, the tick reconciled, the policy's HPA, saturation."""
        if ts > self.cursor:
            self.books.accumulate(self.out, ts - self.cursor, self.over, self.short)
            self.cursor = ts
        self.totals = totals
        self.short = self.books.shortfall(totals)
        self.replay_series(ts)
        self.observe(ts)
        # Nothing recorded can arrive for this tick any more: reconcile it now, so a decision
        # takes effect ``delay`` after its tick and not one sample later.
        emitted = flush(self.state, self.settings)
        if emitted:
            self.take(emitted)
        if self.hpa_acts:
            self.hpa_scale()
        n = self.n
        if (
            self.max_replicas is not None
            and n >= self.max_replicas
            and sum(cpu for cpu, _ in totals.values()) > n * self.books.cpu_requests / 1000  # the capacity
        ):
            self.out.saturated_samples += 1

    def replay_series(self, ts: float) -> None:
        """The recorded series samples up to ``ts``, over the simulated pods (:func:`series_over_pods`)."""
        while self.next_series is not None and self.next_series[0] <= ts:
            s_ts, raw_series = self.next_series
            if any("pod" in x for x in raw_series):
                self.per_pod_series = [x for x in raw_series if "pod" in x]
            self.feed(
                {
                    "type": "metric",
                    "ts": s_ts,
                    "workload": self.ref.as_dict(),
                    "samples": series_over_pods(raw_series, self.names),
                }
            )
            self.next_series = next(self.series, None)

    def observe(self, ts: float) -> None:
        """The simulated pods' usage at ``ts`` (the demand divided over them, memory on top of each
        pod's own at rest) to the core as one metric event; whether it is over requests or
        limits, and its OOM kills."""
        out, n, bounds, names, rest = self.out, self.n, self.bounds, self.names, self.rest
        new = _new_tuple
        samples: list[ContainerSample] = []
        over = 0
        totals = self.totals
        for c, (cpu, mem) in sorted(totals.items()) if len(totals) > 1 else totals.items():
            per_cpu = cpu / n
            per_pod_mem = rest + mem / n  # rest 0.0: mem / n, the same float
            per_mem = int(per_pod_mem)
            oom = False
            b = bounds.get(c)
            if b is not None:  # _Books.over, inline: the same comparisons of the same floats
                req_cpu, lim_cpu, req_mem, lim_mem = b
                used = per_cpu * 1000
                if req_cpu is not None and used > req_cpu:
                    over |= 1
                if lim_cpu is not None and used > lim_cpu:
                    over |= 2
                used = per_pod_mem * 1000
                if req_mem is not None and used > req_mem:
                    over |= 1
                if lim_mem is not None:
                    if used > lim_mem:
                        over |= 2
                    oom = per_mem * 1000 > lim_mem  # above the memory limit: an OOM kill
                    if oom:
                        out.oom_kills += n
            for pod in names:
                # ContainerSample(pod, c, per_cpu, per_mem, True, oom), without the named
                # tuple's __new__ (a Python function): a sample per simulated pod per tick.
                samples.append(new(ContainerSample, (pod, c, per_cpu, per_mem, True, oom)))
        self.over = over
        event = new(MetricEvent, (ts, self.ref, tuple(samples), (), "metric"))
        emitted = ingest(self.state, event, _NO_RAW, self.settings)
        if emitted:
            self.take(emitted)
        if self.record is not None:  # the simulated stream, for the report (built only when asked)
            self.record.append(
                {
                    "type": "metric",
                    "ts": ts,
                    "workload": self.ref.as_dict(),
                    "samples": [
                        {"pod": x.pod, "container": x.container, "cpu": x.cpu, "memory": x.memory, "oom": x.oom}
                        for x in samples
                    ],
                }
            )


def series_over_pods(raw: list[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Recorded series samples as the simulated workload would give them.

    A sample without ``pod`` (a workload's series: a queue length, a request rate at the load
    balancer) is replayed as recorded.  Samples with ``pod`` measure a pod's share of the load
    (requests per second per pod): like the CPU and memory demand they are summed over the
    recorded pods and divided evenly over the simulated ones.  The result is sent as one
    workload-level sample, the mean over the pods that exist (what a query such as
    ``avg(rate(...))`` answers), not per pod: a pod a scale-down removed would otherwise count
    in the mean for the custom HPA's 5-minute lookback."""
    if not any("pod" in x for x in raw):
        return raw
    kept = [x for x in raw if "pod" not in x]
    totals: dict[str, float] = {}
    for x in raw:
        if "pod" in x:
            totals[x["series"]] = totals.get(x["series"], 0.0) + float(x["value"])
    kept.extend({"series": name, "value": total / len(names)} for name, total in sorted(totals.items()))
    return kept


#: Policy kinds whose horizontal side is an HPA object of their own, which the HPA controller runs:
#: their decisions set the HPA's min/max replicas and targets, never the replicas.  The simulator
#: runs that HPA (tandem's own HPA recommender on the simulated pods, ``scaling.own.own_hpa``: the
#: HPA the policy would have created, docs/tortoise.md "tandem's own HPA and VPA") and applies its
#: desired replicas.  Tortoise creates an HPA (reference 2.g); Hvpa decides replicas itself.
HPA_OBJECT_KINDS = frozenset({"Tortoise"})

_new_tuple = tuple.__new__
#: The raw JSON of the metric events simulate builds typed (none: nothing reads it; read only).
_NO_RAW: Mapping[str, Any] = MappingProxyType({})


class _Books:
    """What the outcomes read of a simulated spec (replicas, requests, limits): the cost per hour
    and per container the requests and limits that usage is compared with (which also give the
    memory limit of an OOM kill).  Worked out when a decision changes the spec, not per sample.
    ``rest``: each pod's memory at rest in bytes (:class:`analysis.outcomes.Demand`)."""

    __slots__ = ("bounds", "cpu_rate", "cpu_requests", "memory_rate", "n", "rest")

    def __init__(self, sim: _Sim, rest: float = 0.0) -> None:
        requests, limits = sim.requests, sim.limits
        self.n = n = sim.replicas
        self.rest = rest
        self.cpu_requests = sum(r.get("cpu", 0) for r in requests.values())
        memory_requests = sum(r.get("memory", 0) for r in requests.values())
        # Requested core-hours and GiB-hours per hour: the left part of the cost's expressions,
        # ``n * cpu / 1000 * hours`` and ``n * memory / 1000 / GIB * hours`` (so the same floats).
        self.cpu_rate = n * self.cpu_requests / 1000
        self.memory_rate = n * memory_requests / 1000 / GIB
        #: container -> (cpu request, cpu limit, memory request, memory limit), each or None
        self.bounds: dict[str, tuple[int | None, int | None, int | None, int | None]] = {}
        for c in set(requests) | set(limits):
            req = requests.get(c) or _NONE
            lim = limits.get(c) or _NONE
            self.bounds[c] = (req.get("cpu"), lim.get("cpu"), req.get("memory"), lim.get("memory"))

    def over(self, totals: dict[str, tuple[float, float]]) -> int:
        """Whether per-pod usage ``totals`` / n (memory on top of ``rest``) is over requests (bit 1)
        or limits (bit 2) of a container; :meth:`_Loop.observe` works the same out inline for
        each sample."""
        n = self.n
        rest = self.rest
        over = 0
        bounds = self.bounds
        for c, (cpu, mem) in totals.items():
            b = bounds.get(c)
            if b is None:
                continue  # neither requests nor limits: nothing to be over
            req_cpu, lim_cpu, req_mem, lim_mem = b
            used = cpu / n * 1000
            if req_cpu is not None and used > req_cpu:
                over |= 1
            if lim_cpu is not None and used > lim_cpu:
                over |= 2
            used = (rest + mem / n) * 1000
            if req_mem is not None and used > req_mem:
                over |= 1
            if lim_mem is not None and used > lim_mem:
                over |= 2
        return over

    def shortfall(self, totals: dict[str, tuple[float, float]]) -> float:
        """The CPU cores of demand ``totals`` that the ``n`` pods cannot serve: per container, what
        is above ``n`` × its CPU limit, or × its CPU request where it has no limit."""
        short = 0.0
        n = self.n
        for c, (cpu, _) in totals.items():
            b = self.bounds.get(c)
            if b is None:
                continue
            cap = b[1] if b[1] is not None else b[0]
            if cap is not None and cpu / n * 1000 > cap:
                short += (cpu / n * 1000 - cap) / 1000 * n
        return short

    def accumulate(self, out: Outcome, dt: float, over: int, short: float = 0.0) -> None:
        """Integrate ``dt`` seconds of this spec, with usage ``over`` (:meth:`over`) and CPU
        shortfall ``short`` cores (:meth:`shortfall`), into ``out``."""
        hours = dt / 3600
        out.cpu_shortfall_core_hours += short * hours
        out.cpu_core_hours += self.cpu_rate * hours
        out.memory_gib_hours += self.memory_rate * hours
        if over & 1:
            out.hours_over_requests += hours
        if over & 2:
            out.hours_over_limits += hours
