"""``scaling.policies.tortoise.history``: four weeks of per-slot replica peaks (the seed's min/max replica rule)."""

from __future__ import annotations

import json
import random

import pytest

from scaling.policies.tortoise.history import EMPTY, WEEKS, ReplicaHistory, replica_bounds

H = 3600
DAY = 24 * H
WEEK = 7 * DAY
#: 2025-11-02T00:00:00+09:00, a Sunday in Asia/Tokyo (Tortoise's default TimeZone).
SUNDAY = 1_762_009_200.0


def test_slots_are_weekday_and_hour_in_the_history_time_zone() -> None:
    h = ReplicaHistory("Asia/Tokyo", 1)
    ordinal, slot = h.locate(SUNDAY + 13 * H + 59 * 60)
    assert ordinal % 7 == 0  # Sunday
    assert slot == 13
    # Sunday 05:00 in Tokyo is Saturday 20:00 in UTC.
    u = ReplicaHistory("UTC", 1)
    ordinal, slot = u.locate(SUNDAY + 5 * H)
    assert ordinal % 7 == 6
    assert slot == 20


def test_wider_slots_group_hours_like_tortoises_slot_list() -> None:
    # Tortoise's TestService_InitializeTortoise: width 8 gives 0-8, 8-16, 16-24 per weekday (21 slots).
    h = ReplicaHistory("Asia/Tokyo", 8)
    assert h.per_day == 3
    assert len(h.rows[0]) == 21
    assert [h.locate(SUNDAY + k * H)[1] for k in (0, 7, 8, 15, 16, 23)] == [0, 0, 1, 1, 2, 2]


def test_a_slot_keeps_the_peak_of_its_samples() -> None:
    h = ReplicaHistory()
    for ts, replicas in ((SUNDAY + 10 * H, 4), (SUNDAY + 10 * H + 900, 9), (SUNDAY + 10 * H + 1800, 6)):
        h.observe(ts, replicas)
    assert h.peak(SUNDAY + 10 * H + 3599) == 9
    assert h.peak(SUNDAY + 11 * H) is None


def test_peak_is_the_max_at_the_same_weekday_and_hour_over_the_last_four_weeks() -> None:
    h = ReplicaHistory()
    for week, replicas in enumerate((7, 12, 5, 9, 6)):
        h.observe(SUNDAY + week * WEEK + 10 * H, replicas)
        h.observe(SUNDAY + week * WEEK + DAY + 10 * H, 100)  # Monday, same hour: another slot
    # Week 4 sees weeks 1-4 (12, 5, 9, 6); week 0's 7 has left the window.
    assert h.window(SUNDAY + 4 * WEEK + 10 * H) == [6, 9, 5, 12]
    assert h.peak(SUNDAY + 4 * WEEK + 10 * H) == 12
    assert h.peak(SUNDAY + 4 * WEEK + DAY + 10 * H) == 100


