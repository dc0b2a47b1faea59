"""The line a worker says when Kafka refuses its consumer group (agents/groupwatch.py)."""

from __future__ import annotations

from typing import Any

from aiokafka.errors import GroupAuthorizationFailedError, KafkaError

from agents.fence import take_parked_error
from agents.groupwatch import refused_line


def test_a_refused_group_names_the_group_the_user_and_what_to_grant() -> None:
    exc = GroupAuthorizationFailedError("t.worker")
    assert refused_line("t.worker", "worker", exc, 3) == (
        "Kafka refuses user 'worker' the consumer group 't.worker' (GroupAuthorizationFailedError, attempt 3): "
        "grant User:worker Read and Describe on group t.worker "
        "(scripts/kafka-acls.sh --worker worker --app-id t.worker grants them)"
    )


def test_without_a_sasl_user_the_line_speaks_of_the_workers_principal() -> None:
    line = refused_line("g", None, GroupAuthorizationFailedError("g"), 1)
    assert line == (
        "Kafka refuses the worker's principal the consumer group 'g' (GroupAuthorizationFailedError, attempt 1): "
        "grant the worker's principal Read and Describe on group g (scripts/kafka-acls.sh --worker <user> "
        "--app-id g grants them)"
    )


def test_another_parked_error_is_said_in_one_line_too() -> None:
    line = refused_line("g", "worker", KafkaError("Unexpected error during coordination\nboom"), 2)
    assert line == (
        "Kafka consumer group 'g' of user 'worker': KafkaError: Unexpected error during coordination; boom (attempt 2)"
    )


class _Coordinator:
    """aiokafka's GroupCoordinator as far as the watch reads it."""

    def __init__(self, pending: BaseException | None, generation: int) -> None:
        self._pending_exception = pending
        self.generation = generation
        self.checked = 0

    def check_errors(self) -> None:
        self.checked += 1
        exc, self._pending_exception = self._pending_exception, None
        if exc is not None:
            raise exc


class _Consumer:
    def __init__(self, coordinator: _Coordinator) -> None:
        self._coordinator = coordinator


def test_the_parked_error_is_taken_as_getmany_takes_it_so_the_coordinator_tries_again() -> None:
    exc = GroupAuthorizationFailedError("g")
    coordinator = _Coordinator(exc, -1)
    consumer: Any = _Consumer(coordinator)
    assert take_parked_error(consumer) == (exc, -1)
    assert (coordinator.checked, coordinator._pending_exception) == (1, None)
    # nothing parked: nothing taken (check_errors would also raise a crashed coordination task's error)
    coordinator.generation = 4
    assert take_parked_error(consumer) == (None, 4)
    assert coordinator.checked == 1
