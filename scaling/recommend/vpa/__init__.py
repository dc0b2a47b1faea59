"""Tandem's VPA recommender: the kubernetes/autoscaler VPA recommender's arithmetic, as a pure module.

Why a re-implementation: tandem recomputes, from the raw metric stream and in event time, the same
recommendation that the upstream ``vpa-recommender`` would write into a VPA's status, so that a
replay is deterministic and a workload without a VPA still gets vertical recommendations.  Nothing
here reads a clock, talks to Kubernetes or Kafka, or needs anything beyond the standard library.

Sources: kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender/{util,model,logic,routines}``
and ``pkg/utils/vpa``; the rules followed are listed in ``docs/recommenders.md`` section 2, and
comments of the form "(reference 2.6)" point to its numbered sections.  Every rule cites the
upstream file it reproduces.

Modules, along upstream's own files (lowest first; each imports only the ones above it):

* :mod:`.arithmetic` -- ``ResourceAmount`` and Go's float arithmetic (``model/types.go``);
* :mod:`.histogram` -- bucket layouts and the decaying histogram (``util/``, ``model/aggregations_config.go``);
* :mod:`.config` -- the recommender's flags (``config/config.go``);
* :mod:`.model` -- :class:`ContainerState` per aggregate (``model/aggregate_container_state.go``, ``container.go``);
* :mod:`.policy` -- the VPA's container resource policies (``apis/.../v1``, ``utils/vpa/api.go``);
* :mod:`.estimator` -- percentile, margin, confidence (``logic/estimator.go``);
* :mod:`.recommender` -- :func:`recommend` and the actuation cap (``logic/recommender.go``, ``utils/vpa/capping.go``).

Every public name is re-exported here, so callers import from ``scaling.recommend.vpa``.

State model (reference 2.2).  Upstream keeps, per *container instance*, a ``ContainerState`` (last
CPU sample time, the open memory window) and, per *aggregate* (namespace + container name + pod
labels), an ``AggregateContainerState`` (two decaying histograms, first/last CPU sample time, CPU
sample count).  Tandem folds both into one :class:`ContainerState` per aggregate key, with the
per-container part kept per pod inside it:

* CPU samples are de-duplicated per pod, as upstream does per container: a pod's sample is
  accepted only if its ``ts`` is strictly after that pod's last accepted one (pass ``pods=``; the
  pods of one scrape may come in one batch or in several with the same ``ts``).
* Memory peaks are kept per pod window; pass ``pod=`` (ideally the pod UID, since upstream starts a
  fresh window for a re-created pod) to get upstream's one-peak-per-pod-per-interval behaviour.
  Without ``pod`` all samples share one window, i.e. one peak per interval for the whole aggregate.
* A pod's part is forgotten when the caller says the pod is gone (:meth:`ContainerState.forget_pods`,
  upstream's DeletePod), and expired aggregates are dropped by :func:`collect_garbage` at upstream's
  hourly rhythm, not at once.

Units: CPU samples are float cores, memory samples integer bytes; every recommendation is an
``int`` (millicores for ``cpu``, bytes for ``memory``), computed with upstream's truncations
(``ResourceAmount`` is an int64; float -> amount truncates and clamps to [0, 1e14]).

Serialised size (measured by ``tests/unit/test_vpa_recommender.py::
test_week_of_state_serialises_compactly`` and ``bench/bench_vpa_histogram.py``): one aggregate fed
one CPU and one memory sample per minute for a week of a daily curve serialises with
``json.dumps(state.to_dict(), separators=(",", ":"))`` to about 1 KB (964 bytes: 34 non-zero CPU
buckets, 1 memory bucket, one memory window); five pods with per-pod memory windows, 1.3 KB.
Only non-zero buckets are stored; a weight is a full-precision float so the round trip is exact.
"""

from __future__ import annotations

from .arithmetic import MAX_RESOURCE_AMOUNT, millicores_up
from .config import VpaConfig
from .estimator import confidence_multiplier, get_confidence, with_margin
from .histogram import (
    BUCKET_RATIO,
    CPU_HISTOGRAM_OPTIONS,
    EPSILON,
    MEMORY_HISTOGRAM_OPTIONS,
    DecayingHistogram,
    ExponentialHistogramOptions,
    HistogramOptions,
    LinearHistogramOptions,
)
from .model import GC_INTERVAL, ContainerState, collect_garbage, merge_states
from .policy import ContainerPolicy, policies_from_resource_policy
from .recommender import Recommendation, cap_to_container_limits, recommend

__all__ = [
    "BUCKET_RATIO",
    "CPU_HISTOGRAM_OPTIONS",
    "EPSILON",
    "GC_INTERVAL",
    "MAX_RESOURCE_AMOUNT",
    "MEMORY_HISTOGRAM_OPTIONS",
    "ContainerPolicy",
    "ContainerState",
    "DecayingHistogram",
    "ExponentialHistogramOptions",
    "HistogramOptions",
    "LinearHistogramOptions",
    "Recommendation",
    "VpaConfig",
    "cap_to_container_limits",
    "collect_garbage",
    "confidence_multiplier",
    "get_confidence",
    "merge_states",
    "millicores_up",
    "policies_from_resource_policy",
    "recommend",
    "with_margin",
]
