"""The policy-kind registry: one descriptor per kind and group, asked by the parser, the settings,
the collector's and applier's CRD list, and the unknown-kind error."""

from __future__ import annotations

from typing import Any

import pytest

from edge.kube import POLICY_RESOURCES, Resource, policy_resources
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies import PolicyKind, kinds, lookup, parse_policy, register, unregister
from scaling.policies.custom_hpa import CustomHpaPolicy
from scaling.policies.hvpa import HvpaPolicy
from scaling.policies.hvpa.v2 import HvpaV2Policy
from scaling.policies.tortoise import TortoisePolicy
from scaling.settings import Settings

WL = WorkloadRef("default", "shop", "Deployment", "web")


def test_the_built_in_kinds_are_registered_in_order() -> None:
    assert [(k.kind, k.api_version, k.plural) for k in kinds()] == [
        ("Hvpa", "autoscaling.k8s.io/v1alpha1", "hvpas"),
        ("Hvpa", "autoscaling.gardener.cloud/v1alpha1", "hvpas"),
        ("Tortoise", "autoscaling.mercari.com/v1beta3", "tortoises"),
        ("CustomHpa", "autoscaling.tandem.dev/v1alpha1", "customhpas"),
    ]


def test_the_crds_the_edge_reads_are_the_registered_kinds() -> None:
    assert [(r.api_version, r.plural, r.kind) for r in POLICY_RESOURCES] == [
        ("autoscaling.k8s.io/v1alpha1", "hvpas", "Hvpa"),
        ("autoscaling.gardener.cloud/v1alpha1", "hvpas", "Hvpa"),
        ("autoscaling.mercari.com/v1beta3", "tortoises", "Tortoise"),
        ("autoscaling.tandem.dev/v1alpha1", "customhpas", "CustomHpa"),
    ]
    assert policy_resources() == POLICY_RESOURCES


@pytest.mark.parametrize(
    ("api", "kind", "cls"),
    [
        ("autoscaling.k8s.io/v1alpha1", "Hvpa", HvpaPolicy),
        ("autoscaling.gardener.cloud/v1alpha1", "Hvpa", HvpaV2Policy),
        ("autoscaling.mercari.com/v1beta3", "Tortoise", TortoisePolicy),
        ("autoscaling.tandem.dev/v1alpha1", "CustomHpa", CustomHpaPolicy),
    ],
)
def test_lookup_picks_the_descriptor_by_kind_and_group(api: str, kind: str, cls: type) -> None:
    desc = lookup(api, kind)
    assert (desc.kind, desc.api_version) == (kind, api)
    assert desc.parse.__module__ == cls.__module__


def test_an_unknown_kind_lists_the_registered_kinds() -> None:
    with pytest.raises(InvalidPolicy) as exc:
        lookup("autoscaling.k8s.io/v1", "VerticalPodAutoscaler")
    assert str(exc.value) == (
        "field 'kind': unknown policy kind 'VerticalPodAutoscaler'; expected Hvpa, Tortoise or CustomHpa"
    )


def test_a_known_kind_in_another_group_names_the_groups() -> None:
    with pytest.raises(InvalidPolicy) as exc:
        lookup("example.com/v1", "Hvpa")
    assert str(exc.value) == (
        "field 'apiVersion': 'example.com/v1' is not an API version of Hvpa "
        "(autoscaling.k8s.io/, autoscaling.gardener.cloud/...)"
    )


def _never(manifest: Any, workload: WorkloadRef) -> Any:
    raise AssertionError("not parsed")


def test_a_registered_kind_is_listed_and_parsed_until_unregistered() -> None:
    extra = register(PolicyKind("Extra", "example.com", ("v1",), "extras", _never))
    try:
        with pytest.raises(InvalidPolicy) as exc:
            parse_policy({"apiVersion": "example.com/v1", "kind": "Other"}, WL)
        assert "expected Hvpa, Tortoise, CustomHpa or Extra" in str(exc.value)
        assert policy_resources()[-1] == Resource("example.com", "v1", "extras", "Extra")
        with pytest.raises(ValueError, match="already registered"):
            register(PolicyKind("Extra", "example.com", ("v2",), "extras", _never))
    finally:
        unregister(extra)
    assert extra not in kinds()
    assert policy_resources() == POLICY_RESOURCES


def test_a_kind_validates_its_own_settings_section() -> None:
    with pytest.raises(InvalidPolicy) as exc:
        Settings.from_mapping({"tortoise": {"NoSuchKey": 1}})
    assert "NoSuchKey" in str(exc.value)
    validated: list[Any] = []
    extra = register(
        PolicyKind("Extra", "example.com", ("v1",), "extras", _never, "vpa", validate_settings=validated.append)
    )
    try:
        Settings.from_mapping({"vpa": {"pod-recommendation-min-cpu-millicores": 25}})
    finally:
        unregister(extra)
    assert validated == [{"pod-recommendation-min-cpu-millicores": 25}]
