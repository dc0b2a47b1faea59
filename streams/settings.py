"""Settings of the Kafka side of tandem (``tandem worker``, ``tandem publish``, ``tandem topics``).

Every option is a command-line flag and an environment variable ``TANDEM_<OPTION>`` (docs/contract.md
section 7); a flag wins over the variable, the variable over the default.  The decision core's own
settings (``sync_period``, ``hpa:``, ``vpa:``, ``tortoise:``) still come from the ``--config`` YAML
file and are validated by :meth:`scaling.settings.Settings.from_mapping`.  The flags are defined in
``cli/options.py`` (argparse stays in ``cli/``); :func:`kafka_settings` builds the settings from a
mapping of option values, as the command line gives them (``vars(args)``) or as a caller writes them.

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
``TANDEM_PERSIST_INTERVAL`` 5                                   longest time between checkpoints
                                                                 (slots written, inputs acknowledged)
``TANDEM_STANDBY_REPLICAS`` 1                                    Faust standby replicas of the table
``TANDEM_REBALANCE_TIMEOUT`` 60                                  Faust ``broker_rebalance_timeout`` (s)
``TANDEM_SESSION_TIMEOUT`` 60                                    Faust ``broker_session_timeout`` (s)
``TANDEM_COMMIT_INTERVAL`` 2.8                                   Faust ``broker_commit_interval`` (s)
``TANDEM_LOGLEVEL``        ``warning``                           worker log level
=========================  ====================================  ======================================

How a client authenticates and encrypts (``TANDEM_SECURITY_PROTOCOL``, ``TANDEM_SASL_*``,
``TANDEM_SSL_*``) is :mod:`streams.security`'s; every command that takes these options takes those.
``TANDEM_ACTUATOR_CLUSTERS`` (``--actuator-clusters a,b``) gives those clusters their own actuator
topic ``<prefix>actuator.<cluster>``, which Kafka ACLs can grant to one applier each (the worker, the
applier and ``tandem topics`` must be given the same list); the other clusters' decisions stay on
``<prefix>actuator``.  ``TANDEM_INPUT_CLUSTERS`` (``--input-clusters a,b``) does the same for the
input topics: each listed cluster's events go to its own five topics ``<prefix><topic>.<cluster>``
(``tandem.metrics.eu-1``, ..., ``tandem.policies.eu-1``), which Kafka ACLs grant to that cluster's
collector alone, so that no other cluster's collector can write, nor compact away, what a worker
rebuilds that cluster's state from (issue #29; the worker, the collectors, ``tandem publish`` and
``tandem topics`` must be given the same list).  ``TANDEM_INPUT_SIGNING_KEYS``
(``--input-signing-keys FILE``, the commands that write inputs) signs every input record with its
cluster's key (:mod:`streams.signing`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streams.security import KafkaSecurity, security_from_mapping
from streams.signing import InputKey, load_input_keys, sign_input

__all__ = [
    "DEFAULT_BROKER",
    "DEFAULT_PARTITIONS",
    "DEFAULT_PREFIX",
    "KafkaSettings",
    "actuator_clusters",
    "bootstrap_servers",
    "env",
    "flag",
    "input_clusters",
    "input_signing",
    "kafka_producer",
    "kafka_settings",
]

DEFAULT_BROKER = "kafka://localhost:9092"
DEFAULT_PREFIX = "tandem."
DEFAULT_PARTITIONS = 8


def env(name: str, default: Any = None, environ: Mapping[str, str] | None = None) -> Any:
    """``TANDEM_<NAME>`` (dashes become underscores), or ``default`` when unset or empty."""
    environ = os.environ if environ is None else environ
    value = environ.get("TANDEM_" + name.upper().replace("-", "_"))
    return default if value is None or value == "" else value


def flag(name: str) -> bool:
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
    #: TLS and SASL of every Kafka client (streams.security); PLAINTEXT by default.
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    #: Clusters whose decisions go to their own topic ``<prefix>actuator.<cluster>`` (opt-in).
    actuator_clusters: tuple[str, ...] = ()
    #: cluster -> the key that signs the input records written for it (streams.signing); None: unsigned.
    input_signing: Mapping[str, InputKey] | None = None
    #: Clusters whose inputs go to their own topics ``<prefix><topic>.<cluster>`` (opt-in).
    input_clusters: tuple[str, ...] = ()

    @property
    def bootstrap(self) -> str:
        return bootstrap_servers(self.broker)

    @property
    def faust_broker(self) -> str:
        return _faust_broker(self.broker)

    def input_headers(self, kind: str, key: bytes | None, value: bytes | None) -> list[tuple[str, bytes]] | None:
        """The ``tandem-mac`` header of an input record of ``kind`` (None when inputs are not signed).

        The record's cluster is its key's first part; a cluster without a key is a ValueError.
        """
        if self.input_signing is None:
            return None
        cluster = (key or b"").split(b"/", 1)[0].decode("utf-8", "replace")
        signing = self.input_signing.get(cluster)
        if signing is None:
            raise ValueError(f"no input signing key for cluster {cluster!r} (--input-signing-keys)")
        return [sign_input(signing, kind, key, value)]

    def client_kwargs(self) -> dict[str, Any]:
        """``bootstrap_servers`` and the security arguments of an aiokafka producer, consumer or admin client."""
        return {"bootstrap_servers": self.bootstrap, **self.security.aiokafka_kwargs()}


def kafka_producer(settings: KafkaSettings, *, linger_ms: int = 0, max_batch_size: int = 16384) -> Any:
    """The one way tandem builds a Kafka producer (the collector, the applier, ``tandem publish``):
    ``settings``' broker and security, every write acknowledged by all in-sync replicas
    (``acks="all"``) and idempotent, so that a retried batch is neither duplicated nor reordered
    within its partition (Kafka's ``enable.idempotence``,
    https://kafka.apache.org/documentation/#producerconfigs_enable.idempotence).

    What differs between the callers is how long a batch may wait to fill (``linger_ms``) and how
    large it may grow (``max_batch_size``); the defaults are aiokafka's.  Not started: an aiokafka
    client is started (and, when that fails, stopped) by its caller, in its event loop.
    """
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(
        **settings.client_kwargs(),
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        max_batch_size=max_batch_size,
    )


def kafka_settings(options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> KafkaSettings:
    """:class:`KafkaSettings` from a mapping of option values, keyed by option name
    (``broker``, ``topic_prefix``, ``partitions``, ``replication``, ``retention_ms``,
    ``actuator_clusters``, ``input_clusters``, ``input_signing_keys`` and the security options of
    :func:`streams.security.security_from_mapping`); ValueError names the option that is wrong.

    ``tandem``'s commands build it from their command line (``cli.options.kafka_settings``).
    """
    broker = str(options.get("broker") or DEFAULT_BROKER)
    bootstrap_servers(broker)  # validate early
    return KafkaSettings(
        broker,
        str(options.get("topic_prefix", DEFAULT_PREFIX)),
        int(options.get("partitions", DEFAULT_PARTITIONS)),
        int(options.get("replication", 1)),
        _optional_int(options.get("retention_ms")),
        security_from_mapping(options, environ),
        actuator_clusters(options),
        input_signing(options),
        input_clusters(options),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def actuator_clusters(options: Mapping[str, Any]) -> tuple[str, ...]:
    """``actuator_clusters`` (``--actuator-clusters``): names without ``/`` or blanks, each once."""
    names = tuple(dict.fromkeys(c.strip() for c in str(options.get("actuator_clusters") or "").split(",")))
    names = tuple(n for n in names if n)
    for n in names:
        if "/" in n or not n.isprintable() or " " in n:
            raise ValueError(f"--actuator-clusters: {n!r} is not a cluster name")
    return names


#: What Kafka takes in a topic name: "[a-zA-Z0-9._-]", at most 249 characters (Kafka's Topic.validate,
#: https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/internals/Topic.java);
#: an input cluster's name is part of five topic names.
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def input_clusters(options: Mapping[str, Any]) -> tuple[str, ...]:
    """``input_clusters`` (``--input-clusters``): names Kafka takes in a topic name, each once."""
    names = tuple(dict.fromkeys(c.strip() for c in str(options.get("input_clusters") or "").split(",")))
    names = tuple(n for n in names if n)
    for n in names:
        if not set(n) <= _TOPIC_CHARS or len(n) > 200:
            raise ValueError(
                f"--input-clusters: {n!r} cannot be part of a Kafka topic name (letters, digits, '.', '_', '-'; "
                "at most 200 characters)"
            )
    return names


def input_signing(options: Mapping[str, Any]) -> dict[str, InputKey] | None:
    """cluster -> its first key in ``input_signing_keys`` (``--input-signing-keys``; the newest key
    is listed first)."""
    path = options.get("input_signing_keys")
    if not path:
        return None
    by_cluster: dict[str, InputKey] = {}
    for key in load_input_keys(path).values():
        by_cluster.setdefault(key.cluster, key)
    return by_cluster
