"""agents/fence: Faust's recovery resumes the stream partitions only after the seek (issue #18), and a
fetch that never ends is ended (stop 27)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.consumer.subscription_state import SubscriptionState
from aiokafka.errors import KafkaConnectionError, KafkaError
from faust.tables.recovery import Recovery
from faust.types import TP

from agents.fence import (
    FetchWatch,
    await_chain,
    install_failed_commit_fix,
    install_fetch_snapshot_fix,
    install_recovery_order_fix,
)
from agents.fence.patches import _resume_after

A, B = TP("tandem.hpa", 0), TP("tandem.hpa", 1)
LOG = TP("tandem-state-changelog", 0)


class _Consumer:
    def __init__(self, calls: list[str], assigned: set[TP], committed: dict[TP, int] | None = None) -> None:
        self.calls = calls
        self.assigned = assigned
        # What Faust's perform_seek records: only partitions with a committed offset above 0.
        self._committed_offset = {A: 40, B: 41} if committed is None else committed

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: 3 for tp in tps}

    async def seek(self, tp: TP, offset: int) -> None:
        self.calls.append(f"seek {tp.topic}[{tp.partition}] to {offset}")

    def resume_partitions(self, tps: Any) -> None:
        self.calls.append(f"resume {sorted(tp.partition for tp in tps)}")

    def assignment(self) -> set[TP]:
        return self.assigned


class _Tables:
    changelog_topics = frozenset({"tandem-state-changelog"})


class _App:
    def __init__(self, consumer: _Consumer) -> None:
        self.consumer = consumer
        self.consumer_generation_id = 7
        self.tables = _Tables()


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


def test_stream_partitions_without_a_committed_offset_are_sought_to_their_log_start_before_resuming() -> None:
    """aiokafka's seek_to_committed leaves them where they stood, maybe past records Faust dropped."""
    calls: list[str] = []
    recovery = _Recovery(_App(_Consumer(calls, {A, B, LOG}, committed={A: 40})))
    asyncio.run(_resume_after(_Recovery.resume_streams)(recovery))
    assert calls == [
        "seek to committed",
        "flow control resumed (queues cleared)",
        "seek tandem.hpa[1] to 3",
        "resume [0, 1]",
    ]


class _Thread:
    """Records what Faust's consumer thread hands aiokafka."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def _fetch_records(self, consumer: Any, active: Any, timeout: Any = None, max_records: Any = None) -> Any:
        self.seen.append(active)
        active_now = set(active)
        live.clear()  # the main thread pauses every stream partition meanwhile (a rebalance)
        return {tp: ["record"] for tp in active_now}


live: set[TP] = set()


def test_aiokafka_gets_a_snapshot_of_the_active_partitions_and_nothing_is_fetched_for_none(
    monkeypatch: Any,
) -> None:
    """An empty set means "every partition" to aiokafka's fetched_records (issue #18)."""
    import faust.transport.drivers.aiokafka as driver

    import agents.fence.patches as fence

    monkeypatch.setattr(driver.AIOKafkaConsumerThread, "_fetch_records", _Thread._fetch_records)
    monkeypatch.setattr(fence, "_snapshot_installed", False)
    install_fetch_snapshot_fix()
    thread = _Thread()
    live.clear()
    live.update({A, B})
    got = asyncio.run(driver.AIOKafkaConsumerThread._fetch_records(thread, None, live))
    assert got == {A: ["record"], B: ["record"]}
    assert isinstance(thread.seen[0], frozenset) and thread.seen[0] == {A, B}
    assert asyncio.run(driver.AIOKafkaConsumerThread._fetch_records(thread, None, set())) == {}
    assert len(thread.seen) == 1  # aiokafka was not asked for "everything"


# ------------------------------------------------------------------ eager delivery (issue 17)


class _FlowConsumer:
    """What ``Consumer.wait_first`` (mode's ``Service.wait_first``) reads of its consumer."""

    def __init__(self) -> None:
        from mode.utils.locks import Event

        self.suspend_flow = Event()
        self._stopped = Event()
        self._crashed = Event()
        self.loop = asyncio.get_running_loop()


def _wait_first() -> Any:
    from faust.transport.consumer import Consumer

    from agents.fence import install_eager_delivery

    install_eager_delivery()
    install_eager_delivery()  # idempotent
    return Consumer.wait_first


