"""Tandem's VPA recommender against the upstream vectors of reference hpa-vpa-customhpa.md 2.9.

Each ``test_*`` named after a vector reproduces it with exact integer expectations; the rest pin
down behaviour the vectors rely on (fast bucketing == upstream FindBucket, exact serialisation,
policies, configuration) and compare a week of a daily curve with a directly computed weighted
percentile.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.errors import InvalidPolicy
from scaling.recommend import vpa
from scaling.recommend.vpa import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
    ContainerPolicy,
    ContainerState,
    DecayingHistogram,
    ExponentialHistogramOptions,
    LinearHistogramOptions,
    Recommendation,
    VpaConfig,
    cap_to_container_limits,
    confidence_multiplier,
    get_confidence,
    merge_states,
    policies_from_resource_policy,
    recommend,
    with_margin,
)

HOUR = 3600.0
DAY = 24 * HOUR
MIB = 1024 * 1024
#: A multiple of 24 h since both the Unix epoch and Go's zero time, so the decay reference
#: lands exactly on it (2023-11-14T00:00:00Z).
T0 = 1_699_920_000.0
CFG = VpaConfig()


class RecordingHistogram(DecayingHistogram):
    """Records the sample operations the memory-peak logic performs (upstream uses a mock)."""

    __slots__ = ("ops",)

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.ops: list[tuple[str, float, float]] = []

    def add_sample(self, value: float, weight: float, ts: float, half_life: float) -> None:
        self.ops.append(("add", value, ts))
        super().add_sample(value, weight, ts, half_life)

    def subtract_sample(self, value: float, weight: float, ts: float, half_life: float) -> None:
        self.ops.append(("subtract", value, ts))
        super().subtract_sample(value, weight, ts, half_life)


def recording_state() -> tuple[ContainerState, RecordingHistogram]:
    state = ContainerState()
    spy = RecordingHistogram(MEMORY_HISTOGRAM_OPTIONS)
    state.memory = spy
    return state, spy


# ---------------------------------------------------------------------------------------------
# Reference 2.9 vectors
# ---------------------------------------------------------------------------------------------


def test_exponential_bucket_layout_matches_upstream_options_test() -> None:
    # exponential_bucket_layout (util/histogram_options_test.go TestExponentialHistogramOptions)
    o = ExponentialHistogramOptions(500.0, 40.0, 1.5, 1e-15)
    assert o.num_buckets == 6
    assert [o.bucket_start(b) for b in range(6)] == pytest.approx([0, 40, 100, 190, 325, 527.5], abs=1e-9)
    assert {v: o.find_bucket(v) for v in (-1, 39.99, 40, 100, 900)} == {-1: 0, 39.99: 0, 40: 1, 100: 2, 900: 5}


def test_percentile_returns_end_of_bucket_where_cumulative_weight_reaches_threshold() -> None:
    # percentile_returns_bucket_end (util/histogram_test.go TestPercentiles)
    h = DecayingHistogram(LinearHistogramOptions(10.0, 1.0, 1e-15))
    for value in (1, 2, 3, 4):
        h._add(h.options.find_bucket(value), float(value))  # plain (non-decaying) weights
    expected = {0.0: 2, 0.1: 2, 0.2: 3, 0.3: 3, 0.4: 4, 0.5: 4, 0.6: 4, 0.7: 5, 0.8: 5, 0.9: 5, 1.0: 5}
    assert {p: h.percentile(p) for p in expected} == expected


def test_empty_histogram_percentile_is_zero() -> None:
    assert DecayingHistogram(CPU_HISTOGRAM_OPTIONS).percentile(0.9) == 0.0


def test_decay_makes_a_sample_twenty_half_lives_newer_outweigh_a_heavy_old_one() -> None:
    # simple_decay (util/decaying_histogram_test.go TestSimpleDecay): half-life 1 h.
    h = DecayingHistogram(LinearHistogramOptions(10.0, 1.0, 1e-15))
    start = 1_234_567_890.0
    h.add_sample(2, 1000, start, HOUR)
    h.add_sample(1, 1, start + 20 * HOUR, HOUR)
    assert h.percentile(0.999) == 2
    assert h.percentile(1.0) == 3


def test_default_layouts_have_176_buckets_and_upstream_bucket_ends() -> None:
    # default_vpa_bucket_layout (model/aggregations_config.go + util/histogram_options.go)
    cpu, mem = CPU_HISTOGRAM_OPTIONS, MEMORY_HISTOGRAM_OPTIONS
    assert cpu.num_buckets == 176
    assert mem.num_buckets == 176
    assert cpu.bucket_start(cpu.find_bucket(0.5) + 1) == pytest.approx(0.5111345, abs=1e-7)
    assert cpu.bucket_start(cpu.find_bucket(1.0) + 1) == pytest.approx(1.0162814, abs=1e-7)
    assert mem.bucket_start(mem.find_bucket(1024**3) + 1) == pytest.approx(1077095457.98, abs=0.01)


def test_confidence_multiplier_uses_sample_count_in_days() -> None:
    # confidence_multiplier (logic/estimator_test.go TestConfidenceMultiplier): 9 samples, 2 min apart.
    s = ContainerState()
    for i in range(9):
        assert s.add_cpu_samples(T0 + i * 120, [1.0], CFG) == 1
    confidence = get_confidence(s, 24 * HOUR)
    assert confidence == 0.00625
    assert confidence_multiplier(3140, 0.1, 2.0, confidence) == 907460  # 907.46 cores
    assert confidence_multiplier(3_140_000_000, 0.1, 2.0, confidence) == 907_460_000_000  # 9.0746e11
    # no_history: an empty aggregate has confidence 0.
    empty = get_confidence(ContainerState())
    assert empty == 0.0
    assert confidence_multiplier(3140, 1.0, 1.0, empty) == 10**14
    assert confidence_multiplier(3140, 1.0, -1.0, empty) == 0


def test_safety_margin_adds_truncated_fraction() -> None:
    # safety_margin (logic/estimator_test.go TestMarginEstimator)
    assert with_margin(3140, 0.1) == 3454
    assert with_margin(3_140_000_000, 0.1) == 3_454_000_000


def test_pod_minimum_is_split_across_the_containers_that_get_a_recommendation() -> None:
    # pod_minimum_split_two_containers (logic/recommender_test.go TestMinResourcesSplitAcrossContainers)
    states = {}
    for name in ("app", "sidecar", "ignored"):
        s = ContainerState()
        for i in range(60):
            s.add_cpu_samples(T0 + 60 * i, [0.001], CFG)
            s.add_memory_sample(T0 + 60 * i, 1_000_000, CFG)
        states[name] = s
    policies = {"ignored": ContainerPolicy(mode="Off")}  # scaling mode Off: not counted
    recs = recommend(states, T0 + 3600, CFG, policies)
    assert set(recs) == {"app", "sidecar"}
    for rec in recs.values():
        assert rec.target == {"cpu": 12, "memory": 131_072_000}  # 12.5m truncated to 12m
        assert rec.lower_bound == {"cpu": 12, "memory": 131_072_000}


def test_memory_peak_per_aggregation_interval_not_every_sample() -> None:
    # memory_peak_per_interval (model/container_test.go TestAggregateContainerUsageSamples)
    s, spy = recording_state()
    assert s.add_memory_sample(T0, 5, CFG)
    assert s.add_memory_sample(T0 + 12 * HOUR, 10, CFG)
    assert s.add_memory_sample(T0 + 24 * HOUR, 2, CFG)
    assert spy.ops == [
        ("add", 5.0, T0 + 24 * HOUR),
        ("subtract", 5.0, T0 + 24 * HOUR),
        ("add", 10.0, T0 + 24 * HOUR),
        ("add", 2.0, T0 + 48 * HOUR),
    ]
    # CPU: constant weight 0.1 x decay; the second sample at 24 h is a duplicate.
    assert s.add_cpu_samples(T0, [3.14], CFG) == 1
    assert s.add_cpu_samples(T0 + 12 * HOUR, [6.28], CFG) == 1
    assert s.add_cpu_samples(T0 + 24 * HOUR, [1.57], CFG) == 1
    assert s.add_cpu_samples(T0 + 24 * HOUR, [1.0], CFG) == 0
    assert s.cpu.ref == T0
    assert s.total_samples_count == 3
    assert (s.first_sample_ts, s.last_sample_ts) == (T0, T0 + 24 * HOUR)
    # Go's math.Exp2(0.5) is 1.414213562373095, one bit below sqrt(2) (math.pow's)
    weights = [0.1 * 1.0, 0.1 * 1.414213562373095, 0.1 * 2.0]
    assert s.cpu.total == weights[0] + weights[1] + weights[2]
    for cores, weight in zip((3.14, 6.28, 1.57), weights, strict=True):
        assert s.cpu.weights[CPU_HISTOGRAM_OPTIONS.find_bucket(cores)] == weight


def test_decay_factors_are_gos_exp2_bit_for_bit() -> None:
    # Go's math.Exp2 (src/math/exp.go exp2/expmulti, pure Go on amd64) is not correctly rounded;
    # these x (days between a sample and the reference) are ones where it differs from math.pow,
    # the values printed by Go's math.Exp2.  Equal peaks of pods started together tie on a
    # percentile threshold, and one bit of a weight then moves the memory lower bound a bucket.
    from scaling.recommend.vpa.arithmetic import go_exp2

    cases = [
        (0.5, 1.414213562373095),
        (8.424618055555555, 343.60758072173576),
        (11.609837962962963, 3125.427806202403),
        (19.762303240740742, 889295.4266107699),
        (5.89244212962963, 59.402104127637415),
    ]
    for x, go in cases:
        assert go_exp2(x) == go and math.pow(2.0, x) != go
    assert (go_exp2(0.0), go_exp2(-1075.0), go_exp2(1025.0)) == (1.0, 0.0, math.inf)
    assert math.isnan(go_exp2(math.nan))


def test_oom_bumps_the_known_usage_peak_not_the_request() -> None:
    # oom_uses_known_peak (model/container_test.go TestRecordOOMMaxedWithKnownSample)
    s, spy = recording_state()
    assert s.add_memory_sample(T0, 3000 * MIB, CFG)
    spy.ops.clear()
    assert s.record_oom(T0, 1000 * MIB, CFG)
    assert spy.ops == [("subtract", 3000.0 * MIB, T0 + DAY), ("add", 3600.0 * MIB, T0 + DAY)]
    window = s.windows[""]
    assert (window.memory_peak, window.oom_peak) == (3000 * MIB, 3600 * MIB)


def test_oom_in_a_later_window_is_stored_at_that_window_end() -> None:
    # oom_in_later_window (model/container_test.go TestRecordOOMInNewWindow)
    s, spy = recording_state()
    assert s.add_memory_sample(T0, 2000 * MIB, CFG)
    spy.ops.clear()
    assert s.record_oom(T0 + 48 * HOUR, 1000 * MIB, CFG)
    assert spy.ops == [("add", 2400.0 * MIB, T0 + 72 * HOUR)]


def test_oom_more_than_an_interval_before_the_last_memory_sample_is_discarded() -> None:
    # model/container_test.go TestRecordOOMDiscardsOldSample (1.8.1): 30 h before the sample
    s = ContainerState()
    s.add_memory_sample(T0, 1000 * MIB, CFG)
    assert not s.record_oom(T0 - 30 * HOUR, 1000 * MIB, CFG)
    assert not s.record_oom(T0 - 24 * HOUR - 1, 1000 * MIB, CFG)


def test_fresh_oom_near_a_window_boundary_is_recorded() -> None:
    # model/container_test.go TestRecordOOMFreshOOMNearWindowBoundaryIsNotDiscarded
    # (kubernetes/autoscaler#8548): the reference is the last memory sample, not WindowEnd
    s, spy = recording_state()
    assert s.add_memory_sample(T0, 100 * MIB, CFG)
    assert s.add_memory_sample(T0 + DAY, 2000 * MIB, CFG)  # window end T0 + 2 days
    spy.ops.clear()
    assert s.record_oom(T0 + DAY - 1, 1000 * MIB, CFG)
    assert spy.ops == [("subtract", 2000.0 * MIB, T0 + 2 * DAY), ("add", 2400.0 * MIB, T0 + 2 * DAY)]


def test_requests_only_caps_recommendation_to_the_container_limit() -> None:
    # requests_only_caps_to_limit (utils/vpa/capping_test.go TestRecommendationToLimitCapping)
    rec = Recommendation(
        target={"cpu": 20, "memory": 80000},
        lower_bound={"cpu": 10, "memory": 50000},
        upper_bound={"cpu": 100, "memory": 90000},
        uncapped_target={"cpu": 20, "memory": 80000},
    )
    limits = {"cpu": 30, "memory": 70000}
    same, notes = cap_to_container_limits(rec, limits, ContainerPolicy(controlled_values="RequestsAndLimits"))
    assert same == rec and notes == []
    capped, notes = cap_to_container_limits(rec, limits, ContainerPolicy(controlled_values="RequestsOnly"))
    assert capped.target == {"cpu": 20, "memory": 70000}
    assert capped.upper_bound == {"cpu": 30, "memory": 70000}
    assert capped.lower_bound == {"cpu": 10, "memory": 50000}
    assert notes == ["memory capped to container limit"]


def test_steady_workload_for_eight_days_gives_upstream_numbers() -> None:
    # steady_workload_8_days (derived from code, default config)
    s = ContainerState()
    for i in range(11520):
        t = T0 + 60 * i
        s.add_cpu_samples(t, [0.5], CFG)
        s.add_memory_sample(t, 1073741824, CFG)
    assert get_confidence(s) == pytest.approx(7.9993, abs=1e-4)
    rec = recommend({"app": s}, T0 + 60 * 11519, CFG)["app"]
    assert rec.target == {"cpu": 587, "memory": 1238659775}
    assert rec.lower_bound == {"cpu": 586, "memory": 1238350141}
    assert rec.upper_bound == {"cpu": 660, "memory": 1393505688}
    assert rec.uncapped_target == rec.target


# ---------------------------------------------------------------------------------------------
# Exactness of the machinery behind the vectors
# ---------------------------------------------------------------------------------------------


def test_fast_cpu_bucketing_equals_upstream_find_bucket_on_millicores_rounded_up() -> None:
    # VPA: input/metrics/metrics_client.go - metrics-server's nanocore quantity, MilliValue() (up)
    rnd = random.Random(7)
    samples = [m / 1000.0 for m in range(0, 120_000)]
    samples += [rnd.uniform(0, 2000) for _ in range(20_000)] + [0.0099999, 0.01, 1e9, math.inf]
    for cores in samples:
        s = ContainerState()
        s.add_cpu_samples(T0, [cores], CFG)
        if cores * 1e9 >= 9e18:
            millicores = 10**14
        else:
            millicores = min(10**14, -(-round(cores * 1e9) // 1_000_000))
        expected = CPU_HISTOGRAM_OPTIONS.find_bucket(millicores / 1000.0)
        assert s.cpu.weights[expected] > 0, cores


def test_cpu_samples_are_taken_to_millicores_rounding_up_as_quantity_milli_value() -> None:
    assert [vpa.millicores_up(c) for c in (0.0, 0.3, 0.300000001, 0.0201, 1.017, 2.0)] == [0, 300, 301, 21, 1017, 2000]
    # 20.1m is bucket 1 truncated (20m < 20.5m, bucket 2's start) but bucket 2 rounded up (21m)
    s = ContainerState()
    s.add_cpu_samples(T0, [0.0201], CFG)
    assert CPU_HISTOGRAM_OPTIONS.bucket_start(2) == 0.020499999999999987
    assert s.cpu.weights[1] == 0.0 and s.cpu.weights[2] == 0.1


def test_bucket_starts_follow_go_math_pow_not_libm_pow() -> None:
    # Go's Pow squares repeatedly; libm's pow would put memory bucket 4 at 43101250.00000001.
    assert MEMORY_HISTOGRAM_OPTIONS.bucket_start(4) == 43101249.99999996
    assert int(MEMORY_HISTOGRAM_OPTIONS.bucket_start(4)) == 43101249


def test_invalid_cpu_samples_are_dropped_and_the_rest_of_the_batch_kept() -> None:
    s = ContainerState()
    assert s.add_cpu_samples(T0, [0.2, -1.0, math.nan, 0.4], CFG) == 2
    assert s.add_cpu_samples(T0 + 60, [-1.0], CFG) == 0
    assert s.add_cpu_samples(T0 + 60, [], CFG) == 0
    assert s.total_samples_count == 2 and s.last_sample_ts == T0
    assert s.add_cpu_samples(T0 + 60, [0.3, 0.1], CFG) == 2


def test_reference_time_moves_after_a_hundred_half_lives_and_old_weight_vanishes() -> None:
    s = ContainerState()
    s.add_cpu_samples(T0, [4.0], CFG)
    s.add_cpu_samples(T0 + 101 * DAY, [0.2], CFG)
    assert s.cpu.ref == T0 + 101 * DAY
    assert s.cpu.percentile(1.0) == CPU_HISTOGRAM_OPTIONS.bucket_start(CPU_HISTOGRAM_OPTIONS.find_bucket(0.2) + 1)
    assert s.cpu.min_bucket == s.cpu.max_bucket == CPU_HISTOGRAM_OPTIONS.find_bucket(0.2)


def test_memory_windows_are_kept_per_pod() -> None:
    s = ContainerState()
    s.add_memory_sample(T0, 100 * MIB, CFG, pod="a")
    s.add_memory_sample(T0 + 60, 300 * MIB, CFG, pod="b")
    s.add_memory_sample(T0 + 120, 200 * MIB, CFG, pod="a")
    assert s.windows["a"].memory_peak == 200 * MIB
    assert s.windows["b"].memory_peak == 300 * MIB
    # One peak per pod in the open interval (b's window ends a minute later: slightly heavier).
    assert s.memory.total == pytest.approx(1.0 + math.pow(2.0, 60 / DAY), rel=1e-12)
    # A pod silent for a whole aggregation window (8 days) is forgotten when another pod appears.
    s.add_memory_sample(T0 + 3 * DAY, 100 * MIB, CFG, pod="c")
    assert set(s.windows) == {"a", "b", "c"}
    s.add_memory_sample(T0 + 8 * DAY + 60, 100 * MIB, CFG, pod="d")
    assert set(s.windows) == {"a", "c", "d"}


def test_older_memory_sample_is_rejected() -> None:
    s = ContainerState()
    assert s.add_memory_sample(T0 + 60, 100 * MIB, CFG)
    assert not s.add_memory_sample(T0, 200 * MIB, CFG)
    assert not s.add_memory_sample(T0 + 120, -1, CFG)


def test_merge_aligns_reference_times_and_combines_sample_counts() -> None:
    a, b = ContainerState(), ContainerState()
    for i in range(10):
        a.add_cpu_samples(T0 + 60 * i, [0.1], CFG)
        b.add_cpu_samples(T0 + 5 * DAY + 60 * i, [1.0], CFG)
    merged = merge_states([a, b], CFG)
    assert merged.total_samples_count == 20
    assert (merged.first_sample_ts, merged.last_sample_ts) == (T0, T0 + 5 * DAY + 540)
    assert merged.cpu.ref == b.cpu.ref
    assert a.cpu.ref == T0  # inputs untouched
    # b's samples are 2^5 times heavier than a's: the median is in b's bucket.
    assert merged.cpu.percentile(0.5) == b.cpu.percentile(0.5)


# ---------------------------------------------------------------------------------------------
# Policies, capping, rounding, expiry
# ---------------------------------------------------------------------------------------------


def steady_state(cores: float, memory: int, minutes: int = 1440) -> ContainerState:
    s = ContainerState()
    for i in range(minutes):
        s.add_cpu_samples(T0 + 60 * i, [cores], CFG)
        s.add_memory_sample(T0 + 60 * i, memory, CFG)
    return s


def test_min_and_max_allowed_cap_target_and_bounds_but_not_uncapped_target() -> None:
    s = steady_state(0.5, 1073741824)
    policies = {"*": ContainerPolicy(min_allowed={"cpu": 600}, max_allowed={"memory": 1_000_000_000})}
    rec = recommend({"app": s}, T0 + DAY, CFG, policies)["app"]
    assert rec.uncapped_target == {"cpu": 587, "memory": 1238659775}
    assert rec.target == {"cpu": 600, "memory": 1_000_000_000}
    assert rec.lower_bound["cpu"] == 600 and rec.upper_bound["memory"] == 1_000_000_000


def test_global_max_fills_resources_missing_from_max_allowed_and_zero_means_unbounded() -> None:
    s = steady_state(0.5, 1073741824)
    cfg = VpaConfig(container_recommendation_max_allowed_cpu=500, container_recommendation_max_allowed_memory=10**9)
    policies = {"app": ContainerPolicy(max_allowed={"memory": 0})}  # a zero bound: no bound
    rec = recommend({"app": s}, T0 + DAY, cfg, policies)["app"]
    assert rec.target == {"cpu": 500, "memory": 1238659775}


def test_controlled_resources_and_rounding() -> None:
    s = steady_state(0.5, 1073741824)
    cfg = VpaConfig(round_cpu_millicores=50, round_memory_bytes=MIB)
    rec = recommend({"app": s}, T0 + DAY, cfg, {"app": ContainerPolicy(controlled_resources=("cpu",))})["app"]
    assert rec.target == {"cpu": 600} and rec.uncapped_target == {"cpu": 600}
    rec = recommend({"app": s}, T0 + DAY, cfg)["app"]
    assert rec.target["memory"] == 1182 * MIB  # 1238659775 rounded up to a MiB multiple


def test_expired_aggregate_is_recommended_until_the_hourly_garbage_collection() -> None:
    # VPA: model/cluster.go RateLimitedGarbageCollectAggregateCollectionStates, run after
    # UpdateVPAs (routines/recommender.go RunOnce), and model/aggregate_container_state.go isExpired
    s = steady_state(0.5, 1073741824, minutes=10)  # last CPU sample at T0 + 540
    states = {"app": s}
    last_gc = vpa.collect_garbage(states, T0 + 600, None, CFG)  # the first run collects
    assert last_gc == T0 + 600 and states == {"app": s}
    expiry = T0 + 540 + 8 * DAY
    assert s.is_expired(expiry, CFG) and not s.is_expired(expiry - 1, CFG)
    # a run at the expiry, 59 minutes after a collection: still recommended, not collected
    assert recommend(states, expiry, CFG)["app"].target == {"cpu": 587, "memory": 1238659775}
    assert vpa.collect_garbage(states, expiry, expiry - 3540, CFG) == expiry - 3540
    assert states == {"app": s}
    # the run an hour after the last collection drops it (after recommending)
    assert vpa.collect_garbage(states, expiry + 60, expiry - 3540, CFG) == expiry + 60
    assert states == {}


def test_aggregate_without_cpu_samples_recommends_cpu_at_the_minimum() -> None:
    # VPA: routines/vpa.go GetContainerNameToAggregateStateMap keeps every aggregate; the empty
    # CPU histogram's percentile is 0, raised to the pod minimum (25m); confidence 0 makes the
    # memory upper bound x Inf (clamped to 1e14) and the lower bound x 0 (raised to 250 MiB).
    s = ContainerState()
    for i in range(10):
        s.add_memory_sample(T0 + 60 * i, 1073741824, CFG, pod="a")
    assert s.total_samples_count == 0 and not s.is_expired(T0 + 30 * DAY, CFG)
    rec = recommend({"app": s}, T0 + 600, CFG)["app"]
    assert rec.target == {"cpu": 25, "memory": 1238659775}
    assert rec.lower_bound == {"cpu": 25, "memory": 250 * MIB}
    assert rec.upper_bound == {"cpu": 25, "memory": 10**14}
    assert recommend({"app": ContainerState()}, T0, CFG)["app"].target == {"cpu": 25, "memory": 250 * MIB}


def test_cpu_samples_of_one_scrape_in_separate_batches_are_deduplicated_per_pod() -> None:
    # VPA: model/container.go addCPUSample - per container: MeasureStart must be after the
    # container's LastCPUSampleStart; other pods' samples at the same time are not duplicates.
    one, split = ContainerState(), ContainerState()
    assert one.add_cpu_samples(T0, [0.5, 0.25, 1.0], CFG, ["a", "b", "c"]) == 3
    assert [split.add_cpu_samples(T0, [c], CFG, [p]) for p, c in (("a", 0.5), ("b", 0.25), ("c", 1.0))] == [1, 1, 1]
    assert split.add_cpu_samples(T0, [0.7], CFG, ["b"]) == 0  # b's duplicate
    assert split.add_cpu_samples(T0 - 60, [0.7], CFG, ["d"]) == 1  # d's first: older is fine
    assert split.add_cpu_samples(T0, [-0.1, 0.7], CFG, ["e", "e"]) == 1  # invalid first, time kept
    assert one.add_cpu_samples(T0 - 60, [0.7], CFG, ["d"]) == 1
    assert one.add_cpu_samples(T0, [0.7], CFG, ["e"]) == 1
    assert split.to_dict()["cpu"] == one.to_dict()["cpu"]
    assert (split.total_samples_count, split.first_sample_ts, split.last_sample_ts) == (5, T0 - 60, T0)


def test_pod_memory_windows_stay_aligned_through_a_long_gap() -> None:
    # VPA: model/container.go addMemorySample shifts WindowEnd by whole intervals past the sample;
    # a live pod keeps its ContainerState through a metrics gap, whoever reports first after it.
    s = ContainerState()
    for pod in ("a", "b"):
        s.add_memory_sample(T0, 500 * MIB, CFG, pod=pod)
    assert s.windows["a"].end == T0 + DAY
    s.add_memory_sample(T0 + 3 * DAY + 30, 400 * MIB, CFG, pod="c")  # a new pod first
    s.add_memory_sample(T0 + 3 * DAY + 60, 600 * MIB, CFG, pod="a")
    assert s.windows["a"].end == T0 + 4 * DAY and s.windows["c"].end == T0 + 4 * DAY + 30
    s.forget_pods({"a", "c"})  # VPA: model/cluster.go DeletePod
    assert sorted(s.windows) == ["a", "c"]
    # without a pod list, a pod silent for a whole aggregation window (8 days) is forgotten
    s.add_memory_sample(T0 + 11 * DAY + 30, 600 * MIB, CFG, pod="d")  # c last seen 8 days before
    assert sorted(s.windows) == ["a", "d"]
    s.add_memory_sample(T0 + 11 * DAY + 61, 600 * MIB, CFG, pod="e")
    assert sorted(s.windows) == ["d", "e"]


def test_policies_from_a_vpa_resource_policy() -> None:
    policies = policies_from_resource_policy(
        {
            "containerPolicies": [
                {"containerName": "*", "minAllowed": {"cpu": "100m", "memory": "50Mi"}, "maxAllowed": {"cpu": 2}},
                {"containerName": "proxy", "mode": "Off"},
                {"containerName": "app", "controlledResources": ["memory"], "controlledValues": "RequestsOnly"},
            ]
        }
    )
    assert policies["*"] == ContainerPolicy(min_allowed={"cpu": 100, "memory": 50 * MIB}, max_allowed={"cpu": 2000})
    assert policies["proxy"].mode == "Off"
    assert policies["app"].controlled_resources == ("memory",)
    assert policies["app"].controlled_values == "RequestsOnly"
    with pytest.raises(InvalidPolicy, match=r"containerPolicies\[0\]\.mode"):
        policies_from_resource_policy({"containerPolicies": [{"containerName": "x", "mode": "Sometimes"}]})


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


def test_config_defaults_are_upstream_defaults() -> None:
    c = VpaConfig()
    assert (c.target_cpu_percentile, c.recommendation_lower_bound_cpu_percentile) == (0.9, 0.5)
    assert c.recommendation_upper_bound_memory_percentile == 0.95
    assert (c.recommendation_margin_fraction, c.pod_recommendation_min_cpu_millicores) == (0.15, 25.0)
    assert c.pod_recommendation_min_memory_mb == 250.0
    assert (c.memory_aggregation_interval, c.memory_aggregation_interval_count) == (86400.0, 8)
    assert c.cpu_histogram_decay_half_life == c.memory_histogram_decay_half_life == 86400.0
    assert c.confidence_interval_cpu == c.confidence_interval_memory == 86400.0
    assert (c.oom_bump_up_ratio, c.oom_min_bump_up_bytes) == (1.2, 104857600.0)
    assert c.memory_aggregation_window_length == 8 * DAY


def test_config_accepts_kebab_camel_and_snake_names_with_go_durations_and_quantities() -> None:
    c = VpaConfig.from_mapping(
        {
            "target-cpu-percentile": 0.8,
            "targetMemoryPercentile": "0.85",
            "recommendation_margin_fraction": 0.2,
            "memoryAggregationInterval": "12h",
            "cpu-histogram-decay-half-life": "1h30m",
            "memory_histogram_decay_half_life": 7200,
            "oomBumpUpRatio": 1.5,
            "containerRecommendationMaxAllowedCPU": "1500m",
            "container-recommendation-max-allowed-memory": "2Gi",
            "roundCPUMillicores": 10,
        }
    )
    assert (c.target_cpu_percentile, c.target_memory_percentile) == (0.8, 0.85)
    assert c.memory_aggregation_interval == 12 * HOUR
    assert c.cpu_histogram_decay_half_life == 5400.0 and c.memory_histogram_decay_half_life == 7200.0
    assert c.container_recommendation_max_allowed_cpu == 1500
    assert c.container_recommendation_max_allowed_memory == 2 * 1024**3
    assert c.round_cpu_millicores == 10 and c.oom_bump_up_ratio == 1.5
    assert VpaConfig.from_mapping({}) == VpaConfig() == VpaConfig.from_mapping(None)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"target-cpu-percentil": 0.9}, "target-cpu-percentil"),
        ({"targetCpuPercentile": 1.5}, "targetCpuPercentile"),
        ({"memory-aggregation-interval": "soon"}, "memory-aggregation-interval"),
        ({"memory-aggregation-interval-count": 0}, "memory-aggregation-interval-count"),
        ({"recommendation-margin-fraction": True}, "recommendation-margin-fraction"),
        ({"target-cpu-percentile": 0.9, "targetCPUPercentile": 0.8}, "targetCPUPercentile"),
    ],
)
def test_config_rejects_unknown_or_bad_settings_naming_the_key(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=f"vpa.{field}"):
        VpaConfig.from_mapping(raw)


# ---------------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("cpu"),
            st.floats(0, 3 * DAY),
            st.lists(st.floats(-0.5, 64.0, allow_nan=False), max_size=6),
        ),
        st.tuples(
            st.just("mem"), st.floats(0, 3 * DAY), st.integers(-10, 2 * 1024**3), st.sampled_from(["", "p1", "p2"])
        ),
        st.tuples(st.just("oom"), st.floats(0, 3 * DAY), st.integers(0, 1024**3), st.sampled_from(["", "p1"])),
    ),
    max_size=40,
)


def apply_ops(state: ContainerState, ops: list[Any], start: float) -> float:
    t = start
    for op in ops:
        t += op[1]
        if op[0] == "cpu":
            state.add_cpu_samples(t, op[2], CFG)
        elif op[0] == "mem":
            state.add_memory_sample(t, op[2], CFG, pod=op[3])
        else:
            state.record_oom(t, op[2], CFG, pod=op[3])
    return t


@settings(max_examples=150, deadline=None)
@given(_ops, _ops)
def test_state_round_trips_exactly_through_json(first: list[Any], then: list[Any]) -> None:
    s = ContainerState()
    t = apply_ops(s, first, T0)
    data = s.to_dict()
    text = json.dumps(data)
    restored = ContainerState.from_dict(json.loads(text))
    assert restored.to_dict() == data
    assert json.dumps(restored.to_dict()) == text
    # The restored state behaves identically from here on, bit for bit.
    apply_ops(s, then, t)
    apply_ops(restored, then, t)
    assert restored.to_dict() == s.to_dict()
    for h, r in ((s.cpu, restored.cpu), (s.memory, restored.memory)):
        assert (h.min_bucket, h.max_bucket) == (r.min_bucket, r.max_bucket)
    assert recommend({"c": restored}, t + DAY, CFG) == recommend({"c": s}, t + DAY, CFG)


@settings(max_examples=150, deadline=None)
@given(_ops, _ops)
def test_a_histogram_serialised_again_follows_every_change(first: list[Any], then: list[Any]) -> None:
    # to_dict keeps its answer until the weights change (a worker writes each slot every scrape,
    # and the memory histogram changes about once a day); a copy serialises from scratch.
    s = ContainerState()
    t = apply_ops(s, first, T0)
    for h in (s.cpu, s.memory):
        assert h.to_dict() == h.copy().to_dict()
    apply_ops(s, then, t)
    for h in (s.cpu, s.memory):
        assert h.to_dict() == h.copy().to_dict()


_PERCENTILES = (0.0, 0.5, 0.9, 0.95, 1.0)


@settings(max_examples=150, deadline=None)
@given(_ops, _ops)
def test_percentiles_from_one_walk_equal_each_percentile_and_follow_every_change(
    first: list[Any], then: list[Any]
) -> None:
    # The recommender reads three percentiles per histogram from one remembered walk; it must give
    # the walk of upstream's Percentile bit for bit, before and after the histogram changes (every
    # operation that changes the weights forgets the remembered answer).
    s = ContainerState()
    t = apply_ops(s, first, T0)
    for h in (s.cpu, s.memory):
        assert h.percentiles(_PERCENTILES) == tuple(h.percentile(p) for p in _PERCENTILES)
    apply_ops(s, then, t)
    for h in (s.cpu, s.memory):
        assert h.percentiles(_PERCENTILES) == tuple(h.percentile(p) for p in _PERCENTILES)
        assert h.percentiles((0.9, 0.5)) == (h.percentile(0.9), h.percentile(0.5))


def test_percentiles_are_forgotten_when_the_histogram_changes() -> None:
    h = DecayingHistogram(LinearHistogramOptions(10.0, 1.0, 1e-15))
    h.ref = T0
    assert h.percentiles((0.5,)) == (0.0,)
    h.add_sample(3, 1.0, T0, DAY)
    assert h.percentiles((0.5,)) == (4.0,)
    h.subtract_sample(3, 1.0, T0, DAY)
    h.add_sample(6, 1.0, T0, DAY)
    assert h.percentiles((0.5,)) == (7.0,)
    other = DecayingHistogram(h.options)
    other.add_sample(1, 5.0, T0, DAY)
    h.merge(other, DAY)
    assert h.percentiles((0.5,)) == (2.0,)
    h.shift_reference(T0 + 200 * DAY, DAY)  # every weight scaled to nothing
    assert h.percentiles((0.5,)) == (0.0,)


def _go_pow_by_squaring(x: float, y: float) -> float:
    """Go's math.Pow for an integer y > 0 or < 0 on a normal x > 0 (its loop, without shortcuts)."""
    a1, ae = 1.0, 0
    x1, xe = math.frexp(x)
    i = int(abs(y))
    while i != 0:
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1, ae = 1 / a1, -ae
    return math.ldexp(a1, ae)


