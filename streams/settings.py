"""Settings of the Kafka side of tandem (``tandem worker``, ``tandem publish``, ``tandem topics``).

Every option is a command-line flag and an environment variable ``TANDEM_<OPTION>`` (CONTRACT.md
section 7); a flag wins over the variable, the variable over the default.  The decision core's own
settings (``sync_period``, ``hpa:``, ``vpa:``, ``tortoise:``) still come from the ``--config`` YAML
file and are validated by :meth:`scaling.settings.Settings.from_mapping`.

=========================  ====================================  ======================================
variable                   default                               meaning
=========================  ====================================  ======================================
``TANDEM_BROKER``          ``kafka://localhost:9092``            bootstrap servers (``kafka://`` optional,
                                                                 comma-separated)
``TANDEM_TOPIC_PREFIX``    ``tandem.``                           prefix of every topic name (section 2)
``TANDEM_PARTITIONS``      ``8``                                 partitions of every topic (the sharding
                                                                 ceiling: at most this many workers)
``TANDEM_REPLICATION``     ``1``                                 replication factor of created topics
``TANDEM_RETENTION_MS``    section 2's (7 d, audit 90 d...)      time retention of created topics; -1
                                                                 keeps all (needed for old recordings)
``TANDEM_STORE``           ``rocksdb://``                        table store (``memory://`` for tests)
``TANDEM_DATA_DIR``        ``./tandem-data``                     where RocksDB keeps tables (one per worker)
``TANDEM_APP_ID``          ``<prefix>worker``                    consumer group and changelog topic prefix
``TANDEM_WEB_PORT``        Faust's default (6066)                the worker's web port
``TANDEM_WITHOUT_WEB``     off                                   no web server at all
``TANDEM_CONFIG``          none                                  settings YAML of the decision core
``TANDEM_CLUSTER``         ``default``                           cluster of manifests without annotation
``TANDEM_SYNC_PERIOD``     15                                    tick period (overrides the YAML)
``TANDEM_IDLE_FLUSH``      2                                     seconds a caught-up partition must be
                                                                 idle before its pending ticks are run
``TANDEM_BATCH_SIZE``      2000                                  messages per agent batch at most
``TANDEM_BATCH_WITHIN``    0.2                                   seconds to wait for a batch to fill
``TANDEM_STANDBY_REPLICAS`` 1                                    Faust standby replicas of the table
``TANDEM_REBALANCE_TIMEOUT`` 60                                  Faust ``broker_rebalance_timeout`` (s)
``TANDEM_SESSION_TIMEOUT`` 60                                    Faust ``broker_session_timeout`` (s)
``TANDEM_COMMIT_INTERVAL`` 2.8                                   Faust ``broker_commit_interval`` (s)
``TANDEM_LOGLEVEL``        ``warning``                           worker log level
=========================  ====================================  ======================================
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.settings import Settings

__all__ = [
    "DEFAULT_BROKER",
    "DEFAULT_PREFIX",
    "KafkaSettings",
    "WorkerSettings",
    "add_kafka_options",
    "add_worker_options",
    "bootstrap_servers",
    "env",
    "load_core_settings",
]

DEFAULT_BROKER = "kafka://localhost:9092"
DEFAULT_PREFIX = "tandem."
DEFAULT_PARTITIONS = 8


def env(name: str, default: Any = None, environ: Mapping[str, str] | None = None) -> Any:
    """``TANDEM_<NAME>`` (dashes become underscores), or ``default`` when unset or empty."""
    environ = os.environ if environ is None else environ
    value = environ.get("TANDEM_" + name.upper().replace("-", "_"))
    return default if value is None or value == "" else value


def _flag(name: str) -> bool:
    return str(env(name, "")).lower() in ("1", "true", "yes", "on")


def bootstrap_servers(broker: str) -> str:
    """``kafka://h1:9092,kafka://h2:9092`` or ``h1:9092,h2:9092`` -> ``h1:9092,h2:9092`` (aiokafka's form)."""
    parts = []
    for part in broker.replace(";", ",").split(","):
        part = part.strip()
        if "://" in part:
            part = part.split("://", 1)[1]
        if part:
            parts.append(part.rstrip("/"))
    if not parts:
        raise ValueError(f"no broker address in {broker!r}")
    return ",".join(parts)


def _faust_broker(broker: str) -> str:
    return ";".join(f"kafka://{hp}" for hp in bootstrap_servers(broker).split(","))


@dataclass(frozen=True)
class KafkaSettings:
    """What every Kafka-facing command needs: where the broker is and how topics are named."""

    broker: str = DEFAULT_BROKER
    prefix: str = DEFAULT_PREFIX
    partitions: int = DEFAULT_PARTITIONS
    replication: int = 1
    #: Time retention of the created time-retained topics instead of section 2's defaults (-1: keep).
    retention_ms: int | None = None

    @property
    def bootstrap(self) -> str:
        return bootstrap_servers(self.broker)

    @property
    def faust_broker(self) -> str:
        return _faust_broker(self.broker)


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
    batch_size: int = 2000
    batch_within: float = 0.2
    standby_replicas: int = 1
    rebalance_timeout: float = 60.0
    session_timeout: float = 60.0
    commit_interval: float = 2.8
    loglevel: str = "warning"

    @property
    def group_id(self) -> str:
        return self.app_id or f"{self.prefix}worker"


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return n


