"""The seasonal load forecaster of ``spec.predictive`` (scaling/forecast.py) on constructed series,
and the predictive wrapper's rule (scaling/policies/predictive.py): raise ahead of a forecast, never
below the reactive rule, within the cap, only through the gates."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.events import ContainerResources, HpaEvent, PodStatus, Qty, WorkloadEvent, WorkloadRef
from scaling.forecast import LoadProfile, load_of
from scaling.outcome import Outcome, View
from scaling.policies.bounds import Bounds, ContainerBounds
from scaling.policies.predictive import KEY, Predictive, PredictiveSpec, parse_predictive

MONDAY = 1_762_732_800  # 2025-11-10T00:00:00Z, a Monday
DAY = 86400


def feed(p: LoadProfile, start: float, days: float, load: Callable[[float], float], step: int = 60) -> None:
    for i in range(0, int(days * DAY), step):
        p.observe(start + i, load(start + i))


def sine(t: float) -> float:
    return 5 + 3 * math.sin(2 * math.pi * (t % DAY) / DAY)


def weekly(t: float) -> float:
    """10 replicas' worth on weekdays, 2 on Saturday and Sunday (UTC)."""
    return 2.0 if datetime.fromtimestamp(t, UTC).weekday() >= 5 else 10.0


def test_a_daily_sine_is_forecast_from_the_same_time_of_the_last_three_days() -> None:
    p = LoadProfile()
    feed(p, MONDAY, 3, sine)
    f = p.forecast(MONDAY + 3 * DAY + 6 * 3600)  # 06:00, the sine's peak of 8
    assert f is not None
    assert (round(f.load, 4), f.basis, f.periods, f.error) == (8.0127, "daily", 3, 0.0)
    assert round(f.versus_naive or 0, 4) == 0.0427  # the profile knows the curve, "as before" lags it
    assert p.level == 1_001_836


def test_a_weekly_pattern_needs_the_same_weekday_the_daily_profile_misses_the_weekend() -> None:
    p = LoadProfile()
    feed(p, MONDAY, 5, weekly)  # Monday to Friday at 10
    saturday = MONDAY + 5 * DAY
    feed(p, saturday, 1 / 24, weekly)  # the first hour of Saturday, at 2
    f = p.forecast(saturday + 4200)
    assert f is not None
    # The last three days were weekdays: the level has pulled 10 down towards 2, the error shows it.
    assert (round(f.load, 5), f.basis, f.periods, f.error) == (3.48098, "daily", 3, 143.3)
    p = LoadProfile()
    feed(p, MONDAY, 12, weekly)  # to the second Saturday
    saturday = MONDAY + 12 * DAY
    feed(p, saturday, 1 / 24, weekly)
    f = p.forecast(saturday + 4200)
    assert f is not None
    assert (round(f.load, 6), f.basis, f.periods, f.error) == (1.999972, "weekday", 1, 0.0)
    assert f.describe() == "same weekday, 1 week, recent error 0 %"


def test_a_level_shift_moves_the_forecast_within_hours_not_weeks() -> None:
    p = LoadProfile()
    feed(p, MONDAY, 2, lambda t: 4.0)
    day3 = MONDAY + 2 * DAY
    feed(p, day3, 1 / 24, lambda t: 6.0)
    f = p.forecast(day3 + 3600 + 300)
    assert f is not None
    assert (round(f.load, 6), f.error, p.level) == (5.738408, 11.4, 1_434_602)
    feed(p, day3 + 3600, 2 / 24, lambda t: 6.0)
    f = p.forecast(day3 + 3 * 3600 + 300)
    assert f is not None
    assert (round(f.load, 5), f.error, p.level) == (5.99552, 2.1, 1_498_880)


def test_a_service_closed_at_night_is_forecast_at_full_level_at_the_next_opening() -> None:
    """Open 07:00 to 21:10 on Monday, to 21:00 on Tuesday: Tuesday's 21:00 slot, empty where the
    profile expects 2, pulls the level to 0.70.  Through the closed night (nothing where the profile
    expects nothing) it relaxes to 1, so Wednesday's 07:00 is forecast at 3, not at 2.1."""

    def load(t: float) -> float:
        close = 21 + 10 / 60 if t < MONDAY + DAY else 21.0
        return 3.0 if 7 <= (t % DAY) / 3600 < close else 0.0

    p = LoadProfile()
    feed(p, MONDAY, 2 + 6 / 24 + 59 / 1440, load)  # to Wednesday 06:59
    f = p.forecast(MONDAY + 2 * DAY + 7 * 3600 + 15)
    assert f is not None
    assert (round(f.load, 6), f.basis, f.periods, p.level) == (2.999958, "daily", 2, 999_986)


