"""Prometheus metrics, liveness and readiness for tandem's processes (worker, applier, collector).

One :class:`Metrics` object per process owns a dedicated :class:`prometheus_client.CollectorRegistry`
(never the global default registry, so two objects in one test process never collide) and the
readiness state.  :meth:`Metrics.serve` starts a small stdlib HTTP server on its own daemon thread,
so it works in any process, with or without an event loop:

* ``GET /metrics``: the registry in the Prometheus text format;
* ``GET /healthz``: ``200 ok`` while the process is alive (``503`` after :meth:`Metrics.set_alive`
  ``(False, why)``);
* ``GET /readyz``: ``200 ok``, or ``503`` with one reason per line when the consumer lag passes
  ``max_lag`` messages or the last processed event is older than ``max_event_age`` seconds.

Names follow Prometheus' conventions: prefix ``tandem_``, base units (seconds, bytes), ``_total``
counters.  What the callers report (the lead wires these into the worker, applier and collector):

=================================  ==========================================================
call                               metric
=================================  ==========================================================
``observe_event(type, ts)``        ``tandem_events_total{type}``; the newest event time
``observe_rejected(type)``         ``tandem_events_rejected_total{type}``
``observe_dropped(topic, reason)`` ``tandem_events_dropped_total{topic,reason}``
``observe_emitted(ev, arrival)``   ``tandem_decisions_total{kind,action}``,
                                   ``tandem_blocked_changes_total{reason}``,
                                   ``tandem_decision_latency_seconds``, ``tandem_tick_lag_seconds``,
                                   ``tandem_workload_replicas{workload,source="recommended"}``
``observe_applier_result(r)``      ``tandem_applier_results_total{result}`` (and the applied
                                   replicas when given the applier's CloudEvent and a value)
``kube_api(operation)``            ``tandem_kube_api_latency_seconds{operation}`` (a context manager)
``record_lag(n)``                  ``tandem_consumer_lag_messages``; readiness
``record_processed(ts, now)``      ``tandem_last_processed_event_timestamp_seconds``; readiness
=================================  ==========================================================

``action`` of a decision is what it changes, in this order, joined by ``+``: ``scale_out`` or
``scale_in`` (replicas), ``resize`` (container requests/limits), ``hpa`` (HPA fields); a dry-run
decision is ``dry_run``.  So every decision counts exactly once, and the label has at most 13 values.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from scaling.vocabulary import APPLIED, APPLY_FAILED, BLOCKED, DECISION

__all__ = [
    "DEFAULT_MAX_EVENT_AGE",
    "DEFAULT_MAX_LAG",
    "DEFAULT_WORKLOAD_SERIES",
    "Metrics",
    "MetricsServer",
    "MetricsSettings",
    "Readiness",
    "decision_action",
    "serve_metrics",
]

#: Readiness fails when the consumer is more than this many messages behind (0 disables the check).
DEFAULT_MAX_LAG = 10_000
#: Readiness fails when the last processed event is older than this many seconds (0 disables it).
DEFAULT_MAX_EVENT_AGE = 600.0
#: At most this many workloads get a ``tandem_workload_replicas`` series (0 disables those gauges).
DEFAULT_WORKLOAD_SERIES = 200

#: Latency buckets (seconds): from a millisecond to the idle-flush scale of a worker and beyond.
DECISION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
KUBE_API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def decision_action(data: Mapping[str, Any]) -> str:
    """The ``action`` label of a decision's ``data`` (see the module docstring)."""
    if data.get("dry_run"):
        return "dry_run"
    parts = []
    replicas = data.get("replicas")
    if isinstance(replicas, Mapping):
        before, after = replicas.get("from"), replicas.get("to")
        parts.append(
            "scale_in" if isinstance(before, int) and isinstance(after, int) and after < before else "scale_out"
        )
    if data.get("containers"):
        parts.append("resize")
    if data.get("hpa"):
        parts.append("hpa")
    return "+".join(parts) or "none"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reasons: tuple[str, ...]


