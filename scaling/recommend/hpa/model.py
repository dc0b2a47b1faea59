"""What one HPA reconcile reads and writes: pods, metric samples, the kept state, the result.

Upstream keeps the per-HPA memory (``recommendations``, ``scaleUpEvents``, ``scaleDownEvents``) in
the ``HorizontalController`` struct of ``pkg/controller/podautoscaler/horizontal.go``; tandem keeps it
in an explicit, serialisable :class:`HpaState` so that a replay or a restarted worker carries it on.
The inputs stand for what the controller reads from the pod lister and the metrics clients
(``pkg/controller/podautoscaler/metrics``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["HpaResult", "HpaState", "MetricInputs", "PodInfo"]


@dataclass(frozen=True)
class PodInfo:
    """What ``groupPods`` reads from a pod (reference 1.3).

    ``ready`` is the status of the pod's Ready condition; ``ready_since`` its last transition time.
    When ``ready_since`` is unknown the pod's ``started`` time stands in for it (a pod cannot become
    ready before it starts; this is the only approximation, and it only matters for CPU metrics of
    pods younger than the CPU initialization period).  ``deleting`` is "deletionTimestamp is set".
    """

    name: str
    ready: bool
    phase: str
    started: float | None
    ready_since: float | None = None
    deleting: bool = False

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(
        self,
        name: str,
        ready: bool,
        phase: str,
        started: float | None,
        ready_since: float | None = None,
        deleting: bool = False,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "ready", ready)
        object.__setattr__(self, "phase", phase)
        object.__setattr__(self, "started", started)
        object.__setattr__(self, "ready_since", ready_since)
        object.__setattr__(self, "deleting", deleting)

    def __reduce__(self) -> tuple[type[PodInfo], tuple[str, bool, str, float | None, float | None, bool]]:
        # A compiled frozen dataclass refuses pickle's attribute-by-attribute restore (WorkloadRef).
        return (PodInfo, (self.name, self.ready, self.phase, self.started, self.ready_since, self.deleting))


@dataclass(frozen=True)
class MetricInputs:
    """The metric samples of one tick.

    * ``pod_usage``: pod -> container -> resource -> latest usage (``"cpu"`` millicores, other
      resources base units such as bytes).  A pod absent here has no metric ("missing").
    * Requests: **one choice, the workload's pod template**: ``container_requests`` is container ->
      resource -> request (same units as usage), shared by every pod, as for a Deployment; list
      restartable init containers (sidecars) as containers too.  ``pod_requests`` optionally
      overrides it for individual pods (pod -> container -> resource), e.g. during a rollout or an
      in-place resize.  Pod-level requests (PodLevelResources) are not modelled.
    * ``series``: named custom/external series -> pod name (``None`` for a per-workload or
      per-object value) -> value in base units.  ``Pods`` metrics read the pod-keyed values of the
      series named by ``metric.name``; ``Object`` metrics read the ``None`` entry (or the entry keyed
      by ``describedObject.name``); ``External`` metrics sum every entry.  Label selectors in the
      specs are not evaluated: the stream assembles each named series already selected.
    * ``sample_ts``: when each pod's resource sample was taken (default: ``now``), and
      ``sample_window``: the window of those samples (metrics-server's ``window``, default 15 s);
      both feed the CPU readiness rule (reference 1.3 step 4).
    """

    pod_usage: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    container_requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    pod_requests: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    series: Mapping[str, Mapping[str | None, float]] = field(default_factory=dict)
    sample_ts: Mapping[str, float] | None = None
    sample_window: float = 15.0


@dataclass
class HpaState:
    """Per-HPA memory that must survive between ticks (reference 5).

    The controller keeps these in memory only; tandem keeps them in a table, so they are plain lists
    of ``(replicas, event time)`` and ``(absolute replica change, event time)`` pairs.  Their size is
    bounded: a new entry overwrites an outdated one when there is one.
    """

    recommendations: list[tuple[int, float]] = field(default_factory=list)
    scale_up_events: list[tuple[int, float]] = field(default_factory=list)
    scale_down_events: list[tuple[int, float]] = field(default_factory=list)

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(
        self,
        recommendations: list[tuple[int, float]] | None = None,
        scale_up_events: list[tuple[int, float]] | None = None,
        scale_down_events: list[tuple[int, float]] | None = None,
    ) -> None:
        self.recommendations = [] if recommendations is None else recommendations
        self.scale_up_events = [] if scale_up_events is None else scale_up_events
        self.scale_down_events = [] if scale_down_events is None else scale_down_events

    def copy(self) -> HpaState:
        return HpaState(list(self.recommendations), list(self.scale_up_events), list(self.scale_down_events))

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommendations": [[r, t] for r, t in self.recommendations],
            "scale_up_events": [[c, t] for c, t in self.scale_up_events],
            "scale_down_events": [[c, t] for c, t in self.scale_down_events],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HpaState:
        if not isinstance(d, Mapping):
            raise ValueError("hpa state: must be a mapping")
        lists: list[list[tuple[int, float]]] = []
        for name in ("recommendations", "scale_up_events", "scale_down_events"):
            raw = d.get(name, [])
            if not isinstance(raw, list | tuple):
                raise ValueError(f"hpa state.{name}: must be a list")
            out: list[tuple[int, float]] = []
            for i, item in enumerate(raw):
                if (
                    not isinstance(item, list | tuple)
                    or len(item) != 2
                    or isinstance(item[0], bool)
                    or not isinstance(item[0], int)
                    or isinstance(item[1], bool)
                    or not isinstance(item[1], int | float)
                ):
                    raise ValueError(f"hpa state.{name}[{i}]: must be [int, time]")
                out.append((item[0], float(item[1])))
            lists.append(out)
        return cls(lists[0], lists[1], lists[2])


class HpaResult(NamedTuple):
    """The outcome of one reconcile.  A named tuple, read-only: built on every tick of the own HPA,
    where a frozen dataclass paid an ``object.__setattr__`` call per field.

    ``conditions`` are the HPA status conditions this reconcile sets (``type``, ``status``,
    ``reason``, ``message``), as the controller would leave them after a successful rescale.
    ``per_metric`` has one ``(description, proposal)`` per metric spec, where the proposal is the
    replica count or, for an invalid metric, the error message.  ``current_metrics`` has the
    ``status.currentMetrics`` shape.  ``metric_replicas`` is the largest valid proposal before
    normalization and ``stabilized_replicas`` the value after stabilization (both ``None`` when the
    reconcile did not get that far); ``reason`` is the controller's rescale reason.
    """

    desired_replicas: int
    conditions: list[dict[str, str]]
    per_metric: list[tuple[str, int | str]]
    current_metrics: list[dict[str, Any]]
    metric_replicas: int | None = None
    stabilized_replicas: int | None = None
    reason: str = ""

    def condition(self, type_: str) -> dict[str, str] | None:
        """The condition of ``type_``, if this reconcile set it."""
        for c in self.conditions:
            if c["type"] == type_:
                return c
        return None
