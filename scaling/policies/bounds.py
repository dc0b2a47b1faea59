"""What a decision must stay within, as its policy declares it (:meth:`Policy.bounds`).

The applier re-checks every decision against the policy it finds in its own cluster, the report
draws the replica bounds and the simulator caps its replicas: they all ask the policy for these
values instead of reading a kind's internals, so a new kind needs no edit outside its module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Bounds", "ContainerBounds"]


@dataclass(frozen=True, slots=True)
class ContainerBounds:
    """One container's allowed requests (milli-units per resource) and where the policy says so."""

    minimum: Mapping[str, int] = field(default_factory=dict)  # milli-units
    maximum: Mapping[str, int] = field(default_factory=dict)
    mode: str | None = None
    #: The policy's field quoted in a refusal, e.g. ``containerPolicies[app]``.
    where: str = "containerPolicies"


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a decision must stay within, from the policy in the applier's own cluster."""

    kind: str
    name: str
    min_replicas: int | None
    max_replicas: int | None
    vertical: bool = True  # may the policy change container resources at all?
    containers: Mapping[str, ContainerBounds] = field(default_factory=dict)
    #: The policy's names for the container bounds, quoted in a refusal.
    min_name: str = "minAllowed"
    max_name: str = "maxAllowed"
    #: The HPA the policy's ``hpa`` changes go to, when the policy names one (Tortoise's
    #: ``horizontalPodAutoscalerName``); ``None``: the HPA that targets the workload.
    hpa_name: str | None = None

    def container(self, name: str) -> ContainerBounds | None:
        return self.containers.get(name) or self.containers.get("*")
