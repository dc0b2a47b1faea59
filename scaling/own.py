"""tandem's own HPA and VPA recommendations, computed from ``metric`` samples (issue 3).

A recorded stream (or a cluster without HPA and VPA installed) carries raw container usage, not
recommendations.  For a workload whose policy has an HPA template with metrics and that receives
no ``hpa`` event from a cluster, tandem runs the upstream HPA algorithm (``scaling.recommend.hpa``)
on every reconcile tick; for one whose policy has a VPA and that receives no ``vpa`` event, it
feeds every sample into the upstream VPA histograms (``scaling.recommend.vpa``) and recommends
once per ``recommender_interval``.  The results are ordinary ``hpa``/``vpa`` events with
``"source": "tandem"`` and the tick as ``ts``: the policy reads them exactly as it reads a
cluster's, and the drivers publish them (``tandem.hpa``/``tandem.vpa``, or
``tandem replay --include-recommendations``) when they change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final

from .events import ContainerSample, HpaEvent, MetricEvent, Qty, VpaEvent, VpaRecommendation, WorkloadEvent
from .hpa_feed import HpaFeed
from .hpa_metrics import apply_changes
from .policies.base import Policy
from .policies.templates import HpaTemplate, VpaTemplate
from .quantity import format_quantity
from .recommend import hpa as hpa_rec
from .recommend import vpa as vpa_rec
from .settings import Settings
from .state import WorkloadState

__all__ = [
    "LEARNED_POD",
    "HpaTemplate",
    "OwnVpa",
    "VpaTemplate",
    "first_live",
    "learn",
    "observe",
    "own_hpa",
    "own_vpa",
]

#: Pods whose latest sample is older than this at a tick count as having no metric (the HPA's
#: "missing" pods); metrics-server keeps one window of samples, tandem allows two scrape periods.
USAGE_MAX_AGE = 120.0
#: Bound on the pods whose latest usage is kept per workload.
MAX_PODS = 2000
#: The series of a workload that has none (shared, read-only).
_NO_SERIES: Mapping[str, Mapping[str | None, float]] = MappingProxyType({})


def _wants_hpa(state: WorkloadState, policy: Policy) -> HpaTemplate | None:
    if state.hpa_event is not None:
        return None
    # The template may depend on what the policy decided so far: its memory, as ``decide`` gets it.
    tmpl = policy.hpa_template(state.memory.get(policy.kind, {}))
    ov = state.overlay.get("hpa")
    if tmpl is not None and ov:
        # The HPA as the policy decided it since (the state's HPA overlay, ``WorkloadState.assume_hpa``).
        tmpl = HpaTemplate(
            # The template lists the metrics the policy wants; the overlay only retargets or removes them.
            tuple(
                apply_changes(
                    tmpl.metrics, ov.get("removed") or (), ov.get("target_utilization") or {}, add_missing=False
                )
            ),
            tmpl.behavior,
            ov.get("min_replicas", tmpl.min_replicas),
            ov.get("max_replicas", tmpl.max_replicas),
        )
    if tmpl is None or not tmpl.metrics:
        return None
    return tmpl


def _wants_vpa(state: WorkloadState, policy: Policy) -> VpaTemplate | None:
    if state.vpa_event is not None:
        return None
    # The template is the policy's alone (``vpa_template`` takes nothing else): asked once per
    # parsed policy, not on every tick.
    cached = state.own_vpa_template
    if cached is None or cached[0] is not policy:
        cached = state.own_vpa_template = (policy, policy.vpa_template())
    return cached[1]


def _vpa_states(state: WorkloadState) -> dict[str, vpa_rec.ContainerState]:
    live = state.vpa_live
    if live is None:
        raw = state.recommender.get("vpa") or {}
        live = state.vpa_live = {c: vpa_rec.ContainerState.from_dict(d) for c, d in raw.items()}
    return live


#: Cores to millicores round *up*, as ``Quantity.MilliValue()`` does for the HPA's samples, but a
#: float such as 0.3 * 1000 = 300.00000000000006 is an exact 300, not 301: that is round(v) when v
#: lies within this of it, else ceil(v); with one call, the ceiling less one when v lies within it
#: above the integer below (the same float difference as ``v - round(v)`` there; just below an
#: integer the ceiling is it).
MILLI_SLACK: Final = 1e-6


def observe(state: WorkloadState, event: MetricEvent, settings: Settings) -> None:
    """Feed one metric event's container samples to both recommenders' state.

    This runs for every workload, whatever its policy and whether a cluster sends HPA/VPA events:
    what a sample does to the state must not depend on events of other types at the same ``ts``
    (their order is not defined across Kafka topics), or the worker could differ from the replay.
    Using the state is what depends on the policy, at the tick.
    """
    samples = event.samples
    if not samples:
        return
    _note_live_from(state, event.ts)
    usage = state.recommender.setdefault("usage", {})
    feed = state.hpa_feed  # the own HPA's live inputs, kept in step when it runs (scaling.hpa_feed)
    if feed is not None:
        feed_usage, feed_stamps = feed.usage, feed.stamps
    ts = event.ts
    # What the VPA gets, gathered in the same pass for the common scrape of one container without
    # an OOM kill (else regrouped below): its CPU batch and its (pod, bytes) memory samples.
    first = samples[0].container
    one_container = True
    any_oom = False
    cpus: list[float] = []
    cpu_pods: list[str] = []
    mems: list[tuple[str, int]] = []
    for name, container, cores, memory, _ready, oom in samples:
        if container != first:
            one_container = False
        if oom:
            any_oom = True
        if cores is not None:
            cpus.append(cores)
            cpu_pods.append(name)
        if memory is not None:
            mems.append((name, memory))
        pod = usage.get(name)
        if pod is None:
            pod = usage[name] = {}
        cpu: int | None
        if cores is not None:
            # Cores to millicores rounded *up* as ``Quantity.MilliValue()`` does (see MILLI_SLACK)
            v = cores * 1000
            cpu = math.ceil(v)
            if v - (cpu - 1) < MILLI_SLACK:
                cpu -= 1
            if memory is not None:
                pod[container] = [ts, cpu, memory]  # the common sample: nothing kept from before
                if feed is not None:
                    # The feed's entry in place when it holds both resources already (no call).
                    hpa_pod = feed_usage.get(name)
                    values = hpa_pod.get(container) if hpa_pod is not None else None
                    if values is not None and len(values) == 2:
                        values["cpu"] = cpu
                        values["memory"] = memory
                        feed_stamps[name][container] = ts
                    else:
                        feed.note(name, container, ts, cpu, memory)
                continue
        prev = pod.get(container)
        if cores is None:
            cpu = prev[1] if prev else None
        mem = memory if memory is not None else (prev[2] if prev else None)
        pod[container] = [ts, cpu, mem]
        if feed is not None:
            feed.note(name, container, ts, cpu, mem)
    if feed is not None and ts < feed.floor:
        feed.floor = ts  # the stamps written in place above (HpaFeed.floor)
    if len(usage) > MAX_PODS:
        _forget_oldest_pods(usage, feed)
    cfg = settings.vpa_config
    states = _vpa_states(state)
    if one_container and not any_oom:
        cs = states.get(first)
        if cs is None:
            cs = states[first] = vpa_rec.ContainerState()
        if cpus:
            cs.add_cpu_samples(ts, cpus, cfg, cpu_pods)  # VPA: per pod (reference 2.3)
        cs.add_memory_samples(ts, mems, cfg)
        return
    _feed_vpa(states, ts, samples, cfg)


def _note_live_from(state: WorkloadState, ts: float) -> None:
    """Mark the first live sample after history was learned (:func:`learn` skips what follows)."""
    learned = state.learned
    if learned and "live_from" not in learned:
        learned["live_from"] = ts


def _forget_oldest_pods(usage: dict[str, Any], feed: HpaFeed | None) -> None:
    """Keep the latest usage of at most ``MAX_PODS`` pods (bounded state): the pods seen least
    recently go, from the own HPA's feed too."""
    oldest = sorted(usage, key=lambda p: (max(v[0] for v in usage[p].values()), p))
    for name in oldest[: len(usage) - MAX_PODS]:
        del usage[name]
        if feed is not None:
            feed.forget(name)


