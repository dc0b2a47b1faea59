"""The upstream HPA and VPA arms of ``tandem simulate`` (analysis.upstream), on hand-computed cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from analysis.simulate import Demand, simulate_one
from analysis.upstream import (
    PodSim,
    VpaArm,
    admit,
    hpa_inputs,
    parse_upstream,
    simulate_upstream,
    updater_pass,
)
from cli.main import main as tandem
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.recommend import hpa as hpa_rec
from scaling.recommend import vpa as vpa_rec
from scaling.settings import Settings

MI = 2**20
T0 = 1_762_250_400.0
REF = WorkloadRef("c1", "shop", "Deployment", "web")


def pods(n: int, cpu: int = 500, *, created: float = T0, ready_at: float = T0) -> list[PodSim]:
    return [PodSim(f"p{i}", {"web": {"cpu": cpu}}, {"web": {"cpu": 2 * cpu}}, created, ready_at) for i in range(n)]


def rec(target: int, lower: int, upper: int) -> dict[str, vpa_rec.Recommendation]:
    """A CPU recommendation in millicores for container web."""
    return {"web": vpa_rec.Recommendation({"cpu": target}, {"cpu": lower}, {"cpu": upper}, {"cpu": target})}


AUTO = VpaArm("web", "Auto", {})


def test_updater_evicts_pods_whose_requests_leave_the_bounds_up_to_the_eviction_tolerance() -> None:
    # 500m is below the lower bound 700m: all four pods are candidates; the tolerance is
    # int(4 x 0.5) = 2, so the updater evicts while running - evicted > 4 - 2: two pods.
    out = updater_pass(pods(4), 4, rec(800, 700, 1000), AUTO, T0 + 60)
    assert [p.name for p in out] == ["p0", "p1"]


def test_updater_leaves_pods_inside_the_bounds_until_they_are_12_hours_old() -> None:
    inside = rec(600, 400, 1000)  # 500m inside [400m, 1000m], ResourceDiff 0.2 >= 0.1
    assert updater_pass(pods(4), 4, inside, AUTO, T0 + 12 * 3600 - 1) == []
    assert [p.name for p in updater_pass(pods(4), 4, inside, AUTO, T0 + 12 * 3600)] == ["p0", "p1"]
    # ... and then only when the change is at least --pod-update-threshold (10%)
    assert updater_pass(pods(4), 4, rec(540, 400, 1000), AUTO, T0 + 13 * 3600) == []


def test_updater_never_evicts_below_the_minimum_replicas() -> None:
    # One live pod, --min-replicas 2: no eviction at all, however far outside the bounds.
    assert updater_pass(pods(1), 1, rec(800, 700, 1000), AUTO, T0 + 60) == []
    # updatePolicy.minReplicas 1: one pod, tolerance int(1 x 0.5) = 0, every configured pod
    # running and nothing evicted yet: isPodDisruptable lets exactly this one go.
    one = VpaArm("web", "Auto", {}, min_replicas=1)
    assert [p.name for p in updater_pass(pods(1), 1, rec(800, 700, 1000), one, T0 + 60)] == ["p0"]
    # Two pods, tolerance int(2 x 0.5) = 1: running 2 - evicted 0 > 2 - 1, then 2 - 1 > 1 is false.
    assert [p.name for p in updater_pass(pods(2), 2, rec(800, 700, 1000), AUTO, T0 + 60)] == ["p0"]


def test_updater_reads_the_bounds_capped_to_the_pods_limit_under_requests_only() -> None:
    # A request of 1000m at its 1000m limit, bounds [1200m, 2000m]: outside them, unless
    # RequestsOnly caps the recommendation to the limit first (target = bounds = 1000m): then
    # the pod is inside, with no change to make, and stays.
    at_limit = [PodSim(f"p{i}", {"web": {"cpu": 1000}}, {"web": {"cpu": 1000}}, T0, T0) for i in range(4)]
    recs = rec(1500, 1200, 2000)
    assert len(updater_pass(at_limit, 4, recs, AUTO, T0 + 13 * 3600)) == 2
    only = VpaArm("web", "Auto", {"*": vpa_rec.ContainerPolicy(controlled_values="RequestsOnly")})
    assert updater_pass(at_limit, 4, recs, only, T0 + 13 * 3600) == []


def test_updater_evicts_nothing_in_modes_off_and_initial() -> None:
    for mode in ("Off", "Initial"):
        assert updater_pass(pods(4), 4, rec(800, 700, 1000), VpaArm("web", mode, {}), T0 + 60) == []


def test_updater_evicts_pending_pods_without_counting_them() -> None:
    # Two pods still starting (pending) and two running, all below the bounds: the pending ones
    # always go; a running one only while running 2 - evicted 0 > configured 4 - tolerance 2: none.
    ps = pods(2) + [PodSim(f"n{i}", {"web": {"cpu": 500}}, {}, T0, T0 + 120) for i in range(2)]
    assert [p.name for p in updater_pass(ps, 4, rec(800, 700, 1000), AUTO, T0 + 60)] == ["n0", "n1"]


def test_admission_scales_limits_in_proportion_or_keeps_them_with_requests_only() -> None:
    template = ({"web": {"cpu": 500, "memory": 256 * MI * 1000}}, {"web": {"cpu": 1000, "memory": 512 * MI * 1000}})
    recs = {
        "web": vpa_rec.Recommendation(
            {"cpu": 800, "memory": 300 * MI}, {"cpu": 700, "memory": 200 * MI}, {"cpu": 900, "memory": 400 * MI}, {}
        )
    }
    req, lim = admit(*template, recs, AUTO)
    assert req == {"web": {"cpu": 800, "memory": 300 * MI * 1000}}
    assert lim == {"web": {"cpu": 1600, "memory": 600 * MI * 1000}}  # x 800/500 and x 300/256
    only = VpaArm("web", "Auto", {"web": vpa_rec.ContainerPolicy(controlled_values="RequestsOnly")})
    big = {"web": vpa_rec.Recommendation({"cpu": 1200}, {"cpu": 1100}, {"cpu": 1300}, {})}
    req, lim = admit(*template, big, only)
    assert req["web"]["cpu"] == 1000  # capped to the container's limit, which stays
    assert lim == template[1]
    assert admit(*template, recs, VpaArm("web", "Off", {})) == template


def test_hpa_reads_each_pods_own_requests_so_a_resize_halves_its_utilization() -> None:
    metrics = parse_cpu_hpa()
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    usage = {f"p{i}": {"web": {"cpu": 400}} for i in range(4)}

    def desired(cpu_request: int) -> int:
        ps = pods(4, cpu_request, created=T0 - 3600, ready_at=T0 - 3600)
        infos, inputs = hpa_inputs(ps, usage, {"web": {"cpu": 500}}, T0)
        result, _ = hpa_rec.recommend(metrics, behavior, 1, 10, 4, 4, infos, inputs, hpa_rec.HpaState(), T0)
        return result.desired_replicas

    # 400m of 500m: 80% against a 60% target, ceil(4 x 80/60) = 6.
    assert desired(500) == 6
    # The VPA re-admitted the pods with 1000m: the same usage is 40%, ceil(4 x 40/60) = 3.
    assert desired(1000) == 3


def parse_cpu_hpa() -> tuple[dict[str, Any], ...]:
    return (
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
    )


def hpa_doc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, **spec},
    }


def vpa_doc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, **spec},
    }


def test_a_file_with_an_hpa_and_a_vpa_for_one_workload_is_one_arm() -> None:
    [arm] = parse_upstream(
        [hpa_doc(maxReplicas=4), vpa_doc(updatePolicy={"updateMode": "Recreate", "minReplicas": 3})], "default"
    )
    assert arm.workload == REF
    assert arm.hpa is not None and (arm.hpa.min_replicas, arm.hpa.max_replicas) == (1, 4)
    # autoscaling/v2 defaulting: no metrics is CPU at 80%
    assert arm.hpa.metrics[0]["resource"]["target"]["averageUtilization"] == 80
    assert arm.vpa is not None and (arm.vpa.mode, arm.vpa.min_replicas) == ("Recreate", 3)


@pytest.mark.parametrize(
    ("doc", "field", "reason"),
    [
        (
            hpa_doc(maxReplica=4),
            "document 1 (HorizontalPodAutoscaler shop/web): spec.maxReplica",
            "did you mean maxReplicas?",
        ),
        (vpa_doc(updatePolicy={"updateMode": "Recreat"}), "spec.updatePolicy.updateMode", "did you mean Recreate?"),
        (vpa_doc(updatePolicy={"updateMode": "InPlaceOrRecreate"}), "spec.updatePolicy.updateMode", "not simulated"),
        ({**hpa_doc(maxReplicas=2), "apiVersion": "autoscaling/v1"}, "apiVersion", "expected autoscaling/v2"),
    ],
)
def test_a_bad_upstream_manifest_is_one_line_naming_the_field(doc: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        parse_upstream([doc], "default")
    assert field in info.value.field
    assert reason in info.value.reason


def tiny_demand() -> Demand:
    """2 pods of 500m (limit 1) and 100Mi (limit 256Mi); 3 cores and 600Mi of demand, 4 samples a minute apart."""
    d = Demand(
        REF, 2, {"web": {"cpu": 500, "memory": 100 * MI * 1000}}, {"web": {"cpu": 1000, "memory": 256 * MI * 1000}}
    )
    d.points = [(T0 + 60 * i, {"web": (3.0, float(600 * MI))}) for i in range(4)]
    return d


def test_columns_of_an_hpa_held_at_max_replicas_on_a_tiny_stream() -> None:
    [arm] = parse_upstream([hpa_doc(minReplicas=2, maxReplicas=2, metrics=parse_cpu_hpa())], "c1")
    out = simulate_upstream(tiny_demand(), arm, "hpa", Settings(cluster="c1"), 30.0)
    # 1.5 cores a pod against a 1-core limit: 1 core short for 3 minutes = 0.05 core-h.
    assert out.cpu_shortfall_core_hours == pytest.approx(0.05)
    assert out.cpu_core_hours == pytest.approx(2 * 0.5 * 0.05)
    # 300Mi a pod above the 256Mi limit: both pods at each of the 4 samples.
    assert (out.oom_kills, out.evictions, out.pod_restarts, out.resizes) == (8, 0, 0, 0)
    assert (out.replica_changes, out.saturated_samples, out.samples) == (0, 4, 4)


def test_columns_of_a_static_tandem_policy_on_the_same_stream() -> None:
    manifest = {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {
            "targetRef": {"kind": "Deployment", "name": "web"},
            "hpa": {"deploy": False, "template": {"spec": {"minReplicas": 2, "maxReplicas": 2}}},
            "vpa": {"deploy": False},
            "weightBasedScalingIntervals": [{"vpaWeight": 0, "startReplicaCount": 0, "lastReplicaCount": 0}],
        },
    }
    out = simulate_one(tiny_demand(), manifest, "static", Settings(cluster="c1"), 30.0)
    assert out.cpu_shortfall_core_hours == pytest.approx(0.05)
    assert (out.oom_kills, out.evictions, out.pod_restarts, out.resizes) == (8, 0, 0, 0)


def test_a_vpa_alone_evicts_and_readmits_with_the_new_target() -> None:
    # Auto VPA: the first recommendation (at the first sample) lies far from 500m/100Mi, both
    # pods' requests are outside the bounds; tolerance int(2 x 0.5) = 1, so the first pass (T0)
    # evicts one pod, re-created with the target (one new spec: one resize), ready after the
    # 30 s start-up; the next pass (T0 + 60) finds two running pods again and evicts the other.
    [arm] = parse_upstream([vpa_doc(updatePolicy={"updateMode": "Auto"})], "c1")
    out = simulate_upstream(tiny_demand(), arm, "vpa", Settings(cluster="c1"), 30.0)
    assert (out.evictions, out.pod_restarts, out.resizes) == (2, 2, 1)
    assert out.timeline[0][1] == 2


def cli_stream(path: Path) -> str:
    """The tiny demand as a recorded stream: 2 pods, 1.5 cores and 300Mi each, 4 samples."""
    wl = REF.as_dict()
    events: list[dict[str, Any]] = [
        {
            "type": "workload",
            "ts": T0,
            "workload": wl,
            "replicas": 2,
            "containers": {
                "web": {"requests": {"cpu": "500m", "memory": "100Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
            },
        }
    ]
    for i in range(4):
        samples = [{"pod": f"web-{p}", "container": "web", "cpu": 1.5, "memory": 300 * MI} for p in range(2)]
        events.append({"type": "metric", "ts": T0 + 60 * i, "workload": wl, "samples": samples})
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return str(path)


def test_simulate_runs_an_upstream_file_beside_a_tandem_one_and_writes_the_new_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = cli_stream(tmp_path / "s.jsonl")
    upstream = tmp_path / "today.yaml"
    upstream.write_text(yaml.safe_dump_all([hpa_doc(minReplicas=2, maxReplicas=2, metrics=list(parse_cpu_hpa()))]))
    out = tmp_path / "out.json"
    assert (
        tandem(["simulate", stream, "--policy", str(upstream), "--cluster", "c1", "--json", str(out), "--jobs", "1"])
        == 0
    )
    [row] = orjson.loads(out.read_bytes())
    assert row["policy"] == "today"
    assert (row["oom_kills"], row["evictions"], row["pod_restarts"], row["resizes"]) == (8, 0, 0, 0)
    assert row["cpu_shortfall_core_hours"] == pytest.approx(0.05)
    table = capsys.readouterr().out
    assert table.splitlines()[0].endswith("CPU short core-h  OOM kills  evictions  restarts  resizes")


def test_simulate_refuses_a_bad_upstream_manifest_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = cli_stream(tmp_path / "s.jsonl")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(vpa_doc(updatePolicy={"updateMode": "Recreat"})))
    assert tandem(["simulate", stream, "--policy", str(bad), "--cluster", "c1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"tandem simulate: {bad}: document 1 (VerticalPodAutoscaler shop/web): spec.updatePolicy.updateMode: "
        "'Recreat' is not simulated (expected one of Off, Initial, Recreate, Auto) (did you mean Recreate?)"
    ]


def test_the_report_shows_an_upstream_files_simulated_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = cli_stream(tmp_path / "s.jsonl")
    upstream = tmp_path / "today.yaml"
    upstream.write_text(yaml.safe_dump_all([hpa_doc(minReplicas=2, maxReplicas=2, metrics=list(parse_cpu_hpa()))]))
    report = tmp_path / "report"
    argv = ["simulate", stream, "--policy", str(upstream), "--cluster", "c1", "--report", str(report), "--jobs", "1"]
    assert tandem(argv) == 0
    assert "no decision can be made" not in capsys.readouterr().err  # expected for an upstream file: not said
    events = [orjson.loads(line) for line in (report / "today" / "stream.jsonl").read_bytes().splitlines()]
    assert [e["type"] for e in events] == ["workload", "metric", "metric", "metric", "metric"]
    assert events[0]["replicas"] == 2
    assert events[0]["containers"]["web"]["requests"] == {"cpu": "500m", "memory": str(100 * MI)}
    assert [s["pod"] for s in events[1]["samples"]] == ["up-1", "up-2"]
    assert (report / "index.html").is_file()
