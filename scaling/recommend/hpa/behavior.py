"""HPA ``spec.behavior``: scaling rules and policies, with the API server's defaults.

Upstream: the ``HorizontalPodAutoscalerBehavior`` types of ``k8s.io/api/autoscaling/v2`` and the
defaults of ``pkg/apis/autoscaling/v2/defaults.go`` (``GenerateHPAScaleUpRules`` /
``GenerateHPAScaleDownRules``, docs/recommenders.md 1.7).  Only the parsing lives here; the
arithmetic that applies the rules is :mod:`.normalize`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .arithmetic import MAX_INT32, quantity_float
from .metric_specs import as_mapping

__all__ = [
    "DEFAULT_SCALE_DOWN_RULES",
    "DEFAULT_SCALE_UP_RULES",
    "Behavior",
    "ScalingPolicy",
    "ScalingRules",
    "parse_behavior",
]


@dataclass(frozen=True)
class ScalingPolicy:
    """One ``HPAScalingPolicy``: ``type`` ``Pods`` or ``Percent``, ``value`` per ``period_seconds``."""

    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """``HPAScalingRules`` after API defaulting.

    ``stabilization_window_seconds`` stays ``None`` for a scale-down direction that did not set it:
    the *controller* fills it from ``--horizontal-pod-autoscaler-downscale-stabilization``.
    """

    stabilization_window_seconds: int | None
    select_policy: str
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None

    @property
    def longest_period(self) -> int:
        # HPA: horizontal.go getLongestPolicyPeriod
        return max((p.period_seconds for p in self.policies), default=0)


@dataclass(frozen=True)
class Behavior:
    """``spec.behavior`` with API defaults filled in (only ever built when behavior is present)."""

    scale_up: ScalingRules
    scale_down: ScalingRules


# HPA: pkg/apis/autoscaling/v2/defaults.go GenerateHPAScaleUpRules / GenerateHPAScaleDownRules (reference 1.7).
DEFAULT_SCALE_UP_RULES = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN_RULES = ScalingRules(None, "Max", (ScalingPolicy("Percent", 100, 15),))


def parse_behavior(behavior: Mapping[str, Any] | None, *, path: str = "behavior") -> Behavior | None:
    """Validate ``spec.behavior`` and apply the API defaults; ``None`` stays ``None``.

    Defaults only exist when behavior is present: an HPA without behavior takes the legacy path
    (reference 1.8), which has no rate policies at all.  Validation follows the API server's limits
    (stabilization 0-3600 s, period 1-1800 s, value > 0, at least one policy, tolerance >= 0).
    """
    if behavior is None:
        return None
    b = as_mapping(behavior, path)
    up = _parse_rules(b.get("scaleUp"), f"{path}.scaleUp", DEFAULT_SCALE_UP_RULES)
    down = _parse_rules(b.get("scaleDown"), f"{path}.scaleDown", DEFAULT_SCALE_DOWN_RULES)
    return Behavior(up, down)


def _int_field(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{where}: must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _parse_rules(raw: Any, where: str, default: ScalingRules) -> ScalingRules:
    # HPA: defaults.go copyHPAScalingRules -- every field the user set replaces the default's.
    if raw is None:
        return default
    r = as_mapping(raw, where)
    window = default.stabilization_window_seconds
    if r.get("stabilizationWindowSeconds") is not None:
        window = _int_field(r["stabilizationWindowSeconds"], f"{where}.stabilizationWindowSeconds", 0, 3600)
    select = default.select_policy
    if r.get("selectPolicy") is not None:
        select = r["selectPolicy"]
        if select not in ("Max", "Min", "Disabled"):
            raise ValueError(f"{where}.selectPolicy: unknown {select!r} (expected Max, Min or Disabled)")
    policies = default.policies
    if r.get("policies") is not None:
        raw_policies = r["policies"]
        if isinstance(raw_policies, str | bytes) or not isinstance(raw_policies, Sequence):
            raise ValueError(f"{where}.policies: must be a list")
        if not raw_policies:
            raise ValueError(f"{where}.policies: must specify at least one Policy")
        parsed: list[ScalingPolicy] = []
        for i, p in enumerate(raw_policies):
            ploc = f"{where}.policies[{i}]"
            pm = as_mapping(p, ploc)
            ptype = pm.get("type")
            if ptype not in ("Pods", "Percent"):
                raise ValueError(f"{ploc}.type: unknown {ptype!r} (expected Pods or Percent)")
            value = _int_field(pm.get("value"), f"{ploc}.value", 1, MAX_INT32)
            period = _int_field(pm.get("periodSeconds"), f"{ploc}.periodSeconds", 1, 1800)
            parsed.append(ScalingPolicy(ptype, value, period))
        policies = tuple(parsed)
    tolerance = default.tolerance
    if r.get("tolerance") is not None:
        try:
            tolerance = quantity_float(r["tolerance"])
        except ValueError as exc:
            raise ValueError(f"{where}.tolerance: {exc}") from None
        if tolerance < 0:
            raise ValueError(f"{where}.tolerance: must be >= 0")
    return ScalingRules(window, select, policies, tolerance)
