"""``scripts/test.sh`` shows the preparing steps' progress, not their output (issue 35).

Its ``quiet`` function is run by bash on stand-in steps: the noise (``go: downloading``, dpkg) goes
to the log only, progress lines (``[kube.sh] ...``, ``kafka.sh: ...``) still show, and a failing
step names the log, shows its own last lines and passes its exit code on.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _quiet_function() -> str:
    text = (ROOT / "scripts" / "test.sh").read_text()
    start = text.index('prep_log="${TANDEM_CACHE')
    end = text.index("\n}\n", start) + 3
    return text[start:end]


def _run(tmp_path: Path, steps: str) -> subprocess.CompletedProcess[str]:
    script = f"set -euo pipefail\nTANDEM_CACHE={tmp_path}\n{_quiet_function()}\n{steps}\necho done >&2\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)


NOISY = (
    'sh -c \'echo go: downloading k8s.io/api v0.36.3; echo "[kube.sh] still building, 30s elapsed" >&2; '
    'echo Selecting previously unselected package x; echo "kafka.sh: fetched Kafka 3.9"\''
)


def test_progress_lines_show_and_the_rest_goes_to_the_log(tmp_path: Path) -> None:
    done = _run(tmp_path, f'quiet "building" {NOISY}')
    assert done.returncode == 0
    assert done.stderr.splitlines() == ["[kube.sh] still building, 30s elapsed", "kafka.sh: fetched Kafka 3.9", "done"]
    [log] = tmp_path.glob("test-prep.*.log")
    assert "go: downloading k8s.io/api v0.36.3\n" in log.read_text()


def test_a_failing_step_names_the_log_shows_its_own_last_lines_and_keeps_its_exit_code(tmp_path: Path) -> None:
    done = _run(tmp_path, f'quiet "building" {NOISY}\nquiet "fetching" sh -c \'echo why it broke; exit 3\'')
    assert done.returncode == 3
    lines = done.stderr.splitlines()
    assert re.fullmatch(
        rf"scripts/test\.sh: fetching failed \(exit 3\); its last lines below, all of its output in "
        rf"{re.escape(str(tmp_path))}/test-prep\.\d+\.log",
        lines[2],
    )
    assert lines[3:] == ["  | why it broke"]  # this step's lines only, not the earlier step's
    assert Path(lines[2].rsplit(" in ", 1)[1]).is_file()
