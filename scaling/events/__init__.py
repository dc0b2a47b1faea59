"""Typed input events (docs/contract.md §3) and their strict decoding from JSON values.

One module per job: ``model`` (the typed events), ``checks`` (the field checks every decoder
shares, with did-you-mean for unknown fields), ``metric`` (metric events, the most numerous) and
``decode`` (the other types and :func:`decode_event`, the one entry point).  Outer code imports
from here.
"""

from __future__ import annotations

from ..vocabulary import EVENT_TYPES
from .checks import decode_workload_ref
from .decode import decode_event
from .model import (
    ContainerResources,
    ContainerSample,
    Event,
    HistoryEvent,
    HpaEvent,
    MetricEvent,
    PodStatus,
    PolicyEvent,
    Qty,
    SeriesSample,
    VpaEvent,
    VpaRecommendation,
    WorkloadEvent,
    WorkloadRef,
    policy_identity,
)

__all__ = [
    "EVENT_TYPES",
    "ContainerResources",
    "ContainerSample",
    "Event",
    "HistoryEvent",
    "HpaEvent",
    "MetricEvent",
    "PodStatus",
    "PolicyEvent",
    "Qty",
    "SeriesSample",
    "VpaEvent",
    "VpaRecommendation",
    "WorkloadEvent",
    "WorkloadRef",
    "decode_event",
    "decode_workload_ref",
    "policy_identity",
]
