"""``tandem worker``: the decision core as a Faust worker over Kafka (see docs/worker.md).

    tandem worker [--broker kafka://localhost:9092] [--topic-prefix tandem.] [--partitions 8]
                  [--store rocksdb://|memory://] [--data-dir DIR] [--web-port N | --without-web]
                  [--config FILE] [--idle-flush S] [--metrics-port 9464] ...

Every option is also ``TANDEM_<OPTION>`` (``streams.settings``; ``ops.observability`` for the
metrics server: ``/metrics``, ``/healthz``, ``/readyz`` on ``--metrics-port``, 0 for none).

Before Faust starts, the missing topics of docs/contract.md §2 are created with ``--partitions``
partitions: Faust would otherwise let Kafka auto-create an input topic with the broker's default
partition count, and then crash on a table whose changelog does not match its source.  A broker
that does not answer yet is waited for (with backoff, ``/readyz`` failing).  Exit codes:
2 bad options, topics with another partition count or a taken metrics port; 70 Kafka
refused the outputs (see ``agents.pipeline``); otherwise the worker runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from typing import Any

import scaling
from agents.settings import WorkerSettings, add_worker_options, worker_settings
from agents.worker import serve
from ops.observability import add_metrics_options, metrics_from_args
from ops.retry import start_retrying
from streams.topics import TopicMismatch, TopicsReport, ensure_topics

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

    try:
        metrics, _server = metrics_from_args(args)  # /metrics, /healthz, /readyz on --metrics-port
    except OSError as exc:
        print(f"tandem worker: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2

    # One loop for the topic check and for Faust (asyncio.run would close it and unset the loop).
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    prepared = loop.run_until_complete(_prepare_topics(settings, metrics, loop))
    if prepared is None:  # stopped (SIGTERM/SIGINT) while waiting for the broker
        return 0
    if isinstance(prepared, TopicMismatch):
        print(f"tandem worker: {prepared}", file=sys.stderr)
        return 2
    if prepared.created:
        print(f"tandem worker: created topics {', '.join(prepared.created)}", file=sys.stderr)
    print(f"tandem worker: {scaling.CORE} core (TANDEM_CORE, scaling/__init__.py)", file=sys.stderr)
    serve(settings, loop=loop, metrics=metrics)  # Faust is imported there, only when the worker runs
    return 0  # pragma: no cover


async def _prepare_topics(
    settings: WorkerSettings, metrics: Any, loop: asyncio.AbstractEventLoop
) -> TopicsReport | TopicMismatch | None:
    """The topics of docs/contract.md §2, created when missing, once the broker answers.

    A worker often starts before its broker (a fresh install, a broker restarting): exiting would
    put it into CrashLoopBackOff with ever longer waits once Kafka is back (issue #18, "a worker
    started before the broker is up").  So it waits with backoff (``ops.retry``), ``/readyz``
    failing with the reason and ``/healthz`` ok; SIGTERM/SIGINT end the wait.  A topic with another
    partition count is not a broker that is away: it is returned at once.
    """
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def attempt() -> TopicsReport | TopicMismatch:
        try:
            return await ensure_topics(settings, extra=[settings.state_changelog()])
        except TopicMismatch as exc:
            return exc

    try:
        return await start_retrying(attempt, f"Kafka at {settings.bootstrap}", stop=stop, metrics=metrics)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
