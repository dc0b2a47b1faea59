"""``tandem audit`` and ``tandem audit explain`` as a user runs them: files, stdin, filters, Kafka."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from scaling.cloudevents import APPLIED, APPLY_FAILED, BLOCKED, DECISION, cloudevent
from scaling.vocabulary import LATE, LEARNED

T0 = 1_762_250_400.0  # 2025-11-04T10:00:00Z
WEB = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
API = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "api"}
ENC = {"cluster": "c2", "namespace": "media", "kind": "Deployment", "name": "encoder"}


def key(wl: dict[str, str]) -> str:
    return "/".join(wl[k] for k in ("cluster", "namespace", "kind", "name"))


def decision(wl: dict[str, str], tick: float, **data: Any) -> dict[str, Any]:
    body = {
        "workload": wl,
        "tick": tick,
        "policy": {"kind": "Hvpa", "name": wl["name"], "mode": "Auto"},
        "dry_run": False,
        "blocked": [],
        "reasons": [],
        "inputs": {},
        **data,
    }
    type_ = DECISION if any(k in body for k in ("replicas", "containers", "hpa")) else BLOCKED
    return cloudevent(type_, wl["cluster"], key(wl), tick, body)


def result(type_: str, wl: dict[str, str], ts: float, decision_id: str, **data: Any) -> dict[str, Any]:
    return cloudevent(type_, wl["cluster"], key(wl), ts, {"decision": decision_id, "workload": wl, **data})


D1 = decision(
    WEB,
    T0,
    replicas={"from": 2, "to": 3},
    containers={"app": {"requests": {"memory": {"from": "200M", "to": "1320000k"}}}},
    blocked=[{"target": "app/cpu", "reason": "MinChange", "wanted": "380m"}],
    reasons=["hvpa: vpaWeight 40 at 2 replicas (hpaWeight 60)"],
    inputs={"replicas": 2, "hpa_desired_replicas": 3, "vpa_target": {"app": {"cpu": "380m", "memory": "1320000k"}}},
)
B1 = decision(
    WEB,
    T0 + 15,
    blocked=[
        {"target": "app/cpu", "reason": "StabilizationWindow", "wanted": "380m"},
        {"target": "app/memory", "reason": "StabilizationWindow", "wanted": "1400M"},
    ],
    reasons=["hvpa: vpaWeight 40 at 3 replicas (hpaWeight 60)"],
    inputs={"replicas": 3},
)
A1 = result(APPLIED, WEB, T0 + 16.5, D1["id"], patched=["replicas", "containers"])
D2 = decision(API, T0 + 30, replicas={"from": 4, "to": 3}, reasons=["hvpa: replicas 4 -> 3 from HPA desired 3"])
F2 = result(APPLY_FAILED, API, T0 + 31, D2["id"], error="refused: replicas 3 is below the policy's minReplicas 4")
D3 = decision(
    ENC, T0 + 60, replicas={"from": 4, "to": 6}, policy={"kind": "CustomHpa", "name": "encoder", "mode": "Auto"}
)
EVENTS = [D1, B1, A1, D2, F2, D3]


def tandem(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    return subprocess.run(
        [exe, *args], input=stdin.decode() if stdin is not None else None, capture_output=True, text=True, timeout=120
    )


def lines(events: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


@pytest.fixture
def audit_file(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(lines(EVENTS))
    return path


def test_audit_prints_every_event_verbatim_without_filters(audit_file: Path) -> None:
    out = tandem("audit", str(audit_file))
    assert out.returncode == 0, out.stderr
    assert out.stdout.encode() == audit_file.read_bytes()


def test_audit_filters_by_workload_name_or_key_type_cluster_and_namespace(audit_file: Path) -> None:
    def ids(*args: str) -> list[str]:
        out = tandem("audit", str(audit_file), *args)
        assert out.returncode == 0, out.stderr
        return [orjson.loads(line)["id"] for line in out.stdout.splitlines()]

    assert ids("--workload", "web") == [D1["id"], B1["id"], A1["id"]]
    assert ids("--workload", "c1/shop/Deployment/api") == [D2["id"], F2["id"]]
    assert ids("--type", "decision") == [D1["id"], D2["id"], D3["id"]]
    assert ids("--type", "applied", "--type", "apply_failed") == [A1["id"], F2["id"]]
    assert ids("--cluster", "c2") == [D3["id"]]
    assert ids("--namespace", "shop", "--type", "blocked") == [B1["id"]]
    assert ids("--workload", "nothing-like-this") == []


def test_audit_time_window_includes_since_and_excludes_until_in_any_time_form(audit_file: Path) -> None:
    def ids(*args: str) -> list[str]:
        out = tandem("audit", str(audit_file), *args)
        assert out.returncode == 0, out.stderr
        return [orjson.loads(line)["id"] for line in out.stdout.splitlines()]

    assert ids("--since", "2025-11-04T10:00:15Z", "--until", "2025-11-04T10:00:31Z") == [
        B1["id"],
        A1["id"],
        D2["id"],
    ]
    assert ids("--since", str(T0 + 30)) == [D2["id"], F2["id"], D3["id"]]
    assert ids("--until", "2025-11-04 10:00:15") == [D1["id"]]
    assert ids("--since", "2025-11-05") == []
    bad = tandem("audit", str(audit_file), "--since", "yesterday-ish")
    assert bad.returncode == 2
    assert "'yesterday-ish' is not a time" in bad.stderr


def test_audit_reads_gzip_and_stdin_alike(audit_file: Path, tmp_path: Path) -> None:
    gz = tmp_path / "audit.jsonl.gz"
    gz.write_bytes(gzip.compress(audit_file.read_bytes()))
    plain = tandem("audit", str(audit_file), "--type", "decision")
    zipped = tandem("audit", str(gz), "--type", "decision")
    piped = tandem("audit", "-", "--type", "decision", stdin=audit_file.read_bytes())
    assert plain.returncode == zipped.returncode == piped.returncode == 0
    assert plain.stdout == zipped.stdout == piped.stdout
    assert len(plain.stdout.splitlines()) == 3


def test_audit_text_format_is_one_readable_line_per_event(audit_file: Path) -> None:
    out = tandem("audit", str(audit_file), "--format", "text")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "2025-11-04 10:00:00Z  decision      c1/shop/Deployment/web  Hvpa web (Auto)  replicas 2 -> 3; "
        "the memory request of app 191 MiB -> 1.23 GiB; blocked app/cpu to 380m (MinChange)",
        "2025-11-04 10:00:15Z  blocked       c1/shop/Deployment/web  Hvpa web (Auto)  blocked app/cpu to 380m "
        "(StabilizationWindow), app/memory to 1.3 GiB (StabilizationWindow)",
        f"2025-11-04 10:00:16Z  applied       c1/shop/Deployment/web  decision {D1['id']} applied by /tandem/c1 "
        "(patched replicas, containers)",
        "2025-11-04 10:00:30Z  decision      c1/shop/Deployment/api  Hvpa api (Auto)  replicas 4 -> 3",
        f"2025-11-04 10:00:31Z  apply_failed  c1/shop/Deployment/api  decision {D2['id']} failed at /tandem/c1: "
        "refused: replicas 3 is below the policy's minReplicas 4",
        "2025-11-04 10:01:00Z  decision      c2/media/Deployment/encoder  CustomHpa encoder (Auto)  replicas 4 -> 6",
    ]


def test_audit_reports_a_bad_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(lines([D1]) + b'{"type": "metric"}\nnot json\n' + lines([D2]))
    out = tandem("audit", str(path))
    assert out.returncode == 0
    assert [orjson.loads(x)["id"] for x in out.stdout.splitlines()] == [D1["id"], D2["id"]]
    assert f"{path}:2: not a CloudEvent (no specversion 1.0 and type)" in out.stderr
    assert f"{path}:3: not valid JSON" in out.stderr


def test_audit_missing_file_exits_2(tmp_path: Path) -> None:
    out = tandem("audit", str(tmp_path / "nope.jsonl"))
    assert out.returncode == 2
    assert "nope.jsonl: no such file" in out.stderr


def test_explain_tells_inputs_rule_result_held_back_changes_and_who_applied_it(audit_file: Path) -> None:
    out = tandem("audit", "explain", "c1/shop/Deployment/web", str(audit_file))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n\n") == [
        "c1/shop/Deployment/web: 2 ticks with news, 1 decision and 1 tick where every wanted change was held back.",
        "2025-11-04 10:00:00 UTC (tick 1762250400). Hvpa web (Auto) saw 2 replicas running, the HPA recommendation "
        "of 3 replicas and the VPA target for app (cpu 380m, memory 1.23 GiB). Rule: hvpa: vpaWeight 40 at 2 "
        "replicas (hpaWeight 60). Decision: replicas from 2 to 3 and the memory request of app from 191 MiB to "
        "1.23 GiB. Held back: app/cpu (to 380m), because the change is smaller than the policy's minimum change "
        "(MinChange). Applied by /tandem/c1 at 2025-11-04 10:00:16.500000 UTC, patching replicas and containers.",
        "2025-11-04 10:00:15 UTC (tick 1762250415). Hvpa web (Auto) saw 3 replicas running. Rule: hvpa: vpaWeight "
        "40 at 3 replicas (hpaWeight 60). Nothing changed. Held back: app/cpu (to 380m) and app/memory (to 1.3 GiB), "
        "because the previous change is still within the stabilization window (StabilizationWindow).\n",
    ]


def test_explain_accepts_a_unique_name_and_tells_a_failed_apply(audit_file: Path) -> None:
    out = tandem("audit", "explain", "api", str(audit_file))
    assert out.returncode == 0, out.stderr
    paragraphs = out.stdout.strip().split("\n\n")
    assert paragraphs[0].startswith("c1/shop/Deployment/api: 1 tick with news, 1 decision and 0 ticks")
    assert paragraphs[1].endswith(
        "Decision: replicas from 4 to 3. The applier /tandem/c1 failed at 2025-11-04 10:00:31 UTC: "
        "refused: replicas 3 is below the policy's minReplicas 4."
    )


def test_explain_says_so_when_the_stream_has_no_applier_results(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(lines([D3]))
    out = tandem("audit", "explain", "encoder", str(path))
    assert out.returncode == 0, out.stderr
    assert "This stream holds no applier results, so it does not say whether the decisions were applied." in out.stdout
    assert "Applied by" not in out.stdout


def test_explain_and_text_tell_a_late_input_with_the_tick_it_missed(tmp_path: Path) -> None:
    """Issue #28: a late input is never silent; the audit's report reads as a sentence."""
    late = cloudevent(
        LATE,
        "c2",
        key(ENC),
        T0 + 58.0,
        {
            "tick": T0 + 60.0,
            "decided_through": T0 + 60.0,
            "input": {"type": "hpa", "ts": T0 + 58.0, "partition": 3, "offset": 1234},
            "workload": ENC,
        },
    )
    path = tmp_path / "audit.jsonl"
    path.write_bytes(lines([D3, late]))
    out = tandem("audit", "explain", "encoder", str(path))
    assert out.returncode == 0, out.stderr
    assert "1 input came late (after its tick was decided): not replay's order." in out.stdout
    sentence = (
        "Late input: a hpa event of tick 2025-11-04 10:01:00 UTC came after the ticks through 2025-11-04 10:01:00 UTC "
        "had been decided (partition 3, offset 1234); it was applied to the state without a new decision for its tick."
    )
    assert sentence in out.stdout
    text = tandem("audit", "--format", "text", "--type", "late", str(path))
    assert text.returncode == 0, text.stderr
    assert text.stdout.count("\n") == 1 and sentence in text.stdout


