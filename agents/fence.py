"""Every private Faust and aiokafka API the worker touches, in one place (faust-streaming 0.15.x).

pyproject.toml pins ``faust-streaming>=0.15,<0.16``; everything here was read against 0.15.3 with
aiokafka 0.14.  When either is upgraded, this module is the one to re-read: each function says
which private name it reaches and why no public one does the job.

It also carries the behavioural fixes tandem needs in Faust (issue #18, the rebalance stall and
the lost inputs: :func:`install_recovery_order_fix`, :func:`install_fetch_snapshot_fix`,
:func:`install_failed_commit_fix` and :class:`ConfirmedTable`) and in aiokafka (a fetch that never ends, CI of stop 27:
:class:`FetchWatch`).  aiokafka's own classes are imported only to recognise their methods' code
(``_ends_cleanly``), never subclassed or patched outside the tests' fault injection.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.structs import TopicPartition
from faust import Table
from faust.streams import _current_event
from faust.tables.recovery import Recovery
from faust.transport.consumer import Consumer
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import TP, FutureMessage

__all__ = [
    "ConfirmedTable",
    "FetchWatch",
    "aiokafka_fetch_state",
    "await_chain",
    "committed_offsets",
    "current_event",
    "delay_changelog_sends",
    "delay_seek_after_recovery",
    "faust_fetch_state",
    "fetcher_state",
    "hang_one_fetch",
    "in_consumer_thread",
    "install_eager_delivery",
    "install_failed_commit_fix",
    "install_fetch_snapshot_fix",
    "install_recovery_order_fix",
    "on_wait_empty",
    "take_batches",
]

log = logging.getLogger("tandem.worker")

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
    fetching = _task_state(getattr(fetcher, "_fetch_task", None))
    routine = _task_state(getattr(getattr(consumer, "_coordinator", None), "_commit_refresh_task", None))
    return (
        f"aiokafka fetcher: routine {fetching}, pending tasks [{'; '.join(tasks)}], committed-offset refresh {routine}"
    )


def _task_state(task: Any) -> str:
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


class FetchWatch:
    """aiokafka fetcher tasks that stay pending while inputs stall, and their end (stop 27).

    aiokafka's fetcher sends at most one request per broker at a time: a node with a task in
    ``Fetcher._pending_tasks`` (its id in ``_in_flight``) gets no new fetch until that task ends,
    and in a one-broker cluster that is every input.  Each request of such a task has a timeout
    (``request_timeout_ms``), but a task can also wait with none: ``_update_fetch_positions``
    awaits the group coordinator's committed-offset refresh (``TopicPartitionState.fetch_committed``),
    which is never answered if that refresh routine ended.  CI once saw two inputs of a worker
    with lag, a valid position, nothing buffered and a fetch in flight to the only broker, for
    four minutes after the broker was SIGKILLed and restarted, and no cause in the log.

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
            ended = _task_state(routine)
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
            ended = _task_state(refresh)
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
_CANCEL_SAFE: set[Any] = {Fetcher._update_fetch_positions.__code__}


def _ends_cleanly(coro: Any) -> bool:
    """Whether cancelling the fetcher task running ``coro`` ends it with a result (see FetchWatch)."""
    code = getattr(coro, "cr_code", None)
    if code in _CANCEL_SAFE:
        return True
    if code is Fetcher._proc_fetch_request.__code__:
        inner = getattr(coro, "cr_await", None)
        return getattr(inner, "cr_code", None) is AIOKafkaClient.send.__code__
    return False


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
    _CANCEL_SAFE.add(proc.__code__)


async def in_consumer_thread(app: Any, fn: Callable[[Any], T]) -> T:
    """Run ``fn(aiokafka_consumer)`` on the thread that owns the aiokafka consumer.

    Faust runs aiokafka on its own thread and event loop (``Consumer._thread``); aiokafka's
    ``pause``/``resume``/``paused`` must run there (pausing creates a future of that loop).
    Faust's public ``pause_partitions`` is not the same thing: it only filters what Faust hands
    to the streams and drops records it already fetched (see ``Pipeline._fetch_control``).
    """
    thread = app.consumer._thread
    consumer = thread._ensure_consumer()
    result: T = await thread.call_thread(fn, consumer)
    return result


