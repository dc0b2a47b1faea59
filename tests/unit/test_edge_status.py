"""The pure half of the policy status and Events (edge/status.py): shapes, idempotency, time order.

The writes themselves are exercised on the real kube-apiserver in
tests/integration/test_policy_status_kube.py.
"""

from __future__ import annotations

from typing import Any

from edge.status import Observation, event_for, event_name, fold_status, merge_patch, rfc3339
from scaling.cloudevents import APPLIED, APPLY_FAILED

TICK = 1_762_250_430.0  # 2025-11-04T10:00:30Z


def data(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "workload": {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"},
        "tick": TICK,
        "policy": {"kind": "Hvpa", "name": "web", "mode": "Auto"},
        "dry_run": False,
        "blocked": [],
        "reasons": [],
        "inputs": {},
    }
    return {**base, **extra}


def result(type_: str = APPLIED, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "data": {"patched": ["replicas"], "dry_run": False, **extra}}


GARDENER = {
    "apiVersion": "autoscaling.gardener.cloud/v1alpha1",
    "kind": "Hvpa",
    "metadata": {"name": "web"},
    "spec": {"scaleUp": {"updatePolicy": {"updateMode": "Auto"}}},
}
RELEASED = {"apiVersion": "autoscaling.k8s.io/v1alpha1", "kind": "Hvpa", "metadata": {"name": "web"}, "spec": {}}


def test_rfc3339_is_metav1_time_to_the_second() -> None:
    assert rfc3339(TICK) == "2025-11-04T10:00:30Z"
    assert rfc3339(TICK + 0.9) == "2025-11-04T10:00:30Z"


def test_the_gardener_hvpa_status_has_the_scale_interval_shape() -> None:
    obs = Observation(
        "decision",
        data(
            replicas={"from": 2, "to": 3},
            containers={"app": {"requests": {"cpu": {"from": "100m", "to": "300m"}}}},
            inputs={"replicas": 2},
        ),
        result(),
    )
    assert fold_status(GARDENER, [obs]) == {
        "replicas": 3,
        "scaleUpUpdatePolicy": {"updateMode": "Auto"},
        "lastScaling": {
            "lastUpdated": "2025-11-04T10:00:30Z",
            "hpaStatus": {"currentReplicas": 2, "desiredReplicas": 3},
            "vpaStatus": [{"containerName": "app", "resources": {"requests": {"cpu": "300m"}}}],
        },
    }


def test_the_seed_form_weights_are_fractions_and_the_released_ones_integers() -> None:
    seed = Observation("blocked", data(reasons=["hvpa: vpaWeight 0.4 at 2 replicas (hpaWeight 0.6)"]))
    released = Observation("blocked", data(reasons=["hvpa: vpaWeight 40 at 2 replicas (hpaWeight 60)"]))
    assert fold_status(RELEASED, [seed]) == {"vpaWeight": 0.4, "hpaWeight": 0.6}
    assert fold_status(RELEASED, [released]) == {"vpaWeight": 40, "hpaWeight": 60}


def test_folding_the_same_observation_again_changes_nothing() -> None:
    obs = Observation("decision", data(replicas={"from": 2, "to": 3}, inputs={"replicas": 2}), result())
    once = fold_status(RELEASED, [obs])
    assert once is not None
    assert fold_status({**RELEASED, "status": once}, [obs]) == once


def test_an_older_observation_does_not_take_the_status_back_in_time() -> None:
    new = Observation("decision", data(tick=TICK + 60, replicas={"from": 3, "to": 4}), result())
    old = Observation("decision", data(replicas={"from": 2, "to": 3}), result())
    status = fold_status(RELEASED, [new])
    assert status is not None
    assert fold_status({**RELEASED, "status": status}, [old]) == status
    # Within one batch the observations are taken oldest first, whatever their arrival order.
    assert fold_status(RELEASED, [new, old]) == status


def test_a_kind_without_a_status_shape_gets_none() -> None:
    toy = {"apiVersion": "toy.example/v1", "kind": "Toy", "metadata": {"name": "t"}, "spec": {}}
    assert fold_status(toy, [Observation("blocked", data())]) is None


def test_merge_patch_removes_what_is_gone_and_sends_lists_whole() -> None:
    old = {"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2], "gone": True}
    new = {"a": 1, "b": {"c": 1, "d": 3}, "l": [1]}
    assert merge_patch(old, new) == {"b": {"d": 3}, "l": [1], "gone": None}
    assert merge_patch(new, new) == {}


def test_events_say_what_explain_says_and_repeats_are_no_news() -> None:
    d = data(replicas={"from": 2, "to": 3})
    assert event_for(Observation("decision", d, result())) == (
        "Normal",
        "Applied",
        "Hvpa web (Auto): Decision: replicas from 2 to 3.",
    )
    assert event_for(Observation("decision", d, result(repeat=True))) is None
    assert event_for(Observation("decision", d, result(patched=[]))) is None
    failed = Observation("decision", d, {"type": APPLY_FAILED, "data": {"error": "API error: 403"}})
    assert event_for(failed) == ("Warning", "FailedApply", "Hvpa web (Auto): the applier failed: API error: 403")
    blocked = Observation("blocked", data(blocked=[{"target": "replicas", "reason": "Cooldown", "wanted": 4}]))
    assert event_for(blocked) == (
        "Normal",
        "HeldBack",
        "Hvpa web (Auto): Nothing changed. Held back: replicas (to 4), because the cooldown since the last "
        "scaling has not passed (Cooldown).",
    )


def test_an_event_name_is_fixed_by_what_it_says() -> None:
    a = event_name("Deployment", "web", "Normal", "HeldBack", "m")
    assert a == event_name("Deployment", "web", "Normal", "HeldBack", "m")
    assert a.startswith("web.tandem-") and len(a) == len("web.tandem-") + 16
    assert a != event_name("Deployment", "web", "Normal", "HeldBack", "n")
    assert a != event_name("Hvpa", "web", "Normal", "HeldBack", "m")