def test_a_new_week_recycles_the_row_of_four_weeks_earlier() -> None:
    h = ReplicaHistory()
    h.observe(SUNDAY + 10 * H, 50)
    h.observe(SUNDAY + 4 * WEEK + 3 * H, 2)  # week 4 takes week 0's row
    assert h.peak(SUNDAY + 4 * WEEK + 10 * H) is None
    assert sorted(w for w in h.weeks if w != EMPTY) == [h.locate(SUNDAY + 4 * WEEK)[0] // 7]


def test_samples_older_than_the_ring_are_refused() -> None:
    h = ReplicaHistory()
    h.observe(SUNDAY + 4 * WEEK, 3)
    assert h.observe(SUNDAY + 10 * H, 40) is False
    assert h.peak(SUNDAY + 4 * WEEK + 10 * H) is None


def test_daily_period_looks_at_the_same_hour_of_the_last_four_days() -> None:
    h = ReplicaHistory()
    for day, replicas in enumerate((30, 4, 8, 6, 5)):
        h.observe(SUNDAY + day * DAY + 9 * H, replicas)
    assert h.window(SUNDAY + 4 * DAY + 9 * H, "daily") == [5, 6, 8, 4]
    assert h.peak(SUNDAY + 4 * DAY + 9 * H, "daily") == 8
    assert h.peak(SUNDAY + 4 * DAY + 9 * H, "weekly") == 5


def test_covered_needs_a_sample_in_every_slot_of_the_week() -> None:
    h = ReplicaHistory()
    for k in range(7 * 24 - 1):
        h.observe(SUNDAY + k * H, 3)
    assert not h.covered(SUNDAY + (7 * 24 - 1) * H)
    h.observe(SUNDAY + (7 * 24 - 1) * H, 3)
    assert h.covered(SUNDAY + (7 * 24 - 1) * H)
    # A later week still sees the filled slots within four weeks, but not after.
    assert h.covered(SUNDAY + 4 * WEEK - 1)
    assert not h.covered(SUNDAY + 5 * WEEK)


def test_covered_daily_needs_every_hour_of_a_day() -> None:
    h = ReplicaHistory()
    for k in range(23):
        h.observe(SUNDAY + k * H, 3)
    assert not h.covered(SUNDAY + 23 * H, "daily")
    h.observe(SUNDAY + 23 * H, 3)
    assert h.covered(SUNDAY + 23 * H, "daily")
    assert ReplicaHistory("UTC", 24).covered(SUNDAY, "daily") is False


def test_size_is_fixed_by_construction_whatever_the_stream_length() -> None:
    h = ReplicaHistory()
    largest = 0
    for k in range(12 * 7 * 24):
        h.observe(SUNDAY + k * H, 1_000_000 - k)
        if k % 97 == 0:
            largest = max(largest, len(json.dumps(h.to_dict(), separators=(",", ":"))))
    assert len(h.rows) == WEEKS
    assert all(len(r) == 168 and r.itemsize == 4 for r in h.rows)
    # Four rows of 168 seven-digit peaks and their commas, plus the keys: about 5.5 KB at most.
    assert largest <= WEEKS * 168 * 8 + 200


def test_observe_reports_whether_the_history_changed() -> None:
    h = ReplicaHistory()
    assert h.observe(SUNDAY, 5) is True
    assert h.observe(SUNDAY + 60, 4) is False
    assert h.observe(SUNDAY + 120, 6) is True
    assert h.observe(SUNDAY + WEEK, 1) is True  # a new week's row


def test_serialised_rows_follow_changes() -> None:
    h = ReplicaHistory()
    h.observe(SUNDAY, 5)
    first = h.to_dict()
    h.observe(SUNDAY + H, 9)
    second = h.to_dict()
    assert first != second
    assert ReplicaHistory.from_dict(second).peak(SUNDAY + H) == 9
    assert h.to_dict() == second


def test_round_trips_through_compact_json() -> None:
    h = ReplicaHistory("Europe/Paris", 2)
    h.observe(SUNDAY, 7)
    h.observe(SUNDAY + WEEK + 5 * H, 11)
    d = json.loads(json.dumps(h.to_dict()))
    assert d["tz"] == "Europe/Paris"
    assert d["width"] == 2
    assert len(d["max"]) == WEEKS and all(len(r.split(",")) == 84 for r in d["max"])
    row = d["max"][d["weeks"].index(h.locate(SUNDAY)[0] // 7)]
    assert [f for f in row.split(",") if f != "-1"] == ["7"]
    back = ReplicaHistory.from_dict(d)
    assert back.to_dict() == h.to_dict()
    assert back.peak(SUNDAY + WEEK + 5 * H) == 11


ROW = ",".join(["1"] * 168)


@pytest.mark.parametrize(
    "bad",
    [
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0], "max": []},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW] * 3},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW + ",1"] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "-2", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "x", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "1.5", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "[1]", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW.replace("1", "9999999999", 1)] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, 0, 0], "max": [[1] * 168] * 4},
        {"tz": "UTC", "width": 5, "weeks": [0, 0, 0, 0], "max": [ROW] * 4},
        {"tz": "Mars/Olympus", "width": 1, "weeks": [0, 0, 0, 0], "max": [ROW] * 4},
        {"tz": "UTC", "width": "1", "weeks": [0, 0, 0, 0], "max": [ROW] * 4},
        {"tz": "UTC", "width": 1, "weeks": [0, 0, True, 0], "max": [ROW] * 4},
    ],
)
def test_from_dict_rejects_anything_but_the_exact_shape(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ReplicaHistory.from_dict(bad)


def test_rejects_widths_that_do_not_divide_a_day_and_unknown_zones() -> None:
    with pytest.raises(ValueError, match="divide"):
        ReplicaHistory("UTC", 5)
    with pytest.raises(ValueError, match=r"1\.\.24"):
        ReplicaHistory("UTC", 0)
    with pytest.raises(ValueError, match="time zone"):
        ReplicaHistory("Nowhere/Special", 1)


def test_dst_repeated_hour_folds_into_one_slot() -> None:
    # 2025-11-02 01:00-02:00 happens twice in America/New_York.
    h = ReplicaHistory("America/New_York", 1)
    first = 1_762_059_600.0  # 01:30 EDT
    h.observe(first, 4)
    h.observe(first + H, 6)  # 01:30 EST
    assert h.locate(first) == h.locate(first + H)
    assert h.peak(first) == 6


def test_peak_matches_a_brute_force_over_random_samples() -> None:
    rng = random.Random(42)
    h = ReplicaHistory("Asia/Tokyo", 1)
    samples: list[tuple[float, int]] = []
    ts = SUNDAY
    for _ in range(3000):
        ts += rng.randint(60, 2 * H)
        r = rng.randint(0, 60)
        h.observe(ts, r)
        samples.append((ts, r))
        if rng.random() < 0.2:
            # Brute force: the slot of ts in the 4 weeks ending at ts is [ts-3w .. ts], same weekday/hour.
            ordinal, slot = h.locate(ts)
            week = ordinal // 7
            expected = [
                v
                for s, v in samples
                if h.locate(s)[1] == slot
                and h.locate(s)[0] % 7 == ordinal % 7
                and week - WEEKS < h.locate(s)[0] // 7 <= week
            ]
            assert h.peak(ts) == (max(expected) if expected else None)


@pytest.mark.parametrize(
    ("peak", "expected"),
    [
        (10, (5, 20)),  # the seed: ×1/2 and ×2
        (7, (4, 14)),  # ceil(3.5) = 4
        (4, (3, 8)),  # min floored at MinimumMinReplicas
        (2, (3, 4)),  # Tortoise quirk: a max candidate >= MinimumMinReplicas is not floored to 12
        (1, (3, 12)),  # max candidate 2 < 3: trunc(3 × 2 / 0.5) = 12
        (0, (3, 12)),
    ],
)
def test_replica_bounds_apply_the_seed_formula_with_tortoises_floors(peak: int, expected: tuple[int, int]) -> None:
    assert replica_bounds(peak) == expected


def test_replica_bounds_use_the_configured_multipliers() -> None:
    assert replica_bounds(10, min_multiplier=0.25, max_multiplier=1.5) == (3, 15)
    assert replica_bounds(10, minimum_min_replicas=6) == (6, 20)
    assert replica_bounds(3, min_multiplier=0.3, max_multiplier=3.0, minimum_min_replicas=1) == (1, 9)