def test_noise_averages_out_and_shows_as_a_small_error() -> None:
    rng = random.Random(7)
    p = LoadProfile()
    feed(p, MONDAY, 3, lambda t: 5.0 * (1 + rng.uniform(-0.2, 0.2)))
    f = p.forecast(MONDAY + 3 * DAY + 60)
    assert f is not None
    assert (round(f.load, 6), f.basis, f.periods, f.error) == (5.016024, "daily", 3, 2.2)
    assert round(f.versus_naive or 0, 4) == 1.0209  # noise around a constant: no pattern to use


def test_a_wandering_load_is_forecast_better_by_its_last_value_than_by_the_profile() -> None:
    """A mean-reverting random walk: the profile forecasts the mean it reverts to, the naive forecast
    ("as the slot before") follows it; the ratio above 1 keeps spec.predictive out of the way."""
    rng = random.Random(11)
    x = [8.0]

    def walk(t: float) -> float:
        x[0] = max(1.0, x[0] + 0.02 * (8.0 - x[0]) + rng.gauss(0, 0.4))
        return x[0]

    p = LoadProfile()
    feed(p, MONDAY, 3, walk)
    f = p.forecast(MONDAY + 3 * DAY + 60)
    assert f is not None
    assert (round(f.load, 4), f.error, round(f.versus_naive or 0, 4)) == (6.2326, 24.4, 1.4418)


