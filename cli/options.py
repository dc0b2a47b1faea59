"""The options of the ``tandem`` subcommands, defined once, and the settings built from them.

Every option is also an environment variable ``TANDEM_<OPTION>`` (``--sync-period`` is
``TANDEM_SYNC_PERIOD``, see :func:`streams.settings.env`); a flag on the command line wins over the
variable, the variable over the default.  A repeatable option (``--policy``) reads its variable as
a list separated by ``os.pathsep``; a switch (``--strict``) is on when its variable is ``1``,
``true``, ``yes`` or ``on``.

argparse lives in ``cli/`` alone: the library packages take typed settings built from a mapping of
option values keyed by option name (:func:`streams.settings.kafka_settings`,
:func:`streams.security.security_from_mapping`, :func:`streams.signing.decision_verifier`,
:meth:`ops.observability.MetricsSettings.from_mapping`, :func:`agents.settings.worker_settings`),
which the functions here call with the parsed command line (``vars(args)``).  The worker's own
options are ``cli/worker.py``'s.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from ops.observability import (
    DEFAULT_MAX_EVENT_AGE,
    DEFAULT_MAX_LAG,
    DEFAULT_WORKLOAD_SERIES,
    Metrics,
    MetricsServer,
    MetricsSettings,
    serve_metrics,
)
from streams import settings as kafka
from streams import signing
from streams.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, KafkaSecurity, security_from_mapping
from streams.settings import DEFAULT_BROKER, DEFAULT_PARTITIONS, DEFAULT_PREFIX, KafkaSettings, env, flag

__all__ = [
    "add_core_options",
    "add_decision_trust_options",
    "add_edge_metrics_options",
    "add_edge_options",
    "add_files",
    "add_input_signing_options",
    "add_kafka_options",
    "add_loglevel",
    "add_metrics_options",
    "add_policy",
    "add_security_options",
    "add_strict",
    "add_worker_signing_options",
    "decision_verifier",
    "env",
    "env_list",
    "flag",
    "kafka_settings",
    "metrics_from_args",
    "non_negative_float",
    "positive_float",
    "positive_int",
    "security_from_args",
]


def env_list(name: str) -> list[str]:
    """``TANDEM_<NAME>`` split on ``os.pathsep`` (``a.yaml:b.yaml``), empty parts dropped."""
    return [x for x in str(env(name, "")).split(os.pathsep) if x]


def add_files(p: argparse.ArgumentParser, help: str = "JSON Lines files (.jsonl, .jsonl.gz, - for stdin)") -> None:
    p.add_argument("files", nargs="+", help=help)


def add_policy(p: argparse.ArgumentParser, help: str = "policy manifest file (repeatable)") -> None:
    p.add_argument("--policy", action="append", default=env_list("policy"), help=help)


def add_strict(p: argparse.ArgumentParser, help: str = "a bad line is fatal (exit 1)") -> None:
    p.add_argument("--strict", action="store_true", default=flag("strict"), help=help)


def add_edge_metrics_options(p: argparse.ArgumentParser) -> None:
    """:func:`add_metrics_options`, with the event-age readiness check off by
    default: an edge process may rightly see nothing new for hours (and an applier may be fed old
    decisions), so only the lag (and liveness) make it unready unless ``--ready-max-event-age`` is set."""
    add_metrics_options(p, max_event_age=0.0)


def add_edge_options(p: argparse.ArgumentParser) -> None:
    """``--cluster`` and ``--kubeconfig`` of the per-cluster processes (``tandem apply``, ``tandem collect``)."""
    p.add_argument("--cluster", default=env("cluster"), help="this cluster's name (env TANDEM_CLUSTER)")
    p.add_argument("--kubeconfig", default=env("kubeconfig"), help="kubeconfig (default: in-cluster or ~/.kube/config)")


def add_loglevel(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--loglevel", default=env("loglevel", default), help=f"log level (default {default})")


# --- Kafka ------------------------------------------------------------------------------------


def positive_int(value: str) -> int:
    """An argparse type: an integer >= 1."""
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return n


def positive_float(value: str) -> float:
    """An argparse type: a number > 0."""
    x = float(value)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return x


def non_negative_float(value: str) -> float:
    """An argparse type: a finite number >= 0."""
    x = float(value)
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return x


def add_kafka_options(p: argparse.ArgumentParser) -> None:
    """Where the broker is, how topics are named and made, how clients authenticate (:func:`kafka_settings`)."""
    p.add_argument("--broker", default=env("broker", DEFAULT_BROKER), help="bootstrap servers (env TANDEM_BROKER)")
    p.add_argument(
        "--topic-prefix",
        default=env("topic_prefix", DEFAULT_PREFIX),
        help="topic name prefix (env TANDEM_TOPIC_PREFIX)",
    )
    p.add_argument(
        "--partitions",
        type=positive_int,
        default=env("partitions", str(DEFAULT_PARTITIONS)),
        help="partitions of every topic (env TANDEM_PARTITIONS, default 8)",
    )
    p.add_argument(
        "--replication",
        type=positive_int,
        default=env("replication", "1"),
        help="replication factor of created topics (env TANDEM_REPLICATION, default 1)",
    )
    p.add_argument(
        "--retention-ms",
        type=int,
        default=env("retention_ms"),
        help="time retention of the topics created without compaction, instead of the defaults of "
        "docs/contract.md §2; -1 keeps everything, which recordings from the past need "
        "(env TANDEM_RETENTION_MS)",
    )
    p.add_argument(
        "--actuator-clusters",
        default=env("actuator_clusters", ""),
        help="comma-separated clusters whose decisions go to their own topic <prefix>actuator.<cluster> "
        "(env TANDEM_ACTUATOR_CLUSTERS; give the worker, the appliers and `tandem topics` the same list)",
    )
    p.add_argument(
        "--input-clusters",
        default=env("input_clusters", ""),
        help="comma-separated clusters whose inputs go to their own topics <prefix><topic>.<cluster> "
        "(env TANDEM_INPUT_CLUSTERS; give the worker, the collectors, `tandem publish` and `tandem topics` "
        "the same list)",
    )
    add_security_options(p)


def add_input_signing_options(p: argparse.ArgumentParser) -> None:
    """``--input-signing-keys``: for the commands that write input records (collect, publish)."""
    p.add_argument(
        "--input-signing-keys",
        default=env("input_signing_keys"),
        help="file of lines 'KEY_ID CLUSTER SECRET': sign each input record with the first key of its "
        "cluster (env TANDEM_INPUT_SIGNING_KEYS; the worker checks them with --input-keys)",
    )


def add_core_options(p: argparse.ArgumentParser) -> None:
    """``--config``, ``--cluster`` and ``--sync-period``: the decision core's settings."""
    p.add_argument("--config", default=env("config"), help="settings YAML file (env TANDEM_CONFIG)")
    p.add_argument("--cluster", default=env("cluster"), help="cluster of manifests without tandem.dev/cluster")
    p.add_argument("--sync-period", type=float, default=env("sync_period"), help="tick period in seconds (default 15)")


