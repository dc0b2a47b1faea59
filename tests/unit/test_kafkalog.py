"""streams/kafkalog.py without a broker: what the guard does to aiokafka's records (issue 29, items 4, 5).

The real SCRAM exchange and the real wrong password: tests/integration/test_kafka_operator_messages.py.
"""

from __future__ import annotations

import logging

import pytest

from ops.errors import describe
from streams import kafkalog


class SaslAuthenticateRequest_v1:  # named as aiokafka's protocol struct
    def __repr__(self) -> str:
        return "SaslAuthenticateRequest_v1(sasl_auth_bytes=b'c=biws,r=abc,p=PROOF')"


class SaslAuthenticationFailed(Exception):
    """As aiokafka's (``aiokafka.errors``): ``str`` is ``[Error 58] SaslAuthenticationFailed: <broker>``."""


def record(name: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, logging.DEBUG, __file__, 1, msg, args, None)


def test_a_sasl_request_s_payload_is_redacted_and_other_records_pass_untouched() -> None:
    guard = kafkalog.SaslLogGuard()
    r = record("aiokafka.conn", "Request to %s:%d %d: %s", "k", 9093, 7, SaslAuthenticateRequest_v1())
    assert guard.filter(r)
    assert r.getMessage() == "Request to k:9093 7: SaslAuthenticateRequest_v1(<redacted>)"
    other = record("aiokafka.conn", "Request to %s:%d %d: %s", "k", 9093, 8, "MetadataRequest_v1(topics=[])")
    assert guard.filter(other)
    assert other.getMessage() == "Request to k:9093 8: MetadataRequest_v1(topics=[])"


def test_the_guard_is_on_aiokafka_s_loggers_once_the_kafka_settings_are_imported() -> None:
    import streams.security  # noqa: F401 - installs it

    kafkalog.install()  # a second time changes nothing
    for name in ("aiokafka.conn", "aiokafka.client"):
        guards = [f for f in logging.getLogger(name).filters if isinstance(f, kafkalog.SaslLogGuard)]
        assert len(guards) == 1, name


def test_unable_to_bootstrap_after_a_refused_login_says_who_was_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafkalog, "_failures", {})
    kafkalog.note_identity("worker", "SCRAM-SHA-512")
    err = SaslAuthenticationFailed("[Error 58] SaslAuthenticationFailed: Authentication failed: invalid credentials")
    kafkalog.SaslLogGuard().filter(record("aiokafka.client", 'Unable connect to "%s:%s": %s', "k", 9093, err))
    exc = ConnectionError("Unable to bootstrap from [('k', 9093, <AddressFamily.AF_UNSPEC: 0>)]")
    assert describe(exc) == (
        "Kafka authentication failed for user 'worker' with SCRAM-SHA-512 at k:9093: Authentication failed: "
        "invalid credentials (ConnectionError: Unable to bootstrap from [('k', 9093, <AddressFamily.AF_UNSPEC: 0>)])"
    )
    # Another host's bootstrap, or a failure that is not a login's, says nothing more.
    assert describe(ConnectionError("Unable to bootstrap from [('other', 9093, 0)]")).startswith("ConnectionError")
    kafkalog.SaslLogGuard().filter(
        record("aiokafka.client", 'Unable connect to "%s:%s": %s', "k", 9093, ConnectionRefusedError("refused"))
    )
    assert describe(exc) == f"ConnectionError: {exc}"
