"""The collector's pure half: cluster objects in, contract events out (docs/edge.md, "Collector").

:class:`Collector` holds what the watches have shown and what was sent, and turns each watch event,
relist or PodMetrics scrape into the input events of docs/contract.md §3, validated by
:func:`scaling.events.decode_event` and sent on change only.  It does no I/O and reads no clock
(``now`` is passed in): :mod:`edge.collector` runs the watch threads, the scrape loop and the sinks
around it, the way kopf keeps handlers apart from its machinery.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from edge.kube import (
    DEPLOYMENTS,
    HPAS,
    PODS,
    STATEFULSETS,
    VPAS,
    Resource,
    policy_resources,
    selector_matches,
)
from edge.status import invalid_policy_message
from scaling.errors import InvalidEvent, InvalidPolicy
from scaling.events import WorkloadRef, decode_event
from scaling.policies import parse_policy, policy_target

__all__ = ["Collector", "Refusal", "clean_manifest", "hpa_event", "parse_time", "vpa_event"]

log = logging.getLogger("tandem.collector")

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


@dataclass(frozen=True, slots=True)
class Refusal:
    """A policy object the parser refused, once per resourceVersion (docs/edge.md, "Collector").

    The I/O half records ``message`` as a Warning Event ``InvalidPolicy`` on ``involved`` (the
    object: apiVersion, kind, name, namespace, uid, resourceVersion) and puts ``event``, the policy
    event that was not sent, on the dead-letter topic under ``key`` with ``error``, the text the
    worker would have given it (``field 'policy.spec...': ...``).
    """

    involved: dict[str, Any]
    message: str
    key: str
    event: dict[str, Any]
    error: str


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
        #: (resource, ns, name) of a policy object refused -> the version refused (its resourceVersion)
        self.refused: dict[tuple[str, str, str], str] = {}
        self.refusals: list[Refusal] = []  # refused policy objects not yet reported (take_refusals)
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
        if res in policy_resources():
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
        self._store(self._bucket(res), kind, obj)
        ns, name = _ident(obj)
        ident = (self._bucket(res), ns, name)
        previous = self.policy_targets.get(ident)
        out: list[dict[str, Any]] = []
        source = f"policy/{res.group}/{name}"
        # A deletion names the policy it removes: several may target one workload (the worker
        # keeps each by its identity and lets none act while there are more than one).
        deleted = {"apiVersion": obj.get("apiVersion") or res.api_version, "kind": obj.get("kind") or res.kind}
        deleted.update(namespace=ns, name=name)
        if kind == "DELETED":
            self.refused.pop(ident, None)
            if previous is not None:
                del self.policy_targets[ident]
                gone = {"type": "policy", "workload": previous.as_dict(), "policy": None, "deleted": deleted}
                self._emit(out, source, gone, now)
            return out
        manifest = clean_manifest(obj, res)
        ref = None
        try:
            target = policy_target(manifest, self.cluster)
            ref = self._ref(target.namespace, target.kind, target.name)
            parse_policy(manifest, ref)
        except (InvalidPolicy, InvalidEvent) as exc:
            self._reject("policy")
            log.warning("%s %s/%s is not a valid policy (%s); the last valid one stays", res.kind, ns, name, exc)
            self._refuse(ident, res, obj, manifest, ref, exc, now)
            return out
        self.refused.pop(ident, None)
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
            gone = {"type": "policy", "workload": previous.as_dict(), "policy": None, "deleted": deleted}
            self._emit(out, source, gone, now)
        self.policy_targets[ident] = ref
        self._emit(out, source, {"type": "policy", "workload": ref.as_dict(), "policy": manifest}, now)
        return out

    def _refuse(
        self,
        ident: tuple[str, str, str],
        res: Resource,
        obj: Mapping[str, Any],
        manifest: dict[str, Any],
        ref: WorkloadRef | None,
        exc: InvalidEvent,
        now: float,
    ) -> None:
        """Queue a :class:`Refusal` for ``obj``, unless this version of it was refused already (a
        relist, or a resumed watch, shows the same object again: no second Event, no count + 1)."""
        meta = _meta(obj)
        version = str(meta.get("resourceVersion") or "") or orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS).decode()
        if self.refused.get(ident) == version:
            return
        self.refused[ident] = version
        involved: dict[str, Any] = {
            "apiVersion": obj.get("apiVersion") or res.api_version,
            "kind": obj.get("kind") or res.kind,
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
        }
        involved.update({k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)})
        ns, name = _ident(obj)
        # Keyed like the policy event it would have been: by its target, else by the object itself.
        key = ref.key if ref is not None else f"{self.cluster}/{ns}/{involved['kind']}/{name}"
        event = {
            "type": "policy",
            "ts": round(now, 3),
            "workload": ref.as_dict() if ref is not None else None,
            "policy": manifest,
        }
        self.refusals.append(Refusal(involved, invalid_policy_message(str(exc)), key, event, str(exc.within("policy"))))

    def take_refusals(self) -> list[Refusal]:
        """The refusals queued since the last call (the I/O half reports each once)."""
        taken, self.refusals = self.refusals, []
        return taken

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
