"""tandem's Kafka topics (docs/contract.md §2); the command ``tandem topics create|list`` is :mod:`cli.topics`.

Every topic has the same partition count and is keyed by the workload key, so one worker owns all
of a workload's inputs, its table entry and its outputs (section 1).  Faust refuses a table whose
changelog has a different partition count than its source topics, and a topic that Kafka
auto-creates on first use gets the broker's ``num.partitions``, so ``tandem worker`` creates the
missing topics with :func:`ensure_topics` *before* its agents start, and refuses to run over
existing input topics with another partition count.

``workloads`` and ``policies`` are compacted (the latest value per workload is the truth; a
``null`` policy deletes); the others are deleted by time.  Kafka applies time retention to the
*record timestamps*, and ``tandem publish`` stamps inputs with their event time: a recording older
than the retention is deleted within ``log.retention.check.interval.ms`` (5 minutes by default) of
being published.  Topics meant for such recordings are created with ``--retention-ms -1``
(``TANDEM_RETENTION_MS``); ``tandem publish`` warns when it sees the problem.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from scaling.vocabulary import EVENT_TYPES
from streams.settings import KafkaSettings

__all__ = [
    "COMPACTED",
    "INPUT_TOPICS",
    "OUTPUT_TOPICS",
    "RETENTION_MS",
    "TOPIC_OF_TYPE",
    "TopicMismatch",
    "TopicSpec",
    "actuator_topic",
    "ensure_topics",
    "input_topic",
    "input_topics",
    "list_topics",
    "topic_name",
    "topic_specs",
]

DAY_MS = 24 * 3600 * 1000

#: Event type -> input topic suffix.
TOPIC_OF_TYPE = {"metric": "metrics", "workload": "workloads", "hpa": "hpa", "vpa": "vpa", "policy": "policies"}
#: Input topics (suffixes), in the order of the event types of docs/contract.md §3.
INPUT_TOPICS = tuple(TOPIC_OF_TYPE[t] for t in EVENT_TYPES)
#: Output topics (suffixes).
OUTPUT_TOPICS = ("actuator", "audit", "deadletter")
#: Compacted topics: the latest value per key is what counts.
COMPACTED = frozenset({"workloads", "policies"})
#: Time retention of the other topics.
RETENTION_MS = {
    "metrics": 7 * DAY_MS,
    "hpa": 7 * DAY_MS,
    "vpa": 7 * DAY_MS,
    "actuator": 7 * DAY_MS,
    "audit": 90 * DAY_MS,
    "deadletter": 14 * DAY_MS,
}


def topic_name(prefix: str, suffix: str) -> str:
    return f"{prefix}{suffix}"


def actuator_topic(prefix: str, cluster: str, own_topic_clusters: Collection[str] = ()) -> str:
    """Where decisions for ``cluster`` go: ``<prefix>actuator.<cluster>`` when that cluster has its own
    topic (``--actuator-clusters``, so an ACL can give it to that cluster's applier alone), else
    ``<prefix>actuator``."""
    if cluster in own_topic_clusters:
        return f"{prefix}actuator.{cluster}"
    return topic_name(prefix, "actuator")


def input_topic(prefix: str, kind: str, cluster: str, own_topic_clusters: Collection[str] = ()) -> str:
    """Where ``cluster``'s input events of type ``kind`` go: ``<prefix><topic>.<cluster>`` when that
    cluster has its own input topics (``--input-clusters``: Kafka ACLs then let its collector alone
    write them, so no other cluster's collector can write or compact away what a worker rebuilds the
    cluster from; issue #29), else the shared ``<prefix><topic>``."""
    suffix = TOPIC_OF_TYPE[kind]
    if cluster in own_topic_clusters:
        return f"{prefix}{suffix}.{cluster}"
    return topic_name(prefix, suffix)


def input_topics(prefix: str, own_topic_clusters: Sequence[str] = ()) -> dict[str, tuple[str, str | None]]:
    """Every input topic a worker reads: name -> (event type, the cluster that owns it, None when shared)."""
    out: dict[str, tuple[str, str | None]] = {topic_name(prefix, TOPIC_OF_TYPE[k]): (k, None) for k in EVENT_TYPES}
    for c in own_topic_clusters:
        for k in EVENT_TYPES:
            out[input_topic(prefix, k, c, (c,))] = (k, c)
    return out


@dataclass(frozen=True)
class TopicSpec:
    suffix: str
    name: str
    configs: dict[str, str]

    @property
    def cleanup_policy(self) -> str:
        return self.configs["cleanup.policy"]


def topic_specs(
    prefix: str,
    retention_ms: int | None = None,
    actuator_clusters: Sequence[str] = (),
    input_clusters: Sequence[str] = (),
) -> list[TopicSpec]:
    """The topics of section 2; ``retention_ms`` replaces the time retention of the non-compacted ones.

    ``actuator_clusters`` adds one actuator topic ``actuator.<cluster>`` per cluster (same settings);
    ``input_clusters`` five input topics ``<topic>.<cluster>`` per cluster (their shared topic's settings).
    """
    specs = []
    own_inputs = [f"{s}.{c}" for c in input_clusters for s in INPUT_TOPICS]
    for suffix in (*INPUT_TOPICS, *own_inputs, *OUTPUT_TOPICS, *(f"actuator.{c}" for c in actuator_clusters)):
        base = suffix.split(".", 1)[0]
        if suffix.startswith("actuator."):
            ms = RETENTION_MS["actuator"] if retention_ms is None else retention_ms
            configs = {"cleanup.policy": "delete", "retention.ms": str(ms)}
        elif base in COMPACTED:
            configs = {"cleanup.policy": "compact"}
        else:
            ms = RETENTION_MS[base] if retention_ms is None else retention_ms
            configs = {"cleanup.policy": "delete", "retention.ms": str(ms)}
        specs.append(TopicSpec(suffix, topic_name(prefix, suffix), configs))
    return specs


class TopicMismatch(RuntimeError):
    """An existing topic does not have the partition count every tandem topic must share."""


@dataclass
class TopicsReport:
    created: list[str]
    existing: list[str]


async def ensure_topics(
    settings: KafkaSettings, *, timeout: float = 30.0, strict: bool = True, extra: Sequence[TopicSpec] = ()
) -> TopicsReport:
    """Create the missing topics of section 2 (and ``extra``) and wait until every partition has a leader.

    An existing topic with another partition count raises :class:`TopicMismatch` when ``strict``
    (the worker cannot run over it); its configuration is otherwise left alone.  ``extra`` is for
    topics a component owns beyond section 2, such as the worker's state changelog: created here
    and waited for, so that no client ever sees it half-made (issue #18: a worker whose first
    table write found its just-created changelog with 0 partitions).
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    own = (settings.actuator_clusters, settings.input_clusters)
    specs = [*topic_specs(settings.prefix, settings.retention_ms, *own), *extra]
    wanted = {s.name: s for s in specs}
    admin = AIOKafkaAdminClient(**settings.client_kwargs(), request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        # Describe all topics (no names): a metadata request naming a missing topic may auto-create it.
        described = {t["topic"]: t for t in await admin.describe_topics()}
        existing = [n for n in wanted if n in described and described[n]["error_code"] == 0]
        missing = [n for n in wanted if n not in existing]
        wrong = [
            f"{n} has {len(described[n]['partitions'])} partitions, expected {settings.partitions}"
            for n in existing
            if len(described[n]["partitions"]) != settings.partitions
        ]
        if wrong and strict:
            raise TopicMismatch(
                "; ".join(wrong) + " (every tandem topic must have the same partition count: "
                "set --partitions / TANDEM_PARTITIONS to match, or recreate the topics)"
            )
        if missing:
            new = [
                NewTopic(n, settings.partitions, settings.replication, topic_configs=dict(wanted[n].configs))
                for n in missing
            ]
            response = await admin.create_topics(new, timeout_ms=int(timeout * 1000))
            for topic_error in response.topic_errors:
                topic, code = topic_error[0], topic_error[1]
                if code != 0 and for_code(code) is not TopicAlreadyExistsError:
                    detail = topic_error[2] if len(topic_error) > 2 else ""
                    raise for_code(code)(f"creating topic {topic!r}: {detail}")
            deadline = time.monotonic() + timeout
            while True:
                described = {t["topic"]: t for t in await admin.describe_topics()}
                ready = all(
                    n in described
                    and described[n]["error_code"] == 0
                    and described[n]["partitions"]
                    and all(p["error_code"] == 0 and p["leader"] >= 0 for p in described[n]["partitions"])
                    for n in missing
                )
                if ready:
                    break
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"topics {missing} have no leaders after {timeout}s")
                await asyncio.sleep(0.1)
        return TopicsReport(created=missing, existing=existing)
    finally:
        await admin.close()


#: Kafka's TOPIC_AUTHORIZATION_FAILED (https://kafka.apache.org/protocol#protocol_error_codes).
_TOPIC_AUTHORIZATION_FAILED = 29


async def list_topics(settings: KafkaSettings) -> list[dict[str, Any]]:
    """One row per topic of section 2: name, partitions (None when not listed), cleanup policy,
    retention, and ``visible``: False for a topic the user may not describe.

    A broker lists only the topics the user has Describe on, so a topic missing from the listing
    may exist: asking for its configuration tells the two apart (``TOPIC_AUTHORIZATION_FAILED``
    for a topic the user may not see, whether or not it exists, as Kafka answers so as not to
    reveal it; ``UNKNOWN_TOPIC_OR_PARTITION`` for one that is missing), without the metadata
    request that could auto-create it.
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    specs = topic_specs(settings.prefix, settings.retention_ms, settings.actuator_clusters, settings.input_clusters)
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    hidden: set[str] = set()
    try:
        described = {t["topic"]: t for t in await admin.describe_topics()}
        present = [s.name for s in specs if s.name in described and described[s.name]["error_code"] == 0]
        absent = [s.name for s in specs if s.name not in present]
        if absent:
            for response in await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name) for name in absent]
            ):
                for resource in response.resources:
                    if resource[0] == _TOPIC_AUTHORIZATION_FAILED:
                        hidden.add(resource[3])
        configs: dict[str, dict[str, str]] = {}
        if present:
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name) for name in present]
            )
            for response in responses:
                for resource in response.resources:
                    configs[resource[3]] = {e[0]: e[1] for e in resource[4]}
    finally:
        await admin.close()
    rows = []
    for s in specs:
        cfg = configs.get(s.name, {})
        rows.append(
            {
                "topic": s.name,
                "partitions": len(described[s.name]["partitions"]) if s.name in present else None,
                "cleanup.policy": cfg.get("cleanup.policy"),
                "retention.ms": cfg.get("retention.ms"),
                "visible": s.name not in hidden,
                "expected": {"partitions": settings.partitions, **s.configs},
            }
        )
    return rows
