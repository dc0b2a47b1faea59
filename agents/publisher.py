"""Publishing: what the core emitted, and the dead letters, sent where :func:`streams.routing.route`
says, and waited for until the broker has them all (outputs before the state that records them)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agents.admission import Reject
from agents.shared import Topics
from scaling.cloudevents import rfc3339
from schemas.codec import encode
from streams.deadletter import deadletter_record
from streams.merge import Output, Rejected
from streams.routing import ACTUATOR, INPUT, applies, route
from streams.signing import sign_input

__all__ = ["Publisher"]

log = logging.getLogger("tandem.worker")


class Publisher:
    """Sends a batch's (or a timer round's) outputs and dead letters through the app's producer."""

    def __init__(self, app: Any, topics: Topics, keyring: Any, signer: Any, stats: defaultdict[str, int]) -> None:
        self.app = app
        self.topics = topics
        #: streams.signing: input authentication and decision signatures (None: off).
        self.keyring = keyring
        self.signer = signer
        self.stats = stats

    async def publish(self, out: Output, rejects: Sequence[Reject]) -> None:
        """Send outputs and dead letters, and wait until the broker has them all.

        Their Kafka timestamp is processing time (the producer's default): the event time is in the
        CloudEvent (``time``, ``data.tick``), and time retention must count from when a decision
        was made, not from its tick, or the decisions of a replayed recording would be deleted by
        the topic's retention as soon as they are written.
        """
        if not out and not rejects:
            return
        for late in out.late:
            # Never silent (issue #28): the audit has its report, the metrics count it, and the log
            # says where it came from, for the operator matching it with a rebalance or a stall.
            self.stats["late"] += 1
            log.info(
                "tandem worker: late input %s[%d]@%d for %s: ts %s belongs to tick %s, already decided through %s",
                self.topics.input_topic(late.kind, late.key),
                late.partition,
                late.offset,
                late.key,
                rfc3339(late.ts),
                rfc3339(late.tick),
                rfc3339(late.decided),
            )
        futures = await self._send_outputs(out)
        send = self.app.producer.send
        deadletter = self.topics.deadletter
        for r in out.rejected:
            futures.append(await send(deadletter, r.key.encode(), self._rejected_record(r), None, None, None))
        for late in out.late:
            # Dead-lettered with its reason like every drop (issue #29): applied, but its tick was
            # decided without it, and a dead-letter reader sees every input not taken as it came.
            record = deadletter_record(
                self.topics.input_topic(late.kind, late.key),
                late.partition,
                late.offset,
                late.key.encode(),
                encode(late.raw),
                late.error,
            )
            futures.append(await send(deadletter, late.key.encode(), record, None, None, None))
        for _kind, key, value, *_ in rejects:
            futures.append(await send(deadletter, key, value, None, None, None))
        self.stats["deadletter"] += len(out.rejected) + len(rejects) + len(out.late)
        if futures:
            await asyncio.gather(*futures)

    async def _send_outputs(self, out: Output) -> list[Any]:
        """Send what the core emitted to its destinations; the producer's futures."""
        send = self.app.producer.send
        layout = self.topics.layout
        stats = self.stats
        futures = []
        for key, kind, ev in out.emitted:
            k = key.encode()
            value = encode(ev)
            destinations = route(layout, key, kind, ev)
            if not destinations:  # pragma: no cover - the core emits only audit, hpa and vpa
                log.error("tandem worker: unknown output kind %r dropped", kind)
                continue
            for purpose, topic in destinations:
                headers = None
                if purpose == ACTUATOR:
                    # A cluster with its own actuator topic also gets there what its applier shows in
                    # the policy status (blocked reports, dry-run decisions), so that its principal
                    # needs no right on the audit topic (streams.routing, docs/operating.md).
                    headers = [self.signer.sign(k, value)] if self.signer is not None else None
                    if applies(ev):
                        stats["decisions"] += 1
                elif purpose == INPUT:
                    headers = self._own_headers(kind, key, k, value) if self.keyring is not None else None
                    stats["recommendations"] += 1
                else:
                    stats["audit"] += 1
                futures.append(await send(topic, k, value, None, None, headers))
        return futures

    def _own_headers(self, kind: str, key: str, k: bytes, value: bytes) -> list[tuple[str, bytes]] | None:
        """The ``tandem-mac`` of an own recommendation, with a key of its workload's cluster (the
        worker verifies its cluster's inputs with the same HMAC keys), so that it is told from a
        forged one when it comes back (issue #29)."""
        assert self.keyring is not None
        cluster = key.split("/", 1)[0]
        mine = [ik for ik in self.keyring.keys.values() if ik.cluster == cluster]
        signing = min(mine, key=lambda ik: ik.key_id) if mine else None
        return [sign_input(signing, kind, k, value)] if signing is not None else None

    def _rejected_record(self, r: Rejected) -> bytes:
        log.warning("tandem worker: rejected %s[%d]@%d: %s", r.kind, r.partition, r.offset, r.error)
        return deadletter_record(
            self.topics.input_topic(r.kind, r.key), r.partition, r.offset, r.key.encode(), encode(r.raw), r.error
        )
