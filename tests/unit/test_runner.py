"""The one embedded runner (streams.runner): what replay, report, publish and simulate share."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import pytest

from scaling.engine import Engine
from scaling.events import Event
from scaling.reconcile import Emitted
from scaling.settings import Settings
from streams.runner import ReplayStats, StrictError, read_reduced, read_sorted, run

WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
T0 = 1_762_250_400.0


def metric(ts: float) -> bytes:
    sample = {"pod": "web-1", "container": "app", "cpu": 0.5, "memory": 1000}
    return orjson.dumps({"type": "metric", "ts": ts, "workload": WL, "samples": [sample]}) + b"\n"


def test_read_sorted_orders_by_ts_and_keeps_file_order_for_equal_ts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(metric(T0 + 30) + metric(T0 + 15))
    b.write_bytes(metric(T0 + 15) + b"{not json\n")
    err = io.StringIO()
    stats = ReplayStats()
    events = read_sorted([str(a), str(b)], err.write, stats)
    assert [(ts - T0, where[0][-7:], where[1]) for ts, _, where, _ in events] == [
        (15.0, "a.jsonl", 2),
        (15.0, "b.jsonl", 1),
        (30.0, "a.jsonl", 1),
    ]
    assert (stats.files, stats.read, stats.rejected) == (2, 4, 1)
    assert err.getvalue().startswith(f"{b}:2: ")
    with pytest.raises(StrictError, match=rf"^{b}:2: "):
        read_sorted([str(a), str(b)], err.write, ReplayStats(), strict=True)


def test_run_hands_every_event_to_each_in_order_then_flushes_into_the_same_sink(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(metric(T0 + 30) + metric(T0) + metric(T0 + 15))
    events = read_sorted([str(path)], io.StringIO().write, ReplayStats())
    calls: list[str] = []
    taken: list[float] = []

    def sink(items: list[Emitted]) -> None:
        calls.append(f"sink {len(items)}")

    def each(event: Event) -> None:
        taken.append(event.ts - T0)
        calls.append("each")

    run(Engine(Settings()), events, sink, io.StringIO().write, each=each)
    assert taken == [0.0, 15.0, 30.0]
    assert calls == ["sink 0", "each", "sink 0", "each", "sink 0", "each", "sink 0"]


def _reduce_ts_and_type(raw: object, event: Event) -> tuple[str, float] | None:
    """A reducer for read_reduced (module level: the decoding processes get it pickled)."""
    return None if event.ts == T0 + 45 else (event.type, event.ts)


@pytest.mark.parametrize("jobs", [1, 3])
def test_read_reduced_keeps_what_read_sorted_reads_and_refuses_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    monkeypatch.setattr("streams.runner._MIN_PART_LINES", 2)  # parts of a few lines: decoders at work
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    lines = [metric(T0 + 60 - i) if i % 4 else b'{"type":"metric"}\n' for i in range(40)]
    lines[7] = b"{not json\n"
    a.write_bytes(b"".join(lines) + metric(T0 + 45) + metric(T0 + 30))
    # b: a gzip file cut short, so the break is reported after the lines before it
    b.write_bytes(gzip.compress(b"".join(metric(T0 + i) for i in range(2000)))[:3000])
    old_err, new_err = io.StringIO(), io.StringIO()
    old_stats, new_stats = ReplayStats(), ReplayStats()
    old = read_sorted([str(a), str(b)], old_err.write, old_stats)
    new = read_reduced([str(a), str(b)], new_err.write, new_stats, _reduce_ts_and_type, jobs=jobs)
    assert new == [(ts, (ev.type, ev.ts)) for ts, _, _, ev in old if ev.ts != T0 + 45]
    assert new_err.getvalue() == old_err.getvalue()
    assert old_err.getvalue().count("\n") == 0  # read_sorted's report adds no newline: all on one line
    assert "gzip" in new_err.getvalue() and f"{a}:8: not valid JSON" in new_err.getvalue()
    assert new_stats == old_stats
    assert old_stats.rejected == 12  # 10 without ts and workload, the bad JSON, the break