def _feed_vpa(
    states: dict[str, vpa_rec.ContainerState], ts: float, samples: Sequence[ContainerSample], cfg: vpa_rec.VpaConfig
) -> None:
    """Add one scrape's container samples (taken at ``ts``) to the VPA histograms, container by
    container: CPU de-duplicated per pod, memory peaks per pod, OOM kills recorded.  The general
    path of :func:`observe`, and all of :func:`learn`: a past sample goes through the same code."""
    first = samples[0].container
    by_container: Mapping[str, Sequence[ContainerSample]]
    if all(s.container == first for s in samples):
        by_container = {first: samples}  # one container: no regrouping
    else:
        grouped: dict[str, list[ContainerSample]] = {}
        for s in samples:
            grouped.setdefault(s.container, []).append(s)
        by_container = grouped
    for container, group in by_container.items():
        cs = states.get(container)
        if cs is None:
            cs = states[container] = vpa_rec.ContainerState()
        cpus = [s.cpu for s in group if s.cpu is not None]
        if cpus:
            # VPA: de-duplicated per pod (reference 2.3)
            cs.add_cpu_samples(ts, cpus, cfg, [s.pod for s in group if s.cpu is not None])
        if not any(s.oom for s in group):
            cs.add_memory_samples(ts, [(s.pod, s.memory) for s in group if s.memory is not None], cfg)
            continue
        for s in group:
            if s.memory is not None:
                if s.oom:
                    cs.record_oom(ts, s.memory, cfg, pod=s.pod)  # VPA: RecordOOM (2.5)
                else:
                    cs.add_memory_sample(ts, s.memory, cfg, pod=s.pod)


