"""A policy kind is one registration: a toy kind defined and registered only in this test is
decided by ``tandem replay``, bounded by the applier's checks, watched by the collector, drawn by
the report and run by the simulator, reads its own section of the settings, gets its status
written by the applier and its access in the edge's RBAC rules, with no other file touched.

"Fixed" (``toy.tandem.dev/v1``) always wants ``spec.replicas`` replicas, which must lie within
``spec.minReplicas``..``spec.maxReplicas``; it never changes container resources.  Its settings
section ``fixed:`` has one key, ``note``, said in each decision's reasons; its status is
``{"replicas": N, "conditions": [...]}`` in a place of its own (``state.conditions``).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from analysis.report import build
from analysis.simulate import simulate
from cli.main import main as tandem
from edge.checks import check_decision, find_policy, policy_bounds
from edge.kube import Resource, policy_resources
from edge.status import Observation, fold_status
from edge.translate import Collector
from scaling.cloudevents import APPLIED
from scaling.engine import Engine, policy_event
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.outcome import AMBIGUOUS_POLICY, Outcome, View
from scaling.policies import Bounds, PolicyKind, parse_policy, register, unregister
from scaling.policies.base import int_field
from scaling.policies.status import StatusShape, as_int
from scaling.policies.templates import HpaTemplate, VpaTemplate
from scaling.settings import Settings
from schemas.rbac import Rule, rules

WL = WorkloadRef("eu-1", "shop", "Deployment", "web")
T0 = 15_000.0  # a tick (multiple of the 15 s sync period)


@dataclass(frozen=True, slots=True)
class FixedPolicy:
    name: str
    workload: WorkloadRef
    replicas: int
    min_replicas: int
    max_replicas: int
    kind: str = "Fixed"

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        out = Outcome(replicas=self.replicas)
        out.inputs = {"replicas": view.spec.replicas}
        out.reasons.append(f"fixed: always {self.replicas}")
        note = view.settings["fixed"].get("note")
        if note:
            out.reasons.append(f"fixed: {note}")
        return out

    def bounds(self) -> Bounds:
        return Bounds(self.kind, self.name, self.min_replicas, self.max_replicas, vertical=False)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        return None

    def vpa_template(self) -> VpaTemplate | None:
        return None


def parse_fixed(manifest: Mapping[str, Any], workload: WorkloadRef) -> FixedPolicy:
    spec = manifest["spec"]
    lo = int_field(spec, "minReplicas", 1, minimum=1)
    hi = int_field(spec, "maxReplicas", 100, minimum=1)
    n = int_field(spec, "replicas")
    assert lo is not None and hi is not None
    if n is None or not lo <= n <= hi:
        raise InvalidPolicy("spec.replicas", f"expected a count within {lo}..{hi}, got {n!r}")
    return FixedPolicy(manifest["metadata"]["name"], workload, n, lo, hi)


def validate_fixed_settings(section: Mapping[str, Any]) -> None:
    for key, value in section.items():
        if key != "note":
            raise InvalidPolicy(f"fixed.{key}", "unknown setting; expected note")
        if not isinstance(value, str):
            raise InvalidPolicy("fixed.note", f"expected a string, got {value!r}")


def fold_fixed_status(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation) -> None:
    replicas = as_int(obs.replicas_after())
    if replicas is not None:
        status["replicas"] = replicas


FIXED = PolicyKind(
    "Fixed",
    "toy.tandem.dev",
    ("v1",),
    "fixeds",
    parse_fixed,
    settings_section="fixed",
    validate_settings=validate_fixed_settings,
    status=StatusShape(fold_fixed_status, conditions=("state", "conditions")),
)


@pytest.fixture(autouse=True)
def fixed_kind() -> Iterator[None]:
    register(FIXED)
    yield
    unregister(FIXED)


def manifest(replicas: int = 5, lo: int = 1, hi: int = 5) -> dict[str, Any]:
    return {
        "apiVersion": "toy.tandem.dev/v1",
        "kind": "Fixed",
        "metadata": {"name": "toy", "namespace": "shop", "annotations": {"tandem.dev/cluster": "eu-1"}},
        "spec": {
            "targetRef": {"kind": "Deployment", "name": "web"},
            "replicas": replicas,
            "minReplicas": lo,
            "maxReplicas": hi,
        },
    }


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A 5-minute stream of one workload (2 replicas of 500m, 3 cores used) and the policy file."""
    wl = WL.as_dict()
    lines: list[dict[str, Any]] = [
        {
            "type": "workload",
            "ts": T0,
            "workload": wl,
            "replicas": 2,
            "containers": {"web": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}},
        }
    ]
    lines += [
        {
            "type": "metric",
            "ts": T0 + 30 * i,
            "workload": wl,
            "samples": [{"pod": f"web-{p}", "container": "web", "cpu": 1.5, "memory": 104857600} for p in (0, 1)],
        }
        for i in range(10)
    ]
    stream = tmp_path / "stream.jsonl"
    stream.write_text("".join(json.dumps(x) + "\n" for x in lines))
    policy = tmp_path / "fixed.json"
    policy.write_text(json.dumps(manifest()))
    return stream, policy


