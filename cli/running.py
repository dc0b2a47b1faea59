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
from typing import Any

from cli.options import metrics_from_args
from ops.errors import describe

__all__ = ["log_to_stderr", "run_until_signal"]


def log_to_stderr(loglevel: str) -> None:
    """The process's log at ``loglevel``; aiokafka's at warning at least (its debug and info lines
    are per request)."""
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))


def run_until_signal(
    name: str, args: argparse.Namespace, main: Callable[[threading.Event, Any], Awaitable[None]]
) -> int:
    """``await main(stop, metrics)`` in a new event loop, ``stop`` set by SIGTERM/SIGINT; the exit code.

    ``metrics`` is the process's :class:`ops.observability.Metrics`, served on ``--metrics-port``
    while ``main`` runs.  A failure of ``main`` is one line on stderr, ``tandem <name>: <why>``.
    """
    try:
        metrics, server = metrics_from_args(args)  # /metrics, /healthz, /readyz on --metrics-port
    except OSError as exc:
        print(f"tandem {name}: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
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
