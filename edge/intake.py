"""What the applier reads: status-only messages for the reporter, and the consumer's lag.

The applier (:mod:`edge.applier`) reads its actuator topic and, unless its cluster has an actuator
topic of its own, the audit topic (:func:`streams.routing.applier_sources`).  A decision to apply
goes to :meth:`edge.applier.Applier.handle`; a blocked report or a dry-run decision
(:func:`streams.routing.status_only`, the rule the worker routes by) only to the policy status and
Events (:mod:`edge.reporter`).
"""

from __future__ import annotations

from typing import Any

import orjson

from edge.reporter import Reporter
from streams.routing import status_only

__all__ = ["consumer_lag", "is_status_only", "take_audit"]


def is_status_only(value: bytes | None) -> bool:
    """A message that is a blocked report or a dry-run decision: for the policy status and Events,
    never applied (:func:`streams.routing.status_only`)."""
    try:
        ev = orjson.loads(value) if value else None
    except orjson.JSONDecodeError:
        return False  # not a CloudEvent: the applier's handling refuses and audits it
    return status_only(ev)


def take_audit(reporter: Reporter, value: bytes | None) -> None:
    """Hand one audit message to the reporter (anything that is not a CloudEvent is ignored: the
    audit topic is the worker's, and its own consumers report bad lines)."""
    if not value:
        return
    try:
        ev = orjson.loads(value)
    except orjson.JSONDecodeError:
        return
    if isinstance(ev, dict):
        reporter.audit(ev)


async def consumer_lag(consumer: Any) -> int | None:
    """Messages between the consumer's positions and the high watermarks of its partitions (from
    the last fetch responses: no request of its own); ``None`` before the first fetch."""
    lag, known = 0, False
    try:
        for tp in consumer.assignment():
            hw = consumer.highwater(tp)
            if hw is None:
                continue  # not fetched yet: the position may not even be known
            lag += max(0, hw - await consumer.position(tp))
            known = True
    except Exception:  # a rebalance took the partition away meanwhile
        return None
    return lag if known else None
