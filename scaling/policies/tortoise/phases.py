"""Tortoise's phases (reference 2.0, 2.f): the overall phase and one per (container, resource),
gathering data, the monitor VPA's readiness and the HPA's health (automatic Emergency)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...events import HpaEvent, VpaEvent
from ...quantity import parse_quantity
from ..base import get_path
from .settings import TortoiseSettings
from .spec import RESOURCES, Pair, TortoiseSpec, pair_key, split_key
from .tick import Tick

__all__ = [
    "block_gathering",
    "hpa_broken",
    "initialize",
    "phase_step",
    "recompute",
    "sync_resource_phases",
    "vpa_unready",
]

#: HPA conditions that mean "cannot get its metrics" (reference 2.f); tandem's own HPA reports a
#: ContainerResource metric's failure with the upstream reason, which Tortoise's check does not name.
FAILED_METRIC_REASONS = ("FailedGetResourceMetric",)
OWN_FAILED_METRIC_REASONS = ("FailedGetResourceMetric", "FailedGetContainerResourceMetric")


def initialize(t: Tick, spec: TortoiseSpec, has_h: bool) -> None:
    """``""`` -> ``Initializing``: resource phases, the HPA Tortoise creates (reference 2.0, 2.g)."""
    t.phase = "Initializing"
    t.rphases.clear()
    for p, kind in t.policies.items():
        t.rphases[pair_key(p)] = ["Off" if kind == "Off" else "GatheringData", t.now]
    t.memory["pol"] = {pair_key(p): k for p, k in t.policies.items()}
    t.out.reasons.append(f"tortoise: initialized; gathering data for {'1 day' if t.st.period == 'daily' else '1 week'}")
    if has_h and t.hpa is None:
        if spec.hpa_name is not None:
            t.out.reasons.append(f"tortoise: waiting for HPA {spec.hpa_name!r} (no hpa event yet)")
        else:
            new = t.hpa_math
            assert new is not None
            targets = new.targets or {}
            t.out.hpa = {
                "min_replicas": (None, new.min_replicas),
                "max_replicas": (None, new.max_replicas),
                "target_utilization": {pair_key(p): (None, v) for p, v in sorted(targets.items())},
            }
            t.out.reasons.append(f"tortoise: creates HPA tortoise-hpa-{spec.name}")
            t.memory["_new_hpa"] = True


def sync_resource_phases(t: Tick) -> None:
    """A policy change resets that resource to GatheringData (reference 1.3, 2.0)."""
    previous = t.memory.get("pol") or {}
    current = {pair_key(p): k for p, k in t.policies.items()}
    for key, kind in current.items():
        if previous.get(key) != kind or key not in t.rphases:
            t.rphases[key] = ["Off" if kind == "Off" else "GatheringData", t.now]
    for key in list(t.rphases):
        if key not in current:
            del t.rphases[key]
    t.memory["pol"] = current


def phase_step(t: Tick, mode: str, has_h: bool, broken: bool) -> None:
    """``UpdateTortoisePhase`` (reference 2.0)."""
    if t.phase == "Initializing":
        t.phase = "GatheringData"
        for key, (p, _) in list(t.rphases.items()):
            if p != "Off":
                t.rphases[key] = ["GatheringData", t.now]
    elif t.phase in ("GatheringData", "PartlyWorking", "Working"):
        t.phase = recompute(t, has_h) or t.phase
    elif t.phase == "Emergency" and mode != "Emergency":
        if t.memory.get("auto") and mode == "Auto" and broken:
            t.out.reasons.append("tortoise: the HPA still cannot get its metrics: Emergency continues")
        else:
            t.phase = "BackToNormal"
            t.memory.pop("auto", None)
            t.out.reasons.append("tortoise: Emergency is over: minReplicas comes back gradually")
    if mode == "Emergency" and t.phase != "Emergency":
        if not has_h:
            t.out.reasons.append("tortoise: cannot move to Emergency without a Horizontal policy")
        elif t.phase not in ("PartlyWorking", "Working"):
            t.out.reasons.append(f"tortoise: cannot move to Emergency in phase {t.phase} (not enough data)")
            t.out.block("hpa/min_replicas", "GatheringData")
        else:
            t.phase = "Emergency"
            t.memory.pop("auto", None)
            t.out.reasons.append("tortoise: Emergency: minReplicas pinned to the recommended maxReplicas")


def recompute(t: Tick, has_h: bool) -> str | None:
    """Resource phases -> overall phase; Horizontal work needs the period and a full history."""
    covered = t.hist.covered(t.now, t.st.period) if has_h else True
    if not covered:
        for pair, kind in t.policies.items():
            key = pair_key(pair)
            if kind == "Horizontal" and t.rphases[key][0] == "Working":
                t.rphases[key] = ["GatheringData", t.now]
    gathering = working = False
    for key, (phase, since) in t.rphases.items():
        if phase == "Off":
            continue
        if phase == "Working":
            working = True
            continue
        horizontal = t.policies.get(split_key(key)) == "Horizontal"
        if float(since) + t.st.gathering_seconds <= t.now and (covered or not horizontal):
            t.rphases[key] = ["Working", t.now]
            working = True
        else:
            gathering = True
    if gathering and working:
        return "PartlyWorking"
    if working:
        return "Working"
    if gathering:
        return "GatheringData"
    return None


def vpa_unready(vpa: VpaEvent | None, policies: Mapping[Pair, str]) -> str:
    """Why the monitor VPA is not ready (``""`` when it is): reference 2.0 step 6."""
    if vpa is None:
        return "no vpa event yet"
    if vpa.conditions is not None:
        ok = any(
            c.get("type") == "RecommendationProvided" and c.get("status", "True") == "True" for c in vpa.conditions
        )
        if not ok:
            return "condition RecommendationProvided is not True"
    for c in sorted({p[0] for p, kind in policies.items() if kind != "Off"}):
        if c not in vpa.containers:
            return f"no recommendation for container {c}"
    for c, rec in sorted(vpa.containers.items()):
        for r in RESOURCES:
            q = rec.target.get(r)
            if q is None or q.milli == 0:
                return f"zero {r} target for container {c}"
    return ""


def hpa_broken(ev: HpaEvent | None, memory: dict[str, Any], now: float, st: TortoiseSettings) -> bool:
    """The HPA cannot get its metrics (reference 2.f): ``ScalingActive=False/FailedGetResourceMetric``
    for ``EmergencyModeGracePeriod``, or every current ContainerResource/External value is 0."""
    if ev is None:
        memory.pop("bad_since", None)
        return False
    if ev.source == "tandem":
        # tandem's own HPA speaks for the HPA's health only once it has computed its metrics: a
        # stream that never carries samples for the workload says nothing about a cluster's HPA.
        if any(c.get("type") == "ScalingActive" and c.get("status") == "True" for c in ev.conditions):
            memory["own_ok"] = True
        elif not memory.get("own_ok"):
            memory.pop("bad_since", None)
            return False
    failing = None
    reasons = OWN_FAILED_METRIC_REASONS if ev.source == "tandem" else FAILED_METRIC_REASONS
    for c in ev.conditions:
        if c.get("type") == "ScalingActive" and c.get("status", "True") == "False" and c.get("reason") in reasons:
            failing = c
    if failing is not None:
        since = _rfc3339(failing.get("lastTransitionTime"))
        if since is None:
            since = float(memory.setdefault("bad_since", now))
        return now - since >= st.grace_period
    memory.pop("bad_since", None)
    values = [v for m in ev.current_metrics or () for v in _current_values(m)]
    return bool(values) and not any(v > 0 for v in values)


def block_gathering(t: Tick, has_h: bool) -> None:
    if not has_h:
        return
    for target in ("hpa/min_replicas", "hpa/max_replicas"):
        if not any(b.target == target and b.reason == "GatheringData" for b in t.out.blocked):
            t.out.block(target, "GatheringData")


def _rfc3339(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _current_values(metric: Mapping[str, Any]) -> list[float]:
    """Current values of a ContainerResource or External ``status.currentMetrics`` entry."""
    kind = metric.get("type")
    if kind == "ContainerResource":
        cur = get_path(metric, "containerResource.current") or {}
        keys: tuple[str, ...] = ("averageUtilization", "averageValue")
    elif kind == "External":
        cur = get_path(metric, "external.current") or {}
        keys = ("value", "averageValue", "averageUtilization")
    else:
        return []
    out: list[float] = []
    if not isinstance(cur, Mapping):
        return out
    for k in keys:
        v = cur.get(k)
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            out.append(float(v))
        else:
            try:
                out.append(parse_quantity(v) / 1000)
            except ValueError:
                continue
    return out
