"""The seed proposal's modes of HVPA (HpaPreferred, HpaBiased, VpaBiased, Mixed): which of the
two axes' wishes of a tick apply; weight-based (the released rule) keeps both."""

from __future__ import annotations

from typing import Any

from ...outcome import Outcome, View
from ...quantity import format_quantity
from .rules import min_change_threshold
from .spec import HvpaSpec

__all__ = ["Axis", "apply_mode"]


class Axis:
    """One axis's wish in a tick, before the seed modes pick between HPA and VPA (a plain class:
    two per tick, and a dataclass's default factories are calls)."""

    __slots__ = ("limits", "replicas", "requests", "wanted_replicas")

    def __init__(self) -> None:
        self.replicas: int | None = None
        self.wanted_replicas: int | None = None
        self.requests: dict[str, dict[str, int]] = {}
        self.limits: dict[str, dict[str, int]] = {}


def apply_mode(
    s: HvpaSpec, view: View, out: Outcome, current: int, desired: int, horizontal: Axis, vertical: Axis, vpa: Any
) -> None:
    """Seed modes choose between the two axes; weight-based keeps both (the released rule)."""
    use_h, use_v = True, True
    has_h = horizontal.wanted_replicas is not None
    has_v = bool(vertical.requests)
    if s.mode == "HpaPreferred":
        # vertical up only at maxReplicas, vertical down only at minReplicas
        for cname in list(vertical.requests):
            for res in list(vertical.requests[cname]):
                req = view.spec.containers[cname].requests.get(res)
                up = vertical.requests[cname][res] > (req.milli if req else 0)
                if (up and current < s.max_replicas) or (not up and current > s.min_replicas):
                    out.block(f"{cname}/{res}", "Weight", format_quantity(res, vertical.requests[cname][res]))
                    del vertical.requests[cname][res]
                    vertical.limits.get(cname, {}).pop(res, None)
            if not vertical.requests[cname]:
                del vertical.requests[cname]
                vertical.limits.pop(cname, None)
        out.reasons.append("hvpa: mode HpaPreferred scales vertically only at the replica bounds")
    elif s.mode == "HpaBiased":
        use_v = not has_h
        out.reasons.append("hvpa: mode HpaBiased applies VPA only when HPA has no recommendation")
    elif s.mode == "VpaBiased":
        use_h = not has_v
        out.reasons.append("hvpa: mode VpaBiased applies HPA only when VPA has no recommendation")
    elif s.mode == "Mixed" and has_h and has_v and s.mixed is not None:
        h_ok = abs(desired - current) > s.mixed.replicas
        v_ok = _mixed_vertical_ok(s, view, vertical, vpa)
        if h_ok and v_ok:
            use_h, use_v = s.mixed.prefer == "hpa", s.mixed.prefer == "vpa"
        else:
            use_h, use_v = h_ok, v_ok
        out.reasons.append(f"hvpa: mode Mixed (HPA over threshold: {h_ok}, VPA over threshold: {v_ok})")
        if not h_ok and not v_ok:
            out.block("replicas", "MinChange", horizontal.wanted_replicas)
    if use_h:
        if horizontal.replicas is not None:
            out.replicas = horizontal.replicas
    elif has_h:
        out.block("replicas", "Weight", horizontal.wanted_replicas)
    if use_v:
        out.requests.update(vertical.requests)
        out.limits.update(vertical.limits)
    else:
        for cname, res_map in vertical.requests.items():
            for res, v in res_map.items():
                out.block(f"{cname}/{res}", "Weight", format_quantity(res, v))


def _mixed_vertical_ok(s: HvpaSpec, view: View, vertical: Axis, vpa: Any) -> bool:
    """Mixed mode: whether a vertical change is over the seed's thresholds for some resource."""
    assert s.mixed is not None
    for cname, res_map in vertical.requests.items():
        for res, new in res_map.items():
            c = view.spec.containers[cname]
            req = c.requests.get(res)
            lim = c.limits.get(res)
            cur = req.milli if req else 0
            target = vpa.containers[cname].target[res].milli
            y = min_change_threshold(s.mixed.resources.get(res), cur, res)
            # Seed: "difference greater than y, or the recommended value is more than the limit"
            if abs(new - cur) > y or (lim is not None and target > lim.milli):
                return True
    return False
