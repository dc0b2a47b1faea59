"""agents/fence/batches.py take_batches: the worker's input in batches, straight from the channel's queue.

The queue is mode's ``ThrowableQueue`` and the messages are Faust's own ``Message``; the app is
reduced to what ``take_batches`` reads (the generation, the flow control, the acking topics and
the consumer's set of unacknowledged messages).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from faust.sensors import Monitor
from faust.types import TP
from faust.types.tuples import ConsumerMessage, Message
from mode.utils.queues import FlowControlEvent, ThrowableQueue

from agents.fence import take_batches

TOPIC = "tandem.metrics"


class _Event:
    def __init__(self, message: Message) -> None:
        self.message = message


class _Channel:
    def __init__(self, flow_control: FlowControlEvent) -> None:
        # As ``Channel.queue`` makes it: cleared when the flow resumes after a rebalance.
        self.queue: ThrowableQueue[Any] = ThrowableQueue(flow_control=flow_control, clear_on_resume=True)
        self.iterated = 0

    def __aiter__(self) -> _Channel:
        self.iterated += 1  # the conductor learns of the channel here
        return self

    async def __anext__(self) -> Any:  # a channel is an async iterator; take_batches reads its queue
        raise AssertionError("take_batches takes from the queue, not through the channel")


class _Stream:
    def __init__(self, app: _App) -> None:
        self.channel = _Channel(app.flow_control)


class _Topics:
    acking_topics = frozenset({TOPIC})


class _Consumer:
    def __init__(self) -> None:
        self.unacked: set[Message] = set()


class _App:
    def __init__(self) -> None:
        self.consumer = _Consumer()
        self.topics = _Topics()
        self.flow_control = FlowControlEvent()
        self.flow_control.resume()
        self.consumer_generation_id = 3


def _event(offset: int, generation: int = 3) -> _Event:
    msg = ConsumerMessage(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None, tp=TP(TOPIC, 0), generation_id=generation)
    return _Event(msg)


def _offsets(batch: list[Any]) -> list[int]:
    return [e.message.offset for e in batch]


def test_a_short_batch_is_handed_over_within_seconds_after_its_first_event() -> None:
    async def main() -> tuple[list[int], list[int], float]:
        app = _App()
        stream = _Stream(app)
        for i in range(2):
            stream.channel.queue.put_nowait(_event(i))
        batches = take_batches(app, stream, 10, within=0.05)
        loop = asyncio.get_running_loop()
        start = loop.time()
        first = _offsets(await asyncio.wait_for(batches.__anext__(), 5.0))
        took = loop.time() - start
        stream.channel.queue.put_nowait(_event(2))
        second = _offsets(await asyncio.wait_for(batches.__anext__(), 5.0))
        await batches.aclose()
        return first, second, took

    first, second, took = asyncio.run(main())
    assert first == [0, 1]
    assert second == [2]  # the get left waiting by the first batch kept its event
    assert 0.04 <= took < 2.0


def test_a_full_batch_is_handed_over_at_once() -> None:
    async def main() -> list[list[int]]:
        app = _App()
        stream = _Stream(app)
        for i in range(4):
            stream.channel.queue.put_nowait(_event(i))
        batches = take_batches(app, stream, 2, within=60.0)
        got = [_offsets(await asyncio.wait_for(batches.__anext__(), 1.0)) for _ in range(2)]
        await batches.aclose()
        assert stream.channel.iterated == 1  # registered with the conductor once
        return got

    # ``within`` is a minute: a full batch does not wait for it.
    assert asyncio.run(main()) == [[0, 1], [2, 3]]


def test_an_event_fetched_before_the_current_generation_is_dropped_untracked() -> None:
    async def main() -> tuple[list[int], _App, _Event]:
        app = _App()
        stream = _Stream(app)
        stale = _event(0, generation=2)  # fetched before the last rebalance
        stream.channel.queue.put_nowait(stale)
        stream.channel.queue.put_nowait(_event(1))
        batches = take_batches(app, stream, 2, within=0.05)
        got = _offsets(await asyncio.wait_for(batches.__anext__(), 5.0))
        await batches.aclose()
        return got, app, stale

    got, app, stale = asyncio.run(main())
    assert got == [1]
    assert stale.message.tracked is False
    assert [m.offset for m in app.consumer.unacked] == [1]  # tracked as Faust's stream tracks it


def test_an_event_taken_while_the_flow_is_suspended_is_dropped() -> None:
    async def main() -> tuple[list[int], bool]:
        app = _App()
        stream = _Stream(app)
        app.flow_control.suspend()
        during = _event(0)
        stream.channel.queue.put_nowait(during)
        stream.channel.queue.put_nowait(_event(1))
        batches = take_batches(app, stream, 1, within=0.05)
        task = asyncio.ensure_future(batches.__anext__())
        await asyncio.sleep(0.1)
        assert not task.done()  # both were dropped: nothing to hand over
        app.flow_control._suspend.clear()
        stream.channel.queue.put_nowait(_event(2))
        got = _offsets(await asyncio.wait_for(task, 5.0))
        await batches.aclose()
        return got, during.message.tracked

    got, tracked = asyncio.run(main())
    assert got == [2]
    assert tracked is False


def test_the_input_ends_when_the_channel_is_stopped() -> None:
    async def main() -> list[list[int]]:
        app = _App()
        stream = _Stream(app)
        stream.channel.queue.put_nowait(_event(0))
        got = []
        batches = take_batches(app, stream, 5, within=0.05)
        got.append(_offsets(await asyncio.wait_for(batches.__anext__(), 5.0)))
        stream.channel.queue.put_nowait(_event(1))
        stream.channel.queue._errors.append(StopAsyncIteration())  # what Faust throws in
        async for batch in batches:
            got.append(_offsets(batch))
        return got

    # The event still queued behind the error is never handed over (nor acknowledged).
    assert asyncio.run(asyncio.wait_for(main(), 5.0)) == [[0]]


def test_each_batch_tells_faust_monitor_its_partitions_took_events_as_a_stream_would() -> None:
    """Faust's consumer thread logs "Stream has not started processing TP(...)" at ERROR for a
    partition with lag and no ``Monitor.stream_inbound_time`` entry for ``stream_processing_timeout``:
    the stream's sensor call set it, and take_batches bypasses the stream."""

    async def main() -> tuple[dict[TP, float], float, float]:
        app = _App()
        app.monitor = Monitor()
        stream = _Stream(app)
        other = TP(TOPIC, 1)
        stream.channel.queue.put_nowait(_event(0))
        msg = ConsumerMessage(TOPIC, 1, 9, 0.0, 0, None, b"k", b"v", None, tp=other, generation_id=3)
        stream.channel.queue.put_nowait(_Event(msg))
        before = time.monotonic()
        batches = take_batches(app, stream, 2, within=60.0)
        await asyncio.wait_for(batches.__anext__(), 1.0)
        after = time.monotonic()
        await batches.aclose()
        return dict(app.monitor.stream_inbound_time), before, after

    inbound, before, after = asyncio.run(main())
    assert set(inbound) == {TP(TOPIC, 0), TP(TOPIC, 1)}
    assert all(before <= t <= after for t in inbound.values())
