"""``tandem collect``: feed the input topics from one cluster (docs/edge.md).

    tandem collect --cluster NAME [--broker B] [--topic-prefix P] [--kubeconfig PATH]
                   [--namespace NS]... [--interval S] [--watch-timeout S] [--out FILE] [--metrics-port 9464]

It lists and watches, in the given namespaces (default: all),

* Deployments and StatefulSets, and the pods their selectors match -> ``workload`` events
  (``spec.replicas``, container requests/limits, ``status.readyReplicas``, and per pod name,
  readiness, phase and start time; pods being deleted and failed pods are left out, as the HPA
  controller ignores them);
* HorizontalPodAutoscalers (autoscaling/v2) -> ``hpa`` events for their ``scaleTargetRef``, once
  the HPA has a ``status.desiredReplicas``;
* VerticalPodAutoscalers (autoscaling.k8s.io/v1) -> ``vpa`` events from
  ``status.recommendation.containerRecommendations``;
* the policy CRs (Hvpa in both groups, Tortoise, CustomHpa; deploy/crds/) -> ``policy`` events for
  their target; a deleted policy (or one retargeted away) -> ``"policy": null``;
* OOM kills seen in pod statuses -> ``metric`` events with ``"oom": true``;

and every ``--interval`` seconds reads ``metrics.k8s.io`` pod metrics, when that API is served,
into one ``metric`` batch per workload.

A policy object the parser refuses (a misspelled field, a bad duration, minReplicas above
maxReplicas) is not sent, so the workers keep the last valid one; it is never dropped silently
either: once per resourceVersion of the object, a Warning Event ``InvalidPolicy`` is recorded on
it (deduplicated as the applier's Events are, :func:`edge.reporter.record_event`) with the
refusal (field path and did-you-mean), and the policy event that was not sent goes to
``<prefix>deadletter`` in the worker's record shape, with the text the worker would have given it.

Each watch resumes from the last resourceVersion it saw and relists on ``410 Gone``; a relist
turns objects that vanished meanwhile into deletions.  A resource that is not served (a CRD not
installed) or forbidden is retried every 30 s.

**Topics.**  Each event goes to its cluster's input topics: ``<prefix><topic>.<cluster>`` when the
cluster is listed in ``--input-clusters`` (``TANDEM_INPUT_CLUSTERS``, the worker's list), which
Kafka ACLs let this cluster's collector alone write (scripts/kafka-acls.sh), else the shared
``<prefix><topic>``; its watermarks go to the same topics.

**Event time.**  The collector is the one place where processing time becomes event time: every
event's ``ts`` is the wall-clock time at which the collector observed the state it reports (the
watch event, the scrape), in milliseconds, never going backwards per workload, and the Kafka
timestamp is that ``ts``.  Kubernetes objects carry no trustworthy "changed at" time (see
docs/edge.md).  Events are keyed by the workload key; an event whose content (all but ``ts``) equals
the last one sent for the same workload and source is not sent again.  Every event is validated with
:func:`scaling.events.decode_event` before it leaves: the collector never emits what the contract
rejects (it logs and drops it instead).

**Metrics** (:mod:`ops.observability`, served on ``--metrics-port``, 0 for none):
``tandem_events_total{type}`` counts the events sent (once the broker acknowledged them, or once
written with ``--out``), ``tandem_events_rejected_total{type}`` those its own validation refused,
``tandem_kube_api_latency_seconds{operation}`` times the lists (``list_<plural>``,
``list_pod_metrics``) and the ``metrics.k8s.io`` discovery (``discover_pod_metrics``); a watch is a
long-lived stream, not timed.  ``tandem_events_dropped_total{topic,reason="not_authorized"}`` counts
the records the broker refused (a topic this collector's principal may not write: with
``--input-clusters``, another cluster's topics); each is logged and dead-lettered with the refusal.
``/readyz`` is the liveness unless ``--ready-max-event-age`` is set
(a quiet cluster rightly produces no event for a long time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from edge.kube import (
    DEPLOYMENTS,
    HPAS,
    POD_METRICS,
    PODS,
    STATEFULSETS,
    VPAS,
    KubeError,
    Resource,
    list_objects,
    policy_resources,
    served,
    watch,
)
from edge.reporter import record_event
from edge.status import rfc3339
from edge.translate import Collector, Refusal
from ops.errors import describe
from ops.retry import backoff, start_client, start_retrying
from scaling.events import PolicyEvent, decode_event
from scaling.vocabulary import EVENT_TYPES
from schemas.codec import encode
from streams.deadletter import deadletter_record
from streams.merge import policy_key, watermark
from streams.settings import kafka_producer
from streams.topics import ensure_topics, input_topic, topic_name

__all__ = ["COLLECTOR_COMPONENT", "CollectorConfig", "deadletter_value", "run"]

log = logging.getLogger("tandem.collector")

#: ``source.component`` and ``reportingComponent`` of the collector's Events.
COLLECTOR_COMPONENT = "tandem-collector"


@dataclass(frozen=True)
class CollectorConfig:
    cluster: str
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    interval: float = 30.0  # pod metrics scrape period (s)
    watch_timeout: int = 300  # server-side timeout of one watch request (s)


# --- I/O: watch threads, the scrape loop, the sink --------------------------------------------


def _list_op(res: Resource) -> str:
    """The ``operation`` label of a list of ``res`` (``metrics.k8s.io`` pods are not core pods)."""
    return "list_pod_metrics" if res is POD_METRICS else f"list_{res.plural}"


def _timed(metrics: Any, operation: str) -> contextlib.AbstractContextManager[None]:
    return metrics.kube_api(operation) if metrics is not None else contextlib.nullcontext()


def _watch_loop(
    api: Any,
    res: Resource,
    namespace: str | None,
    push: Callable[[tuple[str, Resource, Any]], None],
    stop: threading.Event,
    timeout: int,
    metrics: Any = None,
) -> None:
    """List, then watch from the list's version; resume after each watch ends; relist on 410.

    A failure is retried after :func:`ops.retry.backoff` (1 s doubling, at most 30 s), a missing or
    forbidden resource every 30 s."""
    rv: str | None = None
    failures = 0
    while not stop.is_set():
        try:
            if rv is None:
                with _timed(metrics, _list_op(res)):
                    items, rv = list_objects(api, res, namespace)
                push(("SYNC", res, (namespace, items)))
            for kind, obj in watch(api, res, namespace, rv, timeout_seconds=timeout, stop=stop):
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    push((kind, res, obj))
            failures = 0
            push(("RESUMED", res, rv))  # the server ended the watch: resume from rv
        except KubeError as exc:
            if exc.status == 410:
                log.info("%s: resourceVersion %s expired; relisting", res.plural, rv)
                rv = None
                continue
            if exc.status in (403, 404):
                log.warning("%s.%s: %s; retrying in 30 s", res.plural, res.group or "core", exc)
                rv = None
                stop.wait(30.0)
                continue
            delay = backoff(failures, 1.0, 30.0)
            failures += 1
            log.warning("%s: %s; retrying in %.0f s", res.plural, exc, delay)
            stop.wait(delay)
        except Exception:  # never let a watch thread die silently
            delay = backoff(failures, 1.0, 30.0)
            failures += 1
            log.exception("%s: watch failed; retrying in %.0f s", res.plural, delay)
            stop.wait(delay)


def deadletter_value(refusal: Refusal, topic: str) -> bytes:
    """The dead-letter record of a refused policy, in the worker's shape
    (:func:`streams.deadletter.deadletter_record`): ``topic`` is the policies topic it would have
    gone to, ``partition`` and ``offset`` are null (it never was on it), ``value`` the policy
    event's JSON text, ``error`` the worker's text for it (``field 'policy.spec...': ...``)."""
    return deadletter_record(topic, None, None, refusal.key.encode(), encode(refusal.event), refusal.error)


class _KafkaSink:
    def __init__(self, settings: Any, metrics: Any = None) -> None:
        self.deadletter = topic_name(settings.prefix, "deadletter")
        self.settings = settings
        #: ops.observability.Metrics (or None): the records the broker refused are counted there.
        self.metrics = metrics
        #: Topics whose refusal has been logged (once each, a refusal repeats every scrape).
        self._refused: set[str] = set()
        self.producer = kafka_producer(settings, linger_ms=5)
        #: Held while events are stamped-and-sent or a round of watermarks goes out (FIFO), so that a
        #: watermark at ``W`` follows every event stamped before ``W`` in each topic-partition.
        self.lock = asyncio.Lock()

    def topic(self, kind: str, cluster: str) -> str:
        """The input topic of ``cluster``'s ``kind`` events (its own with ``--input-clusters``)."""
        return input_topic(self.settings.prefix, kind, cluster, getattr(self.settings, "input_clusters", ()))

    async def start(self) -> None:
        await self.producer.start()

    async def _refuse(self, topic: str, records: Sequence[tuple[bytes | None, bytes]], exc: BaseException) -> None:
        """Records the broker would not take on ``topic`` (an ACL): counted, logged once per topic,
        dead-lettered with the refusal (best effort: the dead-letter topic may be refused too)."""
        error = f"not authorized: the broker refused the write to {topic} ({describe(exc)})"
        if self.metrics is not None:
            self.metrics.observe_dropped(topic, "not_authorized", len(records))
        if topic not in self._refused:
            self._refused.add(topic)
            log.error("%d record(s) dropped: %s; is --input-clusters the worker's list?", len(records), error)
        try:
            futures = [
                await self.producer.send(
                    self.deadletter, value=deadletter_record(topic, None, None, k, v, error), key=k
                )
                for k, v in records
            ]
            await asyncio.gather(*futures)
        except Exception as failed:
            log.warning("the records refused on %s are not on the dead-letter topic: %s", topic, describe(failed))

    async def _send_all(self, records: Sequence[tuple[str, bytes, bytes, int | None, int, Any]]) -> None:
        """Send ``(topic, key, value, partition, timestamp_ms, headers)`` records and wait for the
        broker; those of a topic it refuses to this principal go to :meth:`_refuse`, the rest is sent."""
        from aiokafka.errors import TopicAuthorizationFailedError

        futures: list[tuple[str, bytes, bytes, Any]] = []
        refused: dict[str, list[tuple[bytes | None, bytes]]] = {}
        errors: dict[str, BaseException] = {}
        for topic, key, value, partition, ts_ms, headers in records:
            if topic in errors:
                refused[topic].append((key, value))
                continue
            try:
                fut = await self.producer.send(
                    topic, value=value, key=key, partition=partition, timestamp_ms=ts_ms, headers=headers
                )
            except TopicAuthorizationFailedError as exc:
                errors[topic] = exc
                refused.setdefault(topic, []).append((key, value))
                continue
            futures.append((topic, key, value, fut))
        results = await asyncio.gather(*(f for *_, f in futures), return_exceptions=True)
        for (topic, key, value, _), result in zip(futures, results, strict=True):
            if isinstance(result, TopicAuthorizationFailedError):
                errors.setdefault(topic, result)
                refused.setdefault(topic, []).append((key, value))
            elif isinstance(result, BaseException):
                raise result
        for topic, dropped in refused.items():
            await self._refuse(topic, dropped, errors[topic])

    async def watermark(self, cluster: str, ts: float) -> None:
        """A round of watermarks (docs/contract.md §3a): every event of ``cluster`` stamped up to
        ``ts`` has been sent, so the worker may decide its ticks up to there, whatever the delays
        between the topics' batches (docs/worker.md, "Order across topics")."""
        from aiokafka.errors import TopicAuthorizationFailedError

        async with self.lock:
            records = []
            key = cluster.encode()
            value = encode(watermark(cluster, ts))
            for type_ in EVENT_TYPES:
                topic = self.topic(type_, cluster)
                headers = self.settings.input_headers(type_, key, value)
                try:
                    parts = sorted(await self.producer.partitions_for(topic))
                except TopicAuthorizationFailedError as exc:
                    await self._refuse(topic, [(key, value)], exc)
                    continue
                for p in parts:
                    records.append((topic, key, value, p, round(ts * 1000), headers))
            await self._send_all(records)

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        async with self.lock:
            await self._send(events)

    async def _send(self, events: Sequence[dict[str, Any]]) -> None:
        from aiokafka.errors import TopicAuthorizationFailedError
        from aiokafka.partitioner import DefaultPartitioner

        records = []
        for ev in events:
            key = "/".join(ev["workload"][f] for f in ("cluster", "namespace", "kind", "name")).encode()
            topic = self.topic(ev["type"], ev["workload"]["cluster"])
            partition = None
            value = encode(ev)
            if ev["type"] == "policy":
                policy = decode_event(ev)
                if isinstance(policy, PolicyEvent) and policy.identity is not None:
                    # One compacted record per policy, on its workload's partition (docs/contract.md §2).
                    try:
                        parts = sorted(await self.producer.partitions_for(topic))
                    except TopicAuthorizationFailedError as exc:
                        await self._refuse(topic, [(policy_key(policy), value)], exc)
                        continue
                    partition = DefaultPartitioner()(key, parts, parts)
                    key = policy_key(policy)
            headers = self.settings.input_headers(ev["type"], key, value)  # tandem-mac (streams.signing)
            records.append((topic, key, value, partition, round(ev["ts"] * 1000), headers))
        if records:
            await self._send_all(records)

    async def dead_letter(self, refusal: Refusal) -> bool:
        value = deadletter_value(refusal, self.topic("policy", refusal.event["workload"]["cluster"]))
        await (await self.producer.send(self.deadletter, value=value, key=refusal.key.encode()))
        return True

    async def stop(self) -> None:
        await self.producer.stop()


