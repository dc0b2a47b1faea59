"""``tandem publish``: write a recorded stream into the input topics, keyed and timestamped.

    tandem publish FILE... [--policy FILE]... [--broker B] [--topic-prefix P] [--partitions N]
                   [--cluster NAME] [--config FILE] [--strict]

Files are read exactly as ``tandem replay`` reads them (``streams.replay.read_events``: JSON Lines,
``.gz``, ``-`` for stdin; a bad line is reported as ``FILE:LINE: field 'x': why`` and skipped, or is
fatal under ``--strict``) and ordered the same way: by ``ts``, file order kept for equal ``ts``.
Each event goes to its type's topic (CONTRACT.md section 2), keyed by its workload key
``cluster/namespace/kind/name`` (Kafka's default partitioner, like every tandem producer), with the
Kafka timestamp set to ``ts`` in milliseconds.  ``--policy`` manifests are published first, as
``policy`` events stamped with the stream's first ``ts``, so they are in force from the first event
on, as ``tandem replay --policy`` has them.  The producer is idempotent (per-partition order survives
retries) and the command waits until the broker has acknowledged every message.

A worker started after the publish ends reproduces ``tandem replay``'s decisions byte for byte; see
docs/worker.md for what changes when the worker reads while a publish is still writing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

from streams.settings import KafkaSettings, add_core_options, add_kafka_options, env, kafka_settings

__all__ = ["main", "publish"]

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
    """Send ``(topic, key, value, timestamp_ms)`` in order and wait for every acknowledgement."""
    from aiokafka import AIOKafkaProducer

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
            pending.append(await producer.send(topic, value=value, key=key, timestamp_ms=ts_ms))
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


def _warn_retention(rows: Sequence[dict[str, Any]], oldest: dict[str, int]) -> None:
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


def main(argv: Sequence[str]) -> int:
    from scaling.engine import policy_event
    from scaling.errors import InvalidEvent
    from streams.inputs import UsageError, load_command_inputs
    from streams.replay import ReplayStats, StrictError, read_events
    from streams.topics import TOPIC_OF_TYPE, TopicMismatch, ensure_topics, list_topics, topic_name

    p = argparse.ArgumentParser(prog="tandem publish", description="write recorded streams into the input topics")
    p.add_argument("files", nargs="+", help="JSON Lines files (.jsonl, .jsonl.gz, - for stdin)")
    p.add_argument(
        "--policy",
        action="append",
        default=[x for x in str(env("policy", "")).split(os.pathsep) if x],
        help="policy manifest file, published first (repeatable)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        default=str(env("strict", "")).lower() in ("1", "true", "yes", "on"),
        help="a bad line is fatal (exit 1)",
    )
    add_kafka_options(p)
    add_core_options(p)
    args = p.parse_args(list(argv))
    # The producer logs retries (e.g. NotLeaderForPartition just after topics are created) as
    # warnings; they are handled, and a real failure raises.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)

    try:
        settings = kafka_settings(args)
    except (OSError, ValueError) as exc:
        print(f"tandem publish: {exc}", file=sys.stderr)
        return 2
    try:
        core, manifests = load_command_inputs(args.files, args.policy, args.config, args.cluster, args.sync_period)
    except UsageError as exc:
        print(f"tandem publish: {exc}", file=sys.stderr)
        return 2

    started = time.monotonic()
    stats = ReplayStats()
    try:
        events = read_events(args.files, lambda msg: print(msg, file=sys.stderr), stats, strict=args.strict)
    except StrictError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    events.sort(key=lambda e: e[0])  # by ts, file order kept for equal ts (stable), as replay does
    first_ts = events[0][0] if events else 0.0
    try:
        policies = [policy_event(m, core.cluster, first_ts) for m in manifests]
    except InvalidEvent as exc:
        print(f"tandem publish: policy: {exc}", file=sys.stderr)
        return 2

    from schemas.codec import encode

    names = {t: topic_name(settings.prefix, s) for t, s in TOPIC_OF_TYPE.items()}
    messages: list[tuple[str, bytes, bytes, int]] = []
    counts: Counter[str] = Counter()
    workloads: set[str] = set()
    for raw in policies:
        key = "/".join(raw["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        messages.append((names["policy"], key.encode(), encode(raw), round(first_ts * 1000)))
        counts["policy"] += 1
    for ts, _, (_, _, raw), event in events:
        key = event.workload.key
        workloads.add(key)
        messages.append((names[event.type], key.encode(), encode(raw), round(ts * 1000)))
        counts[event.type] += 1

    oldest: dict[str, int] = {}
    for topic, _, _, ts_ms in messages:
        if topic not in oldest or ts_ms < oldest[topic]:
            oldest[topic] = ts_ms

    async def run() -> None:
        await ensure_topics(settings)
        _warn_retention(await list_topics(settings), oldest)
        await publish(settings, messages)

    try:
        asyncio.run(run())
    except TopicMismatch as exc:
        print(f"tandem publish: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"tandem publish: {settings.bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    by_type = ", ".join(f"{counts[t]} {t}" for t in ("metric", "workload", "hpa", "vpa", "policy") if counts[t])
    rate = len(messages) / elapsed if elapsed > 0 else 0.0
    print(
        f"tandem publish: {len(messages)} message(s) ({by_type or 'none'}) for {len(workloads)} workload(s) "
        f"to {settings.prefix}* on {settings.bootstrap} in {elapsed:.1f} s ({rate:.0f}/s); "
        f"read {stats.read} line(s) from {stats.files} file(s), rejected {stats.rejected}.",
        file=sys.stderr,
    )
    return 0
