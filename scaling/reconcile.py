"""The reconcile loop of docs/contract.md §6, as pure functions over :class:`WorkloadState`.

Both drivers call exactly these functions: the embedded replay (``streams.replay``) and the Faust
agents (``agents``).  ``ingest`` applies one event; before doing so it reconciles the pending tick
if the event is the first one *after* it, so the reconcile of tick ``T`` sees every event with
``ts <= T`` and nothing later.  Ticks without events in between are coalesced.  ``flush`` runs the
pending tick when an input ends.

Within one tick, events of different types update disjoint parts of the state, so their relative
order does not matter; this is what lets the worker merge several topics and still produce the
replay's bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from . import learn, own
from .cloudevents import BLOCKED, DECISION, cloudevent, event_id
from .errors import InvalidPolicy
from .events import Event, HistoryEvent, MetricEvent, PolicyEvent, SeriesSample, WorkloadEvent, WorkloadRef
from .hpa_metrics import ref_key
from .outcome import AMBIGUOUS_MODE, AMBIGUOUS_POLICY, Outcome, View
from .policies import Policy, parse_policy
from .quantity import format_quantity
from .settings import Settings
from .state import WorkloadState
from .vocabulary import LEARNED

__all__ = ["AMBIGUOUS_MODE", "AMBIGUOUS_POLICY", "Emitted", "ambiguity_reason", "flush", "ingest", "tick_of"]

#: What the loop hands the driver: (topic kind, event).  Kinds: "audit" (decision/blocked
#: CloudEvents, decisions that are not dry runs also go to the actuator; and what a history
#: envelope taught, ``dev.tandem.learned.v1``), "hpa", "vpa"
#: (tandem's own recommendations, with ``"source": "tandem"``).
Emitted = tuple[str, dict[str, Any]]


def tick_of(ts: float, period: float) -> float:
    """The first tick at or after ``ts``."""
    return float(math.ceil(ts / period) * period)


def ingest(state: WorkloadState, event: Event, raw: Mapping[str, Any], settings: Settings) -> list[Emitted]:
    """Apply ``event`` (decoded from ``raw``) to ``state``; return what the tick before it produced,
    and for a ``history`` envelope then its ``dev.tandem.learned.v1`` event (``scaling.learn``).

    Raises :class:`InvalidEvent` (without touching the state) for a policy that cannot run.
    """
    policy_obj: Policy | None = None
    if isinstance(event, PolicyEvent) and event.manifest is not None:
        try:
            policy_obj = parse_policy(event.manifest, event.workload)
        except InvalidPolicy as exc:
            raise exc.within("policy") from None
    ts = event.ts
    pending = state.pending_tick
    out: list[Emitted]
    if pending is not None and ts > pending:
        out = _reconcile(state, pending, settings)  # a new list of its own
        state.pending_tick = pending = None
    else:
        out = []
    learned = _apply(state, event, raw, policy_obj, settings)
    if learned is not None:
        # What a history envelope taught, at its ts (after the tick it closed): said, not silent.
        ref = event.workload
        out.append(("audit", cloudevent(LEARNED, ref.cluster, ref.key, ts, learned)))
    period = settings.sync_period
    tick = float(math.ceil(ts / period) * period)  # tick_of, inline: once per event
    last_tick = state.last_tick
    if last_tick is None or tick > last_tick:
        state.pending_tick = tick if pending is None or tick > pending else pending  # max, without a call
    last_ts = state.last_ts
    if last_ts is None or ts > last_ts:
        state.last_ts = ts
    return out


def flush(state: WorkloadState, settings: Settings) -> list[Emitted]:
    """Reconcile the pending tick now (the input ended, or the worker's partition went idle)."""
    if state.pending_tick is None:
        return []
    tick, state.pending_tick = state.pending_tick, None
    return _reconcile(state, tick, settings)


def _apply(
    state: WorkloadState, event: Event, raw: Mapping[str, Any], policy_obj: Policy | None, settings: Settings
) -> dict[str, Any] | None:
    """Apply ``event`` to ``state``; ``None``, or for a history envelope what it taught (the data
    of its audit event)."""
    if isinstance(event, MetricEvent):
        own.observe(state, event, settings)
        for s in event.series:
            state.note_series(event.ts, s)
        for c in event.samples:
            if c.oom:
                prev = state.oom.get(c.container)
                state.oom[c.container] = event.ts if prev is None else max(prev, event.ts)
        return None
    if isinstance(event, PolicyEvent):
        if event.manifest is None or policy_obj is None:
            state.forget_policy(event.identity)
        else:
            state.remember_policy(raw, event, policy_obj)
        # The memory of a kind no policy of the workload has any more is dropped: a policy of a
        # different kind starts from a clean slate.
        kinds = {_kind(ev.get("policy")) for ev in (state.raw.get("policy") or {}).values()}
        for gone in [k for k in state.memory if k not in kinds]:
            del state.memory[gone]
        return None
    if isinstance(event, HistoryEvent):
        # The past, learned at the present: no tick of it is reconciled, nothing a tick reads as
        # the present changes (scaling.learn).
        return learn.learn(state, event, settings)
    if event.type in ("hpa", "vpa") and event.source == "tandem":
        return None  # tandem's own recommendations are recomputed, never read back (section 6)
    state.remember(raw, event)
    return None


def _kind(manifest: Any) -> Any:
    return manifest.get("kind") if isinstance(manifest, Mapping) else None


def policy_of(state: WorkloadState) -> Policy | None:
    """The workload's policy, parsed again from the stored manifest after a restore; ``None``
    without a policy, or with several (then none acts: :func:`_ambiguous`)."""
    if state.policy is None:
        ev = state.policy_event
        if ev is not None and ev.manifest is not None:
            state.policy = parse_policy(ev.manifest, ev.workload)
    return state.policy


def _reconcile(state: WorkloadState, tick: float, settings: Settings) -> list[Emitted]:
    state.last_tick = tick
    policy = state.policy
    if policy is None:
        policies = state.raw.get("policy")
        if policies is not None and len(policies) > 1:
            return _ambiguous(state, tick, policies)
        policy = policy_of(state)  # parsed again after a restore
    spec: WorkloadEvent | None = state.spec
    if policy is None or spec is None:
        return []
    ref = spec.workload
    emitted: list[Emitted] = []
    hpa = state.hpa_event
    if hpa is None:
        hpa, published = own.own_hpa(state, policy, spec, tick, settings)
        if published is not None:
            emitted.append(("hpa", published))
    hpa = state.hpa_view(hpa, spec)  # with the HPA changes decided since that HPA was seen
    vpa = state.vpa_event
    if vpa is None:
        vpa, published = own.own_vpa(state, policy, spec, tick, settings)
        if published is not None:
            emitted.append(("vpa", published))
    view_settings = _VIEW_SETTINGS[0][1] if _VIEW_SETTINGS and _VIEW_SETTINGS[0][0] is settings else None
    # View(...), without the named tuple's __new__ (a Python function of eight arguments).
    view = _new_view(
        View,
        (
            tick,
            ref,
            spec,
            hpa,
            vpa,
            {k: (ts, _series_sample(k, v)) for k, (ts, v) in state.series.items()} if state.series else _EMPTY,
            dict(state.oom) if state.oom else _EMPTY,
            view_settings if view_settings is not None else _view_settings(settings),
        ),
    )
    kind = policy.kind
    memory = state.memory.get(kind)
    if memory is None:
        memory = state.memory[kind] = {}
    if state.learned:
        learn.teach_policy(state, kind, memory, view.settings)
    outcome = policy.decide(view, memory)
    # Most ticks change nothing: then there are no changes to compute against the spec.
    changes = None if outcome.proposes_nothing else _changes(outcome, spec)
    if changes is None:
        if not outcome.blocked:
            state.last_blocked = None
            return emitted
        # A blocked change is reported when it starts or changes, not on every tick it persists.
        # Same targets blocked for the same reasons is no news, even if the wanted values moved.
        reported = outcome.reported
        if reported is not None and reported[0] is policy:
            fingerprint = reported[1]  # the same outcome again (a repeated tick): the same report
        else:
            fingerprint = _blocked_fingerprint(
                kind, policy.name, outcome.mode, tuple(map(_target_and_reason, outcome.blocked))
            )
            outcome.reported = (policy, fingerprint)
        if fingerprint == state.last_blocked:
            return emitted  # nothing built (data, envelope) for what is not written
        state.last_blocked = fingerprint
        data = _event_data(ref, tick, policy, outcome, None)
        return [*emitted, ("audit", cloudevent(BLOCKED, ref.cluster, ref.key, tick, data))]
    state.last_blocked = None
    event = cloudevent(DECISION, ref.cluster, ref.key, tick, _event_data(ref, tick, policy, outcome, changes))
    if not outcome.dry_run:
        state.assume_applied(tick, outcome.replicas, outcome.requests, outcome.limits)
        if "hpa" in event["data"]:
            state.assume_hpa(tick, event["data"]["hpa"])
    return [*emitted, ("audit", event)]


def _ambiguous(state: WorkloadState, tick: float, policies: Mapping[str, Any]) -> list[Emitted]:
    """More than one policy targets the workload: none acts, and each is reported blocked.

    Kubernetes' HPA controller does the same when several HPAs select the same pods: it refuses to
    scale and sets ``ScalingActive=False`` with reason ``AmbiguousSelector`` on each
    (kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal.go``, "pods by selector %s
    are controlled by multiple HPAs"; https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/).
    Letting the latest policy win instead would switch a workload between policies by the order
    their events happen to arrive in, without a word.  One blocked report per policy (its own
    ``policy`` block, so that the applier sets each one's status), when the set of policies
    starts or changes; once one is left, it acts again from the next tick.
    """
    spec = state.spec
    if spec is None:
        return []
    ids = sorted(policies)
    fingerprint = event_id(BLOCKED, {"ambiguous": ids})
    if fingerprint == state.last_blocked:
        return []
    state.last_blocked = fingerprint
    ref = spec.workload
    named = [_named(policies[i]) for i in ids]
    reason = ambiguity_reason(named, ref)
    out: list[Emitted] = []
    for entry in named:
        data: dict[str, Any] = {
            "workload": ref.as_dict(),
            "tick": tick,
            "policy": _policy_block(entry["kind"], entry["name"], AMBIGUOUS_MODE),
            "dry_run": False,
            "blocked": [{"target": "policy", "reason": AMBIGUOUS_POLICY}],
            "reasons": [reason],
            "inputs": {},
            "ambiguous": named,
        }
        out.append(("audit", cloudevent(BLOCKED, ref.cluster, ref.key, tick, data)))
    return out


def _named(raw: Mapping[str, Any]) -> dict[str, str]:
    """A stored policy event's object: ``apiVersion``, ``kind``, ``namespace``, ``name``."""
    manifest = raw.get("policy") or {}
    meta = manifest.get("metadata") or {}
    return {
        "apiVersion": str(manifest.get("apiVersion") or ""),
        "kind": str(manifest.get("kind") or ""),
        "namespace": str(meta.get("namespace") or "default"),
        "name": str(meta.get("name") or ""),
    }


def ambiguity_reason(named: list[dict[str, str]], ref: WorkloadRef) -> str:
    """``2 policies target Deployment shop/web: Hvpa web (autoscaling.k8s.io/v1alpha1) and
    Tortoise web (autoscaling.mercari.com/v1beta3); none acts while more than one does``."""
    who = [f"{n['kind']} {n['name']} ({n['apiVersion']})" for n in named]
    listed = ", ".join(who[:-1]) + " and " + who[-1]
    return (
        f"{len(named)} policies target {ref.kind} {ref.namespace}/{ref.name}: {listed}; "
        "none acts while more than one does"
    )


#: A blocked change's (target, reason): what its report's fingerprint says of it.
_target_and_reason = attrgetter("target", "reason")


@lru_cache(maxsize=1024)
def _blocked_fingerprint(kind: str, name: str, mode: str, blocked: tuple[tuple[str, str], ...]) -> str:
    """The id of what a blocked report says (its targets and reasons, the policy), remembered:
    most ticks of a blocked change repeat the previous one's and are compared, not written."""
    return event_id(
        BLOCKED,
        {"blocked": [[target, reason] for target, reason in blocked], "policy": _policy_block(kind, name, mode)},
    )


def _policy_block(kind: str, name: str, mode: str) -> dict[str, Any]:
    return {"kind": kind, "name": name, "mode": mode}


_new_view = tuple.__new__
#: What a view holds for a workload without custom-metric samples or OOM kills (shared, read-only).
_EMPTY: Mapping[Any, Any] = MappingProxyType({})
#: The settings as views show them, for the last ``Settings`` asked (the one of the run): (it, them).
_VIEW_SETTINGS: list[tuple[Settings, Mapping[str, Any]]] = []


def _view_settings(settings: Settings) -> Mapping[str, Any]:
    """The read-only settings mapping of every view of a run, built once per ``Settings``."""
    if _VIEW_SETTINGS and _VIEW_SETTINGS[0][0] is settings:
        return _VIEW_SETTINGS[0][1]
    view = MappingProxyType(settings.view())
    _VIEW_SETTINGS[:] = [(settings, view)]
    return view


def _series_sample(key: tuple[str, str | None], value: float) -> SeriesSample:
    return SeriesSample(key[0], value, key[1])


#: What a decision changes: the ``replicas``, ``containers`` and ``hpa`` parts of its data.
_Changes = tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any]]