class _FileSink:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: Any = None

    async def start(self) -> None:
        self.fh = sys.stdout.buffer if self.path == "-" else open(self.path, "ab")  # noqa: SIM115

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        for ev in events:
            self.fh.write(encode(ev) + b"\n")
        self.fh.flush()

    async def dead_letter(self, refusal: Refusal) -> bool:
        return False  # a JSON Lines file holds input events only: the Event and the log say it

    async def watermark(self, cluster: str, ts: float) -> None:
        """A recording's order is its lines' order: ``tandem publish`` writes the watermarks."""

    async def stop(self) -> None:
        if self.fh is not None and self.fh is not sys.stdout.buffer:
            self.fh.close()


async def _open_sink(settings: Any, out: str | None, stop: threading.Event, metrics: Any) -> Any:
    """The started sink: the ``out`` file, else Kafka once it is reachable (``None``: stopped first).

    Kafka not reachable yet: the collector waits for it (unready, alive) instead of exiting into a
    crash loop.
    """
    if out:
        sink = _FileSink(out)
        await sink.start()
        return sink
    try:
        await ensure_topics(settings, strict=False)
    except Exception as exc:  # no right to create topics at the edge: they must exist already
        log.warning("could not check/create topics: %s", describe(exc))

    async def start_sink() -> _KafkaSink:
        kafka_sink = _KafkaSink(settings)
        await start_client(kafka_sink.producer)
        return kafka_sink

    kafka = f"Kafka {getattr(settings, 'bootstrap', '')}".rstrip()
    return await start_retrying(start_sink, kafka, stop=stop, metrics=metrics)


