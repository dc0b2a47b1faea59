"""A VPA's per-container resource policy (``spec.resourcePolicy.containerPolicies``).

Upstream: the ``ContainerResourcePolicy`` type of ``vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1``
and ``pkg/utils/vpa/api.go`` ``GetContainerResourcePolicy`` (an exact container name, else ``"*"``).
Parsed strictly: a bad field is an :class:`~scaling.errors.InvalidPolicy` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import InvalidPolicy
from ...quantity import bytes_of, parse_quantity
from .arithmetic import RESOURCES

__all__ = ["ContainerPolicy", "policies_from_resource_policy"]


ScalingMode = Literal["Auto", "Off"]
ControlledValues = Literal["RequestsAndLimits", "RequestsOnly"]


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    """A VPA ``containerPolicies`` entry (``"*"`` is the default for unnamed containers).

    ``min_allowed``/``max_allowed``: ``{"cpu": millicores, "memory": bytes}``; a 0 bound means no
    bound (upstream ``IsZero``).  ``controlled_values`` only matters at actuation
    (:func:`cap_to_container_limits`); the recommender itself ignores it, as upstream does.
    """

    min_allowed: Mapping[str, int] = field(default_factory=dict)
    max_allowed: Mapping[str, int] = field(default_factory=dict)
    mode: ScalingMode = "Auto"
    controlled_resources: tuple[str, ...] = RESOURCES
    controlled_values: ControlledValues = "RequestsAndLimits"

    def __post_init__(self) -> None:
        if self.mode not in ("Auto", "Off"):
            raise ValueError(f"mode: expected Auto or Off, got {self.mode!r}")
        if self.controlled_values not in ("RequestsAndLimits", "RequestsOnly"):
            raise ValueError(
                f"controlled_values: expected RequestsAndLimits or RequestsOnly, got {self.controlled_values!r}"
            )
        for r in self.controlled_resources:
            if r not in RESOURCES:
                raise ValueError(f"controlled_resources: {r!r} is not cpu or memory")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> ContainerPolicy:
        """From a VPA ``containerPolicies`` item (``minAllowed``, ``maxAllowed`` as quantities,
        ``mode``, ``controlledResources``, ``controlledValues``); ``containerName`` is ignored."""
        allowed = {"containerName", "mode", "minAllowed", "maxAllowed", "controlledResources", "controlledValues"}
        for key in m:
            if key not in allowed:
                raise InvalidPolicy(str(key), "unknown container policy field")

        def amounts(name: str) -> dict[str, int]:
            raw = m.get(name) or {}
            if not isinstance(raw, Mapping):
                raise InvalidPolicy(name, "expected a mapping of resource quantities")
            out: dict[str, int] = {}
            for res, q in raw.items():
                if res not in RESOURCES:
                    continue  # upstream ignores resources it does not recommend
                try:
                    milli = parse_quantity(q)
                except ValueError as exc:
                    raise InvalidPolicy(f"{name}.{res}", str(exc)) from None
                out[res] = milli if res == "cpu" else bytes_of(milli)
            return out

        resources = m.get("controlledResources")
        try:
            return cls(
                min_allowed=amounts("minAllowed"),
                max_allowed=amounts("maxAllowed"),
                mode=m.get("mode") or "Auto",
                controlled_resources=RESOURCES if resources is None else tuple(resources),
                controlled_values=m.get("controlledValues") or "RequestsAndLimits",
            )
        except ValueError as exc:
            if isinstance(exc, InvalidPolicy):
                raise
            field_name, _, why = str(exc).partition(": ")
            raise InvalidPolicy(field_name, why) from None


def policies_from_resource_policy(resource_policy: Mapping[str, Any] | None) -> dict[str, ContainerPolicy]:
    """``{containerName: ContainerPolicy}`` from a VPA ``spec.resourcePolicy`` mapping."""
    out: dict[str, ContainerPolicy] = {}
    items = (resource_policy or {}).get("containerPolicies") or []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("containerName"), str):
            raise InvalidPolicy(f"containerPolicies[{i}].containerName", "expected a container name")
        try:
            out[item["containerName"]] = ContainerPolicy.from_mapping(item)
        except InvalidPolicy as exc:
            raise exc.within(f"containerPolicies[{i}]") from None
    return out


def policy_for(name: str, policies: Mapping[str, ContainerPolicy] | None) -> ContainerPolicy | None:
    # VPA: utils/vpa/api.go GetContainerResourcePolicy - exact name, else the "*" policy.
    if not policies:
        return None
    return policies.get(name) or policies.get("*")
