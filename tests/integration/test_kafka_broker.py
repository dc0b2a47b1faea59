"""The real Kafka broker of scripts/kafka.sh works end to end with aiokafka."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.fixtures.kafka import acreate_topics, create_topics

pytestmark = pytest.mark.kafka

N_MESSAGES = 1000
N_KEYS = 17
N_PARTITIONS = 3


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _produce_keyed(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Send N_MESSAGES records over N_KEYS keys; each value is the record's sequence number within its key."""
    sent: dict[str, list[int]] = defaultdict(list)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = []
        for i in range(N_MESSAGES):
            key = f"key-{i % N_KEYS}"
            seq = len(sent[key])
            sent[key].append(seq)
            futures.append(await producer.send(topic, key=key.encode(), value=str(seq).encode()))
        await producer.flush()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return sent


async def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float) -> list[tuple[str, int, int]]:
    """Read the topic from the beginning until ``expected`` records arrived (or the deadline passed) and
    every partition is read to its end offset; returns (key, seq, partition) in arrival order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        end_offsets = await consumer.end_offsets(partitions)
        got: list[tuple[str, int, int]] = []
        deadline = time.monotonic() + timeout
        while True:
            positions = [await consumer.position(tp) for tp in partitions]
            at_end = all(pos >= end_offsets[tp] for pos, tp in zip(positions, partitions, strict=True))
            if len(got) >= expected and at_end:
                return got
            if time.monotonic() >= deadline:
                raise TimeoutError(f"consumed {len(got)} of {expected} records within {timeout}s")
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    assert record.key is not None and record.value is not None
                    got.append((record.key.decode(), int(record.value), tp.partition))
    finally:
        await consumer.stop()


def test_keyed_messages_round_trip_exactly_once_each_with_per_key_order(kafka_broker: str) -> None:
    topic = _topic("round-trip")
    create_topics(kafka_broker, [topic], partitions=N_PARTITIONS)

    async def scenario() -> tuple[dict[str, list[int]], list[tuple[str, int, int]]]:
        sent = await _produce_keyed(kafka_broker, topic)
        got = await _consume_all(kafka_broker, topic, N_MESSAGES, timeout=60)
        return sent, got

    sent, got = asyncio.run(scenario())

    assert sum(len(seqs) for seqs in sent.values()) == N_MESSAGES
    assert len(got) == N_MESSAGES

    received: dict[str, list[int]] = defaultdict(list)
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for key, seq, partition in got:
        received[key].append(seq)
        partitions_of_key[key].add(partition)

    assert received == sent  # every key's records arrive complete, in the order they were sent
    assert all(len(parts) == 1 for parts in partitions_of_key.values())  # a key sticks to one partition
    assert len({p for parts in partitions_of_key.values() for p in parts}) == N_PARTITIONS  # keys spread out


def test_create_topics_makes_compacted_topics_compacted_and_others_not(kafka_broker: str) -> None:
    changelog, events = _topic("changelog"), _topic("events")

    async def scenario() -> dict[str, str]:
        await acreate_topics(kafka_broker, [changelog, events], partitions=2, compacted=[changelog])
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker)
        await admin.start()
        try:
            described = {t["topic"]: t for t in await admin.describe_topics()}
            assert len(described[changelog]["partitions"]) == 2
            assert len(described[events]["partitions"]) == 2
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name) for name in (changelog, events)]
            )
        finally:
            await admin.close()
        policies = {}
        for response in responses:
            for resource in response.resources:
                name, entries = resource[3], resource[4]
                policies[name] = next(e[1] for e in entries if e[0] == "cleanup.policy")
        return policies

    assert asyncio.run(scenario()) == {changelog: "compact", events: "delete"}


def test_create_topics_accepts_existing_topic_with_same_partition_count(kafka_broker: str) -> None:
    topic = _topic("idempotent")
    create_topics(kafka_broker, [topic], partitions=2)
    create_topics(kafka_broker, [topic], partitions=2)  # no error the second time

    with pytest.raises(AssertionError, match="has 2 partitions, wanted 4"):
        create_topics(kafka_broker, [topic], partitions=4, timeout=10)