def _positive_float(value: str) -> float:
    x = float(value)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return x


def add_kafka_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default=env("broker", DEFAULT_BROKER), help="bootstrap servers (env TANDEM_BROKER)")
    p.add_argument(
        "--topic-prefix",
        default=env("topic_prefix", DEFAULT_PREFIX),
        help="topic name prefix (env TANDEM_TOPIC_PREFIX)",
    )
    p.add_argument(
        "--partitions",
        type=_positive_int,
        default=env("partitions", str(DEFAULT_PARTITIONS)),
        help="partitions of every topic (env TANDEM_PARTITIONS, default 8)",
    )
    p.add_argument(
        "--replication",
        type=_positive_int,
        default=env("replication", "1"),
        help="replication factor of created topics (env TANDEM_REPLICATION, default 1)",
    )
    p.add_argument(
        "--retention-ms",
        type=int,
        default=env("retention_ms"),
        help="time retention of the topics created without compaction, instead of the defaults of "
        "CONTRACT.md section 2; -1 keeps everything, which recordings from the past need "
        "(env TANDEM_RETENTION_MS)",
    )


def add_core_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=env("config"), help="settings YAML file (env TANDEM_CONFIG)")
    p.add_argument("--cluster", default=env("cluster"), help="cluster of manifests without tandem.dev/cluster")
    p.add_argument("--sync-period", type=float, default=env("sync_period"), help="tick period in seconds (default 15)")


def add_worker_options(p: argparse.ArgumentParser) -> None:
    add_kafka_options(p)
    add_core_options(p)
    p.add_argument("--store", default=env("store", "rocksdb://"), help="table store: rocksdb:// or memory://")
    p.add_argument("--data-dir", default=env("data_dir", "tandem-data"), help="directory of the RocksDB tables")
    p.add_argument("--app-id", default=env("app_id", ""), help="consumer group id (default <prefix>worker)")
    p.add_argument("--web-port", type=int, default=env("web_port"), help="web server port (Faust default 6066)")
    p.add_argument("--without-web", action="store_true", default=_flag("without_web"), help="run no web server")
    p.add_argument(
        "--idle-flush",
        type=_positive_float,
        default=env("idle_flush", "2"),
        help="seconds a caught-up partition waits before running its pending ticks (default 2)",
    )
    p.add_argument(
        "--batch-size", type=_positive_int, default=env("batch_size", "2000"), help="messages per batch at most"
    )
    p.add_argument(
        "--batch-within", type=_positive_float, default=env("batch_within", "0.2"), help="seconds to fill a batch"
    )
    p.add_argument(
        "--standby-replicas", type=int, default=env("standby_replicas", "1"), help="Faust table standby replicas"
    )
    p.add_argument(
        "--rebalance-timeout",
        type=_positive_float,
        default=env("rebalance_timeout", "60"),
        help="Faust broker_rebalance_timeout (s)",
    )
    p.add_argument(
        "--session-timeout",
        type=_positive_float,
        default=env("session_timeout", "60"),
        help="Faust broker_session_timeout (s): how long a dead worker keeps its partitions",
    )
    p.add_argument(
        "--commit-interval",
        type=_positive_float,
        default=env("commit_interval", "2.8"),
        help="Faust broker_commit_interval (s)",
    )
    p.add_argument("--loglevel", default=env("loglevel", "warning"), help="worker log level (default warning)")


def load_core_settings(config: str | None, cluster: str | None, sync_period: float | str | None) -> Settings:
    """The decision core's settings: ``--config`` YAML plus the ``--cluster``/``--sync-period`` overrides."""
    from .inputs import load_yaml_file

    raw: dict[str, Any] = {}
    if config:
        docs = load_yaml_file(config)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise ValueError(f"{config}: expected one mapping of settings")
        raw = docs[0]
    period = float(sync_period) if sync_period is not None else None
    return Settings.from_mapping(raw, cluster=cluster, sync_period=period)


def kafka_settings(args: argparse.Namespace) -> KafkaSettings:
    bootstrap_servers(args.broker)  # validate early
    return KafkaSettings(args.broker, args.topic_prefix, args.partitions, args.replication, args.retention_ms)


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
        core=load_core_settings(args.config, args.cluster, args.sync_period),
        store=store,
        data_dir=Path(args.data_dir),
        app_id=args.app_id,
        web=not args.without_web,
        web_port=int(args.web_port) if args.web_port is not None else None,
        idle_flush=args.idle_flush,
        batch_size=args.batch_size,
        batch_within=args.batch_within,
        standby_replicas=args.standby_replicas,
        rebalance_timeout=args.rebalance_timeout,
        session_timeout=args.session_timeout,
        commit_interval=args.commit_interval,
        loglevel=args.loglevel,
    )


def parse_worker_settings(argv: Sequence[str]) -> WorkerSettings:
    """Convenience for tests and embedding: parse worker flags (plus the environment)."""
    p = argparse.ArgumentParser(prog="tandem worker")
    add_worker_options(p)
    return worker_settings(p.parse_args(list(argv)))