async def _send_counted(sink: Any, metrics: Any, events: list[dict[str, Any]]) -> None:
    """Send ``events``, then count them by type with the newest event time of each."""
    await sink.send(events)
    if metrics is not None and events:
        newest: dict[str, float] = {}
        counts: dict[str, int] = {}
        for ev in events:
            counts[ev["type"]] = counts.get(ev["type"], 0) + 1
            newest[ev["type"]] = max(newest.get(ev["type"], ev["ts"]), ev["ts"])
        for type_, n in counts.items():
            metrics.observe_event(type_, newest[type_], n)
        metrics.record_processed(max(newest.values()))


def _start_watches(
    api: Any,
    config: CollectorConfig,
    push: Callable[[tuple[str, Resource, Any]], None],
    stop: threading.Event,
    metrics: Any,
) -> list[threading.Thread]:
    """One watch thread per resource and namespace, started."""
    namespaces: Sequence[str | None] = config.namespaces or (None,)
    # Pods first: a workload's first event then already lists its pods.
    resources = (PODS, DEPLOYMENTS, STATEFULSETS, HPAS, VPAS, *policy_resources())
    threads = [
        threading.Thread(
            target=_watch_loop,
            args=(api, res, ns, push, stop, config.watch_timeout, metrics),
            name=f"watch-{res.plural}.{res.group or 'core'}-{ns or 'all'}",
            daemon=True,
        )
        for res in resources
        for ns in namespaces
    ]
    for t in threads:
        t.start()
    return threads


