"""agents/checkpoint.py: the state's changelog acknowledged first, then the messages.

The broker's acknowledgement of a checkpoint's slot writes is waited for in the background while
the agent goes on; these tests drive :meth:`Checkpointer.checkpoint` with its slot writes left out,
the changelog records as futures the test resolves, in the role of the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Any

from agents.checkpoint import Checkpointer
from agents.fence import ConfirmedTable
from agents.shared import Assignment


class _Message:
    def __init__(self, offset: int, acks: list[Any]) -> None:
        self.offset = offset
        self._acks = acks

    def ack(self) -> bool:
        self._acks.append(self.offset)
        return True


class _Table:
    wait_confirmed = staticmethod(ConfirmedTable.wait_confirmed)


class _Consumer:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        #: Set to a future to make a commit wait for it (a group that rebalances, a slow broker).
        self.gate: asyncio.Future[None] | None = None

    async def commit(self) -> bool:
        if self.gate is not None:
            await self.gate
        self.log.append("commit")
        return True


class _App:
    rebalancing = False
    should_stop = False

    def __init__(self, log: list[str]) -> None:
        self.consumer = _Consumer(log)


def _pipeline(writes: list[list[asyncio.Future[Any]]]) -> tuple[Checkpointer, list[str]]:
    """Checkpoints whose writes are the next list of ``writes`` (their changelog records)."""
    log: list[str] = []
    p = Checkpointer(
        _App(log),
        _Table(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # no merge: the slot writes are the test's
        "t.metrics",
        1.0,
        defaultdict(int),
        Assignment(generation=1),
    )

    async def write_slots(everything: bool) -> list[Any]:
        log.append("write everything" if everything else "write")
        return writes.pop(0) if writes else []

    p.write_slots = write_slots  # type: ignore[method-assign]
    return p, log


def test_messages_are_acknowledged_only_once_the_broker_has_their_state() -> None:
    async def main() -> list[list[int]]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        p, _ = _pipeline([[record]])
        acks: list[int] = []
        p.held = [_Message(0, acks), _Message(1, acks)]
        await p.checkpoint()  # returns at once: the agent goes on
        seen = [list(acks)]
        await asyncio.sleep(0.01)
        seen.append(list(acks))
        record.set_result(None)  # the broker acknowledges the slot write
        await p.settle()
        seen.append(list(acks))
        return seen

    assert asyncio.run(main()) == [[], [], [0, 1]]


def test_offsets_are_committed_as_soon_as_the_broker_has_the_state_not_at_the_next_commit_interval() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        p, log = _pipeline([[record]])
        events: list[Any] = log  # acknowledgements (offsets) and commits, in the order they happen
        p.held = [_Message(4, events)]
        await p.checkpoint()
        events.append("the broker answers")
        record.set_result(None)
        await p.settle()  # the state is acknowledged: the commit follows, in a task of its own
        assert p.committing is not None
        await p.committing
        return events

    assert asyncio.run(main()) == ["write", "the broker answers", 4, "commit"]


def test_a_slow_commit_holds_back_neither_the_next_checkpoint_nor_a_rebalance() -> None:
    async def main() -> tuple[list[str], list[int]]:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        p, log = _pipeline([[first], [second]])
        p.app.consumer.gate = loop.create_future()  # the commit does not return
        acks: list[int] = []
        p.held = [_Message(0, acks)]
        await p.checkpoint()
        first.set_result(None)
        await asyncio.wait_for(p.settle(), timeout=1.0)
        p.held = [_Message(1, acks)]
        second.set_result(None)
        await asyncio.wait_for(p.checkpoint(settle=True), timeout=1.0)  # a rebalance's checkpoint
        return log, acks

    assert asyncio.run(main()) == (["write", "write everything"], [0, 1])


def test_no_commit_of_its_own_while_faust_rebalances() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        p, log = _pipeline([[record]])
        p.app.rebalancing = True  # Faust commits what it may itself
        acks: list[int] = []
        p.held = [_Message(4, acks)]
        await p.checkpoint()
        record.set_result(None)
        await p.settle()
        await asyncio.sleep(0)  # a commit task, had one been started, would have run
        return [*log, f"acknowledged: {acks}"]

    assert asyncio.run(main()) == ["write", "acknowledged: [4]"]


def test_the_next_checkpoint_waits_for_the_one_in_flight_before_it_writes() -> None:
    async def main() -> tuple[list[str], list[int]]:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        p, log = _pipeline([[first], [second]])
        acks: list[int] = []
        p.held = [_Message(0, acks)]
        await p.checkpoint()
        p.held = [_Message(1, acks)]
        nxt = asyncio.ensure_future(p.checkpoint())
        await asyncio.sleep(0.01)
        log.append(f"second written before the first was acknowledged: {log.count('write') == 2}")
        first.set_result(None)
        await nxt
        second.set_result(None)
        await p.settle()
        return log, acks

    log, acks = asyncio.run(main())
    writes = [entry for entry in log if entry != "commit"]  # commits run in tasks of their own
    assert writes == ["write", "second written before the first was acknowledged: False", "write"]
    assert acks == [0, 1]


def test_settle_returns_after_the_acknowledgements_a_rebalance_waits_for() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        loop.call_later(0.02, record.set_result, None)
        p, _ = _pipeline([[record]])
        acks: list[int] = []
        p.held = [_Message(7, acks)]
        await p.checkpoint(settle=True)
        return acks

    assert asyncio.run(main()) == [7]


def test_a_checkpoint_that_writes_nothing_acknowledges_at_once() -> None:
    async def main() -> list[int]:
        p, _ = _pipeline([])
        acks: list[int] = []
        p.held = [_Message(3, acks)]  # e.g. a redelivered message, or tandem's own recommendation back
        await p.checkpoint()
        return acks

    assert asyncio.run(main()) == [3]


def test_a_checkpoint_from_before_a_rebalance_is_not_acknowledged_after_it() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        p, _ = _pipeline([[record]])
        acks: list[int] = []
        p.held = [_Message(5, acks)]
        await p.checkpoint()
        p.assignment.generation += 1  # the partitions changed hands meanwhile
        record.set_result(None)
        await p.settle()
        return acks

    assert asyncio.run(main()) == []


def test_a_checkpoint_given_up_by_its_caller_still_finishes_by_itself() -> None:
    async def main() -> tuple[list[int], bool]:
        loop = asyncio.get_running_loop()
        record = loop.create_future()
        p, _ = _pipeline([[record]])
        acks: list[int] = []
        p.held = [_Message(9, acks)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(p.checkpoint(settle=True), timeout=0.02)  # a rebalance's limit
        record.set_result(None)  # the broker answers late
        await p.settle()
        return acks, p.confirming is None

    assert asyncio.run(main()) == ([9], True)
