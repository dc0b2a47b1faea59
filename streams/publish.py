"""``tandem publish``: write a recorded stream into the input topics, keyed and timestamped.

    tandem publish FILE... [--policy FILE]... [--broker B] [--topic-prefix P] [--partitions N]
                   [--cluster NAME] [--config FILE] [--strict]

Files are read exactly as ``tandem replay`` reads them (``streams.runner.read_sorted``: JSON Lines,
``.gz``, ``-`` for stdin; a bad line is reported as ``FILE:LINE: field 'x': why`` and skipped, or is
fatal under ``--strict``) and ordered the same way: by ``ts``, file order kept for equal ``ts``.
Each event goes to its type's topic (docs/contract.md §2), keyed by its workload key
``cluster/namespace/kind/name`` (Kafka's default partitioner, like every tandem producer), with the
Kafka timestamp set to ``ts`` in milliseconds.  ``--policy`` manifests are published first, as
``policy`` events stamped with the stream's first ``ts``, so they are in force from the first event
on, as ``tandem replay --policy`` has them.  The producer is idempotent (per-partition order survives
retries) and the command waits until the broker has acknowledged every message.

A worker started after the publish ends reproduces ``tandem replay``'s decisions byte for byte; see
docs/worker.md for what changes when the worker reads while a publish is still writing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from scaling.events import Event
from schemas.codec import encode
from streams.settings import KafkaSettings
from streams.topics import TOPIC_OF_TYPE, topic_name

__all__ = ["Messages", "messages", "publish", "warn_retention"]

_CHUNK = 20_000  # messages in flight before waiting for acknowledgements


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


async def publish(
    settings: KafkaSettings, messages: Sequence[tuple[str, bytes, bytes, int]], err: IO[str] | None = None
) -> None:
    """Send ``(topic, key, value, timestamp_ms)`` in order and wait for every acknowledgement.

    With ``settings.input_signing`` each record carries its cluster's ``tandem-mac`` header.
    """
    from aiokafka import AIOKafkaProducer

    kind_of = {topic_name(settings.prefix, s): t for t, s in TOPIC_OF_TYPE.items()}

    err = err if err is not None else sys.stderr
    progress = _Progress(err, len(messages))
    producer = AIOKafkaProducer(
        **settings.client_kwargs(),
        acks="all",
        enable_idempotence=True,
        linger_ms=10,
        max_batch_size=256 * 1024,
    )
    await producer.start()
    try:
        pending: list[Any] = []
        for i, (topic, key, value, ts_ms) in enumerate(messages, 1):
            headers = settings.input_headers(kind_of[topic], key, value) if settings.input_signing else None
            pending.append(await producer.send(topic, value=value, key=key, timestamp_ms=ts_ms, headers=headers))
            if len(pending) >= _CHUNK:
                await asyncio.gather(*pending)
                pending.clear()
            if i % 1024 == 0:
                progress.update(i)
        await producer.flush()
        if pending:
            await asyncio.gather(*pending)
        progress.done()
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
    counts: Counter[str] = field(default_factory=Counter)
    workloads: set[str] = field(default_factory=set)
    #: topic -> the oldest timestamp (ms) sent to it
    oldest: dict[str, int] = field(default_factory=dict)


def messages(
    prefix: str,
    policies: Sequence[dict[str, Any]],
    events: Sequence[tuple[float, int, Any, Event]],
    first_ts: float,
) -> Messages:
    """The policy events first (stamped ``first_ts``), then the sorted events, each to its type's topic."""
    names = {t: topic_name(prefix, s) for t, s in TOPIC_OF_TYPE.items()}
    out = Messages()
    for raw in policies:
        key = "/".join(raw["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        out.items.append((names["policy"], key.encode(), encode(raw), round(first_ts * 1000)))
        out.counts["policy"] += 1
    for ts, _, (_, _, raw), event in events:
        key = event.workload.key
        out.workloads.add(key)
        out.items.append((names[event.type], key.encode(), encode(raw), round(ts * 1000)))
        out.counts[event.type] += 1
    for topic, _, _, ts_ms in out.items:
        if topic not in out.oldest or ts_ms < out.oldest[topic]:
            out.oldest[topic] = ts_ms
    return out
