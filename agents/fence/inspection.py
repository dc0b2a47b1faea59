"""Read-only inspection of Faust's and aiokafka's private state, for the pipeline's checks and
stall reports (faust-streaming 0.15.3, aiokafka 0.14.0: :mod:`agents.fence.upstream`).

Nothing here changes what it reads: each function says which private name it reads and why no
public one does the job.  :func:`in_consumer_thread` runs such a reading (or an aiokafka call that
must run there) on the thread that owns the aiokafka consumer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aiokafka.structs import TopicPartition
from faust.streams import _current_event  # the one context variable Faust reads and sets nowhere public
from faust.types import TP

__all__ = [
    "aiokafka_fetch_state",
    "await_chain",
    "committed_offsets",
    "current_event",
    "faust_fetch_state",
    "fetcher_state",
    "in_consumer_thread",
    "take_parked_error",
    "task_state",
]

T = TypeVar("T")

#: The context variable Faust's tables read "the current event" (hence its partition) from.  A
#: batched agent (:func:`take_batches`) has none, so the pipeline sets one per workload slot
#: write; Faust exports no setter.
current_event = _current_event


def committed_offsets(consumer: Any) -> Mapping[TP, int | None]:
    """The offsets Faust seeked each assigned topic-partition to (``Consumer._committed_offset``).

    Faust records them when it resumes the streams after a rebalance and exports no accessor; the
    pipeline needs them to tell an input that had nothing to deliver from one not read yet.
    """
    return getattr(consumer, "_committed_offset", {})


def faust_fetch_state(consumer: Any, tp: TP) -> str:
    """Where Faust stands on fetching ``tp``, for a stall report: Faust asks aiokafka only for its
    *active* partitions (``Consumer._active_partitions``: assigned, minus ``_paused_partitions``,
    minus ``_buffered_partitions`` whose stream buffer is full), none of which it exports."""
    active = getattr(consumer, "_active_partitions", None)
    paused = getattr(consumer, "_paused_partitions", set())
    buffered = getattr(consumer, "_buffered_partitions", set())
    seek = committed_offsets(consumer).get(tp)
    read = getattr(consumer, "_read_offset", {}).get(tp)
    return (
        f"faust: active={active is None or tp in active} paused={tp in paused} buffer-full={tp in buffered} "
        f"sought-to={seek} read-offset={read}"
    )


def aiokafka_fetch_state(consumer: Any, tp: TP) -> str:
    """Where aiokafka stands on fetching ``tp`` (run it on the consumer's thread): assigned, paused,
    its position, and whether fetched records of it wait in the fetcher's buffer (a partition with
    buffered records is not fetched again until they are taken).  Private in aiokafka 0.14:
    ``AIOKafkaConsumer._subscription`` and ``_fetcher._records``."""
    atp = TopicPartition(tp.topic, tp.partition)
    sub = getattr(getattr(consumer, "_subscription", None), "subscription", None)
    assignment = getattr(sub, "assignment", None)
    state = assignment.state_value(atp) if assignment is not None else None
    if state is None:
        return "aiokafka: not assigned"
    position = state.position if state.has_valid_position else "awaiting reset"
    records = getattr(getattr(consumer, "_fetcher", None), "_records", {})
    buffered = records.get(atp)
    waiting = "none" if buffered is None else type(buffered).__name__
    in_flight = sorted(getattr(getattr(consumer, "_fetcher", None), "_in_flight", ()))
    # What the last successful fetch response said of this partition (``highwater``, and its
    # wall-clock ``timestamp`` in ms, both set only on a response without error): an old one
    # means no response came back for it; a recent one whose high watermark is the position
    # means the broker itself offers nothing more.
    highwater = getattr(state, "highwater", None)
    stamp = getattr(state, "timestamp", None)
    answered = "never" if not stamp else f"{max(0.0, time.time() - stamp / 1000):.0f} s ago"
    return (
        f"aiokafka: paused={state.paused} position={position} buffered={waiting} in-flight-nodes={in_flight} "
        f"highwater={highwater} last-fetch-response={answered}"
    )


def fetcher_state(consumer: Any) -> str:
    """aiokafka's fetch routine, its tasks still pending (where each waits) and its group
    coordinator's committed-offset refresh routine, for a stall report (run it on the consumer's
    thread).  Private in aiokafka 0.14: ``Fetcher._fetch_task``, ``Fetcher._pending_tasks``,
    ``GroupCoordinator._commit_refresh_task``."""
    fetcher = getattr(consumer, "_fetcher", None)
    pending = getattr(fetcher, "_pending_tasks", None) or ()
    tasks = [await_chain(t.get_coro()) for t in list(pending) if not t.done()]
    fetching = task_state(getattr(fetcher, "_fetch_task", None))
    routine = task_state(getattr(getattr(consumer, "_coordinator", None), "_commit_refresh_task", None))
    return (
        f"aiokafka fetcher: routine {fetching}, pending tasks [{'; '.join(tasks)}], committed-offset refresh {routine}"
    )


def task_state(task: Any) -> str:
    """``none``, ``running``, or how a finished task ended: ``ended (cancelled)`` or ``ended (<its exception>)``."""
    if task is None:
        return "none"
    if not task.done():
        return "running"
    return "ended (cancelled)" if task.cancelled() else f"ended ({task.exception()!r})"


def await_chain(coro: Any) -> str:
    """Where a suspended coroutine waits: each coroutine of its ``await`` chain as
    ``function:line``, outermost first, and what the innermost one awaits (a future's type).
    ``Task.get_stack`` gives only the outermost frame of a suspended coroutine."""
    parts: list[str] = []
    for _ in range(32):
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            parts.append(type(coro).__name__)
            break
        parts.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        inner = getattr(coro, "cr_await", None)
        if inner is None:
            inner = getattr(coro, "gi_yieldfrom", None)
        if inner is None:
            break
        coro = inner
    return " > ".join(parts)


async def in_consumer_thread(app: Any, fn: Callable[[Any], T]) -> T:
    """Run ``fn(aiokafka_consumer)`` on the thread that owns the aiokafka consumer.

    Faust runs aiokafka on its own thread and event loop (``Consumer._thread``); aiokafka's
    ``pause``/``resume``/``paused`` must run there (pausing creates a future of that loop).
    Faust's public ``pause_partitions`` is not the same thing: it only filters what Faust hands
    to the streams and drops records it already fetched (see ``agents.flow.FlowControl.fetch_control``).
    """
    thread = app.consumer._thread
    consumer = thread._ensure_consumer()
    result: T = await thread.call_thread(fn, consumer)
    return result


def take_parked_error(consumer: Any) -> tuple[BaseException | None, int]:
    """On the consumer's thread: the error aiokafka's group coordinator parked for the application,
    taken as ``getmany`` takes it, and the group generation (-1 until joined).

    The one function here that changes what it reads: ``GroupCoordinator.check_errors`` clears the
    parked error as it raises it, which is also what makes the coordinator try again.  aiokafka
    parks e.g. ``GroupAuthorizationFailedError`` until the application calls ``getmany``/``getone``;
    Faust reads through the fetcher and never does, so without this a worker whose consumer group
    Kafka refuses waits in silence (agents/groupwatch.py says it).  Reads ``_coordinator``,
    ``_pending_exception`` and ``generation``: aiokafka has no public way to ask for any of them."""
    coordinator = consumer._coordinator
    parked: BaseException | None = None
    if coordinator._pending_exception is not None:
        try:
            coordinator.check_errors()
        except Exception as exc:
            parked = exc
    return parked, int(coordinator.generation)
