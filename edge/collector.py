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

Each watch resumes from the last resourceVersion it saw and relists on ``410 Gone``; a relist
turns objects that vanished meanwhile into deletions.  A resource that is not served (a CRD not
installed) or forbidden is retried every 30 s.

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
long-lived stream, not timed.  ``/readyz`` is the liveness unless ``--ready-max-event-age`` is set
(a quiet cluster rightly produces no event for a long time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from edge.kube import (
    DEPLOYMENTS,
    HPAS,
    POD_METRICS,
    PODS,
    POLICY_RESOURCES,
    STATEFULSETS,
    VPAS,
    KubeError,
    Resource,
    list_objects,
    selector_matches,
    served,
    watch,
)
from scaling.errors import InvalidEvent, InvalidPolicy
from scaling.events import WorkloadRef, decode_event

__all__ = ["Collector", "CollectorConfig", "main", "run"]

log = logging.getLogger("tandem.collector")

_WORKLOADS = {DEPLOYMENTS.plural: DEPLOYMENTS, STATEFULSETS.plural: STATEFULSETS}
#: Metadata a policy manifest keeps in its ``policy`` event (the rest is server bookkeeping).
_KEEP_META = ("name", "namespace", "labels", "annotations")
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def parse_time(value: object) -> float | None:
    """RFC 3339 (``2025-11-04T10:00:00Z``) to Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ident(obj: Mapping[str, Any]) -> tuple[str, str]:
    m = _meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _pod_counts(pod: Mapping[str, Any]) -> bool:
    """Pods the HPA controller takes into account: not being deleted, not failed."""
    return not _meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") != "Failed"


def _resources(container: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    res = container.get("resources") or {}
    return {part: dict(res.get(part) or {}) for part in ("requests", "limits")}


def clean_manifest(obj: Mapping[str, Any], res: Resource) -> dict[str, Any]:
    """A policy CR as a manifest: apiVersion, kind, the user's metadata and the spec."""
    meta = _meta(obj)
    kept: dict[str, Any] = {k: meta[k] for k in _KEEP_META if meta.get(k)}
    if "annotations" in kept:
        kept["annotations"] = {k: v for k, v in kept["annotations"].items() if k not in _DROP_ANNOTATIONS}
        if not kept["annotations"]:
            del kept["annotations"]
    return {
        "apiVersion": obj.get("apiVersion") or res.api_version,
        "kind": obj.get("kind") or res.kind,
        "metadata": kept,
        "spec": obj.get("spec") or {},
    }


@dataclass(frozen=True)
class CollectorConfig:
    cluster: str
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    interval: float = 30.0  # pod metrics scrape period (s)
    watch_timeout: int = 300  # server-side timeout of one watch request (s)


class Collector:
    """The collector's state (what it has seen, what it has sent) and its event builders.

    Not thread-safe and free of I/O: the watch threads hand it ``(type, resource, object)`` and it
    returns the contract events to send, already validated.
    """

    def __init__(self, cluster: str, metrics: Any = None) -> None:
        self.cluster = cluster
        #: A ``ops.observability.Metrics`` (or None): events refused by the validation are counted.
        self.metrics = metrics
        # what the watches show, by (plural-or-group key, namespace, name)
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.sent: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.last_ts: dict[str, float] = {}
        self.policy_targets: dict[tuple[str, str, str], WorkloadRef] = {}  # (resource, ns, name) -> target
        self.oom_seen: set[tuple[str, str, int]] = set()
        self.rejected = 0  # events and policies that failed validation (logged, not sent)
        self.lists: dict[str, int] = {}  # (re)lists per resource: 1 each while watches resume
        self.resumes: dict[str, int] = {}  # watches that ended and were resumed from their resourceVersion

    # -- helpers --------------------------------------------------------------------------------

    def _ts(self, key: str, now: float) -> float:
        ts = max(round(now, 3), self.last_ts.get(key, 0.0))
        self.last_ts[key] = ts
        return ts

    def _ref(self, namespace: str, kind: str, name: str) -> WorkloadRef:
        return WorkloadRef(self.cluster, namespace, kind, name)

    def _emit(
        self, out: list[dict[str, Any]], source: str, ev: dict[str, Any], now: float, *, dedupe: bool = True
    ) -> None:
        """Stamp ``ev`` with its ``ts``, validate it and add it to ``out`` unless it repeats."""
        key = "/".join(ev["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        ident = (ev["type"], key, source)
        if dedupe and self.sent.get(ident) == ev:
            return
        stamped = {"type": ev["type"], "ts": self._ts(key, now), **{k: v for k, v in ev.items() if k != "type"}}
        try:
            decode_event(stamped)
        except InvalidEvent as exc:
            self._reject(ev["type"])
            log.warning("not sending a %s event for %s (%s): %s", ev["type"], key, source, exc)
            return
        if dedupe:
            self.sent[ident] = ev
        out.append(stamped)

    def _reject(self, type_: str) -> None:
        self.rejected += 1
        if self.metrics is not None:
            self.metrics.observe_rejected(type_)

    def _store(self, bucket: str, kind: str, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Remember (or forget, on DELETED) ``obj``; returns the previous version."""
        objs = self.objects.setdefault(bucket, {})
        ident = _ident(obj)
        old = objs.get(ident)
        if kind == "DELETED":
            objs.pop(ident, None)
        else:
            objs[ident] = dict(obj)
        return old

    # -- entry point ----------------------------------------------------------------------------

    def observe(self, kind: str, res: Resource, payload: Any, now: float) -> list[dict[str, Any]]:
        """Events for a watch event (``ADDED``/``MODIFIED``/``DELETED`` with an object) or a relist
        (``SYNC`` with the list of objects of ``res`` in one namespace, or in all: ``(ns, items)``)."""
        if kind == "RESUMED":
            self.resumes[self._bucket(res)] = self.resumes.get(self._bucket(res), 0) + 1
            return []
        if kind == "SYNC":
            namespace, items = payload
            bucket = self._bucket(res)
            self.lists[bucket] = self.lists.get(bucket, 0) + 1
            known = self.objects.get(bucket, {})
            present = {_ident(o) for o in items}
            out: list[dict[str, Any]] = []
            for ident, old in list(known.items()):
                if (namespace is None or ident[0] == namespace) and ident not in present:
                    out.extend(self.observe("DELETED", res, old, now))
            for obj in items:
                out.extend(self.observe("ADDED", res, obj, now))
            return out
        obj = payload
        if res in (DEPLOYMENTS, STATEFULSETS):
            return self._on_workload(kind, res, obj, now)
        if res is PODS:
            return self._on_pod(kind, obj, now)
        if res is HPAS:
            return self._on_hpa(kind, obj, now)
        if res is VPAS:
            return self._on_vpa(kind, obj, now)
        if res in POLICY_RESOURCES:
            return self._on_policy(kind, res, obj, now)
        return []

    @staticmethod
    def _bucket(res: Resource) -> str:
        return f"{res.plural}.{res.group}"

    # -- workloads and pods ---------------------------------------------------------------------

    def workload_event(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        ns, name = _ident(obj)
        spec = obj.get("spec") or {}
        template = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        pods = [
            p
            for (pns, _), p in sorted(self.objects.get(self._bucket(PODS), {}).items())
            if pns == ns and _pod_counts(p) and selector_matches(spec.get("selector"), _meta(p).get("labels"))
        ]
        ev: dict[str, Any] = {
            "type": "workload",
            "workload": self._ref(ns, res.kind, name).as_dict(),
            "replicas": spec.get("replicas", 1),
            "containers": {c.get("name"): _resources(c) for c in template},
            "ready_replicas": (obj.get("status") or {}).get("readyReplicas") or 0,
            "pods": [
                {
                    "name": _meta(p).get("name"),
                    "ready": _pod_ready(p),
                    "phase": (p.get("status") or {}).get("phase") or "Pending",
                    "started": parse_time((p.get("status") or {}).get("startTime")),
                }
                for p in pods
            ],
        }
        return ev

    def _on_workload(self, kind: str, res: Resource, obj: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
        self._store(self._bucket(res), kind, obj)
        out: list[dict[str, Any]] = []
        ns, name = _ident(obj)
        if kind == "DELETED":  # the contract has no deletion of a workload; its last state stays
            self._forget("workload", self._ref(ns, res.kind, name), res.kind)
        else:
            self._emit(out, res.kind, self.workload_event(res, obj), now)
        return out

    def _forget(self, type_: str, ref: WorkloadRef, source: str) -> None:
        """Forget what was sent for a deleted object, so that a re-created one is sent again."""
        self.sent.pop((type_, ref.key, source), None)

    def _on_pod(self, kind: str, pod: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
        old = self._store(self._bucket(PODS), kind, pod)
        ns, _ = _ident(pod)
        labels = [_meta(p).get("labels") for p in (old, pod) if p is not None]
        out: list[dict[str, Any]] = []
        for res in (DEPLOYMENTS, STATEFULSETS):
            for (wns, _), w in sorted(self.objects.get(self._bucket(res), {}).items()):
                if wns != ns:
                    continue
                selector = (w.get("spec") or {}).get("selector")
                if any(selector_matches(selector, lab) for lab in labels):
                    self._emit(out, res.kind, self.workload_event(res, w), now)
                    if kind != "DELETED":
                        self._oom(out, res, w, pod, now)
        return out

    def _oom(
        self, out: list[dict[str, Any]], res: Resource, workload: Mapping[str, Any], pod: Mapping[str, Any], now: float
    ) -> None:
        uid = str(_meta(pod).get("uid") or _meta(pod).get("name"))
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (cs.get("lastState") or {}).get("terminated") or {}
            if terminated.get("reason") != "OOMKilled":
                continue
            mark = (uid, str(cs.get("name")), int(cs.get("restartCount") or 0))
            if mark in self.oom_seen:
                continue
            self.oom_seen.add(mark)
            ns, name = _ident(workload)
            ev = {
                "type": "metric",
                "workload": self._ref(ns, res.kind, name).as_dict(),
                "pod": _meta(pod).get("name"),
                "container": cs.get("name"),
                "oom": True,
            }
            self._emit(out, "oom", ev, now, dedupe=False)

    # -- HPA, VPA -------------------------------------------------------------------------------

    def _on_hpa(self, kind: str, hpa: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
        self._store(self._bucket(HPAS), kind, hpa)
        out: list[dict[str, Any]] = []
        ev = hpa_event(self.cluster, hpa)
        if kind == "DELETED":  # no deletion in the contract: the worker keeps the last hpa event
            if ev is not None:
                self._forget("hpa", WorkloadRef(**ev["workload"]), f"hpa/{_ident(hpa)[1]}")
            return out
        if ev is not None:
            self._emit(out, f"hpa/{_ident(hpa)[1]}", ev, now)
        return out

    def _on_vpa(self, kind: str, vpa: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
        self._store(self._bucket(VPAS), kind, vpa)
        out: list[dict[str, Any]] = []
        ev = vpa_event(self.cluster, vpa)
        if kind == "DELETED":
            if ev is not None:
                self._forget("vpa", WorkloadRef(**ev["workload"]), f"vpa/{_ident(vpa)[1]}")
            return out
        if ev is not None:
            self._emit(out, f"vpa/{_ident(vpa)[1]}", ev, now)
        return out

    # -- policies -------------------------------------------------------------------------------

    def _on_policy(self, kind: str, res: Resource, obj: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
        from scaling.policies import parse_policy, policy_target

        self._store(self._bucket(res), kind, obj)
        ns, name = _ident(obj)
        ident = (self._bucket(res), ns, name)
        previous = self.policy_targets.get(ident)
        out: list[dict[str, Any]] = []
        source = f"policy/{res.group}/{name}"
        if kind == "DELETED":
            if previous is not None:
                del self.policy_targets[ident]
                self._emit(out, source, {"type": "policy", "workload": previous.as_dict(), "policy": None}, now)
            return out
        manifest = clean_manifest(obj, res)
        try:
            target = policy_target(manifest, self.cluster)
            ref = self._ref(target.namespace, target.kind, target.name)
            parse_policy(manifest, ref)
        except (InvalidPolicy, InvalidEvent) as exc:
            self._reject("policy")
            log.warning("%s %s/%s is not a valid policy (%s); the last valid one stays", res.kind, ns, name, exc)
            return out
        if target.cluster != self.cluster:
            log.warning(
                "%s %s/%s says it is for cluster %s, but it lives in %s: taken as %s's",
                res.kind,
                ns,
                name,
                target.cluster,
                self.cluster,
                self.cluster,
            )
        if previous is not None and previous != ref:
            self._emit(out, source, {"type": "policy", "workload": previous.as_dict(), "policy": None}, now)
        self.policy_targets[ident] = ref
        self._emit(out, source, {"type": "policy", "workload": ref.as_dict(), "policy": manifest}, now)
        return out

    # -- metrics --------------------------------------------------------------------------------

    def metric_events(self, pod_metrics: Iterable[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
        """One ``metric`` batch per workload from ``metrics.k8s.io`` PodMetrics."""
        pods = self.objects.get(self._bucket(PODS), {})
        batches: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for pm in pod_metrics:
            ns, pod_name = _ident(pm)
            pod = pods.get((ns, pod_name))
            labels = _meta(pod).get("labels") if pod else _meta(pm).get("labels")
            owner = self._owner(ns, labels)
            if owner is None:
                continue
            ready = _pod_ready(pod) if pod else True
            for c in pm.get("containers") or []:
                usage = c.get("usage") or {}
                sample: dict[str, Any] = {"pod": pod_name, "container": c.get("name"), "ready": ready}
                if usage.get("cpu") is not None:
                    sample["cpu"] = usage["cpu"]
                if usage.get("memory") is not None:
                    sample["memory"] = usage["memory"]
                if "cpu" in sample or "memory" in sample:
                    batches.setdefault(owner, []).append(sample)
        out: list[dict[str, Any]] = []
        for (ns, kind, name), samples in sorted(batches.items()):
            ev = {"type": "metric", "workload": self._ref(ns, kind, name).as_dict(), "samples": samples}
            self._emit(out, "metrics", ev, now, dedupe=False)
        return out

    def _owner(self, ns: str, labels: Mapping[str, str] | None) -> tuple[str, str, str] | None:
        for res in (DEPLOYMENTS, STATEFULSETS):
            for (wns, wname), w in sorted(self.objects.get(self._bucket(res), {}).items()):
                if wns == ns and selector_matches((w.get("spec") or {}).get("selector"), labels):
                    return ns, res.kind, wname
        return None


def hpa_event(cluster: str, hpa: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``hpa`` event of an autoscaling/v2 HPA, or ``None`` before the HPA controller set its status."""
    ns, name = _ident(hpa)
    spec = hpa.get("spec") or {}
    status = hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    if status.get("desiredReplicas") is None or not ref.get("name"):
        return None
    ev: dict[str, Any] = {
        "type": "hpa",
        "workload": WorkloadRef(cluster, ns, str(ref.get("kind") or "Deployment"), str(ref["name"])).as_dict(),
        "name": name,
        "desired_replicas": status["desiredReplicas"],
    }
    if status.get("currentReplicas") is not None:
        ev["current_replicas"] = status["currentReplicas"]
    ev["min_replicas"] = spec.get("minReplicas", 1)
    if spec.get("maxReplicas") is not None:
        ev["max_replicas"] = spec["maxReplicas"]
    if status.get("conditions"):
        ev["conditions"] = status["conditions"]
    if spec.get("metrics") is not None:
        ev["metrics"] = spec["metrics"]
    if status.get("currentMetrics") is not None:
        ev["current_metrics"] = status["currentMetrics"]
    if spec.get("behavior") is not None:
        ev["behavior"] = spec["behavior"]
    return ev


_VPA_BOUNDS = (("lowerBound", "lower_bound"), ("upperBound", "upper_bound"), ("uncappedTarget", "uncapped_target"))


def vpa_event(cluster: str, vpa: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``vpa`` event of a VerticalPodAutoscaler, or ``None`` while it has no recommendation."""
    ns, _ = _ident(vpa)
    ref = (vpa.get("spec") or {}).get("targetRef") or {}
    status = vpa.get("status") or {}
    recs = (status.get("recommendation") or {}).get("containerRecommendations") or []
    if not recs or not ref.get("name"):
        return None
    containers: dict[str, Any] = {}
    for r in recs:
        if not r.get("containerName") or not r.get("target"):
            continue
        rec = {"target": r["target"]}
        for src, dst in _VPA_BOUNDS:
            if r.get(src):
                rec[dst] = r[src]
        containers[r["containerName"]] = rec
    if not containers:
        return None
    ev: dict[str, Any] = {
        "type": "vpa",
        "workload": WorkloadRef(cluster, ns, str(ref.get("kind") or "Deployment"), str(ref["name"])).as_dict(),
        "containers": containers,
    }
    if status.get("conditions"):
        ev["conditions"] = status["conditions"]
    return ev


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
    """List, then watch from the list's version; resume after each watch ends; relist on 410."""
    rv: str | None = None
    delay = 1.0
    while not stop.is_set():
        try:
            if rv is None:
                with _timed(metrics, _list_op(res)):
                    items, rv = list_objects(api, res, namespace)
                push(("SYNC", res, (namespace, items)))
            for kind, obj in watch(api, res, namespace, rv, timeout_seconds=timeout, stop=stop):
                rv = str(_meta(obj).get("resourceVersion") or rv)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    push((kind, res, obj))
            delay = 1.0
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
            log.warning("%s: %s; retrying in %.0f s", res.plural, exc, delay)
            stop.wait(delay)
            delay = min(delay * 2, 30.0)
        except Exception:  # never let a watch thread die silently
            log.exception("%s: watch failed; retrying in %.0f s", res.plural, delay)
            stop.wait(delay)
            delay = min(delay * 2, 30.0)


class _KafkaSink:
    def __init__(self, settings: Any) -> None:
        from aiokafka import AIOKafkaProducer

        from streams.topics import TOPIC_OF_TYPE, topic_name

        self.topics = {t: topic_name(settings.prefix, s) for t, s in TOPIC_OF_TYPE.items()}
        self.producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap, acks="all", enable_idempotence=True, linger_ms=5
        )

    async def start(self) -> None:
        await self.producer.start()

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        from schemas.codec import encode

        futures = []
        for ev in events:
            key = "/".join(ev["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
            futures.append(
                await self.producer.send(
                    self.topics[ev["type"]], value=encode(ev), key=key.encode(), timestamp_ms=round(ev["ts"] * 1000)
                )
            )
        if futures:
            await asyncio.gather(*futures)

    async def stop(self) -> None:
        await self.producer.stop()


class _FileSink:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: Any = None

    async def start(self) -> None:
        self.fh = sys.stdout.buffer if self.path == "-" else open(self.path, "ab")  # noqa: SIM115

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        from schemas.codec import encode

        for ev in events:
            self.fh.write(encode(ev) + b"\n")
        self.fh.flush()

    async def stop(self) -> None:
        if self.fh is not None and self.fh is not sys.stdout.buffer:
            self.fh.close()


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
    sink: Any
    if out:
        sink = _FileSink(out)
    else:
        from streams.topics import ensure_topics

        try:
            await ensure_topics(settings, strict=False)
        except Exception as exc:  # no right to create topics at the edge: they must exist already
            log.warning("could not check/create topics: %s: %s", type(exc).__name__, exc)
        sink = _KafkaSink(settings)
    await sink.start()
    collector = collector or Collector(config.cluster, metrics)
    if metrics is not None and collector.metrics is None:
        collector.metrics = metrics
    metrics = collector.metrics

    async def send(events: list[dict[str, Any]]) -> None:
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

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Resource, Any]] = asyncio.Queue()

    def push(item: tuple[str, Resource, Any]) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: we are stopping
            stop.set()

    namespaces: Sequence[str | None] = config.namespaces or (None,)
    # Pods first: a workload's first event then already lists its pods.
    resources = (PODS, DEPLOYMENTS, STATEFULSETS, HPAS, VPAS, *POLICY_RESOURCES)
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

    async def scrape() -> None:
        warned = False
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
                    await send(collector.metric_events(items, time.time()))
                    warned = False
                elif not warned:
                    log.info("metrics.k8s.io is not served: no pod metrics (checked every %.0f s)", config.interval)
                    warned = True
            except KubeError as exc:
                log.warning("pod metrics: %s", exc)
            await asyncio.to_thread(stop.wait, config.interval)

    scraper = asyncio.create_task(scrape())
    try:
        while not stop.is_set():
            try:
                item = await asyncio.wait_for(queue.get(), 0.5)
            except TimeoutError:
                continue
            events = collector.observe(item[0], item[1], item[2], time.time())
            while not queue.empty():  # drain what else arrived, then send it all at once
                nxt = queue.get_nowait()
                events.extend(collector.observe(nxt[0], nxt[1], nxt[2], time.time()))
            await send(events)
    finally:
        stop.set()
        scraper.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await scraper
        await sink.stop()


def main(argv: Sequence[str]) -> int:
    from edge.applier import add_edge_metrics_options
    from edge.kube import api_client
    from ops.observability import metrics_from_args
    from streams.settings import add_kafka_options, env, kafka_settings

    p = argparse.ArgumentParser(prog="tandem collect", description="feed the input topics from one cluster")
    p.add_argument("--cluster", default=env("cluster"), help="this cluster's name (env TANDEM_CLUSTER)")
    p.add_argument("--kubeconfig", default=env("kubeconfig"), help="kubeconfig (default: in-cluster or ~/.kube/config)")
    p.add_argument(
        "--namespace",
        action="append",
        default=[n for n in str(env("namespace", "")).split(os.pathsep) if n],
        help="namespace to watch (repeatable; default all)",
    )
    p.add_argument("--interval", type=float, default=float(env("interval", "30")), help="pod metrics period (s)")
    p.add_argument("--watch-timeout", type=int, default=int(env("watch_timeout", "300")), help="one watch's length (s)")
    p.add_argument("--out", default=env("out"), help="write JSON Lines here instead of publishing to Kafka")
    p.add_argument("--loglevel", default=env("loglevel", "info"))
    add_kafka_options(p)
    add_edge_metrics_options(p)
    args = p.parse_args(list(argv))
    if not args.cluster:
        print("tandem collect: --cluster NAME is required (or TANDEM_CLUSTER)", file=sys.stderr)
        return 2
    if "/" in args.cluster:
        print("tandem collect: --cluster must not contain '/'", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.watch_timeout < 1:
        print("tandem collect: --interval and --watch-timeout must be positive", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        settings = None if args.out else kafka_settings(args)
        api = api_client(args.kubeconfig)
    except Exception as exc:
        print(f"tandem collect: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    config = CollectorConfig(args.cluster, tuple(dict.fromkeys(args.namespace)), args.interval, args.watch_timeout)
    try:
        metrics, server = metrics_from_args(args)  # /metrics, /healthz, /readyz on --metrics-port
    except OSError as exc:
        print(f"tandem collect: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(config, api, settings=settings, out=args.out, stop=stop, metrics=metrics)

    try:
        asyncio.run(go())
    except Exception as exc:
        print(f"tandem collect: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