def kafka_settings(args: argparse.Namespace) -> KafkaSettings:
    """The Kafka settings of :func:`add_kafka_options` (and ``--input-signing-keys``); ValueError
    names the option that is wrong."""
    return kafka.kafka_settings(vars(args))


def _set(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    return value if value else None


class _NoPasswordOnTheCommandLine(argparse.Action):
    """``--sasl-password`` exists only to be refused (argparse would otherwise take it for an
    abbreviation of ``--sasl-password-file`` and read a file named after the password)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None) -> None:
        parser.error(
            "--sasl-password: a password is never taken on the command line; "
            "use --sasl-password-file FILE or the environment variable TANDEM_SASL_PASSWORD"
        )


def add_security_options(p: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """The Kafka security flags (each with its ``TANDEM_`` variable); no flag takes a password."""
    environ = os.environ if environ is None else environ
    g = p.add_argument_group("Kafka security")
    g.add_argument(
        "--security-protocol",
        default=_set(environ, "TANDEM_SECURITY_PROTOCOL") or "PLAINTEXT",
        type=str.upper,
        choices=SECURITY_PROTOCOLS,
        help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (env TANDEM_SECURITY_PROTOCOL, default PLAINTEXT)",
    )
    g.add_argument(
        "--ssl-cafile",
        default=_set(environ, "TANDEM_SSL_CAFILE"),
        help="PEM CA file that verifies the broker (env TANDEM_SSL_CAFILE; default the system CAs)",
    )
    g.add_argument(
        "--ssl-certfile",
        default=_set(environ, "TANDEM_SSL_CERTFILE"),
        help="client certificate for mutual TLS (env TANDEM_SSL_CERTFILE)",
    )
    g.add_argument(
        "--ssl-keyfile",
        default=_set(environ, "TANDEM_SSL_KEYFILE"),
        help="the client certificate's key (env TANDEM_SSL_KEYFILE)",
    )
    g.add_argument(
        "--sasl-mechanism",
        default=_set(environ, "TANDEM_SASL_MECHANISM"),
        type=str.upper,
        choices=SASL_MECHANISMS,
        help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (env TANDEM_SASL_MECHANISM, default SCRAM-SHA-512)",
    )
    g.add_argument(
        "--sasl-username",
        default=_set(environ, "TANDEM_SASL_USERNAME"),
        help="SASL user (env TANDEM_SASL_USERNAME)",
    )
    g.add_argument(
        "--sasl-password-file",
        default=_set(environ, "TANDEM_SASL_PASSWORD_FILE"),
        help="file holding the SASL password (env TANDEM_SASL_PASSWORD_FILE; or set TANDEM_SASL_PASSWORD)",
    )
    g.add_argument("--sasl-password", action=_NoPasswordOnTheCommandLine, help=argparse.SUPPRESS)


def security_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
    """:class:`streams.security.KafkaSecurity` from :func:`add_security_options`' flags."""
    return security_from_mapping(vars(args), environ)


# --- record signing ---------------------------------------------------------------------------


def add_worker_signing_options(p: argparse.ArgumentParser) -> None:
    """The worker's: the input keyring it checks records with, the key it signs decisions with."""
    p.add_argument(
        "--input-keys",
        default=env("input_keys"),
        help="file of lines 'KEY_ID CLUSTER SECRET': accept an input record only with a valid tandem-mac "
        "header of a key of its event's cluster, dead-letter it otherwise (env TANDEM_INPUT_KEYS; re-read "
        "when it changes)",
    )
    p.add_argument(
        "--decision-signing-key",
        default=env("decision_signing_key"),
        help="Ed25519 private key (PEM) that signs every decision on the actuator topic "
        "(env TANDEM_DECISION_SIGNING_KEY)",
    )
    p.add_argument(
        "--decision-ttl",
        type=float,
        default=float(env("decision_ttl") or 3600),
        help="seconds a decision's signature stays valid (env TANDEM_DECISION_TTL, default 3600)",
    )


def add_decision_trust_options(p: argparse.ArgumentParser) -> None:
    """The applier's: the worker public keys whose signatures it accepts."""
    p.add_argument(
        "--trusted-decision-keys",
        default=env("trusted_decision_keys"),
        help="comma-separated PEM files of the worker public keys (Ed25519) to trust; with them, an "
        "unsigned, forged, altered or expired decision is refused and audited before any write "
        "(env TANDEM_TRUSTED_DECISION_KEYS)",
    )


def decision_verifier(args: argparse.Namespace) -> signing.DecisionVerifier | None:
    """The applier's verifier of ``--trusted-decision-keys`` (None: none given)."""
    return signing.decision_verifier(vars(args))


# --- metrics ----------------------------------------------------------------------------------


def add_metrics_options(
    p: argparse.ArgumentParser, default_port: int = 9464, max_event_age: float = DEFAULT_MAX_EVENT_AGE
) -> None:
    """``--metrics-port`` (0 disables the server), ``--ready-max-lag``, ``--ready-max-event-age``, ...

    Each is also ``TANDEM_<OPTION>`` like every tandem option.  ``max_event_age`` is the default of
    the event-age readiness check (0: never): the edge processes turn it off.
    """
    p.add_argument(
        "--metrics-port",
        type=int,
        default=env("metrics_port", str(default_port)),
        help=f"port of /metrics, /healthz, /readyz (env TANDEM_METRICS_PORT, default {default_port}; 0: none)",
    )
    p.add_argument("--metrics-addr", default=env("metrics_addr", "0.0.0.0"), help="address to bind (default 0.0.0.0)")
    p.add_argument(
        "--ready-max-lag",
        type=int,
        default=env("ready_max_lag", str(DEFAULT_MAX_LAG)),
        help=f"/readyz fails past this consumer lag in messages (default {DEFAULT_MAX_LAG}; 0: never)",
    )
    p.add_argument(
        "--ready-max-event-age",
        type=float,
        default=env("ready_max_event_age", str(max_event_age)),
        help=f"/readyz fails when the last processed event is older (s; default {max_event_age:g}; 0: never)",
    )
    p.add_argument(
        "--metrics-workloads",
        type=int,
        default=env("metrics_workloads", str(DEFAULT_WORKLOAD_SERIES)),
        help=f"at most this many workloads get replica gauges (default {DEFAULT_WORKLOAD_SERIES}; 0: none)",
    )


def metrics_from_args(args: argparse.Namespace) -> tuple[Metrics, MetricsServer | None]:
    """A :class:`ops.observability.Metrics` from :func:`add_metrics_options`' options, and its server
    unless the port is 0 (OSError: the port is taken)."""
    return serve_metrics(MetricsSettings.from_mapping(vars(args)))
