"""Writes what the applier learned where Kubernetes users look: policy status and Events (I/O).

The applier hands it every decision of its cluster with the result (:meth:`Reporter.decision`),
and, from the audit topic, the blocked reports and dry-run decisions it never applies
(:meth:`Reporter.audit`); :meth:`Reporter.flush`, once per consumer batch, then

* folds the batch's observations of each policy object into its status (:func:`edge.status.fold_status`)
  and writes it with one JSON merge patch of the ``status`` subresource, conditional on the
  resourceVersion read, only when it differs from what the object has: at most one write per
  object per batch, none when nothing changed (the resourceVersion stays);
* records one Event per observation on the scale target (and one on a policy whose spec is
  invalid, and a Warning ``AmbiguousPolicy`` on each policy while another targets its workload
  too, naming the others), deduplicated as client-go's EventCorrelator does for the HPA's ``SuccessfulRescale``:
  the same type, reason and message on the same object increment ``count`` and move
  ``lastTimestamp`` of one Event instead of adding another.

Nothing here may fail a decision: API errors are logged and the observation is dropped (the next
tick brings a fresh one).  An applier run with ``--dry-run`` sends the status with ``dryRun=All``
and records no Event.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from edge.kube import WORKLOAD_RESOURCES, KubeError, Resource, policy_resources, request
from edge.status import Observation, ambiguity_message, event_for, event_name, fold_status, merge_patch, rfc3339
from ops.errors import describe
from scaling.cloudevents import BLOCKED, DECISION
from scaling.reconcile import AMBIGUOUS_POLICY

__all__ = ["EVENTS", "REPORTING_COMPONENT", "Reporter", "record_event"]

log = logging.getLogger("tandem.applier")

EVENTS = Resource("", "v1", "events", "Event")
REPORTING_COMPONENT = "tandem-applier"
#: Status writes that meet a conflict are read, folded and tried again this often.
_STATUS_ATTEMPTS = 3


def _wall(ts: float) -> str:
    return rfc3339(ts)


class Reporter:
    """Status and Events of one cluster (blocking; call :meth:`flush` in a thread)."""

    def __init__(
        self,
        api: Any,
        cluster: str,
        *,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
        metrics: Any = None,
    ) -> None:
        self.api = api
        self.cluster = cluster
        self.dry_run = dry_run
        self.clock = clock
        self.metrics = metrics
        #: (namespace, kind, name) of a policy -> the observations of this batch, in arrival order
        self.pending: dict[tuple[str, str, str], list[Observation]] = {}
        #: (event type, reason, message, involved object) of this batch
        self.events: list[tuple[str, str, str, dict[str, Any]]] = []
        self.status_writes = 0  # for tests and logs: status patches sent
        self._uids: dict[tuple[str, str, str], str] = {}

    def _kube(self, operation: str) -> contextlib.AbstractContextManager[None]:
        return self.metrics.kube_api(operation) if self.metrics is not None else contextlib.nullcontext()

    # -- what comes in ---------------------------------------------------------------------------

    def decision(self, ev: Mapping[str, Any], result: Mapping[str, Any] | None) -> None:
        """A decision of this cluster and the applier's result for it."""
        self._observe(Observation("decision", ev.get("data") or {}, result))

    def audit(self, ev: Mapping[str, Any]) -> None:
        """An audit CloudEvent: blocked reports and dry-run decisions of this cluster are taken
        (the others are applied decisions, seen on the actuator topic, or other clusters')."""
        data = ev.get("data")
        if not isinstance(data, Mapping) or (data.get("workload") or {}).get("cluster") != self.cluster:
            return
        if ev.get("type") == BLOCKED:
            self._observe(Observation("blocked", data))
        elif ev.get("type") == DECISION and data.get("dry_run"):
            self._observe(Observation("decision", data))

    def invalid_policy(self, manifest: Mapping[str, Any], message: str) -> None:
        """A Warning on a policy object whose spec the applier could not parse."""
        meta = manifest.get("metadata") or {}
        involved = {
            "apiVersion": manifest.get("apiVersion"),
            "kind": manifest.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
        }
        if meta.get("uid"):
            involved["uid"] = meta["uid"]
        self.events.append(("Warning", "InvalidPolicy", message, involved))

    def _observe(self, obs: Observation) -> None:
        wl = obs.data.get("workload") or {}
        pol = obs.data.get("policy") or {}
        ns = str(wl.get("namespace") or "")
        if pol.get("kind") and pol.get("name") and ns:
            self.pending.setdefault((ns, str(pol["kind"]), str(pol["name"])), []).append(obs)
        ambiguous = obs.ambiguous
        if ambiguous:
            # On the policy object itself, as the HPA controller records AmbiguousSelector on each
            # HPA: a Warning naming the other policies of the workload.
            me = next(
                (p for p in ambiguous if (p.get("kind"), p.get("name")) == (pol.get("kind"), pol.get("name"))), None
            )
            if me is not None and ns:
                involved = {
                    "apiVersion": me.get("apiVersion"),
                    "kind": me.get("kind"),
                    "namespace": ns,
                    "name": me.get("name"),
                }
                obj = {"apiVersion": me.get("apiVersion"), "kind": me.get("kind"), "metadata": {"name": me.get("name")}}
                self.events.append(("Warning", AMBIGUOUS_POLICY, ambiguity_message(obj, ambiguous), involved))
            return
        said = event_for(obs)
        res = WORKLOAD_RESOURCES.get(str(wl.get("kind") or ""))
        if said is not None and res is not None and ns and wl.get("name"):
            involved = {"apiVersion": res.api_version, "kind": res.kind, "namespace": ns, "name": wl["name"]}
            self.events.append((*said, involved))

    # -- what goes out ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the statuses and Events gathered since the last flush."""
        pending, self.pending = self.pending, {}
        events, self.events = self.events, []
        for (ns, kind, name), observations in sorted(pending.items()):
            try:
                self._write_status(ns, kind, name, observations)
            except Exception as exc:  # status is best effort: the next tick brings a fresh one
                log.warning("status of %s %s/%s not written: %s", kind, ns, name, describe(exc))
        if self.dry_run:
            return
        for type_, reason, message, involved in events:
            try:
                self._record(type_, reason, message, involved)
            except Exception as exc:
                log.warning(
                    "event %s on %s %s/%s not recorded: %s: %s",
                    reason,
                    involved.get("kind"),
                    involved.get("namespace"),
                    involved.get("name"),
                    type(exc).__name__,
                    exc,
                )

    def _find(self, ns: str, kind: str, name: str) -> tuple[Resource, dict[str, Any]] | None:
        for res in policy_resources():
            if res.kind != kind:
                continue
            try:
                with self._kube(f"get_{res.plural}"):
                    return res, request(self.api, "GET", res.path(ns, name))
            except KubeError as exc:
                if exc.status != 404:  # 404: not in this group (or the CRD is not installed)
                    raise
        return None

    def _write_status(self, ns: str, kind: str, name: str, observations: list[Observation]) -> None:
        for _ in range(_STATUS_ATTEMPTS):
            found = self._find(ns, kind, name)
            if found is None:
                log.info("no %s %s/%s in this cluster: no status to write", kind, ns, name)
                return
            res, obj = found
            obj.setdefault("apiVersion", res.api_version)
            status = fold_status(obj, observations)
            old = obj.get("status") or {}
            if status is None or status == old:
                return  # nothing changed: no write, the resourceVersion stays
            body = {
                "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
                "status": merge_patch(old, status),
            }
            try:
                with self._kube("patch_status"):
                    request(
                        self.api,
                        "PATCH",
                        res.path(ns, name, "status"),
                        query={"fieldManager": REPORTING_COMPONENT, **({"dryRun": "All"} if self.dry_run else {})},
                        body=body,
                        content_type="application/merge-patch+json",
                    )
            except KubeError as exc:
                if exc.status == 409:  # someone wrote meanwhile: read, fold, try again
                    continue
                raise
            self.status_writes += 1
            return
        log.warning("status of %s %s/%s not written: it kept changing under us", kind, ns, name)

    def _uid(self, involved: Mapping[str, Any]) -> str | None:
        """The uid of a workload, so that ``kubectl describe`` (which selects by uid) shows the Event."""
        key = (str(involved.get("namespace")), str(involved.get("kind")), str(involved.get("name")))
        if key not in self._uids:
            res = WORKLOAD_RESOURCES.get(key[1])
            if res is None:
                return None
            try:
                with self._kube("get_event_target"):
                    obj = request(self.api, "GET", res.path(key[0], key[2]))
            except KubeError as exc:
                if exc.status == 404:
                    return None
                raise
            self._uids[key] = str((obj.get("metadata") or {}).get("uid") or "")
        return self._uids[key] or None

    def _record(self, type_: str, reason: str, message: str, involved: dict[str, Any]) -> None:
        if "uid" not in involved and involved.get("kind") in WORKLOAD_RESOURCES:
            uid = self._uid(involved)
            if uid is None:
                return  # the workload is gone: nobody would read the Event
            involved = {**involved, "uid": uid}
        elif "uid" not in involved:
            # A policy object: its uid too (``kubectl describe`` selects the Events by it).
            found = self._find(str(involved.get("namespace")), str(involved.get("kind")), str(involved.get("name")))
            if found is None:
                return  # the policy is gone: nobody would read the Event
            meta = found[1].get("metadata") or {}
            involved = {**involved, "apiVersion": found[1].get("apiVersion") or found[0].api_version}
            if meta.get("uid"):
                involved["uid"] = meta["uid"]
        record_event(
            self.api,
            type_,
            reason,
            message,
            involved,
            component=REPORTING_COMPONENT,
            instance=f"{REPORTING_COMPONENT}-{self.cluster}",
            now=_wall(self.clock()),
            timed=self._kube,
        )


