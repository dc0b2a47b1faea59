"""``tandem simulate``: recorded demand through policies in closed loop, compared on cost and risk.

No autoscaler answers "what would this policy have done to last month's traffic, and what would
it have cost?".  The simulator derives each workload's *demand* from a recorded stream (total CPU
cores and memory bytes across its pods, per container, at each sample time), then, for each
policy file, drives the very same decision core (``scaling.engine.Engine``) in closed loop:

* a simulated workload starts from the first recorded spec (replicas, requests, limits);
* at each sample time its per-pod usage is demand divided over the *simulated* replicas, sent to
  the core as ``metric`` samples, so tandem's own HPA and VPA recommenders see the simulated usage
  (recorded ``hpa``/``vpa`` events are not passed on: they describe the recorded cluster);
  memory above the simulated limit is an OOM kill (``"oom": true``);
* every decision is applied after ``--delay`` seconds (pod start-up), and the simulated workload
  reports its new spec as a ``workload`` event, as a collector would;
* named series (custom metrics) are replayed as recorded, but per-pod samples (with ``pod``), which
  are summed over the recorded pods and divided over the simulated ones, like the usage.

Outcomes per policy and workload: requested CPU core-hours and memory GiB-hours (cost), hours with
usage above requests and above limits, samples at max replicas with CPU demand above capacity
(replicas × request), rolling updates (decisions that change requests or limits) and replica
changes (disruption).  The simulator is a driver like the replay: it adds no decision rule.
"""

from __future__ import annotations

import gc
import html
import io
import multiprocessing
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

import orjson

from analysis.holt_winters import HoltWinters, baseline_of
from analysis.outcomes import GIB, Demand, Outcome
from analysis.report import build
from analysis.upstream import UpstreamArm, is_upstream, simulate_upstream
from scaling.engine import Engine, policy_event
from scaling.events import ContainerSample, MetricEvent, PolicyEvent, WorkloadEvent, WorkloadRef
from scaling.policies import parse_policy
from scaling.quantity import format_quantity, parse_quantity
from scaling.reconcile import Emitted, flush, ingest
from scaling.settings import Settings
from scaling.vocabulary import DECISION
from streams.inputs import load_manifests
from streams.runner import Progress, ReplayStats, gc_paused, read_reduced

__all__ = ["Demand", "Outcome", "derive_demand", "simulate", "table", "write_report"]

_NONE: dict[str, int] = {}  # a container without requests or limits (read only)


_POD_NAMES: list[str] = []


def _pod_names(n: int) -> list[str]:
    """``sim-0`` .. ``sim-{n-1}``: the simulated pods' names, written once, not per sample."""
    while len(_POD_NAMES) < n:
        _POD_NAMES.append(f"sim-{len(_POD_NAMES)}")
    return _POD_NAMES[:n]


def derive_demand(events: Sequence[tuple[float, int, Any, Any]]) -> dict[str, Demand]:
    """Per workload key: the first recorded spec and the demand at every sample time."""
    parts = ((ts, _demand_part(raw, event)) for ts, _, (_, _, raw), event in events)
    return _demands([(ts, part) for ts, part in parts if part is not None])


#: What one input line gives the demand: for a workload event ``(ref, replicas, requests, limits)``,
#: for a metric event ``(key, container totals, raw series samples)``.
_Part = (
    tuple[WorkloadRef, int, dict[str, dict[str, int]], dict[str, dict[str, int]]]
    | tuple[str, dict[str, tuple[float, float]], list[dict[str, Any]]]
)


