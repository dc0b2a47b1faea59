"""Starting a Kafka client when the broker is not there yet (docs/edge.md, "Faults"; docs/worker.md).

The worker and the edge processes often start before (or while) Kafka is reachable: a cluster coming up, a network
policy applied late, a broker restarting.  Exiting would make Kubernetes restart it again and
again (CrashLoopBackOff, with ever longer waits once Kafka is back); instead each client is started
again with exponential backoff (0.5 s doubling, at most 30 s between tries), ``/readyz`` says why it
is not ready while ``/healthz`` stays ok, and a stop request ends the wait at once.

:func:`backoff` is the one schedule of tandem's retries: the clients started here, the collector's
watches, the applier's API calls (:func:`backoff_delays`) and its wait for an unreachable API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ops.errors import describe

__all__ = ["backoff", "backoff_delays", "start_client", "start_retrying"]

log = logging.getLogger("tandem.retry")

T = TypeVar("T")

#: Doublings past this one change nothing once ``cap`` is reached, and would overflow a float.
_MAX_DOUBLINGS = 62


def backoff(retry: int, base: float, cap: float) -> float:
    """The wait before retry number ``retry`` (0 for the first): ``base`` doubling, at most ``cap``
    (exponential backoff, as client-go's ``wait.Backoff`` with factor 2 and a cap,
    https://pkg.go.dev/k8s.io/apimachinery/pkg/util/wait#Backoff)."""
    return min(cap, base * 2 ** min(max(retry, 0), _MAX_DOUBLINGS))


def backoff_delays(attempts: int, base: float = 0.2, cap: float = 5.0) -> list[float]:
    """The waits between ``attempts`` tries (``attempts - 1`` of them)."""
    return [backoff(i, base, cap) for i in range(max(0, attempts - 1))]


class _Client(Protocol):
    async def start(self) -> Any: ...

    async def stop(self) -> Any: ...


C = TypeVar("C", bound=_Client)


async def start_client(client: C) -> C:
    """``client`` started; when its ``start()`` fails it is stopped (what it opened is released)
    before the error goes on, so that :func:`start_retrying` may build a fresh one."""
    try:
        await client.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await client.stop()
        raise
    return client


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
    attempt = 0
    while True:
        attempt += 1
        try:
            started = await start()
        except Exception as exc:  # KafkaConnectionError, a DNS failure, a refused TLS handshake...
            delay = backoff(attempt - 1, base, cap)
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