#: The prefix of a pod's name in the VPA's per-pod state for its *past* samples, learned from a
#: history envelope after live samples of the same pod: the live per-pod state (the last CPU
#: sample time, the open memory window) is ahead of them, and upstream's de-duplication
#: (``addCPUSample``: only after the last sample; ``addMemorySample``: never before it) would drop
#: them all.  Kept apart, they are de-duplicated and windowed among themselves as they were when
#: they were live.  Pod names are DNS subdomains: none holds a ``/``.
LEARNED_POD = "history/"


def first_live(state: WorkloadState) -> float | None:
    """The earliest container sample the VPA holds (its first CPU sample), or ``None``: before
    anything is learned, that is the first live sample, from which on the past is known live."""
    firsts = [cs.first_sample_ts for cs in _vpa_states(state).values() if cs.first_sample_ts is not None]
    return min(firsts) if firsts else None


def learn(state: WorkloadState, event: MetricEvent, settings: Settings, live_from: float | None) -> int:
    """Feed a *past* metric event's container samples to the own VPA's histograms, and nothing else.

    The live inputs of a tick (the own HPA's latest usage, OOM times, series) are the present's
    and stay as they are; the VPA's histograms are the past's.  A sample at or after
    ``live_from`` (the first live sample) is already in them, live: skipped.  A sample of a pod
    whose live state is ahead of it is kept under :data:`LEARNED_POD`.  Returns the samples fed.
    """
    samples = event.samples
    ts = event.ts
    if not samples or (live_from is not None and ts >= live_from):
        return 0
    states = _vpa_states(state)
    fed: list[ContainerSample] = []
    for s in samples:
        cs = states.get(s.container)
        window = cs.windows.get(s.pod) if cs is not None else None
        if window is not None and (window.cpu_ts > ts or window.last_ts > ts):
            s = s._replace(pod=LEARNED_POD + s.pod)
        fed.append(s)
    _feed_vpa(states, ts, fed, settings.vpa_config)
    return len(fed)


def own_hpa(
    state: WorkloadState, policy: Policy, spec: WorkloadEvent, tick: float, settings: Settings
) -> tuple[HpaEvent | None, dict[str, Any] | None]:
    """Run the HPA algorithm for this tick; return the event the policy reads and, if it changed
    since the last one published, the raw event to publish."""
    tmpl = _wants_hpa(state, policy)
    if tmpl is None:
        return None, None
    rec = state.recommender
    feed = state.hpa_feed
    if feed is None:
        feed = state.hpa_feed = HpaFeed.from_table(rec.get("usage", {}))
    # The latest samples, fresh ones only, in the shapes the HPA algorithm reads (kept up to date
    # by ``observe``, not rebuilt here).
    pod_usage, sample_ts = feed.fresh(tick - USAGE_MAX_AGE)
    series: Mapping[str, Mapping[str | None, float]] = _NO_SERIES
    if state.series:
        fresh_series: dict[str, dict[str | None, float]] = {}
        for (name, series_pod), (ts, value) in state.series.items():
            if tick - ts < 300.0:  # Prometheus-adapter lookback, as for the custom HPA
                fresh_series.setdefault(name, {})[series_pod] = value
        series = fresh_series
    pods = feed.pods(spec, pod_usage)
    status_replicas = len(spec.pods) if spec.pods is not None else spec.replicas
    hstate = state.hpa_live
    if hstate is None:
        hstate = hpa_rec.HpaState.from_dict(rec["hpa"]) if "hpa" in rec else hpa_rec.HpaState()
    result, hstate = hpa_rec.recommend(
        tmpl.metrics,
        tmpl.behavior,
        tmpl.min_replicas,
        tmpl.max_replicas,
        spec.replicas,
        status_replicas,
        pods,
        feed.inputs(pod_usage, feed.requests(spec), series, sample_ts),
        hstate,
        tick,
        settings.hpa_config,
    )
    state.hpa_live = hstate  # serialised with the state (WorkloadState.to_dict)
    # HpaEvent(...), without the named tuple's __new__ (a Python function of 13 arguments): one
    # per tick.
    event = _new_tuple(
        HpaEvent,
        (
            tick,
            spec.workload,
            result.desired_replicas,
            spec.replicas,
            tmpl.min_replicas,
            tmpl.max_replicas,
            tuple(result.conditions),
            tmpl.metrics,
            tuple(result.current_metrics),
            tmpl.behavior,
            policy.name,
            "tandem",
            "hpa",
        ),
    )
    if not state.publish_own:
        return event, None  # the policy reads the event; no raw event is built for nothing to publish
    raw: dict[str, Any] = {
        "type": "hpa",
        "ts": tick,
        "workload": spec.workload.as_dict(),
        "desired_replicas": result.desired_replicas,
        "current_replicas": spec.replicas,
        "min_replicas": tmpl.min_replicas,
        "max_replicas": tmpl.max_replicas,
        "conditions": result.conditions,  # this reconcile's own dicts, shared with nothing else
        "current_metrics": result.current_metrics,
        "name": policy.name,
        "source": "tandem",
    }
    return event, _changed(rec, "hpa_last", raw, ("desired_replicas", "conditions", "min_replicas", "max_replicas"))


