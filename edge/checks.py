"""The applier's pure decision checks (docs/edge.md, "Applier"): no I/O, no clock.

What the applier decides before it writes anything, kept apart from the Kubernetes calls
(:mod:`edge.kube`) and the Kafka loop (:mod:`edge.applier`), so that each rule can be read and
tested on its own, the way kopf keeps handlers apart from its machinery:

* the opt-in and the idempotency bookkeeping (:func:`check_marks`: the ``tandem.dev/managed``
  annotation, a repeat of the last applied decision, a stale one);
* the bounds re-check against the policy found in the cluster (:func:`policy_bounds`,
  :func:`check_decision`) and the policy/HPA lookup (:func:`find_policy`, :func:`find_hpa`);
* the writes' bodies (:func:`hpa_patch`, :func:`plan_containers`, :func:`apply_patch`) and the
  metrics label of a result (:func:`result_label`); the retry schedule is :func:`ops.retry.backoff`.

Every check that fails raises :class:`Refusal` (or returns the crossed bounds, each named).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from scaling.cloudevents import APPLIED
from scaling.errors import InvalidEvent, InvalidPolicy
from scaling.events import WorkloadRef
from scaling.hpa_metrics import METRIC_TYPES, matches
from scaling.policies import Bounds, ContainerBounds, Policy, policy_target
from scaling.quantity import format_quantity, parse_quantity

__all__ = [
    "FIELD_MANAGER",
    "LAST_DECISION",
    "LAST_TICK",
    "MANAGED",
    "Bounds",
    "ContainerBounds",
    "ContainerPlan",
    "Refusal",
    "apply_patch",
    "check_decision",
    "check_marks",
    "count_to",
    "find_hpa",
    "find_policy",
    "hpa_patch",
    "owned_containers",
    "plan_containers",
    "policy_bounds",
    "result_label",
]

MANAGED = "tandem.dev/managed"
LAST_DECISION = "tandem.dev/last-decision"
LAST_TICK = "tandem.dev/last-decision-tick"
FIELD_MANAGER = "tandem-applier"


class Refusal(Exception):
    """The decision is not applied, for a reason that another attempt would not change."""


# --- policy bounds (pure) ---------------------------------------------------------------------


def policy_bounds(policy: Policy) -> Bounds:
    """The bounds of a parsed policy (:func:`scaling.policies.parse_policy`), as it declares them."""
    return policy.bounds()


def count_to(change: object, where: str) -> int:
    if not isinstance(change, Mapping) or "to" not in change:
        raise Refusal(f"refused: invalid decision: {where} must be an object with 'from' and 'to'")
    to = change["to"]
    if isinstance(to, float) and to.is_integer():
        to = int(to)
    if isinstance(to, bool) or not isinstance(to, int) or to < 0:
        raise Refusal(f"refused: invalid decision: {where}.to must be a count, got {to!r}")
    return to


def _qty(change: object, where: str) -> tuple[int, str]:
    """``(milli, text)`` of a quantity change's ``to``; ``text`` is what the API is sent."""
    if not isinstance(change, Mapping) or "to" not in change:
        raise Refusal(f"refused: invalid decision: {where} must be an object with 'from' and 'to'")
    to = change["to"]
    try:
        milli = parse_quantity(to)
    except (ValueError, TypeError) as exc:
        raise Refusal(f"refused: invalid decision: {where}.to {to!r} is not a quantity ({exc})") from None
    if milli < 0:
        raise Refusal(f"refused: invalid decision: {where}.to {to!r} is negative")
    resource = where.rsplit(".", 1)[-1]
    text = to if isinstance(to, str) else format_quantity(resource, milli)
    return milli, text


def _fmt(resource: str, milli: int) -> str:
    return format_quantity(resource, milli)


