"""The edge's RBAC rules, written from the policy-kind registry (``python -m schemas.generate``).

The collector lists and watches every registered kind's CRD and the applier reads each policy it
re-checks a decision against and patches the ``status`` of the kinds that have one
(``PolicyKind.status``): a kind missing from a ClusterRole would fail every decision of its
cluster, since the applier lists every registered kind.  So the rules are not written by hand:
:func:`rules` builds them from the registry around the fixed ones (workloads, pods, HPAs, VPAs,
metrics, Events), and the generator writes them into ``deploy/rbac/collector.yaml``,
``deploy/rbac/applier.yaml`` and the chart's ``templates/edge-rbac.yaml``, keeping everything
else in those files as it is (a test checks the checked-in files are what it writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from scaling.policies import kinds

__all__ = ["Rule", "chart_text", "role_text", "rules"]

READ = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a ClusterRole, with the comment written above it (if any)."""

    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    comment: str = ""

    def text(self) -> str:
        lines = [f"  # {self.comment}"] if self.comment else []
        lines += [
            f"  - apiGroups: {json.dumps(list(self.groups))}",
            f"    resources: {json.dumps(list(self.resources))}",
            f"    verbs: {json.dumps(list(self.verbs))}",
        ]
        return "".join(line + "\n" for line in lines)


def _by_group(resources: list[tuple[str, str]], verbs: tuple[str, ...], comment: str) -> list[Rule]:
    """One rule per API group (in registration order), the first with ``comment``."""
    groups: dict[str, list[str]] = {}
    for group, resource in resources:
        groups.setdefault(group, [])
        if resource not in groups[group]:
            groups[group].append(resource)
    return [
        Rule((group,), tuple(names), verbs, comment if i == 0 else "")
        for i, (group, names) in enumerate(groups.items())
    ]


def rules(component: str) -> list[Rule]:
    """The rules of ``collector`` or ``applier``, the registered kinds' included."""
    crds = [(k.group, k.plural) for k in kinds()]
    if component == "collector":
        return [
            Rule(("apps",), ("deployments", "statefulsets"), READ, "What it turns into input events (read only)."),
            Rule(("",), ("pods",), READ),
            Rule(("autoscaling",), ("horizontalpodautoscalers",), READ),
            Rule(("autoscaling.k8s.io",), ("verticalpodautoscalers",), READ),
            *_by_group(crds, READ, "The CRD of every registered policy kind (scaling/policies/registry.py)."),
            Rule(("metrics.k8s.io",), ("pods",), ("get", "list")),
            Rule(
                ("",),
                ("events",),
                ("create", "get", "patch"),
                "The InvalidPolicy Warning on a policy object it refuses: created, then counted (read and patched).",
            ),
        ]
    if component == "applier":
        status = [(k.group, f"{k.plural}/status") for k in kinds() if k.status is not None]
        return [
            Rule(
                ("apps",),
                ("deployments", "statefulsets"),
                ("get", "patch"),
                "Pod template resources and tandem's annotations (server-side apply); nothing is created or deleted.",
            ),
            Rule(
                ("apps",),
                ("deployments/scale", "statefulsets/scale"),
                ("get", "patch"),
                "Replicas, through the scale subresource only.",
            ),
            Rule(
                ("autoscaling",),
                ("horizontalpodautoscalers",),
                ("get", "list", "patch"),
                "HPA min/max replicas and metric targets.",
            ),
            *_by_group(
                crds, ("get", "list"), "The policies every decision is re-checked against (every registered kind)."
            ),
            *_by_group(
                status, ("patch",), 'The status of the policies it manages (docs/edge.md, "Status and Events").'
            ),
            Rule(
                ("",),
                ("events",),
                ("create", "get", "patch"),
                "Events on the scale target and the policy: created, then counted (read and patched) on repeat.",
            ),
        ]
    raise ValueError(f"no RBAC rules for {component!r}: expected collector or applier")


def _rules_text(component: str) -> str:
    return "".join(rule.text() for rule in rules(component))


def role_text(path: Path, component: str) -> str:
    """``deploy/rbac/<component>.yaml`` with its ClusterRole's ``rules:`` (up to the next document)
    written anew, the rest kept."""
    text = path.read_text()
    role = text.index("\nkind: ClusterRole\n")
    start = text.index("\nrules:\n", role) + len("\nrules:\n")
    end = text.index("\n---\n", start) + 1
    return text[:start] + _rules_text(component) + text[end:]


#: The chart's two blocks of rules (``templates/edge-rbac.yaml``): the collector's, then the applier's.
_CHART_COLLECTOR = '{{- if eq .component "collector" }}\n'
_CHART_APPLIER = "{{- else }}\n"
_CHART_END = "{{- end }}\n"


def chart_text(path: Path) -> str:
    """The chart's ``edge-rbac.yaml`` with both blocks of rules written anew, the rest kept."""
    text = path.read_text()
    a = text.index(_CHART_COLLECTOR) + len(_CHART_COLLECTOR)
    b = text.index(_CHART_APPLIER, a)
    c = b + len(_CHART_APPLIER)
    d = text.index(_CHART_END, c)
    return text[:a] + _rules_text("collector") + _CHART_APPLIER + _rules_text("applier") + text[d:]
