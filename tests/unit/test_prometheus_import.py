"""``tandem import prometheus``'s pure parts: times, durations, the split under the point limit,
the ``--queries`` file (tests/integration/test_import_prometheus.py runs it on a real Prometheus)."""

from __future__ import annotations

import pytest

from cli.importer import parse_duration, parse_time
from streams.prometheus import DEFAULT_QUERIES, QuerySet, load_queries
from streams.prometheus_api import range_parts

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_times_are_rfc3339_now_or_a_duration_before_now() -> None:
    assert parse_time("2026-01-01T00:00:00Z", "--start", 0.0) == NOW
    assert parse_time("2026-01-01T01:00:00+01:00", "--start", 0.0) == NOW
    assert parse_time("now", "--end", NOW) == NOW
    assert parse_time("-28d", "--start", NOW) == NOW - 28 * 86400
    assert parse_time("-1h30m", "--start", NOW) == NOW - 5400
    with pytest.raises(ValueError, match=r"^--start: '2026-01-01T00:00:00' has no time zone \(add Z or \+00:00\)$"):
        parse_time("2026-01-01T00:00:00", "--start", NOW)
    with pytest.raises(ValueError, match=r"^--end: 'yesterday' is not an RFC 3339 time"):
        parse_time("yesterday", "--end", NOW)


def test_durations() -> None:
    assert [parse_duration(t, "--step") for t in ("60s", "5m", "1h", "90", "500ms", "1w")] == [
        60.0, 300.0, 3600.0, 90.0, 0.5, 604800.0,
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"^--step: '5 m' is not a duration \(e.g. 60s, 5m, 28d\)$"):
        parse_duration("5 m", "--step")


def test_a_range_is_split_into_parts_of_at_most_the_point_limit_without_overlap() -> None:
    # a month at 60 s: 40,321 points, in parts of 11,000
    month = 28 * 86400 * 1000
    parts = range_parts(0, month, 60_000, 11_000)
    assert parts == [
        (0, 659_940_000),
        (660_000_000, 1_319_940_000),
        (1_320_000_000, 1_979_940_000),
        (1_980_000_000, month),
    ]
    assert range_parts(0, 120_000, 60_000, 11_000) == [(0, 120_000)]
    assert range_parts(0, 360_000, 60_000, 3) == [(0, 120_000), (180_000, 300_000), (360_000, 360_000)]


def test_the_queries_file_overrides_by_name_and_refuses_an_unknown_one() -> None:
    qs = load_queries({"queries": {"memory": "wss{ns=~'$namespaces'}"}, "labels": {"hpa": "hpa"}}, "q.yaml")
    assert qs.queries["memory"] == "wss{ns=~'$namespaces'}"
    assert qs.queries["cpu"] == DEFAULT_QUERIES["cpu"]
    assert qs.labels["hpa"] == "hpa"
    assert qs.expand("memory", ["shop", "a.b"], 60) == "wss{ns=~'shop|a\\\\.b'}"
    assert QuerySet().expand("cpu", [], 60).endswith('namespace=~".*"}[60s])')
    with pytest.raises(ValueError, match=r"^q.yaml: field 'labels.podd': unknown name \(did you mean pod\?\)$"):
        load_queries({"labels": {"podd": "x"}}, "q.yaml")
    with pytest.raises(ValueError, match=r"^q.yaml: field 'query': unknown field \(did you mean queries\?\)$"):
        load_queries({"query": {}}, "q.yaml")


def test_a_duration_before_now_is_a_value_not_an_option() -> None:
    from cli.main import build_parser

    args = build_parser().parse_args(
        ["import", "prometheus", "http://p:9090", "--start", "-28d", "--end", "-1h30m", "--cluster", "c"]
    )
    assert (args.start, args.end, args.cluster) == ("-28d", "-1h30m", "c")
