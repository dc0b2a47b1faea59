"""Settings of ``tandem worker``: the Kafka settings of :mod:`streams.settings` plus the Faust worker's own.

Every option is a flag and an environment variable ``TANDEM_<OPTION>``; the table of variables is in
:mod:`streams.settings`, the flags are defined in ``cli/worker.py`` and :func:`worker_settings`
builds the settings from their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.settings import Settings
from streams.inputs import load_core_settings
from streams.settings import DEFAULT_BROKER, KafkaSettings, bootstrap_servers, kafka_settings
from streams.signing import worker_signing
from streams.topics import TopicSpec

__all__ = [
    "MAX_SLOT_BYTES",
    "STATE_TABLE",
    "WorkerSettings",
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
    #: batches and timer rounds in between is written once (agents/checkpoint.py).
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
        (``PartitionsMismatch``).
        """
        return TopicSpec(
            "state-changelog",
            f"{self.group_id}-{STATE_TABLE}-changelog",
            {"cleanup.policy": "compact", "max.message.bytes": str(MAX_SLOT_BYTES)},
        )


def worker_settings(options: Mapping[str, Any]) -> WorkerSettings:
    """:class:`WorkerSettings` from option values keyed by option name (the flags of
    ``cli.worker``; raises ValueError/InvalidPolicy on bad input)."""
    bootstrap_servers(str(options.get("broker") or DEFAULT_BROKER))  # a bad broker is reported before a bad store
    store = str(options.get("store") or "rocksdb://")
    store = store if "://" in store else f"{store}://"
    if store.split("://", 1)[0] not in ("rocksdb", "memory"):
        raise ValueError(f"--store {options.get('store')!r}: expected rocksdb:// or memory://")
    kafka = kafka_settings(options)
    web_port = options.get("web_port")
    return WorkerSettings(
        broker=kafka.broker,
        prefix=kafka.prefix,
        partitions=kafka.partitions,
        replication=kafka.replication,
        retention_ms=kafka.retention_ms,
        security=kafka.security,
        actuator_clusters=kafka.actuator_clusters,
        input_clusters=kafka.input_clusters,
        **worker_signing(options),
        core=load_core_settings(options.get("config"), options.get("cluster"), options.get("sync_period")),
        store=store,
        data_dir=Path(options.get("data_dir") or "tandem-data"),
        app_id=str(options.get("app_id") or ""),
        web=not options.get("without_web", False),
        web_port=int(web_port) if web_port is not None else None,
        **{name: kind(options[name]) for name, kind in _OWN_OPTIONS.items() if options.get(name) is not None},
    )


#: The worker's own settings named as their options (``--idle-flush`` is ``idle_flush``), and their
#: types; an option that is not given keeps the default of :class:`WorkerSettings`.
_OWN_OPTIONS: dict[str, type] = {
    "idle_flush": float,
    "merge_grace": float,
    "batch_size": int,
    "batch_within": float,
    "persist_interval": float,
    "standby_replicas": int,
    "rebalance_timeout": float,
    "session_timeout": float,
    "commit_interval": float,
    "loglevel": str,
    "stall_timeout": float,
    "stall_exit": float,
}
