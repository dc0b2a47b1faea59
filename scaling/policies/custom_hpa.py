"""Nanit's custom HPA (nanit/kubernetes-custom-hpa), as a tandem policy.

Reference ``hpa-vpa-customhpa.md`` section 3.  The Clojure controller divides the metric by the
target (the README's "metric × target" is wrong; its own tests divide), treats a factor of exactly
1.0 as a scale-down, clamps the factor by the max factors, refuses inside the min-factor dead band
and during the per-direction cooldown, and clamps ``current × factor`` to min/max *before* rounding
up.  It patches the Deployment even when the result equals the current count, which still starts
the cooldown: tandem keeps that (no decision is emitted, but the cooldown clock starts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from ..outcome import Outcome, View
from .base import get_path, int_field, mapping_field
from .bounds import Bounds
from .fields import CUSTOM_HPA_SPEC
from .registry import PolicyKind, register
from .status import Observation, StatusShape, as_int, newest, set_condition
from .templates import HpaTemplate, VpaTemplate

__all__ = ["CustomHpaPolicy", "CustomHpaSpec", "parse_custom_hpa"]

#: A Prometheus instant query looks back 5 minutes for the latest sample; older samples are stale.
LOOKBACK_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class CustomHpaSpec:
    name: str
    workload: WorkloadRef
    series: str
    target: float
    min_replicas: int
    max_replicas: int
    period: float = 15.0  # CONTROL_LOOP_PERIOD
    up_cooldown: float = 15.0
    down_cooldown: float = 15.0
    up_min: float = 0.1
    up_max: float = 1.0
    down_min: float = 0.1
    down_max: float = 1.0
    dry_run: bool = False


def _num(obj: Mapping[str, Any], path: str, default: float | None, *, positive: bool = False) -> float:
    value = get_path(obj, path)
    if value is None:
        if default is None:
            raise InvalidPolicy(path, "required number is missing")
        return default
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InvalidPolicy(path, f"{value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPolicy(path, f"expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidPolicy(path, f"{value} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def parse_custom_hpa(manifest: Mapping[str, Any], workload: WorkloadRef) -> CustomHpaSpec:
    spec = mapping_field(manifest, "spec", required=True)
    name = str(get_path(manifest, "metadata.name") or workload.name)
    series = get_path(spec, "metric.series") or get_path(spec, "prometheus.query")
    if not isinstance(series, str) or not series:
        raise InvalidPolicy("spec.metric.series", "required string is missing")
    min_r = int_field(spec, "minReplicas", None, minimum=0)
    max_r = int_field(spec, "maxReplicas", None, minimum=1)
    if min_r is None:
        raise InvalidPolicy("spec.minReplicas", "required integer is missing")
    if max_r is None:
        raise InvalidPolicy("spec.maxReplicas", "required integer is missing")
    if max_r < min_r:
        raise InvalidPolicy("spec.maxReplicas", f"{max_r} is below minReplicas {min_r}")
    b = mapping_field(spec, "behavior")
    dry = spec.get("dryRun", False)
    if not isinstance(dry, bool):
        raise InvalidPolicy("spec.dryRun", f"expected true or false, got {dry!r}")
    return CustomHpaSpec(
        name=name,
        workload=workload,
        series=series,
        target=_num(spec, "target.value", None, positive=True),
        min_replicas=min_r,
        max_replicas=max_r,
        period=_num(spec, "controlLoopPeriod", 15.0, positive=True),
        up_cooldown=_num(b, "scaleUpCooldown", 15.0),
        down_cooldown=_num(b, "scaleDownCooldown", 15.0),
        up_min=_num(b, "scaleUpMinFactor", 0.1),
        up_max=_num(b, "scaleUpMaxFactor", 1.0),
        down_min=_num(b, "scaleDownMinFactor", 0.1),
        down_max=_num(b, "scaleDownMaxFactor", 1.0),
        dry_run=dry,
    )


class CustomHpaPolicy:
    kind = "CustomHpa"

    def __init__(self, spec: CustomHpaSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload

    def bounds(self) -> Bounds:
        """Nanit's minReplicas..maxReplicas; it never touches container resources."""
        s = self.spec
        return Bounds(self.kind, self.name, s.min_replicas, s.max_replicas, vertical=False)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        return None  # Nanit's controller is its own HPA: it reads the metric, not an HPA's

    def vpa_template(self) -> VpaTemplate | None:
        return None

    def sample(self, view: View) -> float | None:
        """The metric at this tick: the workload-level sample, else the mean of per-pod ones.

        Nanit runs one Prometheus query that returns one number; tandem's collector may send the
        series per pod, in which case their mean stands in for the query.  Samples older than
        Prometheus' 5-minute lookback are stale and ignored.
        """
        fresh = {
            pod: s.value
            for (name, pod), (ts, s) in view.series.items()
            if name == self.spec.series and view.tick - ts < LOOKBACK_SECONDS
        }
        if None in fresh:
            return fresh[None]
        if not fresh:
            return None
        return sum(fresh[p] for p in sorted(fresh, key=str)) / len(fresh)

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        s = self.spec
        out = Outcome(dry_run=s.dry_run, mode="DryRun" if s.dry_run else "Auto")
        now = view.tick
        last_eval = memory.get("last_eval")
        # CONTROL_LOOP_PERIOD: the loop runs once per period, on tandem's event-time ticks.
        if last_eval is not None and now - last_eval < s.period:
            return out
        memory["last_eval"] = now
        sample = self.sample(view)
        current = view.spec.replicas
        out.inputs = {"replicas": current, "metric": {"series": s.series, "value": sample, "target": s.target}}
        if sample is None:
            out.reasons.append(f"custom-hpa: no fresh sample of {s.series}; nothing to do")
            return out
        factor = sample / s.target  # the code divides (reference 3.2 step 2)
        up = factor > 1.0  # exactly 1.0 counts as a scale-down (step 3)
        clamped = min(factor, 1 + s.up_max) if up else max(factor, 1 - s.down_max)
        direction = "up" if up else "down"
        out.reasons.append(
            f"custom-hpa: factor {sample:g}/{s.target:g} = {factor:.4g}, clamped {clamped:.4g} ({direction})"
        )
        desired = math.ceil(min(max(current * clamped, s.min_replicas), s.max_replicas))
        last = memory.get(f"last_scale_{direction}")
        cooldown = s.up_cooldown if up else s.down_cooldown
        if last is not None and now - last < cooldown:
            if desired != current:
                out.block("replicas", "Cooldown", desired)
            return out
        if (up and clamped <= 1 + s.up_min) or (not up and clamped >= 1 - s.down_min):
            if desired != current:
                out.block("replicas", "MinFactor", desired)
            return out
        # Step 6: always "patched", so the cooldown starts even when nothing changes.
        memory[f"last_scale_{direction}"] = now
        if desired != current:
            out.replicas = desired
            out.reasons.append(
                f"custom-hpa: replicas ceil(clamp({current} x {clamped:.4g}, "
                f"{s.min_replicas}, {s.max_replicas})) = {desired}"
            )
        return out