def test_tandem_replay_decides_with_the_registered_kind(files: tuple[Path, Path], tmp_path: Path) -> None:
    stream, policy = files
    out = tmp_path / "out.jsonl"
    assert tandem(["replay", str(stream), "--policy", str(policy), "--out", str(out)]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["type"], e["data"]["tick"]) for e in events] == [("dev.tandem.decision.v1", T0)]
    data = events[0]["data"]
    assert data["policy"] == {"kind": "Fixed", "name": "toy", "mode": "Auto"}
    assert data["replicas"] == {"from": 2, "to": 5}
    assert data["reasons"] == ["fixed: always 5"]


def test_the_unknown_kind_error_lists_the_registered_toy() -> None:
    with pytest.raises(InvalidPolicy, match=r"expected Hvpa, Tortoise, CustomHpa or Fixed$"):
        parse_policy({**manifest(), "kind": "Nope"}, WL)


def test_the_applier_checks_bound_the_kind() -> None:
    chosen = find_policy([manifest()], WL, "Fixed", "toy")
    bounds = policy_bounds(parse_policy(chosen, WL))
    assert check_decision({"replicas": {"from": 2, "to": 5}}, bounds) == []
    assert check_decision({"replicas": {"from": 2, "to": 6}}, bounds) == [
        "replicas 6 is above the policy's maxReplicas 5 (Fixed toy)"
    ]
    lower = policy_bounds(parse_policy(manifest(replicas=3, lo=3, hi=4), WL))
    assert check_decision({"replicas": {"from": 3, "to": 2}}, lower) == [
        "replicas 2 is below the policy's minReplicas 3 (Fixed toy)"
    ]
    resources = {"containers": {"web": {"requests": {"cpu": {"from": "500m", "to": "1"}}}}}
    assert check_decision(resources, bounds) == [
        "Fixed toy does not change container resources, but the decision changes web"
    ]


def test_the_report_draws_the_kinds_bounds_and_decision(files: tuple[Path, Path], tmp_path: Path) -> None:
    stream, _ = files
    data, pngs = build(
        [str(stream)], tmp_path / "report", settings=Settings(), policies=[manifest()], png="none", err=io.StringIO()
    )
    w = data.workloads[WL.key]
    assert w.bounds == [(-math.inf, 1, 5)]
    assert [(e.type, e.event["data"]["replicas"]["to"]) for e in w.events] == [("decision", 5)]
    assert pngs == []
    assert "Fixed toy" in (tmp_path / "report" / "index.html").read_text()


