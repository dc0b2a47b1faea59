"""Prometheus's HTTP API for ``tandem import prometheus`` (:mod:`streams.prometheus`): the queries
and the labels they keep, the client, and every query of a window read at once.

Only the standard library speaks HTTP (``urllib``); range queries are split under Prometheus's limit
of 11,000 points per series ("exceeded maximum resolution of 11,000 points per timeseries",
https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries), run a few at a time and
retried with backoff when the server is unreachable or busy.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from string import Template
from typing import Any

import orjson

from scaling.spelling import did_you_mean

__all__ = [
    "DEFAULT_LABELS",
    "DEFAULT_QUERIES",
    "MAX_POINTS",
    "Auth",
    "Client",
    "Fetched",
    "PrometheusError",
    "QuerySet",
    "Series",
    "fetch_all",
    "load_queries",
    "range_parts",
]

#: How Prometheus's JSON writes values that are not finite numbers.
_NOT_FINITE = frozenset({"NaN", "+Inf", "-Inf"})
_second = itemgetter(1)

#: Prometheus refuses a range query whose series would have more points than this.
MAX_POINTS = 11_000

#: The queries, by name.  ``$namespaces`` is a regular expression of the ``--namespace`` values
#: (``.*`` for all), ``$step`` the step as a PromQL duration.  A query's result keeps the labels the
#: builder reads (:data:`DEFAULT_LABELS`).
DEFAULT_QUERIES: dict[str, str] = {
    # cAdvisor (the kubelet's /metrics/cadvisor): usage in cores, averaged over the step.  Not
    # wrapped in ``max by (namespace, pod, container)``: the builder takes the maximum of a
    # container's several series itself (streams/prometheus_events._usage), and Prometheus spends
    # four times the CPU on these two queries when it aggregates (a day of bench/bench_import.py's
    # fleet: 4.8 s against 1.1 s).
    "cpu": 'rate(container_cpu_usage_seconds_total{container!="", container!="POD", namespace=~"$namespaces"}[$step])',
    "memory": 'container_memory_working_set_bytes{container!="", container!="POD", namespace=~"$namespaces"}',
    # a restart within the step whose last termination was an OOM kill
    "oom": "max by (namespace, pod, container) ((increase(kube_pod_container_status_restarts_total"
    '{namespace=~"$namespaces"}[$step]) > 0) and on (namespace, pod, container) '
    "(kube_pod_container_status_last_terminated_reason"
    '{reason="OOMKilled", namespace=~"$namespaces"} == 1))',
    # kube-state-metrics
    "pod_owner": 'kube_pod_owner{owner_kind!="", namespace=~"$namespaces"}',
    "replicaset_owner": 'kube_replicaset_owner{owner_kind!="", namespace=~"$namespaces"}',
    "deployment_replicas": 'kube_deployment_spec_replicas{namespace=~"$namespaces"}',
    "statefulset_replicas": 'kube_statefulset_replicas{namespace=~"$namespaces"}',
    "requests": 'kube_pod_container_resource_requests{resource=~"cpu|memory", namespace=~"$namespaces"}',
    "limits": 'kube_pod_container_resource_limits{resource=~"cpu|memory", namespace=~"$namespaces"}',
    "ready": 'kube_pod_status_ready{condition="true", namespace=~"$namespaces"}',
    # the phase a pod is in (one series per phase, 1 for the pod's) and when the kubelet started it
    "pod_phase": 'kube_pod_status_phase{namespace=~"$namespaces"} == 1',
    "pod_started": 'kube_pod_start_time{namespace=~"$namespaces"}',
    "hpa_info": 'kube_horizontalpodautoscaler_info{namespace=~"$namespaces"}',
    "hpa_desired": 'kube_horizontalpodautoscaler_status_desired_replicas{namespace=~"$namespaces"}',
    "hpa_min": 'kube_horizontalpodautoscaler_spec_min_replicas{namespace=~"$namespaces"}',
    "hpa_max": 'kube_horizontalpodautoscaler_spec_max_replicas{namespace=~"$namespaces"}',
    # one series per metric of spec.metrics and target type (value, utilization, average)
    "hpa_target_metric": 'kube_horizontalpodautoscaler_spec_target_metric{namespace=~"$namespaces"}',
    # the VPA's recommendation, where kube-state-metrics exports it with the custom-resource
    # configuration the VPA documents (metricNamePrefix kube_customresource, name vpa_containerrecommendations_*)
    "vpa_target": 'kube_customresource_vpa_containerrecommendations_target{namespace=~"$namespaces"}',
    "vpa_lower_bound": 'kube_customresource_vpa_containerrecommendations_lowerbound{namespace=~"$namespaces"}',
    "vpa_upper_bound": 'kube_customresource_vpa_containerrecommendations_upperbound{namespace=~"$namespaces"}',
}

#: The label names the builder reads, by role.
DEFAULT_LABELS: dict[str, str] = {
    "namespace": "namespace",
    "pod": "pod",
    "container": "container",
    "resource": "resource",
    "owner_kind": "owner_kind",
    "owner_name": "owner_name",
    "replicaset": "replicaset",
    "deployment": "deployment",
    "statefulset": "statefulset",
    "hpa": "horizontalpodautoscaler",
    "hpa_target_kind": "scaletargetref_kind",
    "hpa_target_name": "scaletargetref_name",
    "hpa_metric_name": "metric_name",
    "hpa_metric_target_type": "metric_target_type",
    "phase": "phase",
    "vpa_container": "container",
    "vpa_target_kind": "target_kind",
    "vpa_target_name": "target_name",
}

#: Queries whose absence is worth a warning (kube-state-metrics): without them the stream lacks
#: what their name says.  The VPA's are optional: most clusters export none.
_WARN_IF_EMPTY = {
    "pod_owner": "pods cannot be mapped to workloads",
    "replicaset_owner": "pods of ReplicaSets are not mapped to their Deployments",
    "deployment_replicas": "a Deployment's replicas are counted from its pods",
    "statefulset_replicas": "a StatefulSet's replicas are counted from its pods",
    "requests": "workload events carry no requests",
    "limits": "workload events carry no limits",
    "ready": "every pod counts as ready",
    "pod_phase": "every pod's phase is Running",
    "pod_started": "pods carry no start time",
    "cpu": "metric events carry no CPU",
    "memory": "metric events carry no memory",
}


class PrometheusError(Exception):
    """One line: the URL, the query and why (unreachable, an HTTP status, a query error)."""


@dataclass(frozen=True)
class QuerySet:
    queries: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_QUERIES))
    labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_LABELS))

    def expand(self, name: str, namespaces: Iterable[str], step: float) -> str:
        ns = list(namespaces)
        regex = "|".join(_regex_escape(n) for n in ns) if ns else ".*"
        return Template(self.queries[name]).safe_substitute(namespaces=regex, step=_duration(step))


def load_queries(doc: Any, where: str) -> QuerySet:
    """A ``--queries`` YAML document: ``queries: {name: PromQL}`` and ``labels: {role: label}``,
    each overriding the default of that name; an unknown name is refused with a did-you-mean."""
    if doc is None:
        return QuerySet()
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a mapping with 'queries' and/or 'labels'")
    queries, labels = dict(DEFAULT_QUERIES), dict(DEFAULT_LABELS)
    for key, value in doc.items():
        if key not in ("queries", "labels"):
            raise ValueError(f"{where}: field {key!r}: unknown field{did_you_mean(str(key), ('queries', 'labels'))}")
        target = queries if key == "queries" else labels
        if not isinstance(value, dict):
            raise ValueError(f"{where}: field {key!r}: expected a mapping of names to strings")
        for name, text in value.items():
            if name not in target:
                raise ValueError(f"{where}: field '{key}.{name}': unknown name{did_you_mean(str(name), target)}")
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{where}: field '{key}.{name}': expected a non-empty string")
            target[name] = text
    return QuerySet(queries, labels)


def _regex_escape(text: str) -> str:
    # RE2 metacharacters, escaped for a PromQL double-quoted string
    out = "".join("\\\\" + c if c in ".^$|?*+()[]{}\\" else c for c in text)
    return out.replace('"', '\\"')


def _duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass(frozen=True)
class Auth:
    bearer_token: str | None = None
    basic: tuple[str, str] | None = None
    ca_file: str | None = None


#: One series: its labels and its points, event time in milliseconds -> value.
Series = tuple[dict[str, str], dict[int, float]]


class Client:
    """Prometheus's HTTP API (``/api/v1/query_range``) over ``urllib``."""

    def __init__(
        self,
        url: str,
        auth: Auth | None = None,
        *,
        timeout: float = 60.0,
        attempts: int = 4,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.auth = auth or Auth()
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep
        self.requests = 0
        self._lock = threading.Lock()
        self.context = ssl.create_default_context(cafile=self.auth.ca_file) if self.auth.ca_file else None

    def _fail(self, query: str, why: str) -> PrometheusError:
        return PrometheusError(f"{self.url}: query {query!r}: {why}")

    def range_query(self, query: str, start_ms: int, end_ms: int, step_ms: int) -> list[Series]:
        """One request; retried (``attempts``, doubling ``backoff``) on connection errors, 429 and 5xx."""
        params = urllib.parse.urlencode(
            {
                "query": query,
                "start": f"{start_ms / 1000:.3f}",
                "end": f"{end_ms / 1000:.3f}",
                "step": f"{step_ms / 1000:g}",
            }
        )
        request = urllib.request.Request(
            f"{self.url}/api/v1/query_range",
            data=params.encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        if self.auth.bearer_token is not None:
            request.add_header("Authorization", f"Bearer {self.auth.bearer_token}")
        elif self.auth.basic is not None:
            user, password = self.auth.basic
            request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            with self._lock:
                self.requests += 1
            try:
                with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                    body = response.read()
                break
            except urllib.error.HTTPError as exc:
                why = _http_error(exc)
                if (exc.code != 429 and exc.code < 500) or attempt == self.attempts:
                    raise self._fail(query, why) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                why = f"unreachable ({reason})"
                if attempt == self.attempts:
                    raise self._fail(query, f"{why} after {attempt} attempt(s)") from None
            self.sleep(delay)
            delay *= 2
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise self._fail(query, "the answer is not JSON (is the URL Prometheus's?)") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error", "no status") if isinstance(answer, dict) else "not an object"
            raise self._fail(query, f"query error: {error}")
        data = answer.get("data") or {}
        if data.get("resultType") != "matrix":
            raise self._fail(query, f"expected a matrix, got {data.get('resultType')!r}")
        found = data.get("result", [])
        return [(dict(item.get("metric", {})), _points(item.get("values", ()), step_ms)) for item in found]

    def query(
        self, query: str, start_ms: int, end_ms: int, step_ms: int, *, max_points: int = MAX_POINTS, parallel: int = 4
    ) -> list[Series]:
        """:meth:`range_query` over ``[start, end]``, split into ranges of at most ``max_points``
        steps, ``parallel`` at a time; a series' points from every part, merged by its labels."""
        parts = range_parts(start_ms, end_ms, step_ms, max_points)
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(parts)))) as pool:
            answers = list(pool.map(lambda p: self.range_query(query, p[0], p[1], step_ms), parts))
        merged: dict[tuple[tuple[str, str], ...], Series] = {}
        for answer in answers:
            for labels, points in answer:
                key = tuple(sorted(labels.items()))
                if key in merged:
                    merged[key][1].update(points)
                else:
                    merged[key] = (labels, dict(points))
        return [merged[k] for k in sorted(merged)]


