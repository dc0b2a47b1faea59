"""What a ``history`` envelope teaches a workload's state (docs/contract.md §3 and §6).

A history envelope carries past ``metric`` and ``workload`` events of one workload (imported from
Prometheus: ``tandem import prometheus --publish``) inside an event whose own ``ts`` is the
present.  The reconcile loop takes it as any event at that ``ts`` (it may close the pending tick,
and opens one at its own), but what it carries is never reconciled: no past tick is decided, and
nothing the ticks read as the present changes (the spec, replicas, the HPA's latest usage, OOM
times, series, what tandem assumes applied).  It only *learns*, as the same samples would have
taught the state had they come live:

* the container samples go to tandem's own VPA histograms through the code live samples take
  (``scaling.own.learn``); samples at or after the first live sample are known already and skipped,
  and so are events no later than what earlier envelopes taught (``learned["through"]``: the same
  history published twice is learned once);
* the replicas become peaks per 15-minute slot, a ring of four weeks (``learned["replicas"]``),
  which a kind that keeps a replica history folds into its memory at its next tick
  (:attr:`PolicyKind.learn_replicas`, Tortoise's weekday-by-hour slots), whether the policy came
  before the history or after it.

Each envelope is said in the audit stream: :func:`learn` returns what it taught (samples, replica
slots, what it skipped as known and why), which the loop writes as a ``dev.tandem.learned.v1``
CloudEvent at the envelope's ``ts`` (``scaling.reconcile``).

Determinism: the envelope is an ordinary event at its ``ts`` for both drivers (the worker's
merge and replay's stable sort place it alike), and all it changes is a function of the state and
of what it carries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from . import own
from .events import HistoryEvent, MetricEvent
from .policies.registry import replica_learner
from .settings import Settings
from .state import WorkloadState

__all__ = ["SLOT", "SLOTS", "learn", "replica_peaks", "teach_policy"]

#: Width of a learned replica slot: every time zone's offset is a multiple of 15 minutes.
SLOT = 900.0
#: Slots kept: four weeks (Tortoise's "same weekday over the last 4 weeks", the longest history a
#: kind keeps); older ones are dropped as newer ones come.
SLOTS = 4 * 7 * 24 * 4
#: The key of a policy memory holding how many envelopes it has taken (:func:`teach_policy`).
_TAUGHT = "learned"


def learn(state: WorkloadState, event: HistoryEvent, settings: Settings) -> dict[str, Any]:
    """Learn the past ``event`` carries; change nothing a tick reads as the present.

    Returns what it taught, the ``data`` of its ``dev.tandem.learned.v1`` audit event
    (docs/contract.md §4): an operator who published a month of history sees that a worker took
    each envelope, how much of it, and what it skipped as known already, and why (nothing silent).
    """
    learned = state.learned
    if not learned:
        # The first envelope: what the VPA holds now came live (none was learned before it).
        first = own.first_live(state)
        if first is not None:
            learned["live_from"] = first
    live_from = learned.get("live_from")
    replicas = learned.get("replicas")
    through = learned.get("through")
    samples = skipped_live = skipped_taught = 0
    slots: set[int] = set()  # the replica slots whose peak this envelope set or raised
    for ev in event.events:
        if through is not None and ev.ts <= through:
            # taught by an earlier envelope (the same history published again)
            if isinstance(ev, MetricEvent):
                skipped_taught += len(ev.samples)
            continue
        if isinstance(ev, MetricEvent):
            if live_from is not None and ev.ts >= live_from:
                skipped_live += len(ev.samples)  # known live: the VPA has it already
            else:
                samples += own.learn(state, ev, settings, live_from)
            continue
        if replicas is None:
            replicas = learned["replicas"] = {"at": ev.ts, "replicas": ev.replicas, "from": _slot(ev.ts), "peaks": []}
        _step(replicas, ev.ts, ev.replicas, slots)
    if replicas is not None:
        _step(replicas, event.until, None, slots)
    if event.events and (through is None or event.events[-1].ts > through):
        learned["through"] = event.events[-1].ts
    n = learned["n"] = int(learned.get("n", 0)) + 1
    oldest = int(replicas["from"]) if replicas is not None else 0
    return {
        "workload": event.workload.as_dict(),
        "from": event.events[0].ts if event.events else None,
        "until": event.until,
        "samples": samples,
        "replica_slots": sum(1 for slot in slots if slot >= oldest),  # a slot the ring kept
        "skipped": {"live": skipped_live, "taught": skipped_taught},
        "live_from": live_from,
        "taught_through": through,
        "envelopes": n,
    }


def _slot(ts: float) -> int:
    return math.floor(ts / SLOT)


def _step(replicas: dict[str, Any], ts: float, now: int | None, changed: set[int]) -> None:
    """The replicas held since ``replicas["at"]`` fill their slots up to ``ts``; from ``ts`` on,
    ``now`` holds (``None``: the end of an envelope's time, whose own slot is filled too).  An
    event older than what is filled already (an envelope of older history after a newer one)
    only raises its own slot.  The slots whose peak this sets or raises go to ``changed``."""
    at = float(replicas["at"])
    if ts < at:
        if now is not None:
            _peak(replicas, _slot(ts), now, changed)
        return
    held = int(replicas["replicas"])
    start = _slot(at)
    # the slots [at, ts) overlaps, or [at, ts] at the end
    end = max(_slot(ts) if now is None else math.ceil(ts / SLOT) - 1, start)
    for slot in range(max(start, end - SLOTS + 1), end + 1):
        _peak(replicas, slot, held, changed)
    replicas["at"] = ts
    if now is not None:
        _peak(replicas, _slot(ts), now, changed)
        replicas["replicas"] = now


def _peak(replicas: dict[str, Any], slot: int, value: int, changed: set[int]) -> None:
    """Raise ``slot``'s peak to ``value``, in the ring of the last :data:`SLOTS` slots (``slot``
    to ``changed`` if it rose)."""
    first: int = replicas["from"]
    peaks: list[int] = replicas["peaks"]
    if slot < first:
        newest = first + len(peaks) - 1 if peaks else slot
        if newest - slot >= SLOTS:
            return  # older than four weeks before the newest slot
        peaks[:0] = [-1] * (first - slot)
        replicas["from"] = first = slot
    i = slot - first
    if i >= len(peaks):
        peaks.extend([-1] * (i + 1 - len(peaks)))
    if value > peaks[i]:
        peaks[i] = value
        changed.add(slot)
    excess = len(peaks) - SLOTS
    if excess > 0:
        del peaks[:excess]
        replicas["from"] = first + excess


def replica_peaks(learned: Mapping[str, Any]) -> list[tuple[float, int]]:
    """The learned replica peaks as ``(slot start, peak)``, oldest first, slots without any left out."""
    replicas = learned.get("replicas")
    if not replicas:
        return []
    first = int(replicas["from"])
    return [((first + i) * SLOT, int(p)) for i, p in enumerate(replicas["peaks"]) if p >= 0]


def teach_policy(state: WorkloadState, kind: str, memory: dict[str, Any], settings: Mapping[str, Any]) -> None:
    """Before a policy decides: fold the learned replicas into its memory if its kind keeps a
    replica history and has not taken the latest envelope yet (its memory says how many it took;
    a policy of another kind starts from a clean memory, so it takes them too)."""
    learned = state.learned
    if "replicas" not in learned or memory.get(_TAUGHT) == learned["n"]:
        return
    hook = replica_learner(kind)
    if hook is None:
        return
    hook(memory, replica_peaks(learned), settings)
    memory[_TAUGHT] = learned["n"]
