"""``ops.errors.describe``: one line per failure, the class named once, never an empty message.

The objects are the real exception classes of aiokafka and the kubernetes client, built the way
those libraries build them, so a change in their ``__str__`` shows up here.
"""

from __future__ import annotations

import json
import types

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NodeNotReadyError,
    TopicAuthorizationFailedError,
)
from kubernetes.client.exceptions import ApiException, NotFoundException

from edge.kube import KubeError
from ops.errors import describe


def test_aiokafka_error_names_its_class_once() -> None:
    exc = KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 1, <AddressFamily.AF_INET: 2>)]")
    assert str(exc).startswith("KafkaConnectionError: ")  # aiokafka's own __str__, the cause of the doubling
    assert describe(exc) == (
        "KafkaConnectionError: Unable to bootstrap from [('127.0.0.1', 1, <AddressFamily.AF_INET: 2>)]"
    )


def test_aiokafka_subclass_and_argument_free_errors() -> None:
    assert describe(NodeNotReadyError("node 1 not ready")) == "NodeNotReadyError: node 1 not ready"
    # Without arguments aiokafka's __str__ is the bare class name: no "X: X", no trailing colon.
    assert describe(KafkaTimeoutError()) == "KafkaTimeoutError"


def test_broker_response_errors_keep_their_code_once() -> None:
    # BrokerResponseError.__str__ is "[Error <errno>] <ClassName>[: <message>]".
    assert str(TopicAuthorizationFailedError("topics a,b")) == "[Error 29] TopicAuthorizationFailedError: topics a,b"
    described = describe(TopicAuthorizationFailedError("topics a,b"))
    assert described == "TopicAuthorizationFailedError [Error 29]: topics a,b"
    # Without arguments the class's own description is the message.
    assert describe(TopicAuthorizationFailedError()) == (
        "TopicAuthorizationFailedError [Error 29]: "
        "Returned by the broker when the client is not authorized to access the requested topic."
    )


def test_empty_message_falls_back_to_the_cause() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")
        except OSError as inner:
            raise KafkaConnectionError() from inner
    except KafkaConnectionError as exc:
        assert describe(exc) == (
            "KafkaConnectionError (caused by ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 1))"
        )
    try:
        try:
            raise ValueError("hidden")
        except ValueError:
            raise TimeoutError() from None
    except TimeoutError as exc:
        assert describe(exc) == "TimeoutError"  # `from None` suppresses the context, as in a traceback


def test_plain_exceptions() -> None:
    assert describe(ValueError("bad value")) == "ValueError: bad value"
    assert describe(TimeoutError()) == "TimeoutError"
    assert describe(RuntimeError("first line\n\n  second line  \n")) == "RuntimeError: first line; second line"
    # A message that merely begins with the class name's letters is kept whole.
    assert describe(ValueError("ValueErrors galore")) == "ValueError: ValueErrors galore"


def _response(status: int, reason: str, body: str) -> types.SimpleNamespace:
    # What urllib3 hands to ApiException(http_resp=...): status, reason, data bytes, headers.
    return types.SimpleNamespace(
        status=status,
        reason=reason,
        data=body.encode(),
        headers={"Content-Type": "application/json", "Audit-Id": "8f2c"},
    )


def test_kubernetes_api_exception_is_one_line_with_the_status_message() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": 'deployments.apps "encoder" not found',
            "reason": "NotFound",
            "code": 404,
        }
    )
    with pytest.raises(NotFoundException) as raised:
        ApiException.from_response(http_resp=_response(404, "Not Found", body), body=body, data=None)
    exc = raised.value
    assert "\n" in str(exc) and "Audit-Id" in str(exc)  # the client's own multi-line text
    assert describe(exc) == 'NotFoundException: 404 Not Found: deployments.apps "encoder" not found'


def test_kubernetes_api_exception_without_a_json_body() -> None:
    exc = ApiException(status=0, reason="Connection refused")
    assert describe(exc) == "ApiException: 0 Connection refused"
    exc = ApiException(http_resp=_response(502, "Bad Gateway", "<html>upstream\nunavailable</html>"))
    assert describe(exc) == "ApiException: 502 Bad Gateway: <html>upstream; unavailable</html>"


def test_tandems_own_kube_error_is_unchanged() -> None:
    exc = KubeError(409, "Conflict", "the object has been modified")
    assert describe(exc) == "KubeError: 409 Conflict: the object has been modified"
