"""Process-wide patches of Faust and aiokafka: the behavioural fixes tandem needs, each applied
once per process, before the app starts (issue #18: the rebalance stall and the lost inputs;
issue 17: a race per delivered message), and :class:`ConfirmedTable` (state before offsets).

Each ``install_*`` first checks that Faust and aiokafka are the versions these fixes were read
against, their methods unchanged (:func:`agents.fence.upstream.checked`): an upgrade fails at
start, never subtly later.  Each fix keeps Faust's code and says what it changes and why.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

from faust import Table
from faust.tables.recovery import Recovery
from faust.transport.consumer import Consumer
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import TP, FutureMessage

from .inspection import committed_offsets
from .upstream import checked

__all__ = [
    "CONFIRM_WARN_AFTER",
    "ConfirmedTable",
    "install_eager_delivery",
    "install_failed_commit_fix",
    "install_fetch_snapshot_fix",
    "install_recovery_order_fix",
    "on_wait_empty",
    "set_producer_buffer",
]

log = logging.getLogger("tandem.worker")

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

    The symptom: a jump in an input's offsets right after "Worker ready" while its committed
    offset stays behind the acknowledged ones.  faust-streaming PR #217 fixed the same order in
    another branch of recovery (seek, then resume); the race is open upstream as
    faust-streaming/faust#596.

    The fix keeps Faust's code and changes only the order: while either method runs, its calls
    to ``consumer.resume_partitions`` are collected instead of applied, and applied after it
    returned, i.e. after the seek and after the queues were cleared, if no new rebalance began
    meanwhile (the next recovery resumes them then).
    """
    global _installed
    if _installed:
        return
    checked()
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
    ever fetch them again (aiokafka at the end of the partition, Faust having read nothing of
    it).  The log start is where a never-committed input begins
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
    made, yet their lag stays for good, and a restart reads them all again (a broker SIGKILLed
    and restarted is enough: ``bench/chaos.py``'s ``broker-sigkill``).  The wrapper puts back, for
    a commit that did not happen, each offset Faust recorded, unless a later commit has recorded
    another since.
    """
    global _commit_fix_installed
    if _commit_fix_installed:
        return
    checked()
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
    active) after aiokafka has already moved past them, and no one fetches them again: an input
    active in Faust, paused nowhere, its read offset where the recovery sought it, and never
    delivered again.
    """
    global _snapshot_installed
    if _snapshot_installed:
        return
    checked()
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
#: Each app's hook (:func:`on_wait_empty`), kept here rather than as an attribute on Faust's app.
_BEFORE_WAIT_EMPTY: WeakKeyDictionary[Any, Callable[[], Awaitable[None]]] = WeakKeyDictionary()


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
    _BEFORE_WAIT_EMPTY[app] = hook
    if _wait_empty_installed:
        return
    checked()
    original = Consumer.wait_empty

    @functools.wraps(original)
    async def wait_empty(self: Any) -> None:
        before = _BEFORE_WAIT_EMPTY.get(self.app)
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
    decision core (docs/performance.md, "The worker").

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
    checked()
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


# ------------------------------------------------------------- the producer buffer's limit


def set_producer_buffer(app: Any, max_messages: int) -> None:
    """Let ``max_messages`` records wait in Faust's producer buffer before its conductor waits.

    Faust's stream conductor waits, 0.1 s at a time, while more than ``ProducerBuffer.max_messages``
    (100) records sit in its producer buffer, and every table write goes there; Faust sets that
    limit nowhere in its settings (``App.producer.buffer`` is the only way to it).
    """
    app.producer.buffer.max_messages = max_messages
