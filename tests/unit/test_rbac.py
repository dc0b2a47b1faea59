"""The edge's RBAC rules are written from the policy-kind registry, as the CRDs are: the checked-in
ClusterRoles (deploy/rbac and the chart) are what ``python -m schemas.generate`` writes, and every
registered kind has its CRD in both roles and its status subresource in the applier's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scaling.policies import kinds
from schemas.generate import CHART_RBAC, RBAC, generated_files
from schemas.rbac import rules

FILES = (RBAC / "collector.yaml", RBAC / "applier.yaml", CHART_RBAC)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_checked_in_rbac_is_what_the_generator_writes(path: Path) -> None:
    assert path.read_text() == generated_files()[path]


def _granted(component: str) -> set[tuple[str, str, str]]:
    (role,) = [d for d in yaml.safe_load_all((RBAC / f"{component}.yaml").read_text()) if d["kind"] == "ClusterRole"]
    return {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


def test_every_registered_kind_is_watched_read_and_its_status_patched() -> None:
    collector, applier = _granted("collector"), _granted("applier")
    for k in kinds():
        assert {(k.group, k.plural, v) for v in ("get", "list", "watch")} <= collector
        assert {(k.group, k.plural, v) for v in ("get", "list")} <= applier
        assert ((k.group, f"{k.plural}/status", "patch") in applier) == (k.status is not None)


def test_the_rules_of_an_unknown_component_are_an_error() -> None:
    with pytest.raises(ValueError, match=r"^no RBAC rules for 'worker': expected collector or applier$"):
        rules("worker")