async def _scrape(
    api: Any, config: CollectorConfig, sink: Any, collector: Collector, metrics: Any, stop: threading.Event
) -> None:
    """Every ``config.interval``: the pod metrics when ``metrics.k8s.io`` is served, then a round of
    watermarks."""
    warned = False
    namespaces: Sequence[str | None] = config.namespaces or (None,)
    # A first round before any event, so the worker orders this cluster by watermarks from
    # its first event on (vacuously true: nothing is stamped yet).
    await sink.watermark(config.cluster, time.time())
    while not stop.is_set():
        try:
            with _timed(metrics, "discover_pod_metrics"):
                is_served = await asyncio.to_thread(served, api, POD_METRICS)
            if is_served:
                items: list[dict[str, Any]] = []
                for ns in namespaces:
                    with _timed(metrics, _list_op(POD_METRICS)):
                        got, _ = await asyncio.to_thread(list_objects, api, POD_METRICS, ns)
                    items.extend(got)
                await _send_counted(sink, metrics, collector.metric_events(items, time.time()))
                warned = False
            elif not warned:
                log.info("metrics.k8s.io is not served: no pod metrics (checked every %.0f s)", config.interval)
                warned = True
        except KubeError as exc:
            log.warning("pod metrics: %s", exc)
        try:
            # Stamped after the scrape's events: the events are sent (or queued before it on
            # the sink's lock), so every event of this cluster up to now precedes it.
            await sink.watermark(config.cluster, time.time())
        except Exception as exc:  # the next round carries the same promise, later
            log.warning("watermark not sent: %s", describe(exc))
        await asyncio.to_thread(stop.wait, config.interval)


