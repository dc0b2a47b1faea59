"""argparse stays in ``cli/``: the library packages take typed settings built from a mapping of
option values (docs/architecture.md), so that they are used the same way from the command line,
a test or another program, and the flags are defined in one place.

The check reads the source (``ast``), imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("scaling", "schemas", "streams", "ops", "agents", "edge", "analysis")
#: Modules outside cli/ that may use argparse, each with its reason.
ALLOWED = {
    "schemas/generate.py": "its own entry point (`python -m schemas.generate`), a developer tool, not a tandem command",
}


def argparse_users(root: Path) -> list[str]:
    """``path:line`` of every import of argparse in the library packages under ``root``."""
    found = []
    for pkg in LIBRARY:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in ALLOWED:
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                if any(n == "argparse" or n.startswith("argparse.") for n in names):
                    found.append(f"{rel}:{node.lineno}")
    return found


def test_no_library_package_uses_argparse() -> None:
    assert argparse_users(ROOT) == []


def test_the_check_finds_argparse_in_a_library_package(tmp_path: Path) -> None:
    (tmp_path / "streams").mkdir()
    (tmp_path / "streams" / "settings.py").write_text("import os\n\ndef f():\n    from argparse import Namespace\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "observability.py").write_text("import argparse\n")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "options.py").write_text("import argparse\n")
    assert argparse_users(tmp_path) == ["streams/settings.py:4", "ops/observability.py:1"]