def test_too_little_history_forecasts_nothing() -> None:
    p = LoadProfile()
    assert p.forecast(MONDAY) is None
    assert p.history(MONDAY) == 0.0
    feed(p, MONDAY, 0.5, lambda t: 5.0)
    assert p.forecast(MONDAY + DAY // 2 + 60) is None  # today's own slots are not a profile
    assert p.history(MONDAY + DAY // 2) == 43200.0


def test_a_profile_saved_and_restored_mid_stream_forecasts_the_same() -> None:
    whole, halves = LoadProfile(), LoadProfile()
    feed(whole, MONDAY, 3, sine)
    feed(halves, MONDAY, 1.5, sine)
    halves = LoadProfile.from_dict(halves.to_dict())
    feed(halves, MONDAY + 1.5 * DAY, 1.5, sine)
    assert halves.to_dict() == whole.to_dict()
    assert halves.forecast(MONDAY + 3 * DAY + 3600) == whole.forecast(MONDAY + 3 * DAY + 3600)


def test_a_bad_saved_profile_is_refused() -> None:
    bad = LoadProfile().to_dict()
    bad["rows"] = ["1,2"] * len(bad["rows"])
    with pytest.raises(ValueError, match="rows of 96 slots"):
        LoadProfile.from_dict(bad)


def test_the_load_is_the_hpas_unrounded_desired_replicas() -> None:
    metrics = (
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
    )
    current = (
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 90}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12500m"}}},
    )
    assert load_of(4, metrics, current) == 6.0  # 4 × 90/60 beats 4 × 12.5/10
    assert load_of(4, metrics, current[:1]) is None  # not one current value per metric
    assert load_of(4, None, None) is None


# --- the predictive rule ---------------------------------------------------------------------

REF = WorkloadRef("c", "ns", "Deployment", "web")
TARGET60 = {"type": "Utilization", "averageUtilization": 60}
CPU60 = ({"type": "Resource", "resource": {"name": "cpu", "target": TARGET60}},)


class Reactive:
    """A stand-in kind: asks for ``wanted`` replicas (``None``: leaves them), within 1..max_replicas."""

    kind = "Toy"
    name = "web"
    workload = REF

    def __init__(
        self, wanted: int | None = None, max_replicas: int = 20, containers: Mapping[str, ContainerBounds] | None = None
    ) -> None:
        self.wanted = wanted
        self.max_replicas = max_replicas
        self.containers = containers or {}
        #: Requests the kind asks for (milli-units), ``{}``: none.
        self.requests: dict[str, dict[str, int]] = {}
        self.outcome = Outcome()

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        self.outcome = Outcome(replicas=self.wanted, requests=dict(self.requests), reasons=["reactive"])
        return self.outcome

    def bounds(self) -> Bounds:
        return Bounds("Toy", "web", 1, self.max_replicas, containers=self.containers)

    def hpa_template(self, memory: Mapping[str, Any]) -> None:
        return None

    def vpa_template(self) -> None:
        return None


def view(
    tick: float, replicas: int, load: float, pods: tuple[PodStatus, ...] | None = None, cpu: str | None = None
) -> View:
    """The tick's view; with ``cpu``, one container ``web`` requesting that much (limit 2 cores)."""
    containers = {} if cpu is None else {"web": ContainerResources({"cpu": Qty.of(cpu)}, {"cpu": Qty.of("2")})}
    spec = WorkloadEvent(tick, REF, replicas, containers, pods=pods)
    utilization = round(load / replicas * 60)
    hpa = HpaEvent(
        tick,
        REF,
        replicas,
        replicas,
        metrics=CPU60,
        current_metrics=(
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": utilization}}},
        ),
    )
    return View(tick, REF, spec, hpa, None, {}, {}, {"sync_period": 15.0})


def ramp(t: float) -> float:
    """4 replicas' worth, 8 from 09:00 to 17:00 UTC every day."""
    return 8.0 if 9 * 3600 <= t % DAY < 17 * 3600 else 4.0


def run_days(policy: Predictive, memory: dict[str, Any], days: int, cpu: str | None = None) -> None:
    for i in range(0, days * DAY, 60):
        t = MONDAY + i
        policy.decide(view(t, 4, ramp(t), cpu=cpu), memory)


def test_it_pre_scales_before_the_daily_ramp_and_says_why() -> None:
    inner = Reactive()
    policy = Predictive(inner, PredictiveSpec())
    memory: dict[str, Any] = {}
    run_days(policy, memory, 2)
    before = MONDAY + 2 * DAY + 9 * 3600 - 60  # 08:59: the ramp is one minute and a quarter away
    out = policy.decide(view(before, 4, 4.0), memory)
    assert out is not inner.outcome
    assert out.replicas == 8
    assert out.reasons == [
        "reactive",
        "pre-scaled to 8 for the forecast of 8.0 at 09:00:15 (same time of day, 2 days, recent error 0 %)",
    ]
    assert out.inputs["forecast"] == {
        "load": 8.0,
        "at": before + 75.0,
        "horizon": 75.0,
        "basis": "daily",
        "periods": 2,
        "error_percent": 0.0,
        "reactive_replicas": 4,
        "versus_naive": 0.0,
        "history_hours": 57.0,
        "replicas": 8,
    }
    # An hour earlier nothing is coming: the kind's own outcome, the very object.
    early = MONDAY + 2 * DAY + 8 * 3600
    policy = Predictive(Reactive(), PredictiveSpec())
    memory = {}
    run_days(policy, memory, 2)
    assert policy.decide(view(early, 4, 4.0), memory) is policy.inner.outcome  # type: ignore[attr-defined]


def test_it_never_lowers_what_the_reactive_rule_asks_and_stays_within_the_cap_and_max() -> None:
    before = MONDAY + 2 * DAY + 9 * 3600 - 60
    for wanted, cap, max_replicas, expected in ((10, 100, 20, 10), (None, 25, 20, 5), (None, 100, 6, 6)):
        inner = Reactive(None, max_replicas)
        policy = Predictive(inner, PredictiveSpec(max_prescale_percent=cap))
        memory: dict[str, Any] = {}
        run_days(policy, memory, 2)
        inner.wanted = wanted
        out = policy.decide(view(before, 4, 4.0), memory)
        assert out.replicas == expected, (wanted, cap, max_replicas)


class HpaMinimum(Reactive):
    """A stand-in for a kind that drives an HPA of its own (Tortoise): it sets the HPA's
    minReplicas to 4, and its maxReplicas to ``hpa_max`` (``None``: leaves it)."""

    def __init__(self, hpa_max: int | None) -> None:
        super().__init__(None, 20)
        self.hpa_max = hpa_max

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        hpa: dict[str, Any] = {"min_replicas": (4, 4)}
        if self.hpa_max is not None:
            hpa["max_replicas"] = (self.hpa_max, self.hpa_max)
        self.outcome = Outcome(hpa=hpa, reasons=["reactive"])
        return self.outcome


def test_a_raised_min_replicas_stays_within_the_hpas_max_replicas() -> None:
    """The forecast asks 8; the HPA's maxReplicas is 6 (as the kind sets it, or as the HPA has it):
    minReplicas goes to 6, never above (the API server refuses minReplicas above maxReplicas)."""
    before = MONDAY + 2 * DAY + 9 * 3600 - 60
    for hpa_max, seen_max, expected in ((6, None, 6), (None, 6, 6), (None, None, 8), (9, 6, 8)):
        policy = Predictive(HpaMinimum(hpa_max), PredictiveSpec())
        memory: dict[str, Any] = {}
        run_days(policy, memory, 2)
        tick = view(before, 4, 4.0)
        if seen_max is not None:
            assert tick.hpa is not None
            tick = tick._replace(hpa=tick.hpa._replace(max_replicas=seen_max))
        out = policy.decide(tick, memory)
        assert out.hpa["min_replicas"] == (4, expected), (hpa_max, seen_max)


def test_a_raised_min_replicas_is_taken_back_once_the_forecast_falls() -> None:
    """The kind (Tortoise) writes its minReplicas pair from its own memory, "4 to 4", which a
    pre-scale to 8 does not change: once the forecast falls, the minimum goes back to 4 (it stayed
    at 8 until the kind next moved it).  While the raise holds it is written from the HPA's
    minimum, "8 to 8": no decision on every tick."""
    policy = Predictive(HpaMinimum(None), PredictiveSpec())
    memory: dict[str, Any] = {}
    run_days(policy, memory, 2)

    def at(t: float, hpa_min: int) -> Outcome:
        tick = view(t, hpa_min, ramp(t))
        assert tick.hpa is not None
        return policy.decide(tick._replace(hpa=tick.hpa._replace(min_replicas=hpa_min)), memory)

    day3 = MONDAY + 2 * DAY
    assert at(day3 + 9 * 3600 - 60, 4).hpa["min_replicas"] == (4, 8)  # the pre-scale
    assert at(day3 + 12 * 3600, 8).hpa["min_replicas"] == (8, 8)  # held: no change
    back = at(day3 + 17 * 3600 + 1800, 8)  # the forecast is down to 4
    assert back.hpa["min_replicas"] == (8, 4)
    assert back.reasons[-1] == "took minReplicas back to 4 (the forecast no longer asks for more)"
    assert memory[KEY].get("min_raised") is None
    assert at(day3 + 17 * 3600 + 1860, 4).hpa["min_replicas"] == (4, 4)


def test_it_waits_for_the_minimum_history_and_a_small_recent_error() -> None:
    before = MONDAY + 2 * DAY + 9 * 3600 - 60
    for spec, noise in ((PredictiveSpec(min_history=3 * DAY), 0.0), (PredictiveSpec(max_error_percent=2), 0.3)):
        inner = Reactive()
        policy = Predictive(inner, spec)
        memory: dict[str, Any] = {}
        rng = random.Random(3)
        for i in range(0, 2 * DAY, 60):
            t = MONDAY + i
            policy.decide(view(t, 4, ramp(t) * (1 + rng.uniform(-noise, noise))), memory)
        assert policy.decide(view(before, 4, 4.0), memory) is inner.outcome
        error = memory[KEY]["profile"]["error"]
        assert error == (0 if noise == 0 else 35)  # tenths of a percent


def test_a_tick_it_does_not_pre_scale_says_why_when_the_kind_decides_something() -> None:
    # Within minHistory: the kind's own outcome, and inputs.predictive says why no pre-scale.
    inner = Reactive(wanted=5)
    policy = Predictive(inner, PredictiveSpec())
    memory: dict[str, Any] = {}
    policy.decide(view(MONDAY, 4, 4.0), memory)
    out = policy.decide(view(MONDAY + 3600, 4, 4.0), memory)
    assert (out.replicas, out.reasons) == (5, ["reactive"])
    assert out.inputs == {
        "predictive": {
            "reason": "TooLittleHistory",
            "message": "1.0 h of history, minHistory is 24.0 h",
            "history_hours": 1.0,
            "error_percent": None,
            "versus_naive": None,
        }
    }
    # A noisy history: its recent error (3.5 %) above maxErrorPercent 2.
    policy = Predictive(Reactive(wanted=5), PredictiveSpec(max_error_percent=2))
    memory = {}
    rng = random.Random(3)
    for i in range(0, 2 * DAY, 60):
        t = MONDAY + i
        policy.decide(view(t, 4, ramp(t) * (1 + rng.uniform(-0.3, 0.3))), memory)
    out = policy.decide(view(MONDAY + 2 * DAY + 9 * 3600 - 60, 4, 4.0), memory)
    assert out.inputs["predictive"] == {
        "reason": "ErrorTooLarge",
        "message": "recent error 3.5 % is above maxErrorPercent 2 %",
        "history_hours": 57.0,
        "error_percent": 3.5,
        "versus_naive": 0.99,
    }
    # Nothing coming: the forecast is within the replicas the kind asks.
    policy = Predictive(Reactive(wanted=5), PredictiveSpec())
    memory = {}
    run_days(policy, memory, 2)
    out = policy.decide(view(MONDAY + 2 * DAY + 8 * 3600, 4, 4.0), memory)
    assert out.inputs["predictive"]["reason"] == "WithinReactive"
    assert out.inputs["predictive"]["message"] == "the forecast of 4.0 at 08:01:15 is within the 5 replicas asked"


def test_with_replicas_capped_it_raises_the_requests_ahead_of_the_peak_and_takes_them_back() -> None:
    # maxReplicas 4, the ramp needs 8 pods of 500m at 09:00: twice the CPU per pod, at most maxAllowed 800m.
    inner = Reactive(None, 4, {"web": ContainerBounds(maximum={"cpu": 800})})
    policy = Predictive(inner, PredictiveSpec())
    memory: dict[str, Any] = {}
    run_days(policy, memory, 2, cpu="500m")
    before = MONDAY + 2 * DAY + 9 * 3600 - 60
    out = policy.decide(view(before, 4, 4.0, cpu="500m"), memory)
    assert (out.replicas, out.requests) == (None, {"web": {"cpu": 800}})
    assert out.reasons == [
        "reactive",
        "raised the cpu request of web to 800m for the forecast of 8.0 at 09:00:15 (replicas capped at 4; "
        "same time of day, 2 days, recent error 0 %)",
    ]
    assert out.inputs["forecast"]["requests"] == {"web": {"cpu": 800}}
    assert out.inputs["forecast"]["replicas"] is None
    assert memory[KEY]["raised"] == {"web": {"cpu": [500, 800]}}
    # Applied: the pods are larger, the HPA sees 8 × 500/800 = 5 pods' worth; the profile still
    # learns 8 (the load in pods of the size before the raise) and the raise holds, no change.
    during = MONDAY + 2 * DAY + 12 * 3600
    out = policy.decide(view(during, 4, 5.0, cpu="800m"), memory)
    assert out.requests == {"web": {"cpu": 800}}
    assert memory[KEY]["raised"] == {"web": {"cpu": [500, 800]}}
    # At 16:59 the forecast for 17:00:15 is lower (5.9: between the slots before and after 17:00),
    # and so is the raise; at 17:10 it is 4: the request goes back to what it was before the raise.
    out = policy.decide(view(MONDAY + 2 * DAY + 17 * 3600 - 60, 4, 5.0, cpu="800m"), memory)
    assert out.requests == {"web": {"cpu": 742}}
    after = MONDAY + 2 * DAY + 17 * 3600 + 600
    out = policy.decide(view(after, 4, 2.5, cpu="742m"), memory)
    assert out.requests == {"web": {"cpu": 500}}
    assert out.reasons == [
        "reactive",
        "took the cpu request of web back to 500m (the forecast no longer asks for more)",
    ]
    assert out.inputs["predictive"]["reason"] == "WithinReactive"
    assert "raised" not in memory[KEY]


def test_the_raised_requests_are_never_below_the_kinds_and_the_kind_takes_them_over() -> None:
    before = MONDAY + 2 * DAY + 9 * 3600 - 60
    for asked, expected in ((700, 800), (900, 900)):
        inner = Reactive(None, 4, {"web": ContainerBounds(maximum={"cpu": 800})})
        policy = Predictive(inner, PredictiveSpec())
        memory: dict[str, Any] = {}
        run_days(policy, memory, 2, cpu="500m")
        inner.requests = {"web": {"cpu": asked}}
        assert policy.decide(view(before, 4, 4.0, cpu="500m"), memory).requests == {"web": {"cpu": expected}}
    # maxPreScalePercent 50 bounds the raise (750m); without a maxAllowed, the limit (2 cores) would.
    inner = Reactive(None, 4)
    policy = Predictive(inner, PredictiveSpec(max_prescale_percent=50))
    memory = {}
    run_days(policy, memory, 2, cpu="500m")
    assert policy.decide(view(before, 4, 4.0, cpu="500m"), memory).requests == {"web": {"cpu": 750}}
    # The kind set the request since (750m is not what it was raised to): the raise is the kind's
    # now, nothing taken back.
    after = MONDAY + 2 * DAY + 17 * 3600 + 600
    assert policy.decide(view(after, 4, 4.0, cpu="700m"), memory) is inner.outcome
    assert "raised" not in memory[KEY]


def test_a_container_resource_metric_raises_only_the_container_it_names() -> None:
    metric = {"name": "cpu", "container": "web"}
    spec_metrics = ({"type": "ContainerResource", "containerResource": {**metric, "target": TARGET60}},)

    def two(tick: float, load: float) -> View:
        resources = ContainerResources({"cpu": Qty.of("500m")}, {})
        spec = WorkloadEvent(tick, REF, 4, {"web": resources, "sidecar": resources})
        current = {**metric, "current": {"averageUtilization": round(load / 4 * 60)}}
        hpa = HpaEvent(
            tick,
            REF,
            4,
            4,
            metrics=spec_metrics,
            current_metrics=({"type": "ContainerResource", "containerResource": current},),
        )
        return View(tick, REF, spec, hpa, None, {}, {}, {"sync_period": 15.0})

    policy = Predictive(Reactive(None, 4), PredictiveSpec())
    memory: dict[str, Any] = {}
    for i in range(0, 2 * DAY, 60):
        policy.decide(two(MONDAY + i, ramp(MONDAY + i)), memory)
    out = policy.decide(two(MONDAY + 2 * DAY + 9 * 3600 - 60, 4.0), memory)
    assert out.requests == {"web": {"cpu": 1000}}  # the sidecar's is not what the HPA sees


def test_the_default_horizon_is_the_longest_observed_start_up_plus_a_sync_period() -> None:
    policy = Predictive(Reactive(), PredictiveSpec())
    memory: dict[str, Any] = {}
    policy.decide(view(MONDAY, 4, 4.0, (PodStatus("a", False, "Running", MONDAY - 20),)), memory)
    policy.decide(view(MONDAY + 60, 4, 4.0, (PodStatus("a", True, "Running", MONDAY - 20),)), memory)
    assert memory[KEY]["startups"] == [80]
    assert memory[KEY]["unready"] == {}


def test_the_section_is_parsed_with_defaults_and_refused_by_field() -> None:
    assert parse_predictive({"spec": {}}) is None
    assert parse_predictive({"spec": {"predictive": {}}}) == PredictiveSpec(None, None, 86400.0, 25)
    assert parse_predictive(
        {"spec": {"predictive": {"horizon": "3m", "minHistory": "168h", "maxPreScalePercent": 50}}}
    ) == PredictiveSpec(180.0, 50, 604800.0, 25)
    with pytest.raises(InvalidPolicy, match=r"spec\.predictive\.maxErrorPercent"):
        parse_predictive({"spec": {"predictive": {"maxErrorPercent": 101}}})
    with pytest.raises(InvalidPolicy, match="expected an object, got str"):
        parse_predictive({"spec": {"predictive": "yes"}})
