"""Kubernetes plumbing shared by the applier and the collector (docs/edge.md).

Everything goes through one raw JSON request function on top of the official client's
``ApiClient`` (authentication, TLS, proxies and token refresh stay the client's), so built-in
kinds, the policy CRDs, VPAs and ``metrics.k8s.io`` are handled alike as plain dicts, exactly as
the API serves them (camelCase, quantities as strings).  The client blocks: callers run it in a
thread (``asyncio.to_thread``).

* :func:`request` - one call; a non-2xx answer raises :class:`KubeError` with the API's status
  code, reason and message; a broken connection is a :class:`KubeError` with status 0.
* :func:`list_objects` / :func:`watch` - list (paginated) then watch from the list's
  ``resourceVersion``; a ``410 Gone`` (expired version) raises :class:`KubeError` 410 and the caller
  relists.
* :func:`selector_matches` - a ``LabelSelector`` (``matchLabels`` and ``matchExpressions``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from scaling.policies import kinds

__all__ = [
    "DEPLOYMENTS",
    "HPAS",
    "PODS",
    "POD_METRICS",
    "POLICY_RESOURCES",
    "STATEFULSETS",
    "VPAS",
    "WORKLOAD_RESOURCES",
    "KubeError",
    "KubeconfigError",
    "Resource",
    "api_client",
    "list_objects",
    "policy_resources",
    "request",
    "selector_matches",
    "served",
    "watch",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        p = self.base
        if namespace:
            p += f"/namespaces/{quote(namespace, safe='')}"
        p += f"/{self.plural}"
        if name:
            p += f"/{quote(name, safe='')}"
            if subresource:
                p += f"/{subresource}"
        return p


DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
PODS = Resource("", "v1", "pods", "Pod")
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
VPAS = Resource("autoscaling.k8s.io", "v1", "verticalpodautoscalers", "VerticalPodAutoscaler")
POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")


def policy_resources() -> tuple[Resource, ...]:
    """The policy CRDs of docs/contract.md §5 (deploy/crds/): one per registered policy kind and
    group (:mod:`scaling.policies.registry`), read at its first served version."""
    return tuple(Resource(k.group, k.versions[0], k.plural, k.kind) for k in kinds())


#: The built-in kinds' CRDs, as registered at import (:func:`policy_resources` sees later ones too).
POLICY_RESOURCES = policy_resources()
#: The workload kinds tandem scales, by ``kind``.
WORKLOAD_RESOURCES = {"Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS}


class KubeError(Exception):
    """A failed API call: ``status`` is the HTTP status (0 when the connection failed)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        """Worth another attempt: a conflict, throttling, a server error or no connection."""
        return self.status in (0, 409, 429) or self.status >= 500

    def describe(self) -> str:
        return str(self)


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used, or none found: the text names the file (or where tandem
    looked) and what to do; the commands print it as their one line and exit 2."""


#: What to do about a kubeconfig tandem cannot use, said after every such error.
_KUBECONFIG_FIX = (
    "pass --kubeconfig FILE (or TANDEM_KUBECONFIG) naming the file kubectl uses, e.g. one written by "
    "`kubectl config view --minify --raw > FILE`"
)


def _kubeconfig_source(kubeconfig: str | None) -> tuple[str | None, str]:
    """The kubeconfig to load and where its name came from (for errors); ``None``: in-cluster."""
    if kubeconfig:
        return kubeconfig, f"--kubeconfig {kubeconfig}"
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"], f"KUBECONFIG={os.environ['KUBECONFIG']}"
    home = os.path.expanduser("~/.kube/config")
    if os.path.isfile(home):
        return home, home
    return None, "in-cluster"


def api_client(kubeconfig: str | None = None) -> Any:
    """An ``ApiClient`` from ``kubeconfig``, else ``$KUBECONFIG``/``~/.kube/config``, else in-cluster.

    Anything that stops it is a :class:`KubeconfigError` whose one line names the file tried (or,
    with none found, every place looked at) and what to do: the kubernetes client's own errors
    (``Service host/port is not set.``, ``Invalid kube-config file. No configuration found.``, a
    ``UnicodeDecodeError``) name neither.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    path, source = _kubeconfig_source(kubeconfig)
    if path is None:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            home = os.path.expanduser("~/.kube/config")
            raise KubeconfigError(
                f"no kubeconfig found: no --kubeconfig, no KUBECONFIG, no {home}, and not in a pod "
                f"(in-cluster: {_kube_reason(exc)}); {_KUBECONFIG_FIX}"
            ) from None
        return client.ApiClient(configuration)
    for one in path.split(os.pathsep):  # KUBECONFIG may list several files, as kubectl's does
        if one and not os.path.isfile(os.path.expanduser(one)):
            why = "is a directory" if os.path.isdir(one) else "no such file"
            raise KubeconfigError(f"kubeconfig {one} (from {source}): {why}; {_KUBECONFIG_FIX}")
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, client_configuration=configuration, persist_config=False
        )
    except UnicodeDecodeError:
        raise KubeconfigError(
            f"kubeconfig {path} (from {source}): not text (a binary file?); {_KUBECONFIG_FIX}"
        ) from None
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        raise KubeconfigError(f"kubeconfig {path} (from {source}): {_kube_reason(exc)}; {_KUBECONFIG_FIX}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("yaml"):  # PyYAML's YAMLError, by name: yaml is the client's
            raise KubeconfigError(f"kubeconfig {path} (from {source}): not valid YAML; {_KUBECONFIG_FIX}") from None
        raise
    return client.ApiClient(configuration)


def _kube_reason(exc: BaseException) -> str:
    """The kubernetes client's error, on one line, without its trailing full stop."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text.rstrip(".")


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    out = []
    for k, v in (params or {}).items():
        if v is None:
            continue
        out.append((k, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return out


def _open(
    api: Any,
    method: str,
    path: str,
    query: Mapping[str, Any] | None,
    body: Any,
    content_type: str,
    timeout: float | tuple[float, float] | None,
    accept: str = "application/json",
) -> Any:
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    method_, url, headers, _, _ = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=_query(query),
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    # The REST client serialises a dict body itself, for JSON and for the structured YAML of an apply.
    try:
        return api.call_api(method_, url, header_params=headers, body=body, _request_timeout=timeout)
    except Exception as exc:  # urllib3: refused, reset, timed out, TLS...
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException):
            raise KubeError(exc.status or 0, str(exc.reason or "Error"), str(exc.body or exc)) from None
        raise KubeError(0, type(exc).__name__, str(exc)) from None


def _error(status: int, reason: str, data: bytes) -> KubeError:
    message = data.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(data)
        if isinstance(doc, dict):
            message = str(doc.get("message") or message)
            reason = str(doc.get("reason") or reason)
    except ValueError:
        pass
    return KubeError(status, reason or "Error", message[:2000])


def request(
    api: Any,
    method: str,
    path: str,
    *,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | tuple[float, float] | None = 30.0,
    accept: str = "application/json",
) -> Any:
    """One API call; returns the decoded JSON body, or raises :class:`KubeError`.

    ``accept`` may ask for another JSON rendering, e.g. ``application/json;as=Table;v=v1;g=meta.k8s.io``
    for the rows and printer columns ``kubectl get`` shows."""
    resp = _open(api, method, path, query, body, content_type, timeout, accept)
    try:
        data = resp.read()
    except Exception as exc:
        raise KubeError(0, type(exc).__name__, str(exc)) from None
    if not 200 <= resp.status <= 299:
        raise _error(resp.status, str(resp.reason or ""), data or b"")
    return json.loads(data) if data else None


def list_objects(
    api: Any, res: Resource, namespace: str | None = None, *, page: int = 500, label_selector: str | None = None
) -> tuple[list[dict[str, Any]], str]:
    """All objects of ``res`` (in ``namespace``, or in all namespaces) and the list's resourceVersion."""
    items: list[dict[str, Any]] = []
    cont: str | None = None
    while True:
        doc = request(
            api,
            "GET",
            res.path(namespace),
            query={"limit": page, "continue": cont, "labelSelector": label_selector},
        )
        items.extend(doc.get("items") or [])
        meta = doc.get("metadata") or {}
        cont = meta.get("continue")
        if not cont:
            return items, str(meta.get("resourceVersion") or "")


def watch(
    api: Any,
    res: Resource,
    namespace: str | None,
    resource_version: str,
    *,
    timeout_seconds: int = 60,
    stop: threading.Event | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(type, object)`` events after ``resource_version`` until the server ends the watch.

    ``BOOKMARK`` events are passed through (their object carries only the new resourceVersion).
    An ``ERROR`` event raises :class:`KubeError` with its code: ``410`` means the version expired and
    the caller must relist.
    """
    from kubernetes.watch.watch import iter_resp_lines

    query = {
        "watch": True,
        "resourceVersion": resource_version,
        "allowWatchBookmarks": True,
        "timeoutSeconds": timeout_seconds,
    }
    resp = _open(api, "GET", res.path(namespace), query, None, "", (10.0, timeout_seconds + 30.0))
    try:
        if not 200 <= resp.status <= 299:
            raise _error(resp.status, str(resp.reason or ""), resp.read() or b"")
        for line in iter_resp_lines(resp.response):  # type: ignore[no-untyped-call]
            if stop is not None and stop.is_set():
                return
            if not line.strip():
                continue
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise KubeError(int(obj.get("code") or 500), str(obj.get("reason") or "Error"), str(obj.get("message")))
            yield str(kind), obj
    except KubeError:
        raise
    except Exception as exc:  # the connection broke mid-stream
        raise KubeError(0, type(exc).__name__, str(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            resp.response.release_conn()


def served(api: Any, res: Resource) -> bool:
    """Whether the API server serves ``res`` (its group/version lists the plural)."""
    try:
        doc = request(api, "GET", res.base, timeout=10.0)
    except KubeError as exc:
        if exc.status in (404, 503):
            return False
        raise
    return any(r.get("name") == res.plural for r in (doc or {}).get("resources") or [])


def _expr_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key")), expr.get("operator")
    values: Sequence[str] = expr.get("values") or ()
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """A ``LabelSelector`` against labels.  An empty or missing selector matches nothing here: a
    workload without a selector owns no pods (apps/v1 requires one)."""
    if not selector:
        return False
    labels = labels or {}
    match = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not match and not exprs:
        return False
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    return all(_expr_matches(e, labels) for e in exprs)
