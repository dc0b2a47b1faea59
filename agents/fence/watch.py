"""The fetch watch: aiokafka fetcher tasks that hang while inputs stall, ended where that is safe
(aiokafka 0.14.0: :mod:`agents.fence.upstream` checks the code it recognises)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.fetcher import Fetcher

from .inspection import await_chain, task_state

__all__ = ["CANCEL_SAFE", "FetchWatch"]


class FetchWatch:
    """aiokafka fetcher tasks that stay pending while inputs stall, and their end (stop 27).

    aiokafka's fetcher sends at most one request per broker at a time: a node with a task in
    ``Fetcher._pending_tasks`` (its id in ``_in_flight``) gets no new fetch until that task ends,
    and in a one-broker cluster that is every input.  Each request of such a task has a timeout
    (``request_timeout_ms``), but a task can also wait with none: ``_update_fetch_positions``
    awaits the group coordinator's committed-offset refresh (``TopicPartitionState.fetch_committed``),
    which is never answered if that refresh routine ended: inputs with lag, a valid position,
    nothing buffered and a fetch in flight to the only broker, for minutes after the broker was
    SIGKILLed and restarted, and no cause in the log.

    So while an input stalls, :meth:`end_hung` (on the consumer's thread) ends every fetcher task
    it has seen pending for ``limit`` seconds, naming where each waited.  Ending one is safe only
    where its body catches the cancellation and returns "nothing new", after which the fetcher's
    routine builds the next requests from the positions, as after any failed fetch; a task that
    ends *cancelled* instead ends the routine itself (``fut.result()`` raises in it), and the
    worker would never fetch again.  In aiokafka 0.14 that holds for ``_update_fetch_positions``
    at each of its waits, and for ``_proc_fetch_request`` only while it waits in the client's
    ``send``: its back-off ``sleep`` after a failed request is outside the ``try`` that catches
    the cancellation.  So only tasks at those points are ended (:func:`_ends_cleanly`), others are
    named and left, and only once seen pending in an earlier round (so begun: a task cancelled
    before its first step ends cancelled).  Private in aiokafka 0.14: ``AIOKafkaConsumer._fetcher``,
    ``Fetcher._pending_tasks`` and the two methods' code.
    """

    def __init__(self) -> None:
        #: task -> monotonic time it was first seen pending (only tasks still pending are kept).
        self._first_seen: dict[Any, float] = {}

    def end_hung(self, consumer: Any, now: float, limit: float) -> list[str]:
        """Cancel the fetcher tasks seen pending for ``limit`` s where that is safe; say where each
        waited (``ended: ...`` or ``left: ...``).  A fetch routine that ended while the consumer
        is open is started again (``restarted: ...``): nothing else would ever fetch."""
        fetcher = getattr(consumer, "_fetcher", None)
        pending = getattr(fetcher, "_pending_tasks", None) or ()
        seen: dict[Any, float] = {}
        said: list[str] = []
        routine = getattr(fetcher, "_fetch_task", None)
        if routine is not None and routine.done() and getattr(consumer, "_closed", True) is False:
            # It ends only on an error it raises, or on a cancellation it takes for "closing"
            # (``except CancelledError: pass``), e.g. from a fetch task that ended cancelled;
            # nothing in aiokafka 0.14 looks at it again (``Fetcher.error_future`` has no reader).
            # Started afresh it does what it does at start: drops the fetched records and the
            # pending tasks, takes the assignment, fetches from the positions.
            ended = task_state(routine)
            fetcher._fetch_task = asyncio.ensure_future(fetcher._fetch_requests_routine())
            said.append(f"restarted: aiokafka's fetch routine, which had {ended}")
        coordinator = getattr(consumer, "_coordinator", None)
        refresh = getattr(coordinator, "_commit_refresh_task", None)
        sub = getattr(getattr(consumer, "_subscription", None), "subscription", None)
        assignment = getattr(sub, "assignment", None)
        if (
            refresh is not None
            and refresh.done()
            and assignment is not None
            and assignment.active
            and getattr(consumer, "_closed", True) is False
        ):
            # The committed-offset refresh answers ``fetch_committed``, which a position update
            # awaits with no timeout; it ends for good on an error aiokafka deems not retriable
            # (an unknown per-partition error code of an OffsetFetch is raised as a bare
            # ``KafkaError``) or when its assignment ends.  Its assignment is the current one and
            # still active here, so it is the former: started again, as the coordinator does for
            # each assignment (its own method).
            ended = task_state(refresh)
            coordinator.start_commit_offsets_refresh_task(assignment)
            said.append(f"restarted: aiokafka's committed-offset refresh, which had {ended}")
        for task in list(pending):
            if task.done():
                continue
            first = self._first_seen.get(task, now)
            seen[task] = first
            if first < now and now - first >= limit:
                coro = task.get_coro()
                where = f"{await_chain(coro)} (pending for at least {now - first:.0f} s)"
                if _ends_cleanly(coro):
                    said.append(f"ended: {where}")
                    task.cancel()
                    del seen[task]
                else:
                    said.append(f"left: {where}")
        self._first_seen = seen
        return said


#: Coroutine code that takes a cancellation at any of its waits and returns (the tests' fault).
CANCEL_SAFE: set[Any] = {Fetcher._update_fetch_positions.__code__}


def _ends_cleanly(coro: Any) -> bool:
    """Whether cancelling the fetcher task running ``coro`` ends it with a result (see FetchWatch)."""
    code = getattr(coro, "cr_code", None)
    if code in CANCEL_SAFE:
        return True
    if code is Fetcher._proc_fetch_request.__code__:
        inner = getattr(coro, "cr_await", None)
        return getattr(inner, "cr_code", None) is AIOKafkaClient.send.__code__
    return False
