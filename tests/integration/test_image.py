"""The container image of the top-level ``Dockerfile``, built and run here (issue 33).

``scripts/image.sh build`` makes a Debian base with mmdebstrap and builds the Dockerfile on it with
``buildah bud --isolation chroot`` (no daemon, no registry); the tests run the image with ``buildah run
--isolation chroot``.  The bundled replay inside the image (the compiled core, Debian's Python) must print
the very audit stream the host's interpreted core prints: same decisions, byte for byte.

They skip, saying why, where buildah cannot run: without buildah and mmdebstrap (``scripts/test.sh``
installs both with apt-get when run as root) or when not root (chroot isolation needs it).  The first
build on a machine takes minutes (docs/operating.md, "The image"); later ones reuse the cached base and
buildah's layers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/tandem:test"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
REPLAY = ["replay", "examples/stream.jsonl.gz", "--policy", "examples/policies.yaml"]


def _why_not() -> str | None:
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed: `scripts/image.sh tools` (apt-get, as root) installs them"
    if os.geteuid() != 0:
        return "buildah's chroot isolation needs root here (no container daemon, no user namespaces)"
    return None


pytestmark = [pytest.mark.image, pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))]


def buildah(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """buildah on scripts/image.sh's storage (in the test cache)."""
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "image.sh"), "buildah", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def image() -> str:
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "image.sh"), "build", IMAGE],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert built.returncode == 0, f"scripts/image.sh build failed:\n{built.stderr[-8000:]}"
    assert built.stdout.strip().splitlines()[-1] == IMAGE
    return IMAGE


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    made = buildah("from", "--pull-never", image)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip().splitlines()[-1]
    try:
        yield name
    finally:
        buildah("rm", name)


def run_in(container: str, *command: str) -> subprocess.CompletedProcess[str]:
    return buildah("run", "--isolation", "chroot", container, "--", *command)


def test_image_runs_tandem_on_the_compiled_core_as_user_10001(container: str) -> None:
    out = run_in(container, "tandem", "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"tandem {VERSION} (compiled core)"
    ids = run_in(container, "id", "-u", "-n")
    assert ids.stdout.strip() == "tandem"
    uid = run_in(container, "id", "-u")
    assert uid.stdout.strip() == "10001"  # the chart's runAsUser (values.yaml podSecurityContext)


def test_image_imports_what_the_chart_runs_the_worker_with(container: str) -> None:
    """The chart's default store is rocksdb:// (rocksdict); the worker needs Faust and aiokafka, the
    edge the Kubernetes client: each imports in the image, and each subcommand the chart runs starts."""
    out = run_in(container, "python3", "-c", "import rocksdict, faust, aiokafka, kubernetes, orjson, cryptography")
    assert out.returncode == 0, out.stderr
    for command in ("worker", "collect", "apply"):
        helped = run_in(container, "tandem", command, "--help")
        assert helped.returncode == 0, (command, helped.stderr)
        assert helped.stdout.startswith(f"usage: tandem {command}"), helped.stdout[:200]


def test_replay_in_the_image_prints_the_hosts_audit_byte_for_byte(container: str) -> None:
    inside = run_in(
        container, "tandem", "replay", "/opt/tandem/examples/stream.jsonl.gz", "--policy",
        "/opt/tandem/examples/policies.yaml",
    )  # fmt: skip
    assert inside.returncode == 0, inside.stderr
    host = subprocess.run(
        [str(Path(sys.executable).with_name("tandem")), *REPLAY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert host.returncode == 0, host.stderr
    assert len(inside.stdout.splitlines()) == len(host.stdout.splitlines()) > 0
    assert hashlib.sha256(inside.stdout.encode()).hexdigest() == hashlib.sha256(host.stdout.encode()).hexdigest()
    # The summary names the same counts (its first line, without the timing that may follow).
    assert inside.stderr.splitlines()[0] == host.stderr.splitlines()[0]


def test_image_has_no_compiler_and_carries_the_oci_labels_entry_point_and_user(container: str, image: str) -> None:
    for tool in ("cc", "gcc", "c++", "g++", "ld", "as", "make"):
        found = run_in(container, "sh", "-c", f"command -v {tool} || true")
        assert found.stdout.strip() == "", f"{tool} is in the final image: {found.stdout.strip()}"
    headers = run_in(container, "sh", "-c", "ls /usr/include/python3* 2>/dev/null | head -1")
    assert headers.stdout.strip() == ""
    inspected = buildah("inspect", "--type", "image", image)
    assert inspected.returncode == 0, inspected.stderr
    config: dict[str, Any] = json.loads(inspected.stdout)["OCIv1"]["config"]
    assert config["Entrypoint"] == ["tandem"]
    assert config["User"] == "10001:10001"
    labels = {k: v for k, v in config["Labels"].items() if k.startswith("org.opencontainers.image.")}
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.title"] == "tandem"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert {"org.opencontainers.image.source", "org.opencontainers.image.description"} <= set(labels)
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["TANDEM_CORE"] == "compiled"  # refuses to start rather than run the slower core
