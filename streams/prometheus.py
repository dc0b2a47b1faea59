"""History from Prometheus as contract input events (``tandem import prometheus``, docs/import.md).

A cluster's Prometheus (or Thanos, Mimir, VictoriaMetrics: the same HTTP API) already keeps what
tandem's recommenders need to be warm on day one: cAdvisor's container usage and kube-state-metrics'
objects.  This module reads them with range queries at one step and turns them into the events of
docs/contract.md §3, as ``tandem collect`` would have sent them had it run at every step:

* one ``metric`` batch per workload per step, every pod of the workload with a sample at that step;
* a ``workload`` event whenever its replicas, containers' requests/limits or pods changed;
* an ``hpa`` / ``vpa`` event whenever the HPA's replicas or the VPA's recommendation changed
  (the collector also sends an event only when its content changed).

Pods are mapped to workloads by kube-state-metrics' ownership series (pod -> ReplicaSet ->
Deployment, pod -> StatefulSet).  Every query and label name can be overridden (:func:`load_queries`):
installs relabel.  Only the standard library speaks HTTP (``urllib``); range queries are split under
Prometheus's limit of 11,000 points per series ("exceeded maximum resolution of 11,000 points per
timeseries", https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries), run a few at
a time and retried with backoff when the server is unreachable or busy.
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
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from string import Template
from typing import Any

import orjson

from scaling.quantity import format_quantity
from scaling.spelling import did_you_mean

__all__ = [
    "DEFAULT_LABELS",
    "DEFAULT_QUERIES",
    "MAX_POINTS",
    "Auth",
    "BuildState",
    "Client",
    "Fetched",
    "ImportStats",
    "PrometheusError",
    "QuerySet",
    "build_events",
    "fetch_all",
    "import_history",
    "load_queries",
]

#: How Prometheus's JSON writes values that are not finite numbers.
_NOT_FINITE = frozenset({"NaN", "+Inf", "-Inf"})

#: Prometheus refuses a range query whose series would have more points than this.
MAX_POINTS = 11_000

#: The queries, by name.  ``$namespaces`` is a regular expression of the ``--namespace`` values
#: (``.*`` for all), ``$step`` the step as a PromQL duration.  A query's result keeps the labels the
#: builder reads (:data:`DEFAULT_LABELS`).
DEFAULT_QUERIES: dict[str, str] = {
    # cAdvisor (the kubelet's /metrics/cadvisor): usage in cores, averaged over the step
    "cpu": 'max by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{container!="", '
    'container!="POD", namespace=~"$namespaces"}[$step]))',
    "memory": 'max by (namespace, pod, container) (container_memory_working_set_bytes{container!="", '
    'container!="POD", namespace=~"$namespaces"})',
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
        out: list[Series] = []
        for item in data.get("result", []):
            # Prometheus writes a value as a string ("NaN", "+Inf" where not finite) and its time in
            # seconds; times are kept in milliseconds (a step may be below a second)
            points = {round(t * 1000): float(v) for t, v in item.get("values", ()) if v not in _NOT_FINITE}
            out.append((dict(item.get("metric", {})), points))
        return out

    def query(
        self, query: str, start_ms: int, end_ms: int, step_ms: int, *, max_points: int = MAX_POINTS, parallel: int = 4
    ) -> list[Series]:
        """:meth:`range_query` over ``[start, end]``, split into ranges of at most ``max_points``
        steps, ``parallel`` at a time; a series' points from every part, merged by its labels."""
        parts = _parts(start_ms, end_ms, step_ms, max_points)
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


def _parts(start_ms: int, end_ms: int, step_ms: int, max_points: int) -> list[tuple[int, int]]:
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


#: Steps per window of :func:`import_history`: four hours at one-minute steps.  Everything of one
#: window is in memory at once (a month of a thousand pods is not); its events are handed on before
#: the next.  The memory grows with the window, the time does not: 1,000 pods over a day took
#: 3.0 GiB at 1,440 steps a window; 2 h of them 322 MiB at 121 and 134 MiB at 30, in the same time.
WINDOW_POINTS = 240