def _points(values: list[list[Any]], step_ms: int) -> dict[int, float]:
    """A series' ``[[time, "value"], ...]`` as event time in milliseconds -> value, without the
    points that are not finite numbers.

    Prometheus writes a value as a string ("NaN", "+Inf" where not finite) and its time in seconds;
    times are kept in milliseconds (a step may be below a second).  Most of an import's answers are
    these pairs (a day of a thousand pods is 9 million), so the common case, a run without a gap at
    a step of whole seconds with every value finite, goes through ``map`` and ``range``: the times
    are the grid's from the first to the last (a range query's points are at ``start + k * step``,
    in order, once each, so ``n`` points over ``n - 1`` steps are all of them), and the values are
    finite when their sum is (a NaN or an infinity makes it NaN or infinite, and so does a sum that
    overflows, which only sends it to the exact path).  1.5 times as fast as one comprehension.
    """
    if not values:
        return {}
    numbers = list(map(float, map(_second, values)))
    total = sum(numbers)
    first, last = values[0][0], values[-1][0]
    if (
        total - total == 0.0
        and first.__class__ is int
        and last.__class__ is int
        and step_ms % 1000 == 0
        and (last - first) * 1000 == step_ms * (len(values) - 1)
    ):
        return dict(zip(range(first * 1000, last * 1000 + 1, step_ms), numbers, strict=True))
    return {round(t * 1000): float(v) for t, v in values if v not in _NOT_FINITE}