def _changes(outcome: Outcome, spec: WorkloadEvent) -> _Changes | None:
    """The changes ``outcome`` makes to ``spec``, in the decision's ``from``/``to`` form, or
    ``None`` when it changes nothing (then only its blocked changes can be news)."""
    replicas: dict[str, Any] | None = None
    if outcome.replicas is not None and outcome.replicas != spec.replicas:
        replicas = {"from": spec.replicas, "to": outcome.replicas}
    containers: dict[str, Any] = {}
    for section, values in (("requests", outcome.requests), ("limits", outcome.limits)):
        for cname in sorted(values):
            if cname not in spec.containers:
                continue
            current = getattr(spec.containers[cname], section)
            for res in sorted(values[cname]):
                new = values[cname][res]
                old = current.get(res)
                if old is not None and old.milli == new:
                    continue
                containers.setdefault(cname, {}).setdefault(section, {})[res] = {
                    "from": old.text if old is not None else None,
                    "to": format_quantity(res, new),
                }
    hpa_changes: dict[str, Any] = {}
    for name, value in outcome.hpa.items():
        if name == "metrics":
            removed = sorted(value.get("removed") or (), key=ref_key)
            if removed:
                hpa_changes[name] = {"removed": [dict(r) for r in removed]}
        elif name == "target_utilization":
            sub = {k: {"from": f, "to": t} for k, (f, t) in sorted(value.items()) if f != t}
            if sub:
                hpa_changes[name] = sub
        elif value[0] != value[1]:
            hpa_changes[name] = {"from": value[0], "to": value[1]}
    if replicas is None and not containers and not hpa_changes:
        return None
    return replicas, containers, hpa_changes


def _event_data(
    ref: WorkloadRef, tick: float, policy: Policy, outcome: Outcome, changes: _Changes | None
) -> dict[str, Any]:
    """The audit event's ``data``: a decision's (``changes`` from :func:`_changes`) or, without
    changes, a blocked report's."""
    data: dict[str, Any] = {
        "workload": ref.as_dict(),
        "tick": tick,
        "policy": _policy_block(policy.kind, policy.name, outcome.mode),
        "dry_run": outcome.dry_run,
    }
    if changes is not None:
        replicas, containers, hpa_changes = changes
        if replicas is not None:
            data["replicas"] = replicas
        if containers:
            data["containers"] = containers
        if hpa_changes:
            data["hpa"] = hpa_changes
    data["blocked"] = [b.as_dict() for b in outcome.blocked]
    data["reasons"] = list(outcome.reasons)
    data["inputs"] = outcome.inputs
    return data
