"""A consumer group that Kafka refuses is never a silent hang: the worker says so and tries again.

aiokafka's group coordinator runs in the background.  An error it cannot get past by itself, such
as ``GroupAuthorizationFailedError`` (the worker's user may not use its consumer group: no ``Read``
ACL on it), is parked (``GroupCoordinator._push_error_to_user``) until the application polls with
``getone``/``getmany``, which raise it (``GroupCoordinator.check_errors``); until then the
coordinator waits.  Faust never polls that way: it reads through aiokafka's fetcher
(``faust.transport.drivers.aiokafka``, ``AIOKafkaConsumerThread._fetch_records``), so a worker
without the group ACL hung after aiokafka's ``Subscribed to topic(s):`` and said nothing, for good.

:class:`GroupWatch` takes the parked error on the consumer's thread, as ``getmany`` would, which
also lets the coordinator try again.  The worker does what it does for a broker that refuses its
login (``ops.retry``): one line per attempt naming the group, the user and what to grant, with the
same backoff (0.5 s doubling, at most 30 s), ``/readyz`` failing with that line and ``/healthz``
ok.  Granting the ACL is enough: the next attempt joins the group, with no restart.  Exiting instead
would only put the pod into CrashLoopBackOff until someone grants it anyway.

Kafka's rules: finding the group's coordinator needs ``Describe`` on the group, joining it and
committing offsets need ``Read`` (KIP-11 and the authorization table of the Kafka documentation,
"Operations and Resources on Protocols", https://kafka.apache.org/documentation/#operations_resources_and_protocols).

aiokafka private API reached (read against aiokafka 0.14.0): ``AIOKafkaConsumer._coordinator``, its
``_pending_exception``, ``check_errors()`` and ``generation``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ops.errors import describe
from ops.retry import backoff

__all__ = ["GroupWatch", "refused_line"]

log = logging.getLogger("tandem.worker")

#: How often the watch looks for a parked error while none is there (seconds).
POLL = 1.0
#: aiokafka's ``OffsetCommitRequest.DEFAULT_GENERATION_ID``: not a member of the group (yet).
NO_GENERATION = -1


def refused_line(group: str, user: str | None, exc: BaseException, attempt: int) -> str:
    """The one line for a coordinator error aiokafka parked: what, for whom, and what to do."""
    who = f"user {user!r}" if user else "the worker's principal"
    principal = f"User:{user}" if user else "the worker's principal"
    if type(exc).__name__ == "GroupAuthorizationFailedError":
        return (
            f"Kafka refuses {who} the consumer group {group!r} (GroupAuthorizationFailedError, attempt {attempt}): "
            f"grant {principal} Read and Describe on group {group} "
            f"(scripts/kafka-acls.sh --worker {user or '<user>'} --app-id {group} grants them)"
        )
    return f"Kafka consumer group {group!r} of {who}: {describe(exc)} (attempt {attempt})"


class GroupWatch:
    """Watches the worker's consumer for errors aiokafka keeps for a ``getmany`` Faust never makes."""

    def __init__(
        self, app: Any, group: str, user: str | None, metrics: Any = None, *, base: float = 0.5, cap: float = 30.0
    ) -> None:
        self.app = app
        self.group = group
        self.user = user
        self.metrics = metrics
        self.base = base
        self.cap = cap
        #: Refused attempts since the group was last joined (0: none).
        self.refused = 0

    async def run(self) -> None:
        """Until the app stops: look every :data:`POLL` s, and after a refusal after the backoff."""
        from agents.fence import in_consumer_thread, take_parked_error

        while not self.app.should_stop:
            try:
                parked, generation = await in_consumer_thread(self.app, take_parked_error)
            except Exception:  # the consumer is not started yet (or stopping): look again later
                await asyncio.sleep(POLL)
                continue
            if parked is not None:
                self.refused += 1
                delay = backoff(self.refused - 1, self.base, self.cap)
                line = refused_line(self.group, self.user, parked, self.refused)
                log.warning("tandem worker: %s; retrying in %.1f s", line, delay)
                if self.metrics is not None:
                    self.metrics.set_unready(line)
                await asyncio.sleep(delay)
                continue
            if self.refused and generation != NO_GENERATION:
                log.warning(
                    "tandem worker: joined the consumer group %r after %d refused attempts", self.group, self.refused
                )
                self.refused = 0
                if self.metrics is not None:
                    self.metrics.set_unready(None)
            await asyncio.sleep(POLL)
