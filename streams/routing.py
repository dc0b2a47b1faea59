"""Where the core's outputs go, and which of them an applier only reports: one rule, read by both sides.

The worker (:mod:`agents.publisher`) sends every output of the core to the topics :func:`route`
names; the applier (:mod:`edge.applier`) reads the topics :func:`applier_sources` names and tells a
decision to write from a report for the policy status by :func:`status_only`.  Both follow the
same three facts (docs/edge.md, docs/operating.md):

* every audit event goes to ``<prefix>audit``;
* a decision that is not a dry run (:func:`applies`) also goes to its cluster's actuator topic
  (:func:`streams.topics.actuator_topic`);
* a *status-only* event, a blocked report or a dry-run decision, is one an applier shows in the
  policy status and Events and never applies; a cluster with an actuator topic of its own
  (``--actuator-clusters``) gets those there too, so that its applier's principal needs no right on
  the audit topic (which carries every cluster's explanations), and its applier reads no other.

tandem's own recommendations (``hpa``/``vpa`` outputs) go back to their cluster's input topic,
where the worker recognises them by ``"source": "tandem"``.  Pure: no Kafka here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from scaling.cloudevents import BLOCKED, DECISION
from streams.topics import actuator_topic, input_topic, topic_name

__all__ = [
    "ACTUATOR",
    "AUDIT",
    "INPUT",
    "OWN",
    "Destination",
    "Layout",
    "applier_sources",
    "applies",
    "route",
    "status_only",
]

#: What a destination is for: the audit trail, an applier's decision feed, a worker's input.
AUDIT, ACTUATOR, INPUT = "audit", "actuator", "input"
#: Output kinds of the core that are tandem's own recommendations, sent back as inputs.
OWN = frozenset({"hpa", "vpa"})


@dataclass(frozen=True, slots=True)
class Layout:
    """The topic layout of one installation: the prefix and the clusters with topics of their own."""

    prefix: str
    #: Clusters with their own actuator topic (``--actuator-clusters``).
    actuator_clusters: tuple[str, ...] = ()
    #: Clusters with their own input topics (``--input-clusters``).
    input_clusters: tuple[str, ...] = ()


class Destination(NamedTuple):
    """One topic an output goes to, and what for (:data:`AUDIT`, :data:`ACTUATOR`, :data:`INPUT`)."""

    purpose: str
    topic: str


def applies(ev: Mapping[str, Any]) -> bool:
    """A decision an applier writes to Kubernetes: a decision that is not a dry run."""
    return bool(ev["type"] == DECISION and not ev["data"].get("dry_run"))


def status_only(ev: Any) -> bool:
    """A blocked report or a dry-run decision: for the policy status and Events, never applied.

    ``ev`` is any decoded JSON value (the applier reads it from a topic): anything that is not such
    a CloudEvent is not status-only.
    """
    if not isinstance(ev, dict):
        return False
    data = ev.get("data")
    return ev.get("type") == BLOCKED or (
        ev.get("type") == DECISION and isinstance(data, dict) and bool(data.get("dry_run"))
    )


def route(layout: Layout, key: str, kind: str, ev: Mapping[str, Any]) -> tuple[Destination, ...]:
    """The topics one output of the core goes to (``key``: its workload key; ``kind``: ``audit``,
    ``hpa`` or ``vpa``); none for a kind the core does not emit."""
    cluster = key.split("/", 1)[0]
    if kind == "audit":
        audit = Destination(AUDIT, topic_name(layout.prefix, "audit"))
        if applies(ev) or (cluster in layout.actuator_clusters and status_only(ev)):
            return audit, Destination(ACTUATOR, actuator_topic(layout.prefix, cluster, layout.actuator_clusters))
        return (audit,)
    if kind in OWN:
        return (Destination(INPUT, input_topic(layout.prefix, kind, cluster, layout.input_clusters)),)
    return ()


def applier_sources(layout: Layout, cluster: str) -> tuple[str, ...]:
    """The topics the applier of ``cluster`` reads: its actuator topic, and the audit topic for the
    status-only events unless its own actuator topic carries them."""
    actuator = actuator_topic(layout.prefix, cluster, layout.actuator_clusters)
    if cluster in layout.actuator_clusters:
        return (actuator,)
    return actuator, topic_name(layout.prefix, "audit")
