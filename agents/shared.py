"""What the parts of the worker's pipeline share: the topics it reads and writes, and what it owns now.

The pipeline (:mod:`agents.pipeline`) is one agent and two timers over separate parts, each with
one job: admission (:mod:`agents.admission`), publishing (:mod:`agents.publisher`), checkpoints
(:mod:`agents.checkpoint`), the broker's offsets (:mod:`agents.offsets`), fetch control
(:mod:`agents.flow`), the stall watch (:mod:`agents.watchdog`) and the diagnostics
(:mod:`agents.diagnostics`).  They share the topic layout (fixed) and the :class:`Assignment`
(changed only by the rebalance hooks and the reload of the pipeline).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from streams.merge import source_of
from streams.routing import Layout
from streams.topics import input_topic, input_topics, topic_name

__all__ = ["Assignment", "Topics", "die"]

log = logging.getLogger("tandem.worker")


@dataclass(frozen=True)
class Topics:
    """The topics of one worker (docs/contract.md §2)."""

    #: Input topic -> (event type, the cluster whose own topic it is, or None for a shared one):
    #: the shared topics and, with ``--input-clusters``, five topics per listed cluster.
    inputs: dict[str, tuple[str, str | None]]
    #: Input topic -> its source in the merge (streams.merge.source_of: the event type of a
    #: shared topic, ``type/cluster`` of a cluster's own), and back.
    kind_of_topic: dict[str, str]
    topic_of_kind: dict[str, str]
    deadletter: str
    #: Where outputs go (streams.routing).
    layout: Layout

    @classmethod
    def of(cls, settings: Any) -> Topics:
        """The topics of ``settings`` (a :class:`~agents.settings.WorkerSettings`)."""
        prefix = settings.prefix
        inputs = input_topics(prefix, settings.input_clusters)
        kind_of_topic = {t: source_of(k, c) for t, (k, c) in inputs.items()}
        return cls(
            inputs=inputs,
            kind_of_topic=kind_of_topic,
            topic_of_kind={k: t for t, k in kind_of_topic.items()},
            deadletter=topic_name(prefix, "deadletter"),
            layout=Layout(prefix, tuple(settings.actuator_clusters), tuple(settings.input_clusters)),
        )

    def input_topic(self, kind: str, key: str) -> str:
        """The input topic of ``kind`` events of the workload ``key`` (its cluster's own, or the shared one)."""
        layout = self.layout
        return input_topic(layout.prefix, kind, key.split("/", 1)[0], layout.input_clusters)


@dataclass
class Assignment:
    """The partitions this worker owns, and what it knows of them since they were assigned."""

    #: Counts rebalances, so that work begun before one is not applied after it.
    generation: int = 0
    #: The owned partitions (of the input topics).
    partitions: set[int] = field(default_factory=set)
    #: The process-local cache of slots must be loaded from the (recovered) table first.
    need_reload: bool = True
    #: The start offsets of every owned input are known (:mod:`agents.offsets`).
    starts_known: bool = False
    #: Processing time of the last reload.
    reloaded_at: float = 0.0


def die(where: str, exc: BaseException) -> None:
    """Stop the process at once, without committing anything.

    Per-message problems never get here (they are dead-lettered); this is for failures of Kafka
    itself, e.g. outputs the broker would not take.  Letting the exception unwind would end the
    agent and leave a worker that holds its partitions and reads nothing (and with
    ``take_events``, which acknowledges in a ``finally``, it committed the batch and lost its
    decisions); exiting now means everything since the last checkpoint is read again by whoever
    takes over.
    """
    log.critical("tandem worker: fatal error in %s; exiting without commit", where, exc_info=exc)
    logging.shutdown()
    os._exit(70)
