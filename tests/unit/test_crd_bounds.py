"""The bounds of scaling/policies/fields.py: the parser refuses what the CRDs refuse (issue 29, item 6).

Each case is a manifest with one out-of-range value.  Here the parser must refuse it naming the
field; tests/integration/test_crd_bounds_kube.py sends the same manifests to a real
kube-apiserver, which must refuse them naming the same field (the CRDs are generated from the same
declarations), and asks discovery for the kinds' short names and the ``tandem`` category.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.policies import parse_policy, policy_target
from scaling.policies.fields import HVPA_SPEC, manifest_tree
from schemas.generate import crd_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "schemas" / "examples"


def example(name: str) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())["policy"]
    return manifest


def _set(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    cur: Any = out
    parts = path.replace("[", ".").replace("]", "").split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


HVPA = example("policy-hvpa-released")
#: (id, manifest with one bad value, the field the parser and the API server name, the parser's words)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "vpaWeight-150",
        _set(HVPA, "spec.weightBasedScalingIntervals[0].vpaWeight", 150),
        "spec.weightBasedScalingIntervals[0].vpaWeight",
        "150 is outside 0..100",
    ),
    (
        "minReplicas-above-maxReplicas",
        _set(_set(HVPA, "spec.hpa.template.spec.minReplicas", 6), "spec.hpa.template.spec.maxReplicas", 4),
        "spec.hpa.template.spec.maxReplicas",
        "4 is below minReplicas 6",
    ),
    (
        "maxReplicas-negative",
        _set(HVPA, "spec.hpa.template.spec.maxReplicas", -3),
        "spec.hpa.template.spec.maxReplicas",
        "-3 is outside 1..2147483647",
    ),
    (
        "duration-in-words",
        _set(HVPA, "spec.vpa.scaleUp.stabilizationDuration", "3 minutes"),
        "spec.vpa.scaleUp.stabilizationDuration",
        "'3 minutes' is not a duration (like '3m' or '1h30m')",
    ),
    (
        "unknown-update-mode",
        _set(HVPA, "spec.hpa.scaleUp.updatePolicy.updateMode", "Sometimes"),
        "spec.hpa.scaleUp.updatePolicy.updateMode",
        "'Sometimes' is not one of Auto, Off, MaintenanceWindow",
    ),
    (
        "gardener-interval-maxReplicas-0",
        _set(example("policy-hvpa-scale-intervals"), "spec.scaleIntervals[0].maxReplicas", 0),
        "spec.scaleIntervals[0].maxReplicas",
        "0 is outside 1..2147483647",
    ),
    (
        "tortoise-unknown-update-mode",
        _set(example("policy-tortoise"), "spec.updateMode", "Sometimes"),
        "spec.updateMode",
        "'Sometimes' is not one of Off, Auto, Emergency",
    ),
    (
        "custom-hpa-minReplicas-above-maxReplicas",
        _set(_set(example("policy-custom-hpa"), "spec.minReplicas", 9), "spec.maxReplicas", 3),
        "spec.maxReplicas",
        "3 is below minReplicas 9",
    ),
]


@pytest.mark.parametrize(("manifest", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_parser_refuses_each_out_of_range_value_naming_the_field(
    manifest: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidPolicy) as info:
        parse_policy(manifest, policy_target(manifest, "c1"))
    assert (info.value.field, info.value.reason) == (field, words)


def test_each_case_is_valid_but_for_its_one_value() -> None:
    for name in ("policy-hvpa-released", "policy-hvpa-scale-intervals", "policy-tortoise", "policy-custom-hpa"):
        m = example(name)
        parse_policy(m, policy_target(m, "c1"))


def test_the_crd_schema_carries_the_bounds_and_the_min_max_rule() -> None:
    spec = crd_schema(manifest_tree(HVPA_SPEC))["properties"]["spec"]
    interval = spec["properties"]["weightBasedScalingIntervals"]["items"]["properties"]
    assert (interval["vpaWeight"]["minimum"], interval["vpaWeight"]["maximum"]) == (0, 100)
    template = spec["properties"]["hpa"]["properties"]["template"]["properties"]["spec"]
    assert template["x-kubernetes-validations"] == [
        {
            "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
            "message": "maxReplicas must not be below minReplicas",
            "fieldPath": ".maxReplicas",
        }
    ]
    assert template["properties"]["maxReplicas"] == {"type": "integer", "minimum": 1}
    scale_up = spec["properties"]["hpa"]["properties"]["scaleUp"]["properties"]
    assert scale_up["updatePolicy"]["properties"]["updateMode"]["enum"] == ["Auto", "Off", "MaintenanceWindow"]
    assert scale_up["stabilizationDuration"]["pattern"].startswith("^(0|")


@pytest.mark.parametrize("text", ["3m", "1h30m", "0", "90s", "1.5h", ".5m", "250ms"])
def test_every_duration_the_parser_reads_matches_the_crds_pattern(text: str) -> None:
    m = _set(HVPA, "spec.vpa.scaleUp.stabilizationDuration", text)
    parse_policy(m, policy_target(m, "c1"))