# ------------------------------------------------------------------ state before offsets


#: Seconds after which a wait for the broker to acknowledge the state is logged (it goes on).
CONFIRM_WARN_AFTER = 10.0


class ConfirmedTable(Table):  # type: ignore[misc]
    """The ``state`` table, whose changelog writes the worker waits for before a batch is acknowledged.

    A table write only puts the changelog record in Faust's producer buffer (``Topic.send_soon``).
    Faust flushes that buffer before it commits offsets, but ``ProducerBuffer.flush`` gives up as
    soon as no record left the buffer for 0.1 s (``flush_atmost``), which is what happens while
    aiokafka waits for room in a full batch ("producer buffer full").  Faust then committed the
    offsets of inputs whose slots were still in the buffer, and a worker killed at that moment left
    its successor an older state and offsets past the inputs that had made the newer one (issue
    #18: 910 decisions of 10,080 lost).  So every changelog write is remembered here: a checkpoint
    takes those it wrote (:meth:`take_unconfirmed`) and, in the background, waits until the broker
    has acknowledged them (:meth:`wait_confirmed`) before it acknowledges the messages whose state
    those records hold.
    """

    _unconfirmed: list[FutureMessage] | None = None

    def send_changelog(
        self,
        partition: int | None,
        key: Any,
        value: Any,
        key_serializer: Any = None,
        value_serializer: Any = None,
    ) -> FutureMessage:
        fut: FutureMessage = super().send_changelog(partition, key, value, key_serializer, value_serializer)
        if self._unconfirmed is None:
            self._unconfirmed = []
        self._unconfirmed.append(fut)
        return fut

    def take_unconfirmed(self) -> list[FutureMessage]:
        """The changelog records written since the last call, to wait for later."""
        futures, self._unconfirmed = self._unconfirmed, None
        return futures or []

    @staticmethod
    async def wait_confirmed(futures: list[FutureMessage]) -> None:
        """Wait until the broker has acknowledged ``futures`` (raises if one failed)."""
        if not futures:
            return
        _done, pending = await asyncio.wait(futures, timeout=CONFIRM_WARN_AFTER)
        if pending:
            # Not a decision: the wait goes on (the stall watch reports an agent stuck here).
            log.warning(
                "tandem worker: %d of %d state changelog record(s) not acknowledged after %.0f s",
                len(pending),
                len(futures),
                CONFIRM_WARN_AFTER,
            )
        await asyncio.gather(*futures)


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


# --------------------------------------------------------------------- the recovery-order fix

_installed = False


def install_recovery_order_fix() -> None:
    """Make Faust seek the stream partitions to their committed offsets *before* it resumes them.

    After a rebalance, Faust 0.15.3's recovery (``Recovery._resume_streams`` and
    ``Recovery.on_recovery_completed``) resumes the stream partitions first, then seeks them to
    the committed offsets, then resumes flow control, which clears the stream queues.  But flow
    is already running at that point (it was resumed to read the changelogs), so records of the
    resumed partitions are fetched from wherever the consumer stood, queued, and then:

    * the queued ones are dropped by ``flow_control.resume()`` (their offsets were read, never
      acknowledged: the group's committed offset stops below them for good, the "stalled
      partition" of issue #18);
    * the rest of the fetched batch is still handed out after the queues were cleared (a jump
      in offsets: inputs the merge never sees);
    * after the seek, the consumer refetches from the committed offset, but Faust's read offset
      was already moved past by the batch above, so it drops those records as already read.

    Seen in the worker's own log on the real broker (two workers, one joins mid-stream): offsets
    of ``hpa[3]`` jumped from 480 to 567 right after "Worker ready", and the committed offset
    stayed at 481 while 237 later offsets were acknowledged.  faust-streaming PR #217 fixed the
    same order in another branch of recovery (seek, then resume); the race is open upstream as
    faust-streaming/faust#596.

    The fix keeps Faust's code and changes only the order: while either method runs, its calls
    to ``consumer.resume_partitions`` are collected instead of applied, and applied after it
    returned, i.e. after the seek and after the queues were cleared, if no new rebalance began
    meanwhile (the next recovery resumes them then).
    """
    global _installed
    if _installed:
        return
    for name in ("_resume_streams", "on_recovery_completed"):
        original = getattr(Recovery, name)
        setattr(Recovery, name, _resume_after(original))
    _installed = True


