"""Past events into ``history`` envelopes (docs/contract.md §3), the form history takes into a live pipeline.

``tandem import prometheus --publish`` writes a cluster's history as envelopes, one workload's
past ``metric`` and ``workload`` events in each, stamped with the present: a worker learns from
them (tandem's own VPA histograms, a replica history such as Tortoise's) and decides none of
their ticks, whether or not the cluster's live events reached it first (``scaling.learn``).
Pure: no Kafka, no clock (the caller gives the envelopes' ``ts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scaling.vocabulary import HISTORY
from schemas.codec import encode

__all__ = ["CARRIED", "MAX_BYTES", "Envelopes", "envelopes"]

#: The most an envelope takes, encoded: half of Kafka's default largest message
#: (``message.max.bytes``, 1 MiB), leaving room for the record's headers and a signature.
MAX_BYTES = 512 * 1024
#: The past events an envelope carries; the others (``hpa``, ``vpa``: a cluster's recommendations
#: of the past) teach nothing the present does not say again.
CARRIED = ("metric", "workload")


#: Room kept in every envelope for its ``ts`` and ``until`` as encoded, whatever they are: the
#: longest float JSON writes (``-1.2345678901234567e-300``) has 24 characters.  An envelope is
#: cut before its stamp is known (the present at the moment it is sent, :class:`Envelopes`).
_STAMP_ROOM = 2 * 24


class Envelopes:
    """:func:`envelopes` one event at a time: an envelope is handed out as soon as it is full, so
    that a month of history never needs to be in memory (``tandem import prometheus --publish``
    reads it window by window).  At most one unfinished envelope per workload is held."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        #: workload key -> its workload reference, the events of its open envelope, their size
        self._open: dict[str, tuple[dict[str, Any], list[Mapping[str, Any]], int]] = {}
        self._base: dict[str, int] = {}

    def add(self, raw: Mapping[str, Any]) -> dict[str, Any] | None:
        """Take the next event (in event-time order); the workload's envelope it completed, if any
        (its ``ts`` still ``None``: the sender stamps it)."""
        if raw["type"] not in CARRIED:
            return None
        w = raw["workload"]
        key = f"{w['cluster']}/{w['namespace']}/{w['kind']}/{w['name']}"
        n = len(encode(raw)) + 1  # and its comma
        opened = self._open.get(key)
        if opened is None:
            workload = dict(w)
            base = len(encode({"type": HISTORY, "ts": 0.0, "workload": workload, "until": 0.0, "events": []}))
            self._base[key] = base + _STAMP_ROOM
            self._open[key] = (workload, [raw], self._base[key] + n)
            return None
        workload, chunk, size = opened
        if size + n > self.max_bytes:
            # Cut where the time moves on: a worker learns an envelope's events up to its last
            # ``ts`` and skips those no later than that in the next one (``scaling.learn``), so the
            # events of one ``ts`` must share an envelope.  Those at this event's ``ts`` move on
            # with it, unless they are all the envelope holds (then it goes as it is).
            cut = len(chunk)
            while cut and chunk[cut - 1]["ts"] == raw["ts"]:
                cut -= 1
            if cut:
                moved = chunk[cut:]
                carried = sum(len(encode(e)) + 1 for e in moved)
                self._open[key] = (workload, [*moved, raw], self._base[key] + carried + n)
                return _envelope(None, workload, chunk[cut - 1]["ts"], chunk[:cut])
            self._open[key] = (workload, [raw], self._base[key] + n)
            return _envelope(None, workload, chunk[-1]["ts"], chunk)
        chunk.append(raw)
        self._open[key] = (workload, chunk, size + n)
        return None

    def finish(self, end: float) -> list[dict[str, Any]]:
        """Every workload's last envelope, by workload key: its ``until`` is ``end`` (what it says of
        the replicas holds until then), or its last event's ``ts`` if that is later."""
        out = [
            _envelope(None, workload, max(end, chunk[-1]["ts"]), chunk)
            for _, (workload, chunk, _) in sorted(self._open.items())
        ]
        self._open.clear()
        return out


def envelopes(
    events: Iterable[Mapping[str, Any]], ts: float, end: float, max_bytes: int = MAX_BYTES
) -> list[dict[str, Any]]:
    """``events`` (contract events in event-time order) as envelopes stamped ``ts``: per workload
    (by key), its carried events in their order, cut so that each envelope encodes to at most
    ``max_bytes`` (an event larger than that alone goes in one of its own).  An envelope's
    ``until`` is its last event's ``ts``, the last one's ``end``: what it says of the replicas holds
    until then, and the next envelope of the workload starts no earlier.  The same envelopes as
    :class:`Envelopes` hands out, all at once."""
    builder = Envelopes(max_bytes)
    full = [envelope for raw in events if (envelope := builder.add(raw)) is not None]
    out = sorted([*full, *builder.finish(end)], key=_key)  # stable: a workload's in their order
    for envelope in out:
        envelope["ts"] = ts
    return out


def _key(envelope: Mapping[str, Any]) -> str:
    w = envelope["workload"]
    return f"{w['cluster']}/{w['namespace']}/{w['kind']}/{w['name']}"


def _envelope(
    ts: float | None, workload: dict[str, Any], until: float, events: list[Mapping[str, Any]]
) -> dict[str, Any]:
    return {"type": HISTORY, "ts": ts, "workload": workload, "until": until, "events": list(events)}