class Metrics:
    """All of one process's metrics, in a registry of its own, plus liveness and readiness state.

    ``clock`` returns wall-clock Unix seconds (``time.time``); tests pass their own.
    """

    def __init__(
        self,
        *,
        max_lag: int = DEFAULT_MAX_LAG,
        max_event_age: float = DEFAULT_MAX_EVENT_AGE,
        workload_series: int = DEFAULT_WORKLOAD_SERIES,
        clock: Callable[[], float] = time.time,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.max_lag = max_lag
        self.max_event_age = max_event_age
        self.workload_series = workload_series
        self.clock = clock
        self._lock = threading.Lock()
        self._alive: tuple[bool, str] = (True, "")
        self._unready: str | None = None  # a dependency not reached yet (alive all the same)
        self._stalled: dict[tuple[str, int], str] = {}
        self._lag: int | None = None
        self._last_event_ts: float | None = None
        self._newest_ts: float | None = None
        self._workloads: set[str] = set()
        self._register_inputs(self.registry)
        self._register_outputs(self.registry)

    def _register_inputs(self, r: CollectorRegistry) -> None:
        """What comes in: the input events, taken, late, rejected or dropped."""
        self.events = Counter("tandem_events_total", "Input events accepted, by event type.", ["type"], registry=r)
        self.late = Counter(
            "tandem_events_late_total",
            "Input events ingested after the tick they belong to had been decided, by event type "
            "(each is also a dev.tandem.late.v1 report in the audit).",
            ["type"],
            registry=r,
        )
        self.rejected = Counter(
            "tandem_events_rejected_total",
            "Input events rejected (sent to the dead-letter topic or reported), by event type.",
            ["type"],
            registry=r,
        )
        self.dropped = Counter(
            "tandem_events_dropped_total",
            "Input records not taken as they came, by input topic and reason (invalid, "
            "not_authenticated, misrouted, late, not_delivered, internal_error: dead-lettered by the "
            "worker; not_authorized: a write the broker refused, counted by the collector).",
            ["topic", "reason"],
            registry=r,
        )

    def _register_outputs(self, r: CollectorRegistry) -> None:
        """What goes out and how the process keeps up: decisions, applier results, API calls, lag."""
        self.decisions = Counter(
            "tandem_decisions_total",
            "Decision CloudEvents emitted, by policy kind and action (what the decision changes).",
            ["kind", "action"],
            registry=r,
        )
        self.blocked = Counter(
            "tandem_blocked_changes_total",
            "Changes that were wanted and blocked, by reason (one per blocked target).",
            ["reason"],
            registry=r,
        )
        self.tick_lag = Gauge(
            "tandem_tick_lag_seconds",
            "Event time of the newest event seen minus the tick of the latest emitted decision or blocked report.",
            registry=r,
        )
        self.decision_latency = Histogram(
            "tandem_decision_latency_seconds",
            "Wall time from the arrival of the event that triggered a tick to the emission of its result.",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.applier_results = Counter(
            "tandem_applier_results_total",
            "Applier results, by result (applied, apply_failed, refused, duplicate, ...).",
            ["result"],
            registry=r,
        )
        self.kube_api_latency = Histogram(
            "tandem_kube_api_latency_seconds",
            "Latency of Kubernetes API calls, by operation.",
            ["operation"],
            buckets=KUBE_API_BUCKETS,
            registry=r,
        )
        self.input_stalled = Gauge(
            "tandem_input_stalled",
            "1 while an assigned input topic-partition has lag and makes no progress (worker --stall-timeout).",
            ["topic", "partition"],
            registry=r,
        )
        self.consumer_lag = Gauge(
            "tandem_consumer_lag_messages",
            "Messages between the consumer's position and the end of its partitions.",
            registry=r,
        )
        self.last_processed = Gauge(
            "tandem_last_processed_event_timestamp_seconds",
            "Event time (Unix seconds) of the last processed event.",
            registry=r,
        )
        self.workload_replicas = Gauge(
            "tandem_workload_replicas",
            "Replicas per workload: recommended (the latest decision) and applied (the latest applier result).",
            ["workload", "source"],
            registry=r,
        )
        self.workload_series_dropped = Counter(
            "tandem_workload_series_dropped_total",
            "Per-workload replica values not exported because the workload cap was reached.",
            registry=r,
        )

    # ------------------------------------------------------------------------------ inputs

    def observe_event(self, type_: str, ts: float | None = None, n: int = 1) -> None:
        """``n`` input events of ``type_`` were accepted; ``ts`` is the newest event time among them."""
        self.events.labels(type=type_).inc(n)
        if ts is not None:
            with self._lock:
                if self._newest_ts is None or ts > self._newest_ts:
                    self._newest_ts = ts

    def observe_late(self, type_: str, n: int = 1) -> None:
        """``n`` input events of ``type_`` came after their tick was decided."""
        self.late.labels(type=type_).inc(n)

    def observe_rejected(self, type_: str | None, n: int = 1) -> None:
        """``n`` input events were rejected; an undecodable one has type ``unknown``."""
        self.rejected.labels(type=type_ or "unknown").inc(n)

    def observe_dropped(self, topic: str, reason: str, n: int = 1) -> None:
        """``n`` input records of ``topic`` were dropped for ``reason`` (each is also a dead letter)."""
        self.dropped.labels(topic=topic, reason=reason).inc(n)

    # ------------------------------------------------------------------------------ outputs

    def observe_emitted(self, event: Mapping[str, Any], arrival: float | None = None, now: float | None = None) -> None:
        """A decision or blocked CloudEvent was emitted; ``arrival`` is the wall time its trigger arrived."""
        data = event.get("data")
        if not isinstance(data, Mapping):
            return
        type_ = event.get("type")
        if type_ == DECISION:
            kind = str((data.get("policy") or {}).get("kind", "unknown"))
            self.decisions.labels(kind=kind, action=decision_action(data)).inc()
            replicas = data.get("replicas")
            if isinstance(replicas, Mapping) and isinstance(replicas.get("to"), int) and not data.get("dry_run"):
                self.set_workload_replicas(str(event.get("subject", "")), "recommended", replicas["to"])
        elif type_ != BLOCKED:
            return
        for b in data.get("blocked") or ():
            if isinstance(b, Mapping):
                self.blocked.labels(reason=str(b.get("reason", "unknown"))).inc()
        if arrival is not None:
            done = self.clock() if now is None else now
            self.decision_latency.observe(max(0.0, done - arrival))
        tick = data.get("tick")
        if isinstance(tick, int | float):
            with self._lock:
                newest = self._newest_ts
            if newest is not None:
                self.tick_lag.set(max(0.0, newest - float(tick)))

    def set_tick_lag(self, seconds: float) -> None:
        self.tick_lag.set(seconds)

    # ------------------------------------------------------------------------------ applier

    def observe_applier_result(self, result: str | Mapping[str, Any], replicas: int | None = None) -> None:
        """An applier result: a result name, or the applier's applied/apply_failed CloudEvent.

        With the CloudEvent of a successful apply and ``replicas``, the workload's applied replicas
        gauge is set too.
        """
        if isinstance(result, Mapping):
            type_ = result.get("type")
            name = {APPLIED: "applied", APPLY_FAILED: "apply_failed"}.get(str(type_), "unknown")
            self.applier_results.labels(result=name).inc()
            if name == "applied" and replicas is not None:
                self.set_workload_replicas(str(result.get("subject", "")), "applied", replicas)
            return
        self.applier_results.labels(result=result).inc()

    @contextlib.contextmanager
    def kube_api(self, operation: str) -> Iterator[None]:
        """Time one Kubernetes API call (``with metrics.kube_api("patch_scale"): ...``); errors count too."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.kube_api_latency.labels(operation=operation).observe(time.perf_counter() - start)

    def observe_kube_api(self, operation: str, seconds: float) -> None:
        self.kube_api_latency.labels(operation=operation).observe(seconds)

    def set_workload_replicas(self, workload: str, source: str, replicas: int) -> bool:
        """Export ``replicas`` for ``workload``; False (and counted as dropped) past the workload cap."""
        if not workload:
            return False
        with self._lock:
            if workload not in self._workloads:
                if len(self._workloads) >= self.workload_series:
                    self.workload_series_dropped.inc()
                    return False
                self._workloads.add(workload)
        self.workload_replicas.labels(workload=workload, source=source).set(replicas)
        return True

    # ------------------------------------------------------------------------------ health

    def record_lag(self, messages: int) -> None:
        """The consumer's total lag (end offsets minus positions, over its partitions)."""
        with self._lock:
            self._lag = messages
        self.consumer_lag.set(messages)

    def record_processed(self, event_ts: float, wall_now: float | None = None) -> None:
        """An event with event time ``event_ts`` was processed (at wall time ``wall_now``, default now).

        Readiness compares the clock with the newest such event time.  ``wall_now`` is accepted for
        callers that already read the clock; only the event time is kept.
        """
        with self._lock:
            if self._last_event_ts is None or event_ts > self._last_event_ts:
                self._last_event_ts = event_ts
                self.last_processed.set(event_ts)

    def record_stalled(self, stalled: Mapping[tuple[str, int], str]) -> None:
        """The inputs stalled now ((topic, partition) -> what the worker knows); the rest are not."""
        with self._lock:
            previous = set(self._stalled)
            self._stalled = dict(stalled)
        for topic, partition in previous - set(stalled):
            self.input_stalled.labels(topic=topic, partition=str(partition)).set(0)
        for topic, partition in stalled:
            self.input_stalled.labels(topic=topic, partition=str(partition)).set(1)

    def set_alive(self, alive: bool, reason: str = "") -> None:
        with self._lock:
            self._alive = (alive, reason)

    def set_unready(self, reason: str | None) -> None:
        """Not ready for ``reason`` (e.g. Kafka not reachable yet) while alive; ``None`` clears it."""
        with self._lock:
            self._unready = reason

    def liveness(self) -> Readiness:
        with self._lock:
            alive, reason = self._alive
        return Readiness(alive, () if alive else (reason or "not alive",))

    def readiness(self, now: float | None = None) -> Readiness:
        """Ready unless the lag or the age of the last processed event passes its threshold.

        Before the first processed event the age check does not apply (a worker that just started
        has nothing to be late about); the lag check does.
        """
        now = self.clock() if now is None else now
        with self._lock:
            lag, last = self._lag, self._last_event_ts
        reasons = []
        if self.max_lag > 0 and lag is not None and lag > self.max_lag:
            reasons.append(f"consumer lag {lag} messages > {self.max_lag}")
        if self.max_event_age > 0 and last is not None and now - last > self.max_event_age:
            reasons.append(f"last processed event is {now - last:.0f} s old > {self.max_event_age:g} s")
        alive = self.liveness()
        reasons.extend(alive.reasons)
        with self._lock:
            if self._unready:
                reasons.append(self._unready)
            reasons.extend(self._stalled[tp] for tp in sorted(self._stalled))
        return Readiness(not reasons, tuple(reasons))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, port: int = 0, addr: str = "0.0.0.0") -> MetricsServer:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on a daemon thread; port 0 picks a free one."""
        return MetricsServer(self, port, addr)


class _Handler(BaseHTTPRequestHandler):
    metrics: Metrics  # set on the per-server subclass
    server_version = "tandem"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.metrics.exposition(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            state = self.metrics.liveness()
            self._send(200 if state.ready else 503, _text(state), "text/plain; charset=utf-8")
        elif path == "/readyz":
            state = self.metrics.readiness()
            self._send(200 if state.ready else 503, _text(state), "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # scrapes every few seconds would drown the process's own log


def _text(state: Readiness) -> bytes:
    return ("ok\n" if state.ready else "".join(r + "\n" for r in state.reasons)).encode()


class MetricsServer:
    """A threading HTTP server for one :class:`Metrics`; ``port`` is the bound port."""

    def __init__(self, metrics: Metrics, port: int = 0, addr: str = "0.0.0.0") -> None:
        handler = type("TandemMetricsHandler", (_Handler,), {"metrics": metrics})
        self.httpd = ThreadingHTTPServer((addr, port), handler)
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="tandem-metrics", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class MetricsSettings:
    """Where a process serves its metrics (``port`` 0: nowhere) and when it is ready.

    The flags (``--metrics-port``, ``--ready-max-lag``, ...) are defined in ``cli/options.py``.
    """

    port: int = 9464
    addr: str = "0.0.0.0"
    max_lag: int = DEFAULT_MAX_LAG
    max_event_age: float = DEFAULT_MAX_EVENT_AGE
    workload_series: int = DEFAULT_WORKLOAD_SERIES

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> MetricsSettings:
        """From option values keyed by option name (``metrics_port``, ``metrics_addr``,
        ``ready_max_lag``, ``ready_max_event_age``, ``metrics_workloads``); a missing one keeps its
        default."""
        default = cls()
        return cls(
            port=int(options.get("metrics_port", default.port)),
            addr=str(options.get("metrics_addr", default.addr)),
            max_lag=int(options.get("ready_max_lag", default.max_lag)),
            max_event_age=float(options.get("ready_max_event_age", default.max_event_age)),
            workload_series=int(options.get("metrics_workloads", default.workload_series)),
        )


def serve_metrics(settings: MetricsSettings) -> tuple[Metrics, MetricsServer | None]:
    """A :class:`Metrics` as ``settings`` say, and its server unless the port is 0 (OSError: the
    port is taken)."""
    metrics = Metrics(
        max_lag=settings.max_lag, max_event_age=settings.max_event_age, workload_series=settings.workload_series
    )
    server = metrics.serve(settings.port, settings.addr) if settings.port else None
    return metrics, server
