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

__all__ = ["create_app"]


def create_app(settings: WorkerSettings, *, loop: Any = None, metrics: Any = None) -> Any:
    """A configured Faust app with tandem's pipeline installed (not started).

    ``metrics`` (a ``ops.observability.Metrics``) receives the pipeline's counters.
    """
    import faust

    from agents.fence import install_fetch_snapshot_fix, install_recovery_order_fix
    from agents.pipeline import MAX_SLOT_BYTES, install

    # Faust 0.15 resumes the stream partitions before it seeks them after a rebalance (issue #18).
    install_recovery_order_fix()
    # Faust 0.15 hands aiokafka its live set of active partitions; empty means "all" (issue #18).
    install_fetch_snapshot_fix()

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
    }
    if settings.web_port is not None:
        conf["web_port"] = settings.web_port
    credentials = settings.security.faust_credentials()  # TLS/SASL (streams.security), None for PLAINTEXT
    if credentials is not None:
        conf["broker_credentials"] = credentials
    app = faust.App(settings.group_id, loop=loop, **conf)
    app.tandem_pipeline = install(app, settings, metrics)  # type: ignore[attr-defined]
    return app