def check_decision(data: Mapping[str, Any], bounds: Bounds) -> list[str]:
    """Every way ``data`` (a decision's data) leaves ``bounds``; empty when it stays within.

    Raises :class:`Refusal` for a malformed decision (a change without a valid ``to``).
    """
    errors: list[str] = []
    who = f"{bounds.kind} {bounds.name}"
    if "replicas" in data:
        to = count_to(data["replicas"], "replicas")
        if bounds.min_replicas is not None and to < bounds.min_replicas:
            errors.append(f"replicas {to} is below the policy's minReplicas {bounds.min_replicas} ({who})")
        if bounds.max_replicas is not None and to > bounds.max_replicas:
            errors.append(f"replicas {to} is above the policy's maxReplicas {bounds.max_replicas} ({who})")
        if to < 1:
            errors.append(f"replicas {to}: tandem never scales a workload to zero")
    containers = data.get("containers") or {}
    if not isinstance(containers, Mapping):
        raise Refusal("refused: invalid decision: containers must be an object")
    if containers and not bounds.vertical:
        errors.append(f"{who} does not change container resources, but the decision changes {', '.join(containers)}")
    for cname, change in containers.items():
        if not isinstance(change, Mapping):
            raise Refusal(f"refused: invalid decision: containers.{cname} must be an object")
        cb = bounds.container(cname)
        if cb is not None and cb.mode == "Off":
            errors.append(f"container {cname}: the policy's {cb.where} has mode Off ({who})")
        for part in ("requests", "limits"):
            values = change.get(part) or {}
            if not isinstance(values, Mapping):
                raise Refusal(f"refused: invalid decision: containers.{cname}.{part} must be an object")
            for res, ch in values.items():
                milli, text = _qty(ch, f"containers.{cname}.{part}.{res}")
                if part != "requests" or cb is None:
                    continue
                lo, hi = cb.minimum.get(res), cb.maximum.get(res)
                if lo is not None and milli < lo:
                    errors.append(
                        f"container {cname} requests.{res} {text} is below the policy's "
                        f"{bounds.min_name}.{res} {_fmt(res, lo)} ({who} {cb.where})"
                    )
                if hi is not None and milli > hi:
                    errors.append(
                        f"container {cname} requests.{res} {text} is above the policy's "
                        f"{bounds.max_name}.{res} {_fmt(res, hi)} ({who} {cb.where})"
                    )
    hpa = data.get("hpa") or {}
    if not isinstance(hpa, Mapping):
        raise Refusal("refused: invalid decision: hpa must be an object")
    lo_r = count_to(hpa["min_replicas"], "hpa.min_replicas") if "min_replicas" in hpa else None
    hi_r = count_to(hpa["max_replicas"], "hpa.max_replicas") if "max_replicas" in hpa else None
    if lo_r is not None:
        if lo_r < 1:
            errors.append(f"hpa minReplicas {lo_r} is below 1")
        if bounds.min_replicas is not None and lo_r < bounds.min_replicas:
            errors.append(f"hpa minReplicas {lo_r} is below the policy's minReplicas {bounds.min_replicas} ({who})")
    if hi_r is not None and bounds.max_replicas is not None and hi_r > bounds.max_replicas:
        errors.append(f"hpa maxReplicas {hi_r} is above the policy's maxReplicas {bounds.max_replicas} ({who})")
    if lo_r is not None and hi_r is not None and lo_r > hi_r:
        errors.append(f"hpa minReplicas {lo_r} is above hpa maxReplicas {hi_r}")
    targets = hpa.get("target_utilization") or {}
    if not isinstance(targets, Mapping):
        raise Refusal("refused: invalid decision: hpa.target_utilization must be an object")
    for key, ch in targets.items():
        if "/" not in str(key):
            raise Refusal(
                f"refused: invalid decision: hpa.target_utilization key {key!r} is not <container>/<resource>"
            )
        util = ch.get("to") if isinstance(ch, Mapping) else None
        if isinstance(util, bool) or not isinstance(util, int | float) or not math.isfinite(util):
            raise Refusal(f"refused: invalid decision: hpa.target_utilization.{key}.to must be a number")
        if not 1 <= util <= 100:
            errors.append(f"hpa target utilization of {key} {util} is outside 1..100")
    if "metrics" in hpa:
        removed = hpa["metrics"].get("removed") if isinstance(hpa["metrics"], Mapping) else None
        if not isinstance(removed, list) or not all(
            isinstance(r, Mapping) and r.get("type") in METRIC_TYPES and isinstance(r.get("name"), str) for r in removed
        ):
            raise Refusal("refused: invalid decision: hpa.metrics.removed must be a list of {type, name[, container]}")
    return errors


