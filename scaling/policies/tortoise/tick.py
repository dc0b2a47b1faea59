"""The working state of one Tortoise reconcile: the HPA fields Tortoise owns and the tick's values,
shared by the phase machine, the recommender and the HPA/VPA services."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...events import HpaEvent
from ...outcome import Outcome, View
from .history import ReplicaHistory
from .settings import TortoiseSettings
from .spec import Pair, pair_key, split_key

__all__ = ["HpaState", "Tick"]


@dataclass(slots=True)
class HpaState:
    """The HPA fields Tortoise owns: min/max replicas and ContainerResource utilization targets.

    ``targets`` is ``None`` when the HPA's metrics are unknown (an ``hpa`` event without
    ``metrics``); then no metric is added or retargeted.
    """

    min_replicas: int | None
    max_replicas: int | None
    targets: dict[Pair, int] | None

    @classmethod
    def of_event(cls, ev: HpaEvent) -> HpaState:
        targets: dict[Pair, int] | None = None
        if ev.metrics is not None:
            targets = {}
            for m in ev.metrics:
                if m.get("type") != "ContainerResource":
                    continue
                cr = m.get("containerResource") or {}
                tgt = cr.get("target") or {}
                value = tgt.get("averageUtilization")
                if tgt.get("type", "Utilization") != "Utilization" or isinstance(value, bool):
                    continue
                if isinstance(value, int) and isinstance(cr.get("container"), str) and isinstance(cr.get("name"), str):
                    targets[(cr["container"], cr["name"])] = value
        # Kubernetes defaults spec.minReplicas to 1.
        return cls(ev.min_replicas if ev.min_replicas is not None else 1, ev.max_replicas, targets)

    def copy(self) -> HpaState:
        return HpaState(self.min_replicas, self.max_replicas, None if self.targets is None else dict(self.targets))

    def to_memory(self, tick: float) -> dict[str, Any]:
        return {
            "tick": tick,
            "min": self.min_replicas,
            "max": self.max_replicas,
            "targets": None if self.targets is None else {pair_key(p): v for p, v in sorted(self.targets.items())},
        }

    @classmethod
    def of_memory(cls, d: Mapping[str, Any]) -> HpaState:
        raw = d.get("targets")
        targets = None if raw is None else {split_key(k): int(v) for k, v in raw.items()}
        return cls(d.get("min"), d.get("max"), targets)


@dataclass(slots=True)
class Tick:
    """Working values of one reconcile."""

    view: View
    st: TortoiseSettings
    memory: dict[str, Any]
    out: Outcome
    now: float
    phase: str
    policies: dict[Pair, str]
    hist: ReplicaHistory
    hpa: HpaState | None  # the HPA as it is (or as tandem last decided it)
    hpa_math: HpaState | None  # the same, or the HPA Tortoise would create
    rphases: dict[str, list[Any]]
