"""The ``history`` envelope (docs/contract.md §3): past events of one workload, learned at the present.

Its own ``ts`` is the present (when it was published), which places it among live events as any
event is placed; its ``events`` are past ``metric`` and ``workload`` events of the same workload
in event-time order, none after ``until`` (the end of the past it covers) and ``until`` not after
``ts``.  What the core does with it is ``scaling.learn``'s: it learns, it never decides a past tick.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidEvent
from .checks import COMMON, json_list, number
from .model import HistoryEvent, MetricEvent, WorkloadEvent, WorkloadRef

__all__ = ["HISTORY_FIELDS", "HistoryEvent", "decode_history"]

#: The fields of a history envelope.
HISTORY_FIELDS = COMMON | {"until", "events"}
#: The event types an envelope may carry: the samples the recommenders learn from and the
#: replicas a replica history learns from.
CARRIED = ("metric", "workload")


def decode_history(
    obj: Mapping[str, Any], ts: float, ref: WorkloadRef, decode_event: Callable[[object], object]
) -> HistoryEvent:
    """Decode an envelope whose common fields are checked; ``decode_event`` decodes what it carries."""
    if "until" not in obj:
        raise InvalidEvent("until", "required end of the history is missing")
    until = number(obj["until"], "until")
    if until > ts:
        raise InvalidEvent("until", f"{until} is after the envelope's ts {ts}: history is the past")
    raw_events = json_list(obj, "events")
    if raw_events is None:
        raise InvalidEvent("events", "required list of past events is missing")
    events: list[MetricEvent | WorkloadEvent] = []
    last = None
    for i, raw in enumerate(raw_events):
        where = f"events[{i}]"
        kind = raw.get("type") if isinstance(raw, Mapping) else None
        if kind not in CARRIED:
            raise InvalidEvent(f"{where}.type", f"an envelope carries {' and '.join(CARRIED)} events, not {kind!r}")
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            raise exc.within(where) from None
        assert isinstance(event, MetricEvent | WorkloadEvent)
        if event.workload != ref:
            raise InvalidEvent(f"{where}.workload", f"{event.workload.key} is not the envelope's {ref.key}")
        if event.ts > until:
            raise InvalidEvent(f"{where}.ts", f"{event.ts} is after until {until}")
        if last is not None and event.ts < last:
            raise InvalidEvent(f"{where}.ts", f"{event.ts} is before the event ahead of it ({last}): not in time order")
        last = event.ts
        events.append(event)
    return HistoryEvent(ts, ref, until, tuple(events))