# --- finding the policy and the HPA (pure) ----------------------------------------------------


def find_policy(
    manifests: Iterable[Mapping[str, Any]], workload: WorkloadRef, kind: str | None, name: str | None
) -> Mapping[str, Any]:
    """The manifest among ``manifests`` (one namespace's policy CRs) that the decision names and
    that targets ``workload``; :class:`Refusal` when there is none or the choice is ambiguous."""
    where = f"{workload.kind} {workload.namespace}/{workload.name}"
    targeting = []
    for m in manifests:
        try:
            t = policy_target(m, workload.cluster)
        except (InvalidPolicy, InvalidEvent):
            continue
        if (t.namespace, t.kind, t.name) == (workload.namespace, workload.kind, workload.name):
            targeting.append(m)
    if kind and name:
        named = [m for m in targeting if m.get("kind") == kind and (m.get("metadata") or {}).get("name") == name]
        if not named:
            others = ", ".join(f"{m.get('kind')} {(m.get('metadata') or {}).get('name')}" for m in targeting)
            raise Refusal(
                f"refused: the decision comes from {kind} {name}, but no such policy in namespace "
                f"{workload.namespace} of this cluster targets {where}" + (f" (found: {others})" if others else "")
            )
        targeting = named
    if not targeting:
        raise Refusal(f"refused: no Hvpa, Tortoise or CustomHpa in this cluster targets {where}")
    if len(targeting) > 1:
        names = ", ".join(
            f"{m.get('apiVersion')} {m.get('kind')} {(m.get('metadata') or {}).get('name')}" for m in targeting
        )
        raise Refusal(f"refused: more than one policy targets {where}: {names}")
    return targeting[0]


def find_hpa(hpas: Iterable[Mapping[str, Any]], workload: WorkloadRef, name: str | None = None) -> Mapping[str, Any]:
    """The HorizontalPodAutoscaler that scales ``workload`` (the one called ``name`` when given)."""
    found = []
    for h in hpas:
        ref = (h.get("spec") or {}).get("scaleTargetRef") or {}
        if (
            ref.get("kind") == workload.kind
            and ref.get("name") == workload.name
            and (name is None or (h.get("metadata") or {}).get("name") == name)
        ):
            found.append(h)
    where = f"{workload.kind} {workload.namespace}/{workload.name}"
    if not found:
        raise Refusal(f"refused: the decision changes the HPA, but no HorizontalPodAutoscaler targets {where}")
    if len(found) > 1:
        raise Refusal(f"refused: more than one HorizontalPodAutoscaler targets {where}")
    return found[0]


