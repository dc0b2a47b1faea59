"""tandem's event vocabulary, named once: the input event types and the CloudEvent types it writes.

Everything else imports these names (the decoder, the merge, the topics, the schemas' tests, the
metrics, the audit reader), so a new event type or a new CloudEvent version is one edit here plus
the JSON Schemas, which ``tests/unit/test_schemas.py`` holds to this module.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPLIED",
    "APPLY_FAILED",
    "BLOCKED",
    "CLOUDEVENT_TYPES",
    "DECISION",
    "EVENT_TYPES",
    "HISTORY",
    "LATE",
    "LEARNED",
    "TIE_ORDER",
    "TOPIC_OF",
    "WATERMARK",
]

#: The input event types in the order of docs/contract.md section 3 (the order error messages,
#: summaries and the schemas' ``enum`` list them in).
EVENT_TYPES: Final = ("metric", "workload", "hpa", "vpa", "policy")

#: The ``type`` of a history envelope (docs/contract.md §3): past events of one workload, learned
#: at the present, never reconciled.  Not a topic of its own: it travels on the topic of
#: :data:`TOPIC_OF` (the metrics topic: its keys, partitions, ACLs and per-cluster topics), and
#: takes that type's place in the tie order, so an envelope and a metric event with the same
#: ``ts`` keep their topic-partition's order in the worker and their file order in replay.
HISTORY: Final = "history"
#: The input type whose topic carries an event type (each of :data:`EVENT_TYPES` its own).
TOPIC_OF: Final = {**{t: t for t in EVENT_TYPES}, HISTORY: "metric"}

#: The same types in the order the worker's merge takes events with the same ``ts``
#: (``streams.merge.RANK``): a policy or a spec before the recommendations and metrics it shapes.
#: Any fixed order would be correct; this one must never change between a worker and its restart.
TIE_ORDER: Final = ("policy", "workload", "hpa", "vpa", "metric")

#: CloudEvent ``type`` of a decision and of a blocked-change report (docs/contract.md section 4).
DECISION: Final = "dev.tandem.decision.v1"
BLOCKED: Final = "dev.tandem.blocked.v1"
#: CloudEvent ``type`` of a late-input report: an input the worker ingested after the tick it
#: belongs to had been decided (docs/worker.md, "Order across topics").  Replay never writes one.
LATE: Final = "dev.tandem.late.v1"
#: CloudEvent ``type`` of what one ``history`` envelope taught a workload (docs/contract.md §4):
#: written by the core at the envelope's ``ts``, so that a worker and ``tandem replay`` say alike
#: that the past was taken, how much of it and what was skipped as known already.
LEARNED: Final = "dev.tandem.learned.v1"
#: CloudEvent ``type`` of an applier's result (docs/edge.md).
APPLIED: Final = "dev.tandem.applied.v1"
APPLY_FAILED: Final = "dev.tandem.apply_failed.v1"

#: Short name (``tandem audit --type``) -> CloudEvent ``type``, in the order of the audit stream's story.
CLOUDEVENT_TYPES: Final = {
    "decision": DECISION,
    "blocked": BLOCKED,
    "applied": APPLIED,
    "apply_failed": APPLY_FAILED,
    "late": LATE,
    "learned": LEARNED,
}

#: The ``type`` of a producer's watermark record (docs/contract.md section 3a): not an event of a
#: workload but a promise about a cluster's events in one topic-partition.
WATERMARK: Final = "watermark"