@settings(max_examples=2000, deadline=None)
@given(st.floats(min_value=1.0, max_value=2.0**499, allow_nan=False, allow_infinity=False))
def test_go_pow_shortcut_for_the_lower_bound_exponent_is_bit_exact(x: float) -> None:
    # The lower bound multiplies by (1 + 0.001/confidence)^-2 on every recommendation; the
    # shortcut 1/(x*x) must give Go's squaring loop bit for bit.
    assert vpa.arithmetic.go_pow(x, -2.0).hex() == _go_pow_by_squaring(x, -2.0).hex()
    near_one = 1.0 + x / 2.0**500  # confidences of months: x just above 1
    assert vpa.arithmetic.go_pow(near_one, -2.0).hex() == _go_pow_by_squaring(near_one, -2.0).hex()


_scrapes = st.lists(
    st.tuples(
        st.sampled_from([0.0, -30.0, 30.0, 60.0, 3 * HOUR, DAY, 2 * DAY]),
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2**33) | st.sampled_from([0, 512 * MIB, -1])),
            max_size=4,
        ),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(_scrapes)
def test_memory_samples_of_a_scrape_at_once_equal_them_one_by_one(scrapes: list[Any]) -> None:
    # own.observe hands a scrape's memory samples over at once; the shortcut for a sample inside
    # its pod's window that does not beat the peak must leave exactly the state the general path does.
    batch, single = ContainerState(), ContainerState()
    t = T0
    for dt, samples in scrapes:
        t += dt
        batch.add_memory_samples(t, samples, CFG)
        for pod, b in samples:
            single.add_memory_sample(t, b, CFG, pod=pod)
        assert batch.to_dict() == single.to_dict()


