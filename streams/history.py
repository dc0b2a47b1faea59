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

__all__ = ["CARRIED", "MAX_BYTES", "envelopes"]

#: The most an envelope takes, encoded: half of Kafka's default largest message
#: (``message.max.bytes``, 1 MiB), leaving room for the record's headers and a signature.
MAX_BYTES = 512 * 1024
#: The past events an envelope carries; the others (``hpa``, ``vpa``: a cluster's recommendations
#: of the past) teach nothing the present does not say again.
CARRIED = ("metric", "workload")


def envelopes(
    events: Iterable[Mapping[str, Any]], ts: float, end: float, max_bytes: int = MAX_BYTES
) -> list[dict[str, Any]]:
    """``events`` (contract events in event-time order) as envelopes stamped ``ts``: per workload
    (by key), its carried events in their order, cut so that each envelope encodes to at most
    ``max_bytes`` (an event larger than that alone goes in one of its own).  An envelope's
    ``until`` is its last event's ``ts``, the last one's ``end``: what it says of the replicas holds
    until then, and the next envelope of the workload starts no earlier."""
    by_key: dict[str, list[Mapping[str, Any]]] = {}
    for raw in events:
        if raw["type"] in CARRIED:
            w = raw["workload"]
            by_key.setdefault(f"{w['cluster']}/{w['namespace']}/{w['kind']}/{w['name']}", []).append(raw)
    out: list[dict[str, Any]] = []
    for key in sorted(by_key):
        past = by_key[key]
        workload = dict(past[0]["workload"])
        base = len(encode({"type": HISTORY, "ts": ts, "workload": workload, "until": end, "events": []}))
        chunk: list[Mapping[str, Any]] = []
        size = base
        for raw in past:
            n = len(encode(raw)) + 1  # and its comma
            if chunk and size + n > max_bytes:
                out.append(_envelope(ts, workload, chunk[-1]["ts"], chunk))
                chunk, size = [], base
            chunk.append(raw)
            size += n
        out.append(_envelope(ts, workload, max(end, chunk[-1]["ts"]), chunk))
    return out


def _envelope(ts: float, workload: dict[str, Any], until: float, events: list[Mapping[str, Any]]) -> dict[str, Any]:
    return {"type": HISTORY, "ts": ts, "workload": workload, "until": until, "events": list(events)}
