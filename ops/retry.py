"""Starting a Kafka client when the broker is not there yet (docs/edge.md, "Faults"; docs/worker.md).

The worker and the edge processes often start before (or while) Kafka is reachable: a cluster coming up, a network
policy applied late, a broker restarting.  Exiting would make Kubernetes restart it again and
again (CrashLoopBackOff, with ever longer waits once Kafka is back); instead each client is started
again with exponential backoff (0.5 s doubling, at most 30 s between tries), ``/readyz`` says why it
is not ready while ``/healthz`` stays ok, and a stop request ends the wait at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ops.errors import describe

__all__ = ["start_retrying"]

log = logging.getLogger("tandem.retry")

T = TypeVar("T")


async def start_retrying(
    start: Callable[[], Awaitable[T]],
    what: str,
    *,
    stop: threading.Event | None = None,
    metrics: Any = None,
    base: float = 0.5,
    cap: float = 30.0,
) -> T | None:
    """``await start()`` until it succeeds (its result) or ``stop`` is set (``None``).

    ``start`` must build a fresh client on every call: an aiokafka client whose ``start()`` failed
    is not started again.  While it fails, ``metrics`` (an :class:`ops.observability.Metrics`) is
    not ready, with the reason.
    """
    delay = base
    attempt = 0
    while True:
        attempt += 1
        try:
            started = await start()
        except Exception as exc:  # KafkaConnectionError, a DNS failure, a refused TLS handshake...
            reason = f"{what} not reachable (attempt {attempt}): {describe(exc)}"
            log.warning("%s; retrying in %.1f s", reason, delay)
            if metrics is not None:
                metrics.set_unready(reason)
        else:
            if metrics is not None:
                metrics.set_unready(None)
            if attempt > 1:
                log.info("%s reached after %d attempts", what, attempt)
            return started
        waited = 0.0
        while waited < delay:  # wake up often enough to honour a stop request
            if stop is not None and stop.is_set():
                return None
            step = min(0.1, delay - waited)
            await asyncio.sleep(step)
            waited += step
        delay = min(cap, delay * 2)
