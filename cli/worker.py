"""``tandem worker``: the decision core as a Faust worker over Kafka (see docs/worker.md).

    tandem worker [--broker kafka://localhost:9092] [--topic-prefix tandem.] [--partitions 8]
                  [--store rocksdb://|memory://] [--data-dir DIR] [--web-port N | --without-web]
                  [--config FILE] [--idle-flush S] [--metrics-port 9464] ...

Every option is also ``TANDEM_<OPTION>`` (``streams.settings``; ``ops.observability`` for the
metrics server: ``/metrics``, ``/healthz``, ``/readyz`` on ``--metrics-port``, 0 for none).

Before Faust starts, the missing topics of docs/contract.md §2 are created with ``--partitions``
partitions: Faust would otherwise let Kafka auto-create an input topic with the broker's default
partition count, and then crash on a table whose changelog does not match its source.  Exit codes:
2 bad options, topics with another partition count or a taken metrics port; 1 no broker; 70 Kafka
refused the outputs (see ``agents.pipeline``); otherwise the worker runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agents.settings import add_worker_options, worker_settings
from agents.worker import serve
from ops.errors import describe
from ops.observability import add_metrics_options, metrics_from_args
from streams.topics import TopicMismatch, ensure_topics

NAME = "worker"
HELP = "run the Faust worker"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    add_worker_options(p)
    add_metrics_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        settings = worker_settings(args)
    except (OSError, ValueError) as exc:
        print(f"tandem worker: {exc}", file=sys.stderr)
        return 2

    # One loop for the topic check and for Faust (asyncio.run would close it and unset the loop).
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        report = loop.run_until_complete(ensure_topics(settings))
    except TopicMismatch as exc:
        print(f"tandem worker: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(
            f"tandem worker: cannot prepare topics on {settings.bootstrap}: {describe(exc)}",
            file=sys.stderr,
        )
        return 1
    if report.created:
        print(f"tandem worker: created topics {', '.join(report.created)}", file=sys.stderr)

    try:
        metrics, _server = metrics_from_args(args)  # /metrics, /healthz, /readyz on --metrics-port
    except OSError as exc:
        print(f"tandem worker: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2
    serve(settings, loop=loop, metrics=metrics)  # Faust is imported there, only when the worker runs
    return 0  # pragma: no cover
