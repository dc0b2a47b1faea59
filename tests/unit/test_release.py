"""The version in one place (pyproject.toml) and what must follow it; the Dockerfile's shape (issue 33).

``tandem --version`` reads the installed package's metadata (cli/main.py), so pyproject.toml is the one
place a release changes the version; the chart's ``appVersion`` (the default image tag) and the
Dockerfile's default ``VERSION`` label must equal it, which these tests hold.  The image itself is built
and run in tests/integration/test_image.py; these checks need no buildah.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(
        r"\\\n", " ", "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#"))
    )
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def test_chart_app_version_and_dockerfile_version_label_equal_the_package_version() -> None:
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "tandem" / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION
    assert ("ARG", f"VERSION={VERSION}") in final_stage()
    (label,) = [args for op, args in final_stage() if op == "LABEL"]
    assert 'org.opencontainers.image.version="${VERSION}"' in label


def test_dockerfile_base_is_a_build_argument_defaulting_to_the_official_python_slim_image() -> None:
    steps = instructions()
    assert steps[0][0] == "ARG"
    name, default = steps[0][1].split("=", 1)
    assert name == "BASE"
    assert re.fullmatch(r"docker\.io/library/python:3\.1[1-9]-slim(-\w+)?", default), default
    froms = [args for op, args in steps if op == "FROM"]
    assert froms == ["${BASE} AS build", "${BASE}"]


def test_final_stage_runs_tandem_as_user_10001_and_copies_only_the_virtualenv_and_the_example() -> None:
    stage = final_stage()
    assert ("USER", "10001:10001") in stage
    assert ("ENTRYPOINT", '["tandem"]') in stage
    copies = [args for op, args in stage if op == "COPY"]
    assert copies == [
        "--from=build /opt/tandem /opt/tandem",
        "examples/stream.jsonl.gz examples/policies.yaml /opt/tandem/examples/",
    ]
    # No compiler is installed in the final stage (stage 1 installs one only where the base lacks it).
    assert not [args for op, args in stage if op == "RUN" and re.search(r"apt-get|gcc|build-essential", args)]


def test_dockerignore_lets_in_exactly_what_the_dockerfile_copies() -> None:
    """.dockerignore excludes everything (``**``) but the listed paths; every COPY source must be one."""
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert rules[0] == "**"
    allowed = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    sources = [
        src
        for op, args in instructions()
        if op == "COPY" and not args.startswith("--from")
        for src in args.split()[:-1]
    ]
    for src in sources:
        assert (ROOT / src).exists(), src
        assert src.rstrip("/") in allowed or any(src.startswith(f"{a}/") for a in allowed), src
    copied = {s.rstrip("/") for s in sources}
    assert allowed == copied, allowed ^ copied  # nothing let in that no COPY uses