def _resume_after(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapper(self: Recovery, *args: Any, **kwargs: Any) -> Any:
        app = self.app
        consumer = app.consumer
        generation = app.consumer_generation_id
        deferred: set[TP] = set()
        consumer.resume_partitions = deferred.update  # shadows the method on this instance
        try:
            return await method(self, *args, **kwargs)
        finally:
            del consumer.resume_partitions
            if deferred and app.consumer_generation_id == generation:
                assigned = set(consumer.assignment())
                try:
                    await _seek_uncommitted(app, deferred & assigned)
                except Exception as exc:  # resume anyway: the stall watch reports what stays behind
                    log.warning("tandem worker: cannot seek inputs without a committed offset: %r", exc)
                if app.consumer_generation_id == generation:
                    consumer.resume_partitions(deferred & assigned)
                    log.debug("tandem worker: stream partitions resumed after the seek: %d", len(deferred & assigned))

    return wrapper


async def _seek_uncommitted(app: Any, tps: set[TP]) -> None:
    """Seek the stream partitions that have no committed offset to their log start.

    Faust's seek after a recovery (``Consumer.perform_seek`` -> aiokafka ``seek_to_committed``)
    moves only the partitions with a committed offset above 0; the others stay wherever aiokafka
    stood.  If records of such a partition were taken from aiokafka and dropped by Faust before
    (a fetch that spanned the rebalance, see :func:`install_fetch_snapshot_fix`), nothing would
    ever fetch them again: seen in ``bench/soak.py``, ``policies[0]`` with aiokafka at position 9
    of 9 and Faust having read nothing.  The log start is where a never-committed input begins
    (``consumer_auto_offset_reset="earliest"``); records this worker had already taken come again
    and are recognised by their offsets (at-least-once).
    """
    consumer = app.consumer
    changelogs = set(app.tables.changelog_topics)
    committed = committed_offsets(consumer)
    loose = sorted(tp for tp in tps if tp.topic not in changelogs and committed.get(tp) is None)
    if not loose:
        return
    starts = await consumer.earliest_offsets(*loose)
    for tp in loose:
        start = starts.get(tp)
        if start is not None:
            await consumer.seek(tp, start)
    log.info("tandem worker: %d input partition(s) without a committed offset sought to their log start", len(loose))


# ------------------------------------------------------------ the failed-commit bookkeeping fix

_commit_fix_installed = False


def install_failed_commit_fix() -> None:
    """Forget the offsets of a commit that failed, as faust-streaming PR #692 does upstream.

    Faust 0.15.3's ``Consumer._commit_offsets`` records the offsets it tried to commit in
    ``_committed_offset`` whether or not the commit succeeded (faust-streaming/faust#316; fixed
    in PR #692, merged 2026-07-19, in no 0.15 release).  A commit that fails because the group
    rebalanced (the broker came back after the worker's session expired: ``CommitFailedError``,
    "already rebalanced") thus leaves Faust believing offsets committed that the broker never
    took.  After the rebalance aiokafka reads those inputs again from the broker's committed
    offset (none: the log start), but ``Consumer.ack`` ignores offsets below the recorded one and
    ``_should_commit`` skips them, so the group never commits those inputs: every decision was
    made, yet their lag stays for good, and a restart reads them all again.  Seen in
    ``bench/chaos.py`` (the broker SIGKILLed, 2 of 13 runs: nine inputs uncommitted, 8,100
    messages re-read).  The wrapper puts back, for a commit that did not happen, each offset
    Faust recorded, unless a later commit has recorded another since.
    """
    global _commit_fix_installed
    if _commit_fix_installed:
        return
    original = Consumer._commit_offsets

    @functools.wraps(original)
    async def _commit_offsets(self: Any, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        recorded = self._committed_offset
        before = {tp: recorded.get(tp) for tp in offsets}
        did_commit: bool = await original(self, offsets, start_new_transaction)
        if not did_commit:
            for tp, offset in offsets.items():
                if recorded.get(tp) == offset:
                    recorded[tp] = before[tp]
        return did_commit

    Consumer._commit_offsets = _commit_offsets  # type: ignore[method-assign]
    _commit_fix_installed = True


# ---------------------------------------------------------------- the fetch-snapshot fix

_snapshot_installed = False


def install_fetch_snapshot_fix() -> None:
    """Hand aiokafka a snapshot of Faust's active partitions, and fetch nothing when it is empty.

    Faust 0.15.3 (``AIOKafkaConsumerThread._fetch_records``) passes its live set of active
    partitions to aiokafka's ``Fetcher.fetched_records``, which runs on the consumer's thread and
    re-reads the set on every wake-up while it waits for data.  The worker's main thread changes
    that set during a rebalance (``Consumer._set_active_tps`` clears and refills it; the recovery
    pauses every stream partition), and aiokafka takes an *empty* set for "every partition"
    (``if partitions and tp not in partitions``).  A fetch waiting across that moment therefore
    returns the records of paused stream partitions; Faust's ``getmany`` then drops them (not
    active) after aiokafka has already moved past them, and no one fetches them again.  Seen in
    ``bench/soak.py`` about once in five runs: an input active in Faust, paused nowhere, its read
    offset equal to the offset the recovery sought it to, and never delivered again (issue #18).
    """
    global _snapshot_installed
    if _snapshot_installed:
        return
    original = AIOKafkaConsumerThread._fetch_records

    @functools.wraps(original)
    async def _fetch_records(
        self: Any, consumer: Any, active_partitions: Any, timeout: Any = None, max_records: Any = None
    ) -> Any:
        if active_partitions is not None:
            active_partitions = frozenset(active_partitions)
            if not active_partitions:
                return {}
        return await original(self, consumer, active_partitions, timeout=timeout, max_records=max_records)

    AIOKafkaConsumerThread._fetch_records = _fetch_records
    _snapshot_installed = True


# ------------------------------------------------------------- a checkpoint before wait_empty

_wait_empty_installed = False


def on_wait_empty(app: Any, hook: Callable[[], Awaitable[None]]) -> None:
    """Run ``hook`` whenever Faust is about to wait for every message it handed out to be acknowledged.

    Faust calls ``Consumer.wait_empty`` when a rebalance revokes partitions and when the app stops
    (``App._stop_consumer``, ``Consumer.on_stop``), and it waits without a limit.  The pipeline
    acknowledges its messages at checkpoints, and nothing else would wake it then: the agent gets
    no new batches (flow control is suspended) and the app's timers end as soon as it stops
    (``Service.itertimer`` runs while not ``should_stop``).  Faust has no signal before that wait
    (``on_partitions_revoked`` and ``on_before_shutdown`` come after it), so the method is wrapped,
    once for the class, and calls the hook its app registered here.
    """
    global _wait_empty_installed
    app._tandem_before_wait_empty = hook
    if _wait_empty_installed:
        return
    original = Consumer.wait_empty

    @functools.wraps(original)
    async def wait_empty(self: Any) -> None:
        before = getattr(self.app, "_tandem_before_wait_empty", None)
        if before is not None:
            await before()
        await original(self)

    Consumer.wait_empty = wait_empty  # type: ignore[method-assign]
    _wait_empty_installed = True


# ------------------------------------------------------------- delivery without a race per message

_eager_installed = False


class _Resume:
    """Awaitable that finishes a coroutine already driven up to its first suspension.

    ``coro.send(None)`` returned ``first``, the future the coroutine waits for.  Awaiting this
    object hands that very future to the task that awaits it (a bare ``yield`` of a blocking
    future is how ``asyncio.Task`` is told what to wait for) and then goes on driving ``coro``
    exactly as a task would, including cancellation, which is thrown into ``coro``.
    """

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Any:
        coro, step = self.coro, self.first
        while True:
            try:
                yield step
            except BaseException as exc:  # cancellation (or GeneratorExit): into the coroutine
                try:
                    step = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    step = coro.send(None)
                except StopIteration as stop:
                    return stop.value


def install_eager_delivery() -> None:
    """Hand each fetched message to the streams without four tasks and a race per message.

    Faust 0.15.3's fetch loop (``Consumer._drain_messages``) delivers every message with
    ``await self.wait_first(callback(message), self.suspend_flow.wait())``: mode's ``wait_first``
    wraps both, and the service's ``stopped`` and ``crashed`` events, in four tasks, waits for the
    first with ``asyncio.wait`` and cancels the other three, so that a delivery blocked on a full
    stream buffer is abandoned when a rebalance suspends the flow.  Almost every delivery never
    blocks (the conductor puts the event in a queue with room), yet it paid for all of that:
    ``py-spy`` put 10.5 % of a live worker's CPU in those tasks and their callbacks, more than the
    decision core (docs/performance.md, "the worker, sixth pass").

    So, for that call only, the delivery is first driven inline: when the flow runs and the service
    neither stopped nor crashed, ``callback(message)`` is stepped once; if it finishes without
    waiting (the common case) that is the result, exactly what the race would have returned, and
    the unused ``suspend_flow.wait()`` coroutine is closed unstarted.  If it has to wait, the rest
    of it runs under the original race (:class:`_Resume` continues the same coroutine), so a
    blocked delivery is still abandoned when the flow is suspended.  Any other call, or a
    suspended flow, goes to ``wait_first`` unchanged.
    """
    global _eager_installed
    if _eager_installed:
        return
    from mode.services import WaitResults

    original = Consumer.wait_first

    @functools.wraps(original)
    async def wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        if (
            len(coros) == 2
            and timeout is None
            and asyncio.iscoroutine(coros[0])
            and asyncio.iscoroutine(coros[1])
            and not self.suspend_flow.is_set()
            and not self._stopped.is_set()
            and not self._crashed.is_set()
        ):
            delivery, suspended = coros
            try:
                first = delivery.send(None)
            except StopIteration as stop:
                suspended.close()
                return WaitResults([delivery], [stop.value], False)
            except BaseException:
                suspended.close()
                raise
            return await original(self, _Resume(delivery, first), suspended)
        return await original(self, *coros, timeout=timeout)

    Consumer.wait_first = wait_first  # type: ignore[method-assign]
    _eager_installed = True


# ------------------------------------------------------------- batches straight from the channel


async def take_batches(app: Any, stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    """The agent's input in batches, taken from its channel's queue without Faust's stream.

    Faust's ``Stream.noack_take`` runs every message through the stream's generic loop
    (``Stream._py_aiter``): an event-loop round trip (``asyncio.sleep(0)``), a context variable
    and a weak reference, the sensors, the stream's processors (the take buffer is one, under a
    tracing context manager), ``on_merge`` and a second, passive iteration that feeds the take
    buffer: about a fifth of a live worker's CPU at 7,500 workloads, for a pipeline that uses none
    of it (docs/performance.md, "the worker, seventh pass").  The conductor still delivers each
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
      for ``stream_processing_timeout`` (seen in ``bench/capacity.py`` at 20,000 workloads).

    The events are acknowledged by their owner (``Event.ack``), at the checkpoint that covers
    them, as before.  Private names: ``Consumer.unacked`` (the set Faust's stream inlines
    ``track_message`` into), ``App.consumer_generation_id``, ``App.flow_control`` and the channel's
    ``queue`` (mode's ``ThrowableQueue``: ``get_nowait`` raises an error the conductor pushed).
    """
    channel = aiter(stream.channel)
    queue = channel.queue
    unacked_add = app.consumer.unacked.add
    inbound = getattr(getattr(app, "monitor", None), "stream_inbound_time", None)
    acking = app.topics.acking_topics
    flow_active = app.flow_control.is_active
    loop = asyncio.get_running_loop()
    getter: asyncio.Future[Any] | None = None
    try:
        while True:
            batch: list[Any] = []
            first_at = 0.0
            while len(batch) < max_:
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
                    getter = None
                elif queue.empty():
                    # One waiting ``get`` at a time, kept across batches rather than cancelled:
                    # a ``get`` cancelled by a timeout as it completes would lose its event.
                    getter = asyncio.ensure_future(queue.get())
                    continue
                else:
                    event = queue.get_nowait()
                if not batch:
                    first_at = loop.time()
                message = event.message
                if not flow_active() or message.generation_id != app.consumer_generation_id:
                    continue
                if not message.tracked and message.topic in acking:
                    message.tracked = True
                    unacked_add(message)
                batch.append(event)
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
        if getter is not None:
            getter.cancel()
