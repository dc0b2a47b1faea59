"""Tandem's HPA recommender: the autoscaling/v2 HorizontalPodAutoscaler replica computation, pure.

Why re-implement the controller instead of reading the HPA's status?  Tandem must be able to say
what the HPA *would* decide for a workload that has no HPA object yet (a policy's HPA template), for a
replayed history, and for a what-if; and it must decide in event time, deterministically, from the
samples on the stream.  So this module reproduces ``kube-controller-manager``'s HPA arithmetic
(``pkg/controller/podautoscaler/{horizontal,replica_calculator}.go`` and ``metrics/utilization.go``)
from explicit inputs and an explicit, serialisable per-HPA state -- no Kubernetes client, no clock
(``now`` is the tick's event time), standard library only.

The rules followed, with the upstream function each one mirrors, are listed in
``docs/recommenders.md`` section 1; comments of the form "(reference 1.5)" point to its numbered
sections, and name the upstream function they mirror.

Modules, along upstream's own files (lowest first; each imports only the ones above it):

* :mod:`.arithmetic` -- Go integer semantics and quantities (``resource.Quantity``);
* :mod:`.config` -- the controller's flags (``--horizontal-pod-autoscaler-*``);
* :mod:`.model` -- pods, metric samples, the kept state and the result of one reconcile;
* :mod:`.metric_specs` -- ``spec.metrics`` parsing (autoscaling/v2 and v2beta1);
* :mod:`.behavior` -- ``spec.behavior`` parsing and its API defaults (``v2/defaults.go``);
* :mod:`.replica_calculator` -- per-metric proposals (``replica_calculator.go``);
* :mod:`.normalize` -- stabilization and rate limits (``horizontal.go`` ``normalizeDesiredReplicas*``);
* :mod:`.horizontal` -- :func:`recommend`, one reconcile (``horizontal.go`` ``reconcileAutoscaler``).

Every public name is re-exported here, so callers import from ``scaling.recommend.hpa``.

Units.  Upstream computes in *milli-units* held in int64 and in *integer percent*; every truncation
matters (several upstream expectations depend on them), so this module does the same with Python
ints.  Inputs use the units of the metrics pipeline:

* ``MetricInputs.pod_usage`` and the requests: ``"cpu"`` in millicores (already milli-units), every
  other resource (``"memory"``, ...) in base units (bytes), converted internally to milli-units as
  ``Quantity.MilliValue()`` would (x1000).
* ``MetricInputs.series`` values: plain numbers in base units (``12.5`` requests/s), converted to
  milli-units rounding up like ``MilliValue()``; a quantity string (``"12500m"``) is accepted too.
* Targets in metric specs: quantities (``"500m"``, ``"1Gi"``, ``10``), parsed exactly by
  :func:`scaling.quantity.parse_quantity`.
"""

from __future__ import annotations

from .arithmetic import format_milli_quantity
from .behavior import (
    DEFAULT_SCALE_DOWN_RULES,
    DEFAULT_SCALE_UP_RULES,
    Behavior,
    ScalingPolicy,
    ScalingRules,
    parse_behavior,
)
from .config import HpaConfig
from .horizontal import recommend
from .metric_specs import MetricSpec, parse_metrics
from .model import HpaResult, HpaState, MetricInputs, PodInfo
from .normalize import (
    limit_legacy,
    limit_with_behavior,
    replicas_changed_in_period,
    stabilize_legacy,
    stabilize_with_behavior,
    store_scale_event,
)
from .replica_calculator import Tolerances

__all__ = [
    "DEFAULT_SCALE_DOWN_RULES",
    "DEFAULT_SCALE_UP_RULES",
    "Behavior",
    "HpaConfig",
    "HpaResult",
    "HpaState",
    "MetricInputs",
    "MetricSpec",
    "PodInfo",
    "ScalingPolicy",
    "ScalingRules",
    "Tolerances",
    "format_milli_quantity",
    "limit_legacy",
    "limit_with_behavior",
    "parse_behavior",
    "parse_metrics",
    "recommend",
    "replicas_changed_in_period",
    "stabilize_legacy",
    "stabilize_with_behavior",
    "store_scale_event",
]