def test_a_delivery_that_need_not_wait_runs_inline_in_the_fetch_loops_task() -> None:
    async def main() -> None:
        consumer = _FlowConsumer()
        ran_in: list[Any] = []

        async def delivery() -> str:
            ran_in.append(asyncio.current_task())
            return "queued"

        results = await _wait_first()(consumer, delivery(), consumer.suspend_flow.wait())
        assert ran_in == [asyncio.current_task()]  # not a task of its own
        assert list(results.results) == ["queued"]
        assert results.stopped is False

    asyncio.run(main())


def test_a_delivery_that_waits_finishes_under_the_race_with_its_result() -> None:
    async def main() -> None:
        consumer = _FlowConsumer()
        room = asyncio.get_running_loop().create_future()
        steps: list[str] = []

        async def delivery() -> str:
            steps.append("put: queue full")
            await room
            await asyncio.sleep(0)
            steps.append("put: done")
            return "queued"

        racing = asyncio.ensure_future(_wait_first()(consumer, delivery(), consumer.suspend_flow.wait()))
        await asyncio.sleep(0.01)
        assert steps == ["put: queue full"] and not racing.done()
        room.set_result(None)
        results = await asyncio.wait_for(racing, 1.0)
        assert steps == ["put: queue full", "put: done"]
        assert "queued" in list(results.results)

    asyncio.run(main())


def test_a_blocked_delivery_is_abandoned_when_a_rebalance_suspends_the_flow() -> None:
    async def main() -> None:
        consumer = _FlowConsumer()
        cancelled: list[bool] = []

        async def delivery() -> None:
            try:
                await asyncio.get_running_loop().create_future()  # a full queue that never drains
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        racing = asyncio.ensure_future(_wait_first()(consumer, delivery(), consumer.suspend_flow.wait()))
        await asyncio.sleep(0.01)
        consumer.suspend_flow.set()  # Consumer.stop_flow()
        await asyncio.wait_for(racing, 1.0)
        await asyncio.sleep(0.01)
        assert cancelled == [True]

    asyncio.run(main())


def test_a_suspended_flow_takes_the_original_race() -> None:
    async def main() -> None:
        consumer = _FlowConsumer()
        consumer.suspend_flow.set()
        ran_in: list[Any] = []

        async def delivery() -> None:
            ran_in.append(asyncio.current_task())

        await _wait_first()(consumer, delivery(), consumer.suspend_flow.wait())
        await asyncio.sleep(0.01)
        assert asyncio.current_task() not in ran_in  # if it ran at all, it ran in a task of the race

    asyncio.run(main())


def test_a_delivery_that_fails_raises_in_the_fetch_loop() -> None:
    async def main() -> None:
        consumer = _FlowConsumer()

        async def delivery() -> None:
            raise ValueError("undecodable")

        try:
            await _wait_first()(consumer, delivery(), consumer.suspend_flow.wait())
        except ValueError as exc:
            assert str(exc) == "undecodable"
        else:
            raise AssertionError("the delivery's error was swallowed")

    asyncio.run(main())


# ------------------------------------------------------------------ a fetch that never ends


class _NeverReady(AIOKafkaClient):  # type: ignore[misc]
    """aiokafka's client (its own ``send``), whose connection to the broker is never ready."""

    async def ready(self, node_id: int, *, group: Any = None) -> bool:
        await asyncio.get_running_loop().create_future()
        return True


class _Refuses:
    """An aiokafka client whose requests fail at once."""

    async def send(self, node_id: int, request: Any) -> Any:
        raise KafkaConnectionError("refused")