class OwnVpa:
    """The own VPA's last recommendation as built, kept to build the next one with less work.

    A cache, never serialised (``WorkloadState.vpa_own``): after a restore the recommendation is
    read back from its published text (``recommender["vpa_last"]``) and the next run builds
    everything again.  ``parts``: per container and part (``target``, ``lower_bound``, ...), the
    amounts of the last run with the ``Qty`` and text mappings made from them; ``texts``: the
    ``containers`` of the event published; ``event``: the ``VpaEvent`` built from them.
    """

    __slots__ = ("event", "parts", "texts")

    def __init__(
        self,
        parts: dict[str, dict[str, tuple[Mapping[str, int], dict[str, Qty], dict[str, str]]]],
        texts: dict[str, dict[str, dict[str, str]]],
        event: VpaEvent,
    ) -> None:
        self.parts = parts
        self.texts = texts
        self.event = event


def own_vpa(
    state: WorkloadState, policy: Policy, spec: WorkloadEvent, tick: float, settings: Settings
) -> tuple[VpaEvent | None, dict[str, Any] | None]:
    """The VPA recommendation at this tick (recomputed once per ``recommender_interval``).

    A run formats only the parts whose amounts moved since the last run (the bounds move with
    the confidence on every run, the target rarely): the others reuse the last run's ``Qty`` and
    text mappings, which the published events then share (read only, as every emitted event is).
    """
    tmpl = _wants_vpa(state, policy)
    if tmpl is None:
        return None, None
    rec = state.recommender
    cfg = settings.vpa_config
    last_run = rec.get("vpa_run")
    raw: dict[str, Any] | None = rec.get("vpa_last")
    cached: OwnVpa | None = state.vpa_own
    if last_run is None or tick - last_run >= cfg.recommender_interval or raw is None:
        rec["vpa_run"] = tick
        states = _vpa_states(state)
        if spec.pods is not None:
            _forget_removed_pods(state, states, spec.pods)
        recs = vpa_rec.recommend(states, tick, cfg, tmpl.policies)
        # VPA: routines/recommender.go RunOnce collects expired aggregates after UpdateVPAs
        rec["vpa_gc"] = vpa_rec.collect_garbage(states, tick, rec.get("vpa_gc"), cfg)
        if not recs:
            return None, None
        parts, texts, moved = _format_recommendations(recs, cached)
        raw = {
            "type": "vpa",
            "ts": tick,
            "workload": spec.workload.as_dict(),
            "containers": texts,
            "conditions": [{"type": "RecommendationProvided", "status": "True"}],
            "source": "tandem",
        }
        if state.publish_own:
            published = _changed(rec, "vpa_last", raw, ("containers",))
        else:
            rec["vpa_last"] = raw  # kept all the same: the next runs read it (below)
            published = None
        if moved or cached is None or texts != cached.texts:
            # VpaRecommendation(...) and VpaEvent(...), without the named tuples' __new__ (a
            # Python function each): a new recommendation on most runs.
            new = _new_tuple
            containers = {}
            for c, p in parts.items():
                containers[c] = new(
                    VpaRecommendation,
                    (p["target"][1], p["lower_bound"][1], p["upper_bound"][1], p["uncapped_target"][1]),
                )
            event = new(VpaEvent, (tick, spec.workload, containers, tuple(raw["conditions"]), "tandem", "vpa"))
            state.vpa_own = OwnVpa(parts, texts, event)
            return event, published
        cached.parts = parts
    else:
        published = None
    assert raw is not None
    if cached is not None and cached.texts == raw["containers"]:
        # between recommender runs, or when a run gives the same figures, the same recommendation
        # holds; only its time moves
        return _new_tuple(VpaEvent, (tick, *cached.event[1:])), published  # cached.event._replace(ts=tick)
    return _restored_vpa(state, spec, raw, tick), published


