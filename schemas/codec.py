"""Bytes to core events and back, with orjson: one codec for replay files and Kafka messages."""

from __future__ import annotations

from typing import Any

import orjson

from scaling.errors import InvalidEvent
from scaling.events import Event, decode_event

__all__ = ["decode", "encode", "loads"]


def loads(data: bytes | str) -> Any:
    """Parse JSON, turning a syntax error into an :class:`InvalidEvent` that says where."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent("", f"not valid JSON ({exc.msg} at char {exc.pos})") from None


def decode(data: bytes | str) -> tuple[Any, Event]:
    """Parse and validate one event; returns the raw JSON value and the typed event."""
    raw = loads(data)
    return raw, decode_event(raw)


def encode(value: Any) -> bytes:
    """Serialise an output event; key order is the insertion order, so output is byte-stable."""
    return orjson.dumps(value)
