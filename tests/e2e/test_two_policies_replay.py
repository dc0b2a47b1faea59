"""``tandem replay`` with two policies on one workload: the installed command, the audit it writes
and ``tandem audit explain`` on it (issue 29, item 2; the core's rule: tests/unit/test_two_policies.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import yaml

from tests.unit.test_two_policies import T0, WL, custom_hpa, policy, sample, tortoise_off, workload


def tandem(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def test_replay_holds_both_policies_and_the_audit_says_why_until_one_is_deleted(tmp_path: Path) -> None:
    hpa_file = tmp_path / "custom-hpa.yaml"
    hpa_file.write_text(
        yaml.safe_dump(
            {
                **custom_hpa("web"),
                "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
            }
        )
    )
    stream = tmp_path / "stream.jsonl"
    events = [
        workload(T0 + 1, 10),
        policy(T0 + 1, tortoise_off("web")),  # a second policy for the workload of --policy
        sample(T0 + 2, 150.0),
        sample(T0 + 20, 150.0),
        policy(
            T0 + 40,
            None,
            deleted={
                "apiVersion": "autoscaling.mercari.com/v1beta3",
                "kind": "Tortoise",
                "namespace": "shop",
                "name": "web",
            },
        ),
        sample(T0 + 41, 150.0),
    ]
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    audit = tmp_path / "audit.jsonl"
    done = tandem("replay", str(stream), "--policy", str(hpa_file), "--out", str(audit))
    assert done.returncode == 0, done.stderr
    out = [orjson.loads(line) for line in audit.read_bytes().splitlines()]
    assert [(e["type"].split(".")[2], e["data"]["tick"] - T0, e["data"]["policy"]["kind"]) for e in out] == [
        ("blocked", 15.0, "Tortoise"),
        ("blocked", 15.0, "CustomHpa"),
        ("decision", 45.0, "CustomHpa"),
    ]
    assert out[2]["data"]["replicas"] == {"from": 10, "to": 12}
    assert {e["subject"] for e in out} == {"c1/shop/Deployment/web"} and WL["cluster"] == "c1"

    explained = tandem("audit", "explain", "c1/shop/Deployment/web", str(audit))
    assert explained.returncode == 0, explained.stderr
    text = " ".join(explained.stdout.split())
    assert (
        "2 policies target Deployment shop/web: Tortoise web (autoscaling.mercari.com/v1beta3) and "
        "CustomHpa web (autoscaling.tandem.dev/v1alpha1); none acts while more than one does" in text
    )
    assert (
        "because more than one policy targets the workload, and none acts while more than one does (AmbiguousPolicy)"
        in text
    )