def _parse(manifest: Mapping[str, Any], workload: WorkloadRef) -> CustomHpaPolicy:
    return CustomHpaPolicy(parse_custom_hpa(manifest, workload))


def _fold_status(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation) -> None:
    """An HPA's status shape (``currentReplicas``, ``desiredReplicas``, ``lastScaleTime``,
    ``conditions`` with the HPA's condition types)."""
    when, latest = obs.time, newest(status)
    conditions = status.setdefault("conditions", [])
    if when >= latest:
        current = obs.replicas_after()
        if current is not None:
            status["currentReplicas"] = current
        change = obs.replicas_change()
        wanted = next((b.get("wanted") for b in obs.blocked() if b.get("target") == "replicas"), None)
        if change is not None:
            status["desiredReplicas"] = change[1]
        elif as_int(wanted) is not None:
            status["desiredReplicas"] = as_int(wanted)
        elif current is not None:
            status["desiredReplicas"] = current
        metric = obs.inputs.get("metric")
        if isinstance(metric, Mapping) and metric.get("series"):
            set_condition(
                conditions,
                "ScalingActive",
                "True",
                "ValidMetricFound",
                f"the replica count is computed from the series {metric['series']}",
                when,
            )
        held = [b for b in obs.blocked() if b.get("target") == "replicas"]
        if held:
            reason = str(held[0].get("reason") or "HeldBack")
            set_condition(conditions, "AbleToScale", "True", reason, f"held back: {obs.held_back(held)}", when)
    error = obs.failed
    if error is not None:
        set_condition(conditions, "AbleToScale", "False", "FailedUpdateScale", error, when)
    elif obs.applied and obs.replicas_change() is not None and when >= str(status.get("lastScaleTime") or ""):
        status["lastScaleTime"] = when
        to = obs.replicas_change()[1]  # type: ignore[index]
        set_condition(conditions, "AbleToScale", "True", "SucceededRescale", f"the applier set replicas to {to}", when)
    if not conditions:
        status.pop("conditions")


KIND = register(
    PolicyKind(
        "CustomHpa",
        "autoscaling.tandem.dev",
        ("v1alpha1",),
        "customhpas",
        _parse,
        fields=CUSTOM_HPA_SPEC,
        target_paths=("targetRef", "scaleTargetRef"),
        deployment_target="target",
        # tandem's CRD: the shape of an HPA's status
        status=StatusShape(_fold_status),
    )
)
