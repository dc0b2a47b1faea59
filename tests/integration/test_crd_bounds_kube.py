"""The CRDs' bounds and names on a real kube-apiserver (issue 29, item 6).

``kubectl apply`` of a policy with an out-of-range value must be refused by the API server with
the field named, not taken and found wrong by the collector afterwards.  The cases are those the
parser refuses (tests/unit/test_crd_bounds.py): the CRDs carry the same bounds, generated from
``scaling/policies/fields.py``.  ``kubectl get`` resolves short names and categories from the API
server's discovery documents; they are read here as kubectl reads them (no kubectl needed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from edge.kube import request
from tests.integration.test_crd_validation import crds, create
from tests.unit.test_crd_bounds import CASES

pytestmark = [pytest.mark.kube]

__all__ = ["crds"]  # the fixture, shared


@pytest.mark.parametrize(("manifest", "field"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_the_api_server_refuses_each_out_of_range_value_naming_the_field(
    kube_api: client.ApiClient, crds: str, manifest: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiException) as caught:
        create(kube_api, crds, manifest, "out-of-range")
    assert caught.value.status == 422, caught.value.body
    body = json.loads(caught.value.body)
    assert body["reason"] == "Invalid"
    # Every cause names the field (a negative maxReplicas also breaks minReplicas <= maxReplicas);
    # an enum error adds one without a field: "some validation rules were not checked".
    named = {c["field"] for c in body["details"]["causes"]} - {"<nil>"}
    assert named == {field}, body["message"]
    assert f"{field}: " in body["message"]


def test_the_cases_in_range_are_taken(kube_api: client.ApiClient, crds: str) -> None:
    """Each case's manifest is valid but for its one value: the example it was made from is taken."""
    from tests.unit.test_crd_bounds import example

    for i, name in enumerate(
        ("policy-hvpa-released", "policy-hvpa-scale-intervals", "policy-tortoise", "policy-custom-hpa")
    ):
        create(kube_api, crds, example(name), f"ok-{i}")


def _discovery(api: client.ApiClient, group: str, version: str) -> dict[str, dict[str, Any]]:
    doc = request(api, "GET", f"/apis/{group}/{version}")
    return {r["name"]: r for r in doc["resources"]}


def test_every_policy_kind_has_its_own_short_name_and_the_tandem_category(
    kube_api: client.ApiClient, crds: str
) -> None:
    found = {
        (group, r["kind"]): (sorted(r.get("shortNames") or []), r.get("categories"))
        for group, version, plural in (
            ("autoscaling.k8s.io", "v1alpha1", "hvpas"),
            ("autoscaling.gardener.cloud", "v1alpha1", "hvpas"),
            ("autoscaling.mercari.com", "v1beta3", "tortoises"),
            ("autoscaling.tandem.dev", "v1alpha1", "customhpas"),
        )
        for r in [_discovery(kube_api, group, version)[plural]]
    }
    assert found == {
        ("autoscaling.k8s.io", "Hvpa"): (["khvpa"], ["tandem"]),
        ("autoscaling.gardener.cloud", "Hvpa"): (["ghvpa"], ["tandem"]),
        ("autoscaling.mercari.com", "Tortoise"): (["tts"], ["tandem"]),
        ("autoscaling.tandem.dev", "CustomHpa"): (["chpa"], ["tandem"]),
    }
    # `kubectl get tandem` lists every resource of the category, across groups: all four.
    shorts = [s for names, _ in found.values() for s in names]
    assert len(shorts) == len(set(shorts)) == 4
