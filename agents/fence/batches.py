"""The agent's input in batches, straight from the channel's queue: Faust's stream loop
(``Stream._py_aiter`` under ``noack_take``) re-implemented for what the pipeline uses of it
(faust-streaming 0.15.3: :mod:`agents.fence.upstream` checks both methods)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["take_batches"]


async def take_batches(app: Any, stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    """The agent's input in batches, taken from its channel's queue without Faust's stream.

    Faust's ``Stream.noack_take`` runs every message through the stream's generic loop
    (``Stream._py_aiter``): an event-loop round trip (``asyncio.sleep(0)``), a context variable
    and a weak reference, the sensors, the stream's processors (the take buffer is one, under a
    tracing context manager), ``on_merge`` and a second, passive iteration that feeds the take
    buffer: about a fifth of a live worker's CPU at 7,500 workloads, for a pipeline that uses none
    of it (docs/performance.md, "The worker").  The conductor still delivers each
    message as an ``Event`` into the channel's queue (flow control, the buffer's back-pressure on
    the fetcher, the rebalance's ``clear``), and this takes from that queue what the stream did:

    * ``aiter(stream.channel)``, as the stream does on its first iteration: it registers the
      channel with the conductor, which is what subscribes the consumer to the topics;
    * an event whose message was fetched before the current rebalance generation, or that comes
      while the flow is suspended (a rebalance under way), is dropped unacknowledged: whoever owns
      its partition next reads it again from the committed offset (the stream skipped them too);
    * a taken message is tracked as the stream tracks it (``Message.tracked``, the consumer's
      ``unacked`` set), so ``Consumer.wait_empty`` waits for it as for any other;
    * a batch is handed over once it holds ``max_`` events or ``within`` seconds after its first,
      as ``noack_take(max_, within)`` did; what is already queued is taken without waiting;
    * each batch stamps its topic-partitions in the monitor's ``stream_inbound_time``, as the
      stream's sensor call did (``Monitor.on_stream_event_in``): Faust's consumer thread reads it
      to tell a stream that stopped taking events (``verify_event_path``), and without it logged
      "Stream has not started processing TP(...)" at ERROR for a healthy worker that had had lag
      for ``stream_processing_timeout`` (a large backlog: ``bench/capacity.py``'s fleets).

    The events are acknowledged by their owner (``Event.ack``), at the checkpoint that covers
    them, as before.  Private names: ``Consumer.unacked`` (the set Faust's stream inlines
    ``track_message`` into), ``App.consumer_generation_id``, ``App.flow_control`` and the channel's
    ``queue`` (mode's ``ThrowableQueue``: ``get_nowait`` raises an error the conductor pushed).
    """
    take = _Take(app, aiter(stream.channel))
    inbound = getattr(getattr(app, "monitor", None), "stream_inbound_time", None)
    try:
        while True:
            batch = await take.batch(max_, within)
            if batch:
                if inbound is not None:
                    stamp = time.monotonic()  # the clock Faust's monitor and consumer thread use
                    for event in batch:
                        inbound[event.message.tp] = stamp
                yield batch
    except StopAsyncIteration:
        # The channel ends (the agent stops: Faust throws this into its queue, and the stream's
        # own loop ends on it too).  What was taken and not handed over is not acknowledged.
        return
    finally:
        take.cancel()


class _Take:
    """The channel's queue, taken from a batch at a time, with one waiting ``get`` kept across batches."""

    def __init__(self, app: Any, channel: Any) -> None:
        self.app = app
        self.queue = channel.queue
        self.unacked_add = app.consumer.unacked.add
        self.acking = app.topics.acking_topics
        self.flow_active = app.flow_control.is_active
        self.loop = asyncio.get_running_loop()
        self.getter: asyncio.Future[Any] | None = None

    async def batch(self, max_: int, within: float) -> list[Any]:
        """Up to ``max_`` events, handed over ``within`` seconds after the first (what is queued is
        taken without waiting); an empty list when every event taken was dropped."""
        app, queue, loop = self.app, self.queue, self.loop
        batch: list[Any] = []
        first_at = 0.0
        while len(batch) < max_:
            getter = self.getter
            if getter is not None:
                if not getter.done():
                    if batch:
                        left = first_at + within - loop.time()
                        if left <= 0:
                            break
                        await asyncio.wait((getter,), timeout=left)
                        if not getter.done():
                            break  # the batch's time is up: hand over what it has
                    else:
                        await getter
                event = getter.result()
                self.getter = None
            elif queue.empty():
                # One waiting ``get`` at a time, kept across batches rather than cancelled:
                # a ``get`` cancelled by a timeout as it completes would lose its event.
                self.getter = asyncio.ensure_future(queue.get())
                continue
            else:
                event = queue.get_nowait()
            if not batch:
                first_at = loop.time()
            message = event.message
            if not self.flow_active() or message.generation_id != app.consumer_generation_id:
                continue
            if not message.tracked and message.topic in self.acking:
                message.tracked = True
                self.unacked_add(message)
            batch.append(event)
        return batch

    def cancel(self) -> None:
        if self.getter is not None:
            self.getter.cancel()
