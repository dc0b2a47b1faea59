"""Tortoise's status as mercari/tortoise writes it (``api/v1beta3/tortoise_types.go``,
``TortoiseStatus``): ``tortoisePhase``, ``conditions.tortoiseConditions``
(``HPATargetUtilizationUpdated``, ``VerticalRecommendationUpdated``, ``FailedToReconcile``),
``recommendations.horizontal`` (``targetUtilizations``, ``minReplicas``/``maxReplicas`` per hourly
time slot), ``recommendations.vertical.containerResourceRecommendation`` and ``targets``; folded
from what tandem's Tortoise decided (pure; :mod:`scaling.policies.status`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..status import Observation, StatusShape, as_int, newest, set_condition, upsert

__all__ = ["STATUS"]


def fold_status(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation) -> None:
    """mercari/tortoise v1beta3 ``TortoiseStatus`` from what tandem's Tortoise decided."""
    spec = obj.get("spec") or {}
    refs = spec.get("targetRefs") or {}
    name = str((obj.get("metadata") or {}).get("name") or "")
    when, latest = obs.time, newest(status)
    # Tortoise names the HPA it creates tortoise-hpa-<name>; tandem's Tortoise reads the same one.
    status["targets"] = {
        "horizontalPodAutoscaler": refs.get("horizontalPodAutoscalerName") or f"tortoise-hpa-{name}",
        "scaleTargetRef": refs.get("scaleTargetRef") or {},
        "verticalPodAutoscalers": [],
    }
    phase = obs.inputs.get("phase")
    if isinstance(phase, str) and phase and when >= latest:
        status["tortoisePhase"] = phase
    recs = status.setdefault("recommendations", {})
    horizontal = recs.setdefault("horizontal", {})
    rec = obs.inputs.get("recommended_replicas")
    if isinstance(rec, Mapping):
        _replica_slots(horizontal, rec, obs.tick, when)
    targets = (obs.data.get("hpa") or {}).get("target_utilization") or {}
    if targets:
        per = horizontal.setdefault("targetUtilizations", [])
        for key, ch in sorted(targets.items()):
            cname, res = str(key).split("/", 1)
            to = ch.get("to") if isinstance(ch, Mapping) else None
            if isinstance(to, int | float) and not isinstance(to, bool):
                item = upsert(per, "containerName", cname)
                item.setdefault("targetUtilization", {})[res] = int(to)
    requests = obs.requests_to()
    if requests:
        vertical = recs.setdefault("vertical", {}).setdefault("containerResourceRecommendation", [])
        for cname, wanted in sorted(requests.items()):
            rec_item = upsert(vertical, "containerName", cname)
            rec_item.setdefault("RecommendedResource", {}).update(wanted)  # upstream's JSON key is capitalised
    conditions = status.setdefault("conditions", {}).setdefault("tortoiseConditions", [])
    if obs.type == "decision" and targets and obs.applied:
        set_condition(
            conditions,
            "HPATargetUtilizationUpdated",
            "True",
            "HPATargetUtilizationUpdated",
            "HPA target utilization is updated",
            when,
        )
    if obs.type == "decision" and requests:
        if obs.applied:
            set_condition(
                conditions,
                "VerticalRecommendationUpdated",
                "True",
                "VerticalRecommendationUpdated",
                "The recommendation is provided",
                when,
            )
        elif obs.dry_run:
            set_condition(
                conditions,
                "VerticalRecommendationUpdated",
                "False",
                "TortoiseOff",
                "The recommendation is not applied: updateMode is Off",
                when,
            )
    error = obs.failed
    if error is not None:
        set_condition(conditions, "FailedToReconcile", "True", "ApplyFailed", error, when)
    elif obs.applied and any(c.get("type") == "FailedToReconcile" for c in conditions):
        set_condition(conditions, "FailedToReconcile", "False", "Applied", "", when)


def _replica_slots(horizontal: dict[str, Any], rec: Mapping[str, Any], tick: float, when: str) -> None:
    """``recommendations.horizontal.minReplicas``/``maxReplicas``: the recommended min and max in
    the hourly time slot of ``tick`` (upstream's ``ReplicasRecommendation`` list, one per slot)."""
    hour = datetime.fromtimestamp(int(tick), UTC).hour
    for key, field_ in (("min", "minReplicas"), ("max", "maxReplicas")):
        value = as_int(rec.get(key))
        if value is None:
            continue
        slots = horizontal.setdefault(field_, [])
        slot = next((s for s in slots if s.get("from") == hour and "weekday" not in s), None)
        if slot is None:
            slot = {"from": hour, "to": hour + 1, "timezone": "UTC", "value": value, "updatedAt": when}
            slots.append(slot)
            slots.sort(key=lambda s: int(s.get("from") or 0))
        elif slot.get("value") != value and when >= str(slot.get("updatedAt") or ""):
            slot.update({"value": value, "updatedAt": when})


STATUS = StatusShape(fold_status, conditions=("conditions", "tortoiseConditions"))
