"""Tortoise's recommender (reference 2.c, 2.d, 2.e): HPA target utilizations, right-sized
requests per (container, resource), and the requests (with the pod webhook's limits) it applies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...events import VpaEvent
from ...outcome import View
from ...quantity import format_quantity
from .settings import FEATURE_PREFERRED_MAX, TortoiseSettings
from .spec import RESOURCES, Pair, TortoiseSpec, pair_key
from .tick import Tick

__all__ = [
    "apply_requests",
    "horizontal_size",
    "justify",
    "request",
    "target_recommendations",
    "update_vpa_max",
    "vertical_recommendations",
    "vertical_size",
]

#: Vertical scale-downs are applied at most once per hour (reference 2.e, ``UpdateResourceRequest``).
SCALE_DOWN_INTERVAL = 3600.0
#: ``ScaledUpBasedOnPreferredMaxReplicas``: one ×1.3 step per 30 minutes (reference 2.d).
PREFERRED_MAX_HOLD = 1800.0
PREFERRED_MAX_GROWTH = 1.3


def update_vpa_max(vpa: VpaEvent, policies: Mapping[Pair, str], memory: dict[str, Any]) -> dict[str, int]:
    """``maxRecommendation`` kept while target < max < upperBound, else the target (reference 2.e)."""
    old = memory.get("vmax") or {}
    vmax: dict[str, int] = {}
    for c in sorted({p[0] for p in policies}):
        rec = vpa.containers.get(c)
        if rec is None:
            continue
        for r in RESOURCES:
            key = f"{c}/{r}"
            tq, uq = rec.target.get(r), rec.upper_bound.get(r)
            target = tq.milli if tq is not None else 0
            upper = uq.milli if uq is not None else 0
            cur = int(old.get(key, 0))
            vmax[key] = cur if target < cur < upper else target
    memory["vmax"] = vmax
    return vmax


def target_recommendations(t: Tick, vmax: Mapping[str, int], *, off: bool = False) -> dict[str, int]:
    """HPA target utilization per Horizontal pair (reference 2.c; seed formula).

    The current target is read from the HPA as Tortoise has just updated it (``hpa_math``: a
    Horizontal pair's missing metric added at 70).  With ``off`` (``updateMode: Off``) Tortoise
    leaves the HPA alone (pkg/hpa/service.go ``UpdateHPASpecFromTortoiseAutoscalingPolicy`` returns
    at once), so the HPA as it is is read, and a pair whose metric it lacks is skipped
    (pkg/recommender/recommender.go ``updateHPATargetUtilizationRecommendations``:
    ``GetHPATargetValue`` fails, ``continue``).
    """
    st = t.st
    out: dict[str, int] = {}
    hpa = t.hpa if off and t.hpa is not None else t.hpa_math
    if hpa is None or hpa.targets is None:
        return out
    for p, kind in t.policies.items():
        if kind != "Horizontal":
            continue
        key = pair_key(p)
        current = hpa.targets.get(p)
        q = request(t.view, p)
        r = vmax.get(key)
        if current is None or not q or r is None:
            continue  # a missing HPA metric is skipped silently
        upper = math.ceil(float(r) / float(q) * 100)
        if current > upper:
            rec = current  # low usage is blamed on minReplicas or unbalanced sizing
        else:
            rec = 100 - (upper - current)
            if rec <= 0 or rec > 100:
                rec = current
        if rec > st.max_target:
            rec = st.max_target
        if rec < st.min_target:
            rec = st.min_target
        out[key] = rec
    return out


def vertical_recommendations(t: Tick, spec: TortoiseSpec, vmax: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Requests per container and resource (reference 2.d right-sizing, 2.e vertical)."""
    st, view, memory = t.st, t.view, t.memory
    n = view.spec.replicas
    horizontal = [p for p, kind in t.policies.items() if kind == "Horizontal"]
    hpa_min = t.hpa_math.min_replicas if t.hpa_math is not None else None
    scaled_up = close = False
    if horizontal:
        pref = memory.get("pref")
        was_true = isinstance(pref, list) and bool(pref[0])
        held = was_true and isinstance(pref, list) and float(pref[1]) + PREFERRED_MAX_HOLD > t.now
        if (
            n >= st.preferred_max_replicas
            and hpa_min is not None
            and hpa_min < n
            and FEATURE_PREFERRED_MAX in st.features
            and not held
        ):
            if was_true:
                scaled_up = True
            memory["pref"] = [True, t.now]
        if n < st.preferred_max_replicas:
            memory["pref"] = [False, t.now]
        close = int(float(st.preferred_max_replicas) * 0.8) < n
    out: dict[str, dict[str, int]] = {}
    for p, kind in t.policies.items():
        if kind == "Off":
            continue
        q = request(view, p)
        r = vmax.get(pair_key(p))
        if not q or r is None:
            continue
        if kind == "Vertical":
            new = vertical_size(st, spec, p, q, r)
        else:
            new = horizontal_size(t, spec, p, q, r, scaled_up, close, len(horizontal) > 1, hpa_min)
        out.setdefault(p[0], {})[p[1]] = new
    return out


def vertical_size(st: TortoiseSettings, spec: TortoiseSpec, p: Pair, q: int, r: int) -> int:
    b = st.buffer_ratio
    ideal = float(r) * (1 + b)
    if ideal > float(q):
        # Scale up is immediate and overshoots by the buffer once more.
        return justify(st, spec, p, q, int(ideal * (1 + b)))
    previous_ideal = float(q) / (1 + b)
    if previous_ideal * (1 - b) > ideal:
        return justify(st, spec, p, q, int(ideal))
    return q  # a small decrease is ignored (and not clamped)


def horizontal_size(
    t: Tick,
    spec: TortoiseSpec,
    p: Pair,
    q: int,
    r: int,
    scaled_up: bool,
    close: bool,
    multiple: bool,
    hpa_min: int | None,
) -> int:
    """``calculateBestNewSize`` for a Horizontal resource (reference 2.d)."""
    st = t.st
    n = t.view.spec.replicas
    if scaled_up:
        return justify(st, spec, p, q, int(float(q) * PREFERRED_MAX_GROWTH))
    if close:
        return q
    if n <= st.minimum_min_replicas:
        return justify(st, spec, p, q, r if r < q else q)
    if not multiple or n == hpa_min:
        return justify(st, spec, p, q, q)
    target = t.hpa_math.targets.get(p) if t.hpa_math is not None and t.hpa_math.targets is not None else None
    if target is None:
        return q
    upper = float(r) / float(q) * 100
    if float(target) * 0.9 > upper:
        return justify(st, spec, p, q, int(float(r) * 100.0 / float(target)))
    return justify(st, spec, p, q, q)


def justify(st: TortoiseSettings, spec: TortoiseSpec, p: Pair, old: int, new: int) -> int:
    """``justifyNewSize``: within [max(minAllocated, global min, old × ratio), min(maxAllocated, global max)]."""
    c, res = p
    b = spec.resource_policy.get(c)
    lo = max(b.min_allocated.get(res, 0) if b else 0, st.global_min(c, res))
    hi = st.max_request.get(res, 0)
    spec_hi = b.max_allocated.get(res, 0) if b else 0
    if spec_hi and spec_hi < hi:
        hi = spec_hi
    floor = int(float(old) * st.max_scale_down_ratio)
    if lo < floor:
        lo = floor
    if new > hi:
        return hi
    if new < lo:
        return lo
    return new


def request(view: View, p: Pair) -> int:
    c = view.spec.containers.get(p[0])
    q = c.requests.get(p[1]) if c is not None else None
    return q.milli if q is not None else 0


def apply_requests(t: Tick, vrec: Mapping[str, Mapping[str, int]]) -> None:
    """``UpdateResourceRequest`` (reference 2.e) and the pod webhook's limits."""
    st, out, view = t.st, t.out, t.view
    changed: dict[str, dict[str, int]] = {}
    increased = False
    for c in sorted(vrec):
        for r in sorted(vrec[c]):
            new = vrec[c][r]
            q = request(view, (c, r))
            if new and new != q:
                changed.setdefault(c, {})[r] = new
                increased = increased or new > q
    if out.dry_run:
        t.memory.pop("req_at", None)  # VerticalRecommendationUpdated=False in Off mode
    if not changed:
        return
    if not out.dry_run:
        last = t.memory.get("req_at")
        if last is not None and t.now - float(last) < SCALE_DOWN_INTERVAL and not increased:
            for c, res_map in changed.items():
                for r, v in res_map.items():
                    out.block(f"{c}/{r}", "Cooldown", format_quantity(r, v))
            return
        t.memory["req_at"] = t.now
    for c, res_map in changed.items():
        spec = view.spec.containers[c]
        for r, new in res_map.items():
            out.requests.setdefault(c, {})[r] = new
            old_req, old_lim = spec.requests.get(r), spec.limits.get(r)
            if old_lim is None or old_req is None or old_req.milli == 0:
                continue
            ratio = float(old_lim.milli) / float(old_req.milli)
            mult = st.limit_multiplier.get(r)
            if mult is not None and ratio < mult:
                ratio = float(mult)
            limit = int(float(new) * ratio)
            if r == "cpu" and limit < st.minimum_cpu_limit:
                limit = st.minimum_cpu_limit
            out.limits.setdefault(c, {})[r] = limit
