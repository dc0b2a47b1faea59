"""Decision and blocked CloudEvents (docs/contract.md §4), with deterministic ids.

The id is a hash of the event type and its ``data``: the same input gives the same decision and
so the same id, through Kafka or embedded, which is what lets an applier apply an id at most once
however often a replay or a restart repeats it.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson

from .vocabulary import APPLIED, APPLY_FAILED, BLOCKED, DECISION

__all__ = ["APPLIED", "APPLY_FAILED", "BLOCKED", "DECISION", "cloudevent", "event_id", "rfc3339"]


def rfc3339(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def event_id(type_: str, data: Any) -> str:
    digest = hashlib.sha256(type_.encode() + b"\0" + orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()[:32]


def cloudevent(type_: str, cluster: str, subject: str, ts: float, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": event_id(type_, data),
        "source": f"/tandem/{cluster}",
        "subject": subject,
        "time": rfc3339(ts),
        "type": type_,
        "datacontenttype": "application/json",
        "data": data,
    }
