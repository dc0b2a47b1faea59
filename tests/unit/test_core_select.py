"""``scaling/__init__.py`` picks a compiled build only for exactly its own sources (issue 17).

No compiler is needed: a fake "build" (``.py`` modules that mark themselves) is laid where
``scripts/build_core.py`` would put one for a copy of the sources, and a subprocess imports the
copy.  Editing the copy must make the build invisible, whatever its timestamps say.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import scaling

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import scaling, scaling.engine as e; print(scaling.CORE, getattr(e, 'FAKE_BUILD', False))"


def copy_sources(into: Path) -> Path:
    shutil.copytree(ROOT / "scaling", into / "scaling", ignore=shutil.ignore_patterns("__pycache__"))
    return into / "scaling"


def fake_build(cache: Path, sources: Path) -> Path:
    """A build for the sources' digest whose ``scaling.engine`` says it came from the build."""
    build = cache / "core" / scaling.source_digest(str(sources))
    shutil.copytree(sources, build / "scaling")
    engine = build / "scaling" / "engine.py"
    engine.write_text(engine.read_text() + "\nFAKE_BUILD = True\n")
    (build / "BUILD.json").write_text(json.dumps({"format": scaling.BUILD_FORMAT, "shared": {}}))
    return build


def probe(src: Path, cache: Path, core: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_CORE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(src.parent), TANDEM_CACHE=str(cache))
    if core is not None:
        env["TANDEM_CORE"] = core
    return subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=str(src.parent), timeout=60
    )


def test_a_build_of_the_same_sources_is_used_and_an_edit_makes_it_stale(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    cache = tmp_path / "cache"
    fake_build(cache, src)
    assert probe(src, cache, None).stdout.split() == ["compiled", "True"]
    assert probe(src, cache, "compiled").stdout.split() == ["compiled", "True"]
    assert probe(src, cache, "interpreted").stdout.split() == ["interpreted", "False"]

    # One byte more in a module the build has: the build is for other sources now.
    history = src / "policies" / "tortoise" / "history.py"
    history.write_text(history.read_text() + "\n")
    assert probe(src, cache, None).stdout.split() == ["interpreted", "False"]
    refused = probe(src, cache, "compiled")
    assert refused.returncode != 0
    assert "CoreUnavailable" in refused.stderr
    assert "no compiled core for these sources" in refused.stderr


def test_a_new_module_or_a_half_written_build_is_not_used(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    cache = tmp_path / "cache"
    build = fake_build(cache, src)
    (src / "policies" / "extra.py").write_text("X = 1\n")  # a file the build never saw
    assert probe(src, cache, None).stdout.split() == ["interpreted", "False"]
    (src / "policies" / "extra.py").unlink()
    assert probe(src, cache, None).stdout.split() == ["compiled", "True"]
    (build / "BUILD.json").unlink()  # written last by the build script: without it, no build
    assert probe(src, cache, None).stdout.split() == ["interpreted", "False"]


def test_a_build_that_does_not_load_is_refused_or_passed_over(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    cache = tmp_path / "cache"
    build = fake_build(cache, src)
    (build / "BUILD.json").write_text(json.dumps({"shared": {"gone__mypyc": "gone__mypyc.so"}}))
    auto = probe(src, cache, None)
    assert auto.stdout.split() == ["interpreted", "False"]
    assert "does not load" in auto.stderr
    compiled = probe(src, cache, "compiled")
    assert compiled.returncode != 0
    assert "CoreUnavailable" in compiled.stderr


def test_the_digest_covers_paths_bytes_and_nothing_else(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "a")
    before = scaling.source_digest(str(src))
    assert before == scaling.source_digest(str(ROOT / "scaling"))
    (src / "__pycache__").mkdir(exist_ok=True)
    (src / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (src / "notes.txt").write_text("not a module")
    os.utime(src / "engine.py", (0, 0))
    assert scaling.source_digest(str(src)) == before
    (src / "engine.py").rename(src / "engine2.py")
    assert scaling.source_digest(str(src)) != before


def test_an_unknown_core_is_refused(tmp_path: Path) -> None:
    result = probe(ROOT / "scaling", tmp_path, "fast")
    assert result.returncode != 0
    assert "TANDEM_CORE='fast'" in result.stderr


def test_tandem_version_names_the_core() -> None:
    env = dict(os.environ, TANDEM_CORE="interpreted", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "interpreted core" in result.stdout


def test_tandem_refuses_to_start_without_the_compiled_core_it_was_told_to_run(tmp_path: Path) -> None:
    env = dict(os.environ, TANDEM_CORE="compiled", TANDEM_CACHE=str(tmp_path), PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "cli", "--version"], capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=60
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("tandem: TANDEM_CORE=compiled, but there is no compiled core for these sources")
    assert "Traceback" not in result.stderr