def test_replay_says_what_each_history_envelope_taught_and_explain_and_text_tell_it(tmp_path: Path) -> None:
    """Issue 31, nothing silent: ``tandem replay`` writes one ``dev.tandem.learned.v1`` per envelope
    (the second copy of the same history teaches nothing, and says so); ``tandem audit --type
    learned`` and ``tandem audit explain`` read them as sentences."""
    past: list[dict[str, Any]] = [
        {"type": "workload", "ts": T0 - 2 * 86400, "workload": WEB, "replicas": 3,
         "containers": {"app": {"requests": {"cpu": "500m"}}}},
    ]  # fmt: skip
    past += [
        {"type": "metric", "ts": T0 - 2 * 86400 + 60.0 * m, "workload": WEB,
         "samples": [{"pod": p, "container": "app", "cpu": 0.2, "memory": 100 << 20} for p in ("web-a", "web-b")]}
        for m in range(2 * 1440)
    ]  # fmt: skip
    envelope = {"type": "history", "ts": T0, "workload": WEB, "until": T0, "events": past}
    stream = tmp_path / "stream.jsonl"
    stream.write_bytes(lines([envelope, envelope]))
    audit = tmp_path / "audit.jsonl"
    out = tandem("replay", str(stream), "--out", str(audit))
    assert out.returncode == 0, out.stderr
    said = [orjson.loads(x) for x in audit.read_bytes().splitlines()]
    assert [(e["type"], e["time"], e["data"]["envelopes"]) for e in said] == [
        (LEARNED, "2025-11-04T10:00:00Z", 1),
        (LEARNED, "2025-11-04T10:00:00Z", 2),
    ]
    first = (
        "Learned 2 days of history up to 2025-11-04 10:00:00 UTC (history envelope 1 of the workload): "
        "5,760 samples into the VPA histograms, 0 skipped, 193 replica slots."
    )
    again = (
        "Learned nothing new from 2 days of history up to 2025-11-04 10:00:00 UTC (history envelope 2 of the "
        "workload): its 5,760 samples were known already (5,760 taught by earlier envelopes through "
        "2025-11-04 09:59:00 UTC), and it raised no replica slot."
    )
    text = tandem("audit", "--format", "text", "--type", "learned", str(audit))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"2025-11-04 10:00:00Z  learned       c1/shop/Deployment/web  {first}",
        f"2025-11-04 10:00:00Z  learned       c1/shop/Deployment/web  {again}",
    ]
    story = tandem("audit", "explain", "web", str(audit))
    assert story.returncode == 0, story.stderr
    assert story.stdout.split("\n\n") == [
        "c1/shop/Deployment/web: 0 ticks with news, 0 decisions and 0 ticks where every wanted change was held "
        "back. This stream holds no applier results, so it does not say whether the decisions were applied. "
        "2 history envelopes learned (5,760 samples into the VPA histograms), none of whose past ticks was decided.",
        f"2025-11-04 10:00:00 UTC. {first}",
        f"2025-11-04 10:00:00 UTC. {again}\n",
    ]


