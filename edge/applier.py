"""``tandem apply``: apply decisions from ``<prefix>actuator`` to one cluster (docs/edge.md).

    tandem apply --cluster NAME [--broker B] [--topic-prefix P] [--dry-run] [--kubeconfig PATH]
                 [--group-id G] [--offset-reset latest|earliest] [--max-attempts N] [--metrics-port 9464]

The applier consumes the actuator topic in the consumer group ``tandem-applier-<cluster>`` and takes
only decisions whose ``data.workload.cluster`` is its cluster (the others are not its business and
are skipped without a trace).  For each one it

1. refuses, before any API call, a decision whose tick is older than ``max_decision_age`` seconds by
   the applier's own clock (``--max-decision-age``; history, a backlog: see "Decisions from the
   past" below);
2. verifies the CloudEvent (type, deterministic id, well-formed changes);
3. reads the workload; a workload without the opt-in annotation ``tandem.dev/managed: "true"`` is
   refused ("skipped: ..."); a decision whose id is the workload's ``tandem.dev/last-decision`` is a
   *repeat*: nothing is written, and the result is audited as ``applied`` with ``"repeat": true``;
   a decision older (by tick) than the last applied one is refused as stale;
4. re-checks the decision against the policy it finds **in its own cluster** (the Hvpa, Tortoise or
   CustomHpa in the workload's namespace that the decision names and that targets the workload,
   parsed by :func:`scaling.policies.parse_policy`): replicas within min/max replicas, container
   requests within minAllowed/maxAllowed (Tortoise: min/maxAllocatedResources); anything outside
   is refused with the bound named;
5. writes: the HPA (merge patch), replicas through the ``scale`` subresource, then container
   requests/limits and the ``tandem.dev/last-decision`` annotations by server-side apply (field
   manager ``tandem-applier``, ``force``), last, so the annotation marks a completed decision.
   The first write of an attempt carries the resourceVersion that was read as a precondition: when
   someone changed the workload in between the API answers 409 and the whole attempt (read, checks,
   writes) is repeated.  409, 429 and 5xx are retried with bounded exponential backoff; a call
   that gets no answer at all (the API server restarting) is waited out, unready, until it answers;
   the decision ends in ``applied`` or ``apply_failed`` (with the API's status code and
   message), never in silence.

It also consumes ``<prefix>audit`` for this cluster's blocked reports and dry-run decisions, and
after each consumer batch writes the status of the policies concerned and Events on the workloads
(:mod:`edge.reporter`, :mod:`edge.status`; docs/edge.md, "Status and Events").

``--dry-run`` (or a decision with ``data.dry_run``) writes nothing: every write is sent with
``dryRun=All``, so the API server still validates it, and the result says what would change.

Every result goes to ``<prefix>audit`` as a CloudEvent ``dev.tandem.applied.v1`` or
``dev.tandem.apply_failed.v1`` whose id is a hash of its data (``scaling.cloudevents``).  The
offset of a decision is committed only after its result is acknowledged by the broker (at least
once); the annotations make a redelivered decision a harmless repeat.

**Decisions from the past.**  A worker decides every tick of the input it reads, and imported
history (``tandem import prometheus --publish``, docs/import.md) or a worker catching up on a
backlog makes decisions for ticks long gone.  Acting on them would walk a workload through last
month's states, so an applier with ``max_decision_age`` refuses a decision whose ``data.tick`` is
more than that many seconds before its clock: audited as ``apply_failed`` with
``"refused: too old: ..."``, counted as ``refused``, and said in *one* log line per run of such
decisions (a month of history is thousands of them), repeated only after a fresh decision was
handled.  The applier's clock, not event time: the worker that read the history had the history as
its latest observed time, so only a clock outside the stream tells the past from the present.
Nothing is read or written for a refused decision, and the policy status is not touched.

**Metrics** (:mod:`ops.observability`, served on ``--metrics-port``, 0 for none):
``tandem_applier_results_total{result}`` counts every result as ``applied``, ``duplicate`` (a
repeat: nothing written), ``skipped`` (not opted in), ``refused`` (outside the policy, stale,
malformed) or ``apply_failed`` (the API refused or failed, after the retries);
``tandem_kube_api_latency_seconds{operation}`` times every API call (``get_workload``,
``list_<plural>``, ``patch_hpa``, ``patch_scale``, ``apply_workload``); the consumer lag and the
tick of the last decision are exported too.  ``/readyz`` fails on the consumer lag only by default:
an applier may rightly see no decision for hours, or be fed old ones, so the age check
(``--ready-max-event-age``) is off unless set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from edge.attempt import Attempt, Progress
from edge.checks import FIELD_MANAGER, LAST_DECISION, Refusal, count_to, result_label
from edge.intake import consumer_lag, is_status_only, take_audit
from edge.kube import KubeError
from edge.reporter import Reporter
from ops.errors import describe
from ops.retry import backoff, backoff_delays, start_client, start_retrying
from scaling.cloudevents import APPLIED, APPLY_FAILED, DECISION, cloudevent, rfc3339
from scaling.errors import InvalidEvent
from scaling.events import WorkloadRef, decode_workload_ref
from schemas.codec import encode
from streams.routing import Layout, applier_sources
from streams.settings import kafka_producer
from streams.topics import ensure_topics, topic_name

__all__ = [
    "Applier",
    "ApplierConfig",
    "Interrupted",
    "run",
]

log = logging.getLogger("tandem.applier")


class Interrupted(Exception):
    """The applier was stopped while a decision waited for the API server: the decision has no
    result and its offset is not committed, so the next applier gets it again."""


@dataclass(frozen=True)
class ApplierConfig:
    cluster: str
    dry_run: bool = False
    field_manager: str = FIELD_MANAGER
    max_attempts: int = 6
    backoff_base: float = 0.2
    backoff_cap: float = 5.0
    #: Seconds: a decision whose tick is older than this by the applier's clock is refused unread
    #: (``tandem apply --max-decision-age``, default 10 min there); ``None``: no limit.
    max_decision_age: float | None = None


class Applier:
    """Applies one decision at a time (blocking; run it in a thread).

    ``after_read`` is called with the workload as read at the start of every attempt, before any
    check or write (tests change the workload there to provoke a real 409).  ``metrics`` (a
    :class:`ops.observability.Metrics`) counts the results and times the API calls.
    """

    def __init__(
        self,
        api: Any,
        config: ApplierConfig,
        *,
        after_read: Callable[[dict[str, Any]], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        metrics: Any = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.after_read = after_read
        self.sleep = sleep
        self.clock = clock
        self.metrics = metrics
        #: Status and Events of the policies (docs/edge.md); ``None``: none are written.
        self.reporter = reporter
        #: Set by the consumer loop: a decision waiting for an unreachable API server gives up then.
        self.stop: threading.Event | None = None
        self._unready = False
        #: Decisions refused as too old since the last fresh one (0: the next one logs its line).
        self.too_old = 0
        #: Whether the last result :meth:`handle` returned was such a refusal (the loop logs none).
        self.last_too_old = False

    def _kube(self, operation: str) -> contextlib.AbstractContextManager[None]:
        """Times one API call in ``tandem_kube_api_latency_seconds{operation}`` (when there are metrics)."""
        return self.metrics.kube_api(operation) if self.metrics is not None else contextlib.nullcontext()

    def _reject(self, type_: str) -> None:
        if self.metrics is not None:
            self.metrics.observe_rejected(type_)

    # -- entry point ----------------------------------------------------------------------------

    def handle(self, value: bytes | None, refusal: str | None = None) -> dict[str, Any] | None:
        """The audit CloudEvent for one actuator message, or ``None`` when it is not ours.

        ``refusal`` (why its signature is not accepted: streams.signing) refuses a decision of this
        cluster before anything is read or written, and audits it.
        """
        if not value:
            return None
        try:
            ev = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            log.warning("actuator: not JSON (%s); skipped", exc)
            self._reject("unknown")
            return None
        if not isinstance(ev, dict) or ev.get("type") != DECISION or not isinstance(ev.get("data"), dict):
            log.warning("actuator: not a %s CloudEvent; skipped", DECISION)
            self._reject("unknown")
            return None
        try:
            ref = decode_workload_ref(ev["data"].get("workload"), "data.workload")
        except InvalidEvent as exc:
            log.warning("actuator: decision %s without a valid workload (%s); skipped", ev.get("id"), exc)
            self._reject("decision")
            return None
        if ref.cluster != self.config.cluster:
            return None
        self.last_too_old = False
        too_old = self._too_old(ev, ref)
        if too_old is not None:
            self.last_too_old = True
            result = self._result(ev, ref, self.config.dry_run, Progress(), 0, error=too_old)
            if self.metrics is not None:
                self._observe(ev["data"], result)
            return result
        self.too_old = 0
        if refusal is not None:
            result = self._result(ev, ref, self.config.dry_run, Progress(), 0, error=f"refused: {refusal}")
            if self.metrics is not None:
                self._observe(ev["data"], result)
            return result
        return self.apply(ev, ref)

    def _too_old(self, ev: Mapping[str, Any], ref: WorkloadRef) -> str | None:
        """The refusal of a decision whose tick is older than ``max_decision_age`` by this applier's
        clock, or ``None``; logs one line for the first of a run of them."""
        limit = self.config.max_decision_age
        tick = ev["data"].get("tick")
        if limit is None or isinstance(tick, bool) or not isinstance(tick, int | float) or not math.isfinite(tick):
            return None  # a decision without a valid tick is refused by the checks that follow
        now = self.clock()
        age = now - float(tick)
        if age <= limit:
            return None
        self.too_old += 1
        if self.too_old == 1:
            log.warning(
                "refusing decisions older than --max-decision-age %g s by this applier's clock (history or a "
                "backlog; docs/edge.md), the first %s of tick %s, %.0f s old; each is audited as refused and "
                'counted in tandem_applier_results_total{result="refused"}; this line comes again only after '
                "a fresh decision",
                limit,
                ref.key,
                rfc3339(float(tick)),
                age,
            )
        return (
            f"refused: too old: its tick {rfc3339(float(tick))} is {age:.0f} s before this applier's clock "
            f"{rfc3339(now)}, more than --max-decision-age {limit:g} s (a decision from history or a backlog "
            "is never applied)"
        )

    def apply(self, ev: Mapping[str, Any], ref: WorkloadRef) -> dict[str, Any]:
        """Apply one decision of this cluster; the result CloudEvent (``applied`` or ``apply_failed``)."""
        result = self._apply(ev, ref)
        if self._unready:  # the API server answered again
            self._unready = False
            self.metrics.set_unready(None)
        if self.metrics is not None:
            self._observe(ev["data"], result)
        if self.reporter is not None:
            self.reporter.decision(ev, result)
        return result

    def _observe(self, data: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        label = result_label(result)
        if label == "applied":
            # Applied, so its replicas (if any) passed the checks: the workload now has them.
            dry = result["data"].get("dry_run")
            replicas = count_to(data["replicas"], "replicas") if "replicas" in data and not dry else None
            self.metrics.observe_applier_result(result, replicas)
        else:
            self.metrics.observe_applier_result(label)
        tick = data.get("tick")
        if isinstance(tick, int | float) and not isinstance(tick, bool) and math.isfinite(tick):
            self.metrics.record_processed(float(tick))

    def _apply(self, ev: Mapping[str, Any], ref: WorkloadRef) -> dict[str, Any]:
        data = ev["data"]
        dry_run = self.config.dry_run or bool(data.get("dry_run"))
        progress = Progress()
        delays = backoff_delays(self.config.max_attempts, self.config.backoff_base, self.config.backoff_cap)
        attempt = 0
        unreachable = 0  # tries that found no API server at all (not counted as attempts)
        while True:
            attempt += 1
            try:
                note = self._attempt(ev, ref, dry_run, progress)
            except Refusal as exc:
                return self._result(ev, ref, dry_run, progress, attempt, error=str(exc))
            except KubeError as exc:
                if exc.status == 0:
                    # No answer at all (the API server restarting, the network): not the decision's
                    # fault. It is kept, unaudited and uncommitted, and tried again until the server
                    # is back; a stop request leaves it to the next applier (redelivered: at least once).
                    if self.stop is not None and self.stop.is_set():
                        raise Interrupted(f"{ref.key}: stopped while the API server was unreachable") from None
                    attempt -= 1
                    unreachable += 1
                    delay = backoff(unreachable - 1, self.config.backoff_base, self.config.backoff_cap)
                    log.warning("%s: the API server is not reachable (%s); retrying in %.1f s", ref.key, exc, delay)
                    if self.metrics is not None:
                        self.metrics.set_unready(f"Kubernetes API not reachable: {exc}")
                        self._unready = True
                    if self.stop is not None:
                        self.stop.wait(delay)
                    else:
                        self.sleep(delay)
                    continue
                if exc.retryable and attempt <= len(delays):
                    log.info("%s: attempt %d: %s; retrying", ref.key, attempt, exc)
                    self.sleep(delays[attempt - 1])
                    continue
                what = "gave up after" if exc.retryable else "failed at"
                error = f"API error ({what} attempt {attempt}): {exc.describe()}"
                return self._result(ev, ref, dry_run, progress, attempt, error=error)
            except Exception as exc:  # a bug must still end in an audited result
                log.exception("%s: unexpected error", ref.key)
                return self._result(ev, ref, dry_run, progress, attempt, error=describe(exc))
            return self._result(ev, ref, dry_run, progress, attempt, note=note)

    def _result(
        self,
        ev: Mapping[str, Any],
        ref: WorkloadRef,
        dry_run: bool,
        progress: Progress,
        attempts: int,
        *,
        error: str | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "decision": str(ev.get("id") or ""),
            "workload": ref.as_dict(),
            "dry_run": dry_run,
            "changes": progress.changes,
            "patched": progress.patched,
            "attempts": attempts,
        }
        if note == "repeat":
            data["repeat"] = True
            data["note"] = f"already applied ({LAST_DECISION}); nothing written"
        elif note:
            data["note"] = note
        if error is not None:
            data["error"] = error
        kind = APPLY_FAILED if error is not None else APPLIED
        return cloudevent(kind, self.config.cluster, ref.key, self.clock(), data)

    # -- one attempt ----------------------------------------------------------------------------

    def _attempt(self, ev: Mapping[str, Any], ref: WorkloadRef, dry_run: bool, progress: Progress) -> str | None:
        attempt = Attempt(
            self.api, self._kube, self.config.field_manager, after_read=self.after_read, reporter=self.reporter
        )
        return attempt.run(ev, ref, dry_run, progress)


# --- the consumer loop ------------------------------------------------------------------------


async def run(
    settings: Any,
    config: ApplierConfig,
    api: Any,
    *,
    group_id: str | None = None,
    offset_reset: str = "latest",
    stop: threading.Event | None = None,
    applier: Applier | None = None,
    ensure: bool = True,
    metrics: Any = None,
    verifier: Any = None,
) -> None:
    """Consume ``<prefix>actuator`` and publish results to ``<prefix>audit`` until ``stop`` is set;
    the audit topic's blocked reports and dry runs, with the results, feed the applier's reporter.

    With a ``verifier`` (streams.signing.DecisionVerifier) only decisions signed by a trusted worker
    key, not expired, are applied; the others are refused and audited.  The topic is
    ``<prefix>actuator.<cluster>`` when the cluster is among ``settings.actuator_clusters``.

    With ``metrics`` (else the ``applier``'s), the results, API calls and consumer lag are reported.
    """
    from aiokafka import AIOKafkaConsumer

    if ensure:
        try:
            await ensure_topics(settings, strict=False)
        except Exception as exc:  # no right to create topics at the edge: they must exist already
            log.warning("could not check/create topics: %s", describe(exc))
    layout = Layout(settings.prefix, tuple(getattr(settings, "actuator_clusters", ())))
    applier, reporter = _wired(applier or Applier(api, config, metrics=metrics), metrics, stop)
    feed = _Feed(applier, reporter, layout, verifier)

    # The actuator brings the decisions to apply; the audit topic the blocked reports and the
    # dry-run decisions, which only the policy status and the Events show (docs/edge.md).
    async def start_consumer() -> Any:
        consumer = AIOKafkaConsumer(
            *applier_sources(layout, config.cluster),
            **settings.client_kwargs(),
            group_id=group_id or f"tandem-applier-{config.cluster}",
            enable_auto_commit=False,
            auto_offset_reset=offset_reset,
        )
        return await start_client(consumer)

    async def start_producer() -> Any:
        return await start_client(kafka_producer(settings))

    # Kafka not reachable yet: wait for it (unready, alive) instead of exiting into a crash loop.
    kafka = f"Kafka {getattr(settings, 'bootstrap', '')}".rstrip()
    producer = await start_retrying(start_producer, kafka, stop=stop, metrics=applier.metrics)
    if producer is None:
        return
    try:
        consumer = await start_retrying(start_consumer, kafka, stop=stop, metrics=applier.metrics)
        if consumer is None:
            return
        try:
            await feed.consume(consumer, producer, stop)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()


def _wired(applier: Applier, metrics: Any, stop: threading.Event | None) -> tuple[Applier, Reporter]:
    """``applier`` with the loop's metrics (unless it has its own), stop event and a reporter."""
    if metrics is not None and applier.metrics is None:
        applier.metrics = metrics
    if stop is not None:
        applier.stop = stop
    if applier.reporter is None:
        config = applier.config
        applier.reporter = Reporter(applier.api, config.cluster, dry_run=config.dry_run, metrics=applier.metrics)
    return applier, applier.reporter


class _Feed:
    """What the consumer loop does with each message: an audit message (a blocked report, a dry
    run) to the reporter, a decision to the applier and its result to the audit topic."""

    def __init__(self, applier: Applier, reporter: Reporter, layout: Layout, verifier: Any) -> None:
        self.applier = applier
        self.reporter = reporter
        self.audit = topic_name(layout.prefix, "audit")
        #: A cluster with its own actuator topic finds its blocked reports and dry runs there too
        #: (the worker puts them there: streams.routing), so its principal needs no read right on
        #: the audit topic.
        self.own_topic = applier.config.cluster in layout.actuator_clusters
        self.verifier = verifier

    async def consume(self, consumer: Any, producer: Any, stop: threading.Event | None) -> None:
        """Until ``stop`` is set (or the applier is interrupted): batches of messages, each
        committed once handled; the reporter flushed after each batch."""
        from aiokafka import TopicPartition

        reporter, metrics = self.reporter, self.applier.metrics
        while stop is None or not stop.is_set():
            batches = await consumer.getmany(timeout_ms=300, max_records=100)
            seen: dict[Any, int] = {}  # audit partitions: committed once per batch
            for tp, messages in batches.items():
                for msg in messages:
                    if tp.topic == self.audit:
                        take_audit(reporter, msg.value)
                        seen[TopicPartition(tp.topic, tp.partition)] = msg.offset + 1
                        continue
                    if not await self._actuator(consumer, producer, TopicPartition(tp.topic, tp.partition), msg):
                        return
            if batches:
                await asyncio.to_thread(reporter.flush)
            if seen:
                await consumer.commit(seen)
            if metrics is not None:
                lag = await consumer_lag(consumer)
                if lag is not None:
                    metrics.record_lag(lag)

    async def _actuator(self, consumer: Any, producer: Any, tp: Any, msg: Any) -> bool:
        """One message of the actuator topic, committed in order with the others of its partition;
        ``False`` when the applier was stopped while it waited for the API server."""
        refusal = None
        if self.verifier is not None:
            try:
                self.verifier.verify(msg.key, msg.value, msg.headers)
            except ValueError as exc:  # DecisionRefused: no signature, forged, expired
                refusal = f"decision signature: {exc}"
        if self.own_topic and is_status_only(msg.value):
            # A blocked report or dry run on the cluster's own topic: status, not a write.
            if refusal is None:
                take_audit(self.reporter, msg.value)
            else:
                log.warning("%s: status report ignored: %s", msg.key, refusal)
            await consumer.commit({tp: msg.offset + 1})
            return True
        try:
            result = await asyncio.to_thread(self.applier.handle, msg.value, refusal)
        except Interrupted as exc:
            log.warning("%s; left to the next applier", exc)
            return False
        if result is not None:
            if not self.applier.last_too_old:  # those: one line for a run of them (handle)
                level = logging.INFO if result["type"] == APPLIED else logging.WARNING
                what = result["data"].get("error", "ok")
                log.log(level, "%s %s: %s", result["subject"], result["type"], what)
            await producer.send_and_wait(
                self.audit,
                value=encode(result),
                key=result["subject"].encode(),
                timestamp_ms=int(time.time() * 1000),
            )
        await consumer.commit({tp: msg.offset + 1})
        return True
