"""One attempt to apply one decision: verify it, read the workload, re-check, write (docs/edge.md).

Steps 2-5 of :mod:`edge.applier`: the CloudEvent's id must be the hash of its data; the workload is
read (absent: refused; the decision already applied: a *repeat*, nothing written); the decision is
re-checked against the policy found in the cluster (:mod:`edge.checks`); then the HPA (merge
patch), the replicas (the ``scale`` subresource) and last the containers and the
``tandem.dev/last-decision`` annotations (server-side apply) are written.  The first write of the
workload carries the resourceVersion that was read, so that a change in between answers 409 and
the applier repeats the whole attempt.  What the writes changed accumulates in a
:class:`Progress`, which survives a repeated attempt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from edge.checks import (
    LAST_DECISION,
    LAST_TICK,
    Bounds,
    Refusal,
    apply_patch,
    check_decision,
    check_marks,
    count_to,
    find_hpa,
    find_policy,
    hpa_patch,
    plan_containers,
    policy_bounds,
)
from edge.kube import HPAS, WORKLOAD_RESOURCES, KubeError, list_objects, policy_resources, request
from edge.reporter import Reporter
from scaling.cloudevents import DECISION, event_id
from scaling.errors import InvalidEvent, InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies import parse_policy

__all__ = ["Attempt", "Progress"]

#: Times one API call by its operation name (``tandem_kube_api_latency_seconds{operation}``).
Timer = Callable[[str], contextlib.AbstractContextManager[None]]


@dataclass
class Progress:
    """What earlier attempts of one decision already wrote (they survive a retried attempt)."""

    changes: dict[str, Any] = field(default_factory=dict)
    patched: list[str] = field(default_factory=list)

    def add(self, what: str, change: Any) -> None:
        if what not in self.patched:
            self.patched.append(what)
        if isinstance(change, dict) and isinstance(self.changes.get(what), dict):
            self.changes[what] = {**self.changes[what], **change}
        else:
            self.changes[what] = change


class Attempt:
    """The API calls of one decision's attempts, against ``api``, timed by ``kube``.

    ``after_read`` is called with the workload as read at the start of every attempt, before any
    check or write (tests change the workload there to provoke a real 409); ``reporter`` hears of a
    policy found invalid.
    """

    def __init__(
        self,
        api: Any,
        kube: Timer,
        field_manager: str,
        *,
        after_read: Callable[[dict[str, Any]], None] | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.api = api
        self.kube = kube
        self.field_manager = field_manager
        self.after_read = after_read
        self.reporter = reporter

    def run(self, ev: Mapping[str, Any], ref: WorkloadRef, dry_run: bool, progress: Progress) -> str | None:
        """One attempt: ``"repeat"``, a note on what was (not) written, or ``None``; :class:`Refusal`
        for a decision refused, :class:`~edge.kube.KubeError` for an API call that failed."""
        data = ev["data"]
        decision_id = str(ev.get("id") or "")
        if not decision_id or decision_id != event_id(DECISION, data):
            raise Refusal(f"refused: the decision id {decision_id!r} is not the hash of its data (forged or corrupted)")
        res = WORKLOAD_RESOURCES.get(ref.kind)
        if res is None:
            raise Refusal(f"refused: kind {ref.kind!r} is not one tandem applies to ({', '.join(WORKLOAD_RESOURCES)})")
        obj = self._read(res, ref)
        meta = obj.get("metadata") or {}
        tick = data.get("tick")
        if check_marks(f"{ref.kind} {ref.namespace}/{ref.name}", meta.get("annotations") or {}, decision_id, tick):
            return "repeat"
        bounds = self._recheck(data, ref)
        plan = plan_containers(obj, data.get("containers") or {}, self.field_manager)
        dry = {"dryRun": "All"} if dry_run else {}
        if data.get("hpa"):
            self._write_hpa(data["hpa"], ref, bounds, dry, progress)
        rv = meta.get("resourceVersion")
        # The first write of the workload carries the resourceVersion read: the scale's, if any.
        scaled = "replicas" in data and self._write_replicas(data, res, ref, obj, rv, dry, progress)
        marks = {LAST_DECISION: decision_id}
        if isinstance(tick, int | float):
            marks[LAST_TICK] = repr(float(tick))
        body = apply_patch(obj, plan.resources, marks, None if scaled else rv)
        with self.kube("apply_workload"):
            request(
                self.api,
                "PATCH",
                res.path(ref.namespace, ref.name),
                query={"fieldManager": self.field_manager, "force": True, **dry},
                body=body,
                content_type="application/apply-patch+yaml",
            )
        if plan.changes:
            progress.add("containers", plan.changes)
        if not progress.patched:
            return "nothing to change: the workload already has the decided values"
        return None

    def _read(self, res: Any, ref: WorkloadRef) -> dict[str, Any]:
        """The workload as it is now (absent: refused)."""
        try:
            with self.kube("get_workload"):
                obj: dict[str, Any] = request(self.api, "GET", res.path(ref.namespace, ref.name))
        except KubeError as exc:
            if exc.status == 404:
                raise Refusal(
                    f"refused: {ref.kind} {ref.namespace}/{ref.name} does not exist in cluster {ref.cluster} (404)"
                ) from None
            raise
        if self.after_read is not None:
            self.after_read(obj)
        return obj

    def _recheck(self, data: Mapping[str, Any], ref: WorkloadRef) -> Bounds:
        """Re-check the decision against the policy found in this cluster; its bounds."""
        ns = ref.namespace
        manifests: list[dict[str, Any]] = []
        for pres in policy_resources():
            try:
                with self.kube(f"list_{pres.plural}"):
                    items, _ = list_objects(self.api, pres, ns)
            except KubeError as exc:
                if exc.status == 404:  # the CRD is not installed
                    continue
                raise
            manifests.extend({**m, "apiVersion": m.get("apiVersion") or pres.api_version} for m in items)
        pol: Any = data.get("policy") if isinstance(data.get("policy"), Mapping) else {}
        manifest = find_policy(manifests, ref, pol.get("kind"), pol.get("name"))
        try:
            policy = parse_policy(manifest, ref)
        except (InvalidPolicy, InvalidEvent) as exc:
            message = f"refused: the policy {manifest.get('kind')} in this cluster is invalid: {exc}"
            if self.reporter is not None:
                self.reporter.invalid_policy(
                    {**manifest, "metadata": {"namespace": ns, **(manifest.get("metadata") or {})}}, message
                )
            raise Refusal(message) from None
        bounds = policy_bounds(policy)
        errors = check_decision(data, bounds)
        if errors:
            raise Refusal("refused: " + "; ".join(errors))
        return bounds

    def _write_hpa(
        self, decided: Any, ref: WorkloadRef, bounds: Bounds, dry: dict[str, str], progress: Progress
    ) -> None:
        """Merge-patch the HPA the policy keeps with the decided fields (if any differ)."""
        with self.kube(f"list_{HPAS.plural}"):
            hpas, _ = list_objects(self.api, HPAS, ref.namespace)
        hpa = find_hpa(hpas, ref, bounds.hpa_name)
        patch, summary = hpa_patch(hpa, decided)
        if patch:
            with self.kube("patch_hpa"):
                request(
                    self.api,
                    "PATCH",
                    HPAS.path(ref.namespace, (hpa.get("metadata") or {}).get("name")),
                    query={"fieldManager": self.field_manager, **dry},
                    body=patch,
                    content_type="application/merge-patch+json",
                )
            progress.add("hpa", summary)

    def _write_replicas(
        self,
        data: Mapping[str, Any],
        res: Any,
        ref: WorkloadRef,
        obj: Mapping[str, Any],
        rv: Any,
        dry: dict[str, str],
        progress: Progress,
    ) -> bool:
        """Scale the workload through its ``scale`` subresource, conditional on the resourceVersion
        ``rv`` read; whether it wrote."""
        to = count_to(data["replicas"], "replicas")
        cur = (obj.get("spec") or {}).get("replicas", 1)
        if cur == to:
            return False
        with self.kube("patch_scale"):
            request(
                self.api,
                "PATCH",
                res.path(ref.namespace, ref.name, "scale"),
                query={"fieldManager": self.field_manager, **dry},
                body={"metadata": {"resourceVersion": rv}, "spec": {"replicas": to}},
                content_type="application/merge-patch+json",
            )
        progress.add("replicas", {"from": cur, "to": to})
        return True
