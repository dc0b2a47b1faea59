"""The weight-based HVPA policy: one tick of the HPA and VPA axes combined by the stage's weight
(released rules) or by the seed proposal's modes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ...events import WorkloadRef
from ...outcome import Outcome, View
from ...quantity import bytes_of, format_quantity
from ...recommend.vpa import ContainerPolicy as VpaContainerPolicy
from ..bounds import Bounds, ContainerBounds
from ..templates import HpaTemplate, VpaTemplate
from .rules import (
    _ONE,
    _off,
    _round_kb,
    _within,
    min_change_threshold,
    scaled_limit,
    vpa_usable,
    vpa_weight,
)
from .spec import RESOURCES, ContainerPolicy, HvpaSpec, parse_hvpa

__all__ = ["HvpaPolicy", "hvpa_bounds", "parse_hvpa_policy"]


@dataclass(slots=True)
class _Axis:
    """One axis's wish in a tick, before the seed modes pick between HPA and VPA."""

    replicas: int | None = None
    wanted_replicas: int | None = None
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)


class HvpaPolicy:
    """Gardener HVPA, weight-based (released v0.17.0 rules, or the seed proposal's modes)."""

    kind = "Hvpa"

    def __init__(self, spec: HvpaSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload
        #: ``spec.container_policy`` per container name, as asked (the spec is frozen).
        self._container_policies: dict[str, ContainerPolicy | None] = {}
        #: The four stabilization durations :meth:`_decide` may compare the time since the last
        #: scaling with (HPA up/down, VPA up/down), for :meth:`_inputs`.
        self._stabilizations = (
            spec.hpa_up.stabilization,
            spec.hpa_down.stabilization,
            spec.vpa_up.stabilization,
            spec.vpa_down.stabilization,
        )
        #: The last tick's inputs (:meth:`_inputs`) and the outcome decided from them, while that
        #: outcome changed nothing (see :meth:`decide`).
        self._last: tuple[tuple[Any, ...], Outcome] | None = None

    def bounds(self) -> Bounds:
        """minReplicas..maxReplicas and each container policy's minAllowed/maxAllowed."""
        return hvpa_bounds(self.kind, self.name, self.spec.min_replicas, self.spec.max_replicas, self.spec.containers)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA HVPA would deploy: tandem computes its recommendation when no cluster sends one."""
        s = self.spec
        if not s.hpa_deploy or not s.hpa_metrics:
            return None
        return HpaTemplate(s.hpa_metrics, s.hpa_behavior, s.min_replicas, s.max_replicas)

    def vpa_template(self) -> VpaTemplate | None:
        """The VPA HVPA would deploy (always ``updateMode: Off``): its container policies."""
        s = self.spec
        if not s.vpa_deploy:
            return None
        policies = {
            p.name: VpaContainerPolicy(
                {r: v if r == "cpu" else bytes_of(v) for r, v in p.min_allowed.items() if r in RESOURCES},
                {r: v if r == "cpu" else bytes_of(v) for r, v in p.max_allowed.items() if r in RESOURCES},
                "Off" if p.mode == "Off" else "Auto",
                tuple(r for r in (p.controlled_resources or RESOURCES) if r in RESOURCES),
                "RequestsOnly" if p.controlled_values == "RequestsOnly" else "RequestsAndLimits",
            )
            for p in s.containers
        }
        return VpaTemplate(policies)

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        """One tick; the previous tick's outcome again when what :meth:`_decide` reads is the same.

        Most ticks of a workload repeat the one before (the HPA's desired replicas, the VPA's
        targets and the spec move slowly; 14,624 of the example's 17,443 ticks were "blocked, same
        as before"), and :meth:`_decide` is a function of :meth:`_inputs` alone: the event time
        enters it only through the maintenance window and the stabilization checks, whose answers
        are part of the inputs.  Only an outcome that changes nothing is kept, so a repeated tick
        writes nothing to ``memory`` either (``lastScaleTime`` is written with a change alone).
        A cache, not state: a policy parsed again (a restored worker) decides afresh, the same.
        """
        inputs = self._inputs(view, memory)
        last = self._last
        if last is not None and last[0] == inputs:
            return last[1]
        out = self._decide(view, memory)
        self._last = (inputs, out) if out.proposes_nothing else None
        return out

    def _inputs(self, view: View, memory: Mapping[str, Any]) -> tuple[Any, ...]:
        """Everything :meth:`_decide` reads besides the (frozen) spec, time as the answers it asks:
        the maintenance window at the tick (HVPA utils/timewindow.go) and, per stabilization
        duration, whether the last scaling is within it (HVPA 2.9).

        Kept in step with :meth:`_decide`: a value it starts to read must be added here.
        ``view.spec`` is compared as a whole (replicas, containers' requests and limits; its
        ``ts`` too, so a new workload event is a new input even when its values repeat), the HPA
        by the fields read (desired and max replicas, conditions), the VPA by its recommendations
        and conditions, the OOM kills by whether one is newer than the last scaling (HVPA 2.10).
        """
        s = self.spec
        now = view.tick
        oom = view.oom
        last_scale: float | None = memory.get("last_scale_time")
        if last_scale is None:
            within: tuple[bool, ...] | None = None  # never scaled: no window holds anything back
            override = bool(oom)
        else:
            elapsed = now - last_scale  # _within's own arithmetic: now - last < duration
            hpa_up, hpa_down, vpa_up, vpa_down = self._stabilizations
            within = (elapsed < hpa_up, elapsed < hpa_down, elapsed < vpa_up, elapsed < vpa_down)
            override = bool(oom) and any(ts > last_scale for ts in oom.values())
        hpa = view.hpa if s.hpa_deploy else None
        vpa = view.vpa if s.vpa_deploy else None
        return (
            None if s.window is None else s.window.contains(now),
            within,
            override,
            last_scale,
            view.spec,
            None if hpa is None else (hpa.desired_replicas, hpa.max_replicas, hpa.conditions),
            None if vpa is None else (vpa.containers, vpa.conditions),
        )

    def _decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        s = self.spec
        now = view.tick
        out = Outcome(mode=s.mode if s.form == "seed" else "Auto")
        current = view.spec.replicas
        last_scale: float | None = memory.get("last_scale_time")
        # HVPA 2.10: an OOM kill after the last scaling overrides scale-up stabilization.
        oom = view.oom
        override = bool(oom) and any(last_scale is None or ts > last_scale for ts in oom.values())

        hpa = view.hpa if s.hpa_deploy else None
        desired = hpa.desired_replicas if hpa is not None else current
        max_r = hpa.max_replicas if hpa is not None and hpa.max_replicas is not None else s.max_replicas
        weight = vpa_weight(s.intervals, current, desired, s.min_replicas, s.max_replicas)
        vpa = view.vpa if s.vpa_deploy else None
        out.inputs = {"replicas": current}
        if hpa is not None:
            out.inputs["hpa_desired_replicas"] = hpa.desired_replicas
        if vpa is not None:
            out.inputs["vpa_target"] = {
                c: {r: q.text for r, q in rec.target.items()} for c, rec in sorted(vpa.containers.items())
            }

        # HVPA 2.2: vertical scale-UP only once the HPA cannot scale out any more.
        limited = (
            not s.hpa_deploy
            or _off(s.hpa_up, s.window, now)
            or (
                hpa is not None
                and bool(hpa.conditions)
                and desired >= max_r
                and any(c.get("type") == "ScalingLimited" and c.get("status", "True") == "True" for c in hpa.conditions)
            )
        )
        if s.form == "seed":
            # Seed: "once replica count reaches maxReplicas ... vertical scaling is done
            # unconditionally"; otherwise the weights alone share the change (no HPA gate).
            limited = True

        vpa_text, hpa_text = _weight_texts(weight.numerator, weight.denominator, s.form)
        out.reasons.append(f"hvpa: vpaWeight {vpa_text} at {current} replicas (hpaWeight {hpa_text})")
        if override:
            out.reasons.append("hvpa: OOM kill since the last scaling overrides scale-up stabilization and minChange")

        horizontal = self._horizontal(view, out, current, desired, hpa is not None, weight, last_scale, override)
        # Seed modes other than weight-based apply whichever recommendation they pick whole.
        v_weight = _ONE if s.form == "seed" and s.mode != "WeightBased" else weight
        vertical = self._vertical(view, out, vpa, current, v_weight, limited, last_scale, override)
        self._apply_mode(view, out, current, desired, horizontal, vertical, vpa)

        # HVPA 2.8: isScalingOff inspects HPA scale-up and VPA scale-up only (released quirk).
        if s.form == "released" and _off(s.hpa_up, s.window, now) and _off(s.vpa_up, s.window, now):
            out.replicas = None
            out.requests.clear()
            out.limits.clear()
            out.reasons.append("hvpa: scaling is off (HPA and VPA scale-up both Off or outside the maintenance window)")

        if out.replicas is not None:
            # tandem invariant: never leave the policy's replica bounds.
            out.replicas = min(max(out.replicas, s.min_replicas), s.max_replicas)
            if out.replicas == current:
                out.replicas = None
        if out.replicas is not None or out.requests:
            memory["last_scale_time"] = now
        return out

    # HVPA 2.4 getWeightedReplicas
    def _horizontal(
        self,
        view: View,
        out: Outcome,
        current: int,
        desired: int,
        has_hpa: bool,
        weight: Fraction,
        last_scale: float | None,
        override: bool,
    ) -> _Axis:
        s = self.spec
        axis = _Axis()
        if not s.controls_replicas or not has_hpa or desired == 0 or desired == current:
            return axis
        # current + (desired - current) x (1 - weight), ceil up / floor down, in integers: with
        # weight = p/q the change is (desired - current)(q - p)/q, exactly.
        q = weight.denominator
        hpa_share = q - weight.numerator
        change = (desired - current) * hpa_share
        new = current + (-(-change // q) if desired > current else change // q)
        if s.form == "seed" and s.mode != "WeightBased":
            new = desired  # modes apply HPA's recommendation whole; _apply_mode decides whether
        if new == current:
            return axis
        axis.wanted_replicas = new
        now = view.tick
        if hpa_share == 0 and s.mode == "WeightBased":
            out.block("replicas", "Weight", new)
            return axis
        st = s.hpa_up if new > current else s.hpa_down
        if st.mode == "Off":
            out.block("replicas", "UpdatePolicy", new)
        elif st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
            out.block("replicas", "MaintenanceWindow", new)
        elif not override and _within(last_scale, st.stabilization, now):
            # released quirk: the override skips the stabilization check in both directions
            out.block("replicas", "StabilizationWindow", new)
        else:
            axis.replicas = new
            out.reasons.append(f"hvpa: replicas {current} -> {new} from HPA desired {desired}")
        return axis

    # HVPA 2.5 getWeightedRequests
    def _vertical(
        self,
        view: View,
        out: Outcome,
        vpa: Any,
        current: int,
        weight: Fraction,
        limited: bool,
        last_scale: float | None,
        override: bool,
    ) -> _Axis:
        s = self.spec
        axis = _Axis()
        if vpa is None:
            return axis
        if not vpa_usable(vpa.conditions):
            out.reasons.append(
                "hvpa: VPA recommendation ignored (conditions: not provided, unsupported or low confidence)"
            )
            return axis
        now = view.tick
        if override:
            limited = True
            if weight.numerator == 0:
                weight = Fraction(1, 100)  # HVPA PR #56-#62: weight 0 becomes 1 under the override
        seed_up_full = s.form == "seed" and current >= s.max_replicas
        # The weight's integers, read once (``Fraction.numerator`` is a Python-level property).
        w_num, w_den = weight.numerator, weight.denominator
        weight_based = s.mode == "WeightBased"
        for cname in sorted(vpa.containers):
            if cname not in view.spec.containers:
                continue  # containers in the recommendation but not in the pod are ignored
            rec = vpa.containers[cname]
            res_spec = view.spec.containers[cname]
            policies = self._container_policies
            if cname in policies:
                cpol = policies[cname]
            else:
                cpol = policies[cname] = s.container_policy(cname)
            if cpol is not None and cpol.mode == "Off":
                continue
            requests_only = cpol is not None and cpol.controlled_values == "RequestsOnly"
            for res in RESOURCES:
                if res not in rec.target:
                    continue
                if cpol is not None and cpol.controlled_resources is not None and res not in cpol.controlled_resources:
                    continue
                target = rec.target[res].milli
                if cpol is not None:
                    # tandem invariant 3: never leave minAllowed/maxAllowed (upstream trusts VPA's capping).
                    if res in cpol.max_allowed:
                        target = min(target, cpol.max_allowed[res])
                    if res in cpol.min_allowed:
                        target = max(target, cpol.min_allowed[res])
                req_q = res_spec.requests.get(res)
                lim_q = res_spec.limits.get(res)
                req = req_q.milli if req_q else 0
                lim = lim_q.milli if lim_q else 0
                if target == req:
                    continue
                num, den = (1, 1) if seed_up_full and target > req else (w_num, w_den)  # w = _ONE
                delta = _weighted_delta(res, target, req, num, den)
                tgt = f"{cname}/{res}"
                wanted = format_quantity(res, rec.target[res].milli)
                if num == 0 and weight_based:
                    out.block(tgt, "Weight", wanted)
                    continue
                if delta == 0:
                    continue
                up = delta > 0
                st = s.vpa_up if up else s.vpa_down
                # The checks first: most ticks block here, and what they read is the weighted
                # delta alone; the new request and limit are computed only for a change that passes.
                if up:
                    if not limited or st.mode == "Off":
                        out.block(tgt, "UpdatePolicy", wanted)
                        continue
                    if not override and _within(last_scale, st.stabilization, now):
                        out.block(tgt, "StabilizationWindow", wanted)
                        continue
                    if st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
                        out.block(tgt, "MaintenanceWindow", wanted)
                        continue
                    # the weighted delta, before kB rounding and capping (2.5)
                    if not override and abs(delta) < min_change_threshold(st.min_change.get(res), req, res):
                        out.block(tgt, "MinChange", wanted)
                        continue
                else:
                    if st.mode == "Off":
                        out.block(tgt, "UpdatePolicy", wanted)
                        continue
                    if _within(last_scale, st.stabilization, now):  # the override does not bypass this
                        out.block(tgt, "StabilizationWindow", wanted)
                        continue
                    if st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
                        out.block(tgt, "MaintenanceWindow", wanted)
                        continue
                    if abs(delta) < min_change_threshold(st.min_change.get(res), req, res):
                        out.block(tgt, "MinChange", wanted)
                        continue
                new_req = req + delta
                if res == "memory":
                    new_req = _round_kb(new_req)
                new_lim = None
                if not requests_only:
                    gap = s.limits_gap.get(res)
                    new_lim = scaled_limit(res, req, lim, new_req, gap)
                # HVPA: requests capped at the new limits, else at the existing ones (PR #98).
                cap = new_lim if new_lim is not None else (lim if lim > 0 else None)
                if cap is not None and new_req > cap:
                    new_req = cap
                if cpol is not None:
                    new_req = min(max(new_req, cpol.min_allowed.get(res, 0)), cpol.max_allowed.get(res, new_req))
                if new_req != req:
                    axis.requests.setdefault(cname, {})[res] = new_req
                    if new_lim is not None and new_lim != lim:
                        axis.limits.setdefault(cname, {})[res] = new_lim
        return axis

    def _apply_mode(
        self, view: View, out: Outcome, current: int, desired: int, horizontal: _Axis, vertical: _Axis, vpa: Any
    ) -> None:
        """Seed modes choose between the two axes; weight-based keeps both (the released rule)."""
        s = self.spec
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
            v_ok = self._mixed_vertical_ok(view, vertical, vpa)
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

    def _mixed_vertical_ok(self, view: View, vertical: _Axis, vpa: Any) -> bool:
        assert self.spec.mixed is not None
        for cname, res_map in vertical.requests.items():
            for res, new in res_map.items():
                c = view.spec.containers[cname]
                req = c.requests.get(res)
                lim = c.limits.get(res)
                cur = req.milli if req else 0
                target = vpa.containers[cname].target[res].milli
                y = min_change_threshold(self.spec.mixed.resources.get(res), cur, res)
                # Seed: "difference greater than y, or the recommended value is more than the limit"
                if abs(new - cur) > y or (lim is not None and target > lim.milli):
                    return True
        return False


def _weighted_delta(res: str, target: int, req: int, num: int, den: int) -> int:
    """trunc((target - current) × w), w = num/den: Go integer division toward zero (reference
    hvpa.md 2.5), in integers as :func:`.rules._trunc_times` computes it.

    CPU works in millicores, memory in whole bytes (``Value()``), so memory is truncated at
    the byte before it comes back as milli-bytes.
    """
    if res == "memory":
        n = (bytes_of(target) - bytes_of(req)) * num
        return (n // den if n >= 0 else -(-n // den)) * 1000
    n = (target - req) * num
    return n // den if n >= 0 else -(-n // den)


@lru_cache(maxsize=256)
def _weight_texts(numerator: int, denominator: int, form: str) -> tuple[str, str]:
    """The vpaWeight and hpaWeight as the reasons write them (a policy has a few weights);
    remembered by the weight's integers (a ``Fraction`` hashes slowly)."""
    weight = Fraction(numerator, denominator)
    return _fmt_weight(weight, form), _fmt_weight(1 - weight, form)


def _fmt_weight(w: Fraction, form: str) -> str:
    if form == "released":
        return str(int(w * 100)) if (w * 100).denominator == 1 else str(float(w * 100))
    return str(float(w))


def hvpa_bounds(
    kind: str, name: str, min_replicas: int, max_replicas: int, containers: Sequence[ContainerPolicy]
) -> Bounds:
    """The bounds of an HVPA (either line): replicas and the VPA container policies' allowed range."""
    policies = {
        p.name: ContainerBounds(p.min_allowed, p.max_allowed, p.mode, f"containerPolicies[{p.name}]")
        for p in containers
    }
    return Bounds(kind, name, min_replicas, max_replicas, True, policies)


def parse_hvpa_policy(manifest: Mapping[str, Any], workload: WorkloadRef) -> HvpaPolicy:
    return HvpaPolicy(parse_hvpa(manifest, workload))
