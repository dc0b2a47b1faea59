"""The compiled core (``scripts/build_core.py``) gives the interpreted core's outputs, byte for byte.

Each test runs ``TANDEM_CORE=compiled`` in a subprocess (the rest of the suite runs the interpreted
core: see ``tests/conftest.py``), where ``scaling/__init__.py`` refuses to start without a build
of exactly these sources.  Skipped when there is no such build, unless ``TANDEM_CORE=compiled`` is
set for the run: then a missing build fails here.  ``scripts/test.sh`` builds it first (unless
``TANDEM_NO_COMPILE=1``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import scaling

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"
#: The example replay's audit, as issue 17 pinned it (docs/performance.md).
AUDIT_SHA256 = "773aaa99e21e10f379f97040e273e09ba595212524934d927a6d70b0febb2be7"
AUDIT_WITH_RECOMMENDATIONS_SHA256 = "c83725fe0a391390658003f44df739e426ef07e9e611f4728f0b0c45e513db80"

BUILD = Path(scaling.build_root()) / scaling.source_digest()
pytestmark = pytest.mark.skipif(
    not (BUILD / "BUILD.json").is_file() and os.environ.get("TANDEM_CORE") != "compiled",
    reason=f"no compiled core for these sources ({BUILD}); python scripts/build_core.py builds it",
)


def run(core: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, TANDEM_CORE=core, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, env=env, cwd=str(ROOT), timeout=timeout, check=False
    )


def test_the_compiled_core_runs_from_its_build() -> None:
    probe = "import scaling, scaling.engine as e, scaling.errors as x; print(scaling.CORE, e.__file__, x.__file__)"
    done = run("compiled", "-c", probe)
    assert done.returncode == 0, done.stderr.decode()
    core, engine, errors = done.stdout.decode().split()
    assert core == "compiled"
    assert Path(engine).parent == BUILD / "scaling"
    assert engine.endswith(".so")  # a compiled extension module
    assert errors.endswith("errors.py")  # kept interpreted: subclassed outside the core


@pytest.mark.parametrize(
    ("extra", "sha256"),
    [([], AUDIT_SHA256), (["--include-recommendations"], AUDIT_WITH_RECOMMENDATIONS_SHA256)],
    ids=["audit", "with-recommendations"],
)
def test_the_example_replay_is_byte_identical(extra: list[str], sha256: str) -> None:
    args = ["-m", "cli.main", "replay", str(EXAMPLE), "--policy", str(POLICIES), *extra]
    compiled, interpreted = run("compiled", *args), run("interpreted", *args)
    assert compiled.returncode == 0, compiled.stderr.decode()
    assert interpreted.returncode == 0, interpreted.stderr.decode()
    assert compiled.stdout == interpreted.stdout
    assert compiled.stderr == interpreted.stderr
    assert hashlib.sha256(compiled.stdout).hexdigest() == sha256


def test_simulate_gives_the_same_table_and_json(tmp_path: Path) -> None:
    policies = [f"--policy={ROOT / 'examples' / 'simulate' / f'{n}.yaml'}" for n in ("horizontal", "vertical", "hvpa")]
    outputs = {}
    for core, jobs in (("interpreted", "1"), ("compiled", "1"), ("compiled", "2")):
        out = tmp_path / f"{core}-{jobs}.json"
        done = run(core, "-m", "cli.main", "simulate", str(EXAMPLE), *policies, "--jobs", jobs, "--json", str(out))
        assert done.returncode == 0, done.stderr.decode()
        outputs[core, jobs] = (done.stdout, out.read_bytes())
    assert outputs["compiled", "1"] == outputs["interpreted", "1"]
    assert outputs["compiled", "2"] == outputs["interpreted", "1"]  # worker processes choose the same core


def test_the_upstream_vectors_pass_compiled() -> None:
    """``tests/vectors`` (the numbers of the upstream HPA, VPA, HVPA and Tortoise) in one process."""
    done = run("compiled", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(ROOT / "tests" / "vectors"))
    assert done.returncode == 0, done.stdout.decode()[-5000:] + done.stderr.decode()[-2000:]


def test_value_objects_with_written_out_constructors_survive_pickling_in_both_cores() -> None:
    """``Qty``, ``SeriesSample`` and ``PodInfo`` are frozen dataclasses with their own ``__init__``
    (native in the compiled core); pickle's default restore sets attributes one by one, which a
    compiled frozen class refuses, so each has a ``__reduce__`` through its constructor."""
    probe = (
        "import pickle\n"
        "from scaling.events import Qty, SeriesSample\n"
        "from scaling.recommend.hpa.model import PodInfo\n"
        "objs = [Qty(250, '250m'), SeriesSample('rps', 1.5, 'p-1'), PodInfo('p-1', True, 'Running', 10.0, 12.0)]\n"
        "print([pickle.loads(pickle.dumps(o)) == o for o in objs], repr(objs[0]))\n"
    )
    for core in ("compiled", "interpreted"):
        done = run(core, "-c", probe)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().split("]", 1) == ["[True, True, True", " Qty(milli=250, text='250m')\n"]