def record_event(
    api: Any,
    type_: str,
    reason: str,
    message: str,
    involved: Mapping[str, Any],
    *,
    component: str,
    instance: str,
    now: str,
    timed: Callable[[str], contextlib.AbstractContextManager[None]] | None = None,
) -> str:
    """Create a core v1 Event on ``involved`` (its ``namespace`` and ``name`` at least), or count it.

    Deduplicated as client-go's EventCorrelator does: the Event's name is fixed by what it says
    (:func:`edge.status.event_name`), so the same Event again, also after a restart, meets a 409 on
    create, and its ``count`` is incremented and ``lastTimestamp`` moved to ``now`` (RFC 3339)
    instead.  Returns ``"created"`` or ``"counted"``.  The applier's :class:`Reporter` and the
    collector (its ``InvalidPolicy`` Warnings) both record through here.
    """

    def kube(operation: str) -> contextlib.AbstractContextManager[None]:
        return timed(operation) if timed is not None else contextlib.nullcontext()

    ns = str(involved["namespace"])
    name = event_name(str(involved.get("kind")), str(involved["name"]), type_, reason, message)
    event = {
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": dict(involved),
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        with kube("create_event"):
            request(api, "POST", EVENTS.path(ns), body=event)
        return "created"
    except KubeError as exc:
        if exc.status != 409:
            raise
    # The same Event exists (within the events' TTL): count it, as the EventCorrelator does.
    with kube("get_event"):
        current = request(api, "GET", EVENTS.path(ns, name))
    patch = {
        "metadata": {"resourceVersion": (current.get("metadata") or {}).get("resourceVersion")},
        "count": int(current.get("count") or 1) + 1,
        "lastTimestamp": now,
    }
    with kube("patch_event"):
        request(
            api,
            "PATCH",
            EVENTS.path(ns, name),
            body=patch,
            content_type="application/merge-patch+json",
        )
    return "counted"