def _http_error(exc: urllib.error.HTTPError) -> str:
    detail = ""
    try:
        answer = json.loads(exc.read())
        if isinstance(answer, dict) and answer.get("error"):
            detail = f": {answer['error']}"
    except (ValueError, OSError):
        pass
    if exc.code in (401, 403):
        return f"HTTP {exc.code} {exc.reason} (check --bearer-token-file / --basic-auth-file){detail}"
    if exc.code in (400, 422):
        return f"query error (HTTP {exc.code}){detail}"
    return f"HTTP {exc.code} {exc.reason}{detail}"


def range_parts(start_ms: int, end_ms: int, step_ms: int, max_points: int) -> list[tuple[int, int]]:
    """``[start, end]`` at ``step`` as consecutive ranges of at most ``max_points`` points each."""
    if step_ms <= 0 or end_ms < start_ms:
        return []
    n = (end_ms - start_ms) // step_ms + 1
    out = []
    for first in range(0, n, max_points):
        last = min(first + max_points, n) - 1
        out.append((start_ms + first * step_ms, start_ms + last * step_ms))
    return out


@dataclass
class Fetched:
    """Every query's series, and the warnings about what is missing."""

    series: dict[str, list[Series]]
    warnings: list[str]
    requests: int = 0

    @property
    def samples(self) -> int:
        return sum(len(p) for found in self.series.values() for _, p in found)


