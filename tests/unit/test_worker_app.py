"""The Faust app of ``tandem worker``: the producer settings its state writes depend on (issue #18)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agents.app import PRODUCER_BATCH_BYTES, PRODUCER_BUFFER_MESSAGES, create_app
from agents.settings import MAX_SLOT_BYTES
from cli.worker import parse_worker_settings


def test_producer_batches_hold_many_slots_and_the_buffer_does_not_gate_each_batch_of_writes() -> None:
    """With aiokafka's 16 KB batches a batch held one or two slots and Faust's conductor held the
    streams whenever 100 records waited: a worker catching up on a backlog stalled on its own state
    writes (the one-worker soak of docs/operating.md)."""
    loop = asyncio.new_event_loop()
    try:
        settings = parse_worker_settings(["--store", "memory://", "--without-web"])
        app = create_app(settings, loop=loop)
        assert app.conf.producer_max_batch_size == PRODUCER_BATCH_BYTES == 512 * 1024
        # below Kafka's default max.message.bytes (1 MB), which the output topics keep
        assert PRODUCER_BATCH_BYTES < 1_048_588
        assert app.conf.producer_max_request_size == MAX_SLOT_BYTES + 65536
        assert app.producer.buffer.max_messages == PRODUCER_BUFFER_MESSAGES == 20_000
    finally:
        loop.close()


def test_the_state_changelog_is_named_as_faust_names_it() -> None:
    loop = asyncio.new_event_loop()
    try:
        settings = parse_worker_settings(["--store", "memory://", "--topic-prefix", "p.", "--partitions", "3"])
        app = create_app(settings, loop=loop)
        table = app.tandem_pipeline.table
        assert table.changelog_topic.get_topic_name() == settings.state_changelog().name == "p.worker-state-changelog"
        assert settings.state_changelog().configs == {
            "cleanup.policy": "compact",
            "max.message.bytes": str(MAX_SLOT_BYTES),
        }
    finally:
        loop.close()


def test_the_worker_sends_in_gathered_requests_and_buffers_a_scrapes_burst() -> None:
    """A produce request per record and a stream buffer that fills in every burst each cost a live
    worker a tenth of its CPU (docs/performance.md, "The worker")."""
    from agents.app import STREAM_BUFFER_EVENTS

    loop = asyncio.new_event_loop()
    try:
        app = create_app(parse_worker_settings(["--store", "memory://", "--without-web"]), loop=loop)
        assert app.conf.producer_linger == 0.005
        assert app.conf.stream_buffer_maxsize == STREAM_BUFFER_EVENTS == 16_384
    finally:
        loop.close()


def test_faust_monitor_keeps_no_per_message_bookkeeping_but_still_reports_rebalances() -> None:
    from faust.types import TP

    loop = asyncio.new_event_loop()
    try:
        app = create_app(parse_worker_settings(["--store", "memory://", "--without-web"]), loop=loop)
        monitor = app.monitor
        tp = TP("tandem.metrics", 0)

        class _Message:
            time_in = None

        monitor.on_message_in(tp, 7, _Message())
        assert monitor.on_stream_event_in(tp, 7, object(), object()) is None
        monitor.on_send_completed(None, None, None)
        assert monitor.messages_received_total == 0 and monitor.events_total == 0
        assert monitor.tp_read_offsets == {}
        assert isinstance(monitor.on_rebalance_start(app), dict)  # Faust's own reports are kept
    finally:
        loop.close()


def test_mode_warnings_that_tandems_own_timers_overlap_are_counted_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from collections import defaultdict

    from agents.diagnostics import quiet_own_timers

    stats: defaultdict[str, int] = defaultdict(int)
    quiet_own_timers(stats)
    quiet_own_timers(stats)  # a second app in the process replaces the filter, not adds one
    timers = logging.getLogger("mode.timers")
    with caplog.at_level(logging.INFO, logger="mode.timers"):
        timers.warning("Timer %s is overlapping (interval=%r runtime=%r)", "tandem.idle", 0.25, 1.7)
        timers.warning("Timer %s is overlapping (interval=%r runtime=%r)", "tandem.watch", 0.25, 1.1)
        timers.warning("Timer %s is overlapping (interval=%r runtime=%r)", "livelock", 1.25, 1.9)
    assert [r.getMessage() for r in caplog.records] == ["Timer livelock is overlapping (interval=1.25 runtime=1.9)"]
    assert stats == {"timer_overlaps": 2}
