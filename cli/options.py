"""The options several ``tandem`` subcommands share, defined once.

Every option is also an environment variable ``TANDEM_<OPTION>`` (``--sync-period`` is
``TANDEM_SYNC_PERIOD``, see :func:`streams.settings.env`); a flag on the command line wins over the
variable, the variable over the default.  A repeatable option (``--policy``) reads its variable as
a list separated by ``os.pathsep``; a switch (``--strict``) is on when its variable is ``1``,
``true``, ``yes`` or ``on``.

The Kafka options are :func:`streams.settings.add_kafka_options`, the worker's
:func:`agents.settings.add_worker_options` and the metrics server's
:func:`ops.observability.add_metrics_options`: they live next to the settings they build.
"""

from __future__ import annotations

import argparse
import os

from ops.observability import add_metrics_options
from streams.settings import add_core_options, env, flag

__all__ = [
    "add_core_options",
    "add_edge_metrics_options",
    "add_edge_options",
    "add_files",
    "add_loglevel",
    "add_policy",
    "add_strict",
    "env",
    "env_list",
    "flag",
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
    """:func:`ops.observability.add_metrics_options`, with the event-age readiness check off by
    default: an edge process may rightly see nothing new for hours (and an applier may be fed old
    decisions), so only the lag (and liveness) make it unready unless ``--ready-max-event-age`` is set."""
    add_metrics_options(p, max_event_age=0.0)


def add_edge_options(p: argparse.ArgumentParser) -> None:
    """``--cluster`` and ``--kubeconfig`` of the per-cluster processes (``tandem apply``, ``tandem collect``)."""
    p.add_argument("--cluster", default=env("cluster"), help="this cluster's name (env TANDEM_CLUSTER)")
    p.add_argument("--kubeconfig", default=env("kubeconfig"), help="kubeconfig (default: in-cluster or ~/.kube/config)")


def add_loglevel(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--loglevel", default=env("loglevel", default), help=f"log level (default {default})")