class _Waiting:
    """A partition state that waits for its committed offset, which never comes."""

    has_valid_position = False
    awaiting_reset = False

    def fetch_committed(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()


class _Assignment:
    active = True

    def state_value(self, tp: Any) -> _Waiting:
        return _Waiting()


def _consumer_with(*tasks: asyncio.Task[Any]) -> Any:
    fetcher = SimpleNamespace(_pending_tasks=set(tasks))
    return SimpleNamespace(_fetcher=fetcher)


def test_a_fetcher_task_pending_for_the_limit_is_ended_and_where_it_waited_is_named() -> None:
    async def run() -> tuple[list[str], list[str], list[str], bool, Any]:
        fetcher = SimpleNamespace(_client=_NeverReady(bootstrap_servers="127.0.0.1:9"), _retry_backoff=0.0)
        task = asyncio.ensure_future(Fetcher._proc_fetch_request(fetcher, _Assignment(), 1, None))
        await asyncio.sleep(0)
        consumer, watch = _consumer_with(task), FetchWatch()
        first = watch.end_hung(consumer, 100.0, 5.0)  # first seen: its age is not known yet
        early = watch.end_hung(consumer, 104.9, 5.0)
        ended = watch.end_hung(consumer, 105.0, 5.0)
        result = await task
        return first, early, ended, task.cancelled(), result

    first, early, ended, cancelled, result = asyncio.run(run())
    assert (first, early) == ([], [])
    assert len(ended) == 1
    assert ended[0].startswith("ended: _proc_fetch_request:")
    assert " > send:" in ended[0] and " > ready:" in ended[0]
    assert ended[0].endswith("(pending for at least 5 s)")
    # aiokafka 0.14's fetch task takes the cancellation as a failed fetch: it returns "nothing new"
    # and is not cancelled itself (a cancelled one would end the fetcher's routine).
    assert (cancelled, result) == (False, False)


def test_a_position_update_waiting_for_a_committed_offset_that_never_comes_is_ended_the_same_way() -> None:
    async def run() -> tuple[list[str], bool, Any]:
        fetcher = SimpleNamespace(_retry_backoff=0.0)
        task = asyncio.ensure_future(Fetcher._update_fetch_positions(fetcher, _Assignment(), 1, [A]))
        await asyncio.sleep(0)
        consumer, watch = _consumer_with(task), FetchWatch()
        watch.end_hung(consumer, 0.0, 1.0)
        ended = watch.end_hung(consumer, 1.0, 1.0)
        result = await task
        return ended, task.cancelled(), result

    ended, cancelled, result = asyncio.run(run())
    assert len(ended) == 1 and ended[0].startswith("ended: _update_fetch_positions:")
    assert (cancelled, result) == (False, False)


def test_a_fetch_in_its_back_off_after_a_failed_request_is_left_alone() -> None:
    """aiokafka 0.14 sleeps its back-off outside the ``try`` that takes a cancellation: cancelled
    there, the task would end cancelled and end the fetcher's routine with it."""

    async def run() -> tuple[list[str], bool]:
        fetcher = SimpleNamespace(_client=_Refuses(), _retry_backoff=30.0)
        fetcher._invalidate_preferred_read_replica_for_node = lambda node_id, request: None
        task = asyncio.ensure_future(Fetcher._proc_fetch_request(fetcher, _Assignment(), 1, None))
        await asyncio.sleep(0)
        consumer, watch = _consumer_with(task), FetchWatch()
        watch.end_hung(consumer, 0.0, 1.0)
        said = watch.end_hung(consumer, 2.0, 1.0)
        await asyncio.sleep(0)
        still_running = not task.done()
        task.cancel()
        return said, still_running

    said, still_running = asyncio.run(run())
    assert len(said) == 1 and said[0].startswith("left: _proc_fetch_request:")
    assert " > sleep:" in said[0]
    assert still_running


def test_finished_fetcher_tasks_are_forgotten_and_a_new_one_starts_its_own_clock() -> None:
    async def run() -> list[list[str]]:
        old = asyncio.ensure_future(asyncio.sleep(0))
        await old
        watch = FetchWatch()
        rounds = [watch.end_hung(_consumer_with(old), 0.0, 1.0)]
        fresh = asyncio.ensure_future(asyncio.get_running_loop().create_future())
        await asyncio.sleep(0)
        rounds.append(watch.end_hung(_consumer_with(old, fresh), 10.0, 1.0))  # first seen at 10
        rounds.append(watch.end_hung(_consumer_with(fresh), 10.5, 1.0))
        fresh.cancel()
        return rounds

    assert asyncio.run(run()) == [[], [], []]


def test_await_chain_names_each_coroutine_down_to_the_future_it_waits_for() -> None:
    async def inner(fut: asyncio.Future[None]) -> None:
        await fut

    async def outer(fut: asyncio.Future[None]) -> None:
        await inner(fut)

    async def run() -> str:
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(outer(fut))
        await asyncio.sleep(0)
        chain = await_chain(task.get_coro())
        fut.set_result(None)
        await task
        return chain

    chain = asyncio.run(run())
    outer_line = outer.__code__.co_firstlineno + 1
    inner_line = inner.__code__.co_firstlineno + 1
    assert chain == f"outer:{outer_line} > inner:{inner_line} > FutureIter"


def test_a_fetch_routine_that_ended_while_the_consumer_is_open_is_started_again() -> None:
    async def run() -> tuple[list[str], bool, list[str]]:
        client = AIOKafkaClient(bootstrap_servers="127.0.0.1:9")
        fetcher = Fetcher(client, SubscriptionState())
        dead = fetcher._fetch_task
        await asyncio.sleep(0)  # begun: waiting for an assignment
        dead.cancel()  # the routine takes it for "closing" and returns: done, not cancelled
        await asyncio.sleep(0)
        consumer = SimpleNamespace(_fetcher=fetcher, _closed=False)
        said = FetchWatch().end_hung(consumer, 0.0, 1.0)
        await asyncio.sleep(0)
        restarted = fetcher._fetch_task is not dead and not fetcher._fetch_task.done()
        consumer._closed = True  # a closing consumer's routine is left to end
        fetcher._fetch_task.cancel()
        await asyncio.sleep(0)
        again = FetchWatch().end_hung(consumer, 0.0, 1.0)
        await fetcher.close()
        return said, restarted, again

    said, restarted, again = asyncio.run(run())
    assert said == ["restarted: aiokafka's fetch routine, which had ended (None)"]
    assert restarted
    assert again == []


class _Coordinator:
    def __init__(self, refresh: asyncio.Future[Any]) -> None:
        self._commit_refresh_task = refresh
        self.started: list[Any] = []

    def start_commit_offsets_refresh_task(self, assignment: Any) -> None:
        self.started.append(assignment)


def test_a_committed_offset_refresh_that_ended_under_an_active_assignment_is_started_again() -> None:
    async def run() -> tuple[list[str], list[Any], list[str], list[Any]]:
        dead = asyncio.get_running_loop().create_future()
        dead.set_exception(KafkaError("Unknown error fetching offsets"))
        assignment = _Assignment()
        coordinator = _Coordinator(dead)
        subscription = SimpleNamespace(subscription=SimpleNamespace(assignment=assignment))
        consumer = SimpleNamespace(_coordinator=coordinator, _subscription=subscription, _closed=False)
        said = FetchWatch().end_hung(consumer, 0.0, 1.0)
        started = list(coordinator.started)
        assignment.active = False  # after a rebalance: the coordinator starts the next one itself
        again = FetchWatch().end_hung(consumer, 0.0, 1.0)
        return said, started, again, coordinator.started

    said, started, again, all_started = asyncio.run(run())
    assert said == [
        "restarted: aiokafka's committed-offset refresh, which had ended (KafkaError('Unknown error fetching offsets'))"
    ]
    assert len(started) == 1
    assert again == [] and len(all_started) == 1


# ------------------------------------------------------------ the failed-commit bookkeeping fix


class _CommittingConsumer:
    """What Faust 0.15.3's ``Consumer._commit_offsets`` touches, with a commit that fails or not."""

    in_transaction = False

    def __init__(self, succeed: bool) -> None:
        from collections import defaultdict

        self.succeed = succeed
        self._committed_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)
        self.log = SimpleNamespace(dev=lambda *a, **k: None, info=lambda *a, **k: None)

        async def flush() -> None:
            return None

        self.app = SimpleNamespace(
            producer=SimpleNamespace(flush=flush),
            tables=SimpleNamespace(on_commit=lambda offsets: None),
            monitor=SimpleNamespace(on_tp_commit=lambda offsets: None),
        )

    def assignment(self) -> set[TP]:
        return {A, B}

    async def _commit(self, offsets: Any) -> bool:
        return self.succeed


def test_a_commit_that_failed_leaves_faust_recording_the_offsets_committed_before_it() -> None:
    from faust.transport.consumer import Consumer

    install_failed_commit_fix()
    failing = _CommittingConsumer(succeed=False)
    failing._committed_offset[A] = 40  # committed before; B never was
    did = asyncio.run(Consumer._commit_offsets(failing, {A: 90, B: 17}))  # type: ignore[arg-type]
    assert did is False
    assert (failing._committed_offset[A], failing._committed_offset[B]) == (40, None)

    working = _CommittingConsumer(succeed=True)
    assert asyncio.run(Consumer._commit_offsets(working, {A: 90, B: 17})) is True  # type: ignore[arg-type]
    assert (working._committed_offset[A], working._committed_offset[B]) == (90, 17)
