"""ARCHITECTURE: ``scaling/`` imports nothing from Faust, Kafka or Kubernetes, and no I/O clock."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "scaling"
FORBIDDEN = ("faust", "aiokafka", "kafka", "kubernetes", "mode", "rocksdict", "streams", "agents")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_modules_import_no_stream_or_cluster_library() -> None:
    offenders = {
        str(p.relative_to(CORE.parent)): sorted(_imports(p) & set(FORBIDDEN)) for p in sorted(CORE.rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_never_reads_the_wall_clock() -> None:
    clocks = ("time.time(", "datetime.now(", "datetime.utcnow(", "time.monotonic(", "date.today(")
    hits = [
        f"{p.relative_to(CORE.parent)}: {c}" for p in sorted(CORE.rglob("*.py")) for c in clocks if c in p.read_text()
    ]
    assert hits == []


def test_importing_the_whole_core_loads_no_forbidden_module() -> None:
    code = (
        "import sys, pkgutil, importlib, scaling\n"
        "for m in pkgutil.walk_packages(scaling.__path__, 'scaling.'): importlib.import_module(m.name)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