def test_from_dict_rejects_malformed_state() -> None:
    good = steady_state(0.5, 1024**3, minutes=5).to_dict()
    for bad in (
        {**good, "v": 2},
        {**good, "n": -1},
        {**good, "cpu": {**good["cpu"], "b": [999], "w": [1.0]}},
        {**good, "cpu": {**good["cpu"], "w": []}},
        {**good, "win": {"": [None, -1, 0, None]}},
    ):
        with pytest.raises(ValueError):
            ContainerState.from_dict(bad)


# ---------------------------------------------------------------------------------------------
# A week of a daily curve
# ---------------------------------------------------------------------------------------------


def daily_curve(minutes: int, seed: int = 42) -> list[tuple[float, float, int]]:
    """(ts, cores, bytes) once a minute: sinusoids with a daily period plus seeded noise."""
    rnd = random.Random(seed)
    out = []
    for i in range(minutes):
        phase = 2 * math.pi * i / 1440
        cores = max(0.0, 0.6 + 0.35 * math.sin(phase) + rnd.gauss(0, 0.06))
        memory = int(1.5e9 + 4e8 * math.sin(phase - 1.0) + rnd.gauss(0, 2e7))
        out.append((T0 + 60 * i, cores, memory))
    return out


def weighted_percentile(values: list[float], weights: list[float], p: float) -> float:
    pairs = sorted(zip(values, weights, strict=True))
    threshold = p * math.fsum(weights)
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= threshold:
            return value
    return pairs[-1][0]