def hpa_patch(hpa: Mapping[str, Any], changes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JSON merge patch of ``hpa`` for a decision's ``hpa`` changes, and what it changes.

    ``metrics`` is a list without a merge key, so a retargeted or removed metric means sending the
    whole list; ``metrics.removed`` drops every entry a reference names (``scaling.hpa_metrics``)
    before a ``<container>/<resource>`` target with no ContainerResource metric yet adds one.  The
    patch carries the HPA's resourceVersion as a precondition.
    """
    spec = hpa.get("spec") or {}
    patch_spec: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for key, field_ in (("min_replicas", "minReplicas"), ("max_replicas", "maxReplicas")):
        if key in changes:
            to = int(changes[key]["to"])
            cur = spec.get(field_, 1 if field_ == "minReplicas" else None)
            if cur != to:
                patch_spec[field_] = to
                summary[key] = {"from": cur, "to": to}
    targets = changes.get("target_utilization") or {}
    refs = (changes.get("metrics") or {}).get("removed") or []
    metrics = [dict(m) for m in spec.get("metrics") or []]
    if refs:
        kept = [m for m in metrics if not any(matches(m, r) for r in refs)]
        gone = [r for r in refs if any(matches(m, r) for m in metrics)]
        if gone:
            metrics = kept
            patch_spec["metrics"] = metrics
            summary["metrics"] = {"removed": [dict(r) for r in gone]}
    if targets:
        changed: dict[str, Any] = {}
        for key, ch in targets.items():
            container, resource = str(key).split("/", 1)
            to = int(ch["to"]) if float(ch["to"]).is_integer() else ch["to"]
            for i, m in enumerate(metrics):
                cr = m.get("containerResource") or {}
                if (m.get("type"), cr.get("container"), cr.get("name")) == ("ContainerResource", container, resource):
                    target = dict(cr.get("target") or {})
                    cur = target.get("averageUtilization")
                    if cur != to:
                        target.update({"type": "Utilization", "averageUtilization": to})
                        metrics[i] = {**m, "containerResource": {**cr, "target": target}}
                        changed[key] = {"from": cur, "to": to}
                    break
            else:
                metrics.append(
                    {
                        "type": "ContainerResource",
                        "containerResource": {
                            "name": resource,
                            "container": container,
                            "target": {"type": "Utilization", "averageUtilization": to},
                        },
                    }
                )
                changed[key] = {"from": None, "to": to}
        if changed:
            patch_spec["metrics"] = metrics
            summary["target_utilization"] = changed
    if not patch_spec:
        return {}, {}
    meta = hpa.get("metadata") or {}
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": patch_spec}, summary


# --- the workload's containers (pure) ---------------------------------------------------------


def _pod_containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [])


def owned_containers(managed_fields: Sequence[Mapping[str, Any]] | None, manager: str) -> set[str]:
    """Containers whose ``resources`` ``manager`` owns by server-side apply (from managedFields).

    An apply configuration that leaves out a field its manager owned removes that field, so every
    apply must repeat the resources of these containers (with their current values).
    """
    out: set[str] = set()
    for entry in managed_fields or ():
        if entry.get("manager") != manager or entry.get("operation") != "Apply":
            continue
        fields = entry.get("fieldsV1") or {}
        containers = (((fields.get("f:spec") or {}).get("f:template") or {}).get("f:spec") or {}).get(
            "f:containers"
        ) or {}
        for key, sub in containers.items():
            if not key.startswith("k:") or not isinstance(sub, Mapping) or "f:resources" not in sub:
                continue
            try:
                ident = orjson.loads(key[2:])
            except orjson.JSONDecodeError:
                continue
            if isinstance(ident, dict) and isinstance(ident.get("name"), str):
                out.add(ident["name"])
    return out


@dataclass
class ContainerPlan:
    """The resources to apply per container (full requests/limits) and the changes among them."""

    resources: dict[str, dict[str, dict[str, str]]]
    changes: dict[str, dict[str, dict[str, dict[str, str | None]]]]


def plan_containers(obj: Mapping[str, Any], decided: Mapping[str, Any], manager: str = FIELD_MANAGER) -> ContainerPlan:
    """Resources of the changed containers (current values with the decided ones substituted) plus
    those of the containers ``manager`` already owns, and the actual changes.

    Raises :class:`Refusal` when the decision names a container the pod template does not have.
    """
    current = {c.get("name"): c for c in _pod_containers(obj)}
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or "workload"
    resources: dict[str, dict[str, dict[str, str]]] = {}
    changes: dict[str, dict[str, dict[str, dict[str, str | None]]]] = {}
    for cname, change in decided.items():
        if cname not in current:
            raise Refusal(
                f"refused: container {cname!r} is not in the pod template of {kind} "
                f"{meta.get('namespace')}/{meta.get('name')} (it has {', '.join(map(str, current)) or 'none'})"
            )
        res = current[cname].get("resources") or {}
        merged = {part: {str(k): str(v) for k, v in (res.get(part) or {}).items()} for part in ("requests", "limits")}
        for part in ("requests", "limits"):
            for r, ch in (change.get(part) or {}).items():
                milli, text = _qty(ch, f"containers.{cname}.{part}.{r}")
                old = merged[part].get(r)
                if old is not None and parse_quantity(old) == milli:
                    continue
                merged[part][r] = text
                changes.setdefault(cname, {}).setdefault(part, {})[r] = {"from": old, "to": text}
        resources[cname] = merged
    for cname in sorted(owned_containers(meta.get("managedFields"), manager)):
        if cname in resources or cname not in current:
            continue
        res = current[cname].get("resources") or {}
        resources[cname] = {
            part: {str(k): str(v) for k, v in (res.get(part) or {}).items()} for part in ("requests", "limits")
        }
    return ContainerPlan(resources, changes)


def apply_patch(
    obj: Mapping[str, Any],
    resources: Mapping[str, Mapping[str, Mapping[str, str]]],
    annotations: Mapping[str, str],
    resource_version: str | None = None,
) -> dict[str, Any]:
    """The server-side apply configuration: only ``annotations`` and the given containers' resources
    (in pod template order); ``resource_version`` makes it conditional on that version."""
    meta = obj.get("metadata") or {}
    metadata: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if annotations:
        metadata["annotations"] = dict(annotations)
    body: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": metadata}
    order = [c.get("name") for c in _pod_containers(obj)]
    containers = []
    for cname in sorted(resources, key=lambda n: order.index(n) if n in order else len(order)):
        parts = {p: dict(v) for p, v in resources[cname].items() if v}
        containers.append({"name": cname, "resources": parts})
    if containers:
        body["spec"] = {"template": {"spec": {"containers": containers}}}
    return body


# --- results (pure) ---------------------------------------------------------------------------


def result_label(result: Mapping[str, Any]) -> str:
    """The ``result`` label of an applier result CloudEvent in ``tandem_applier_results_total``:
    ``applied``, ``duplicate`` (a repeat), ``skipped`` (not opted in), ``refused`` or ``apply_failed``."""
    data = result.get("data") or {}
    if result.get("type") == APPLIED:
        return "duplicate" if data.get("repeat") else "applied"
    error = str(data.get("error") or "")
    if error.startswith("skipped:"):
        return "skipped"
    if error.startswith("refused:"):
        return "refused"
    return "apply_failed"


# --- opt-in and idempotency (pure) -------------------------------------------------------------


def check_marks(where: str, annotations: Mapping[str, str], decision_id: str, tick: object) -> bool:
    """The opt-in and the idempotency bookkeeping of a decision, from the workload's annotations.

    ``True`` when the decision is a *repeat* (its id is the recorded ``tandem.dev/last-decision``:
    nothing is to be written); raises :class:`Refusal` when the workload has not opted in
    (``skipped: ...``) or when the decision is older, by tick, than the last applied one (a
    redelivered old decision must not undo a newer one: docs/architecture.md invariant 2).
    """
    if annotations.get(MANAGED) != "true":
        raise Refusal(f'skipped: {where} has not opted in (annotation {MANAGED}: "true" is missing)')
    if annotations.get(LAST_DECISION) == decision_id:
        return True
    try:
        last_tick = float(annotations[LAST_TICK]) if LAST_TICK in annotations else None
    except ValueError:
        last_tick = None
    if isinstance(tick, int | float) and last_tick is not None and tick < last_tick:
        raise Refusal(
            f"refused: stale decision: its tick {tick} is older than the last applied decision's "
            f"{last_tick} ({annotations.get(LAST_DECISION)})"
        )
    return False
