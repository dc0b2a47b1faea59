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

Three modules, one job each: :mod:`streams.prometheus_api` (the queries, the client, a window's
series read at once), :mod:`streams.prometheus_events` (a window's series to events) and this one
(the range, window by window).
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field

from streams.prometheus_api import (
    DEFAULT_LABELS,
    DEFAULT_QUERIES,
    MAX_POINTS,
    Auth,
    Client,
    Fetched,
    PrometheusError,
    QuerySet,
    fetch_all,
    load_queries,
    range_parts,
)
from streams.prometheus_events import BuildState, Built, build_events

__all__ = [
    "DEFAULT_LABELS",
    "DEFAULT_QUERIES",
    "MAX_POINTS",
    "Auth",
    "BuildState",
    "Built",
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
) -> Iterator[Built]:
    """The events of ``[start, end]``, window by window (``window_points`` steps, at most
    ``max_points``), in event-time order; ``stats`` is filled as it goes, its warnings at the end."""
    ns = list(namespaces)
    state = BuildState()
    windows = range_parts(start_ms, end_ms, step_ms, max(1, min(window_points, max_points)))
    empty: dict[str, str] | None = None

    def fetch(window: tuple[int, int]) -> Fetched:
        before = client.requests
        fetched = fetch_all(client, queries, *window, step_ms, ns, max_points=max_points, parallel=parallel)
        fetched.requests = client.requests - before  # this window's (a forked reader's client is a copy)
        return fetched

    # The next window is read while this one's events are built and handed on (two windows in
    # memory, not one), by a process of its own where one can be forked cleanly: parsing the
    # answers is a third of the work, and in a thread it held the interpreter the builder needs.
    _AHEAD[:] = [fetch]
    try:
        with _reader() as ahead:
            pending = ahead.submit(_fetch_ahead, windows[0]) if windows else None
            for i, (w_start, w_end) in enumerate(windows):
                if progress is not None:
                    progress(i, len(windows))
                assert pending is not None
                fetched = pending.result()
                pending = ahead.submit(_fetch_ahead, windows[i + 1]) if i + 1 < len(windows) else None
                stats.windows += 1
                stats.samples += fetched.samples
                stats.requests += fetched.requests
                for name, found in fetched.series.items():
                    stats.series.update((name, tuple(sorted(labels.items()))) for labels, _ in found)
                warned = {w.split(" ", 4)[3]: w for w in fetched.warnings}  # "no series for NAME (...)"
                empty = warned if empty is None else {k: v for k, v in empty.items() if k in warned}
                yield build_events(fetched, queries, cluster, w_start, w_end, step_ms, state)
    finally:
        _AHEAD.clear()
    if progress is not None:
        progress(len(windows), len(windows))
    stats.warnings = [*(empty or {}).values(), *state.warnings.values()]


#: The window reader of the running import, inherited by its forked reader (:func:`_fetch_ahead`).
_AHEAD: list[Callable[[tuple[int, int]], Fetched]] = []


def _fetch_ahead(window: tuple[int, int]) -> Fetched:
    """The window's series, read by the reader :func:`import_history` installed."""
    return _AHEAD[0](window)


def _reader() -> Executor:
    """Where the next window is read: a forked process when this one runs no other thread (a fork
    copies only the thread that forks, and a lock another thread held would stay locked in the
    copy; ``--publish`` reads from a thread of its event loop), a thread otherwise.

    A day of bench/bench_import.py's fleet: the import's process spent 15.3 s of CPU with the
    reader a thread; with a process, the answers' 9 million points are parsed there and come back
    pickled (a fifth of the parse's cost to unpickle)."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    return ThreadPoolExecutor(max_workers=1)
