"""What an input record of the worker's merge (:mod:`streams.merge`) must be: on its type's topic,
keyed by its workload (:func:`check_routing`, :func:`policy_key`, :func:`partition_key`); a
producer's watermark (:func:`decode_watermark`, :func:`watermark`); a policy deletion
(:func:`tombstone`).  Pure; no Faust.
"""

from __future__ import annotations

import math
from typing import Any

from scaling.errors import InvalidEvent
from scaling.events import Event, PolicyEvent, WorkloadRef
from scaling.spelling import did_you_mean
from scaling.vocabulary import TOPIC_OF, WATERMARK

__all__ = ["Misrouted", "check_routing", "decode_watermark", "partition_key", "policy_key", "tombstone", "watermark"]


class Misrouted(InvalidEvent):
    """A valid record on a topic, key or partition it does not belong on (dead-lettered as
    ``misrouted``): the wrong type's topic, another cluster's own topic, or a key that is not its
    workload's."""


def check_routing(kind: str, key: bytes | None, event: Event) -> None:
    """An input must sit on its type's topic, keyed by its workload (docs/contract.md §1-2); a
    policy record may be keyed by its workload and policy (:func:`policy_key`)."""
    if TOPIC_OF[event.type] != kind:  # a history envelope travels on the metrics topic
        raise Misrouted("type", f"a {event.type!r} event on the topic of {kind!r} events")
    expected = event.workload.key
    if key is None:
        raise Misrouted("key", f"the message has no key; expected the workload key {expected!r}")
    if key == expected.encode():
        return
    if isinstance(event, PolicyEvent) and event.identity is not None and key == policy_key(event):
        return
    shown = key.decode("utf-8", "backslashreplace")
    if isinstance(event, PolicyEvent) and event.identity is not None:
        raise Misrouted(
            "key", f"message key {shown!r} is neither {policy_key(event).decode()!r} nor the workload key {expected!r}"
        )
    raise Misrouted("key", f"message key {shown!r} is not the event's workload key {expected!r}")


def policy_key(event: PolicyEvent) -> bytes:
    """``<workload key>#<policy identity>``: the key of a policy record on the compacted policies
    topic, one per policy, so that compaction keeps every policy of a workload and not only the
    latest one (docs/contract.md §2).  It is partitioned by :func:`partition_key`."""
    return f"{event.workload.key}#{event.identity}".encode()


def partition_key(key: bytes) -> bytes:
    """The part of a record key that chooses its partition: the workload key."""
    return key.partition(b"#")[0]


_WATERMARK_FIELDS = ("type", "cluster", "ts")


def decode_watermark(key: bytes | None, raw: Any) -> tuple[str, float]:
    """``(cluster, ts)`` of a watermark record (docs/contract.md §3a), or :class:`InvalidEvent`.

    ``{"type": "watermark", "cluster": C, "ts": T}``, keyed by the cluster's name: every event of
    cluster ``C`` with ``ts <= T`` was written to this topic-partition before this record.
    """
    if not isinstance(raw, dict):
        raise InvalidEvent("", "a watermark must be a JSON object")
    for name in raw:
        if name not in _WATERMARK_FIELDS:
            raise InvalidEvent(str(name), f"unknown field of a watermark{did_you_mean(str(name), _WATERMARK_FIELDS)}")
    cluster = raw.get("cluster")
    if not isinstance(cluster, str) or not cluster or "/" in cluster:
        raise InvalidEvent("cluster", f"expected a cluster name, got {cluster!r}")
    ts = raw.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise InvalidEvent("ts", f"expected a finite number of seconds, got {ts!r}")
    if key != cluster.encode():
        shown = "no key" if key is None else repr(key.decode("utf-8", "backslashreplace"))
        raise InvalidEvent("key", f"a watermark is keyed by its cluster {cluster!r}, got {shown}")
    return cluster, float(ts)


def watermark(cluster: str, ts: float) -> dict[str, Any]:
    """The watermark record a producer writes (:func:`decode_watermark` reads it)."""
    return {"type": WATERMARK, "cluster": cluster, "ts": ts}


def tombstone(key: bytes | None, ts: float) -> dict[str, Any]:
    """The ``policy`` event of a ``null`` message on the compacted policies topic (a deletion): of
    the policy its key names (:func:`policy_key`), or of every policy of the workload."""
    if key is None:
        raise InvalidEvent("key", "a null policy message needs the workload key")
    try:
        text = key.decode()
    except UnicodeDecodeError:
        raise InvalidEvent("key", "the key is not UTF-8") from None
    workload, _, identity = text.partition("#")
    ref = WorkloadRef.from_key(workload)
    event: dict[str, Any] = {"type": "policy", "ts": ts, "workload": ref.as_dict(), "policy": None}
    if identity:
        parts = identity.split("/")
        if len(parts) != 4 or not all(parts[:2]) or not parts[3]:
            raise InvalidEvent("key", f"{identity!r} after '#' is not a policy (group/Kind/namespace/name)")
        group, kind, namespace, name = parts
        event["deleted"] = {"apiVersion": group, "kind": kind, "namespace": namespace or "default", "name": name}
    return event