def _demand_part(raw: Any, event: Any, wanted: frozenset[str] | None = None) -> _Part | None:
    """The little of a decoded line that the demand needs (``streams.runner.read_reduced``'s
    ``reduce``): the typed event and its JSON are dropped at once, or sent back by a decoding
    process as a few numbers.  ``wanted``: the keys of the workloads the policies name (``None``:
    all); the lines of the others are decoded and checked all the same, but nothing is kept."""
    if isinstance(event, MetricEvent):
        key = event.workload.key
        if wanted is not None and key not in wanted:
            return None
        totals: dict[str, tuple[float, float]] = {}
        for s in event.samples:
            cpu, mem = totals.get(s.container, (0.0, 0.0))
            totals[s.container] = (cpu + (s.cpu or 0.0), mem + (s.memory or 0))
        # A raw sample with a "series" is a series sample or the line is refused: none without them.
        series = (
            [s for s in (raw.get("samples") or [raw]) if isinstance(s, dict) and "series" in s] if event.series else []
        )
        return (key, totals, series) if totals or series else None
    if isinstance(event, WorkloadEvent):
        if wanted is not None and event.workload.key not in wanted:
            return None
        return (
            event.workload,
            max(event.replicas, 1),
            {c: {r: q.milli for r, q in res.requests.items()} for c, res in event.containers.items()},
            {c: {r: q.milli for r, q in res.limits.items()} for c, res in event.containers.items()},
        )
    return None


