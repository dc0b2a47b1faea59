"""Each HVPA rule on its own (reference hvpa.md section 2), plus the seed form and its modes."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies.hvpa import (
    Change,
    Interval,
    Window,
    min_change_threshold,
    parse_hvpa,
    scaled_limit,
    vpa_usable,
    vpa_weight,
)
from scaling.quantity import parse_quantity as q
from tests.replaying import blocked_reasons, decisions, ev, replay
from tests.vectors.test_hvpa_vectors import T0, fixture_a, hpa, vpa, workload

REF = WorkloadRef("c1", "shop", "Deployment", "web")
STAGES = (Interval(1, 1, Fraction(1)), Interval(2, 4, Fraction(60, 100)), Interval(5, 10, Fraction(0)))


class TestWeightLookup:
    def test_first_interval_containing_current_replicas_wins(self) -> None:
        ivs = (Interval(1, 5, Fraction(30, 100)), Interval(3, 8, Fraction(70, 100)))
        assert vpa_weight(ivs, 4, 6, 1, 10) == Fraction(30, 100)

    def test_zero_bounds_mean_hpa_min_and_max(self) -> None:
        assert vpa_weight((Interval(0, 0, Fraction(40, 100)),), 7, 9, 1, 10) == Fraction(40, 100)

    def test_no_matching_interval_means_pure_horizontal(self) -> None:
        assert vpa_weight((Interval(2, 3, Fraction(50, 100)),), 5, 6, 1, 10) == 0

    def test_full_vpa_stage_borrows_next_fraction_on_scale_out(self) -> None:
        assert vpa_weight(STAGES, 1, 3, 1, 10) == Fraction(60, 100)

    def test_full_vpa_stage_borrows_previous_fraction_on_scale_in(self) -> None:
        ivs = (Interval(1, 2, Fraction(20, 100)), Interval(3, 4, Fraction(1)))
        assert vpa_weight(ivs, 3, 2, 1, 10) == Fraction(20, 100)

    def test_full_vpa_stage_without_previous_fraction_stays_full_on_scale_in(self) -> None:
        assert vpa_weight(STAGES, 1, 0, 1, 10) == 1

    def test_full_vpa_stage_at_rest_stays_full(self) -> None:
        assert vpa_weight(STAGES, 1, 1, 1, 10) == 1


class TestMinChange:
    def test_defaults_are_200m_cpu_and_200M_memory(self) -> None:
        assert min_change_threshold(None, q("1"), "cpu") == 200
        assert min_change_threshold(Change(), q("1Gi"), "memory") == q("200M")

    def test_the_smaller_of_value_and_percentage_wins(self) -> None:
        assert min_change_threshold(Change(q("100m"), 80), q("300m"), "cpu") == 100
        assert min_change_threshold(Change(q("500m"), 10), q("300m"), "cpu") == 30

    def test_percentage_of_a_missing_request_is_zero(self) -> None:
        assert min_change_threshold(Change(None, 50), 0, "cpu") == 0


class TestLimits:
    def test_absent_limit_stays_absent(self) -> None:
        assert scaled_limit("cpu", 300, 0, 500, None) is None

    def test_missing_request_or_equal_limit_follow_the_new_request(self) -> None:
        assert scaled_limit("cpu", 0, 2000, 500, None) == 500
        assert scaled_limit("cpu", 300, 300, 500, None) == 500

    def test_proportional_limit_truncates(self) -> None:
        assert scaled_limit("cpu", 300, 2000, 302, None) == 2013

    def test_gap_params_take_the_larger_candidate_and_memory_rounds_up_to_kb(self) -> None:
        gap = Change(q("1G"), 80)
        assert scaled_limit("memory", q("200M"), q("5G"), q("1320M"), gap) == q("2376M")
        # 1000001 B + 1 B = 1000002 B, rounded up to whole kB
        assert scaled_limit("memory", q("200M"), q("5G"), q("1000001"), Change(q("1"), None)) == q("1001k")


class TestVpaConditions:
    @pytest.mark.parametrize(
        ("conditions", "usable"),
        [
            ([], True),
            ([{"type": "RecommendationProvided", "status": "True"}], True),
            ([{"type": "RecommendationProvided", "status": "False"}], False),
            (
                [{"type": "LowConfidence", "status": "True"}, {"type": "RecommendationProvided", "status": "True"}],
                False,
            ),
            ([{"type": "RecommendationProvided", "status": "True"}, {"type": "LowConfidence", "status": "True"}], True),
            ([{"type": "LowConfidence", "status": "False"}], False),
        ],
    )
    def test_conditions_are_read_in_order(self, conditions: list[dict[str, str]], usable: bool) -> None:
        assert vpa_usable(conditions) is usable


class TestWindow:
    def test_offset_is_converted_to_utc(self) -> None:
        w = Window.parse("220000+0100", "230000+0100", "w")
        assert (w.begin, w.end) == (21 * 3600, 22 * 3600)

    def test_begin_equal_end_matches_only_that_second(self) -> None:
        w = Window.parse("100000+0000", "100000+0000", "w")
        assert w.contains(36000.5) and not w.contains(36001)

    @pytest.mark.parametrize("bad", ["22:00", "250000+0000", "220000*0100", 2200])
    def test_bad_window_names_the_field(self, bad: Any) -> None:
        manifest = fixture_a(40, window=(bad, "230000+0000"))
        with pytest.raises(InvalidPolicy) as exc:
            parse_hvpa(manifest, REF)
        assert exc.value.field == "spec.maintenanceTimeWindow.begin"


class TestValidation:
    @pytest.mark.parametrize(
        ("patch", "field"),
        [
            ({"weightBasedScalingIntervals": [{"vpaWeight": 0.6}]}, "spec.weightBasedScalingIntervals[0].vpaWeight"),
            (
                {"weightBasedScalingIntervals": [{"vpaWeight": 10, "startReplicaCount": 5, "lastReplicaCount": 2}]},
                "spec.weightBasedScalingIntervals[0]",
            ),
            (
                {"hpa": {"template": {"spec": {"minReplicas": 4, "maxReplicas": 2}}}},
                "spec.hpa.template.spec.maxReplicas",
            ),
            (
                {"vpa": {"scaleDown": {"updatePolicy": {"updateMode": "Sometimes"}}}},
                "spec.vpa.scaleDown.updatePolicy.updateMode",
            ),
            ({"vpa": {"scaleUp": {"minChange": {"cpu": {"value": "lots"}}}}}, "spec.vpa.scaleUp.minChange.cpu.value"),
        ],
    )
    def test_invalid_released_manifest_names_the_field(self, patch: dict[str, Any], field: str) -> None:
        manifest = fixture_a(40)
        manifest["spec"].update(patch)
        with pytest.raises(InvalidPolicy) as exc:
            parse_hvpa(manifest, REF)
        assert exc.value.field == field


def seed(mode: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"kind": "Deployment", "name": "web"},
        "hpaTemplate": {"minReplicas": 1, "maxReplicas": 3},
        "minCpuChange": {"value": "100m"},
        "minMemChange": {"value": "100M"},
        "weightBasedScalingIntervals": [{"vpaWeight": 0.4, "startReplicaCount": 1, "lastReplicaCount": 3}],
        **extra,
    }
    if mode:
        spec["mode"] = mode
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": spec,
    }


class TestSeedForm:
    def test_stage_fields_become_three_intervals(self) -> None:
        spec = parse_hvpa(
            seed(
                stageTwoStartReplicaCount=3,
                stageTwoStopReplicaCount=7,
                firstStageVpaWeight=0,
                secondStageVpaWeight=0.4,
                thirdStageVpaWeight=0,
            ),
            REF,
        )
        assert spec.intervals == (
            Interval(0, 2, Fraction(0)),
            Interval(3, 7, Fraction(2, 5)),
            Interval(8, 0, Fraction(0)),
        )

    def test_fractional_weights_share_the_change_without_the_hpa_limited_gate(self, tmp_path: Path) -> None:
        out, _ = replay(tmp_path, [workload(T0 + 1, 2), hpa(T0 + 2, 3, False), vpa(T0 + 3, "500m", "3G")], [seed()])
        data = decisions(out)[0]["data"]
        assert data["replicas"] == {"from": 2, "to": 3}
        assert q(data["containers"]["deployment"]["requests"]["memory"]["to"]) == q("1320000k")
        assert blocked_reasons(decisions(out)[0]) == ["MinChange"]  # cpu: 80m < 100m

    def test_at_max_replicas_vertical_scale_up_is_unconditional(self, tmp_path: Path) -> None:
        out, _ = replay(tmp_path, [workload(T0 + 1, 3), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G")], [seed()])
        req = decisions(out)[0]["data"]["containers"]["deployment"]["requests"]
        assert q(req["cpu"]["to"]) == q("500m")  # weight 1, not 0.4
        assert q(req["memory"]["to"]) == q("3G")

    def test_hpa_biased_applies_only_hpa_when_it_has_a_recommendation(self, tmp_path: Path) -> None:
        events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, False), vpa(T0 + 3, "500m", "3G")]
        out, _ = replay(tmp_path, events, [seed("HpaBiased")])
        d = decisions(out)[0]
        assert d["data"]["replicas"] == {"from": 2, "to": 3}
        assert "containers" not in d["data"]
        assert set(blocked_reasons(d)) == {"Weight"}
        assert d["data"]["policy"]["mode"] == "HpaBiased"

    def test_hpa_biased_applies_vpa_whole_when_hpa_is_quiet(self, tmp_path: Path) -> None:
        events = [workload(T0 + 1, 2), hpa(T0 + 2, 2, False), vpa(T0 + 3, "500m", "3G")]
        out, _ = replay(tmp_path, events, [seed("HpaBiased")])
        req = decisions(out)[0]["data"]["containers"]["deployment"]["requests"]
        assert (q(req["cpu"]["to"]), q(req["memory"]["to"])) == (q("500m"), q("3G"))

    def test_vpa_biased_holds_replicas_while_vpa_has_a_recommendation(self, tmp_path: Path) -> None:
        events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, False), vpa(T0 + 3, "500m", "3G")]
        out, _ = replay(tmp_path, events, [seed("VpaBiased")])
        d = decisions(out)[0]["data"]
        assert "replicas" not in d
        assert d["blocked"] == [{"target": "replicas", "reason": "Weight", "wanted": 3}]

    def test_hpa_preferred_scales_vertically_only_at_the_bounds(self, tmp_path: Path) -> None:
        events = [workload(T0 + 1, 2), hpa(T0 + 2, 2, False), vpa(T0 + 3, "500m", "3G")]
        out, _ = replay(tmp_path, events, [seed("HpaPreferred")])
        assert decisions(out) == []
        assert set(blocked_reasons(out[0])) == {"Weight"}

    def test_mixed_prefers_the_configured_axis_when_both_pass_their_thresholds(self, tmp_path: Path) -> None:
        mixed = {"replicaThreshold": 0, "resourceThreshold": {"cpu": {"value": "50m"}}, "prefer": "vpa"}
        events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, False), vpa(T0 + 3, "500m", "3G")]
        out, _ = replay(tmp_path, events, [seed("Mixed", mixed=mixed)])
        d = decisions(out)[0]["data"]
        assert "replicas" not in d and "containers" in d

    def test_unknown_mode_is_rejected(self) -> None:
        with pytest.raises(InvalidPolicy) as exc:
            parse_hvpa(seed("Sometimes"), REF)
        assert exc.value.field == "spec.mode"


def test_policy_event_changes_the_policy_mid_stream(tmp_path: Path) -> None:
    # Weight 40 scales out 2 -> 3; after the switch to weight 100 the HPA gets no share (its
    # weighted replicas equal the current ones) and VPA's target is applied whole.
    later = [
        ev("policy", T0 + 300, policy=fixture_a(100)),
        workload(T0 + 301, 3),
        hpa(T0 + 302, 3, True),
        vpa(T0 + 303, "500m", "3G"),
    ]
    out, _ = replay(tmp_path, [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), *later], [fixture_a(40)])
    first, second = decisions(out)
    assert first["data"]["replicas"] == {"from": 2, "to": 3}
    assert second["data"]["tick"] == T0 + 315
    assert "replicas" not in second["data"]
    req = second["data"]["containers"]["deployment"]["requests"]
    assert (q(req["cpu"]["to"]), q(req["memory"]["to"])) == (q("500m"), q("3G"))


def test_deleting_the_policy_stops_decisions(tmp_path: Path) -> None:
    events = [workload(T0 + 1, 2), ev("policy", T0 + 2, policy=None), hpa(T0 + 3, 3, True)]
    out, _ = replay(tmp_path, events, [fixture_a(40)])
    assert out == []