async def _forward(
    queue: asyncio.Queue[tuple[str, Resource, Any]],
    collector: Collector,
    sink: Any,
    metrics: Any,
    refusals: asyncio.Queue[Refusal | None],
    stop: threading.Event,
) -> None:
    """What the watches saw, as events, until ``stop``: each wake-up drains the queue and sends it
    all at once; the refused policies go to ``refusals``."""
    while not stop.is_set():
        try:
            item = await asyncio.wait_for(queue.get(), 0.5)
        except TimeoutError:
            continue
        events = collector.observe(item[0], item[1], item[2], time.time())
        while not queue.empty():
            nxt = queue.get_nowait()
            events.extend(collector.observe(nxt[0], nxt[1], nxt[2], time.time()))
        for refusal in collector.take_refusals():
            refusals.put_nowait(refusal)
        await _send_counted(sink, metrics, events)


async def _shut_down(
    config: CollectorConfig,
    sink: Any,
    scraper: asyncio.Task[None],
    reporter: asyncio.Task[None],
    refusals: asyncio.Queue[Refusal | None],
) -> None:
    """Stop the scrape, give the queued refusals a while, send a last round of watermarks, close."""
    scraper.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await scraper
    refusals.put_nowait(None)  # report what is queued, for a while, then stop
    with contextlib.suppress(Exception):
        await asyncio.wait({reporter}, timeout=_REPORT_GRACE)
    reporter.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await reporter
    try:
        # A last round: every event sent so far is released, and the worker runs the last
        # tick by its wall clock (a live cluster's watermarks stopped: docs/worker.md).  What a
        # restarted collector sends is stamped later.  A collector that dies sends none: its
        # last events wait for it to come back.
        await sink.watermark(config.cluster, time.time())
    except Exception as exc:
        log.warning("last watermark not sent: %s", describe(exc))
    await sink.stop()


