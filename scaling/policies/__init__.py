"""Policy kinds (docs/contract.md §5) and the one entry point that parses a manifest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from ..recommend.hpa import parse_behavior, parse_metrics
from .base import Policy, get_path
from .bounds import Bounds, ContainerBounds
from .fields import check_fields
from .predictive import with_predictive
from .registry import PolicyKind, find, kinds, lookup, register, unregister

# isort: off
# The built-in kinds register themselves on import, in this order: the order of
# ``registry.kinds()``, of the collector's watches and of the kinds an error lists (``hvpa``
# registers both of its API groups, the released one first).
from . import hvpa, tortoise, custom_hpa  # noqa: F401
# isort: on

__all__ = [
    "Bounds",
    "ContainerBounds",
    "Policy",
    "PolicyKind",
    "kinds",
    "lookup",
    "parse_policy",
    "policy_target",
    "register",
    "unregister",
]

CLUSTER_ANNOTATION = "tandem.dev/cluster"


def policy_target(manifest: Mapping[str, Any], default_cluster: str = "default") -> WorkloadRef:
    """The workload a manifest scales: its target in ``metadata.namespace``, in the cluster named by
    annotation ``tandem.dev/cluster`` (else ``default_cluster``) - docs/contract.md §5.

    Where the target is named is the kind's (:attr:`PolicyKind.target_paths`); a manifest of no
    registered kind (an upstream HPA or VPA) or naming it elsewhere is read at any kind's places.
    """
    if not isinstance(manifest, Mapping):
        raise InvalidPolicy("policy", "expected a manifest object")
    meta = manifest.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidPolicy("metadata", "expected an object")
    namespace = meta.get("namespace") or "default"
    annotations = meta.get("annotations") or {}
    cluster = annotations.get(CLUSTER_ANNOTATION) if isinstance(annotations, Mapping) else None
    cluster = cluster or default_cluster
    for where, value in (("metadata.namespace", namespace), (f"metadata.annotations.{CLUSTER_ANNOTATION}", cluster)):
        if not isinstance(value, str) or "/" in value:  # a mapping str()-ed into a key would pass unnoticed
            raise InvalidPolicy(where, f"{value!r} is not a valid name")
    spec = manifest.get("spec") or {}
    own = find(manifest.get("apiVersion"), manifest.get("kind"))
    everyone = kinds()
    paths = dict.fromkeys([*(own.target_paths if own else ()), *(p for k in everyone for p in k.target_paths)])
    ref = next((c for c in (get_path(spec, p) for p in paths) if isinstance(c, Mapping) and c.get("name")), None)
    if ref is None:
        places = dict.fromkeys(
            p for p in [own.deployment_target if own else None, *(k.deployment_target for k in everyone)] if p
        )
        for place in places:
            dep = get_path(spec, f"{place}.deployment")
            if isinstance(dep, str) and dep:
                ns = get_path(spec, f"{place}.namespace") or namespace
                if not isinstance(ns, str) or "/" in ns:
                    raise InvalidPolicy(f"spec.{place}.namespace", f"{ns!r} is not a valid name")
                return WorkloadRef(str(cluster), str(ns), "Deployment", dep)
        raise InvalidPolicy("spec.targetRef", "required target reference (kind, name) is missing")
    kind = ref.get("kind") or "Deployment"
    for key, val in (("kind", kind), ("name", ref.get("name"))):
        if not isinstance(val, str) or "/" in val:
            raise InvalidPolicy(f"spec.targetRef.{key}", f"{val!r} is not a valid name")
    return WorkloadRef(str(cluster), str(namespace), str(kind), str(ref["name"]))


def parse_policy(manifest: Mapping[str, Any], workload: WorkloadRef) -> Policy:
    """Parse a manifest of any registered kind (:mod:`scaling.policies.registry`), or raise
    :class:`InvalidPolicy` naming the field."""
    if not isinstance(manifest, Mapping):
        raise InvalidPolicy("policy", "expected a manifest object")
    kind = lookup(manifest.get("apiVersion"), manifest.get("kind"))
    check_fields(manifest, kind.fields)  # a misspelled field is an error, not a default
    for part in ("metadata", "spec"):
        if not isinstance(manifest.get(part), Mapping):
            raise InvalidPolicy(part, "required object is missing")
    target = policy_target(manifest, workload.cluster)
    if (target.namespace, target.kind, target.name) != (workload.namespace, workload.kind, workload.name):
        raise InvalidPolicy(
            "spec.targetRef",
            f"the manifest targets {target.namespace}/{target.kind}/{target.name}, "
            f"not the event's workload {workload.key}",
        )
    try:
        policy = with_predictive(kind.parse(manifest, workload), manifest)  # spec.predictive, any kind
        _check_hpa_template(policy, manifest, kind)
    except InvalidPolicy as exc:
        full = _full_path(manifest, exc.field)
        if full == exc.field:
            raise
        raise InvalidPolicy(full, exc.reason) from None
    return policy


_ROOTS = ("apiVersion", "kind", "metadata", "spec", "status", "policy")


def _paths(value: Any, prefix: str) -> list[str]:
    out = [prefix] if prefix else []
    if isinstance(value, Mapping):
        for k, v in value.items():
            out.extend(_paths(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, f"{prefix}[{i}]"))
    return out


def _full_path(manifest: Mapping[str, Any], field: str) -> str:
    """``field`` from the manifest's root: a parser may name a field relative to the object it reads
    (``minReplicas`` of ``spec.hpa.template.spec``); the one path of the manifest that ends so is it."""
    if not field or field.split(".")[0].split("[")[0] in _ROOTS:
        return field
    found = [p for p in _paths(manifest, "") if p.endswith("." + field)]
    return found[0] if len(found) == 1 else field


def _check_hpa_template(policy: Policy, manifest: Mapping[str, Any], kind: PolicyKind) -> None:
    """Parse the HPA the policy would create now, so a bad metric is the policy's error, not a tick's.

    The recommender parses the template's ``metrics`` and ``behavior`` on each tick
    (``scaling.recommend.hpa``); a value it cannot use would otherwise surface as a ``ValueError``
    in the middle of a run, long after the policy was accepted.
    """
    template = policy.hpa_template({})
    if template is None:
        return
    where = next((p for p in kind.hpa_places if get_path(manifest, p) is not None), "spec")
    try:
        parse_metrics(template.metrics)
    except ValueError as exc:
        field, _, why = str(exc).partition(": ")
        raise InvalidPolicy(f"{where}.{field}", why or field) from None
    behavior = template.behavior
    if behavior is not None:
        outside = kind.hpa_behavior_place
        where = outside if outside and get_path(manifest, outside) else where + ".behavior"
        try:
            parse_behavior(behavior)
        except ValueError as exc:
            field, _, why = str(exc).partition(": ")
            raise InvalidPolicy(f"{where}", f"{field}: {why}" if why else field) from None
