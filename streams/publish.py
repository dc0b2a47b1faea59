"""``tandem publish``: write a recorded stream into the input topics, keyed and timestamped.

    tandem publish FILE... [--policy FILE]... [--broker B] [--topic-prefix P] [--partitions N]
                   [--cluster NAME] [--config FILE] [--strict]

Files are read exactly as ``tandem replay`` reads them (``streams.runner.read_sorted``: JSON Lines,
``.gz``, ``-`` for stdin; a bad line is reported as ``FILE:LINE: field 'x': why`` and skipped, or is
fatal under ``--strict``) and ordered the same way: by ``ts``, file order kept for equal ``ts``.
Each event goes to its type's topic (docs/contract.md §2; with ``--input-clusters``, a listed
cluster's events to its own topics ``<prefix><topic>.<cluster>``), keyed by its workload key
``cluster/namespace/kind/name`` (Kafka's default partitioner, like every tandem producer; a policy
by ``<workload key>#<policy>`` on its workload's partition, one compacted record per policy), with the
Kafka timestamp set to ``ts`` in milliseconds.  ``--policy`` manifests are published first, as
``policy`` events stamped with the stream's first ``ts``, so they are in force from the first event
on, as ``tandem replay --policy`` has them.  The producer is idempotent (per-partition order survives
retries) and the command waits until the broker has acknowledged every message.

Watermarks (docs/contract.md §3a): before the first event, then after every ``--watermark-every``
messages at the end of an instant, and once at the end, the command writes to every partition of
every input topic a watermark of each cluster of the stream: a promise that every event of that
cluster with ``ts <=`` the mark has been written to that topic-partition before it.  The worker
releases a cluster's events only up to the smallest of its marks, so a worker that reads while the
publish writes, however starved of CPU the two are, decides what ``tandem replay`` decides
(docs/worker.md, "Order across topics").  The last mark is the tick of the last event: a
recording's end is the end of its last tick window, as ``tandem replay`` has it.  A cluster with
topics of its own gets its watermarks there, and only there.

Whether a record is late, or refused, is the worker's judgement when it reads it (what it has
decided by then), which the publisher cannot see: the worker dead-letters each with its reason and
counts it in ``tandem_events_dropped_total{topic,reason}`` (docs/operating.md).  What the broker
refuses (a topic the publisher may not write) fails the command, naming the topic.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from scaling.events import Event, PolicyEvent, decode_event
from scaling.reconcile import tick_of
from scaling.vocabulary import EVENT_TYPES, TOPIC_OF
from schemas.codec import encode
from streams.merge import partition_key, policy_key, watermark
from streams.settings import KafkaSettings, kafka_producer
from streams.topics import input_topic, input_topics

__all__ = ["Messages", "Record", "messages", "publish", "route", "warn_retention", "with_watermarks"]

_CHUNK = 20_000  # messages in flight before waiting for acknowledgements
#: Messages between two rounds of watermarks (``--watermark-every``): a round costs one record per
#: cluster and input topic-partition, and a worker holds a cluster's events until the next round.
WATERMARK_EVERY = 2000

#: What is sent: (topic, key, value, timestamp_ms, partition); partition None for a keyed event
#: (Kafka's default partitioner), a number for a watermark, which goes to every partition.
Record = tuple[str, bytes, bytes, int, int | None]


class _Progress:
    def __init__(self, stream: IO[str], total: int) -> None:
        self.stream = stream
        self.total = total
        self.tty = stream.isatty()
        self.last = time.monotonic()

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        pct = done / self.total if self.total else 1.0
        line = f"tandem publish: {done}/{self.total} ({pct:.0%})"
        if self.tty:
            self.stream.write("\r" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def with_watermarks(
    plan: Messages,
    partitions: dict[str, int],
    period: float,
    every: int = WATERMARK_EVERY,
    topics_of: Callable[[str], Collection[str]] | None = None,
) -> list[Record]:
    """``plan``'s messages with rounds of watermarks: first, every ``every`` messages where an
    instant ends, and last (at the tick of the last event, ``period`` being the sync period).

    A round at ``W`` goes after every message with ``ts <= W`` and before any later one, to every
    partition of every input topic of each cluster of the plan (``partitions``: topic -> count;
    ``topics_of``: a cluster's input topics, by default every topic of ``partitions``).
    """
    clusters = sorted(plan.clusters)
    every_topic = sorted(partitions)
    topics = {c: (sorted(topics_of(c)) if topics_of is not None else every_topic) for c in clusters}

    def round_at(w: float) -> list[Record]:
        ms = round(w * 1000)
        return [
            (topic, c.encode(), encode(watermark(c, w)), ms, p)
            for c in clusters
            for topic in topics[c]
            for p in range(partitions[topic])
        ]

    if not plan.items or not clusters:
        return [(t, k, v, ms, None) for t, k, v, ms in plan.items]
    first, last = plan.ts[0], plan.ts[-1]
    out = round_at(tick_of(first, period) - period)
    since = 0
    for i, (topic, key, value, ms) in enumerate(plan.items):
        ts = plan.ts[i]
        if since >= every and ts > plan.ts[i - 1]:
            out.extend(round_at(plan.ts[i - 1]))
            since = 0
        out.append((topic, key, value, ms, None))
        since += 1
    out.extend(round_at(tick_of(last, period)))
    return out


async def publish(
    settings: KafkaSettings,
    messages: Sequence[tuple[str, bytes, bytes, int]] | Messages,
    err: IO[str] | None = None,
    *,
    period: float | None = None,
    every: int = WATERMARK_EVERY,
) -> int:
    """Send the messages in order and wait for every acknowledgement; return how many were sent.

    Given a :class:`Messages` plan and the sync ``period``, with watermarks (:func:`with_watermarks`).
    With ``settings.input_signing`` each record carries its cluster's ``tandem-mac`` header.  With
    ``settings.input_clusters`` each record goes to its cluster's topic (:func:`route`).
    """
    from aiokafka.partitioner import DefaultPartitioner

    own = settings.input_clusters
    kind_of = {t: k for t, (k, _) in input_topics(settings.prefix, own).items()}

    def topics_of(cluster: str) -> list[str]:
        return [input_topic(settings.prefix, k, cluster, own) for k in EVENT_TYPES]

    err = err if err is not None else sys.stderr
    producer = kafka_producer(settings, linger_ms=10, max_batch_size=256 * 1024)
    await producer.start()
    try:
        records: list[Record]
        if isinstance(messages, Messages):
            messages = route(messages, settings.prefix, own)
            if period is not None:
                counts: dict[str, int] = {}
                for topic in sorted({t for c in messages.clusters for t in topics_of(c)}):
                    found = await producer.partitions_for(topic)
                    counts[topic] = len(found)
                records = with_watermarks(messages, counts, period, every, topics_of)
            else:
                records = [(t, k, v, ms, None) for t, k, v, ms in messages.items]
        else:
            records = [(t, k, v, ms, None) for t, k, v, ms in messages]
        progress = _Progress(err, len(records))
        pending: list[Any] = []
        partitioner = DefaultPartitioner()
        known: dict[str, list[int]] = {}
        for i, (topic, key, value, ts_ms, partition) in enumerate(records, 1):
            if partition is None and b"#" in key:
                # A policy keyed by workload and policy goes where its workload's records go.
                parts = known.get(topic)
                if parts is None:
                    parts = known[topic] = sorted(await producer.partitions_for(topic))
                partition = partitioner(partition_key(key), parts, parts)
            headers = settings.input_headers(kind_of[topic], key, value) if settings.input_signing else None
            pending.append(
                await producer.send(
                    topic, value=value, key=key, partition=partition, timestamp_ms=ts_ms, headers=headers
                )
            )
            if len(pending) >= _CHUNK:
                await asyncio.gather(*pending)
                pending.clear()
            if i % 1024 == 0:
                progress.update(i)
        await producer.flush()
        if pending:
            await asyncio.gather(*pending)
        progress.done()
        return len(records)
    finally:
        await producer.stop()


def warn_retention(rows: Sequence[dict[str, Any]], oldest: dict[str, int]) -> None:
    """Kafka deletes records older than a topic's time retention, judged by their timestamps."""
    now_ms = time.time() * 1000
    for row in rows:
        topic, policy, retention = row["topic"], row["cleanup.policy"], row["retention.ms"]
        if topic not in oldest or policy is None or "delete" not in policy or retention is None:
            continue
        ms = int(retention)
        if ms >= 0 and oldest[topic] < now_ms - ms:
            print(
                f"tandem publish: warning: {topic} keeps {ms / 86_400_000:g} day(s) but some events are older; "
                "Kafka will delete them within minutes (they are stamped with their event time). "
                "Publish recordings from the past into topics created with --retention-ms -1.",
                file=sys.stderr,
            )


@dataclass
class Messages:
    """What ``tandem publish`` sends: ``(topic, key, value, timestamp_ms)`` in order, and counts."""

    items: list[tuple[str, bytes, bytes, int]] = field(default_factory=list)
    #: The event time of each item (its timestamp in ms is rounded).
    ts: list[float] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    workloads: set[str] = field(default_factory=set)
    #: The clusters of the workloads and policies, which get watermarks.
    clusters: set[str] = field(default_factory=set)
    #: topic -> the oldest timestamp (ms) sent to it
    oldest: dict[str, int] = field(default_factory=dict)


def route(plan: Messages, prefix: str, own: Collection[str]) -> Messages:
    """``plan`` with each record on its cluster's input topic (``--input-clusters`` ``own``): a
    plan built for the shared topics (``tandem import prometheus --publish``) as well."""
    if not own:
        return plan
    kind_of = {t: k for t, (k, _) in input_topics(prefix).items()}
    items = []
    for topic, key, value, ms in plan.items:
        kind = kind_of.get(topic)
        if kind is not None:
            topic = input_topic(prefix, kind, key.split(b"/", 1)[0].decode(), own)
        items.append((topic, key, value, ms))
    oldest: dict[str, int] = {}
    for topic, _, _, ms in items:
        if topic not in oldest or ms < oldest[topic]:
            oldest[topic] = ms
    return Messages(items, plan.ts, plan.counts, plan.workloads, plan.clusters, oldest)


def messages(
    prefix: str,
    policies: Sequence[dict[str, Any]],
    events: Sequence[tuple[float, int, Any, Event]],
    first_ts: float,
    input_clusters: Collection[str] = (),
) -> Messages:
    """The policy events first (stamped ``first_ts``), then the sorted events, each to its type's
    topic (its cluster's own with ``input_clusters``)."""
    out = Messages()
    for raw in policies:
        event = decode_event(raw)
        key = policy_key(event) if isinstance(event, PolicyEvent) and event.identity else event.workload.key.encode()
        topic = input_topic(prefix, "policy", event.workload.cluster, input_clusters)
        out.items.append((topic, key, encode(raw), round(first_ts * 1000)))
        out.ts.append(first_ts)
        out.counts["policy"] += 1
        out.clusters.add(raw["workload"]["cluster"])
    for ts, _, (_, _, raw), event in events:
        key = event.workload.key
        out.workloads.add(key)
        out.clusters.add(event.workload.cluster)
        record_key = policy_key(event) if isinstance(event, PolicyEvent) and event.identity else key.encode()
        topic = input_topic(prefix, TOPIC_OF[event.type], event.workload.cluster, input_clusters)
        out.items.append((topic, record_key, encode(raw), round(ts * 1000)))
        out.ts.append(ts)
        out.counts[event.type] += 1
    for topic, _, _, ts_ms in out.items:
        if topic not in out.oldest or ts_ms < out.oldest[topic]:
            out.oldest[topic] = ts_ms
    return out
