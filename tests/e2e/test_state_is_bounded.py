"""docs/architecture.md invariant 4: per-workload state is a plain serialisable value of bounded size."""

from __future__ import annotations

import io
from pathlib import Path

import orjson

from scaling.engine import Engine
from scaling.settings import Settings
from scaling.state import WorkloadState
from streams.inputs import load_manifests
from streams.runner import ReplayStats, read_events

ROOT = Path(__file__).resolve().parents[2]


def test_state_stops_growing_and_round_trips_through_json() -> None:
    events = read_events([str(ROOT / "examples" / "stream.jsonl.gz")], io.StringIO().write, ReplayStats())
    events.sort(key=lambda e: e[0])
    engine = Engine(Settings())
    for manifest in load_manifests(str(ROOT / "examples" / "policies.yaml")):
        engine.add_policy(manifest)
    sizes: dict[str, list[int]] = {}
    day = 86400.0
    next_mark = events[0][0] + day
    for ts, _, (_, _, raw), event in events:
        if ts >= next_mark:
            for key, st in engine.states.items():
                sizes.setdefault(key, []).append(len(orjson.dumps(st.to_dict())))
            next_mark += day
        engine.process(raw, event)
    for key, st in engine.states.items():
        blob = orjson.dumps(st.to_dict())
        again = WorkloadState.from_dict(orjson.loads(blob))
        assert orjson.dumps(again.to_dict()) == blob  # plain JSON, exact round trip
        assert len(blob) < 64_000, (key, len(blob))
        # after the first day the state no longer grows with the stream (histograms, rings, latest values)
        day1, day2 = sizes[key][0], sizes[key][1]
        assert day2 <= day1 * 1.25 + 2_000, (key, sizes[key])
