"""The worker's timestamp-aligned merge (streams/merge.py), without Kafka.

The strongest check simulates what Kafka does to a published stream: each event type on its own
topic, partitioned by workload key, delivered to the worker as an arbitrary interleaving of the
topic-partitions in arbitrary batches, with crashes that lose the process but keep the persisted
slots (which may be ahead of the committed offsets).  Whatever the interleaving, the decisions must
be those of ``tandem replay`` (scaling.engine.Engine): byte-identical and in the same order per
workload without crashes, the same set of ids with them; and the same again when backpressure
pauses topic-partitions that run ahead in event time.
"""

from __future__ import annotations

import gzip
import math
import random
import re
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from scaling.engine import Engine, policy_event
from scaling.errors import InvalidEvent
from scaling.events import PolicyEvent, decode_event
from scaling.reconcile import flush
from scaling.settings import Settings
from scaling.vocabulary import LATE
from schemas.codec import encode
from streams.inputs import load_manifests
from streams.merge import (
    INF,
    KINDS,
    LIVE_LAG,
    Merger,
    Output,
    PartitionClock,
    Slot,
    SourceClock,
    check_routing,
    decode_watermark,
    partition_key,
    policy_key,
    source_of,
    tombstone,
)
from streams.publish import messages, with_watermarks
from streams.topics import input_topic, input_topics
from tests.generated import POLICY, generated_stream

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# ------------------------------------------------------------------------------------- clocks


def test_unknown_source_holds_everything_back() -> None:
    clock = PartitionClock(0.0)
    clock.observe("metric", 0, 100.0, 0.0)
    assert clock.bound({}) == -INF  # nothing known of the other four topics


def test_bound_is_min_last_ts_over_topics_not_caught_up() -> None:
    clock = PartitionClock(0.0)
    for kind in KINDS:
        clock.set_start(kind, 0)
    clock.observe("metric", 4, 100.0, 0.0)
    clock.observe("hpa", 1, 90.0, 0.0)
    hw = {"metric": 10, "hpa": 10, "workload": 0, "vpa": 0, "policy": 0}  # three topics are empty
    assert clock.bound(hw) == 90.0
    hw["hpa"] = 2  # hpa read to its end
    assert clock.bound(hw) == 100.0
    hw["metric"] = 5
    assert clock.bound(hw) == INF


def test_caught_up_uses_start_offset_until_a_message_is_read() -> None:
    src = SourceClock()
    assert not src.caught_up(0)  # start unknown: not caught up
    src.start_offset = 7
    assert src.caught_up(7) and not src.caught_up(8)
    assert not src.caught_up(None)  # highwater unknown
    src.next_offset = 8
    assert src.caught_up(8)


def test_watermark_never_goes_back() -> None:
    clock = PartitionClock(0.0)
    clock.observe("metric", 0, 100.0)
    clock.observe("metric", 1, 50.0)  # an out-of-order producer: it becomes a late event
    assert clock.sources["metric"].last_ts == 100.0
    assert clock.sources["metric"].next_offset == 2


def test_idle_needs_caught_up_and_quiet() -> None:
    clock = PartitionClock(0.0)
    for kind in KINDS:
        clock.set_start(kind, 0)
    hw = dict.fromkeys(KINDS, 0)
    assert not clock.idle(1.0, hw, 2.0)
    assert clock.idle(2.0, hw, 2.0)
    clock.observe("metric", 0, 5.0, 3.0)
    assert not clock.idle(4.0, hw | {"metric": 1}, 2.0)
    assert clock.idle(5.0, hw | {"metric": 1}, 2.0)
    assert not clock.idle(5.0, hw | {"metric": 2}, 2.0)  # more to read


# ------------------------------------------------------------------------------------- slots


