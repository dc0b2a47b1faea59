"""Two policies on one workload: none acts until one is left (issue 29, item 2).

Kubernetes' HPA controller refuses to scale pods that several HPAs select (``AmbiguousSelector``,
``ScalingActive=False``); tandem's core does the same for several policies targeting one
workload, so that the order in which their events arrive never decides which one scales it.
The core keeps each policy by its identity (group, kind, namespace, name); these tests pin what
the audit says, that it resolves by itself, and that the state survives a save and restore.
"""

from __future__ import annotations

from typing import Any

import pytest

from scaling.cloudevents import BLOCKED, DECISION
from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import decode_event, policy_identity
from scaling.settings import Settings
from scaling.state import WorkloadState

T0 = 1_762_250_400.0
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
KEY = "c1/shop/Deployment/web"


def custom_hpa(name: str, max_replicas: int = 20) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "target": {"value": 100},
            "metric": {"series": "queue_depth"},
            "minReplicas": 5,
            "maxReplicas": max_replicas,
            "controlLoopPeriod": 15,
            "behavior": {"scaleUpCooldown": 0, "scaleUpMaxFactor": 0.2},
        },
    }


def tortoise_off(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"updateMode": "Off", "targetRefs": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}},
    }


def policy(ts: float, manifest: dict[str, Any] | None, deleted: dict[str, str] | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": "policy", "ts": ts, "workload": WL, "policy": manifest}
    if deleted is not None:
        ev["deleted"] = deleted
    return ev


def workload(ts: float, replicas: int) -> dict[str, Any]:
    return {"type": "workload", "ts": ts, "workload": WL, "replicas": replicas, "containers": {"app": {}}}


def sample(ts: float, value: float) -> dict[str, Any]:
    return {"type": "metric", "ts": ts, "workload": WL, "series": "queue_depth", "value": value}


def run(events: list[dict[str, Any]], engine: Engine | None = None) -> list[dict[str, Any]]:
    engine = engine or Engine(Settings(sync_period=15.0))
    return [e for kind, e in engine.run(events) if kind == "audit"]


def summary(out: list[dict[str, Any]]) -> list[tuple[str, float, str, str]]:
    """(type, tick, policy name, replicas or blocked reasons) of each audit event."""
    rows = []
    for e in out:
        d = e["data"]
        what = (
            f"{d['replicas']['from']}->{d['replicas']['to']}"
            if "replicas" in d
            else ",".join(b["reason"] for b in d["blocked"])
        )
        rows.append(("decision" if e["type"] == DECISION else "blocked", d["tick"] - T0, d["policy"]["name"], what))
    return rows


HPA_WEB = {"apiVersion": "autoscaling.tandem.dev/v1alpha1", "kind": "CustomHpa", "namespace": "shop", "name": "web"}
HPA_WEB2 = {**HPA_WEB, "name": "web-2"}


def test_a_second_policy_stops_both_and_removing_it_lets_the_first_act_again() -> None:
    out = run(
        [
            policy(T0 + 1, custom_hpa("web")),
            workload(T0 + 1, 10),
            sample(T0 + 2, 150.0),  # tick 15: web scales 10 -> 12
            policy(T0 + 20, custom_hpa("web-2", max_replicas=30)),
            workload(T0 + 20, 12),
            sample(T0 + 21, 150.0),  # tick 30: two policies, neither acts
            sample(T0 + 35, 150.0),  # tick 45: still two: not reported again
            policy(T0 + 50, None, deleted=HPA_WEB2),
            sample(T0 + 51, 150.0),  # tick 60: web alone again: 12 -> 15
        ]
    )
    assert summary(out) == [
        ("decision", 15.0, "web", "10->12"),
        ("blocked", 30.0, "web", "AmbiguousPolicy"),
        ("blocked", 30.0, "web-2", "AmbiguousPolicy"),
        ("decision", 60.0, "web", "12->15"),
    ]
    blocked = out[1]
    assert blocked["type"] == BLOCKED and blocked["subject"] == KEY
    assert blocked["data"]["policy"] == {"kind": "CustomHpa", "name": "web", "mode": "Ambiguous"}
    assert blocked["data"]["blocked"] == [{"target": "policy", "reason": "AmbiguousPolicy"}]
    assert blocked["data"]["reasons"] == [
        "2 policies target Deployment shop/web: CustomHpa web (autoscaling.tandem.dev/v1alpha1) and "
        "CustomHpa web-2 (autoscaling.tandem.dev/v1alpha1); none acts while more than one does"
    ]
    named = [{**HPA_WEB, "apiVersion": "autoscaling.tandem.dev/v1alpha1"}, {**HPA_WEB2}]
    assert blocked["data"]["ambiguous"] == named
    assert out[2]["data"]["ambiguous"] == named


def test_an_hvpa_like_auto_policy_and_a_tortoise_off_in_either_order_give_the_same_outcome() -> None:
    """The issue's case: the later policy used to replace the earlier one silently."""
    first = run([policy(T0 + 1, custom_hpa("web")), policy(T0 + 1, tortoise_off("web")), workload(T0 + 1, 10)])
    second = run([policy(T0 + 1, tortoise_off("web")), policy(T0 + 1, custom_hpa("web")), workload(T0 + 1, 10)])
    assert first == second
    assert summary(first) == [("blocked", 15.0, "web", "AmbiguousPolicy"), ("blocked", 15.0, "web", "AmbiguousPolicy")]
    assert [e["data"]["policy"]["kind"] for e in first] == ["Tortoise", "CustomHpa"]  # by group: mercari < tandem


def test_the_same_policy_sent_again_replaces_itself_and_is_no_ambiguity() -> None:
    out = run(
        [
            policy(T0 + 1, custom_hpa("web")),
            policy(T0 + 1, custom_hpa("web", max_replicas=11)),
            workload(T0 + 1, 10),
            sample(T0 + 2, 150.0),
        ]
    )
    assert summary(out) == [("decision", 15.0, "web", "10->11")]


def test_a_deletion_naming_no_policy_removes_every_policy_of_the_workload() -> None:
    """A Kafka tombstone, or a recording from before deletions named their policy."""
    out = run(
        [
            policy(T0 + 1, custom_hpa("web")),
            policy(T0 + 1, custom_hpa("web-2")),
            workload(T0 + 1, 10),
            policy(T0 + 20, None),
            sample(T0 + 21, 150.0),
            policy(T0 + 40, custom_hpa("web")),
            sample(T0 + 41, 150.0),
        ]
    )
    assert summary(out) == [
        ("blocked", 15.0, "web", "AmbiguousPolicy"),
        ("blocked", 15.0, "web-2", "AmbiguousPolicy"),
        ("decision", 45.0, "web", "10->12"),
    ]


def test_two_policy_files_for_one_workload_are_ambiguous_too() -> None:
    engine = Engine(Settings(sync_period=15.0, cluster="c1"))
    engine.add_policy(custom_hpa("web"))
    engine.add_policy(tortoise_off("web"))
    out = run([workload(T0 + 1, 10), sample(T0 + 2, 150.0)], engine)
    assert summary(out) == [("blocked", 15.0, "web", "AmbiguousPolicy"), ("blocked", 15.0, "web", "AmbiguousPolicy")]


def test_the_ambiguity_survives_a_save_and_restore_and_an_old_state_is_read_as_its_one_policy() -> None:
    engine = Engine(Settings(sync_period=15.0))
    run([policy(T0 + 1, custom_hpa("web")), policy(T0 + 1, custom_hpa("web-2")), workload(T0 + 1, 10)], engine)
    state = engine.states[KEY]
    restored = WorkloadState.from_dict(state.to_dict())
    assert (
        restored.policy_ids
        == state.policy_ids
        == [policy_identity("autoscaling.tandem.dev/v1alpha1", "CustomHpa", "shop", name) for name in ("web", "web-2")]
    )
    assert restored.policy_ids == [
        "autoscaling.tandem.dev/CustomHpa/shop/web",
        "autoscaling.tandem.dev/CustomHpa/shop/web-2",
    ]
    # A state written before policies were kept by identity: raw["policy"] was the one event.
    old = {"key": KEY, "raw": {"policy": policy(T0 + 1, custom_hpa("web"))}}
    assert WorkloadState.from_dict(old).policy_ids == ["autoscaling.tandem.dev/CustomHpa/shop/web"]


@pytest.mark.parametrize(
    ("extra", "field", "why"),
    [
        ({"deleted": {"apiVersion": "a/v1", "kind": "K", "name": "n", "nme": "x"}}, "deleted.nme", "unknown field"),
        ({"deleted": {"apiVersion": "a/v1", "kind": "K"}}, "deleted.name", "expected a non-empty string"),
        ({"deleted": "web"}, "deleted", "expected an object"),
    ],
)
def test_a_bad_deletion_names_its_field(extra: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(InvalidEvent) as info:
        decode_event({**policy(T0, None), **extra})
    assert info.value.field == field
    assert why in str(info.value)


def test_a_deletion_naming_a_policy_only_goes_with_a_null_manifest() -> None:
    with pytest.raises(InvalidEvent) as info:
        decode_event({**policy(T0, custom_hpa("web")), "deleted": HPA_WEB})
    assert info.value.field == "deleted"


# --- what the applier shows of it (edge/status.py; the writes: tests/integration/test_policy_status_kube.py)


def test_each_policy_s_status_says_scaling_is_not_active_naming_the_other_and_recovers() -> None:
    from edge.status import Observation, fold_status

    out = run(
        [
            policy(T0 + 1, custom_hpa("web")),
            policy(T0 + 1, tortoise_off("web")),
            workload(T0 + 1, 10),
            sample(T0 + 2, 150.0),
            policy(
                T0 + 20,
                None,
                deleted={
                    "apiVersion": "autoscaling.mercari.com/v1beta3",
                    "kind": "Tortoise",
                    **{"namespace": "shop", "name": "web"},
                },
            ),
            sample(T0 + 21, 150.0),
        ]
    )
    assert summary(out) == [
        ("blocked", 15.0, "web", "AmbiguousPolicy"),
        ("blocked", 15.0, "web", "AmbiguousPolicy"),
        ("decision", 30.0, "web", "10->12"),
    ]
    tortoise_report, hpa_report, decision = out
    tortoise_obj = {**tortoise_off("web"), "status": {}}
    status = fold_status(tortoise_obj, [Observation("blocked", tortoise_report["data"])])
    assert status is not None
    (condition,) = [c for c in status["conditions"]["tortoiseConditions"] if c["type"] == "ScalingActive"]
    assert condition == {
        "type": "ScalingActive",
        "status": "False",
        "reason": "AmbiguousPolicy",
        "message": "CustomHpa shop/web (autoscaling.tandem.dev/v1alpha1) targets the same workload: "
        "no policy acts while more than one does (delete all but one)",
        "lastUpdateTime": "2025-11-04T10:00:15Z",
        "lastTransitionTime": "2025-11-04T10:00:15Z",
    }
    hpa_obj = custom_hpa("web")
    held = fold_status(hpa_obj, [Observation("blocked", hpa_report["data"])])
    assert held is not None
    assert [(c["type"], c["status"], c["reason"]) for c in held["conditions"]] == [
        ("ScalingActive", "False", "AmbiguousPolicy")
    ]
    assert "Tortoise shop/web (autoscaling.mercari.com/v1beta3) targets" in held["conditions"][0]["message"]
    # The Tortoise is deleted: the CustomHpa's next decision makes its scaling active again.
    result = {"type": "dev.tandem.applied.v1", "data": {"patched": ["replicas"], "dry_run": False}}
    after = fold_status({**hpa_obj, "status": held}, [Observation("decision", decision["data"], result)])
    assert after is not None
    assert [(c["type"], c["status"], c["reason"]) for c in after["conditions"]] == [
        ("ScalingActive", "True", "ValidMetricFound"),  # the HPA shape's own reason for an active one
        ("AbleToScale", "True", "SucceededRescale"),
    ]
    # A shape without its own reason says why it is active again.
    hvpa_obj = {"apiVersion": "autoscaling.k8s.io/v1alpha1", "kind": "Hvpa", "metadata": {"name": "web"}, "spec": {}}
    hvpa_held = fold_status(
        hvpa_obj, [Observation("blocked", {**hpa_report["data"], "policy": {"kind": "Hvpa", "name": "web"}})]
    )
    assert hvpa_held is not None and hvpa_held["conditions"][0]["status"] == "False"
    hvpa_after = fold_status({**hvpa_obj, "status": hvpa_held}, [Observation("decision", decision["data"], result)])
    assert hvpa_after is not None
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in hvpa_after["conditions"]] == [
        ("ScalingActive", "True", "SinglePolicy", "the only policy of its workload: it acts")
    ]
