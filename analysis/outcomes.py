"""The records ``tandem simulate`` reads and writes: a workload's recorded demand and one run's outcomes.

Their own module so that both arms (:mod:`analysis.simulate`, tandem's policies through the core,
and :mod:`analysis.upstream`, the upstream HPA and VPA) build them without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from scaling.events import WorkloadRef

__all__ = ["GIB", "Demand", "Outcome"]

GIB = 2**30


@dataclass
class Demand:
    """One workload's recorded demand: its first spec and per-sample container totals.

    Memory at rest (``tandem simulate --memory-at-rest``): every pod holds ``memory_at_rest``
    bytes per container whatever its share of the load, and shares the rest of the demand with
    the other ready pods.  A simulated pod uses ``memory_at_rest + points memory / n`` of n ready
    pods, so ``points`` holds the memory *above* the recorded pods' rest: the total minus k ×
    ``memory_at_rest`` for the k recorded pods that reported the container's memory at that
    sample, floored at 0.  It is subtracted once, while the stream is read
    (:func:`analysis.simulate.derive_demand`), the only time k is known: no count per point is
    kept (a dict per sample per workload), and the runs, which read each point once per simulated
    sample, add one number to what they divide.  With 0 (the default) ``points`` are the
    recorded totals and the runs compute the very floats they always did (``0.0 + x`` is ``x``).
    """

    workload: WorkloadRef
    replicas: int
    requests: dict[str, dict[str, int]]  # container -> resource -> milli-units
    limits: dict[str, dict[str, int]]
    #: (ts, {container: (cpu cores, memory bytes)}) summed over the recorded pods; memory less
    #: the recorded pods' ``memory_at_rest`` (floored at 0)
    points: list[tuple[float, dict[str, tuple[float, float]]]] = field(default_factory=list)
    #: recorded named-series samples, replayed unchanged: (ts, raw sample dicts)
    series: list[tuple[float, list[dict[str, Any]]]] = field(default_factory=list)
    #: bytes of memory each pod holds per container at rest, added to its share of the demand
    memory_at_rest: float = 0.0


@dataclass
class Outcome:
    policy: str
    workload: str
    cpu_core_hours: float = 0.0
    memory_gib_hours: float = 0.0
    hours_over_requests: float = 0.0
    hours_over_limits: float = 0.0
    saturated_samples: int = 0
    rolling_updates: int = 0
    replica_changes: int = 0
    decisions: int = 0
    samples: int = 0
    #: CPU demand the ready pods could not serve: above their CPU limits, or above their CPU
    #: requests where a container has no limit (docs/evaluation.md)
    cpu_shortfall_core_hours: float = 0.0
    #: (pod, sample) pairs with a container's memory above its limit
    oom_kills: int = 0
    #: pods evicted by a VPA updater (tandem never evicts)
    evictions: int = 0
    #: pods re-created: evicted, or replaced by a rollout of new requests or limits
    pod_restarts: int = 0
    #: new pod specs (requests or limits) that pods were started with: a tandem rollout, a VPA target admitted
    resizes: int = 0
    #: (tick, replicas, {container: {resource: request milli}}) after each applied decision
    timeline: list[tuple[float, int, dict[str, dict[str, int]]]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("timeline")
        return d
