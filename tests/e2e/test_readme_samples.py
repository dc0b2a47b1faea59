"""The README's samples are the commands' output now (issue 35): ``scripts/readme_samples.py`` makes them.

The samples are compared with what the bundled replay and ``tandem audit explain`` print on this
tree, so any change to a number they hold (a VPA rule, a wording) fails here until the script is
run again and the README says what a reader will see.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "scripts" / "readme_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_samples_are_what_the_commands_print_now() -> None:
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = {m["name"]: m["body"] for m in script._REGION.finditer(text)}
    # Region by region, so that a failure shows the sample that moved; the fix is to run the script.
    assert shown == script.samples(), "README samples are stale: run .venv/bin/python scripts/readme_samples.py"


def test_the_readme_runs_the_commands_the_samples_come_from() -> None:
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"tandem replay {script.STREAM} --policy {script.POLICIES} --out audit.jsonl" in text
    assert f"tandem audit explain {script.KEY} audit.jsonl | head -{script.EXPLAIN_LINES}\n" in text
