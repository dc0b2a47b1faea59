"""Settings of ``tandem worker``: the Kafka settings of :mod:`streams.settings` plus the Faust worker's own.

Every option is a flag and an environment variable ``TANDEM_<OPTION>``; the table of variables is in
:mod:`streams.settings`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.settings import Settings
from streams.inputs import load_core_settings
from streams.security import security_from_args
from streams.settings import (
    KafkaSettings,
    actuator_clusters,
    add_core_options,
    add_kafka_options,
    bootstrap_servers,
    env,
    flag,
    input_clusters,
    non_negative_float,
    positive_float,
    positive_int,
)
from streams.signing import add_worker_signing_options, worker_signing
from streams.topics import TopicSpec

__all__ = [
    "MAX_SLOT_BYTES",
    "STATE_TABLE",
    "WorkerSettings",
    "add_worker_options",
    "parse_worker_settings",
    "worker_settings",
]

#: The Faust table of workload slots (agents/pipeline.py); its changelog is ``<group id>-state-changelog``.
STATE_TABLE = "state"
#: Largest table record (slot) the worker writes; the changelog topic and producer allow it.
MAX_SLOT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class WorkerSettings(KafkaSettings):
    """Everything ``tandem worker`` runs with (see the module docstring for the variables)."""

    core: Settings = field(default_factory=Settings)
    store: str = "rocksdb://"
    data_dir: Path = Path("tandem-data")
    app_id: str = ""
    web: bool = True
    web_port: int | None = None
    idle_flush: float = 2.0
    #: Seconds a caught-up input waits for records of the same instant on other topics (streams.merge).
    merge_grace: float = 2.0
    batch_size: int = 2000
    batch_within: float = 0.2
    #: Longest time between checkpoints (slots written, then the inputs acknowledged); one also
    #: comes as soon as every input taken has left the merge's inboxes.  A slot touched by several
    #: batches and timer rounds in between is written once (agents/pipeline.py).
    persist_interval: float = 5.0
    standby_replicas: int = 1
    rebalance_timeout: float = 60.0
    session_timeout: float = 60.0
    commit_interval: float = 2.8
    loglevel: str = "warning"
    #: An assigned input with lag and no progress for this long is stalled: logged, gauged, unready.
    stall_timeout: float = 60.0
    #: ... and after this long the worker exits non-zero (75) so that Kubernetes restarts it.
    stall_exit: float = 300.0
    #: streams.signing: the input keyring records are checked with, the key decisions are signed with.
    input_keyring: Any = None
    decision_signer: Any = None

    @property
    def group_id(self) -> str:
        return self.app_id or f"{self.prefix}worker"

    def state_changelog(self) -> TopicSpec:
        """The state table's changelog topic as Faust names and configures it (compacted).

        The worker creates it with its input topics, before Faust starts: left to Faust, it is
        created as the app starts and a first table write could find it with 0 partitions in a
        metadata answer that did not have it yet, which Faust takes for a mismatch and dies of
        (``PartitionsMismatch``, found by bench/chaos.py, issue #18).
        """
        return TopicSpec(
            "state-changelog",
            f"{self.group_id}-{STATE_TABLE}-changelog",
            {"cleanup.policy": "compact", "max.message.bytes": str(MAX_SLOT_BYTES)},
        )


def add_worker_options(p: argparse.ArgumentParser) -> None:
    add_kafka_options(p)
    add_core_options(p)
    p.add_argument("--store", default=env("store", "rocksdb://"), help="table store: rocksdb:// or memory://")
    p.add_argument("--data-dir", default=env("data_dir", "tandem-data"), help="directory of the RocksDB tables")
    p.add_argument("--app-id", default=env("app_id", ""), help="consumer group id (default <prefix>worker)")
    p.add_argument("--web-port", type=int, default=env("web_port"), help="web server port (Faust default 6066)")
    p.add_argument("--without-web", action="store_true", default=flag("without_web"), help="run no web server")
    p.add_argument(
        "--idle-flush",
        type=positive_float,
        default=env("idle_flush", "2"),
        help="seconds a caught-up partition waits before running its pending ticks (default 2)",
    )
    p.add_argument(
        "--merge-grace",
        type=non_negative_float,
        default=env("merge_grace", "2"),
        help="seconds a caught-up input waits for what its producer wrote to other topics at the same "
        "instant before it stops holding back newer events (default 2; 0: no grace)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=env("batch_size", "2000"), help="messages per batch at most"
    )
    p.add_argument(
        "--batch-within", type=positive_float, default=env("batch_within", "0.2"), help="seconds to fill a batch"
    )
    p.add_argument(
        "--persist-interval",
        type=non_negative_float,
        default=env("persist_interval", "5"),
        help="longest time between checkpoints, which write the touched workload slots to the state "
        "table and then acknowledge the inputs; one also comes as soon as every input taken is released "
        "from the merge's inboxes (default 5; 0: after every batch)",
    )
    p.add_argument(
        "--standby-replicas", type=int, default=env("standby_replicas", "1"), help="Faust table standby replicas"
    )
    p.add_argument(
        "--rebalance-timeout",
        type=positive_float,
        default=env("rebalance_timeout", "60"),
        help="Faust broker_rebalance_timeout (s)",
    )
    p.add_argument(
        "--session-timeout",
        type=positive_float,
        default=env("session_timeout", "60"),
        help="Faust broker_session_timeout (s): how long a dead worker keeps its partitions",
    )
    p.add_argument(
        "--commit-interval",
        type=positive_float,
        default=env("commit_interval", "2.8"),
        help="Faust broker_commit_interval (s): offsets are committed after each checkpoint; this timer retries",
    )
    p.add_argument("--loglevel", default=env("loglevel", "warning"), help="worker log level (default warning)")
    p.add_argument(
        "--stall-timeout",
        type=positive_float,
        default=env("stall_timeout", "60"),
        help="seconds an assigned input may have lag without progress before it is reported stalled "
        "(log, gauge tandem_input_stalled, /readyz fails; default 60)",
    )
    p.add_argument(
        "--stall-exit",
        type=positive_float,
        default=env("stall_exit", "300"),
        help="seconds of stall after which the worker exits with status 75 so that it is restarted (default 300)",
    )
    add_worker_signing_options(p)


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    """Build :class:`WorkerSettings` from parsed options (raises ValueError/InvalidPolicy on bad input)."""
    bootstrap_servers(args.broker)
    store = args.store if "://" in args.store else f"{args.store}://"
    if store.split("://", 1)[0] not in ("rocksdb", "memory"):
        raise ValueError(f"--store {args.store!r}: expected rocksdb:// or memory://")
    return WorkerSettings(
        broker=args.broker,
        prefix=args.topic_prefix,
        partitions=args.partitions,
        replication=args.replication,
        retention_ms=args.retention_ms,
        security=security_from_args(args),
        actuator_clusters=actuator_clusters(args),
        input_clusters=input_clusters(args),
        **worker_signing(args),
        core=load_core_settings(args.config, args.cluster, args.sync_period),
        store=store,
        data_dir=Path(args.data_dir),
        app_id=args.app_id,
        web=not args.without_web,
        web_port=int(args.web_port) if args.web_port is not None else None,
        idle_flush=args.idle_flush,
        merge_grace=args.merge_grace,
        batch_size=args.batch_size,
        batch_within=args.batch_within,
        persist_interval=args.persist_interval,
        standby_replicas=args.standby_replicas,
        rebalance_timeout=args.rebalance_timeout,
        session_timeout=args.session_timeout,
        commit_interval=args.commit_interval,
        loglevel=args.loglevel,
        stall_timeout=args.stall_timeout,
        stall_exit=args.stall_exit,
    )


def parse_worker_settings(argv: Sequence[str]) -> WorkerSettings:
    """Convenience for tests and embedding: parse worker flags (plus the environment)."""
    p = argparse.ArgumentParser(prog="tandem worker")
    add_worker_options(p)
    return worker_settings(p.parse_args(list(argv)))
