"""The inbox of the worker's merge (:mod:`streams.merge`): one workload's slot as the worker persists
it (core state, the inputs not yet released, the offsets taken), and the release order of its
inputs, ``(ts, type rank, offset)``.  Pure; no Faust.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson

from scaling.events import Event
from scaling.state import WorkloadState

__all__ = ["Entry", "Slot"]

#: An inbox entry: (ts, type rank, offset, raw JSON value, decoded event or None after a reload).
Entry = tuple[float, int, int, Any, Event | None]
_entry_order = itemgetter(0, 1, 2)
_entry_ts = itemgetter(0)


@dataclass(slots=True)
class Slot:
    """One workload as the worker persists it: core state, unreleased inputs, offsets taken."""

    key: str
    partition: int
    state: WorkloadState
    inbox: list[Entry] = field(default_factory=list)
    #: Highest offset taken per source (:func:`source_of`; its topic-partition is the key's partition).
    seen: dict[str, int] = field(default_factory=dict)
    #: The workload's cluster writes watermarks: its events wait for them, after a rebalance too.
    marked: bool = False
    #: ``state.raw``'s values as last serialised, per input type: (that dict, its JSON).
    _raw_json: dict[str, tuple[Any, orjson.Fragment]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def new(cls, key: str, partition: int) -> Slot:
        return cls(key, partition, WorkloadState(key))

    def accept(self, kind: str, offset: int) -> bool:
        """Take ``offset`` of source ``kind`` once: False when it was taken before (a redelivery)."""
        last = self.seen.get(kind)
        if last is not None and offset <= last:
            return False
        self.seen[kind] = offset
        return True

    def ready(self, bound: float) -> list[Entry]:
        """Remove and return, in release order, the inbox entries with ``ts <= bound``."""
        inbox = self.inbox
        if not inbox:
            return inbox
        if len(inbox) > 1:
            inbox.sort(key=_entry_order)
        if inbox[-1][0] <= bound:
            self.inbox = []
            return inbox
        i = bisect_right(inbox, bound, key=_entry_ts)
        out = inbox[:i]
        del inbox[:i]
        return out

    def to_bytes(self) -> bytes:
        """The slot as the ``state`` table stores it (:meth:`from_bytes` reads it back).

        The latest input of each type (``state.raw``: the policy manifest, the workload spec, ...)
        is most of a slot and rarely changes (a policy or a workload event is seldom sent again),
        yet a live worker writes each slot once a scrape.  Its JSON is kept per type, for as long
        as ``state.raw`` holds the same dict (the core stores a new one for every input and never
        changes one in place), and spliced in as an ``orjson.Fragment``: the same bytes, without
        walking the manifest again (docs/performance.md, "The worker, eighth pass").
        """
        state = self.state.to_dict()
        raw = state["raw"]
        if raw:
            cache = self._raw_json
            spliced: dict[str, Any] = {}
            for kind, value in raw.items():
                hit = cache.get(kind)
                if hit is None or hit[0] is not value:
                    # A copy: the bytes orjson returns keep the 4 KB buffer it wrote them in (16 KB
                    # a slot, 320 MB at 20,000 workloads, measured), a copy only what it holds.
                    hit = cache[kind] = (value, orjson.Fragment(bytes(memoryview(orjson.dumps(value)))))
                spliced[kind] = hit[1]
            if len(cache) > len(spliced):
                for kind in [k for k in cache if k not in spliced]:
                    del cache[kind]
            state["raw"] = spliced
        out = {
            "v": 1,
            "partition": self.partition,
            "state": state,
            "inbox": [[e[0], e[1], e[2], e[3]] for e in self.inbox],
            "seen": self.seen,
        }
        if self.marked:
            out["marked"] = True
        return orjson.dumps(out)

    @classmethod
    def from_bytes(cls, data: bytes | str) -> Slot:
        d = orjson.loads(data)
        if d.get("v") != 1:
            raise ValueError(f"unknown slot version {d.get('v')!r}")
        state = WorkloadState.from_dict(d["state"])
        inbox: list[Entry] = [(float(e[0]), int(e[1]), int(e[2]), e[3], None) for e in d.get("inbox") or ()]
        seen = {k: int(v) for k, v in (d.get("seen") or {}).items()}
        return cls(state.key, int(d["partition"]), state, inbox, seen, bool(d.get("marked")))
