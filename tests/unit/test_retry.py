"""ops.retry: the one backoff schedule of tandem's retries, and starting a client that may fail."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ops.retry import backoff, backoff_delays, start_client, start_retrying


def test_backoff_doubles_from_base_up_to_cap() -> None:
    assert [backoff(i, 0.5, 30.0) for i in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_backoff_of_a_very_long_outage_stays_at_the_cap() -> None:
    assert backoff(10_000, 0.2, 5.0) == 5.0
    assert backoff(-1, 0.2, 5.0) == 0.2


def test_backoff_delays_are_the_waits_between_the_tries() -> None:
    assert backoff_delays(1) == []
    assert backoff_delays(0) == []
    assert backoff_delays(6, 0.2, 1.0) == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_delays(3) == [0.2, 0.4]


class _Client:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise ConnectionError("broker away")

    async def stop(self) -> None:
        self.calls.append("stop")


def test_a_client_that_fails_to_start_is_stopped_and_the_error_goes_on() -> None:
    client = _Client(fail=True)
    with pytest.raises(ConnectionError, match="broker away"):
        asyncio.run(start_client(client))
    assert client.calls == ["start", "stop"]


def test_a_client_that_starts_is_returned_and_not_stopped() -> None:
    client = _Client(fail=False)
    assert asyncio.run(start_client(client)) is client
    assert client.calls == ["start"]


class _Metrics:
    def __init__(self) -> None:
        self.unready: list[str | None] = []

    def set_unready(self, reason: str | None) -> None:
        self.unready.append(reason)


def test_start_retrying_builds_a_fresh_client_until_one_starts() -> None:
    built: list[_Client] = []

    async def start() -> _Client:
        client = _Client(fail=len(built) < 2)
        built.append(client)
        return await start_client(client)

    metrics = _Metrics()
    started = asyncio.run(start_retrying(start, "Kafka b:9092", metrics=metrics, base=0.001, cap=0.002))
    assert started is built[2]
    assert [c.calls for c in built] == [["start", "stop"], ["start", "stop"], ["start"]]
    assert metrics.unready == [
        "Kafka b:9092 not reachable (attempt 1): ConnectionError: broker away",
        "Kafka b:9092 not reachable (attempt 2): ConnectionError: broker away",
        None,
    ]


def test_start_retrying_gives_up_when_stopped() -> None:
    stop = threading.Event()
    stop.set()

    async def start() -> _Client:
        return await start_client(_Client(fail=True))

    assert asyncio.run(start_retrying(start, "Kafka", stop=stop, base=0.001)) is None
