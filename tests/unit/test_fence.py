"""agents/fence.py: Faust's recovery resumes the stream partitions only after the seek (issue #18)."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.tables.recovery import Recovery
from faust.types import TP

from agents.fence import _resume_after, install_recovery_order_fix

A, B = TP("tandem.hpa", 0), TP("tandem.hpa", 1)


class _Consumer:
    def __init__(self, calls: list[str], assigned: set[TP]) -> None:
        self.calls = calls
        self.assigned = assigned

    def resume_partitions(self, tps: Any) -> None:
        self.calls.append(f"resume {sorted(tp.partition for tp in tps)}")

    def assignment(self) -> set[TP]:
        return self.assigned


class _App:
    def __init__(self, consumer: _Consumer) -> None:
        self.consumer = consumer
        self.consumer_generation_id = 7


class _Recovery:
    """The order of Faust 0.15.3's ``_resume_streams``: resume, seek, clear the queues."""

    def __init__(self, app: _App, rebalance_during_seek: bool = False) -> None:
        self.app = app
        self.rebalance_during_seek = rebalance_during_seek

    async def resume_streams(self) -> None:
        consumer = self.app.consumer
        consumer.resume_partitions({A, B})
        consumer.calls.append("seek to committed")
        if self.rebalance_during_seek:
            self.app.consumer_generation_id += 1
        consumer.calls.append("flow control resumed (queues cleared)")


def test_stream_partitions_are_resumed_after_the_seek_and_the_cleared_queues() -> None:
    calls: list[str] = []
    recovery = _Recovery(_App(_Consumer(calls, {A, B})))
    asyncio.run(_resume_after(_Recovery.resume_streams)(recovery))
    assert calls == ["seek to committed", "flow control resumed (queues cleared)", "resume [0, 1]"]
    assert "resume_partitions" not in vars(recovery.app.consumer)  # the method is the class's again


def test_only_partitions_still_assigned_are_resumed() -> None:
    calls: list[str] = []
    recovery = _Recovery(_App(_Consumer(calls, {B})))
    asyncio.run(_resume_after(_Recovery.resume_streams)(recovery))
    assert calls[-1] == "resume [1]"


def test_nothing_is_resumed_when_a_new_rebalance_began_meanwhile() -> None:
    """The next recovery resumes them itself, after its own seek."""
    calls: list[str] = []
    recovery = _Recovery(_App(_Consumer(calls, {A, B})), rebalance_during_seek=True)
    asyncio.run(_resume_after(_Recovery.resume_streams)(recovery))
    assert calls == ["seek to committed", "flow control resumed (queues cleared)"]


def test_the_fix_wraps_both_recovery_paths_of_faust_once() -> None:
    install_recovery_order_fix()
    install_recovery_order_fix()
    for name in ("_resume_streams", "on_recovery_completed"):
        method = getattr(Recovery, name)
        assert hasattr(method, "__wrapped__") and not hasattr(method.__wrapped__, "__wrapped__")