@dataclass
class ImportStats:
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)
    samples: int = 0
    requests: int = 0
    windows: int = 0
    #: queries that answered no series in any window (see ``_WARN_IF_EMPTY``)
    warnings: list[str] = field(default_factory=list)


def import_history(
    client: Client,
    queries: QuerySet,
    cluster: str,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    namespaces: Iterable[str] = (),
    *,
    stats: ImportStats,
    max_points: int = MAX_POINTS,
    parallel: int = 4,
    window_points: int = WINDOW_POINTS,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """The events of ``[start, end]``, window by window (``window_points`` steps, at most
    ``max_points``), in event-time order; ``stats`` is filled as it goes, its warnings at the end."""
    ns = list(namespaces)
    state = BuildState()
    windows = _parts(start_ms, end_ms, step_ms, max(1, min(window_points, max_points)))
    empty: dict[str, str] | None = None

    def fetch(window: tuple[int, int]) -> Fetched:
        return fetch_all(client, queries, *window, step_ms, ns, max_points=max_points, parallel=parallel)

    # The next window is read while this one's events are built and handed on: Prometheus answers
    # on one core while Python builds on the other (two windows in memory, not one).
    with ThreadPoolExecutor(max_workers=1) as ahead:
        pending = ahead.submit(fetch, windows[0]) if windows else None
        for i, (w_start, w_end) in enumerate(windows):
            if progress is not None:
                progress(i, len(windows))
            assert pending is not None
            fetched = pending.result()
            pending = ahead.submit(fetch, windows[i + 1]) if i + 1 < len(windows) else None
            stats.windows += 1
            stats.samples += fetched.samples
            stats.requests = client.requests
            for name, found in fetched.series.items():
                stats.series.update((name, tuple(sorted(labels.items()))) for labels, _ in found)
            warned = {w.split(" ", 4)[3]: w for w in fetched.warnings}  # "no series for NAME (...)"
            empty = warned if empty is None else {k: v for k, v in empty.items() if k in warned}
            yield build_events(fetched, queries, cluster, w_start, w_end, step_ms, state)
    if progress is not None:
        progress(len(windows), len(windows))
    stats.warnings = [*(empty or {}).values(), *state.warnings.values()]


def _num(value: float) -> int | float:
    return int(value) if value.is_integer() else value


#: (namespace, pod)
_PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Timeline:
    """A value per step: ``value`` at the steps in ``steps`` (a value constant over a pod's life,
    the common case, kept once), or, when ``by_step`` is set, that map."""

    steps: Any  # a set or a dict's keys view
    value: Any
    by_step: dict[int, Any] | None

    def points(self) -> dict[int, Any]:
        return self.by_step if self.by_step is not None else dict.fromkeys(self.steps, self.value)


def _at(timelines: Mapping[tuple[str, str], _Timeline], key: tuple[str, str], t: int) -> Any:
    """The value of ``key``'s timeline at ``t``, ``()`` where it has none."""
    line = timelines.get(key)
    if line is None:
        return ()
    if line.by_step is not None:
        return line.by_step.get(t, ())
    return line.value if t in line.steps else ()


def _changes(points: Any, step_ms: int) -> set[int]:
    """The steps where ``points`` (a step -> value mapping, or the steps of a constant) starts,
    ends (the step after its last) or changes value: one set comparison for the common series,
    present at every step of a run with one value."""
    if not points:
        return set()
    lo, hi = min(points), max(points)
    values = points.values() if isinstance(points, Mapping) else None
    if len(points) == (hi - lo) // step_ms + 1 and (values is None or len(set(values)) == 1):
        return {lo, hi + step_ms}
    out: set[int] = set()
    before: tuple[int, Any] | None = None
    for t in sorted(points):
        v = points[t] if values is not None else True
        if before is None or t != before[0] + step_ms:
            out.add(t)
            if before is not None:
                out.add(before[0] + step_ms)
        elif v != before[1]:
            out.add(t)
        before = (t, v)
    assert before is not None
    out.add(before[0] + step_ms)
    return out


def _at_ready(ready: Mapping[tuple[str, str], dict[int, float]], key: tuple[str, str], t: int) -> bool:
    points = ready.get(key)
    return points is not None and points.get(t, 0.0) > 0


def _hpa_metrics(found: Iterable[tuple[str, str, float]]) -> tuple[list[dict[str, Any]] | None, str]:
    """An HPA's ``spec.metrics`` (autoscaling/v2) from ``kube_horizontalpodautoscaler_spec_target_metric``
    (metric name, target type, value), sorted by name; or ``None`` and why not.

    kube-state-metrics names a metric and its target type but not its source type: ``cpu`` and
    ``memory`` are taken as ``Resource`` metrics (``utilization`` -> ``averageUtilization``,
    ``average`` -> ``averageValue`` in cores or bytes), any other name could be a ``Pods``,
    ``Object`` or ``External`` metric, so an HPA with one gets no ``metrics`` rather than a wrong
    list (https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/horizontalpodautoscaler-metrics.md).
    """
    out: list[dict[str, Any]] = []
    for name, kind, value in sorted(found):
        if name not in ("cpu", "memory"):
            return (
                None,
                f"metric {name!r} ({kind}) may be a Pods, Object or External metric (kube-state-metrics does not say)",
            )
        if kind == "utilization":
            target: dict[str, Any] = {"type": "Utilization", "averageUtilization": round(value)}
        elif kind == "average":
            target = {"type": "AverageValue", "averageValue": format_quantity(name, round(value * 1000))}
        else:
            return None, f"metric {name!r} has a {kind!r} target, which a Resource metric cannot have"
        out.append({"type": "Resource", "resource": {"name": name, "target": target}})
    return out, ""


@dataclass
class BuildState:
    """What one window of the range hands to the next: who owns what (a fact about an object, not
    a time series, kept from every window so far) and the last event of each kind per workload (an
    event is sent only when its content changed, across windows too)."""

    rs_owner: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    owner: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    hpa_target: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    last: dict[tuple[str, tuple[str, str, str]], Any] = field(default_factory=dict)
    #: Warnings about single objects, once each (an HPA whose metrics cannot be told apart).
    warnings: dict[tuple[str, str], str] = field(default_factory=dict)
    #: What each workload's last ``workload`` event was built from (:func:`build_events`).
    fingerprints: dict[tuple[str, str, str], Any] = field(default_factory=dict)


def build_events(
    fetched: Fetched,
    queries: QuerySet,
    cluster: str,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    state: BuildState | None = None,
) -> list[dict[str, Any]]:
    """The contract events of ``fetched`` (the series of the steps ``start..end``), in event-time
    order (at one ``ts``: workloads, hpa, vpa, then metrics, each by workload key).  ``state``
    carries what an earlier window of the same import knew (:class:`BuildState`)."""
    state = state if state is not None else BuildState()
    lb = queries.labels
    s = fetched.series
    ns_l, pod_l, ctr_l, res_l = lb["namespace"], lb["pod"], lb["container"], lb["resource"]

    rs_owner = state.rs_owner
    for labels, _ in s.get("replicaset_owner", []):
        rs_owner[(labels.get(ns_l, ""), labels.get(lb["replicaset"], ""))] = (
            labels.get(lb["owner_kind"], ""),
            labels.get(lb["owner_name"], ""),
        )
    owner = state.owner
    alive: dict[tuple[str, str], set[int]] = defaultdict(set)  # (ns, pod) -> steps with an owner series
    for labels, points in s.get("pod_owner", []):
        ns, pod = labels.get(ns_l, ""), labels.get(pod_l, "")
        kind, name = labels.get(lb["owner_kind"], ""), labels.get(lb["owner_name"], "")
        if kind == "ReplicaSet" and (ns, name) in rs_owner and rs_owner[(ns, name)][0] in ("Deployment",):
            kind, name = rs_owner[(ns, name)]
        if not kind or not name or kind == "<none>":
            continue
        owner[(ns, pod)] = (kind, name)
        alive[(ns, pod)].update(points)

    # Series are read where they lie, a dict of points per series, and never transposed into
    # step -> pod -> container tables: a month of a thousand pods is 40 million pod-steps.
    usage: dict[_PodKey, dict[str, list[dict[int, float] | None]]] = {}  # pod -> container -> [cpu, mem, oom]
    for slot, name in enumerate(("cpu", "memory", "oom")):
        for labels, points in s.get(name, []):
            by_ctr = usage.setdefault((labels.get(ns_l, ""), labels.get(pod_l, "")), {})
            entry = by_ctr.setdefault(labels.get(ctr_l, ""), [None, None, None])
            known = entry[slot]
            entry[slot] = points if known is None else {**known, **points}
    #: pod -> its containers in order, with their cpu, memory and oom points
    containers_of: dict[
        _PodKey, list[tuple[str, dict[int, float] | None, dict[int, float] | None, dict[int, float] | None]]
    ] = {pk: [(ctr, e[0], e[1], e[2]) for ctr, e in sorted(by_ctr.items())] for pk, by_ctr in usage.items()}

    def resources(name: str) -> dict[_PodKey, _Timeline]:
        # pod -> step -> ((container, ((resource, value), ...)), ...), the containers and resources sorted
        per_pod: dict[_PodKey, dict[tuple[str, str], dict[int, float]]] = defaultdict(dict)
        for labels, points in s.get(name, []):
            k = (labels.get(ctr_l, ""), labels.get(res_l, ""))
            pod_series = per_pod[(labels.get(ns_l, ""), labels.get(pod_l, ""))]
            pod_series[k] = {**pod_series[k], **points} if k in pod_series else points
        out: dict[_PodKey, _Timeline] = {}
        for pk, series in per_pod.items():
            items = sorted(series.items())
            first = items[0][1]
            if all(p.keys() == first.keys() and len(set(p.values())) == 1 for _, p in items):
                # every series of the pod constant over the same steps (the common case): one value
                grouped: dict[str, list[tuple[str, float]]] = {}
                for (ctr, res), p in items:
                    grouped.setdefault(ctr, []).append((res, next(iter(p.values()))))
                out[pk] = _Timeline(first.keys(), tuple((c, tuple(r)) for c, r in grouped.items()), None)
                continue
            steps: dict[int, dict[str, list[tuple[str, float]]]] = defaultdict(dict)
            for (ctr, res), p in items:
                for t, v in p.items():
                    steps[t].setdefault(ctr, []).append((res, v))
            out[pk] = _Timeline((), (), {t: tuple((c, tuple(r)) for c, r in at_t.items()) for t, at_t in steps.items()})
        return out

    requests, limits = resources("requests"), resources("limits")
    ready: dict[_PodKey, dict[int, float]] = {}
    has_ready = bool(s.get("ready"))
    for labels, points in s.get("ready", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        ready[pk] = {**ready[pk], **points} if pk in ready else points
    phases: dict[_PodKey, _Timeline] = {}
    phase_points: dict[_PodKey, dict[int, str]] = defaultdict(dict)
    for labels, points in s.get("pod_phase", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        phase = labels.get(lb["phase"], "")
        phase_points[pk].update((t, phase) for t, v in points.items() if v > 0)
    for pk, by_step in phase_points.items():
        names = set(by_step.values())
        phases[pk] = _Timeline(by_step.keys(), names.pop(), None) if len(names) == 1 else _Timeline((), "", by_step)
    started: dict[_PodKey, _Timeline] = {}
    for labels, points in s.get("pod_started", []):
        pk = (labels.get(ns_l, ""), labels.get(pod_l, ""))
        merged = {**started[pk].points(), **points} if pk in started else points
        times = set(merged.values())
        started[pk] = _Timeline(merged.keys(), times.pop(), None) if len(times) == 1 else _Timeline((), 0.0, merged)
    has_pods = has_ready or bool(phases) or bool(started)

    replicas: dict[tuple[str, str, str], dict[int, float]] = {}
    for query, kind, label in (
        ("deployment_replicas", "Deployment", lb["deployment"]),
        ("statefulset_replicas", "StatefulSet", lb["statefulset"]),
    ):
        for labels, points in s.get(query, []):
            wk = (labels.get(ns_l, ""), kind, labels.get(label, ""))
            replicas[wk] = {**replicas[wk], **points} if wk in replicas else points

    # a pod is in its workload at a step where it has an owner series or a usage sample
    members: dict[tuple[str, str, str], list[tuple[str, set[int] | Any]]] = defaultdict(list)
    for pk in alive.keys() | (usage.keys() & owner.keys()):
        steps: set[int] | Any = alive.get(pk, set())
        for _, cp, mp, _ in containers_of.get(pk, ()):
            for p in (cp, mp):
                if p is not None and not p.keys() <= steps:
                    steps = steps | p.keys()
        ns, pod = pk
        members[(ns, *owner[pk])].append((pod, steps))
    for listed in members.values():
        listed.sort()
    last_seen = state.fingerprints
    # The steps where a workload's event may change: where one of its pods comes, goes or changes
    # requests, limits, readiness, phase or start time, or its replicas change; and the window's
    # first (the last window's event is compared).  At the others, most steps of most workloads,
    # the workload event is not even looked at.
    dirty: dict[tuple[str, str, str], set[int]] = {}
    for wk in members.keys() | replicas.keys():
        changes = {start_ms}
        counted = replicas.get(wk)
        if counted is not None:
            changes |= _changes(counted, step_ms)
        ns = wk[0]
        for pod, steps in members.get(wk, ()):
            pk = (ns, pod)
            changes |= _changes(steps, step_ms)
            for lines in (requests, limits, phases, started):
                line = lines.get(pk)
                if line is not None:
                    changes |= _changes(line.points() if line.by_step is not None else line.steps, step_ms)
            readiness = ready.get(pk)
            if readiness is not None:
                changes |= _changes(readiness, step_ms)
        dirty[wk] = changes
    ready_at = {pk: {t for t, v in points.items() if v > 0} for pk, points in ready.items()}
    nowhere: frozenset[int] = frozenset()

    hpa_target = state.hpa_target
    for labels, _ in s.get("hpa_info", []):
        hpa_target[(labels.get(ns_l, ""), labels.get(lb["hpa"], ""))] = (
            labels.get(lb["hpa_target_kind"], ""),
            labels.get(lb["hpa_target_name"], ""),
        )
    hpa_at: dict[int, dict[tuple[str, str], dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for query, fname in (("hpa_desired", "desired_replicas"), ("hpa_min", "min_replicas"), ("hpa_max", "max_replicas")):
        for labels, points in s.get(query, []):
            for t, v in points.items():
                hpa_at[t][(labels.get(ns_l, ""), labels.get(lb["hpa"], ""))][fname] = int(v)

    hpa_metrics_at: dict[int, dict[tuple[str, str], list[tuple[str, str, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for labels, points in s.get("hpa_target_metric", []):
        metric = (labels.get(lb["hpa_metric_name"], ""), labels.get(lb["hpa_metric_target_type"], ""))
        for t, v in points.items():
            hpa_at_key = (labels.get(ns_l, ""), labels.get(lb["hpa"], ""))
            hpa_metrics_at[t][hpa_at_key].append((*metric, v))

    vpa_at: dict[int, dict[tuple[str, str, str], dict[str, dict[str, dict[str, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    )
    for query, part in (
        ("vpa_target", "target"),
        ("vpa_lower_bound", "lower_bound"),
        ("vpa_upper_bound", "upper_bound"),
    ):
        for labels, points in s.get(query, []):
            key = (labels.get(ns_l, ""), labels.get(lb["vpa_target_kind"], ""), labels.get(lb["vpa_target_name"], ""))
            if not key[1] or not key[2]:
                continue
            for t, v in points.items():
                vpa_at[t][key][labels.get(lb["vpa_container"], "")][part][labels.get(res_l, "")] = v

    def ref(ns: str, kind: str, name: str) -> dict[str, str]:
        return {"cluster": cluster, "namespace": ns, "kind": kind, "name": name}

    events: list[dict[str, Any]] = []
    last = state.last

    def changed(kind: str, key: tuple[str, str, str], content: Any) -> bool:
        if last.get((kind, key)) == content:
            return False
        last[(kind, key)] = content
        return True

    workload_keys = sorted(members.keys() | replicas.keys())
    empty: tuple[Any, ...] = ()
    for t in range(start_ms, end_ms + 1, step_ms):
        ts = t / 1000
        here: list[tuple[tuple[str, str, str], list[str]]] = []  # workloads with pods at t, sorted
        for wk in workload_keys:
            present = [pod for pod, steps in members.get(wk, empty) if t in steps]
            counted = replicas.get(wk)
            count = counted.get(t) if counted is not None else None
            if not present and count is None:
                continue
            ns = wk[0]
            if present:
                here.append((wk, present))
            if t not in dirty[wk]:
                continue  # nothing the workload event says changed since the last step
            # what the workload event says, compared before it is built (most steps change nothing)
            fingerprint = (
                count,
                tuple(
                    (
                        p,
                        _at(requests, (ns, p), t),
                        _at(limits, (ns, p), t),
                        _at_ready(ready, (ns, p), t) if has_ready else True,
                        _at(phases, (ns, p), t),
                        _at(started, (ns, p), t),
                    )
                    for p in present
                ),
            )
            if last_seen.get(wk) == fingerprint:
                continue
            last_seen[wk] = fingerprint
            containers: dict[str, dict[str, dict[str, int | float]]] = {}
            for _, rq, lm, _, _, _ in fingerprint[1]:
                for sig, part in ((rq, "requests"), (lm, "limits")):
                    for ctr, res in sig:
                        spec = containers.setdefault(ctr, {})
                        if part not in spec:
                            spec[part] = {r: _num(v) for r, v in res}
            body: dict[str, Any] = {
                "replicas": int(count) if count is not None else len(present),
                "containers": containers,
            }
            if has_pods:
                # as the collector: failed pods are left out (the HPA controller ignores them)
                shown = [f for f in fingerprint[1] if f[4] != "Failed"]
                body["ready_replicas"] = sum(f[3] for f in shown)
                body["pods"] = [
                    {
                        "name": p,
                        "ready": r,
                        "phase": phase or "Running",
                        "started": _num(when) if when != () else None,
                    }
                    for p, _, _, r, phase, when in shown
                ]
            if changed("workload", wk, body):
                events.append({"type": "workload", "ts": ts, "workload": ref(*wk), **body})
        for (ns, hpa), fields in sorted(hpa_at.get(t, {}).items()):
            target = hpa_target.get((ns, hpa))
            if target is None or "desired_replicas" not in fields or not all(target):
                continue
            key = (ns, *target)
            body = {**fields, "name": hpa, "source": "cluster"}
            targets = hpa_metrics_at.get(t, {}).get((ns, hpa))
            if targets:
                metrics, why = _hpa_metrics(targets)
                if metrics is not None:
                    body["metrics"] = metrics
                elif (ns, hpa) not in state.warnings:
                    state.warnings[(ns, hpa)] = f"HPA {ns}/{hpa}: {why}; its hpa events carry no metrics"
            if changed("hpa", key, body):
                events.append({"type": "hpa", "ts": ts, "workload": ref(*key), **body})
        for key, per in sorted(vpa_at.get(t, {}).items()):
            recs = {
                c: {part: {r: _num(v) for r, v in sorted(res.items())} for part, res in sorted(parts.items())}
                for c, parts in sorted(per.items())
                if "target" in parts
            }
            if recs and changed("vpa", key, recs):
                events.append({"type": "vpa", "ts": ts, "workload": ref(*key), "containers": recs, "source": "cluster"})
        for wk, present in here:
            ns = wk[0]
            samples: list[dict[str, Any]] = []
            for pod in present:
                unready = has_ready and t not in ready_at.get((ns, pod), nowhere)
                for ctr, cp, mp, op in containers_of.get((ns, pod), empty):
                    cv = cp.get(t) if cp is not None else None
                    mv = mp.get(t) if mp is not None else None
                    if cv is None and mv is None:
                        continue
                    sample: dict[str, Any] = {"pod": pod, "container": ctr}
                    if cv is not None:
                        sample["cpu"] = cv
                    if mv is not None:
                        sample["memory"] = int(mv) if mv.is_integer() else mv  # _num, inline
                    if unready:
                        sample["ready"] = False
                    if op is not None and op.get(t, 0) > 0:
                        sample["oom"] = True
                    samples.append(sample)
            if samples:
                events.append({"type": "metric", "ts": ts, "workload": ref(*wk), "samples": samples})
    return events
