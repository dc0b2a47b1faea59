"""The upstream arms of ``tandem simulate`` (:mod:`analysis.upstream`): a file of upstream
``HorizontalPodAutoscaler`` (``autoscaling/v2``) and ``VerticalPodAutoscaler``
(``autoscaling.k8s.io/v1``) manifests, parsed into one arm per workload.

A field the simulation does not model is refused, naming it (did-you-mean for a misspelling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies import policy_target
from scaling.recommend import hpa as hpa_rec
from scaling.recommend import vpa as vpa_rec
from scaling.spelling import did_you_mean

__all__ = [
    "HPA_KIND",
    "MIN_REPLICAS",
    "UPDATE_MODES",
    "VPA_KIND",
    "HpaArm",
    "UpstreamArm",
    "VpaArm",
    "is_upstream",
    "parse_upstream",
]

HPA_KIND = ("HorizontalPodAutoscaler", "autoscaling/v2")
VPA_KIND = ("VerticalPodAutoscaler", "autoscaling.k8s.io/v1")
UPDATE_MODES = ("Off", "Initial", "Recreate", "Auto")

#: The VPA updater's ``--min-replicas`` (kubernetes/autoscaler vertical-pod-autoscaler/pkg/updater/main.go;
#: https://github.com/kubernetes/autoscaler/blob/master/vertical-pod-autoscaler/docs/flags.md): no eviction
#: while a workload has fewer live pods (``updatePolicy.minReplicas`` overrides).
MIN_REPLICAS = 2


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
