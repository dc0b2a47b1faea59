"""``tandem worker``: the decision core as a Faust worker over Kafka (see docs/worker.md).

    tandem worker [--broker kafka://localhost:9092] [--topic-prefix tandem.] [--partitions 8]
                  [--store rocksdb://|memory://] [--data-dir DIR] [--web-port N | --without-web]
                  [--config FILE] [--idle-flush S] [--metrics-port 9464] ...

Every option is also ``TANDEM_<OPTION>`` (the table is ``streams.settings``'; the metrics server
serves ``/metrics``, ``/healthz``, ``/readyz`` on ``--metrics-port``, 0 for none).

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
import sys
import threading
from collections.abc import Sequence
from typing import Any

import scaling
from agents.settings import WorkerSettings, worker_settings
from agents.worker import serve
from cli.options import (
    add_core_options,
    add_kafka_options,
    add_metrics_options,
    add_worker_signing_options,
    env,
    flag,
    non_negative_float,
    positive_float,
    positive_int,
)
from cli.running import serve_metrics, stop_on_signals
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


def add_worker_options(p: argparse.ArgumentParser) -> None:
    """The worker's options: Kafka's, the decision core's, Faust's and the worker's own."""
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


def parse_worker_settings(argv: Sequence[str]) -> WorkerSettings:
    """Convenience for tests and embedding: parse worker flags (plus the environment)."""
    p = argparse.ArgumentParser(prog="tandem worker")
    add_worker_options(p)
    return worker_settings(vars(p.parse_args(list(argv))))


def run(args: argparse.Namespace) -> int:
    try:
        settings = worker_settings(vars(args))
    except (OSError, ValueError) as exc:
        print(f"tandem worker: {exc}", file=sys.stderr)
        return 2

    served = serve_metrics("worker", args)
    if served is None:
        return 2
    metrics = served[0]

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
    remove_handlers = stop_on_signals(loop, stop)

    async def attempt() -> TopicsReport | TopicMismatch:
        try:
            return await ensure_topics(settings, extra=[settings.state_changelog()])
        except TopicMismatch as exc:
            return exc

    try:
        return await start_retrying(attempt, f"Kafka at {settings.bootstrap}", stop=stop, metrics=metrics)
    finally:
        remove_handlers()
