"""A misspelled policy field is an error naming the file, the document, the full path and the closest name.

Issue #12: unknown fields at every level of every kind are refused (``scaling.policies.fields``);
without ``--strict`` the policy is refused and the run goes on, with ``--strict`` the exit is 1;
policy events in a stream are bad lines; ``tandem publish`` refuses them before publishing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from analysis.upstream import is_upstream, parse_upstream
from cli.main import main as tandem
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef, decode_event
from scaling.policies import kinds, parse_policy
from streams.runner import ReplayStats, read_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "schemas" / "examples").glob("policy-*.json"))}
WL = WorkloadRef("c1", "shop", "Deployment", "web")


def example(name: str) -> dict[str, Any]:
    return copy.deepcopy(EXAMPLES[name]["policy"])


def refused(manifest: dict[str, Any]) -> str:
    ev = decode_event({"type": "policy", "ts": 1.0, "workload": WL.as_dict(), "policy": manifest})
    assert ev.type == "policy"
    with pytest.raises(InvalidPolicy) as caught:
        parse_policy(manifest, ev.workload)
    return str(caught.value)


def test_every_registered_kind_declares_its_fields() -> None:
    assert [(k.kind, k.group) for k in kinds() if k.fields is None] == []


def test_every_example_policy_passes() -> None:
    manifests = [e["policy"] for e in EXAMPLES.values() if e["policy"]]
    for path in [ROOT / "examples" / "policies.yaml", *sorted((ROOT / "examples" / "simulate").glob("*.yaml"))]:
        manifests += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(manifests) >= 10
    # Upstream HPA/VPA manifests (tandem simulate's examples of what teams run today) are parsed
    # by the simulator's upstream arm, not by the core.
    for path in sorted((ROOT / "examples" / "simulate").glob("upstream-*.yaml")):
        arms = parse_upstream([d for d in yaml.safe_load_all(path.read_text()) if d], "c1")
        assert [a.workload.name for a in arms] == ["web", "api"]
    for m in manifests:
        if is_upstream(m):
            continue
        meta = m["metadata"]
        from scaling.policies import policy_target

        parse_policy(m, policy_target(m, "c1"))
        assert meta["name"]


def rename(obj: dict[str, Any], path: str, new: str) -> dict[str, Any]:
    cur: Any = obj
    *parents, last = path.split(".")
    for p in parents:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    cur[new] = cur.pop(last)
    return obj


@pytest.mark.parametrize(
    ("name", "path", "typo", "message"),
    [
        (
            "policy-hvpa-released",
            "spec.vpa.scaleUp.stabilizationDuration",
            "stabilizationDuraton",
            "field 'spec.vpa.scaleUp.stabilizationDuraton': unknown field (did you mean stabilizationDuration?)",
        ),
        (
            "policy-hvpa-seed",
            "spec.weightBasedScalingIntervals",
            "weightBasedScalingInterval",
            "field 'spec.weightBasedScalingInterval': unknown field (did you mean weightBasedScalingIntervals?)",
        ),
        (
            "policy-hvpa-released",
            "spec.hpa.template.spec.maxReplicas",
            "maxReplica",
            "field 'spec.hpa.template.spec.maxReplica': unknown field (did you mean maxReplicas?)",
        ),
        (
            "policy-tortoise",
            "spec.targetRefs.scaleTargetRef",
            "scaleTargetRf",
            "field 'spec.targetRefs.scaleTargetRf': unknown field (did you mean scaleTargetRef?)",
        ),
        (
            "policy-custom-hpa",
            "spec.behavior.scaleUpCooldown",
            "scaleUpCoolDown",
            "field 'spec.behavior.scaleUpCoolDown': unknown field (did you mean scaleUpCooldown?)",
        ),
        (
            "policy-hvpa-scale-intervals",
            "spec.scaleIntervals",
            "scaleInterval",
            "field 'spec.scaleInterval': unknown field (did you mean scaleIntervals?)",
        ),
    ],
)
def test_a_misspelled_field_names_its_full_path_and_the_closest_name(
    name: str, path: str, typo: str, message: str
) -> None:
    assert refused(rename(example(name), path, typo)) == message


def test_an_extra_field_deep_in_a_list_is_refused_with_its_index() -> None:
    m = example("policy-tortoise")
    m["spec"]["autoscalingPolicy"][0]["polcy"] = {"cpu": "Horizontal"}
    assert refused(m) == "field 'spec.autoscalingPolicy[0].polcy': unknown field (did you mean policy?)"


def test_metadata_and_status_stay_open_the_api_server_owns_them() -> None:
    m = example("policy-custom-hpa")
    m["metadata"]["resourceVersion"] = "12"
    m["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    m["status"] = {"anything": True}
    parse_policy(m, WL)


def test_the_seed_forms_case_insensitive_container_policy_keys_are_accepted() -> None:
    m = example("policy-hvpa-seed")
    policies = m["spec"]["vpaTemplate"]["resourcePolicy"]["containerPolicies"]
    assert any("MinAllowed" in p for p in policies)  # as the proposal writes it
    parse_policy(m, WorkloadRef("c1", "shop", "Deployment", m["spec"]["targetRef"]["name"]))


def policy_file(tmp_path: Path) -> Path:
    good = yaml.safe_load_all((ROOT / "examples" / "policies.yaml").read_text())
    docs = [d for d in good if d]
    rename(docs[1], "spec.vpa.scaleUp.stabilizationDuration", "stabilizationDuraton")
    path = tmp_path / "policies.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_replay_refuses_the_bad_document_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = policy_file(tmp_path)
    code = tandem(
        ["replay", str(ROOT / "examples" / "stream.jsonl.gz"), "--policy", str(path), "--out", str(tmp_path / "a")]
    )
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    assert err[0] == (
        f"{path}: document 2 (Hvpa shop/api): spec.vpa.scaleUp.stabilizationDuraton: unknown field "
        "(did you mean stabilizationDuration?); this policy is refused"
    )
    assert "3 workload(s)" in err[-1]
    out = [orjson.loads(x) for x in (tmp_path / "a").read_bytes().splitlines()]
    assert {e["subject"] for e in out} == {"eu-1/shop/Deployment/web", "us-2/media/Deployment/encoder"}


def test_strict_makes_a_refused_policy_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = policy_file(tmp_path)
    code = tandem(["replay", str(ROOT / "examples" / "stream.jsonl.gz"), "--policy", str(path), "--strict"])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"tandem replay: {path}: document 2 (Hvpa shop/api): spec.vpa.scaleUp.stabilizationDuraton: unknown field "
        "(did you mean stabilizationDuration?)"
    ]


def test_a_policy_event_in_a_stream_is_a_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = copy.deepcopy(EXAMPLES["policy-custom-hpa"])
    rename(event["policy"], "spec.maxReplicas", "maxReplica")
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(orjson.dumps(event) + b"\n")
    code = tandem(["replay", str(stream), "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    assert err[0] == f"{stream}:1: field 'policy.spec.maxReplica': unknown field (did you mean maxReplicas?)"
    # publish reads the same way, checking policies before anything is sent
    messages: list[str] = []
    stats = ReplayStats()
    assert read_events([str(stream)], messages.append, stats, check_policies=True) == []
    assert messages == [err[0]] and stats.rejected == 1


def test_a_field_named_by_its_parser_relative_to_its_object_is_reported_from_the_root() -> None:
    m = example("policy-custom-hpa")
    m["spec"]["behavior"]["scaleUpCooldown"] = -3
    assert refused(m) == "field 'spec.behavior.scaleUpCooldown': -3 must be >= 0"
    m = example("policy-hvpa-released")
    m["spec"]["hpa"]["template"]["spec"]["minReplicas"] = -1
    assert refused(m) == "field 'spec.hpa.template.spec.minReplicas': -1 is outside 1..2147483647"


def test_no_upper_bound_but_upstreams_int32() -> None:
    m = example("policy-hvpa-released")
    tmpl = m["spec"]["hpa"]["template"]["spec"]
    tmpl["maxReplicas"] = 2**31 - 1  # int32, as HorizontalPodAutoscalerSpec.maxReplicas
    parse_policy(m, WL)
    tmpl["maxReplicas"] = 2**31
    assert refused(m) == "field 'spec.hpa.template.spec.maxReplicas': 2147483648 is outside 1..2147483647"
    t = example("policy-tortoise")
    t["spec"]["maxReplicas"] = 5_000_000
    parse_policy(t, WL)


def test_publish_refuses_a_bad_policy_before_it_connects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 has no broker: reaching Kafka would fail differently (exit 1 with the bootstrap's error).
    path = policy_file(tmp_path)
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b"")
    code = tandem(["publish", str(stream), "--policy", str(path), "--strict", "--broker", "127.0.0.1:1"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err == [
        f"tandem publish: {path}: document 2 (Hvpa shop/api): spec.vpa.scaleUp.stabilizationDuraton: unknown field "
        "(did you mean stabilizationDuration?)"
    ]


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("namespace", {"a/b": None}, "field 'metadata.namespace': {'a/b': None} is not a valid name"),
        ("namespace", "a/b", "field 'metadata.namespace': 'a/b' is not a valid name"),
        (
            "annotations",
            {"tandem.dev/cluster": 7},
            "field 'metadata.annotations.tandem.dev/cluster': 7 is not a valid name",
        ),
    ],
)
def test_a_namespace_or_cluster_that_is_not_a_name_is_refused(where: str, value: Any, message: str) -> None:
    # Found by the policy fuzz test: a mapping was turned into text and became part of a workload key.
    from scaling.policies import policy_target

    m = example("policy-custom-hpa")
    m["metadata"][where] = value
    with pytest.raises(InvalidPolicy) as caught:
        policy_target(m, "c1")
    assert str(caught.value) == message
