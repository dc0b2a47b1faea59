"""Admission: the checks every input message passes before the merge takes it (docs/contract.md §2).

Each message of a batch is decoded and validated (``schemas.codec``, ``scaling.events``), checked
against the topic it came from (its routing key, the cluster that owns the topic) and, with
``--input-keys``, its writer's signature (:mod:`streams.signing`); a good one is offered to the
merge (:class:`streams.merge.Merger`), a bad one becomes a dead letter
``{"topic", "partition", "offset", "key", "value", "error"}`` and the worker carries on.  A
producer's watermark is a promise about its cluster's events, and tandem's own recommendations
coming back are only noted as read.  Offsets the consumer skipped on a topic without gaps are
dead-lettered too: nothing is dropped in silence (issue #18, #29).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.shared import Topics
from scaling.errors import InvalidEvent
from scaling.events import decode_event
from scaling.vocabulary import WATERMARK
from schemas.codec import loads
from streams.deadletter import deadletter_record
from streams.merge import Merger, Misrouted, check_routing, decode_watermark, tombstone
from streams.routing import OWN
from streams.signing import InputRefused

__all__ = ["GAPLESS", "Admission", "Admitted", "Reject", "check_owner", "cluster_of", "drop_reason"]

log = logging.getLogger("tandem.worker")

#: Input types whose topics have no offset gaps (time retention, non-transactional producers);
#: workloads and policies are compacted, so gaps there are normal.
GAPLESS = frozenset({"metric", "hpa", "vpa"})

#: A drop at admission: (event type, key, dead letter, topic, reason, records).
Reject = tuple[str, bytes | None, bytes, str, str, int]

#: What :meth:`Admission._take` did with a message: an event offered to the merge, a producer's
#: watermark, or tandem's own recommendation noted as read.
_EVENT, _MARK, _OWN = "event", "mark", "own"


@dataclass
class Admitted:
    """What a batch brought: its drops, the accepted events per type and the partitions touched."""

    rejects: list[Reject] = field(default_factory=list)
    #: Event type -> [count, newest ts].
    accepted: dict[str, list[float]] = field(default_factory=dict)
    touched: set[int] = field(default_factory=set)


def drop_reason(exc: InvalidEvent) -> str:
    """The ``reason`` label of ``tandem_events_dropped_total`` for an input refused as it was read."""
    if isinstance(exc, InputRefused):
        return "not_authenticated"
    if isinstance(exc, Misrouted):
        return "misrouted"
    return "invalid"


def cluster_of(key: bytes | None) -> str:
    """The cluster of a record keyed by a workload key (``cluster/namespace/kind/name``)."""
    return (key or b"").split(b"/", 1)[0].decode("utf-8", "replace")


def check_owner(input_clusters: Sequence[str], topic: str, owner: str | None, cluster: str) -> None:
    """A record of ``cluster`` read from ``topic`` (owned by the cluster ``owner``, None: shared)
    belongs there: a cluster with input topics of its own (``input_clusters``) is read from those
    alone, so that the principals that may write elsewhere cannot speak for it (issue #29; Kafka's
    ACLs keep the other clusters' collectors off its topics)."""
    if owner is None:
        if cluster in input_clusters:
            raise Misrouted(
                "workload.cluster",
                f"cluster {cluster!r} has input topics of its own (--input-clusters): "
                f"its records on the shared topic {topic} are refused",
            )
    elif cluster != owner:
        raise Misrouted("workload.cluster", f"a record of cluster {cluster!r} on cluster {owner!r}'s topic {topic}")


class Admission:
    """The message checks of one worker, and the offsets it has been handed since its assignment."""

    def __init__(self, topics: Topics, merger: Merger, keyring: Any, stats: defaultdict[str, int]) -> None:
        self.inputs = topics.inputs
        self.kind_of_topic = topics.kind_of_topic
        self.input_clusters = topics.layout.input_clusters
        self.merger = merger
        #: streams.signing: input authentication (None: off).
        self.keyring = keyring
        self.stats = stats
        #: Wall time of the last input that arrived per partition (for the idle flush's latency).
        self.arrived: dict[int, float] = {}
        #: The last offset handed over per input topic-partition since the assignment: a jump on a
        #: topic without gaps means inputs the consumer dropped (see agents/fence).
        self.read_to: dict[tuple[str, int], int] = {}
        #: The first offset handed over per input topic-partition since the assignment (the commit
        #: watch's start for an input never committed, before its log start is known).
        self.read_from: dict[tuple[str, int], int] = {}

    def forget(self) -> None:
        """A new assignment: the offsets handed over so far are no guide to the next ones."""
        self.read_to.clear()
        self.read_from.clear()

    def admit(self, events: Sequence[Any], now: float, arrived: float) -> Admitted:
        """Check every message of a batch and offer the good ones to the merge (at ``now``,
        processing time; ``arrived``: the wall time of the batch)."""
        admitted = Admitted()
        for ev in events:
            msg = ev.message
            kind = self.kind_of_topic[msg.topic]  # the merge's source
            etype, owner = self.inputs[msg.topic]
            partition = msg.partition
            self._track(msg, etype, admitted.rejects)
            try:
                taken = self._take(msg, kind, etype, owner, now, admitted.accepted)
            except InvalidEvent as exc:
                self.merger.observe(partition, kind, msg.offset, None, now)
                record = deadletter_record(msg.topic, partition, msg.offset, msg.key, msg.value, str(exc))
                admitted.rejects.append((etype, msg.key, record, msg.topic, drop_reason(exc), 1))
                continue
            if taken != _OWN:
                admitted.touched.add(partition)
            if taken == _EVENT:
                self.arrived[partition] = arrived
        self.stats["messages"] += len(events)
        return admitted

    def _track(self, msg: Any, etype: str, rejects: list[Reject]) -> None:
        """Note the offset handed over; a jump on a topic without gaps is dead-lettered, never silent."""
        tp = (msg.topic, msg.partition)
        last = self.read_to.get(tp)
        if last is not None and msg.offset > last + 1 and etype in GAPLESS:
            # Inputs the consumer never handed over (issue #18): never silent.
            log.error(
                "tandem worker: input %s[%d] skipped offsets %d..%d: %d message(s) not delivered",
                msg.topic,
                msg.partition,
                last + 1,
                msg.offset - 1,
                msg.offset - last - 1,
            )
            self.stats["skipped"] += msg.offset - last - 1
            gap = f"not delivered: offsets {last + 1}..{msg.offset - 1} skipped by the consumer"
            record = deadletter_record(msg.topic, msg.partition, last + 1, None, None, gap)
            rejects.append((etype, None, record, msg.topic, "not_delivered", msg.offset - last - 1))
        if last is None:
            self.read_from.setdefault(tp, msg.offset)
        if last is None or msg.offset > last:
            self.read_to[tp] = msg.offset

    def _take(
        self, msg: Any, kind: str, etype: str, owner: str | None, now: float, accepted: dict[str, list[float]]
    ) -> str:
        """Decode and check one message and hand it to the merge; :class:`InvalidEvent` if it is refused."""
        value = msg.value
        partition = msg.partition
        if value is None:
            if etype != "policy":
                raise InvalidEvent("", "a null message (only the policies topic takes deletions)")
            raw = tombstone(msg.key, msg.timestamp)
            event = decode_event(raw)
        else:
            raw = loads(value)
            if type(raw) is dict and raw.get("type") == WATERMARK:
                # A producer's promise about its cluster's events here (docs/worker.md).
                cluster, mark_ts = decode_watermark(msg.key, raw)
                check_owner(self.input_clusters, msg.topic, owner, cluster)
                if self.keyring is not None:  # a forged mark would release events early
                    self.keyring.verify(etype, msg.key, value, msg.headers, cluster)
                self.merger.mark(partition, kind, msg.offset, cluster, mark_ts, now)
                self.stats["watermarks"] += 1
                return _MARK
            if etype in OWN and type(raw) is dict and raw.get("source") == "tandem":
                # tandem's own recommendation coming back: the core ignores it (section 6), and
                # its ts (the tick it was made at) must not hold the merge back.
                check_owner(self.input_clusters, msg.topic, owner, cluster_of(msg.key))
                if self.keyring is not None:
                    # Only a worker writes these, signed (issue #29): one it did not sign is
                    # refused and dead-lettered, never dropped in silence.
                    self.keyring.verify(etype, msg.key, value, msg.headers, cluster_of(msg.key))
                self.merger.observe(partition, kind, msg.offset, None, now)
                self.stats["own"] += 1
                return _OWN
            event = decode_event(raw)
        check_routing(etype, msg.key, event)
        check_owner(self.input_clusters, msg.topic, owner, event.workload.cluster)
        if self.keyring is not None:  # may the writer speak for this cluster? (InvalidEvent if not)
            self.keyring.verify(etype, msg.key, value, msg.headers, event.workload.cluster)
        if self.merger.offer(partition, kind, msg.offset, raw, event, now):
            acc = accepted.get(etype)
            if acc is None:
                accepted[etype] = [1, event.ts]
            else:
                acc[0] += 1
                if event.ts > acc[1]:
                    acc[1] = event.ts
        else:
            self.stats["redelivered"] += 1
        return _EVENT