def fetch_all(
    client: Client,
    queries: QuerySet,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    namespaces: Iterable[str] = (),
    *,
    max_points: int = MAX_POINTS,
    parallel: int = 4,
) -> Fetched:
    """Every query over ``[start, end]``, ``parallel`` at a time.  The first failing query, in the
    order of ``queries``, is the error raised, whichever finished first."""
    ns = list(namespaces)
    names = list(queries.queries)
    texts = {name: queries.expand(name, ns, step_ms / 1000) for name in names}

    failed = threading.Event()  # once one query failed, those not started yet are not sent

    def one(name: str) -> list[Series] | None:
        if failed.is_set():
            return None
        try:
            return client.query(texts[name], start_ms, end_ms, step_ms, max_points=max_points, parallel=1)
        except PrometheusError:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(names)))) as pool:
        futures = [pool.submit(one, name) for name in names]
    for future in futures:  # the first error in query order
        if future.exception() is not None:
            raise future.exception()  # type: ignore[misc]
    results = [future.result() or [] for future in futures]
    series = dict(zip(names, results, strict=True))
    warnings = [
        f"no series for {name} ({texts[name]}): {_WARN_IF_EMPTY[name]}"
        for name in names
        if not series[name] and name in _WARN_IF_EMPTY
    ]
    if "hpa_target_metric" in series and not series["hpa_target_metric"] and series.get("hpa_desired"):
        warnings.append(f"no series for hpa_target_metric ({texts['hpa_target_metric']}): hpa events carry no metrics")
    return Fetched(series, warnings, client.requests)
