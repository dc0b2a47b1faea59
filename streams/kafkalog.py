"""What aiokafka logs, made safe and useful: no SASL material at any level, and the reason a
bootstrap failed kept for tandem's own one line.

**No secret in the log.**  aiokafka logs every request and response at debug level
(``aiokafka/conn.py``: ``"Request to %s:%d %d: %s"``, ``"Response from %s:%d %d: %s"``), the SASL
exchange included: a ``PLAIN`` password in clear, and for SCRAM the nonces, the salt, the
iteration count and the client proof, enough to test password guesses offline (RFC 5802 §9,
https://www.rfc-editor.org/rfc/rfc5802#section-9).  :class:`SaslLogGuard`, a filter on aiokafka's
loggers, replaces the payload of those records by the request's type name; every other record
passes untouched, so ``--loglevel debug`` still shows the rest of the protocol.

**Why the bootstrap failed.**  aiokafka logs each host's failure (``aiokafka/client.py``: ``'Unable
connect to "%s:%s": %s'``) and then raises ``KafkaConnectionError("Unable to bootstrap from
...")`` without the cause.  The same filter keeps the last failure per host, and
:func:`bootstrap_failure` turns an authentication failure among them into one line naming the
user and the mechanism (:func:`ops.errors.describe` uses it), instead of leaving the reason in an
earlier aiokafka line.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["SaslLogGuard", "bootstrap_failure", "install", "note_identity"]

#: The loggers whose records can carry SASL payloads or bootstrap failures.
_LOGGERS = ("aiokafka.conn", "aiokafka.client", "aiokafka")
_CONNECT_FAILED = 'Unable connect to "%s:%s": %s'
_METADATA_FAILED = 'Unable to request metadata from "%s:%s": %s'

_lock = threading.Lock()
#: (host, port) -> the error of its last failed bootstrap connection.
_failures: dict[tuple[str, str], BaseException] = {}
#: The SASL user and mechanism this process's clients use (:func:`note_identity`).
_identity: tuple[str, str] | None = None


def _is_sasl(value: object) -> bool:
    # aiokafka's protocol structs: SaslAuthenticateRequest_v0/_v1, SaslAuthenticateResponse_v0/_v1.
    return type(value).__name__.startswith("SaslAuthenticate")


class SaslLogGuard(logging.Filter):
    """Redacts SASL payloads from aiokafka's records and remembers bootstrap failures."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args:
            if any(_is_sasl(a) for a in args):
                record.args = tuple(f"{type(a).__name__}(<redacted>)" if _is_sasl(a) else a for a in args)
            elif record.msg in (_CONNECT_FAILED, _METADATA_FAILED) and len(args) == 3:
                host, port, err = args
                if isinstance(err, BaseException):
                    with _lock:
                        _failures[(str(host), str(port))] = err
        return True


_GUARD = SaslLogGuard()


def install() -> None:
    """Put the guard on aiokafka's loggers (once; a filter on a logger sees every record it creates,
    whatever the handlers and levels configured later by Faust or ``--loglevel``)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _GUARD not in logger.filters:
            logger.addFilter(_GUARD)


def note_identity(username: str, mechanism: str) -> None:
    """The SASL user and mechanism of the clients being made (one per process in practice)."""
    global _identity
    _identity = (username, mechanism)


def bootstrap_failure(exc: BaseException) -> str | None:
    """For aiokafka's ``Unable to bootstrap`` after an authentication failure: ``Kafka
    authentication failed for user 'worker' with SCRAM-SHA-512 at host:port: <the broker's
    reason>``; ``None`` for anything else."""
    text = str(exc)
    if "Unable to bootstrap from" not in text:
        return None
    with _lock:
        failures = list(_failures.items())
    for (host, port), err in reversed(failures):
        if f"'{host}', {port}" not in text and f"{host}:{port}" not in text:
            continue  # another client's host
        if not _is_auth_failure(err):
            continue
        who = f"user {_identity[0]!r} with {_identity[1]}" if _identity else "the configured SASL user"
        reason = _reason(err)
        return f"Kafka authentication failed for {who} at {host}:{port}" + (f": {reason}" if reason else "")
    return None


def _is_auth_failure(err: BaseException) -> bool:
    name = type(err).__name__
    return name in ("SaslAuthenticationFailed", "IllegalSaslStateError", "UnsupportedSaslMechanismError")


def _reason(err: Any) -> str:
    text = " ".join(str(err).split())
    # aiokafka: "[Error 58] SaslAuthenticationFailed: <the broker's message>"
    name = type(err).__name__
    if f"{name}: " in text:
        text = text.split(f"{name}: ", 1)[1]
    return text.strip()
