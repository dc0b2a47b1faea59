"""The Tortoise manifest (reference 1.1): ``spec`` parsed and validated into a :class:`TortoiseSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidPolicy
from ...events import WorkloadRef
from ...quantity import parse_quantity
from ..base import get_path, int_field, mapping_field

__all__ = ["API_VERSION", "ContainerBounds", "Pair", "TortoiseSpec", "pair_key", "parse_spec", "split_key"]

API_VERSION = "autoscaling.mercari.com/v1beta3"
RESOURCES = ("cpu", "memory")
UPDATE_MODES = ("Off", "Auto", "Emergency")
AUTOSCALING_TYPES = ("Off", "Horizontal", "Vertical")
PHASES = ("Initializing", "GatheringData", "PartlyWorking", "Working", "Emergency", "BackToNormal")

#: A (container, resource) pair: the unit Tortoise's policies and phases are kept per.
Pair = tuple[str, str]


def pair_key(pair: Pair) -> str:
    """``container/resource``: how a pair is keyed in the policy memory (JSON)."""
    return f"{pair[0]}/{pair[1]}"


def split_key(key: str) -> Pair:
    """The pair of a :func:`pair_key` key."""
    c, _, r = key.rpartition("/")
    return c, r


@dataclass(frozen=True, slots=True)
class ContainerBounds:
    """``spec.resourcePolicy[]``: floor and ceiling of any request Tortoise writes (milli-units)."""

    container: str
    min_allocated: Mapping[str, int] = field(default_factory=dict)
    max_allocated: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TortoiseSpec:
    name: str
    workload: WorkloadRef
    update_mode: str
    hpa_name: str | None
    resource_policy: Mapping[str, ContainerBounds]
    #: container -> resource -> Off/Horizontal/Vertical; empty means "derive" (reference 1.3).
    autoscaling_policy: Mapping[str, Mapping[str, str]]
    max_replicas: int | None = None
    deletion_policy: str = "NoDelete"
    hpa_behavior: Mapping[str, Any] | None = None


def _resource_list(obj: object, where: str) -> dict[str, int]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise InvalidPolicy(where, "expected an object of resource quantities")
    out: dict[str, int] = {}
    for res, q in obj.items():
        try:
            out[str(res)] = parse_quantity(q)
        except ValueError as exc:
            raise InvalidPolicy(f"{where}.{res}", str(exc)) from None
    return out


def _resource_policy(spec: Mapping[str, Any]) -> dict[str, ContainerBounds]:
    """``spec.resourcePolicy`` (Tortoise's ``ContainerResourcePolicy`` list): each container's
    min/maxAllocatedResources, by container name."""
    bounds: dict[str, ContainerBounds] = {}
    raw_rp = spec.get("resourcePolicy") or []
    if not isinstance(raw_rp, list):
        raise InvalidPolicy("spec.resourcePolicy", "expected a list")
    for i, item in enumerate(raw_rp):
        w = f"spec.resourcePolicy[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(w, "expected an object")
        cname = item.get("containerName")
        if not isinstance(cname, str) or not cname:
            raise InvalidPolicy(f"{w}.containerName", "required string is missing")
        if cname in bounds:
            raise InvalidPolicy(f"{w}.containerName", f"container {cname!r} is listed twice")
        lo = _resource_list(item.get("minAllocatedResources"), f"{w}.minAllocatedResources")
        hi = _resource_list(item.get("maxAllocatedResources"), f"{w}.maxAllocatedResources")
        for res, v in lo.items():
            if hi.get(res) and v > hi[res]:
                raise InvalidPolicy(f"{w}.minAllocatedResources.{res}", "is above maxAllocatedResources")
        bounds[cname] = ContainerBounds(cname, lo, hi)
    return bounds


def _autoscaling_policy(spec: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``spec.autoscalingPolicy`` (Tortoise's ``ContainerAutoscalingPolicy`` list): each
    container's resource: Off|Horizontal|Vertical, by container name."""
    policies: dict[str, dict[str, str]] = {}
    raw_ap = spec.get("autoscalingPolicy") or []
    if not isinstance(raw_ap, list):
        raise InvalidPolicy("spec.autoscalingPolicy", "expected a list")
    for i, item in enumerate(raw_ap):
        w = f"spec.autoscalingPolicy[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(w, "expected an object")
        cname = item.get("containerName")
        if not isinstance(cname, str) or not cname:
            raise InvalidPolicy(f"{w}.containerName", "required string is missing")
        if cname in policies:
            raise InvalidPolicy(f"{w}.containerName", f"container {cname!r} is listed twice")
        pol = item.get("policy") or {}
        if not isinstance(pol, Mapping):
            raise InvalidPolicy(f"{w}.policy", "expected an object of resource: Off|Horizontal|Vertical")
        policies[cname] = {}
        for res, t in pol.items():
            if res not in RESOURCES:
                raise InvalidPolicy(f"{w}.policy.{res}", "Tortoise scales cpu and memory only")
            if t not in AUTOSCALING_TYPES:
                raise InvalidPolicy(f"{w}.policy.{res}", f"{t!r} is not one of {', '.join(AUTOSCALING_TYPES)}")
            policies[cname][str(res)] = str(t)
    return policies


def parse_spec(manifest: Mapping[str, Any], workload: WorkloadRef) -> TortoiseSpec:
    """Parse a ``Tortoise`` manifest, or raise :class:`InvalidPolicy` naming the field."""
    api = manifest.get("apiVersion")
    if api != API_VERSION:
        raise InvalidPolicy("apiVersion", f"{api!r}: only {API_VERSION} Tortoises are supported")
    spec = mapping_field(manifest, "spec", required=True)
    meta = mapping_field(manifest, "metadata")
    name = str(meta.get("name") or workload.name)
    refs = mapping_field(manifest, "spec.targetRefs", required=True)
    target = mapping_field(manifest, "spec.targetRefs.scaleTargetRef", required=True)
    tname = target.get("name")
    if not isinstance(tname, str) or not tname:
        raise InvalidPolicy("spec.targetRefs.scaleTargetRef.name", "required string is missing")
    kind = target.get("kind", "Deployment")
    if kind != "Deployment":
        # Tortoise's webhook accepts only Deployments (reference 1.1).
        raise InvalidPolicy("spec.targetRefs.scaleTargetRef.kind", f"{kind!r}: Tortoise supports only Deployment")
    hpa_name = refs.get("horizontalPodAutoscalerName")
    if hpa_name is not None and (not isinstance(hpa_name, str) or not hpa_name):
        raise InvalidPolicy("spec.targetRefs.horizontalPodAutoscalerName", f"expected a name, got {hpa_name!r}")
    # The defaulting webhook sets Off when empty (reference 1.1).
    mode = spec.get("updateMode") or "Off"
    if mode not in UPDATE_MODES:
        raise InvalidPolicy("spec.updateMode", f"{mode!r} is not one of {', '.join(UPDATE_MODES)}")
    deletion = spec.get("deletionPolicy") or "NoDelete"
    if deletion not in ("DeleteAll", "NoDelete"):
        raise InvalidPolicy("spec.deletionPolicy", f"{deletion!r} is not DeleteAll or NoDelete")

    bounds = _resource_policy(spec)
    policies = _autoscaling_policy(spec)
    max_r = int_field(manifest, "spec.maxReplicas", None, minimum=1)
    behavior = get_path(spec, "horizontalPodAutoscalerBehavior")
    if behavior is not None and not isinstance(behavior, Mapping):
        raise InvalidPolicy("spec.horizontalPodAutoscalerBehavior", "expected an HPA behavior object")
    return TortoiseSpec(
        name=name,
        workload=workload,
        update_mode=str(mode),
        hpa_name=hpa_name,
        resource_policy=bounds,
        autoscaling_policy=policies,
        max_replicas=max_r,
        deletion_policy=str(deletion),
        hpa_behavior=behavior,
    )
