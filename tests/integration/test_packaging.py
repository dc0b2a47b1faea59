"""The release artefacts (issue 33): ``python -m build`` makes an sdist and, from it, a wheel; the wheel
installs into a fresh virtualenv and runs the bundled replay to the host's very audit stream.

The version is in one place, pyproject.toml: ``tandem --version`` reads the installed metadata
(tests/unit/test_release.py holds the chart and the Dockerfile to it).  Needs the package index (pip
installs ``build`` and the dependencies into fresh virtualenvs; pip's cache makes a second run quick),
so it carries the ``image`` marker with the container image's tests: not among the fast tests.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
PACKAGES = ("scaling", "schemas", "streams", "agents", "edge", "analysis", "ops", "cli")

pytestmark = [pytest.mark.image, pytest.mark.slow]


def run(*args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=1800, env=env)
    assert out.returncode == 0, f"{args}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return out


def venv(path: Path) -> Path:
    run(sys.executable, "-m", "venv", path)
    return path / "bin"


def test_build_gives_an_sdist_and_a_wheel_that_install_and_replay_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    tools = venv(tmp_path / "tools")
    run(tools / "pip", "install", "-q", "build")
    # A copy of the sources git knows (tracked and new, not ignored): no egg-info or build/ of the tree.
    files = run("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z").stdout.split("\0")
    src = tmp_path / "src"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    run(tools / "python", "-m", "build", "--outdir", tmp_path / "dist", src)  # the sdist, then a wheel from it
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert sdist.name == f"tandem-{VERSION}.tar.gz"
    assert wheel.name == f"tandem-{VERSION}-py3-none-any.whl"  # pure Python: the compiled core is never packaged

    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
    for package in PACKAGES:
        sources = {
            p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts
        }
        assert sources <= in_sdist, sources - in_sdist
        assert sources <= in_wheel, sources - in_wheel
    assert {"pyproject.toml", "README.md"} <= in_sdist
    assert not [n for n in in_wheel if n.endswith((".so", ".c"))]
    schemas = {p.relative_to(ROOT).as_posix() for p in (ROOT / "schemas").rglob("*.json")}
    assert schemas <= in_wheel, schemas - in_wheel

    app = venv(tmp_path / "app")
    run(app / "pip", "install", "-q", wheel)
    env = {"PATH": f"{app}:/usr/bin:/bin", "HOME": str(tmp_path), "TANDEM_CORE": "interpreted"}
    assert run(app / "tandem", "--version", env=env).stdout.strip() == f"tandem {VERSION} (interpreted core)"
    replay = ("replay", "examples/stream.jsonl.gz", "--policy", "examples/policies.yaml")
    fresh = run(app / "tandem", *replay, env=env)
    host = run(Path(sys.executable).with_name("tandem"), *replay)
    assert len(fresh.stdout.splitlines()) == len(host.stdout.splitlines()) > 0
    assert hashlib.sha256(fresh.stdout.encode()).hexdigest() == hashlib.sha256(host.stdout.encode()).hexdigest()
