"""Gardener HVPA, line B: "scale intervals" (branch ``hvpa-v2``, API ``autoscaling.gardener.cloud``).

Line B never shipped (reference ``hvpa.md`` section 0), but it is the newest *design*: instead of
sharing one change between HPA and VPA by weights, it reasons about the workload's **total**
resources (replicas x per-pod request).  ``scaleIntervals`` are cut into one "effective scaling
interval" (a *bucket*) per replica count; the bucket that holds the new total decides the replica
count, and the total divided by it decides the per-pod requests.  Why totals: a horizontal and a
vertical recommendation then become one quantity that cannot contradict itself, and the replica
count follows the size of the workload instead of whichever recommender spoke last.

The rules follow reference ``hvpa.md`` sections 1.2 and 3 (re-derived from ``controllers/bucket.go``
and ``controllers/hvpa_util.go`` at ``d5ae3035``), quirks included; where the reference leaves a
choice open, ``docs/hvpa-v2.md`` ("Decisions") says what tandem does and why.  Everything is
integer milli-units (millicores, milli-bytes) with Go's truncating division, so the vectors of
section 5 come out to the kilobyte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...events import VpaEvent, WorkloadRef
from ...outcome import Outcome, View
from ...quantity import format_quantity
from ..bounds import Bounds
from ..fields import HVPA_V2_SPEC
from ..registry import PolicyKind, register
from ..templates import HpaTemplate, VpaTemplate
from .policy import hvpa_bounds
from .rules import min_change_threshold, round_kb, scaled_limit, within_duration
from .spec import ContainerPolicy
from .status import V2
from .v2_spec import (
    BLOCK_ORDER,
    RESOURCES,
    WAIVABLE,
    Bucket,
    Buckets,
    HvpaV2Spec,
    ScaleInterval,
    build_buckets,
    parse_hvpa_v2_spec,
)

__all__ = ["Bucket", "Buckets", "HvpaV2Policy", "HvpaV2Spec", "ScaleInterval", "build_buckets", "parse_hvpa_v2"]


def parse_hvpa_v2(manifest: Mapping[str, Any], workload: WorkloadRef) -> HvpaV2Policy:
    """Parse an ``autoscaling.gardener.cloud/v1alpha1`` Hvpa (docs/contract.md §5): its spec
    (:func:`.v2_spec.parse_hvpa_v2_spec`), every error naming its field."""
    return HvpaV2Policy(parse_hvpa_v2_spec(manifest, workload))


# --- the rules --------------------------------------------------------------------------------


def _tdiv(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def vpa_conditions_ok(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """HVPA v2 ``vpaStatusConditionsSupported``: any unexpected known condition rejects the VPA.

    Unlike line A this is order-insensitive and demands ``RecommendationProvided``.  tandem's
    ``vpa`` events carry conditions optionally, so an absent or empty list is accepted.
    """
    if not conditions:
        return True
    expected = {
        "ConfigUnsupported": "False",
        "ConfigDeprecated": "False",
        "LowConfidence": "False",
        "RecommendationProvided": "True",
    }
    recommended = False
    for c in conditions:
        kind, status = c.get("type"), str(c.get("status", "True"))
        if kind in expected and expected[kind] != status:
            return False
        if kind == "RecommendationProvided":
            recommended = True
    return recommended


@dataclass(slots=True)
class _Container:
    """One recommended container through estimate and finalise (per-pod and total, milli-units)."""

    name: str
    buckets: Buckets
    policy: ContainerPolicy | None
    req: dict[str, int]
    lim: dict[str, int]
    target: dict[str, int]
    cur_total: dict[str, int]
    new_total: dict[str, int]
    up: bool = False
    by: dict[str, int] = field(default_factory=dict)
    estimate: int | None = None
    blocked: str | None = None
    requests: dict[str, int] | None = None  # finalised per-pod requests, None = unchanged


class HvpaV2Policy:
    """Gardener HVPA line B ("scale intervals", hvpa-v2): replicas and requests from total resources."""

    kind = "Hvpa"

    def __init__(self, spec: HvpaV2Spec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload

    @property
    def min_replicas(self) -> int:
        return self.spec.min_replicas

    @property
    def max_replicas(self) -> int:
        return self.spec.max_replicas

    def bounds(self) -> Bounds:
        """HPA minReplicas..the last interval's maxReplicas and the container policies' allowed range."""
        return hvpa_bounds(self.kind, self.name, self.spec.min_replicas, self.spec.max_replicas, self.spec.containers)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        # Line B parses its HPA template (``spec.hpa_metrics``) but tandem does not run its own
        # HPA or VPA for it yet: a line B workload needs the cluster's recommendations.
        return None

    def vpa_template(self) -> VpaTemplate | None:
        return None

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        s = self.spec
        now = view.tick
        out = Outcome()
        current = view.spec.replicas
        last_scale: float | None = memory.get("last_scale_time")
        # HVPA 2.10: an OOM kill after the last scaling overrides scale-up stabilization (and minChange).
        override = any(last_scale is None or ts > last_scale for ts in view.oom.values())
        hpa = view.hpa if s.hpa_enabled else None
        # HVPA v2: desiredReplicas is 0 without HPA status, so max() of totals ignores it (3.2).
        desired = hpa.desired_replicas if hpa is not None else 0
        vpa = view.vpa if s.vpa_enabled else None
        out.inputs = {"replicas": current, "hpa_desired_replicas": desired}
        if vpa is not None:
            out.inputs["vpa_target"] = {
                c: {r: q.text for r, q in rec.target.items()} for c, rec in sorted(vpa.containers.items())
            }
        if vpa is None:
            out.reasons.append("hvpa-v2: no VPA recommendation, nothing to scale")
            return out
        if current == 0 or view.workload.kind == "DaemonSet":
            # HVPA v2: current == 0 skips scaling; a misspelled kind check skips DaemonSets (3.5).
            out.reasons.append(f"hvpa-v2: {view.workload.kind} with {current} replicas is never scaled by line B")
            return out
        if not vpa_conditions_ok(vpa.conditions):
            out.reasons.append("hvpa-v2: VPA recommendation not usable (conditions), no scaling")
            return out
        processed = _fingerprint(hpa.desired_replicas if hpa is not None else None, vpa)
        if override:
            out.reasons.append(
                "hvpa-v2: OOM kill since the last scaling overrides scale-up stabilization and minChange"
            )
        elif memory.get("last_processed") == processed:
            # HVPA v2: inputs equal lastProcessedRecommendations => re-apply lastScaling (3.5).
            self._reapply(view, out, memory)
            return out

        plans = self._estimate(view, out, current, desired, last_scale, override)
        final = max((p.estimate for p in plans if p.blocked is None and p.estimate is not None), default=0)
        if final == 0:
            final = current  # HVPA v2: every container blocked or unchanged => current replicas
        bounded = min(max(final, s.min_replicas), s.max_replicas)
        if final != current and bounded != final:
            # tandem invariant: a replica change never leaves the policy's bounds (a safety net: the
            # buckets span exactly these bounds).
            out.reasons.append(
                f"hvpa-v2: replicas {final} clamped to the policy bounds {s.min_replicas}..{s.max_replicas}"
            )
            final = bounded
        self._finalise(view, out, plans, current, final)

        changed = final != current or bool(out.requests) or bool(out.limits)
        if final != current:
            out.replicas = final
            out.reasons.append(f"hvpa-v2: replicas {current} -> {final}")
        if changed:
            memory["last_scale_time"] = now
            memory["last_processed"] = processed
            memory["last_scaling"] = {
                "replicas": out.replicas,
                "requests": {c: dict(v) for c, v in out.requests.items()},
                "limits": {c: dict(v) for c, v in out.limits.items()},
            }
        return out

    # HVPA v2 estimateScalingParameters (reference 3.2)
    def _estimate(
        self, view: View, out: Outcome, current: int, desired: int, last_scale: float | None, override: bool
    ) -> list[_Container]:
        s = self.spec
        now = view.tick
        vpa = view.vpa
        assert vpa is not None
        plans: list[_Container] = []
        for cname in sorted(vpa.containers):
            if cname not in view.spec.containers:
                continue  # in the recommendation but not in the pod: ignored
            buckets, problem = s.buckets_for(cname)
            if buckets is None:
                out.reasons.append(f"hvpa-v2: {cname}: left alone ({problem})")
                continue
            res_spec = view.spec.containers[cname]
            rec = vpa.containers[cname]
            req = {r: res_spec.requests[r].milli if r in res_spec.requests else 0 for r in RESOURCES}
            lim = {r: res_spec.limits[r].milli if r in res_spec.limits else 0 for r in RESOURCES}
            # tandem: a resource the VPA does not recommend keeps its request (no opinion).
            target = {r: rec.target[r].milli if r in rec.target else req[r] for r in RESOURCES}
            cur_total = {r: req[r] * current for r in RESOURCES}
            # HVPA v2: newTotal = max(vpaTarget x current, request x hpaDesired) (3.2).
            new_total = {r: max(target[r] * current, req[r] * desired) for r in RESOURCES}
            p = _Container(cname, buckets, s.container_policy(cname), req, lim, target, cur_total, new_total)
            plans.append(p)
            if new_total == cur_total:
                continue  # HVPA v2: no scaling wanted; finalise still re-derives it at the final count
            # HVPA v2: down only if both totals shrink or stay, otherwise up - erring on stability (3.2).
            p.up = any(new_total[r] > cur_total[r] for r in RESOURCES)
            p.by = self._replicas_by_resource(p, current)
            totals = ", ".join(
                f"{r} {format_quantity(r, cur_total[r])} -> {format_quantity(r, new_total[r])} (bucket {p.by[r]})"
                for r in RESOURCES
            )
            out.reasons.append(f"hvpa-v2: {cname}: totals {totals}, scale {'up' if p.up else 'down'}")
            p.blocked = self._block_reason(p, now, last_scale, override)
            if p.blocked is not None:
                p.estimate = max(p.by.values())
                continue
            max_r = max(p.by.values())
            if all(r == current for r in p.by.values()):
                # HVPA v2: both resources fit the current bucket => keep the replicas (3.2)
                p.estimate = current
                continue
            if not p.up and current in p.by.values():
                # HVPA v2: scaling down and one resource still fits the current bucket => keep (hysteresis)
                p.estimate = current
                out.reasons.append(f"hvpa-v2: {cname}: scale-down hysteresis keeps {current} replicas")
                continue
            if max_r == current:
                p.estimate = current  # HVPA v2: the larger estimate is today's count (3.2)
                continue
            p.estimate = max_r
            if not p.up and max_r < current:
                # HVPA v2: fewer replicas that would each be larger on an overall scale-down is paradoxical
                per_pod = {r: _tdiv(new_total[r], max_r) for r in RESOURCES}
                if all(req[r] != 0 and req[r] < per_pod[r] for r in RESOURCES):
                    p.blocked = "ParadoxicalScaling"
                    out.reasons.append(
                        f"hvpa-v2: {cname}: scale in to {max_r} replicas would grow every pod: paradoxical, blocked"
                    )
        return plans

    def _replicas_by_resource(self, p: _Container, current: int) -> dict[str, int]:
        by: dict[str, int] = {}
        for r in RESOURCES:
            found = p.buckets.lookup(r, p.new_total[r], current)
            if found is None:
                # HVPA v2: out of range and the per-pod target above the last interval's max =>
                # the last interval's maxReplicas; otherwise this resource has no opinion (0).
                found = p.buckets.last_replicas if p.target[r] > p.buckets.last_max[r] else 0
            by[r] = found
        if all(v == 0 for v in by.values()):
            # tandem: upstream divides by zero here; take the nearest end of the buckets instead.
            first = p.buckets.buckets[0]
            below = all(p.new_total[r] < first.replicas * first.min[r] for r in RESOURCES)
            fallback = p.buckets.first_replicas if below else p.buckets.last_replicas
            by = dict.fromkeys(RESOURCES, fallback)
        return by

    def _block_reason(self, p: _Container, now: float, last_scale: float | None, override: bool) -> str | None:
        s = self.spec
        st = s.up if p.up else s.down
        if st.mode == "Off":
            return "UpdatePolicy"
        # HVPA v2: the override skips scale-up stabilization only (3.2).
        if (not p.up or not override) and within_duration(last_scale, st.stabilization, now):
            return "StabilizationWindow"
        if st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
            return "MaintenanceWindow"
        if p.up and override:
            return None  # HVPA v2: minChange is skipped for scale-up under the override
        within = True
        for r in RESOURCES:
            # HVPA v2: thresholds relative to the current *total*; blocked only if both deltas are below.
            threshold = min_change_threshold(st.min_change.get(r), p.cur_total[r], r)
            delta = p.new_total[r] - p.cur_total[r] if p.up else p.cur_total[r] - p.new_total[r]
            within = within and delta < threshold
        return "MinChange" if within else None

    # HVPA v2 finaliseScalingParameters (reference 3.3, 3.4)
    def _finalise(self, view: View, out: Outcome, plans: list[_Container], current: int, final: int) -> None:
        for p in plans:
            if p.blocked is None:
                self._per_pod(p, out, current, final)
        changed = final != current or any(p.requests is not None and p.requests != p.req for p in plans)
        if changed:
            for p in plans:
                if p.blocked in WAIVABLE:
                    # HVPA v2: when other containers change anyway, MinChange and stabilization of the
                    # rest are waived so that the pod is rewritten once, consistently (3.3).
                    out.reasons.append(f"hvpa-v2: {p.name}: {p.blocked} waived because the pod changes anyway")
                    p.blocked = None
                    self._per_pod(p, out, current, final)
        blocked: list[tuple[int, int, str, str, str | int]] = []
        replicas_wanted: dict[str, int] = {}
        for p in plans:
            if p.blocked is None:
                continue
            order = BLOCK_ORDER.index(p.blocked)
            if p.estimate is not None and p.estimate not in (current, final):
                replicas_wanted[p.blocked] = max(replicas_wanted.get(p.blocked, 0), p.estimate)
            wanted, _ = self._targets(p, current, final)
            for r in RESOURCES:
                if wanted[r] != p.req[r]:
                    blocked.append((order, 1, f"{p.name}/{r}", p.blocked, format_quantity(r, wanted[r])))
        for reason, r_wanted in replicas_wanted.items():
            blocked.append((BLOCK_ORDER.index(reason), 0, "replicas", reason, r_wanted))
        for _, _, target, reason, value in sorted(blocked, key=lambda b: (b[0], b[1], b[2])):
            out.block(target, reason, value)
        if blocked:
            reasons = sorted({b[3] for b in blocked}, key=BLOCK_ORDER.index)
            out.reasons.append(f"hvpa-v2: blocked by {', '.join(reasons)}")

    def _targets(self, p: _Container, current: int, final: int) -> tuple[dict[str, int], bool]:
        """Per-pod requests at ``final`` replicas, and whether they are a refused (paradoxical) shrink."""
        s = self.spec
        min_allowed = p.policy.min_allowed if p.policy is not None else {}
        max_allowed = p.policy.max_allowed if p.policy is not None else {}
        # HVPA v2: per-pod = newTotal / final, floored at minAllowed (3.3).
        per_pod = {r: max(_tdiv(p.new_total[r], final), min_allowed.get(r, 0)) for r in RESOURCES}
        if final != current:
            for r, change in s.base.items():
                if r not in per_pod:
                    continue  # HVPA v2 logs and ignores other resource names
                # HVPA v2 adjustForBaseUsage: replace the current base share by the new one (3.4).
                pct = change.percentage
                value = change.value or 0
                base_cur = max(p.req[r] * pct // 100 if pct is not None else 0, value) * current
                if p.req[r] * current <= base_cur:
                    continue  # first scaling with a tiny request: nothing to redistribute
                base_new = max(per_pod[r] * pct // 100 if pct is not None else 0, value) * final
                per_pod[r] = max(0, _tdiv(per_pod[r] * final - base_cur + base_new, final))
        paradox = False
        overall_up = all(p.new_total[r] >= p.cur_total[r] for r in RESOURCES)
        if overall_up and final > current:
            if all(p.req[r] > per_pod[r] for r in RESOURCES):
                # HVPA v2: more replicas that would each be smaller on an overall scale-up: keep the pods.
                paradox = True
            else:
                per_pod = {r: max(p.req[r], per_pod[r]) for r in RESOURCES}
        # HVPA v2: memory rounded up to whole kB (resource.Kilo scaled value).
        per_pod["memory"] = round_kb(per_pod["memory"])
        for r in RESOURCES:
            # tandem invariant: requests stay within minAllowed/maxAllowed.
            lo, hi = min_allowed.get(r, 0), max_allowed.get(r)
            v = max(per_pod[r], lo)
            if hi is not None and v > hi:
                v = hi if r != "memory" else max(lo, hi // 1_000_000 * 1_000_000)
            per_pod[r] = v
        return per_pod, paradox

    def _per_pod(self, p: _Container, out: Outcome, current: int, final: int) -> None:
        per_pod, paradox = self._targets(p, current, final)
        if paradox:
            out.reasons.append(
                f"hvpa-v2: {p.name}: scale out to {final} would shrink every pod: paradoxical, resources kept"
            )
            return
        p.requests = per_pod
        if per_pod == p.req:
            return
        for r in RESOURCES:
            if per_pod[r] != p.req[r]:
                out.requests.setdefault(p.name, {})[r] = per_pod[r]
            if p.lim[r] > 0:
                # HVPA v2 quirk: requests are overwritten before limits are computed, so the "old"
                # request is the new one: proportional limits stay, gap limits follow the new request (3.3).
                new_lim = scaled_limit(r, per_pod[r], p.lim[r], per_pod[r], self.spec.limits_gap.get(r))
                if new_lim is not None and new_lim != p.lim[r]:
                    out.limits.setdefault(p.name, {})[r] = new_lim
        shown = ", ".join(f"{r} {format_quantity(r, per_pod[r])}" for r in RESOURCES)
        out.reasons.append(f"hvpa-v2: {p.name}: per pod {shown} at {final} replicas")

    def _reapply(self, view: View, out: Outcome, memory: Mapping[str, Any]) -> None:
        """Drift repair: with no new recommendation, put the last scaling back if the workload lost it."""
        last = memory.get("last_scaling") or {}
        current = view.spec.replicas
        replicas = last.get("replicas")
        if isinstance(replicas, int) and replicas != current:
            out.replicas = min(max(replicas, self.spec.min_replicas), self.spec.max_replicas)
        for section in ("requests", "limits"):
            target: dict[str, dict[str, int]] = getattr(out, section)
            for cname, values in (last.get(section) or {}).items():
                if cname not in view.spec.containers:
                    continue
                have = getattr(view.spec.containers[cname], section)
                for r, v in values.items():
                    if r not in have or have[r].milli != v:
                        target.setdefault(cname, {})[r] = v
        if out.replicas is not None or out.requests or out.limits:
            out.reasons.append("hvpa-v2: no new recommendation since the last scaling; re-applying it (drift repair)")


def _fingerprint(hpa_desired: int | None, vpa: VpaEvent) -> dict[str, Any]:
    """HVPA v2 ``lastProcessedRecommendations``: the HPA and VPA inputs of the last scaling, JSON-safe."""
    return {
        "hpa_desired_replicas": hpa_desired,
        "vpa_target": {
            c: {r: q.milli for r, q in sorted(rec.target.items())} for c, rec in sorted(vpa.containers.items())
        },
    }


KIND = register(
    PolicyKind(
        "Hvpa",
        "autoscaling.gardener.cloud",
        ("v1alpha1",),
        "hvpas",
        parse_hvpa_v2,
        fields=HVPA_V2_SPEC,
        target_paths=("targetRef",),
        hpa_places=("spec.hpa.template.spec",),
        status=V2,
    )
)
