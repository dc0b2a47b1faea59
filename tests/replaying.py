"""Run streams through ``tandem replay`` end to end (the CLI's own entry point), for vector tests.

The vectors taken from the upstream projects' tests (docs/recommenders.md, docs/tortoise.md,
docs/hvpa.md) must pass through the same path a user takes: a JSON Lines file and policy
manifests on disk, ``tandem replay`` parsing its arguments, the audit stream written to a
file.  Running ``cli.main.main`` in-process keeps that path and costs
milliseconds; ``tests/e2e`` also runs the installed console script in a subprocess.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import orjson
import yaml

from cli.main import main

WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def ev(type_: str, ts: float, workload: Mapping[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    """An input event dict (docs/contract.md §3) for workload ``WL`` unless given."""
    return {"type": type_, "ts": ts, "workload": dict(workload or WL), **fields}


def replay(
    tmp_path: Path,
    events: Iterable[Mapping[str, Any]],
    policies: Sequence[Mapping[str, Any]] = (),
    *extra: str,
    expect_code: int = 0,
) -> tuple[list[dict[str, Any]], str]:
    """Write ``events`` and ``policies`` to files, run ``tandem replay``; return (output events, stderr)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    stream = tmp_path / "stream.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    args = ["replay", str(stream), "--out", str(tmp_path / "audit.jsonl")]
    for i, manifest in enumerate(policies):
        p = tmp_path / f"policy-{i}.yaml"
        p.write_text(yaml.safe_dump(dict(manifest)))
        args += ["--policy", str(p)]
    args += list(extra)
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(args)
    assert code == expect_code, err.getvalue()
    out_path = tmp_path / "audit.jsonl"
    lines = out_path.read_bytes().splitlines() if out_path.exists() else []
    return [orjson.loads(line) for line in lines], err.getvalue()


def decisions(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "dev.tandem.decision.v1"]


def blocked_reasons(event: Mapping[str, Any]) -> list[str]:
    return [b["reason"] for b in event["data"]["blocked"]]
