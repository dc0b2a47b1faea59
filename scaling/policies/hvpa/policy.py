"""The weight-based HVPA policy: one tick of the HPA and VPA axes combined by the stage's weight
(released rules) or by the seed proposal's modes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ...events import VpaRecommendation, WorkloadRef
from ...outcome import Outcome, View
from ...quantity import bytes_of, format_quantity
from ...recommend.vpa import ContainerPolicy as VpaContainerPolicy
from ..bounds import Bounds, ContainerBounds
from ..templates import HpaTemplate, VpaTemplate
from .modes import Axis, apply_mode
from .rules import (
    min_change_threshold,
    round_kb,
    scale_off,
    scaled_limit,
    scaling_limited,
    vpa_usable,
    vpa_weight,
    weight_texts,
    weighted_delta,
    within_duration,
)
from .spec import RESOURCES, Change, ContainerPolicy, HvpaSpec, ScaleType, parse_hvpa

__all__ = ["HvpaPolicy", "hvpa_bounds", "parse_hvpa_policy"]


#: :meth:`HvpaPolicy.decide` stops trying its memo after this many misses in a row (the example's
#: and the fleet's longest run is 5), for 8 ticks, then 16, 32, up to :data:`_SKIP_MAX`, until a hit.
_MISSES = 8
_SKIP_MAX = 64


class _Memo:
    """:meth:`HvpaPolicy.decide`'s last outcome that changed nothing, with what it was decided
    from: the tick's view and the answers of :meth:`HvpaPolicy._answers` (time, ``lastScaleTime``)."""

    __slots__ = ("answers", "outcome", "view")

    def __init__(self, view: View, answers: tuple[Any, ...], outcome: Outcome) -> None:
        self.view = view
        self.answers = answers
        self.outcome = outcome


