"""The report's data side of drawing (analysis/report/scales.py): buckets, units and ranges, exactly."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from analysis.audit import AuditEvent
from analysis.report.charts import LEFT, RIGHT, WIDTH
from analysis.report.scales import (
    Bucket,
    Unit,
    WantedRange,
    band_visible,
    blocked_buckets,
    bucket_seconds,
    choose_unit,
    main_reason,
    pod_spread,
    value_range,
    wanted_ranges,
)

H = 3600
T0 = 1762214400.0  # 2025-11-04 00:00 UTC, the example's start


def _ev(kind: str, ts: float, n: int, blocked: list[dict[str, Any]] | None = None) -> AuditEvent:
    event = {"id": f"e{n}", "type": f"dev.tandem.{kind}.v1", "data": {"tick": ts, "blocked": blocked or []}}
    return AuditEvent(orjson.dumps(event), event, ts, n)


def _blocked(ts: float, n: int, *reasons: str, target: str = "replicas", wanted: Any = None) -> AuditEvent:
    return _ev("blocked", ts, n, [{"reason": r, "target": target, "wanted": wanted} for r in reasons])


def test_bucket_width_is_the_smallest_round_step_at_least_8_px_wide() -> None:
    plot = WIDTH - LEFT - RIGHT
    assert plot == 1102
    # The example: 72 h over 1102 px is 235 s a pixel; 30 min would be 7.65 px, so 1 h (15.3 px).
    assert bucket_seconds(72 * H, plot) == H
    assert bucket_seconds(24 * H, plot) == 900  # 78.4 s/px: 5 min is 3.8 px, 15 min 11.5 px
    assert bucket_seconds(6 * H, plot) == 300  # 19.6 s/px: 1 min is 3.1 px, 5 min 15.3 px
    assert bucket_seconds(600, plot) == 60  # never below a minute
    assert bucket_seconds(365 * 86400, plot) == 7 * 86400  # never above a week


def test_blocked_reports_are_counted_per_bucket_aligned_to_the_hour() -> None:
    events = [
        _ev("decision", T0 + 10, 0),  # decisions are not counted
        _blocked(T0 + 15, 1, "MinFactor"),
        _blocked(T0 + H - 15, 2, "Cooldown", "MinFactor"),  # filed under its first reason
        _blocked(T0 + H, 3, "MinFactor"),  # the next bucket starts at the hour, inclusive
        _blocked(T0 + 5 * H + 30, 4, "MinFactor"),
        _blocked(T0 + 5 * H + 45, 5, "Cooldown"),
        _blocked(T0 + 5 * H + 60, 6, "MinFactor"),
    ]
    assert blocked_buckets(events, H) == [
        Bucket(T0, T0 + H, 2, (("Cooldown", 1), ("MinFactor", 1)), ("e1", "e2")),
        Bucket(T0 + H, T0 + 2 * H, 1, (("MinFactor", 1),), ("e3",)),
        Bucket(T0 + 5 * H, T0 + 6 * H, 3, (("MinFactor", 2), ("Cooldown", 1)), ("e4", "e5", "e6")),
    ]
    assert [b.ids for b in blocked_buckets(events, H)] == [("e1", "e2"), ("e3",), ("e4", "e5", "e6")]


def test_wanted_ranges_span_the_values_held_back_per_bucket() -> None:
    events = [
        _blocked(T0 + 15, 1, "MinFactor", wanted=7),
        _blocked(T0 + 60, 2, "MinFactor", wanted=9),
        _blocked(T0 + 90, 3, "Cooldown", wanted=8),
        _blocked(T0 + H + 1, 4, "Cooldown", wanted=5),
        _blocked(T0 + H + 2, 5, "MinFactor", wanted=5),  # a tie: the alphabetically first reason
        _blocked(T0 + 2 * H, 6, "MinFactor", target="web/cpu", wanted="500m"),  # another target
    ]

    def replicas(e: AuditEvent) -> list[tuple[float, str]]:
        return [(float(b["wanted"]), b["reason"]) for b in e.data["blocked"] if b["target"] == "replicas"]

    assert wanted_ranges(events, H, replicas) == [
        WantedRange(T0, T0 + H, 3, 7.0, 9.0, "MinFactor"),
        WantedRange(T0 + H, T0 + 2 * H, 2, 5.0, 5.0, "Cooldown"),
    ]


@pytest.mark.parametrize(
    ("resource", "top", "unit"),
    [
        ("cpu", 0.999, Unit(0.001, "m", "CPU (millicores)")),
        ("cpu", 1.0, Unit(1.0, "", "CPU (cores)")),
        ("cpu", 2.16, Unit(1.0, "", "CPU (cores)")),
        ("memory", 2**30 - 1, Unit(2**20, "Mi", "memory (MiB)")),
        ("memory", 2**30, Unit(2**30, "Gi", "memory (GiB)")),
        ("ephemeral-storage", 5e9, Unit(1.0, "", "ephemeral-storage")),
    ],
)
def test_the_unit_follows_the_axis_top_the_same_way_for_every_chart(resource: str, top: float, unit: Unit) -> None:
    assert choose_unit(resource, top) == unit


def test_a_limit_far_above_the_rest_is_left_above_the_axis() -> None:
    # The example's web memory: usage ~190 MiB, request 512 MiB, limit 1 GiB (twice the request).
    mib = 2**20
    vr = value_range("memory", [190 * mib, 512 * mib, 230 * mib], [1024 * mib])
    assert (vr.low, vr.high, vr.above) == (0.0, 512 * mib * 1.08, (1024 * mib,))
    assert vr.unit == Unit(mib, "Mi", "memory (MiB)")
    # The example's encoder CPU: usage up to ~1.2 cores, request 1, limit 2 (above 1.5 x 1.2 = 1.8).
    vr = value_range("cpu", [1.2, 1.0], [2.0])
    assert vr.above == (2.0,) and vr.high == 1.2 * 1.08 and vr.unit.name == "CPU (cores)"
    # A limit within 1.5 x the top is drawn, and sets the top.
    vr = value_range("cpu", [0.5, 0.4], [0.7])
    assert (vr.high, vr.above, vr.unit.suffix) == (0.7 * 1.08, (), "m")
    # Limits only (an audit file with limit decisions alone): they are what there is to show.
    vr = value_range("cpu", [], [1.5, 2.0])
    assert (vr.high, vr.above) == (2.0 * 1.08, ())


def test_the_legend_swatch_of_held_back_ranges_is_the_reason_of_most_changes() -> None:
    # The example's web memory: the first range is Weight, most changes are MinChange.
    ranges = [
        WantedRange(T0, T0 + H, 3, 1.0, 2.0, "Weight"),
        WantedRange(T0 + H, T0 + 2 * H, 2, 1.0, 1.0, "MinChange"),
        WantedRange(T0 + 2 * H, T0 + 3 * H, 2, 1.0, 1.0, "MinChange"),
    ]
    assert main_reason(ranges) == "MinChange"
    assert main_reason([*ranges[:2], WantedRange(T0, T0 + H, 1, 1.0, 1.0, "MinChange")]) == "MinChange"  # 3 = 3
    assert main_reason(ranges[:1]) == "Weight"
    assert main_reason([]) is None


def test_the_pod_band_is_drawn_only_where_it_can_be_seen() -> None:
    mib = 2**20
    # The example's memory: every pod the same at every event, however the average moves.
    same = [(T0, 190.0 * mib, 190.0 * mib, 190.0 * mib), (T0 + 60, 200.0 * mib, 200.0 * mib, 200.0 * mib)]
    vr = value_range("memory", [200 * mib, 256 * mib], [512 * mib])
    assert pod_spread(same) == 0.0 and not band_visible(0.0, vr)
    assert pod_spread([]) == 0.0
    # The example's web CPU: pods up to 84 m apart on a 638 m axis, far above 1 %.
    cpu = value_range("cpu", [0.58, 0.5], [1.0])
    assert pod_spread([(T0, 0.3, 0.29, 0.31), (T0 + 60, 0.5, 0.45, 0.5336)]) == pytest.approx(0.0836)
    assert band_visible(0.0836, cpu)
    # At least 1 % of the axis' height (about a pixel of the page's chart), else not drawn.
    assert band_visible(0.01 * cpu.high, cpu) and not band_visible(0.0099 * cpu.high, cpu)