def test_the_simulator_runs_the_kind_in_closed_loop(files: tuple[Path, Path]) -> None:
    stream, policy = files
    err = io.StringIO()
    [out] = simulate([str(stream)], [str(policy)], Settings(), 60.0, err)
    assert err.getvalue() == ""
    assert (out.policy, out.workload, out.decisions, out.replica_changes, out.samples) == ("fixed", WL.key, 1, 1, 10)
    assert out.timeline == [(T0 + 60, 5, {"web": {"cpu": 500, "memory": 536870912000}})]
    # at the toy's maxReplicas (5 x 500m = 2.5 cores) the 3 cores of demand saturate every sample
    # after the decision took effect (T0 + 60 .. T0 + 270)
    assert out.saturated_samples == 8


def test_the_collector_watches_the_kinds_crd_and_sends_its_policy_events() -> None:
    resource = Resource("toy.tandem.dev", "v1", "fixeds", "Fixed")
    assert policy_resources()[-1] == resource  # the CRD the collector and the applier list/watch
    obj = {**manifest(), "metadata": {**manifest()["metadata"], "uid": "u1", "resourceVersion": "7"}}
    [event] = Collector("eu-1").observe("ADDED", resource, obj, T0)
    assert (event["type"], event["workload"], event["policy"]) == ("policy", WL.as_dict(), manifest())


def test_the_kinds_settings_section_is_validated_at_start_and_shown_to_its_policies() -> None:
    with pytest.raises(InvalidPolicy, match=r"^field 'fixed.notes': unknown setting; expected note$"):
        Settings.from_mapping({"fixed": {"notes": "x"}})
    with pytest.raises(InvalidPolicy, match=r"expected one of sync_period, cluster, hpa, vpa, tortoise, fixed$"):
        Settings.from_mapping({"fixd": {}})
    settings = Settings.from_mapping({"fixed": {"note": "set by the cluster admin"}})
    workload = {"replicas": 2, "containers": {"web": {"requests": {"cpu": "500m"}}}}
    [(topic, event)] = Engine(settings).run(
        [
            policy_event(manifest(), "eu-1", T0 - 1),
            {"type": "workload", "ts": T0 - 1, "workload": WL.as_dict(), **workload},
        ]
    )
    assert (topic, event["data"]["reasons"]) == ("audit", ["fixed: always 5", "fixed: set by the cluster admin"])


def test_the_applier_writes_the_kinds_status_with_its_conditions_in_its_place() -> None:
    obj = {**manifest(), "status": {}}
    data = {"tick": T0, "policy": {"kind": "Fixed", "name": "toy", "mode": "Auto"}, "replicas": {"from": 2, "to": 5}}
    applied = {"type": APPLIED, "data": {"patched": ["replicas"]}}
    assert fold_status(obj, [Observation("decision", data, applied)]) == {"replicas": 5}
    ambiguous = {
        "tick": T0 + 15,
        "blocked": [{"target": "policy", "reason": AMBIGUOUS_POLICY}],
        "inputs": {"replicas": 5},
        "ambiguous": [
            {"apiVersion": "toy.tandem.dev/v1", "kind": "Fixed", "namespace": "shop", "name": "toy"},
            {"apiVersion": "toy.tandem.dev/v1", "kind": "Fixed", "namespace": "shop", "name": "other"},
        ],
    }
    status = fold_status(obj, [Observation("blocked", ambiguous)])
    assert status is not None
    assert status["replicas"] == 5
    [condition] = status["state"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("ScalingActive", "False", AMBIGUOUS_POLICY)


def test_the_edge_rbac_rules_give_the_collector_and_the_applier_the_kinds_crd_and_status() -> None:
    assert Rule(("toy.tandem.dev",), ("fixeds",), ("get", "list", "watch")) in rules("collector")
    applier = rules("applier")
    assert Rule(("toy.tandem.dev",), ("fixeds",), ("get", "list")) in applier
    assert Rule(("toy.tandem.dev",), ("fixeds/status",), ("patch",)) in applier