def _forget_removed_pods(state: WorkloadState, states: dict[str, vpa_rec.ContainerState], pods: Sequence[Any]) -> None:
    """VPA: the feeder's DeleteRemovedPods each run (model/cluster.go DeletePod)."""
    live = {p.name for p in pods}
    for cs in states.values():
        if state.learned:
            # a past pod kept apart (LEARNED_POD) lives on with the history it was learned from
            cs.forget_pods(live | {p for p in cs.windows if p.startswith(LEARNED_POD)})
        else:
            cs.forget_pods(live)


_Parts = dict[str, dict[str, tuple[Mapping[str, int], dict[str, Qty], dict[str, str]]]]


def _format_recommendations(
    recs: Mapping[str, Any], cached: OwnVpa | None
) -> tuple[_Parts, dict[str, dict[str, dict[str, str]]], bool]:
    """One pass: the quantities the policy reads and the texts published, per container and part;
    a part whose amounts did not move since the last run keeps that run's ``Qty`` and texts.
    Also whether anything moved."""
    before = cached.parts if cached is not None else {}
    parts: _Parts = {}
    texts: dict[str, dict[str, dict[str, str]]] = {}
    moved = cached is None or len(recs) != len(before)
    for c in sorted(recs):
        r = recs[c]
        last = before.get(c)
        kept = parts[c] = {}
        t_parts: dict[str, dict[str, str]] = {}
        for part, values in (
            ("target", r.target),
            ("lower_bound", r.lower_bound),
            ("upper_bound", r.upper_bound),
            ("uncapped_target", r.uncapped_target),
        ):
            prev = last.get(part) if last is not None else None
            if prev is not None and prev[0] == values:
                kept[part] = prev
                t_parts[part] = prev[2]
                continue
            moved = True
            qs: dict[str, Qty] = {}
            texts_of: dict[str, str] = {}
            for res in sorted(values):  # loops, not comprehensions: a call each on Python 3.11
                q = qs[res] = _own_qty(res, values[res])
                texts_of[res] = q.text
            kept[part] = (values, qs, texts_of)
            t_parts[part] = texts_of
        texts[c] = t_parts
    return parts, texts, moved


def _restored_vpa(state: WorkloadState, spec: WorkloadEvent, raw: Mapping[str, Any], tick: float) -> VpaEvent:
    """The recommendation was restored with the state: read its text back."""
    containers = {}
    for c, r in raw["containers"].items():
        containers[c] = VpaRecommendation(
            **{part: {res: Qty.of(text) for res, text in values.items()} for part, values in r.items()}
        )
    event = VpaEvent(tick, spec.workload, containers, tuple(raw["conditions"]), "tandem")
    state.vpa_own = OwnVpa({}, raw["containers"], event)
    return event


_new_tuple = tuple.__new__


@lru_cache(maxsize=4096)
def _own_qty(resource: str, amount: int) -> Qty:
    """A recommended amount (millicores, bytes) as the ``Qty`` its text reads back as: the text
    holds whole millicores or whole bytes, so it parses to exactly these milli-units and the own
    VPA need not parse what it has just written.  Remembered: targets are read off histogram
    buckets, so a few hundred amounts recur (a ``Qty`` is frozen, one instance serves them all)."""
    milli = amount if resource == "cpu" else amount * 1000
    return Qty(milli, format_quantity(resource, milli))


def _changed(rec: dict[str, Any], slot: str, raw: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """Remember ``raw`` and return it if the fields that matter differ from the last published one."""
    last = rec.get(slot)
    rec[slot] = raw
    if last is None:
        return raw
    for k in keys:
        if last.get(k) != raw[k]:  # ``raw`` is built with every key
            return raw
    return None
