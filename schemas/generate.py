"""Write the policy schemas from the one declaration of every kind's fields (``scaling.policies.fields``).

``python -m schemas.generate`` rewrites, from the policy-kind registry (each descriptor's
``fields``, group, plural and status):

* ``schemas/policy.schema.json``: the manifest's ``$defs`` (one closed ``spec`` per kind and group);
* each CRD in ``deploy/crds/``: only ``spec.versions[*].schema.openAPIV3Schema``, a structural
  schema that the API server enforces (unknown fields refused under ``fieldValidation=Strict``,
  pruned otherwise).  Everything else in a CRD (names, printer columns, ``subresources``) is
  kept as the file has it;
* the edge's RBAC rules (:mod:`schemas.rbac`): the ClusterRoles' ``rules`` in ``deploy/rbac/`` and in
  the chart's ``templates/edge-rbac.yaml``, the rest of those files kept.

``--check`` writes nothing and exits 1 when a checked-in file differs from what it would write
(``tests/unit/test_strict_schemas.py`` and ``tests/unit/test_rbac.py`` run the same comparison).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from scaling.policies import PolicyKind, kinds
from scaling.policies.fields import PREDICTIVE_STATUS, Arr, Leaf, Map, Node, Obj, manifest_tree, with_common_fields
from schemas.rbac import chart_text, role_text

ROOT = Path(__file__).resolve().parents[1]
POLICY_SCHEMA = ROOT / "schemas" / "policy.schema.json"
CRDS = ROOT / "deploy" / "crds"
RBAC = ROOT / "deploy" / "rbac"
CHART_RBAC = ROOT / "deploy" / "helm" / "tandem" / "templates" / "edge-rbac.yaml"

__all__ = ["crd_schema", "generated_files", "json_schema", "main"]


def _keys(node: Obj) -> dict[str, Node]:
    if not node.fold:
        return dict(node.fields)
    out: dict[str, Node] = {}
    for k, v in node.fields.items():  # the seed form's MinAllowed next to minAllowed
        out[k] = v
        out.setdefault(k[0].upper() + k[1:], v)
    return out


def crd_schema(node: Node) -> dict[str, Any]:
    """A structural OpenAPI v3 schema (apiextensions.k8s.io/v1) for ``node``."""
    out: dict[str, Any]
    if isinstance(node, Obj):
        if node.open:
            out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        else:
            out = {"type": "object", "properties": {k: crd_schema(v) for k, v in _keys(node).items()}}
            if node.required:
                out["required"] = list(node.required)
            if node.rules:
                # CEL (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules):
                # the error names the field of fieldPath, as the parser's does.
                out["x-kubernetes-validations"] = [
                    {"rule": r.cel, "message": r.message, "fieldPath": f".{r.upper}"} for r in node.rules
                ]
    elif isinstance(node, Arr):
        out = {"type": "array", "items": crd_schema(node.items)}
    elif isinstance(node, Map):
        out = {"type": "object", "additionalProperties": crd_schema(node.values)}
    elif node.type == "int-or-string":
        out = {"x-kubernetes-int-or-string": True}
    elif node.type == "any":
        out = {"x-kubernetes-preserve-unknown-fields": True}
    else:
        out = {"type": node.type}
    if isinstance(node, Leaf):
        out.update(_bounds(node))
    if node.description:
        out = {"description": node.description, **out}
    return out


def _bounds(leaf: Leaf) -> dict[str, Any]:
    """``enum``, ``minimum``/``maximum`` and ``pattern`` of a leaf: the same in OpenAPI v3 and JSON Schema."""
    out: dict[str, Any] = {}
    if leaf.enum:
        out["enum"] = list(leaf.enum)
    if leaf.minimum is not None:
        out["minimum"] = leaf.minimum
    if leaf.maximum is not None:
        out["maximum"] = leaf.maximum
    if leaf.pattern:
        out["pattern"] = leaf.pattern
    return out


def json_schema(node: Node) -> dict[str, Any]:
    """The same tree as JSON Schema draft 2020-12 (closed objects: ``additionalProperties: false``)."""
    out: dict[str, Any]
    if isinstance(node, Obj):
        if node.open:
            out = {"type": "object"}
        else:
            out = {
                "type": "object",
                "properties": {k: json_schema(v) for k, v in _keys(node).items()},
                "additionalProperties": False,
            }
            if node.required:
                out["required"] = list(node.required)
    elif isinstance(node, Arr):
        out = {"type": "array", "items": json_schema(node.items)}
    elif isinstance(node, Map):
        out = {"type": "object", "additionalProperties": json_schema(node.values)}
    elif node.type == "int-or-string":
        out = {"type": ["integer", "number", "string"]}
    elif node.type == "any":
        out = {}
    else:
        out = {"type": node.type}
    if isinstance(node, Leaf):
        out.update(_bounds(node))
    if node.description:
        out = {"description": node.description, **out}
    return out


def _fields(kind: PolicyKind) -> Obj:
    if kind.fields is None:
        raise SystemExit(f"policy kind {kind.kind} ({kind.group}) declares no fields (PolicyKind.fields)")
    return kind.fields


def _def_name(kind: str, group: str) -> str:
    return f"{kind}.{group}"


def policy_schema(current: dict[str, Any]) -> dict[str, Any]:
    """``policy.schema.json`` with its manifest definitions regenerated (the rest kept)."""
    schema = dict(current)
    schema["description"] = (
        "The scaling policy of a workload (docs/contract.md §3 and §5): a whole manifest, or null to delete "
        "the policy. Each kind's spec lists every field it has (generated by schemas/generate.py from "
        "scaling/policies/fields.py); an unknown one is an error, as when the policy is parsed. The bounds "
        "declared there (minimum, maximum, enum, pattern) are here too; the parser checks them and the rest."
    )
    defs: dict[str, Any] = {}
    names = list(dict.fromkeys(k.kind for k in kinds()))
    branches: list[dict[str, Any]] = []
    for k in kinds():
        spec = _fields(k)
        defs[_def_name(k.kind, k.group)] = json_schema(with_common_fields(spec))  # + spec.predictive
        branches.append(
            {
                "if": {
                    "properties": {"kind": {"const": k.kind}, "apiVersion": {"pattern": f"^{k.group}/"}},
                    "required": ["kind", "apiVersion"],
                },
                "then": {"properties": {"spec": {"$ref": f"#/$defs/{_def_name(k.kind, k.group)}"}}},
            }
        )
    for name in names:
        versions = [f"{k.group}/{v}" for k in kinds() if k.kind == name for v in k.versions]
        branches.append(
            {
                "if": {"properties": {"kind": {"const": name}}, "required": ["kind"]},
                "then": {"properties": {"apiVersion": {"enum": versions}}},
            }
        )
    manifest = dict(current["$defs"]["manifest"])
    manifest["properties"] = {**manifest["properties"], "kind": {"enum": names}}
    manifest["allOf"] = branches
    schema["$defs"] = {"manifest": manifest, **defs}
    return schema


def _crd_for(doc: dict[str, Any]) -> dict[str, Any]:
    group = doc["spec"]["group"]
    kind = doc["spec"]["names"]["kind"]
    desc = next((k for k in kinds() if (k.kind, k.group) == (kind, group)), None)
    if desc is None:
        raise SystemExit(f"{kind} ({group}) in deploy/crds/ is no registered policy kind")
    tree = manifest_tree(_fields(desc))
    schema = crd_schema(tree)
    schema["properties"]["metadata"] = {"type": "object"}  # the API server's own, never preserved
    # status stays open (each kind's upstream shape is its fold's); the part every kind shares is declared
    schema["properties"]["status"]["properties"] = {"predictive": crd_schema(PREDICTIVE_STATUS)}
    schema["description"] = (
        f"{kind} ({group}), generated by schemas/generate.py from scaling/policies/fields.py: every field "
        "tandem and upstream know (an unknown one is refused under strict field validation), with the bounds "
        "tandem's parser checks."
    )
    out = json.loads(json.dumps(doc))
    for version in out["spec"]["versions"]:
        version["schema"] = {"openAPIV3Schema": schema}
    return out


def _crd_text(path: Path) -> str:
    text = path.read_text()
    lead = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lead.append(line)
    doc = yaml.safe_load(text)
    body = yaml.safe_dump(_crd_for(doc), sort_keys=False, width=120)
    return "".join(line + "\n" for line in lead) + body


def generated_files() -> dict[Path, str]:
    """Every file this script writes, with the text it would write."""
    out = {POLICY_SCHEMA: json.dumps(policy_schema(json.loads(POLICY_SCHEMA.read_text())), indent=2) + "\n"}
    for path in sorted(CRDS.glob("*.yaml")):
        out[path] = _crd_text(path)
    for component in ("applier", "collector"):
        out[RBAC / f"{component}.yaml"] = role_text(RBAC / f"{component}.yaml", component)
    out[CHART_RBAC] = chart_text(CHART_RBAC)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m schemas.generate", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is not what it would be")
    args = p.parse_args(argv)
    stale = []
    for path, text in generated_files().items():
        if path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(ROOT)}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