def _demands(parts: Sequence[tuple[float, _Part]]) -> dict[str, Demand]:
    """The demands from the parts of the lines, in event-time order: a workload's first spec
    starts it, its metric events (before that spec too) give its points and series."""
    demands: dict[str, Demand] = {}
    pending: dict[str, list[tuple[float, dict[str, tuple[float, float]], list[dict[str, Any]]]]] = {}
    for ts, part in parts:
        if len(part) == 4:
            ref = part[0]
            if ref.key not in demands:
                demands[ref.key] = Demand(ref, part[1], part[2], part[3])
        else:
            key, totals, series = part
            points = pending.get(key)
            if points is None:
                points = pending[key] = []
            points.append((ts, totals, series))
    for key, points in pending.items():
        d = demands.get(key)
        if d is None:
            continue  # no recorded spec: nothing to start the simulation from
        for ts, totals, series in points:
            if totals:
                d.points.append((ts, totals))
            if series:
                d.series.append((ts, series))
    return demands


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
    sim = _Sim(
        demand.replicas,
        {c: dict(v) for c, v in demand.requests.items()},
        {c: dict(v) for c, v in demand.limits.items()},
        [t0 - _RUNNING_BEFORE] * demand.replicas,
    )
    engine.process(raw_policy, PolicyEvent(t0, ref, manifest))
    # The one workload's state: each tick's samples and reconcile go to it directly (the engine's
    # own ``process`` and ``flush`` look it up, and flush sorts the keys of its one state).
    state = engine.state_for(ref.key)
    hpa_acts = policy.kind in HPA_OBJECT_KINDS
    # The own hpa/vpa events would be dropped here: not built at all, but for a policy whose HPA
    # scales the workload (its events carry the HPA's desired replicas).
    state.publish_own = hpa_acts
    if baseline_of(manifest) == "holt-winters" and state.policy is not None:
        state.policy = HoltWinters(state.policy)  # the Holt-Winters baseline (analysis/holt_winters.py)
    first = sim.workload_event(ref, t0)
    pending: list[tuple[float, dict[str, Any]]] = []
    hpa_desired: list[float] = []  # (tick, desired replicas) of the policy's HPA, when it acts

    def take(emitted: list[Emitted]) -> None:
        """Queue the applied decisions among ``emitted`` for ``delay`` after their tick."""
        for kind, ev in emitted:
            if kind == "audit" and ev["type"] == DECISION and not ev["data"]["dry_run"]:
                pending.append((ev["data"]["tick"] + delay, ev["data"]))
                out.decisions += 1
            elif kind == "hpa" and hpa_acts:
                hpa_desired[:] = [ev["ts"], ev["desired_replicas"]]

    def hpa_scale() -> None:
        """The policy's HPA rescales the workload as the HPA controller would (``delay`` to the
        new pods' readiness, as for a decision): to its desired replicas, whenever these differ
        from what the workload has or is about to have."""
        if not hpa_desired:
            return
        tick, desired = hpa_desired
        have = sim.replicas
        for _, data in pending:
            if "replicas" in data:
                have = data["replicas"]["to"]
        if desired != have:
            pending.append((tick + delay, {"replicas": {"from": have, "to": int(desired)}}))
            out.decisions += 1

    def feed(raw: dict[str, Any], event: Any = None) -> None:
        if record is not None and raw:
            record.append(raw)
        take(engine.process(raw, event))

    feed(first)
    series = iter(demand.series)
    per_pod_series: list[dict[str, Any]] = []  # the last recorded per-pod series samples
    next_series = next(series, None)
    cursor = t0  # outcomes are integrated up to here
    totals: dict[str, tuple[float, float]] = demand.points[0][1]
    # What the outcomes read of the simulated spec, worked out when a decision changes it, not
    # on every sample (the same sums and values, so the same floats).
    n = sim.replicas
    books = _Books(sim)
    names = _pod_names(n)
    bounds = books.bounds
    # Whether the usage since the last sample is over requests (bit 1) or limits (bit 2): worked
    # out with each sample's per-pod usage below, and again when a decision changes the spec.
    over = books.over(totals)
    short = books.shortfall(totals)  # the CPU cores the pods cannot serve since the last sample
    new = _new_tuple
    process = ingest
    flush_state = flush
    for ts, point in demand.points:
        while pending and pending[0][0] <= ts:
            due, data = pending.pop(0)
            if due > cursor:  # the outcomes up to the change, with the spec before it
                books.accumulate(out, due - cursor, over, short)
                cursor = due
            replica_change, vertical = sim.apply(data, due - delay)
            n = sim.replicas
            books = _Books(sim)
            names = _pod_names(n)
            bounds = books.bounds
            over = books.over(totals)
            short = books.shortfall(totals)
            out.replica_changes += replica_change
            out.rolling_updates += vertical
            if vertical:  # a rollout: every pod re-created with the new spec (docs/evaluation.md)
                out.resizes += 1
                out.pod_restarts += n
            out.timeline.append((due, n, {c: dict(v) for c, v in sim.requests.items()}))
            feed(sim.workload_event(ref, due))
            if replica_change and per_pod_series:
                # The load per pod changes with the pods: the series reports it from the change on.
                feed(
                    {
                        "type": "metric",
                        "ts": due,
                        "workload": ref.as_dict(),
                        "samples": series_over_pods(per_pod_series, names),
                    }
                )
        if ts > cursor:
            books.accumulate(out, ts - cursor, over, short)
            cursor = ts
        totals = point
        short = books.shortfall(totals)
        while next_series is not None and next_series[0] <= ts:
            s_ts, raw_series = next_series
            if any("pod" in x for x in raw_series):
                per_pod_series = [x for x in raw_series if "pod" in x]
            feed(
                {
                    "type": "metric",
                    "ts": s_ts,
                    "workload": ref.as_dict(),
                    "samples": series_over_pods(raw_series, names),
                }
            )
            next_series = next(series, None)
        samples: list[ContainerSample] = []
        over = 0
        for c, (cpu, mem) in sorted(totals.items()) if len(totals) > 1 else totals.items():
            per_cpu = cpu / n
            per_pod_mem = mem / n
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
        event = new(MetricEvent, (ts, ref, tuple(samples), (), "metric"))
        emitted = process(state, event, _NO_RAW, settings)
        if emitted:
            take(emitted)
        if record is not None:  # the simulated stream, for the report (built only when asked)
            record.append(
                {
                    "type": "metric",
                    "ts": ts,
                    "workload": ref.as_dict(),
                    "samples": [
                        {"pod": x.pod, "container": x.container, "cpu": x.cpu, "memory": x.memory, "oom": x.oom}
                        for x in samples
                    ],
                }
            )
        # Nothing recorded can arrive for this tick any more: reconcile it now, so a decision
        # takes effect ``delay`` after its tick and not one sample later.
        emitted = flush_state(state, settings)
        if emitted:
            take(emitted)
        if hpa_acts:
            hpa_scale()
        if (
            max_replicas is not None
            and n >= max_replicas
            and sum(cpu for cpu, _ in totals.values()) > n * books.cpu_requests / 1000  # the capacity
        ):
            out.saturated_samples += 1
    out.samples = len(demand.points)
    return out


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
    memory limit of an OOM kill).  Worked out when a decision changes the spec, not per sample."""

    __slots__ = ("bounds", "cpu_rate", "cpu_requests", "memory_rate", "n")

    def __init__(self, sim: _Sim) -> None:
        requests, limits = sim.requests, sim.limits
        self.n = n = sim.replicas
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
        """Whether per-pod usage ``totals`` / n is over requests (bit 1) or limits (bit 2) of a
        container; ``simulate_one`` works the same out inline for each sample."""
        n = self.n
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
            used = mem / n * 1000
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


def simulate(
    paths: Sequence[str],
    policy_files: Sequence[str],
    settings: Settings,
    delay: float,
    err: IO[str],
    recordings: dict[str, list[dict[str, Any]]] | None = None,
    jobs: int = 1,
    progress: bool | None = None,
    checked: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    upstream: Mapping[str, Sequence[UpstreamArm]] | None = None,
) -> list[Outcome]:
    """Run every policy file over every workload it names; ``recordings`` (if given) receives, per
    policy file name, the simulated stream (inputs in closed loop) for the report.

    ``checked``: per policy file, its manifests that can run, as
    :func:`streams.inputs.load_command_inputs` sorted them (the command said why it refused the
    others, so they are left out here, not refused again); without it every manifest of every file
    must parse.

    With ``jobs`` > 1 the (policy, workload) runs are spread over that many processes.  Each run
    is independent (its own engine, its own demand), and results are gathered in the order of the
    runs, so the outcomes and recordings are the same, byte for byte, as with one process.
    ``progress`` (default: ``err`` is a terminal) draws a bar of the runs done.

    ``upstream``: per policy file of upstream HPA/VPA manifests, its arms
    (:func:`analysis.upstream.parse_upstream`), run by :func:`analysis.upstream.simulate_upstream`.
    """
    stats = ReplayStats()
    upstream = upstream or {}
    tandem_files = [p for p in policy_files if p not in upstream]
    manifests = _manifests(tandem_files, settings, checked)
    wanted = (
        None
        if manifests is None
        else frozenset(
            [key for docs in manifests for key, _ in docs]
            + [arm.workload.key for arms in upstream.values() for arm in arms]
        )
    )
    # Only the demand is kept of the stream, line by line (the typed events would be a heap that
    # the collector walks again and again, here and in every process forked below), and only of
    # the workloads the policies name.
    reduce = partial(_demand_part, wanted=wanted)
    with gc_paused():  # the demand only grows, as the read (streams.runner.gc_paused)
        demands = _demands(read_reduced(paths, lambda msg: err.write(msg + "\n"), stats, reduce, jobs=jobs))
    runs: list[tuple[Demand, dict[str, Any] | UpstreamArm, str]] = []
    i = -1
    for path in policy_files:
        name = Path(path).stem
        if path in upstream:
            for arm in upstream[path]:
                demand = demands.get(arm.workload.key)
                if demand is None:
                    err.write(f"tandem simulate: {path}: no recorded demand for {arm.workload.key}\n")
                    continue
                runs.append((demand, arm, name))
            continue
        i += 1
        docs = checked.get(path, ()) if checked is not None else load_manifests(path)
        for manifest in docs if manifests is None else [m for _, m in manifests[i]]:
            key = policy_event(manifest, settings.cluster)["workload"]
            ref = WorkloadRef(**key)
            demand = demands.get(ref.key)
            if demand is None:
                err.write(f"tandem simulate: {path}: no recorded demand for {ref.key}\n")
                continue
            runs.append((demand, manifest, name))
    record = recordings is not None
    bar = Progress(err, len(runs), err.isatty() if progress is None else progress)
    results: list[tuple[Outcome, list[dict[str, Any]] | None]] = []
    # What is in memory now (tandem's modules, the demands) lives until the runs end: frozen, the
    # collector's full collections during the runs walk only what the runs make, in this process
    # and in the processes forked below (which then also leave the inherited pages unwritten).
    # Only when nothing else froze the heap: ``gc.unfreeze`` would thaw that too.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        _run_all(runs, settings, delay, record, jobs, bar, results)
    finally:
        if freeze:
            gc.unfreeze()
    bar.done()
    outcomes: list[Outcome] = []
    for (_, _, name), (outcome, recorded) in zip(runs, results, strict=True):
        outcomes.append(outcome)
        if recordings is not None and recorded is not None:
            recordings.setdefault(name, []).extend(recorded)
    return outcomes


def _run_all(
    runs: Sequence[tuple[Demand, dict[str, Any] | UpstreamArm, str]],
    settings: Settings,
    delay: float,
    record: bool,
    jobs: int,
    bar: Progress,
    results: list[tuple[Outcome, list[dict[str, Any]] | None]],
) -> None:
    """The runs, in this process or spread over ``jobs`` processes; their results, in order, to ``results``."""
    if jobs <= 1 or len(runs) <= 1:
        for demand, manifest, name in runs:
            results.append(_run((demand, manifest, name, settings, delay, record)))
            bar.update(len(results), "simulating")
    else:
        # "fork" where there is one: the children inherit the demands instead of unpickling them
        # (and skip importing tandem again); simulate runs no threads that a fork could break.
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        tasks = [(demand, manifest, name, settings, delay, record) for demand, manifest, name in runs]
        _TASKS[:] = tasks
        try:
            with ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=context) as pool:
                work: Any = range(len(tasks)) if context.get_start_method() == "fork" else tasks
                for result in pool.map(_run_inherited if work is not tasks else _run, work):
                    results.append(result)
                    bar.update(len(results), "simulating")
        finally:
            _TASKS.clear()


def _manifests(
    policy_files: Sequence[str], settings: Settings, checked: Mapping[str, Sequence[dict[str, Any]]] | None = None
) -> list[list[tuple[str, dict[str, Any]]]] | None:
    """Per policy file, its manifests with the key of the workload each targets, read before the
    stream so that the demand of the other workloads is not kept; ``None`` if a file or manifest
    is refused: ``simulate`` then reads them after the stream as before, so the same messages
    come in the same order."""
    try:
        return [
            [
                (WorkloadRef(**policy_event(m, settings.cluster)["workload"]).key, m)
                for m in (checked.get(path, ()) if checked is not None else load_manifests(path))
            ]
            for path in policy_files
        ]
    except Exception:  # refused again below, after the stream, where simulate always refused it
        return None


#: The runs of the current ``simulate`` call, inherited by forked pool processes.
_TASKS: list[tuple[Demand, dict[str, Any] | UpstreamArm, str, Settings, float, bool]] = []


def _run_inherited(index: int) -> tuple[Outcome, list[dict[str, Any]] | None]:
    return _run(_TASKS[index])


def _run(
    task: tuple[Demand, dict[str, Any] | UpstreamArm, str, Settings, float, bool],
) -> tuple[Outcome, list[dict[str, Any]] | None]:
    """One (policy, workload) run, in this process or a pool's (module level: picklable)."""
    demand, manifest, name, settings, delay, record = task
    recorded: list[dict[str, Any]] | None = [] if record else None
    if isinstance(manifest, UpstreamArm):
        return simulate_upstream(demand, manifest, name, settings, delay, recorded), recorded
    return simulate_one(demand, manifest, name, settings, delay, recorded), recorded


