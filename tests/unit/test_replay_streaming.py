"""``tandem replay`` streams input already in event-time order (streams.runner.read_ordered, issue 31).

Files each in non-decreasing ``ts`` order are merged lazily instead of read into one sorted list;
the output must be the sorted list's, byte for byte, and anything else falls back to that list.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

import streams.runner
from scaling.engine import Engine
from scaling.settings import Settings
from streams.inputs import load_manifests
from streams.replay import replay
from streams.runner import (
    InputChanged,
    Line,
    ReplayStats,
    StrictError,
    read_ordered,
    read_sorted,
    run,
    scan_order,
    stream_events,
)
from tests.replaying import ev
from tests.vectors.test_hvpa_vectors import T0, fixture_a, hpa, vpa, workload

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"


def lines(*events: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


def replayed(
    paths: Sequence[Path], policies: Sequence[dict[str, Any]] = (), *, strict: bool = False
) -> tuple[bytes, str, ReplayStats]:
    out, err = io.BytesIO(), io.StringIO()
    stats = replay([str(p) for p in paths], out, settings=Settings(), policies=policies, strict=strict, err=err)
    return out.getvalue(), err.getvalue(), stats


def where(events: Sequence[Line]) -> list[tuple[float, str, int]]:
    return [(ts - T0, Path(path).name, lineno) for ts, _, (path, lineno, _), _ in events]


def test_sorted_files_are_streamed_and_give_the_sorted_lists_audit_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bundled example's first 8,000 lines dealt alternately into two files: each stays in order,
    # and the same workload's events at equal ts land in both, so file order decides between them.
    example = gzip.decompress(EXAMPLE.read_bytes()).splitlines(keepends=True)[:8000]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    a.write_bytes(b"".join(example[0::2]))
    b.write_bytes(gzip.compress(b"".join(example[1::2])))
    policies = load_manifests(str(POLICIES))
    assert scan_order([str(a), str(b)]) == 8000  # in order: the streamed path
    streamed, streamed_err, streamed_stats = replayed([a, b], policies)
    monkeypatch.setattr(streams.runner, "scan_order", lambda *args, **kwargs: None)  # the sorted list
    listed, listed_err, listed_stats = replayed([a, b], policies)
    assert streamed == listed
    assert streamed.count(b"dev.tandem.decision.v1") == 52
    assert streamed_err == listed_err
    assert streamed_stats == listed_stats
    assert (streamed_stats.files, streamed_stats.read, streamed_stats.rejected) == (2, 8000, 0)


def test_an_unsorted_file_falls_back_to_the_stable_sort(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(lines(workload(T0 + 10, 2), workload(T0 + 20, 2)))
    b.write_bytes(lines(workload(T0 + 20, 3), workload(T0 + 5, 3), workload(T0 + 20, 4)))
    assert scan_order([str(a), str(b)]) is None
    events, total = read_ordered([str(a), str(b)], io.StringIO().write, ReplayStats())
    assert isinstance(events, list) and total == 5
    assert where(events) == [
        (5.0, "b.jsonl", 2),
        (10.0, "a.jsonl", 1),
        (20.0, "a.jsonl", 2),
        (20.0, "b.jsonl", 1),
        (20.0, "b.jsonl", 3),
    ]
    assert where(events) == where(read_sorted([str(a), str(b)], io.StringIO().write, ReplayStats()))


def test_stdin_is_never_streamed_it_cannot_be_read_twice() -> None:
    assert scan_order(["-"]) is None


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_equal_ts_across_two_files_keep_file_order(tmp_path: Path, order: str) -> None:
    files = {"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"}
    files["a"].write_bytes(lines(workload(T0, 2), workload(T0 + 15, 2), workload(T0 + 15, 3)))
    files["b"].write_bytes(lines(workload(T0 + 15, 4), workload(T0 + 30, 4)))
    paths = [str(files[name]) for name in order]
    assert scan_order(paths) == 5
    streamed = list(stream_events(paths, io.StringIO().write, ReplayStats()))
    assert where(streamed) == where(read_sorted(paths, io.StringIO().write, ReplayStats()))
    first, second = (("a.jsonl", 2), ("a.jsonl", 3)), (("b.jsonl", 1),)
    at_15 = [*first, *second] if order == "ab" else [*second, *first]
    assert [(name, lineno) for ts, name, lineno in where(streamed) if ts == 15.0] == at_15


def test_a_bad_line_in_the_middle_is_reported_with_file_and_line_and_skipped(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    good = lines(workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G")).splitlines(keepends=True)
    stream.write_bytes(good[0] + b'{"type": "workload", "ts": 1762250401, "workload": {\n' + b"".join(good[1:]))
    assert scan_order([str(stream)]) == 4  # the bad line is left out of the check, not a reason to sort
    out, err, stats = replayed([stream], [fixture_a(40)])
    assert err.startswith(f"{stream}:2: not valid JSON (")
    assert err.count("\n") == 1  # that line alone
    assert len(out.splitlines()) == 1  # the good events still decide
    assert (stats.read, stats.rejected, stats.first_ts, stats.last_ts) == (4, 1, T0 + 1, T0 + 3)


def test_a_streamed_run_reports_each_refusal_when_it_reaches_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the streamed path a line that does not decode is reported when the merge reaches it, so it
    # comes among the engine's refusals in line order; the sorted list reports it before them all.
    spec = {**fixture_a(40)["spec"], "weightBasedScalingIntervals": [{"vpaWeight": 140}]}
    stream = tmp_path / "s.jsonl"
    policy = ev("policy", T0 + 2, policy={**fixture_a(40), "spec": spec})
    stream.write_bytes(lines(workload(T0 + 1, 2), policy) + b"{nope\n" + lines(workload(T0 + 3, 2)))
    engine_refusal = [f"{stream}:2", "field 'policy.spec.weightBasedScalingIntervals[0].vpaWeight'"]
    bad_line = [f"{stream}:3", "not valid JSON (unexpected character, expected a string key at char 1)"]

    def refusals() -> list[list[str]]:
        _, err, stats = replayed([stream])
        assert (stats.read, stats.rejected) == (4, 2)
        return [line.split(": ", 2)[:2] for line in err.splitlines()[:2]]

    assert refusals() == [engine_refusal, bad_line]
    monkeypatch.setattr(streams.runner, "scan_order", lambda *args, **kwargs: None)  # the sorted list
    assert refusals() == [bad_line, engine_refusal]


def test_strict_decides_nothing_when_a_line_of_a_sorted_file_is_bad(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G")]
    stream.write_bytes(lines(*events) + b'{"type": "gauge", "ts": 1762250404}\n')
    out = io.BytesIO()
    with pytest.raises(StrictError, match=rf"^{stream}:4: field 'type': unknown event type"):
        replay([str(stream)], out, settings=Settings(), policies=[fixture_a(40)], strict=True, err=io.StringIO())
    assert out.getvalue() == b""  # the three good events would have decided: nothing was
    assert len(replayed([stream], [fixture_a(40)])[0].splitlines()) == 1


def test_a_file_out_of_order_after_the_scan_stops_the_stream_at_that_line(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(lines(workload(T0 + 10, 2), workload(T0 + 5, 2)))
    merged = stream_events([str(stream)], io.StringIO().write, ReplayStats())
    assert next(merged)[0] == T0 + 10
    with pytest.raises(InputChanged, match=rf"^{stream}:2: ts {T0 + 5} is before the line above it"):
        next(merged)


def test_the_streamed_path_decodes_at_most_one_line_per_file_ahead_of_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting hooks: lines decoded, and events the engine took; the difference is what the reader
    # holds.  The sorted list holds every line before the engine takes the first.
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl.gz"]
    for i, path in enumerate(files):
        data = lines(*(workload(T0 + 15 * n + i, 2) for n in range(400)))
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    decoded = 0
    ahead: list[int] = []
    real_decode = streams.runner.decode

    def counting_decode(line: bytes) -> Any:
        nonlocal decoded
        decoded += 1
        return real_decode(line)

    monkeypatch.setattr(streams.runner, "decode", counting_decode)

    def held(how: str) -> int:
        nonlocal decoded
        decoded = 0
        ahead.clear()
        paths = [str(p) for p in files]
        if how == "streamed":
            events, total = read_ordered(paths, io.StringIO().write, ReplayStats())
            assert total == 1200 and not isinstance(events, list)
        else:
            events = read_sorted(paths, io.StringIO().write, ReplayStats())
        taken = 0

        def each(_: object) -> None:
            nonlocal taken
            taken += 1
            ahead.append(decoded - taken)

        run(Engine(Settings()), events, lambda _: None, io.StringIO().write, each=each)
        assert taken == 1200
        return max(ahead)

    assert held("streamed") == len(files) - 1  # the other files' next line, waiting in the merge
    assert held("sorted list") == 1200 - 1


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"metric","ts":1767225600.0,"workload":{}}',
        b'{"type":"metric","ts":5,"samples":[]}',
        b'{"type":"metric","ts":-0.5}',
        b'{"type":"metric","ts":1e3,"workload":{}}',  # an exponent: parsed
        b'{"type":"history","ts":9.0,"events":[{"type":"metric","ts":3.0}]}',  # a nested ts: parsed
        b'{"type":"metric","ts":7.0,"ts":2.0}',  # two: parsed (orjson keeps the last)
        b'{"ts":4.0,"type":"metric"}',  # another key order: parsed
        b'{"type":"metric","ts":"8.0"}',  # not a number
        b'{"type":"metric","ts":0.25,"note":"\\"ts\\":1.0"}',  # "ts": inside a string is escaped
        b'{"type":"metric","ts":01.0}',  # not JSON
    ],
)
def test_the_pre_scan_reads_a_lines_ts_from_its_prefix_as_the_parser_would(line: bytes) -> None:
    try:
        obj = orjson.loads(line)
        ts = obj.get("ts")
        parsed = float(ts) if type(ts) in (int, float) else None
    except orjson.JSONDecodeError:
        parsed = None
    assert streams.runner._top_ts(line) == parsed


def test_the_pre_scan_counts_a_broken_line_after_a_good_prefix_and_the_replay_still_refuses_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    broken = b'{"type":"metric","ts":' + str(T0 + 30).encode() + b".0,broken\n"
    path.write_bytes(lines(workload(T0, 2)) + broken + lines(workload(T0 + 60, 3)))
    assert scan_order([str(path)]) == 3
    _, err, stats = replayed([path])
    assert err.startswith(f"{path}:2: not valid JSON (") and err.count("not valid JSON") == 1
    assert (stats.read, stats.rejected) == (3, 1)
