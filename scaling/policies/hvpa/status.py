"""Hvpa's status as gardener/hvpa-controller writes it (pure; :mod:`scaling.policies.status`).

* the released API ``autoscaling.k8s.io/v1alpha1`` (``api/v1alpha1/hvpa_types.go``): ``replicas``,
  ``hpaWeight``/``vpaWeight``, the four update-policy copies, ``lastScaling`` {``lastScaleTime``,
  ``hpaStatus``, ``vpaStatus``}, ``lastBlockedScaling`` [{``reason``, ``scalingStatus``}],
  ``lastError`` (:data:`RELEASED`);
* the scale-interval design ``autoscaling.gardener.cloud/v1alpha1``: the same, with
  ``lastScaling.lastUpdated``, ``vpaStatus`` as a list of {containerName, resources} and
  ``scaleUpUpdatePolicy``/``scaleDownUpdatePolicy`` (:data:`V2`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..status import Observation, StatusShape, as_int, dig, newest, number

__all__ = ["RELEASED", "V2"]

#: ``hvpa: vpaWeight 40 at 2 replicas (hpaWeight 60)``: the weights are only in the reasons' text.
_WEIGHTS = re.compile(r"^hvpa: vpaWeight (\S+) at \d+ replicas \(hpaWeight (\S+)\)")


def _vpa_status(requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    recs = [{"containerName": c, "target": dict(sorted(r.items()))} for c, r in sorted(requests.items())]
    return {"recommendation": {"containerRecommendations": recs}}


def _vpa_list(requests: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"containerName": c, "resources": {"requests": dict(sorted(r.items()))}} for c, r in sorted(requests.items())
    ]


def _blocked_scaling(obs: Observation, released: bool) -> list[dict[str, Any]]:
    """``lastBlockedScaling``: one entry per blocking reason, with what was wanted (HVPA keeps the
    would-be scaling in ``scalingStatus``)."""
    by_reason: dict[str, dict[str, Any]] = {}
    current = as_int(obs.inputs.get("replicas"))
    for b in obs.blocked():
        reason = str(b.get("reason") or "")
        target = str(b.get("target") or "")
        entry = by_reason.setdefault(reason, {"reason": reason, "scalingStatus": {}})
        st = entry["scalingStatus"]
        if target == "replicas":
            hpa = {"desiredReplicas": b.get("wanted")}
            if current is not None:
                hpa = {"currentReplicas": current, **hpa}
            st["hpaStatus"] = hpa
        elif "/" in target and not target.startswith("hpa/"):
            cname, res = target.split("/", 1)
            st.setdefault("_requests", {}).setdefault(cname, {})[res] = b.get("wanted")
    out = []
    for entry in by_reason.values():
        st = entry["scalingStatus"]
        requests = st.pop("_requests", None)
        if requests:
            st["vpaStatus"] = _vpa_status(requests) if released else _vpa_list(requests)
        out.append(entry)
    return out


def _fold(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation, *, released: bool) -> None:
    spec = obj.get("spec") or {}
    when, latest = obs.time, newest(status)
    stamp = "lastScaleTime" if released else "lastUpdated"
    if when >= latest:
        replicas = obs.replicas_after()
        if replicas is not None:
            status["replicas"] = replicas
        copies: tuple[tuple[str, tuple[str, ...]], ...]
        if released:
            for reason in obs.data.get("reasons") or ():
                m = _WEIGHTS.match(str(reason))
                if m:
                    status["vpaWeight"], status["hpaWeight"] = number(m.group(1)), number(m.group(2))
            copies = (
                ("hpaScaleUpUpdatePolicy", ("hpa", "scaleUp", "updatePolicy")),
                ("hpaScaleDownUpdatePolicy", ("hpa", "scaleDown", "updatePolicy")),
                ("vpaScaleUpUpdatePolicy", ("vpa", "scaleUp", "updatePolicy")),
                ("vpaScaleDownUpdatePolicy", ("vpa", "scaleDown", "updatePolicy")),
            )
        else:
            copies = (
                ("scaleUpUpdatePolicy", ("scaleUp", "updatePolicy")),
                ("scaleDownUpdatePolicy", ("scaleDown", "updatePolicy")),
            )
        for field_, path in copies:
            value = dig(spec, *path)
            if isinstance(value, Mapping):
                status[field_] = dict(value)
        blocked = _blocked_scaling(obs, released)
        if blocked:
            status["lastBlockedScaling"] = blocked
        else:
            status.pop("lastBlockedScaling", None)
    last = status.get("lastScaling") or {}
    if obs.applied and when >= str(last.get(stamp) or ""):
        scaling: dict[str, Any] = {stamp: when}
        change = obs.replicas_change()
        if change is not None:
            scaling["hpaStatus"] = {"currentReplicas": change[0], "desiredReplicas": change[1]}
        requests = obs.requests_to()
        if requests:
            scaling["vpaStatus"] = _vpa_status(requests) if released else _vpa_list(requests)
        status["lastScaling"] = scaling
    error = obs.failed
    if error is not None:
        status["lastError"] = {"description": error, "lastUpdateTime": when, "lastOperation": "Apply"}
    elif obs.applied:
        status.pop("lastError", None)


RELEASED = StatusShape(lambda o, s, ob: _fold(o, s, ob, released=True))
V2 = StatusShape(lambda o, s, ob: _fold(o, s, ob, released=False))