COLUMNS = (
    ("policy", "policy", "{}"),
    ("workload", "workload", "{}"),
    ("cpu_core_hours", "CPU core-h", "{:.1f}"),
    ("memory_gib_hours", "mem GiB-h", "{:.1f}"),
    ("hours_over_requests", "h > requests", "{:.2f}"),
    ("hours_over_limits", "h > limits", "{:.2f}"),
    ("saturated_samples", "saturated", "{}"),
    ("rolling_updates", "rollouts", "{}"),
    ("replica_changes", "replica chg", "{}"),
    ("cpu_shortfall_core_hours", "CPU short core-h", "{:.2f}"),
    ("oom_kills", "OOM kills", "{}"),
    ("evictions", "evictions", "{}"),
    ("pod_restarts", "restarts", "{}"),
    ("resizes", "resizes", "{}"),
)


def table(outcomes: Sequence[Outcome]) -> str:
    """The comparison table, one row per policy and workload, then one total per policy."""
    rows = [[fmt.format(getattr(o, attr)) for attr, _, fmt in COLUMNS] for o in outcomes]
    totals: dict[str, Outcome] = {}
    for o in outcomes:
        t = totals.setdefault(o.policy, Outcome(o.policy, "(all)"))
        for attr, _, _ in COLUMNS[2:]:
            setattr(t, attr, getattr(t, attr) + getattr(o, attr))
    rows += [[fmt.format(getattr(t, attr)) for attr, _, fmt in COLUMNS] for t in totals.values()]
    header = [title for _, title, _ in COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [
        "  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))
    ]
    for r in rows:
        lines.append(
            "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
        )
    return "\n".join(lines)


def write_report(
    out: Path,
    outcomes: Sequence[Outcome],
    policy_files: Sequence[str],
    recordings: dict[str, list[dict[str, Any]]],
    settings: Settings,
    err: IO[str],
) -> Path:
    """The comparison as HTML: the table, then per workload the report plots of each policy side by side.

    Each policy's simulated stream is written next to the page and rendered by ``tandem report``'s
    own code (``analysis.report.build``), which replays it through the same core with that policy:
    the markers are that policy's decisions on the simulated workload.
    """
    out.mkdir(parents=True, exist_ok=True)
    names = [Path(p).stem for p in policy_files]
    for path, name in zip(policy_files, names, strict=True):
        events = sorted(recordings.get(name, []), key=lambda e: e["ts"])
        stream = out / name / "stream.jsonl"
        stream.parent.mkdir(parents=True, exist_ok=True)
        stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
        docs = load_manifests(path)
        upstream = any(is_upstream(d) for d in docs)
        build(
            [str(stream)],
            out / name,
            settings=settings,
            policies=[] if upstream else docs,
            png="none",
            title=f"tandem simulate: {name}",
            # An upstream file's stream has no tandem policy to replay: the report's warning
            # that no decision can be made is expected there, not news.
            err=io.StringIO() if upstream else err,
        )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=n' if i >= 2 else ''}>{html.escape(fmt.format(getattr(o, attr)))}</td>"
            for i, (attr, _, fmt) in enumerate(COLUMNS)
        )
        + "</tr>"
        for o in outcomes
    )
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in COLUMNS)
    workloads = sorted({o.workload for o in outcomes})
    sections = []
    for key in workloads:
        frames = "".join(
            f'<div class="col"><h3>{html.escape(n)}</h3><iframe src="{html.escape(n)}/index.html#{html.escape(key)}">'
            "</iframe></div>"
            for n in names
            if any(o.workload == key and o.policy == n for o in outcomes)
        )
        sections.append(f'<h2 id="{html.escape(key)}">{html.escape(key)}</h2><div class="row">{frames}</div>')
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tandem simulate</title><style>'
        "body{font-family:sans-serif;margin:20px;color:#1b2733}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccd;padding:3px 8px;font-size:13px}td.n{text-align:right}"
        ".row{display:flex;gap:12px}.col{flex:1;min-width:0}iframe{width:100%;height:1100px;border:1px solid #ccd}"
        "</style></head><body><h1>tandem simulate: policies compared in closed loop</h1>"
        f"<table><tr>{head}</tr>{rows}</table>{''.join(sections)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