def test_week_of_daily_curve_percentiles_match_direct_weighted_percentiles() -> None:
    samples = daily_curve(7 * 1440)
    s = ContainerState()
    for ts, cores, memory in samples:
        assert s.add_cpu_samples(ts, [cores], CFG) == 1
        assert s.add_memory_sample(ts, memory, CFG)
    assert s.cpu.ref is not None and s.memory.ref is not None
    half_life = CFG.cpu_histogram_decay_half_life

    # CPU: every sample, truncated to millicores, weight 0.1 x 2^((t - ref)/half-life).
    values = [int(c * 1000.0) / 1000.0 for _, c, _ in samples]
    weights = [0.1 * 2 ** ((ts - s.cpu.ref) / half_life) for ts, _, _ in samples]
    errors = []
    for p in (0.5, 0.75, 0.9, 0.95, 0.99):  # the recommender's percentiles and around
        direct = weighted_percentile(values, weights, p)
        from_histogram = s.cpu.percentile(p)
        # The histogram answers with the end of the bucket holding the direct percentile...
        assert from_histogram == CPU_HISTOGRAM_OPTIONS.bucket_start(CPU_HISTOGRAM_OPTIONS.find_bucket(direct) + 1)
        # ...so it overshoots by less than one bucket.  Buckets grow by 5 %, but bucket n spans
        # start x (r^(n+1) - 1)/(r^n - 1): 6.2 % wide at 0.5 cores, 5.5 % at 1 core, -> 5 % above.
        assert direct <= from_histogram < direct * 1.0625
        errors.append(from_histogram / direct - 1)
    assert sum(errors) / len(errors) < 0.05

    # Memory: one peak per 24 h window opened by the first sample, stored at the window end.
    peaks: dict[float, int] = {}
    for ts, _, memory in samples:
        end = T0 + DAY * (math.floor((ts - T0) / DAY) + 1)
        peaks[end] = max(peaks.get(end, 0), memory)
    ends = sorted(peaks)
    mem_weights = [2 ** ((end - s.memory.ref) / half_life) for end in ends]
    direct_mem = weighted_percentile([float(peaks[e]) for e in ends], mem_weights, 0.9)
    assert s.memory.percentile(0.9) == MEMORY_HISTOGRAM_OPTIONS.bucket_start(
        MEMORY_HISTOGRAM_OPTIONS.find_bucket(direct_mem) + 1
    )
    assert direct_mem <= s.memory.percentile(0.9) < direct_mem * 1.0625

    # The recommendation applies margin and minimums to exactly those percentiles.
    rec = recommend({"app": s}, samples[-1][0], CFG)["app"]
    direct_cpu_target = weighted_percentile(values, weights, 0.9)
    assert rec.target["cpu"] == with_margin(int(s.cpu.percentile(0.9) * 1000.0), 0.15)
    assert rec.target["memory"] == with_margin(int(s.memory.percentile(0.9)), 0.15)
    assert direct_cpu_target * 1150 * 0.999 <= rec.target["cpu"] < direct_cpu_target * 1150 * 1.0625


def test_week_of_state_serialises_compactly() -> None:
    s = ContainerState()
    for ts, cores, memory in daily_curve(7 * 1440):
        s.add_cpu_samples(ts, [cores], CFG)
        s.add_memory_sample(ts, memory, CFG)
    size = len(json.dumps(s.to_dict(), separators=(",", ":")))
    # The module docstring quotes this figure (964 bytes, about 1 KB); keep them in step.
    assert 800 <= size <= 1400, size


def test_module_exports_resolve() -> None:
    for name in vpa.__all__:
        assert hasattr(vpa, name), name
