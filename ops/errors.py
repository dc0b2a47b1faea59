"""One line that says what went wrong, for stderr, logs, readiness reasons and audited results.

Every process used to print ``f"{type(exc).__name__}: {exc}"``.  That doubles the class name for
aiokafka, whose ``KafkaError.__str__`` already returns ``"<ClassName>: <message>"`` (and the bare
class name when there are no arguments), so a user saw
``KafkaConnectionError: KafkaConnectionError: Unable to bootstrap from ...``.  It prints an empty
message for exceptions raised without arguments (``TimeoutError()`` gives ``"TimeoutError: "``), and
the kubernetes client's ``ApiException.__str__`` is several lines with the response headers.

:func:`describe` names the class exactly once, never ends in an empty message (it falls back to
the cause, as ``raise X from Y`` chains it, or to the class name alone), and keeps the text on one
line.  It reads exceptions by their attributes, not their types, so this layer imports neither
aiokafka nor kubernetes.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["describe"]

# A cause chain longer than this is a bug elsewhere; stop rather than loop on a cycle.
_MAX_CAUSES = 5
_BROKER_ERRNO = re.compile(r"\[Error (-?\d+)\] ")


def describe(exc: BaseException) -> str:
    """``"<ClassName>: <message>"`` with the class named once, on one line, never an empty message.

    aiokafka's ``Unable to bootstrap`` after a refused SASL login says so first, with the user
    and the mechanism (:func:`streams.kafkalog.bootstrap_failure`): the reason is otherwise only
    in an earlier aiokafka log line.
    """
    from streams.kafkalog import bootstrap_failure

    line = _describe(exc, _MAX_CAUSES)
    why = bootstrap_failure(exc)
    return f"{why} ({line})" if why else line


def _describe(exc: BaseException, depth: int) -> str:
    name = type(exc).__name__
    message = _api_exception_message(exc)
    if message is None:
        message = _one_line(str(exc))
    # aiokafka's KafkaError.__str__ is f"{self.__class__.__name__}: {super().__str__()}", or the
    # bare class name without arguments; BrokerResponseError puts f"[Error {self.errno}] " in front
    # (aiokafka/errors.py).  Strip what is said already; the broker's error code stays, once.
    match = _BROKER_ERRNO.match(message)
    if match:
        name = f"{name} [Error {match.group(1)}]"
        message = message[match.end() :]
        if message == type(exc).__name__:
            # No arguments: the class's documented meaning says more than its name again.
            message = _one_line(str(getattr(exc, "description", "") or ""))
    if message == type(exc).__name__:
        message = ""
    elif message.startswith(type(exc).__name__ + ": "):
        message = message[len(type(exc).__name__) + 2 :].strip()
    if not message:
        # Python's own rule for tracebacks: the explicit cause, else the implicit context unless
        # ``raise ... from None`` suppressed it.
        cause = exc.__cause__ if exc.__cause__ is not None else (None if exc.__suppress_context__ else exc.__context__)
        if cause is not None and cause is not exc and depth > 0:
            return f"{name} (caused by {_describe(cause, depth - 1)})"
        return name
    return f"{name}: {message}"


def _api_exception_message(exc: BaseException) -> str | None:
    """The kubernetes client's ``ApiException`` as ``"<status> <reason>: <Status.message>"``.

    Its ``__str__`` is ``"(404)\\nReason: Not Found\\nHTTP response headers: ...\\nHTTP response
    body: ..."`` (kubernetes/client/exceptions.py); the useful part is the status, the reason and
    the ``message`` of the Kubernetes ``Status`` object in the body.  ``None`` for anything else.
    """
    status: Any = getattr(exc, "status", None)
    if not isinstance(status, int) or not hasattr(exc, "reason") or not hasattr(exc, "body"):
        return None
    reason = getattr(exc, "reason", None)
    head = f"{status} {reason}" if reason else str(status)
    body: Any = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    detail = ""
    if isinstance(body, str) and body.strip():
        try:
            parsed = json.loads(body)
        except ValueError:
            detail = _one_line(body)
        else:
            if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
                detail = _one_line(parsed["message"])
            else:
                detail = _one_line(body)
    return f"{head}: {detail}" if detail else head


def _one_line(text: str) -> str:
    """Lines joined by ``"; "``, blank ones dropped, so a message fits one log or stderr line."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())
