"""The record of the dead-letter topic (docs/contract.md §2): one shape for every writer.

The worker writes one for an input it cannot take, the collector one for a policy object it
refuses before sending it; a reader of ``<prefix>deadletter`` should not have to know which.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

__all__ = ["deadletter_record"]


def deadletter_record(
    topic: str, partition: int | None, offset: int | None, key: bytes | None, value: bytes | None, error: str
) -> bytes:
    """The dead-letter value: where the message was, its original bytes, and why it was refused.

    ``partition`` and ``offset`` are None for a message that never was on ``topic`` (the
    collector's refused policies).  ``key`` and ``value`` are UTF-8 text when they decode as such,
    else base64 with ``key_base64``/``value_base64`` set to true.
    """
    record: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
    for name, data in (("key", key), ("value", value)):
        if data is None:
            record[name] = None
            continue
        try:
            record[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            record[name] = base64.b64encode(data).decode("ascii")
            record[f"{name}_base64"] = True
    record["error"] = error
    return orjson.dumps(record)
