"""Naming one entry of an HPA's ``spec.metrics``, so that a decision can remove it.

A decision lists removed metrics as references (``hpa.metrics.removed``, docs/contract.md section
4): ``{"type": "Resource", "name": "cpu"}``, ``{"type": "ContainerResource", "container": "app",
"name": "memory"}``, ``{"type": "External", "name": "queue-depth"}`` (``Pods`` and ``Object`` name
their metric the same way).  A reference matches every metric of that type and name, as
Tortoise's removals do (``pkg/hpa/service.go``: ``syncHPAMetricsWithTortoiseAutoscalingPolicy``
drops Resource metrics and ContainerResource metrics by (container, resource);
``excludeExternalMetric`` drops External metrics by ``metric.name``).  The state's HPA overlay, the
applier's patch and the policy share these helpers, so they agree on what "the same metric" is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["METRIC_TYPES", "apply_changes", "matches", "metric_ref", "ref_key"]

METRIC_TYPES = ("Resource", "ContainerResource", "External", "Pods", "Object")
#: Where each metric type keeps the name a reference uses.
_NAME_PATH: Mapping[str, tuple[str, ...]] = {
    "Resource": ("resource", "name"),
    "ContainerResource": ("containerResource", "name"),
    "External": ("external", "metric", "name"),
    "Pods": ("pods", "metric", "name"),
    "Object": ("object", "metric", "name"),
}


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def metric_ref(metric: Mapping[str, Any]) -> dict[str, str] | None:
    """The reference that names ``metric`` (``None`` for an entry without a type or name)."""
    kind = metric.get("type")
    if not isinstance(kind, str) or kind not in _NAME_PATH:
        return None
    name = _get(metric, _NAME_PATH[kind])
    if not isinstance(name, str):
        return None
    if kind == "ContainerResource":
        container = _get(metric, ("containerResource", "container"))
        if not isinstance(container, str):
            return None
        return {"type": kind, "container": container, "name": name}
    return {"type": kind, "name": name}


def ref_key(ref: Mapping[str, Any]) -> tuple[str, str, str]:
    """A sort key: type, container (empty unless ContainerResource), name."""
    return (str(ref.get("type", "")), str(ref.get("container", "")), str(ref.get("name", "")))


def matches(metric: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    own = metric_ref(metric)
    return own is not None and ref_key(own) == ref_key(ref)


def apply_changes(
    metrics: Iterable[Mapping[str, Any]],
    removed: Iterable[Mapping[str, Any]],
    targets: Mapping[str, Any],
    *,
    add_missing: bool = True,
) -> list[dict[str, Any]]:
    """``metrics`` without the ``removed`` ones, then with ``targets`` (``<container>/<resource>``:
    utilization) set on their ContainerResource metric, a missing one appended unless
    ``add_missing`` is false (Tortoise adds it with target type Utilization,
    ``syncHPAMetricsWithTortoiseAutoscalingPolicy``)."""
    gone = [ref_key(r) for r in removed]
    out = [dict(m) for m in metrics if not any(ref_key(metric_ref(m) or {}) == k for k in gone)]
    for key, to in targets.items():
        container, _, resource = str(key).partition("/")
        for i, m in enumerate(out):
            cr = m.get("containerResource") or {}
            if (m.get("type"), cr.get("container"), cr.get("name")) == ("ContainerResource", container, resource):
                target = {**dict(cr.get("target") or {}), "type": "Utilization", "averageUtilization": to}
                out[i] = {**m, "containerResource": {**cr, "target": target}}
                break
        else:
            if not add_missing:
                continue
            out.append(
                {
                    "type": "ContainerResource",
                    "containerResource": {
                        "name": resource,
                        "container": container,
                        "target": {"type": "Utilization", "averageUtilization": to},
                    },
                }
            )
    return out