async def run(
    config: CollectorConfig,
    api: Any,
    *,
    settings: Any = None,
    out: str | None = None,
    stop: threading.Event | None = None,
    collector: Collector | None = None,
    metrics: Any = None,
) -> None:
    """Watch the cluster and send events to Kafka (``settings``) or a JSON Lines file (``out``).

    With ``metrics`` (else the ``collector``'s), the events sent, the events refused and the API
    calls are reported.
    """
    stop = stop or threading.Event()
    watched = metrics if metrics is not None else getattr(collector, "metrics", None)
    sink = await _open_sink(settings, out, stop, watched)
    if sink is None:
        return
    collector = collector or Collector(config.cluster, metrics)
    if metrics is not None and collector.metrics is None:
        collector.metrics = metrics
    metrics = collector.metrics
    if isinstance(sink, _KafkaSink):
        sink.metrics = metrics

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Resource, Any]] = asyncio.Queue()

    def push(item: tuple[str, Resource, Any]) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: we are stopping
            stop.set()

    _start_watches(api, config, push, stop, metrics)
    refusals: asyncio.Queue[Refusal | None] = asyncio.Queue()

    async def report_refusals() -> None:
        """One at a time, so that two versions refused alike count one Event rather than race."""
        while (refusal := await refusals.get()) is not None:
            await _report_refusal(api, config.cluster, sink, refusal, metrics)

    scraper = asyncio.create_task(_scrape(api, config, sink, collector, metrics, stop))
    reporter = asyncio.create_task(report_refusals())
    try:
        await _forward(queue, collector, sink, metrics, refusals, stop)
    finally:
        stop.set()
        await _shut_down(config, sink, scraper, reporter, refusals)


#: Seconds a stopping collector still gives the refusals it has queued.
_REPORT_GRACE = 10.0


async def _report_refusal(api: Any, cluster: str, sink: Any, refusal: Refusal, metrics: Any) -> None:
    """The Warning Event on the refused policy object, then its dead letter; each best effort
    (logged when it fails: the refusal is in the log either way)."""
    where = f"{refusal.involved.get('kind')} {refusal.involved.get('namespace')}/{refusal.involved.get('name')}"
    try:
        await asyncio.to_thread(
            record_event,
            api,
            "Warning",
            "InvalidPolicy",
            refusal.message,
            refusal.involved,
            component=COLLECTOR_COMPONENT,
            instance=f"{COLLECTOR_COMPONENT}-{cluster}",
            now=rfc3339(time.time()),
            timed=lambda operation: _timed(metrics, operation),
        )
    except Exception as exc:
        log.warning("event InvalidPolicy on %s not recorded: %s", where, describe(exc))
    try:
        if await sink.dead_letter(refusal):
            log.info("the refused %s is on the dead-letter topic", where)
    except Exception as exc:
        log.warning("the refused %s is not on the dead-letter topic: %s", where, describe(exc))
