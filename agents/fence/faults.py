"""Fault hooks for the tests (the ``TANDEM_FAULT_*`` settings): each makes Faust or aiokafka
misbehave the way a production incident did, so that the worker's answer to it is tested.  Never
installed by a worker that serves real traffic without one of those settings."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from faust.types import FutureMessage

from .watch import CANCEL_SAFE

__all__ = ["delay_changelog_sends", "delay_seek_after_recovery", "hang_one_fetch"]

log = logging.getLogger("tandem.worker")


def hang_one_fetch(consumer: Any, trigger: str) -> None:
    """Fault injection for the tests: once the file ``trigger`` exists, aiokafka's next fetch
    request never returns, the shape of the stall :class:`FetchWatch` ends (cancelled, it returns
    "nothing new", as aiokafka's does)."""
    fetcher = consumer._fetcher
    original = fetcher._proc_fetch_request
    hung = False

    async def proc(assignment: Any, node_id: Any, request: Any) -> Any:
        nonlocal hung
        if not hung and os.path.exists(trigger):
            hung = True
            log.warning("tandem worker: fault injection: a fetch request to node %s hangs", node_id)
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                return False
        return await original(assignment, node_id, request)

    fetcher._proc_fetch_request = proc
    CANCEL_SAFE.add(proc.__code__)


def delay_changelog_sends(table: Any, seconds: float) -> None:
    """Fault injection for the tests: each changelog record of ``table`` leaves the producer buffer
    ``seconds`` late (a broker slow to take writes: the "producer buffer full" of issue #18)."""
    topic = table.changelog_topic
    publish = topic.publish_message

    async def slow_publish(fut: FutureMessage, wait: bool = False) -> Any:
        await asyncio.sleep(seconds)
        return await publish(fut, wait=wait)

    topic.publish_message = slow_publish
    log.warning("tandem worker: fault injection: each state changelog record is sent %.2f s late", seconds)


def delay_seek_after_recovery(app: Any, seconds: float) -> None:
    """Fault injection for the tests: Faust's seek at the end of each recovery takes ``seconds``
    longer, the window in which faust-streaming/faust#596 lost records (see below)."""

    async def slow_down(sender: Any = None, **kwargs: Any) -> None:
        consumer = app.consumer
        if getattr(consumer, "_tandem_slow_seek", False):
            return
        consumer._tandem_slow_seek = True
        seek = consumer.perform_seek

        async def slow_seek() -> None:
            await asyncio.sleep(seconds)
            await seek()

        consumer.perform_seek = slow_seek
        log.warning("tandem worker: fault injection: Faust's seek after recovery takes %.1f s longer", seconds)

    app.on_rebalance_complete.connect(slow_down)