def _ev(ts: float, type_: str = "hpa", name: str = "web", **fields: Any) -> dict[str, Any]:
    body = {"hpa": {"desired_replicas": 2}, "metric": {"samples": []}}.get(type_, {})
    return {
        "type": type_,
        "ts": ts,
        "workload": {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": name},
        **body,
        **fields,
    }


def test_slot_releases_in_ts_type_offset_order_up_to_bound() -> None:
    slot = Slot.new("c1/shop/Deployment/web", 0)
    slot.inbox = [
        (20.0, 4, 3, {}, None),
        (10.0, 4, 2, {}, None),
        (10.0, 2, 9, {}, None),
        (30.0, 2, 10, {}, None),
        (10.0, 4, 1, {}, None),
    ]
    assert [(e[0], e[1], e[2]) for e in slot.ready(20.0)] == [(10.0, 2, 9), (10.0, 4, 1), (10.0, 4, 2), (20.0, 4, 3)]
    assert [(e[0], e[2]) for e in slot.inbox] == [(30.0, 10)]
    assert slot.ready(29.9) == []
    assert [e[2] for e in slot.ready(INF)] == [10]


def test_slot_takes_each_offset_once() -> None:
    slot = Slot.new("k", 0)
    assert slot.accept("hpa", 5)
    assert not slot.accept("hpa", 5)
    assert not slot.accept("hpa", 3)
    assert slot.accept("metric", 3)
    assert slot.accept("hpa", 6)


def test_slot_round_trips_through_bytes_with_its_inbox() -> None:
    settings = Settings()
    merger = Merger(settings)
    for kind in KINDS:
        merger.clock(0, 0.0).set_start(kind, 0)
    raw = _ev(10.0, "hpa")
    merger.offer(0, "hpa", 0, raw, decode_event(raw), 0.0)
    slot = merger.slots["c1/shop/Deployment/web"]
    again = Slot.from_bytes(slot.to_bytes())
    assert again.key == slot.key and again.partition == 0 and again.seen == {"hpa": 0}
    assert [(e[0], e[1], e[2], e[3], e[4]) for e in again.inbox] == [(10.0, 1 + 1, 0, raw, None)]
    assert again.to_bytes() == slot.to_bytes()


# ------------------------------------------------------------------------------------- routing


def test_check_routing_rejects_wrong_topic_and_wrong_key() -> None:
    event = decode_event(_ev(1.0, "hpa"))
    check_routing("hpa", b"c1/shop/Deployment/web", event)
    with pytest.raises(InvalidEvent, match="field 'type': a 'hpa' event on the topic of 'metric' events"):
        check_routing("metric", b"c1/shop/Deployment/web", event)
    with pytest.raises(InvalidEvent, match="field 'key': message key 'x' is not"):
        check_routing("hpa", b"x", event)
    with pytest.raises(InvalidEvent, match="no key"):
        check_routing("hpa", None, event)


def test_tombstone_is_a_policy_deletion() -> None:
    raw = tombstone(b"c1/shop/Deployment/web", 12.5)
    event = decode_event(raw)
    assert event.type == "policy" and event.manifest is None and event.ts == 12.5
    with pytest.raises(InvalidEvent, match="field 'workload'"):
        tombstone(b"nonsense", 1.0)


def test_merger_refuses_a_workload_on_two_partitions() -> None:
    merger = Merger(Settings())
    raw = _ev(1.0, "hpa")
    merger.offer(0, "hpa", 0, raw, decode_event(raw), 0.0)
    with pytest.raises(InvalidEvent, match="lives on partition 0 but arrived on partition 1"):
        merger.offer(1, "metric", 0, _ev(1.0, "metric"), decode_event(_ev(1.0, "metric")), 0.0)


# ------------------------------------------------------------------------------------- equivalence


def small_stream(names: Iterable[str] = ("web", "api", "db"), n: int = 60) -> tuple[list[dict], list[dict]]:
    """A few workloads whose hpa/vpa/metric inputs change over time, and their policies."""
    return generated_stream(list(names), n)


def _replay(events: list[dict], policies: list[dict]) -> dict[str, list[bytes]]:
    engine = Engine(Settings())
    for p in policies:
        engine.add_policy(p)
    ordered = sorted(events, key=lambda e: e["ts"])
    by_key: dict[str, list[bytes]] = defaultdict(list)
    for raw in ordered:
        for kind, ev in engine.process(raw):
            if kind == "audit":
                by_key[ev["subject"]].append(encode(ev))
    for kind, ev in engine.flush():
        if kind == "audit":
            by_key[ev["subject"]].append(encode(ev))
    return dict(by_key)


def _partition_of(key: str, n: int) -> int:
    return zlib.crc32(key.encode()) % n


def _topic_partitions(events: list[dict], policies: list[dict], n: int) -> dict[tuple[str, int], list[dict]]:
    """What ``tandem publish`` writes: policies first at the stream's first ts, then by ts."""
    first = min(e["ts"] for e in events)
    ordered = [policy_event(p, "default", first) for p in policies] + sorted(events, key=lambda e: e["ts"])
    tps: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for raw in ordered:
        key = "/".join(raw["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        tps[(raw["type"], _partition_of(key, n))].append(raw)
    return tps


def _run_worker_simulation(
    tps: Mapping[tuple[str, int], list[dict]],
    n: int,
    rng: random.Random,
    *,
    crashes: int = 0,
    high: int | None = None,
    stats: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Deliver the topic-partitions in random interleavings and batches through a Merger.

    A crash loses the Merger; the persisted slots (saved after every batch, like the table) are
    reloaded and delivery resumes from the committed offsets, which lag the slots by a random
    number of batches: the redelivered messages must be recognised as already taken.

    With ``high``, the merger's backpressure pauses topic-partitions; pausing also skips a few
    in-flight messages (what Faust does to records it already fetched), and resuming seeks back to
    the merger's position, as the worker does.
    """
    settings = Settings()
    stats = stats if stats is not None else {}
    throttle = high is not None
    highwater = {tp: len(msgs) for tp, msgs in tps.items()}
    committed: dict[tuple[str, int], int] = defaultdict(int)
    persisted: dict[str, bytes] = {}
    emitted: list[dict[str, Any]] = []
    now = 0.0
    crash_points = sorted(rng.sample(range(1, 40), crashes)) if crashes else []

    def hws(p: int) -> dict[str, int]:
        return {kind: highwater.get((kind, p), 0) for kind in KINDS}

    def start() -> tuple[Merger, dict[tuple[str, int], int]]:
        merger = Merger(settings, high=high or 1000, low=max(1, (high or 1000) // 4))
        for data in persisted.values():
            merger.load(Slot.from_bytes(data))
        for p in range(n):
            for kind in KINDS:
                merger.clock(p, now).set_start(kind, committed[(kind, p)])
        return merger, dict(committed)

    merger, position = start()
    batches = 0
    history: list[dict[tuple[str, int], int]] = []
    while True:
        # one batch: a random number of messages, each from a random topic-partition with data left
        left = [tp for tp in tps if position.get(tp, 0) < highwater[tp]]
        size = rng.randint(1, 40)
        touched = set()
        for _ in range(size):
            left = [
                tp for tp in left if position.get(tp, 0) < highwater[tp] and tp[0] not in merger.paused.get(tp[1], ())
            ]
            if not left:
                break
            tp = rng.choice(left)
            offset = position.get(tp, 0)
            position[tp] = offset + 1
            raw = tps[tp][offset]
            event = decode_event(raw)
            now += 0.001
            merger.offer(tp[1], tp[0], offset, raw, event, now)
            touched.add(tp[1])
        for p in sorted(touched):
            out = merger.release(p, hws(p))
            assert not out.rejected
            emitted.extend(ev for _, kind, ev in out.emitted if kind == "audit")
            stats["max_buffered"] = max(stats.get("max_buffered", 0), merger.buffered(p))
        if throttle:
            for p in range(n):
                pause, resume = merger.throttle(p, hws(p))
                for kind in pause:
                    stats["paused"] = stats.get("paused", 0) + 1
                    tp = (kind, p)  # records already fetched for it are dropped by Faust
                    position[tp] = min(highwater.get(tp, 0), position.get(tp, 0) + rng.randint(0, 3))
                for kind in resume:
                    pos = merger.clocks[p].sources[kind].position
                    if pos is not None:
                        position[(kind, p)] = pos  # seek back
        # persist the touched slots (the table), then "ack": offsets become committable later
        before = dict(persisted)
        for key in merger.take_writes(everything=False):
            persisted[key] = merger.slots[key].to_bytes()
        # what the consumer may commit: the messages the merger has seen (acked), not those the
        # fetcher skipped while pausing
        acked = {}
        for tp in tps:
            pos = merger.clocks[tp[1]].sources[tp[0]].position
            acked[tp] = committed[tp] if pos is None else pos
        history.append(acked)
        batches += 1
        if crash_points and batches == crash_points[0]:
            crash_points.pop(0)
            # half the crashes hit after the outputs were published but before the table write
            lost_write = rng.random() < 0.5
            if lost_write:
                persisted = before
            # commits lag: the last commit happened a few batches ago (never past the table)
            low = 1 if lost_write else 0
            lag = rng.randint(low, max(low, min(3, len(history) - 1)))
            committed.update(history[-1 - lag] if lag < len(history) else {})
            merger, position = start()
            history = [dict(position)]
            continue
        if all(position.get(tp, 0) >= highwater[tp] for tp in tps):
            break
    now += 10.0
    for p in range(n):
        out = merger.flush_idle(p, hws(p), now, 2.0)
        emitted.extend(ev for _, kind, ev in out.emitted if kind == "audit")
    return emitted


def _by_key(events: list[dict[str, Any]]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = defaultdict(list)
    for ev in events:
        out[ev["subject"]].append(encode(ev))
    return dict(out)


@pytest.mark.parametrize("seed", range(8))
def test_any_interleaving_gives_the_replay_output_byte_for_byte(seed: int) -> None:
    events, policies = small_stream()
    expected = _replay(events, policies)
    assert sum(map(len, expected.values())) > 20
    got = _by_key(_run_worker_simulation(_topic_partitions(events, policies, 4), 4, random.Random(seed)))
    assert got == expected


@pytest.mark.parametrize("seed", range(8))
def test_crashes_with_lagging_commits_give_the_same_decisions_after_dedup(seed: int) -> None:
    events, policies = small_stream(("web", "api", "db", "cache", "queue"))
    expected = _replay(events, policies)
    rng = random.Random(1000 + seed)
    emitted = _run_worker_simulation(_topic_partitions(events, policies, 3), 3, rng, crashes=3)
    first: dict[str, dict[str, Any]] = {}
    for ev in emitted:
        first.setdefault(ev["id"], ev)
    expected_ids = {orjson.loads(b)["id"] for lines in expected.values() for b in lines}
    assert set(first) == expected_ids
    # and, deduplicated, each workload's decisions come in the replay's order
    dedup = _by_key(list(first.values()))
    assert dedup == expected


@pytest.mark.parametrize("seed", range(6))
def test_backpressure_bounds_the_inboxes_and_changes_nothing(seed: int) -> None:
    events, policies = small_stream(("web", "api", "db", "cache"), n=120)
    expected = _replay(events, policies)
    stats: dict[str, int] = {}
    rng = random.Random(2000 + seed)
    emitted = _run_worker_simulation(_topic_partitions(events, policies, 2), 2, rng, crashes=2, high=30, stats=stats)
    assert stats["paused"] > 0
    assert stats["max_buffered"] < 30 + 2 * 40  # the threshold plus what two batches bring
    first: dict[str, dict[str, Any]] = {}
    for ev in emitted:
        first.setdefault(ev["id"], ev)
    assert _by_key(list(first.values())) == expected


def test_the_crash_simulation_does_duplicate_decisions() -> None:
    """Guard for the test above: crashes between publishing and the table write must repeat outputs."""
    events, policies = small_stream(("web", "api", "db", "cache", "queue"))
    duplicates = 0
    for seed in range(8):
        emitted = _run_worker_simulation(
            _topic_partitions(events, policies, 3), 3, random.Random(1000 + seed), crashes=3
        )
        duplicates += len(emitted) - len({ev["id"] for ev in emitted})
    assert duplicates > 0


@pytest.mark.skipif(not (EXAMPLES / "stream.jsonl.gz").exists(), reason="no bundled example")
def test_bundled_example_through_the_merger_equals_replay() -> None:
    with gzip.open(EXAMPLES / "stream.jsonl.gz", "rb") as fh:
        events = [orjson.loads(line) for line in fh if line.strip()]
    events = [e for e in events if e["ts"] < events[0]["ts"] + 12 * 3600]  # half a day keeps it quick
    policies = load_manifests(str(EXAMPLES / "policies.yaml"))
    expected = _replay(events, policies)
    got = _by_key(_run_worker_simulation(_topic_partitions(events, policies, 2), 2, random.Random(7)))
    assert got == expected


def _one_workload_offered() -> tuple[list[dict], list[dict], Merger, dict[str, int]]:
    """One workload's short stream offered to a merger on one partition, every input read to its end."""
    events, policies = small_stream(("web",), n=7)
    tps = _topic_partitions(events, policies, 1)
    merger = Merger(Settings())
    for kind in KINDS:
        merger.clock(0, 0.0).set_start(kind, 0)
    hw = {kind: len(tps.get((kind, 0), [])) for kind in KINDS}
    flat = sorted(((m["ts"], KINDS.index(k), i, k, m) for (k, _), ms in tps.items() for i, m in enumerate(ms)))
    for _, _, offset, kind, raw in flat:
        merger.offer(0, kind, offset, raw, decode_event(raw), 1.0)
    return events, policies, merger, hw


def test_idle_flush_runs_pending_ticks_only_when_caught_up_and_quiet() -> None:
    events, policies, merger, hw = _one_workload_offered()
    released = merger.release(0, hw)
    assert not released.rejected
    assert merger.slots["c1/shop/Deployment/web"].state.pending_tick is not None
    assert not merger.flush_idle(0, hw, 2.5, 2.0)  # quiet for 1.5 s only
    assert not merger.flush_idle(0, hw | {"metric": hw["metric"] + 1}, 9.0, 2.0)  # not caught up
    flushed = merger.flush_idle(0, hw, 3.0, 2.0)
    assert merger.slots["c1/shop/Deployment/web"].state.pending_tick is None
    assert not merger.flush_idle(0, hw, 30.0, 2.0)  # nothing left to flush
    got = [encode(ev) for _, kind, ev in released.emitted + flushed.emitted if kind == "audit"]
    assert got == _replay(events, policies)["c1/shop/Deployment/web"]
    assert math.isinf(merger.clocks[0].bound(hw))


def test_a_slot_changed_only_by_the_idle_flush_is_written_with_its_next_input() -> None:
    events, _, merger, hw = _one_workload_offered()
    key = "c1/shop/Deployment/web"
    merger.release(0, hw)
    assert merger.take_writes(everything=False) == {key}  # its inputs: written before they are acknowledged
    merger.flush_idle(0, hw, 3.0, 2.0)
    assert (merger.decided, merger.decided_since) == ({key}, 3.0)
    assert merger.take_writes(everything=False) == set()  # nothing to acknowledge: the decision waits
    last = max((e for e in events if e["type"] == "metric"), key=lambda e: e["ts"])
    later = {**last, "ts": last["ts"] + 15.0}
    assert merger.offer(0, "metric", hw["metric"], later, decode_event(later), 4.0)
    assert merger.take_writes(everything=False) == {key}  # once, with its next input
    assert (merger.decided, merger.decided_since) == (set(), None)


def test_everything_writes_the_slots_only_a_flush_changed() -> None:
    _, _, merger, hw = _one_workload_offered()
    merger.release(0, hw)
    merger.take_writes(everything=False)
    merger.flush_idle(0, hw, 3.0, 2.0)
    assert merger.take_writes(everything=True) == {"c1/shop/Deployment/web"}  # a rebalance, a stop, or aged
    assert (merger.decided, merger.decided_since) == (set(), None)


def test_a_crash_before_a_flushed_slot_is_written_decides_the_same_tick_again_with_the_same_ids() -> None:
    """Why a decided slot may wait: the state written with its inputs makes the same decision again."""
    _, _, merger, hw = _one_workload_offered()
    key = "c1/shop/Deployment/web"
    merger.release(0, hw)
    written = merger.slots[key].to_bytes()  # the checkpoint that acknowledged the inputs
    flushed = merger.flush_idle(0, hw, 3.0, 2.0)
    assert flushed.emitted
    # the worker dies here; its successor loads the written slot and flushes the pending tick
    again = flush(Slot.from_bytes(written).state, Settings())
    assert [encode(ev) for _, ev in again] == [encode(ev) for _, _, ev in flushed.emitted]
    assert [kind for kind, _ in again] == [kind for _, kind, _ in flushed.emitted]


def test_released_once_every_offered_event_has_left_the_inboxes_whatever_ticks_are_pending() -> None:
    """The worker checkpoints when ``released()``: a scrape's events written once, not per batch."""
    _events, _policies, merger, hw = _one_workload_offered()
    assert not merger.released()  # offered, held for the bound
    merger.release(0, {})  # no input known to be caught up: only what is older than every input's last
    assert not merger.released()
    merger.release(0, hw)
    assert merger.released()
    assert merger.slots["c1/shop/Deployment/web"].state.pending_tick is not None  # the tick waits; no matter


# ------------------------------------------------------------------- live arrival, reordered landing


def _run_live_simulation(
    events: list[dict], policies: list[dict], n: int, rng: random.Random, *, grace: float, skew: float
) -> list[dict[str, Any]]:
    """A producer writing *while* the worker reads (issue #18, the takeover scenario's known limit).

    The producer sends the stream in replay order, one record every millisecond, each to its
    topic-partition; a record lands on the broker up to ``skew`` seconds after it was sent (the
    batches of different topics leave separately), in order within its topic-partition.  The
    consumer fetches every 20 ms what has landed on a random subset of the topic-partitions and
    learns their high watermarks only from those fetches, so an idle topic looks caught up while
    the records of the same instant are still on their way.  The worker's timer releases and
    flushes with processing time ``now``, as agents/pipeline.py does.
    """
    settings = Settings()
    first = min(e["ts"] for e in events)
    ordered = [policy_event(p, "default", first) for p in policies] + sorted(events, key=lambda e: e["ts"])
    landing: dict[tuple[str, int], list[tuple[float, dict]]] = defaultdict(list)
    for i, raw in enumerate(ordered):
        key = "/".join(raw["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        tp = (raw["type"], _partition_of(key, n))
        lands = i * 0.001 + rng.uniform(0, skew)
        queue = landing[tp]
        queue.append((max(lands, queue[-1][0]) if queue else lands, raw))
    tps = list(landing)
    merger = Merger(settings, grace=grace)
    for p in range(n):
        for kind in KINDS:
            merger.clock(p, 0.0).set_start(kind, 0)
    position: dict[tuple[str, int], int] = defaultdict(int)
    known_hw: dict[tuple[str, int], int] = defaultdict(int)  # as of the consumer's last fetch of it
    emitted: list[dict[str, Any]] = []
    end = len(ordered) * 0.001 + skew + 10.0
    now = 0.0
    while now < end:
        now += 0.02
        for tp in rng.sample(tps, k=max(1, len(tps) // 2)):
            landed = landing[tp]
            hw = known_hw[tp]
            while hw < len(landed) and landed[hw][0] <= now:
                hw += 1
            known_hw[tp] = hw
            for offset in range(position[tp], hw):
                raw = landed[offset][1]
                merger.offer(tp[1], tp[0], offset, raw, decode_event(raw), now)
            position[tp] = hw
        for p in range(n):
            hws = {kind: known_hw[(kind, p)] for kind in KINDS}
            out = merger.release(p, hws, now)
            out.extend(merger.flush_idle(p, hws, now, 1.0))
            assert not out.rejected
            emitted.extend(ev for _, kind, ev in out.emitted if kind == "audit")
    assert all(position[tp] == len(landing[tp]) for tp in tps)
    return emitted


@pytest.mark.parametrize("seed", range(4))
def test_records_landing_out_of_order_across_topics_wait_out_the_grace(seed: int) -> None:
    """With a grace longer than the producer's cross-topic skew (plus a fetch), a live stream gives
    replay's decisions byte for byte."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    got = _run_live_simulation(events, policies, 2, random.Random(seed), grace=0.5, skew=0.2)
    assert _by_key(got) == expected


def test_without_the_grace_a_tick_is_decided_before_its_late_records_land() -> None:
    """The same simulation without the grace shows the defect it prevents (so the test above can
    fail): here every seed of 20 differs from replay without it, none with it."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    differ = sum(
        _by_key(_run_live_simulation(events, policies, 2, random.Random(seed), grace=0.0, skew=0.2)) != expected
        for seed in range(4)
    )
    assert differ >= 1


def test_the_grace_holds_a_caught_up_topic_at_its_last_ts_then_lets_go() -> None:
    clock = PartitionClock(0.0, grace=2.0)
    for kind in KINDS:
        clock.set_start(kind, 0)
    clock.observe("workload", 0, 100.0, 0.0)
    clock.observe("metric", 0, 110.0, 10.0)  # arrives at 10 s; every topic is read to its end
    hw = {"metric": 1, "workload": 1, "hpa": 0, "vpa": 0, "policy": 0}
    assert clock.bound(hw, 10.5) == 100.0  # workload (and the empty topics) may still get records < 110
    assert clock.bound(hw) == INF  # the structural bound, which backpressure uses, ignores the grace
    assert not clock.idle(11.5, hw, 1.0)  # idle waits for the grace too
    assert clock.bound(hw, 12.0) == INF  # 2 s later, whatever was written before it has landed
    assert clock.idle(12.0, hw, 1.0)
    clock.observe("metric", 1, 125.0, 20.0)
    clock.observe("metric", 2, 140.0, 21.5)
    assert clock.bound(hw | {"metric": 3}, 22.0) == 125.0  # settled: what arrived 2 s ago or earlier


# ------------------------------------------------------------ live input: the idle flush's watermark


def _run_live_clock_simulation(events: list[dict], policies: list[dict], *, gate: bool) -> list[dict[str, Any]]:
    """A live collector: every record lands 50 ms after its own ``ts`` (one clock for both sides).

    ``generated_stream`` scrapes every 5 s and the sync period is 15 s, so each tick's window is
    quiet for 5 s between its scrapes, longer than the 2 s idle flush: a flush driven only by
    processing time decides a tick from the first third of its window.  The worker's timer runs
    every 0.25 s, as agents/pipeline.py's does, and passes the wall clock when ``gate``.
    """
    settings = Settings()
    first = min(e["ts"] for e in events)
    ordered = [policy_event(p, "default", first) for p in policies] + sorted(events, key=lambda e: e["ts"])
    landing: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for raw in ordered:
        landing[(raw["type"], 0)].append(raw)
    merger = Merger(settings)
    for kind in KINDS:
        merger.clock(0, first).set_start(kind, 0)
    position: dict[tuple[str, int], int] = defaultdict(int)
    emitted: list[dict[str, Any]] = []
    now = first
    end = max(e["ts"] for e in events) + 10.0
    while now < end:
        now += 0.25
        for tp, landed in landing.items():
            while position[tp] < len(landed) and landed[position[tp]]["ts"] + 0.05 <= now:
                raw = landed[position[tp]]
                merger.offer(0, tp[0], position[tp], raw, decode_event(raw), now)
                position[tp] += 1
        hws = {kind: position[(kind, 0)] for kind in KINDS}
        out = merger.release(0, hws, now)
        out.extend(merger.flush_idle(0, hws, now, 2.0, now if gate else None))
        assert not out.rejected
        emitted.extend(ev for _, kind, ev in out.emitted if kind == "audit")
    return emitted


def test_live_ticks_wait_for_the_wall_clock_to_pass_their_window() -> None:
    """A live stream quiet for 5 s inside each 15 s tick gives replay's decisions byte for byte,
    because the idle flush of tick T waits for the wall clock to pass T + the idle time."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    assert _by_key(_run_live_clock_simulation(events, policies, gate=True)) == expected


def test_without_the_watermark_a_quiet_spell_inside_a_window_decides_the_tick_early() -> None:
    """Guard for the test above: flushing on processing time alone differs from replay here."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    assert _by_key(_run_live_clock_simulation(events, policies, gate=False)) != expected


def test_a_pending_tick_before_its_watermark_stays_pending() -> None:
    _, _, merger, hw = _one_workload_offered()
    merger.release(0, hw)
    state = merger.slots["c1/shop/Deployment/web"].state
    tick = state.pending_tick
    assert tick is not None
    assert not merger.flush_idle(0, hw, 3.0, 2.0, wall=tick + 1.9)  # inside the allowed lateness
    assert state.pending_tick == tick and merger.has_pending(0)
    assert merger.flush_idle(0, hw, 3.5, 2.0, wall=tick + 2.0)
    assert state.pending_tick is None and not merger.has_pending(0)


# ------------------------------------------------------- producers' watermarks: a starved producer


def _run_marked_simulation(
    events: list[dict],
    policies: list[dict],
    n: int,
    rng: random.Random,
    *,
    every: int,
    skew: float,
    grace: float,
    own: tuple[str, ...] = (),
) -> tuple[list[dict[str, Any]], int]:
    """``tandem publish``'s records (with a round of watermarks every ``every`` messages, none for
    0) landing while the worker reads, each topic-partition up to ``skew`` seconds late: a
    producer starved of CPU between the batches of different topics, for longer than any grace.
    The worker's timer releases and flushes as agents/pipeline.py does, the idle flush without the
    wall-clock gate (its worst case).  ``own``: the clusters with input topics of their own
    (``--input-clusters``).  Returns the audit and the number of late inputs.
    """
    settings = Settings()
    first = min(e["ts"] for e in events)
    ordered = sorted(events, key=lambda e: e["ts"])
    sorted_events = [(raw["ts"], i, ("", i, raw), decode_event(raw)) for i, raw in enumerate(ordered)]
    plan = messages("t.", [policy_event(p, "default", first) for p in policies], sorted_events, first, own)
    kind_of = {t: source_of(k, c) for t, (k, c) in input_topics("t.", own).items()}
    sources = list(kind_of.values())
    records = (
        with_watermarks(
            plan,
            dict.fromkeys(kind_of, n),
            settings.sync_period,
            every,
            lambda c: [input_topic("t.", k, c, own) for k in KINDS],
        )
        if every
        else [(t, k, v, ms, None) for t, k, v, ms in plan.items]
    )
    landing: dict[tuple[str, int], list[tuple[float, bytes, Any]]] = defaultdict(list)
    for i, (topic, key, value, _ms, partition) in enumerate(records):
        tp = (kind_of[topic], _partition_of(partition_key(key).decode(), n) if partition is None else partition)
        lands = i * 0.001 + rng.uniform(0, skew)
        queue = landing[tp]
        queue.append((max(lands, queue[-1][0]) if queue else lands, key, orjson.loads(value)))
    tps = list(landing)
    merger = Merger(settings, grace=grace, clusters=own)
    for p in range(n):
        for kind in sources:
            merger.clock(p, 0.0).set_start(kind, 0)
    position: dict[tuple[str, int], int] = defaultdict(int)
    known_hw: dict[tuple[str, int], int] = defaultdict(int)
    emitted: list[dict[str, Any]] = []
    late = 0
    end = len(records) * 0.001 + skew + 10.0
    now = 0.0
    while now < end:
        now += 0.02
        for tp in rng.sample(tps, k=max(1, len(tps) // 2)):
            landed = landing[tp]
            hw = known_hw[tp]
            while hw < len(landed) and landed[hw][0] <= now:
                hw += 1
            known_hw[tp] = hw
            for offset in range(position[tp], hw):
                _, key, raw = landed[offset]
                if raw.get("type") == "watermark":
                    cluster, ts = decode_watermark(key, raw)
                    merger.mark(tp[1], tp[0], offset, cluster, ts, now)
                else:
                    merger.offer(tp[1], tp[0], offset, raw, decode_event(raw), now)
            position[tp] = hw
        for p in range(n):
            hws = {kind: known_hw[(kind, p)] for kind in sources}
            out = merger.release(p, hws, now)
            out.extend(merger.flush_idle(p, hws, now, 1.0))
            assert not out.rejected
            late += len(out.late)
            emitted.extend(ev for _, kind, ev in out.emitted if kind == "audit" and ev["type"] != LATE)
    assert all(position[tp] == len(landing[tp]) for tp in tps)
    return emitted, late


@pytest.mark.parametrize("seed", range(4))
def test_with_watermarks_a_producer_starved_for_longer_than_the_grace_still_gives_replays_decisions(
    seed: int,
) -> None:
    """Issue #28: the worker releases a cluster's events only up to its producer's watermarks, a
    function of the records read and not of processing time, so records landing up to 5 s out of
    order across topics (more than the 2 s grace) give replay's decisions byte for byte."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    got, late = _run_marked_simulation(events, policies, 2, random.Random(seed), every=300, skew=5.0, grace=2.0)
    assert late == 0
    assert _by_key(got) == expected


def _two_clusters() -> tuple[list[dict], list[dict]]:
    """small_stream's workloads in cluster c1, and the same again in cluster c2."""
    events, policies = small_stream(n=80)
    text = orjson.dumps([events, policies]).replace(b'"c1"', b'"c2"')
    more = orjson.loads(text)
    return events + more[0], policies + more[1]


@pytest.mark.parametrize(("seed", "own"), [(0, ("c2",)), (1, ("c1", "c2")), (2, ("c1",))])
def test_clusters_on_input_topics_of_their_own_give_replays_decisions_byte_for_byte(
    seed: int, own: tuple[str, ...]
) -> None:
    """Issue #29: with ``--input-clusters`` a cluster's events and watermarks are on its own five
    topics, and its bound is the smallest of its watermarks on those.  The topic layout changes
    nothing of what is decided: replay's decisions, byte for byte, for the clusters on their own
    topics and for those on the shared ones, however starved the producer."""
    events, policies = _two_clusters()
    expected = _replay(events, policies)
    assert {k.split("/", 1)[0] for k in expected} == {"c1", "c2"}
    got, late = _run_marked_simulation(
        events, policies, 2, random.Random(seed), every=300, skew=5.0, grace=2.0, own=own
    )
    assert late == 0
    assert _by_key(got) == expected


def test_a_cluster_with_its_own_topics_is_bounded_by_its_own_watermarks_alone() -> None:
    clock = PartitionClock(0.0, clusters=("us-1",))
    assert sorted(clock.groups["us-1"]) == sorted(f"{k}/us-1" for k in KINDS)
    for kind in KINDS:  # us-1's watermarks on the shared topics say nothing of its own
        clock.mark(kind, 0, "us-1", 500.0)
    assert clock.cluster_bound("us-1") == -INF
    for i, kind in enumerate(KINDS):
        clock.mark(source_of(kind, "us-1"), i, "us-1", 100.0 + i)
    assert clock.cluster_bound("us-1") == 100.0  # the smallest over its own five topics
    for kind in KINDS:  # another cluster on the shared topics: bounded by those
        clock.mark(kind, 1, "eu-1", 50.0)
    assert clock.cluster_bound("eu-1") == 50.0 and clock.cluster_bound("us-1") == 100.0
    clock.mark(source_of(KINDS[0], "us-1"), 9, "us-1", 200.0)
    assert clock.cluster_bound("us-1") == 101.0


def test_a_slot_takes_the_same_offset_once_per_topic_not_once_per_type() -> None:
    """Offsets are per topic: offset 5 of a cluster's own metrics topic and of the shared one are
    two records (keyed by event type alone, the second would be taken for a redelivery)."""
    slot = Slot.new("c1/shop/Deployment/web", 0)
    assert slot.accept("metric", 5)
    assert slot.accept(source_of("metric", "c1"), 5)
    assert not slot.accept(source_of("metric", "c1"), 5)


def test_backpressure_never_waits_on_a_group_of_topics_no_watermarking_cluster_writes() -> None:
    """Every cluster on its own topics: the shared topics carry nothing and must not hold back
    (by pausing everything else) a cluster that has topics of its own."""
    merger = Merger(Settings(), clusters=("c1",), high=1, low=0)
    clock = merger.clock(0, 0.0)
    for source in clock.sources:
        clock.set_start(source, 0)
    own = [source_of(k, "c1") for k in KINDS]
    for source in own:
        merger.mark(0, source, 0, "c1", 50.0 if source == own[0] else 100.0, 0.0)
    ev = _ev(10.0)
    merger.offer(0, source_of("hpa", "c1"), 1, ev, decode_event(ev), 0.0)
    hws = dict.fromkeys(clock.sources, 0) | dict.fromkeys(own, 5)
    pause, _ = merger.throttle(0, hws)
    # Its own topics ahead of its smallest watermark are paused; the empty shared ones hold nothing.
    assert sorted(pause) == sorted(own[1:])


def test_without_watermarks_the_same_starved_producer_makes_late_inputs_and_other_decisions() -> None:
    """The same simulation without watermarks (the grace alone) shows what they prevent: late
    inputs, each reported, and decisions replay does not make (so the test above can fail)."""
    events, policies = small_stream(n=120)
    expected = _replay(events, policies)
    runs = [
        _run_marked_simulation(events, policies, 2, random.Random(seed), every=0, skew=5.0, grace=2.0)
        for seed in range(4)
    ]
    assert sum(late for _, late in runs) > 0
    assert sum(_by_key(got) != expected for got, _ in runs) >= 1


def test_a_round_of_watermarks_goes_first_at_instant_ends_and_last_at_the_last_tick() -> None:
    events = [_ev(100.0), _ev(100.0, name="api"), _ev(105.0), _ev(112.0)]
    sorted_events = [(raw["ts"], i, ("", i, raw), decode_event(raw)) for i, raw in enumerate(events)]
    plan = messages("t.", [], sorted_events, 100.0)
    records = with_watermarks(plan, {"t.hpa": 2, "t.vpa": 1}, 15.0, every=2)
    marks = [(t, p, orjson.loads(v)["ts"]) for t, _, v, _, p in records if p is not None]
    events_at = [orjson.loads(v)["ts"] for _, _, v, _, p in records if p is None]
    assert events_at == [100.0, 100.0, 105.0, 112.0]
    # first at the tick before the first event, then after the instant 100 (2 messages), last at tick_of(112)
    rounds = [marks[i : i + 3] for i in range(0, len(marks), 3)]
    assert [[m[2] for m in r] for r in rounds] == [[90.0] * 3, [100.0] * 3, [120.0] * 3]
    assert rounds[0] == [("t.hpa", 0, 90.0), ("t.hpa", 1, 90.0), ("t.vpa", 0, 90.0)]
    assert [orjson.loads(v)["ts"] for _, _, v, _, _ in records][:4] == [90.0, 90.0, 90.0, 100.0]
    assert records[-4][4] is None and records[-3][4] is not None  # the last event, then the last round


def test_a_cluster_with_watermarks_waits_for_one_on_every_topic_and_then_follows_the_smallest() -> None:
    clock = PartitionClock(0.0)
    assert clock.cluster_bound("c1") is None  # writes none: the caught-up rule applies
    clock.mark("metric", 0, "c1", 100.0)
    assert clock.cluster_bound("c1") == -INF  # one topic said so; the others may still hold older events
    for i, kind in enumerate(("workload", "hpa", "vpa", "policy")):
        clock.mark(kind, i, "c1", 120.0)
    assert clock.cluster_bound("c1") == 100.0
    clock.mark("metric", 1, "c1", 90.0)  # never goes back
    assert clock.cluster_bound("c1") == 100.0
    clock.mark("metric", 2, "c1", 130.0)
    assert clock.cluster_bound("c1") == 120.0
    assert clock.cluster_bound("c2") is None


def test_watermarks_decode_strictly_and_name_the_field() -> None:
    assert decode_watermark(b"eu-1", {"type": "watermark", "cluster": "eu-1", "ts": 5}) == ("eu-1", 5.0)
    with pytest.raises(InvalidEvent, match=r"field 'cluser': unknown field of a watermark \(did you mean cluster\?\)"):
        decode_watermark(b"eu-1", {"type": "watermark", "cluser": "eu-1", "ts": 5})
    with pytest.raises(InvalidEvent, match="field 'ts': expected a finite number"):
        decode_watermark(b"eu-1", {"type": "watermark", "cluster": "eu-1", "ts": "soon"})
    with pytest.raises(InvalidEvent, match="field 'key': a watermark is keyed by its cluster 'eu-1', got 'us-1'"):
        decode_watermark(b"us-1", {"type": "watermark", "cluster": "eu-1", "ts": 5})


def test_a_late_input_is_ingested_and_reported_with_the_tick_it_missed() -> None:
    events, _policies, merger, hw = _one_workload_offered()
    key = "c1/shop/Deployment/web"
    merger.release(0, hw)
    merger.flush_idle(0, hw, 3.0, 2.0)
    decided = merger.slots[key].state.last_tick
    first = next(e for e in events if e["type"] == "hpa")
    again = {**first, "ts": decided - 1.0}
    assert merger.offer(0, "hpa", hw["hpa"], again, decode_event(again), 4.0)
    out = merger.release(0, hw | {"hpa": hw["hpa"] + 1}, 10.0)
    assert [(x.kind, x.offset, x.ts, x.tick, x.decided) for x in out.late] == [
        ("hpa", hw["hpa"], decided - 1.0, decided, decided)
    ]
    reports = [ev for _, kind, ev in out.emitted if kind == "audit" and ev["type"] == LATE]
    assert len(reports) == 1 and reports[0]["subject"] == key
    assert reports[0]["data"]["input"] == {"type": "hpa", "ts": decided - 1.0, "partition": 0, "offset": hw["hpa"]}
    assert reports[0]["data"]["tick"] == decided and reports[0]["data"]["decided_through"] == decided


def test_a_reloaded_slot_of_a_watermarking_cluster_waits_for_new_watermarks() -> None:
    """After a rebalance the new owner has read no watermark yet: its cluster's events wait, rather
    than being released by the caught-up guess that issue #28 saw go wrong under load."""
    slot = Slot.new("c1/shop/Deployment/web", 0)
    slot.marked = True
    again = Slot.from_bytes(slot.to_bytes())
    assert again.marked
    merger = Merger(Settings())
    merger.load(again)
    raw = _ev(100.0)
    merger.clock(0, 0.0)
    for kind in KINDS:
        merger.clock(0, 0.0).set_start(kind, 0)
    assert merger.offer(0, "hpa", 0, raw, decode_event(raw), 0.0)
    everything_read = dict.fromkeys(KINDS, 1) | {"hpa": 1}
    assert merger.release(0, everything_read, 100.0) == Output() and not merger.released()
    assert merger.story(0) == "1 workload(s), 1 event(s) waiting, watermark bound c1 not yet known on every topic"
    for kind in KINDS:
        merger.mark(0, kind, 1, "c1", 100.0, 1.0)
    merger.release(0, everything_read, 100.0)
    assert merger.released()
    assert merger.story(0) == "1 workload(s), 0 event(s) waiting, watermark bound c1 1970-01-01T00:01:40Z"
    assert merger.take_marks() == {0: {"c1": {kind: [100.0, 1] for kind in KINDS}}}
    assert merger.take_marks() == {}  # written once until they change
    assert b"marked" not in Slot.new("c1/shop/Deployment/web", 0).to_bytes()  # unchanged bytes without watermarks


def test_the_last_tick_of_a_live_watermarking_cluster_runs_by_the_wall_clock_a_recordings_never() -> None:
    """A collector that stopped leaves its last tick pending (no watermark will pass it): the idle
    flush runs it once the wall clock has passed it, as for any live input, but only while the
    cluster's watermarks followed the wall clock; a recording's waits for its last round."""
    for lag, runs in ((2.0, True), (LIVE_LAG + 30.0, False)):
        _, _, merger, hw = _one_workload_offered()
        key = "c1/shop/Deployment/web"
        metric = max((e for e in merger.slots[key].inbox if e[1] == KINDS.index("metric")), key=lambda e: e[0])[3]
        last = metric["ts"] + 5.0  # inside the next tick's window
        extra = {**metric, "ts": last}
        assert merger.offer(0, "metric", hw["metric"], extra, decode_event(extra), 1.0)
        hw = hw | {"metric": hw["metric"] + 1}
        for kind in KINDS:
            merger.mark(0, kind, 99, "c1", last, 1.0)
        merger.release(0, hw)
        tick = merger.slots[key].state.pending_tick
        assert tick is not None and tick > last  # the window of the last tick is not closed by a mark
        out = merger.flush_idle(0, hw, 10.0, 2.0, wall=tick + lag)  # past the tick's gate either way
        assert bool(out.emitted) is runs and (merger.slots[key].state.pending_tick is None) is runs


def test_a_policy_record_is_keyed_by_its_workload_and_policy_and_its_deletion_names_it() -> None:
    """Issue #29: keyed by the workload alone, compaction kept only the latest of two policies of
    one workload; keyed by both, each policy is its own compacted record on the workload's partition."""
    hvpa = decode_event(policy_event(POLICY, "c1", 100.0))
    assert isinstance(hvpa, PolicyEvent)
    key = policy_key(hvpa)
    assert key == b"c1/shop/Deployment/web#autoscaling.k8s.io/Hvpa/shop/web"
    assert partition_key(key) == b"c1/shop/Deployment/web"
    check_routing("policy", key, hvpa)  # the policy's own key
    check_routing("policy", b"c1/shop/Deployment/web", hvpa)  # the workload's, as before
    wanted = re.escape("neither 'c1/shop/Deployment/web#autoscaling.k8s.io/Hvpa/shop/web'")
    with pytest.raises(InvalidEvent, match=wanted):
        check_routing("policy", b"c1/shop/Deployment/web#autoscaling.k8s.io/Hvpa/shop/other", hvpa)
    gone = decode_event(tombstone(key, 200.0))
    assert isinstance(gone, PolicyEvent) and gone.manifest is None and gone.identity == hvpa.identity
    everything = decode_event(tombstone(b"c1/shop/Deployment/web", 200.0))
    assert isinstance(everything, PolicyEvent) and everything.identity is None
    with pytest.raises(InvalidEvent, match="field 'key': 'Hvpa/web' after '#' is not a policy"):
        tombstone(b"c1/shop/Deployment/web#Hvpa/web", 200.0)


def test_a_restored_watermark_is_in_force_only_once_the_new_owner_has_read_past_where_it_was_read() -> None:
    """Issue #28, found by the frozen-publisher chaos runs: the previous owner read a watermark at
    offset 7 and persisted it, but the group had committed only up to offset 3.  Put in force at
    once, it let the new owner release an hpa event of 10:02:50 while the metric of 10:02:40
    (offset 4, read again after it) was still on its way: a late input.  It counts from the moment
    the new owner's own position passes offset 7, or from the start if the commit was past it."""
    clock = PartitionClock(0.0)
    for kind in KINDS:
        clock.set_start(kind, 3)
        clock.restore("c1", kind, 180.0, 7)
    assert clock.cluster_bound("c1") == -INF  # known to write watermarks; none in force yet
    for kind in KINDS:
        if kind != "metric":
            clock.observe(kind, 7, None)  # read again past where it was read: in force
    assert clock.cluster_bound("c1") == -INF  # the metric topic is still behind offset 7
    clock.observe("metric", 4, 160.0)
    assert clock.cluster_bound("c1") == -INF
    clock.mark("metric", 7, "c1", 180.0)  # reads the watermark itself
    assert clock.cluster_bound("c1") == 180.0
    later = PartitionClock(0.0)
    for kind in KINDS:
        later.set_start(kind, 9)  # the group had committed past them: in force at once
        later.restore("c1", kind, 180.0, 7)
    assert later.cluster_bound("c1") == 180.0


def test_the_worker_refuses_a_clusters_record_on_the_shared_topics_when_it_has_its_own() -> None:
    """The worker's side of the layout, without a broker: a record of a listed cluster belongs on its
    own topics, and a cluster's own topic takes that cluster's records alone."""
    from agents.admission import check_owner
    from streams.merge import Misrouted

    clusters = ("a", "b")
    with pytest.raises(Misrouted, match=r"cluster 'b' has input topics of its own \(--input-clusters\)"):
        check_owner(clusters, "t.policies", None, "b")
    with pytest.raises(Misrouted, match=re.escape("a record of cluster 'b' on cluster 'a''s topic t.policies.a")):
        check_owner(clusters, "t.policies.a", "a", "b")
    check_owner(clusters, "t.policies.a", "a", "a")
    check_owner(clusters, "t.policies", None, "c")  # a cluster without topics of its own
