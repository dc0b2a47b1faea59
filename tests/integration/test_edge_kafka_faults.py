"""Kafka unreachable when an edge process starts (issue #18): it waits, unready but alive.

A process that exits when the broker is not there yet is restarted by Kubernetes into a crash
loop; the applier and the collector instead start their clients again with backoff, ``/readyz``
names the reason while ``/healthz`` stays ok, and a stop request ends the wait.  The broker is made
reachable late through a TCP proxy on the bootstrap address (the broker's advertised address is
reachable directly, as in a cluster where only the bootstrap name resolves late).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import uuid
from typing import Any

import orjson
import pytest

from edge.applier import ApplierConfig
from edge.applier import run as run_applier
from edge.collector import CollectorConfig
from edge.collector import run as run_collector
from ops.observability import Metrics
from scaling.cloudevents import DECISION, cloudevent
from streams.settings import KafkaSettings
from streams.topics import ensure_topics, topic_name
from tests.fixtures.kafka import run_sync, wait_for
from tests.integration.test_metrics_worker import free_port

pytestmark = [pytest.mark.kafka]


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target`` (``host:port``) from its creation (nothing listens before)."""

    def __init__(self, port: int, target: str) -> None:
        host, _, tport = target.rpartition(":")
        self.port, self.target = port, (host or "127.0.0.1", int(tport))
        self.server = socket.create_server(("127.0.0.1", port))
        self.closed = False
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop listening and cut every connection (as a restarting server does)."""
        self.closed = True
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
        self.server.close()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


class Background:
    """A coroutine run in a thread; its exception (if any) is kept."""

    def __init__(self, coro: Any) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, args=(coro,), daemon=True)
        self.thread.start()

    def _main(self, coro: Any) -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            self.error = exc


def unready_for_kafka(metrics: Metrics, port: int) -> bool:
    reasons = metrics.readiness().reasons
    return any(r.startswith(f"Kafka 127.0.0.1:{port} not reachable (attempt 2)") for r in reasons)


def test_the_applier_waits_for_kafka_unready_but_alive_then_consumes(kafka_broker: str) -> None:
    port = free_port()
    prefix = f"t{uuid.uuid4().hex[:8]}."
    run_sync(ensure_topics(KafkaSettings(broker=kafka_broker, prefix=prefix, partitions=1)))
    settings = KafkaSettings(broker=f"127.0.0.1:{port}", prefix=prefix, partitions=1)
    metrics, stop = Metrics(), threading.Event()
    group = f"tandem-applier-c1-{uuid.uuid4().hex[:6]}"
    job = Background(
        run_applier(
            settings,
            ApplierConfig("c1"),
            None,
            group_id=group,
            offset_reset="earliest",
            stop=stop,
            metrics=metrics,
            ensure=False,
        )
    )
    try:
        wait_for(lambda: unready_for_kafka(metrics, port), 60, interval=0.1, message="unready: Kafka not reachable")
        assert metrics.liveness().ready and job.thread.is_alive() and job.error is None
        proxy = Proxy(port, kafka_broker)
        try:
            wait_for(lambda: metrics.readiness().ready, 90, interval=0.1, message=lambda: str(metrics.readiness()))
            # It consumes: another cluster's decision is skipped and its offset committed.
            other = cloudevent(
                DECISION,
                "c2",
                "c2/ns/Deployment/web",
                1.0,
                {"workload": {"cluster": "c2", "namespace": "ns", "kind": "Deployment", "name": "web"}, "tick": 1.0},
            )
            run_sync(_send(kafka_broker, topic_name(prefix, "actuator"), orjson.dumps(other)))
            wait_for(
                lambda: run_sync(_committed(kafka_broker, group, topic_name(prefix, "actuator"))) == 1,
                30,
                interval=0.2,
                message="the decision's offset committed",
            )
        finally:
            stop.set()
            job.thread.join(30)
            proxy.close()
    finally:
        stop.set()
    assert not job.thread.is_alive() and job.error is None


def test_the_collector_waits_for_kafka_and_stops_when_asked() -> None:
    port = free_port()
    settings = KafkaSettings(broker=f"127.0.0.1:{port}", prefix="t.", partitions=1)
    metrics, stop = Metrics(), threading.Event()
    job = Background(run_collector(CollectorConfig("c1"), None, settings=settings, stop=stop, metrics=metrics))
    wait_for(lambda: unready_for_kafka(metrics, port), 90, interval=0.1, message="unready: Kafka not reachable")
    assert metrics.liveness().ready and job.thread.is_alive() and job.error is None
    stop.set()
    job.thread.join(30)
    assert not job.thread.is_alive() and job.error is None


async def _send(broker: str, topic: str, value: bytes) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"k")
    finally:
        await producer.stop()


async def _committed(broker: str, group: str, topic: str) -> int | None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        committed: int | None = await consumer.committed(TopicPartition(topic, 0))
        return committed
    finally:
        await consumer.stop()