def _same_targets(a: Mapping[str, VpaRecommendation], b: Mapping[str, VpaRecommendation]) -> bool:
    """Two VPA recommendations' per-container targets are equal (the bounds, which HVPA does not
    read, may differ).  Quantities by identity, then by their two values: a ``Qty`` of the same
    text is usually the same object (``Qty.of`` remembers them), and a dataclass ``__eq__`` is a
    Python call (about 0.3 µs) where the values compare in place."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    for cname, rec in a.items():
        other = b.get(cname)
        if other is None:
            return False
        if rec is other:
            continue
        target, was = rec.target, other.target
        if target is was:
            continue
        if len(target) != len(was):
            return False
        for res, q in target.items():
            p = was.get(res)
            if p is None or (q is not p and (q.milli != p.milli or q.text != p.text)):
                return False
    return True


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
        #: scaling with (HPA up/down, VPA up/down), for :meth:`_answers`.
        self._stabilizations = (
            spec.hpa_up.stabilization,
            spec.hpa_down.stabilization,
            spec.vpa_up.stabilization,
            spec.vpa_down.stabilization,
        )
        #: The last tick's view and ``lastScaleTime`` and the outcome decided from them, while that
        #: outcome changed nothing (see :meth:`decide`).
        self._last: _Memo | None = None
        #: :meth:`hpa_template`, once asked.
        self._hpa_template: tuple[HpaTemplate | None] | None = None
        #: The last VPA conditions seen and whether they make its recommendation usable (HVPA 2.5).
        self._usable: tuple[Any, bool] | None = None
        #: :meth:`_weight` per (current, desired replicas): a policy sees a few pairs.
        self._weights: dict[tuple[int, int], tuple[int, int, str, str]] = {}
        #: Ticks tried in a row whose view differed from the memo's, and ticks left to decide
        #: without trying (see :meth:`decide`).
        self._misses = 0
        self._skip = 0

    def bounds(self) -> Bounds:
        """minReplicas..maxReplicas and each container policy's minAllowed/maxAllowed."""
        return hvpa_bounds(self.kind, self.name, self.spec.min_replicas, self.spec.max_replicas, self.spec.containers)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA HVPA would deploy: tandem computes its recommendation when no cluster sends one.

        A function of the (frozen) spec alone, so built once per policy: the own HPA asks on
        every tick of a workload without a cluster's HPA."""
        cached = self._hpa_template
        if cached is None:
            s = self.spec
            template = (
                HpaTemplate(s.hpa_metrics, s.hpa_behavior, s.min_replicas, s.max_replicas)
                if s.hpa_deploy and s.hpa_metrics
                else None
            )
            cached = self._hpa_template = (template,)
        return cached[0]

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

    def _weight(self, current: int, desired: int) -> tuple[int, int, str, str]:
        """The VPA weight (HVPA 2.3) as ``p``, ``q`` of the fraction ``p/q`` and its vpaWeight and
        hpaWeight texts, remembered: the weight is a function of the two replica counts (the
        intervals are the spec's), and ``Fraction`` arithmetic and formatting cost more than the
        rest of a tick's weight handling."""
        s = self.spec
        weight = vpa_weight(s.intervals, current, desired, s.min_replicas, s.max_replicas)
        texts = weight_texts(weight.numerator, weight.denominator, s.form)
        if len(self._weights) >= 4096:
            self._weights.clear()  # bounded: replica counts are few, but not by contract
        found = self._weights[(current, desired)] = (weight.numerator, weight.denominator, *texts)
        return found

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        """One tick; the previous tick's outcome again when what :meth:`_decide` reads is the same.

        Most ticks of a workload repeat the one before (the HPA's desired replicas, the VPA's
        targets and the spec move slowly; 14,624 of the example's 17,443 ticks were "blocked, same
        as before"), and :meth:`_decide` is a function of what is compared below alone: the event
        time enters it only through the maintenance window and the stabilization checks, whose
        answers (:meth:`_answers`) are compared instead.  Only an outcome that changes nothing is
        kept, so a repeated tick writes nothing to ``memory`` either (``lastScaleTime`` is written
        with a change alone).  A cache, not state: a policy parsed again (a restored worker)
        decides afresh, the same.

        A miss costs little (the comparison stops at the first difference, most often a new VPA
        recommendation) but is not free; after :data:`_MISSES` in a row the memo is not tried
        for a while (bench_tick's recorded case: targets that move on every tick).
        """
        if self._skip:
            self._skip -= 1
            return self._decide(view, memory)
        last_scale: float | None = memory.get("last_scale_time")
        memo = self._last
        if memo is not None:
            if self._repeats(view, memo, last_scale):
                memo.view = view  # the newest, so that the next tick's events match it by identity
                if self._misses:
                    self._misses = 0
                return memo.outcome
            self._misses = misses = self._misses + 1
            if misses >= _MISSES:
                # A workload whose every tick differs from the one before (recorded VPA targets
                # that move every tick): trying costs more than it saves.  Decide afresh for a
                # while, longer the longer it lasts, then try again.
                self._skip = min(1 << (misses - _MISSES + 3), _SKIP_MAX) - 1
                self._last = None
                return self._decide(view, memory)
        out = self._decide(view, memory)
        # The view is kept as it is: the next tick compares with it, stopping at the first difference.
        self._last = _Memo(view, self._answers(view, last_scale), out) if out.proposes_nothing else None
        return out

    def _repeats(self, view: View, memo: _Memo, last_scale: float | None) -> bool:
        """Whether :meth:`_decide` would read the same as at the memo's tick (see :meth:`decide`).

        Kept in step with :meth:`_decide`: a value it starts to read must be compared here.  What
        moves most often first, the time answers last (only for a tick whose events all repeat);
        events by identity before their values (between two events a view holds the same objects).
        """
        s = self.spec
        before = memo.view
        vpa, was = view.vpa, before.vpa
        hpa, had = view.hpa, before.hpa
        return (
            # The VPA's targets (not its bounds, which HVPA does not read) and conditions.
            (
                vpa is was
                or not s.vpa_deploy
                or (
                    vpa is not None
                    and was is not None
                    and _same_targets(vpa.containers, was.containers)
                    and vpa.conditions == was.conditions
                )
            )
            # The HPA's desired and max replicas and conditions.
            and (
                hpa is had
                or not s.hpa_deploy
                or (
                    hpa is not None
                    and had is not None
                    and hpa.desired_replicas == had.desired_replicas
                    and hpa.max_replicas == had.max_replicas
                    # Of the conditions, _decide reads whether the HPA is ScalingLimited: the
                    # others (AbleToScale's reason, ScalingActive's message) change on ticks
                    # that decide nothing new.
                    and (
                        hpa.conditions == had.conditions
                        or scaling_limited(hpa.conditions) == scaling_limited(had.conditions)
                    )
                )
            )
            # The spec as a whole (replicas, containers' requests and limits; its ``ts`` too,
            # so a new workload event is a new input even when its values repeat).
            and (view.spec is before.spec or view.spec == before.spec)
            # lastScaleTime is read only through these answers (a scaling is never memoized).
            and self._answers(view, last_scale) == memo.answers
        )

    def _answers(self, view: View, last_scale: float | None) -> tuple[Any, ...]:
        """What :meth:`_decide` asks of the tick's time and OOM kills: the maintenance window at
        the tick (HVPA utils/timewindow.go), per stabilization duration whether the last scaling
        is within it (HVPA 2.9), and whether an OOM kill is newer than the last scaling (HVPA 2.10).
        """
        window = self.spec.window
        now = view.tick
        oom = view.oom
        if last_scale is None:
            within: tuple[bool, ...] | None = None  # never scaled: no window holds anything back
            override = bool(oom)
        else:
            elapsed = now - last_scale  # within_duration's own arithmetic: now - last < duration
            hpa_up, hpa_down, vpa_up, vpa_down = self._stabilizations
            within = (elapsed < hpa_up, elapsed < hpa_down, elapsed < vpa_up, elapsed < vpa_down)
            override = False if not oom else any(ts > last_scale for ts in oom.values())
        return (None if window is None else window.contains(now), within, override)

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
        # HVPA 2.3: the stage's VPA weight, as integers p/q, and its texts, per (current, desired).
        weight = self._weights.get((current, desired))
        if weight is None:
            weight = self._weight(current, desired)
        w_num, w_den, vpa_text, hpa_text = weight
        vpa = view.vpa if s.vpa_deploy else None
        out.inputs = {"replicas": current}
        if hpa is not None:
            out.inputs["hpa_desired_replicas"] = hpa.desired_replicas
        if vpa is not None:
            out.inputs["vpa_target"] = {
                c: {r: q.text for r, q in rec.target.items()} for c, rec in sorted(vpa.containers.items())
            }

        hpa_up_off = scale_off(s.hpa_up, s.window, now)
        # HVPA 2.2: vertical scale-UP only once the HPA cannot scale out any more.
        limited = (
            not s.hpa_deploy or hpa_up_off or (hpa is not None and desired >= max_r and scaling_limited(hpa.conditions))
        )
        if s.form == "seed":
            # Seed: "once replica count reaches maxReplicas ... vertical scaling is done
            # unconditionally"; otherwise the weights alone share the change (no HPA gate).
            limited = True

        out.reasons.append(f"hvpa: vpaWeight {vpa_text} at {current} replicas (hpaWeight {hpa_text})")
        if override:
            out.reasons.append("hvpa: OOM kill since the last scaling overrides scale-up stabilization and minChange")

        horizontal = self._horizontal(view, out, current, desired, hpa is not None, w_num, w_den, last_scale, override)
        if s.form == "seed" and s.mode != "WeightBased":
            w_num = w_den = 1  # seed modes other than weight-based apply the recommendation they pick whole
        vertical = self._vertical(view, out, vpa, current, w_num, w_den, limited, last_scale, override)
        apply_mode(s, view, out, current, desired, horizontal, vertical, vpa)

        # HVPA 2.8: isScalingOff inspects HPA scale-up and VPA scale-up only (released quirk).
        if s.form == "released" and hpa_up_off and scale_off(s.vpa_up, s.window, now):
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
        w_num: int,
        w_den: int,
        last_scale: float | None,
        override: bool,
    ) -> Axis:
        s = self.spec
        axis = Axis()
        if not s.controls_replicas or not has_hpa or desired == 0 or desired == current:
            return axis
        # current + (desired - current) x (1 - weight), ceil up / floor down, in integers: with
        # weight = p/q the change is (desired - current)(q - p)/q, exactly.
        q = w_den
        hpa_share = q - w_num
        change = (desired - current) * hpa_share
        new = current + (-(-change // q) if desired > current else change // q)
        if s.form == "seed" and s.mode != "WeightBased":
            new = desired  # modes apply HPA's recommendation whole; apply_mode decides whether
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
        elif not override and within_duration(last_scale, st.stabilization, now):
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
        w_num: int,
        w_den: int,
        limited: bool,
        last_scale: float | None,
        override: bool,
    ) -> Axis:
        s = self.spec
        axis = Axis()
        if vpa is None:
            return axis
        conditions = vpa.conditions
        usable = self._usable
        if usable is None or (conditions is not usable[0] and conditions != usable[0]):
            usable = self._usable = (conditions, vpa_usable(conditions))  # remembered: they repeat
        if not usable[1]:
            out.reasons.append(
                "hvpa: VPA recommendation ignored (conditions: not provided, unsupported or low confidence)"
            )
            return axis
        if override:
            limited = True
            if w_num == 0:
                w_num, w_den = 1, 100  # HVPA PR #56-#62: weight 0 becomes 1 under the override
        seed_up_full = s.form == "seed" and current >= s.max_replicas
        for cname in sorted(vpa.containers):
            if cname in view.spec.containers:  # containers in the recommendation but not in the pod are ignored
                self._vertical_container(
                    view,
                    out,
                    axis,
                    cname,
                    vpa.containers[cname],
                    w_num,
                    w_den,
                    seed_up_full,
                    limited,
                    last_scale,
                    override,
                )
        return axis

    # HVPA 2.5 getWeightedRequests, the body of its loop: one container's recommendation
    def _vertical_container(
        self,
        view: View,
        out: Outcome,
        axis: Axis,
        cname: str,
        rec: VpaRecommendation,
        w_num: int,
        w_den: int,
        seed_up_full: bool,
        limited: bool,
        last_scale: float | None,
        override: bool,
    ) -> None:
        s = self.spec
        now = view.tick
        res_spec = view.spec.containers[cname]
        policies = self._container_policies
        if cname in policies:
            cpol = policies[cname]
        else:
            cpol = policies[cname] = s.container_policy(cname)
        if cpol is not None and cpol.mode == "Off":
            return
        requests_only = cpol is not None and cpol.controlled_values == "RequestsOnly"
        weight_based = s.mode == "WeightBased"
        targets = rec.target
        for res in RESOURCES:
            q = targets.get(res)
            if q is None:
                continue
            if cpol is not None and cpol.controlled_resources is not None and res not in cpol.controlled_resources:
                continue
            target = q.milli
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
            num, den = (1, 1) if seed_up_full and target > req else (w_num, w_den)  # w = 1
            delta = weighted_delta(res, target, req, num, den)
            tgt = f"{cname}/{res}"
            wanted = _formatted(res, q.milli)
            if num == 0 and weight_based:
                out.block(tgt, "Weight", wanted)
                continue
            if delta == 0:
                continue
            # The checks first: most ticks block here, and what they read is the weighted
            # delta alone; the new request and limit are computed only for a change that passes.
            up = delta > 0
            blocked = self._blocked_by(
                s.vpa_up if up else s.vpa_down, up, res, delta, req, limited, override, last_scale, now
            )
            if blocked is not None:
                out.block(tgt, blocked, wanted)
                continue
            gap = None if requests_only else s.limits_gap.get(res)
            new_req, new_lim = _weighted_request(res, req, lim, delta, requests_only, gap, cpol)
            if new_req != req:
                axis.requests.setdefault(cname, {})[res] = new_req
                if new_lim is not None and new_lim != lim:
                    axis.limits.setdefault(cname, {})[res] = new_lim

    # HVPA 2.5 getWeightedRequests: why a container's weighted change is held back, in upstream's
    # order (Weight, checked by the caller, > UpdatePolicy > StabilizationWindow > MaintenanceWindow
    # > MinChange)
    def _blocked_by(
        self,
        st: ScaleType,
        up: bool,
        res: str,
        delta: int,
        req: int,
        limited: bool,
        override: bool,
        last_scale: float | None,
        now: float,
    ) -> str | None:
        if st.mode == "Off" or (up and not limited):
            return "UpdatePolicy"
        # the override skips the stabilization of a scale-up only
        if (not up or not override) and within_duration(last_scale, st.stabilization, now):
            return "StabilizationWindow"
        window = self.spec.window
        if st.mode == "MaintenanceWindow" and (window is None or not window.contains(now)):
            return "MaintenanceWindow"
        # the weighted delta, before kB rounding and capping (2.5); the override skips a scale-up's
        if (not up or not override) and abs(delta) < min_change_threshold(st.min_change.get(res), req, res):
            return "MinChange"
        return None


#: ``format_quantity``, remembered: the values a workload's VPA recommends repeat (a few thousand at most).
_formatted = lru_cache(maxsize=4096)(format_quantity)


def _weighted_request(
    res: str, req: int, lim: int, delta: int, requests_only: bool, gap: Change | None, cpol: ContainerPolicy | None
) -> tuple[int, int | None]:
    """HVPA 2.5 getWeightedRequests' new request (memory rounded up to kB) and getScaledLimits'
    new limit (none for RequestsOnly), the request capped as capRequestsToLimits does, then kept
    within the container policy's minAllowed/maxAllowed (tandem invariant 3)."""
    new_req = req + delta
    if res == "memory":
        new_req = round_kb(new_req)
    new_lim = None if requests_only else scaled_limit(res, req, lim, new_req, gap)
    # HVPA: requests capped at the new limits, else at the existing ones (PR #98).
    cap = new_lim if new_lim is not None else (lim if lim > 0 else None)
    if cap is not None and new_req > cap:
        new_req = cap
    if cpol is not None:
        new_req = min(max(new_req, cpol.min_allowed.get(res, 0)), cpol.max_allowed.get(res, new_req))
    return new_req, new_lim


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