def test_explain_of_an_unknown_workload_exits_1_and_lists_the_workloads(audit_file: Path) -> None:
    out = tandem("audit", "explain", "c9/x/Deployment/y", str(audit_file))
    assert out.returncode == 1
    assert "no workload 'c9/x/Deployment/y' in the audit stream" in out.stderr
    assert "c1/shop/Deployment/web" in out.stderr


@pytest.mark.kafka
def test_audit_reads_the_audit_topic_from_the_start_to_the_end_offsets(kafka_broker: str) -> None:
    from aiokafka import AIOKafkaProducer

    from tests.fixtures.kafka import create_topics, run_sync

    prefix = f"t{uuid.uuid4().hex[:8]}."
    topic = prefix + "audit"
    create_topics(kafka_broker, [topic], partitions=3)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker)
        await producer.start()
        try:
            for e in EVENTS:
                await producer.send_and_wait(topic, orjson.dumps(e), key=e["subject"].encode())
        finally:
            await producer.stop()

    run_sync(produce())
    out = tandem("audit", "--broker", kafka_broker, "--topic-prefix", prefix, "--format", "json")
    assert out.returncode == 0, out.stderr
    # All partitions, merged by event time.
    assert [orjson.loads(x)["id"] for x in out.stdout.splitlines()] == [e["id"] for e in EVENTS]
    story = tandem("audit", "explain", "web", "--broker", kafka_broker, "--topic", topic)
    assert story.returncode == 0, story.stderr
    assert "Applied by /tandem/c1 at 2025-11-04 10:00:16.500000 UTC" in story.stdout
    missing = tandem("audit", "--broker", kafka_broker, "--topic", prefix + "nothing")
    assert missing.returncode == 1
    assert f"topic '{prefix}nothing' does not exist" in missing.stderr
