"""The start-up of the per-cluster processes (``tandem apply``, ``tandem collect``), written once.

Both log to stderr at ``--loglevel`` (aiokafka at warning or above: its retries are handled and its
failures raise), serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``--metrics-port``, and run one
event loop until SIGTERM or SIGINT sets the stop event that their loop and its threads watch.  Exit
codes (docs/contract.md §7): 2 a taken metrics port, 1 the process failed, 0 stopped by a signal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cli.options import metrics_from_args
from edge.kube import KubeconfigError
from ops.errors import describe

__all__ = ["log_to_stderr", "prepared", "run_until_signal", "stop_on_signals"]

T = TypeVar("T")
#: What stops a long-running tandem process: Kubernetes' SIGTERM, a terminal's Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def log_to_stderr(loglevel: str) -> None:
    """The process's log at ``loglevel``; aiokafka's at warning at least (its debug and info lines
    are per request)."""
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))


def prepared(name: str, build: Callable[[], T]) -> T | None:
    """``build()``, or ``None`` after one line on stderr, ``tandem <name>: <why>`` (the caller exits
    2): bad options, key files or a kubeconfig (whose error names the file and the fix itself)."""
    try:
        return build()
    except KubeconfigError as exc:
        print(f"tandem {name}: {exc}", file=sys.stderr)
    except Exception as exc:
        print(f"tandem {name}: {describe(exc)}", file=sys.stderr)
    return None


def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: threading.Event) -> Callable[[], None]:
    """SIGTERM and SIGINT set ``stop`` (which the loop's tasks and threads watch); the function
    returned removes the handlers again."""
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)

    def remove() -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    return remove


def serve_metrics(name: str, args: argparse.Namespace) -> tuple[Any, Any] | None:
    """The process's metrics and their server (/metrics, /healthz, /readyz on ``--metrics-port``);
    ``None`` after one line on stderr when the port cannot be served (the caller exits 2)."""
    try:
        return metrics_from_args(args)
    except OSError as exc:
        print(f"tandem {name}: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return None


def kafka_failed(prog: str, bootstrap: str, exc: BaseException) -> int:
    """One line on stderr for a Kafka command that failed, and its exit status: 2 when the topics
    exist with other settings than the contract's (``TopicMismatch``: a usage error the operator
    fixes), 1 for anything else, named against the broker (tandem publish, import --publish)."""
    from streams.topics import TopicMismatch

    if isinstance(exc, TopicMismatch):
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print(f"{prog}: {bootstrap}: {describe(exc)}", file=sys.stderr)
    return 1


def run_until_signal(
    name: str, args: argparse.Namespace, main: Callable[[threading.Event, Any], Awaitable[None]]
) -> int:
    """``await main(stop, metrics)`` in a new event loop, ``stop`` set by SIGTERM/SIGINT; the exit code.

    ``metrics`` is the process's :class:`ops.observability.Metrics`, served on ``--metrics-port``
    while ``main`` runs.  A failure of ``main`` is one line on stderr, ``tandem <name>: <why>``.
    """
    served = serve_metrics(name, args)
    if served is None:
        return 2
    metrics, server = served
    stop = threading.Event()

    async def go() -> None:
        stop_on_signals(asyncio.get_running_loop(), stop)
        await main(stop, metrics)

    try:
        asyncio.run(go())
    except Exception as exc:
        print(f"tandem {name}: {describe(exc)}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.close()
    return 0
