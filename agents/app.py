"""The Faust application of ``tandem worker``.

:func:`create_app` configures Faust from :class:`~agents.settings.WorkerSettings` and installs the
agent of :mod:`agents.pipeline`.  Choices that matter:

* ``processing_guarantee="at_least_once"``: Faust's exactly-once mode has open reports of
  duplicates and crashes on rebalance (faust-streaming/faust#323, #517) and needs three brokers by
  default; tandem's decision ids are content hashes, so consumers dedupe repeated decisions by id.
* Everything is raw bytes (``key_serializer``/``value_serializer`` ``raw``): orjson does the JSON,
  the codec in ``schemas`` does validation, and no Faust model sits in the hot path.
* ``consumer_auto_offset_reset="earliest"``: a new group reads the recorded inputs from the start.
* The group id (and the changelog topic's prefix) is ``<prefix>worker`` unless ``--app-id`` is given,
  so two tandem installations with different prefixes share nothing.
"""

from __future__ import annotations

from typing import Any

from agents.settings import WorkerSettings

__all__ = ["PRODUCER_BATCH_BYTES", "PRODUCER_BUFFER_MESSAGES", "create_app"]

#: aiokafka's largest record batch (bytes); see create_app.
PRODUCER_BATCH_BYTES = 512 * 1024
#: Input events Faust's stream buffer holds (one burst of a large fleet's scrape; a few KB each).
STREAM_BUFFER_EVENTS = 16_384
#: Records in Faust's producer buffer before its conductor holds the streams back; see create_app.
PRODUCER_BUFFER_MESSAGES = 20_000


def create_app(settings: WorkerSettings, *, loop: Any = None, metrics: Any = None) -> Any:
    """A configured Faust app with tandem's pipeline installed (not started).

    ``metrics`` (a ``ops.observability.Metrics``) receives the pipeline's counters.
    """
    import faust

    from agents.fence import (
        install_eager_delivery,
        install_failed_commit_fix,
        install_fetch_snapshot_fix,
        install_recovery_order_fix,
        set_producer_buffer,
    )
    from agents.pipeline import MAX_SLOT_BYTES, install

    # Faust 0.15 resumes the stream partitions before it seeks them after a rebalance (issue #18).
    install_recovery_order_fix()
    # Faust 0.15 hands aiokafka its live set of active partitions; empty means "all" (issue #18).
    install_fetch_snapshot_fix()
    # Faust 0.15 races four tasks per delivered message; a delivery that need not wait runs inline.
    install_eager_delivery()
    # Faust 0.15 records a failed commit's offsets as committed (faust-streaming PR #692).
    install_failed_commit_fix()

    heartbeat = min(3.0, settings.session_timeout / 3)
    conf: dict[str, Any] = {
        "broker": settings.faust_broker,
        "store": settings.store,
        "datadir": str(settings.data_dir),
        "autodiscover": False,
        "processing_guarantee": "at_least_once",
        "key_serializer": "raw",
        "value_serializer": "raw",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication,
        "table_standby_replicas": settings.standby_replicas,
        "consumer_auto_offset_reset": "earliest",
        "broker_rebalance_timeout": settings.rebalance_timeout,
        "broker_session_timeout": settings.session_timeout,
        "broker_heartbeat_interval": heartbeat,
        "broker_request_timeout": max(90.0, settings.session_timeout + 5),
        "broker_commit_interval": settings.commit_interval,
        "web_enabled": settings.web,
        "producer_max_request_size": MAX_SLOT_BYTES + 65536,
        # A slot is a few KB, and aiokafka's default batch (16 KB) held one or two of them: each
        # partition's next batch then waited for the last one's round trip, and a batch's thousand
        # slot writes crawled out ("producer buffer full", the one-worker soak stall of issue #18).
        # Below Kafka's default max.message.bytes (1 MB), which the output topics keep.
        "producer_max_batch_size": PRODUCER_BATCH_BYTES,
        # Faust's default (no linger) sent a produce request per record while the checkpoint
        # wrote its slots one after the other: a socket write each.  5 ms gathers them into a
        # few requests; the pipeline waits for the acknowledgements anyway.
        "producer_linger": 0.005,
        # Faust's default stream buffer (4,096 events) filled up in every scrape's burst, and each
        # delivery into a full buffer goes the slow way (agents/fence, install_eager_delivery).
        "stream_buffer_maxsize": STREAM_BUFFER_EVENTS,
        "Monitor": quiet_monitor(),
    }
    if settings.web_port is not None:
        conf["web_port"] = settings.web_port
    credentials = settings.security.faust_credentials()  # TLS/SASL (streams.security), None for PLAINTEXT
    if credentials is not None:
        conf["broker_credentials"] = credentials
    app = faust.App(settings.group_id, loop=loop, **conf)
    app.tandem_pipeline = install(app, settings, metrics)  # type: ignore[attr-defined]
    # Faust's stream conductor waits, 0.1 s at a time, while more than ``max_messages`` (100)
    # records sit in its producer buffer; every table write goes there, and one batch of input
    # writes hundreds of slots.  The pipeline waits for its writes' acknowledgements anyway
    # (ConfirmedTable.wait_confirmed), so that gate only slowed it down.
    set_producer_buffer(app, PRODUCER_BUFFER_MESSAGES)
    return app


def quiet_monitor() -> Any:
    """Faust's ``Monitor`` sensor without its per-message and per-event bookkeeping.

    Faust calls its monitor for every message in and out, every stream event, every table write
    and every send (counters by topic and stream, timing deques for its web views): 3.6 % of a
    live worker's CPU in ``bench/capacity.py``.  Nothing in tandem reads those figures; the
    worker's own metrics (``ops/observability.py``) count what operators look at.  Rebalance,
    assignment and commit reports, which come a few times a minute, are kept.
    """
    from faust.sensors import Monitor

    class QuietMonitor(Monitor):  # type: ignore[misc]
        def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
            pass

        def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
            return None

        def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None) -> None:
            pass

        def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
            pass

        def on_table_get(self, table: Any, key: Any) -> None:
            pass

        def on_table_set(self, table: Any, key: Any, value: Any) -> None:
            pass

        def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> None:
            return None

        def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
            pass

    return QuietMonitor
