"""``tandem simulate`` runs the HPA a Tortoise creates, and per-pod series follow the simulated pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from analysis.closed_loop import series_over_pods, simulate_one
from analysis.outcomes import Demand
from scaling.events import WorkloadRef
from scaling.settings import Settings

MI = 2**20
T0 = 1_762_250_400.0
REF = WorkloadRef("c1", "shop", "Deployment", "web")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulate"

TORTOISE: dict[str, Any] = {
    "apiVersion": "autoscaling.mercari.com/v1beta3",
    "kind": "Tortoise",
    "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
    "spec": {"updateMode": "Auto", "targetRefs": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}},
}


def steady(cores: float, minutes: int) -> Demand:
    """2 pods of 500m (limit 1) and 512Mi (limit 1Gi); ``cores`` and 400Mi of demand each minute."""
    d = Demand(
        REF, 2, {"web": {"cpu": 500, "memory": 512 * MI * 1000}}, {"web": {"cpu": 1000, "memory": 1024 * MI * 1000}}
    )
    d.points = [(T0 + 60 * i, {"web": (cores, float(400 * MI))}) for i in range(minutes)]
    return d


def replicas_over_time(out: Any) -> list[int]:
    """The replica counts the workload went through, from the first change on."""
    seen: list[int] = []
    for _, n, _ in out.timeline:
        if not seen or seen[-1] != n:
            seen.append(n)
    return seen


def test_a_tortoise_hpa_scales_the_workload_to_70_percent_of_the_cpu_request() -> None:
    # Tortoise creates its HPA on the first reconcile (reference 2.g): min 3, max 100, cpu at 70%.
    # The workload has 2 replicas, below the HPA's minimum: the HPA sets 3 without reading a
    # metric (replica_calculator: currentReplicas < minReplicas).  Then 2.1 cores over 3 pods of
    # 500m is 140%: ceil(3 x 140 / 70) = 6, within the scale-up policy (Percent 100 per 60 s);
    # at 6 pods, 70%: it holds.
    out = simulate_one(steady(2.1, 20), TORTOISE, "tortoise", Settings(cluster="c1"), 30.0)
    assert replicas_over_time(out) == [2, 3, 6]
    assert out.replica_changes == 2
    assert (out.evictions, out.saturated_samples) == (0, 0)


def test_a_tortoise_hpa_raises_the_replicas_to_its_minimum_of_3() -> None:
    # 0.1 core is 10% of 2 x 500m: the HPA would scale in, but its minReplicas is Tortoise's
    # MinimumMinReplicas, 3, above the 2 replicas the workload has.
    out = simulate_one(steady(0.1, 10), TORTOISE, "tortoise", Settings(cluster="c1"), 30.0)
    assert replicas_over_time(out) == [2, 3]
    assert out.replica_changes == 1


def test_per_pod_series_are_summed_and_divided_over_the_simulated_pods() -> None:
    raw = [
        {"pod": "a", "series": "rps", "value": 30},
        {"pod": "b", "series": "rps", "value": 30.0},
        {"series": "queue", "value": 5},
    ]
    assert series_over_pods(raw, ["sim-0", "sim-1", "sim-2"]) == [
        {"series": "queue", "value": 5},
        {"series": "rps", "value": 20.0},  # the mean over the 3 simulated pods, as one sample
    ]
    workload_only = [{"series": "queue", "value": 5}]
    assert series_over_pods(workload_only, ["sim-0"]) is workload_only


def test_an_hpa_does_not_count_a_pod_the_simulated_scale_down_removed() -> None:
    # tandem's Hvpa, horizontal only (examples/simulate/horizontal.yaml: CPU at 60% of 500m).
    # 6 pods; 1.75 cores for 10 minutes (1.75 / 6 / 0.5 / 0.6 = 0.97, inside the 10% tolerance),
    # then 1.36: at 6 pods 0.756 -> ceil(6 x 0.756) = 5 once the 5-minute scale-down window has
    # passed; at 5 pods 1.36 / 5 / 0.5 / 0.6 = 0.907, inside the tolerance: 5 holds.  The removed
    # pod's last sample (1.36 / 6) must not count: with it the HPA would see 6 pods at
    # (1.36 + 0.227) / 6 / 0.5 / 0.6 = 0.881 and scale straight back to ceil(6 x 0.881) = 6
    # (the flapping of docs/evaluation.md): upstream's HPA lists the pods that exist
    # (replica_calculator.go GetResourceReplicas, podLister.List), never a deleted one.
    manifest = yaml.safe_load_all((EXAMPLES / "horizontal.yaml").read_text())
    hvpa = next(m for m in manifest if m["metadata"]["name"] == "web")
    hvpa["metadata"]["annotations"]["tandem.dev/cluster"] = "c1"
    d = Demand(
        REF, 6, {"web": {"cpu": 500, "memory": 512 * MI * 1000}}, {"web": {"cpu": 1000, "memory": 1024 * MI * 1000}}
    )
    d.points = [(T0 + 60 * i, {"web": (1.75 if i < 10 else 1.36, float(400 * MI))}) for i in range(40)]
    out = simulate_one(d, hvpa, "horizontal", Settings(cluster="c1"), 30.0)
    assert replicas_over_time(out) == [5]
    assert out.replica_changes == 1


def test_a_replica_change_reports_the_per_pod_rate_over_the_new_pods() -> None:
    # 100 requests/s recorded on two pods (50 each), Nanit's custom HPA at 20 per pod with its
    # defaults (up by at most x2): at 2 pods 50 / 20 = 2.5, clamped to 2, ceil(2 x 2) = 4 at the
    # first tick; 30 s later (--delay) the 4 pods are there, and so is their rate: 100 / 4 = 25,
    # reported at the change, not a minute later with the next recorded sample.
    custom = {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "target": {"value": 20},
            "metric": {"series": "rps"},
            "minReplicas": 1,
            "maxReplicas": 12,
        },
    }
    d = steady(0.5, 2)
    d.series = [(ts, [{"pod": p, "series": "rps", "value": 50.0} for p in ("a", "b")]) for ts, _ in d.points]
    record: list[dict[str, Any]] = []
    simulate_one(d, custom, "custom", Settings(cluster="c1"), 30.0, record=record)
    seen = [
        (r["ts"] - T0, r.get("replicas"), [x["value"] for x in r.get("samples", []) if "series" in x])
        for r in record
        if r["type"] == "workload" or any("series" in x for x in r.get("samples", []))
    ]
    assert seen[:4] == [(0.0, 2, []), (0.0, None, [50.0]), (30.0, 4, []), (30.0, None, [25.0])]
