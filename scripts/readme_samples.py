"""The README's samples of real output, made from the bundled replay (issue 35).

    .venv/bin/python scripts/readme_samples.py          # rewrite the samples in README.md
    .venv/bin/python scripts/readme_samples.py --check  # exit 1 if README.md differs from the output now

README.md shows what the first commands print: the replay's summary line, one decision (abridged)
and the start of ``tandem audit explain``.  Each sample sits between ``<!-- sample: NAME -->`` and
``<!-- /sample -->`` and is generated here from the commands' output now, run as a reader runs
them (``python -m cli``, the interpreted core as in ``tests/``), so a change to any number a
decision holds shows up as a README difference: ``tests/e2e/test_readme_samples.py`` fails until
this script is run again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
STREAM = "examples/stream.jsonl.gz"
POLICIES = "examples/policies.yaml"
#: The workload the README follows.
KEY = "eu-1/shop/Deployment/api"
#: How many lines of ``tandem audit explain`` the README shows (``| head -3``: the summary, a
#: blank line and the first tick's paragraph).
EXPLAIN_LINES = 3

_REGION = re.compile(r"(<!-- sample: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /sample -->)", re.S)


def _tandem(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TANDEM_CORE": "interpreted"}
    for name in [n for n in env if n.startswith("TANDEM_") and n != "TANDEM_CORE"]:
        del env[name]  # the README's commands, not the caller's settings
    return subprocess.run(
        [sys.executable, "-m", "cli", *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )


def _decision_sample(events: list[dict[str, Any]]) -> str:
    """The first decision of :data:`KEY` that changes container resources and holds one back,
    abridged as the README shows it: the fields a reader looks at, one ``...`` for the rest."""
    for e in events:
        d = e["data"]
        if e["subject"] == KEY and e["type"] == "dev.tandem.decision.v1" and d.get("containers") and d.get("blocked"):
            break
    else:
        raise SystemExit(f"readme_samples: no decision of {KEY} changes resources and holds one back")

    def j(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    blocked = [{**d["blocked"][0], "wanted": "..."}]
    inputs = {
        "replicas": d["inputs"]["replicas"],
        "hpa_desired_replicas": d["inputs"].get("hpa_desired_replicas"),
        "vpa_target": {"...": "..."},
    }
    head = {k: e[k] for k in ("type", "subject", "time")}
    return (
        "```json\n"
        f"{j(head)[:-1]},\n"
        f' "data": {{"policy": {j(d["policy"])},\n'
        f'          "containers": {j(d["containers"])},\n'
        f'          "blocked": {j(blocked)},\n'
        f'          "reasons": {j(d["reasons"])}, "inputs": {j(inputs)}}}}}\n'
        "```\n"
    )


def _quote(lines: list[str]) -> str:
    """Output lines as a Markdown quote, wrapped at 100 columns; a blank line stays a blank quote line."""
    out: list[str] = []
    for line in lines:
        if not line.strip():
            out.append(">")
        else:
            out.extend("> " + part for part in textwrap.wrap(line, 98, break_on_hyphens=False))
    return "\n".join(out) + "\n"


def samples() -> dict[str, str]:
    """Every sample's Markdown, by region name, from the commands' output now."""
    with tempfile.TemporaryDirectory() as tmp:
        audit = str(Path(tmp) / "audit.jsonl")
        replayed = _tandem("replay", STREAM, "--policy", POLICIES, "--out", audit)
        explained = _tandem("audit", "explain", KEY, audit)
        events = [json.loads(line) for line in Path(audit).read_text().splitlines()]
    summary = replayed.stderr.strip().splitlines()[-1]
    return {
        "replay-summary": f"```text\n{summary}\n```\n",
        "decision": _decision_sample(events),
        "explain": _quote(explained.stdout.splitlines()[:EXPLAIN_LINES]),
    }


def render(text: str, made: dict[str, str]) -> str:
    """``text`` with every sample region's body replaced by its sample; a region without one is an error."""

    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in made:
            raise SystemExit(f"readme_samples: README.md has a region {name!r} this script does not make")
        return m.group(1) + made[name] + m.group(4)

    out = _REGION.sub(one, text)
    missing = set(made) - {m["name"] for m in _REGION.finditer(text)}
    if missing:
        raise SystemExit(f"readme_samples: README.md has no region for {', '.join(sorted(missing))}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="regenerate (or --check) the README's samples of real output")
    p.add_argument("--check", action="store_true", help="exit 1, with a diff, if README.md differs")
    args = p.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = render(text, samples())
    if args.check:
        if new != text:
            import difflib

            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "README.md", "now"))
            print("README.md's samples differ from the output now: run scripts/readme_samples.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new, encoding="utf-8")
        print("readme_samples: README.md updated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
