"""agents/fence/upstream.py: the worker stops at start, with one line, when Faust or aiokafka is not
the version agents/fence was read against or a method it wraps has changed."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from agents.fence import upstream
from agents.fence.upstream import FINGERPRINTS, READ_AGAINST, UpstreamChanged, check_upstream, fingerprint, installed

VERSIONS = dict(READ_AGAINST)
SAME = dict(FINGERPRINTS)


def test_the_installed_faust_and_aiokafka_are_the_ones_read_against() -> None:
    assert installed() == (VERSIONS, SAME)
    check_upstream()


def test_another_version_stops_the_worker_with_one_line() -> None:
    with pytest.raises(UpstreamChanged) as caught:
        check_upstream({**VERSIONS, "faust-streaming": "0.15.4"}, SAME)
    assert str(caught.value) == (
        "tandem worker: agents/fence was read against faust-streaming 0.15.3 and aiokafka 0.14.0; "
        "installed faust-streaming 0.15.4 (not 0.15.3): re-read agents/fence for them and update "
        "agents/fence/upstream.py"
    )


def test_a_changed_method_is_named() -> None:
    async def wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        return None  # what an upgrade might have made of mode's Service.wait_first

    changed = {**SAME, "faust.transport.consumer:Consumer.wait_first": fingerprint(wait_first)}
    assert changed != SAME
    with pytest.raises(UpstreamChanged) as caught:
        check_upstream(VERSIONS, changed)
    assert str(caught.value).endswith(
        "; changed Consumer.wait_first: re-read agents/fence for them and update agents/fence/upstream.py"
    )


def test_an_install_refuses_a_changed_upstream_before_it_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.tables.recovery import Recovery

    import agents.fence.patches as patches

    before = Recovery._resume_streams
    monkeypatch.setattr(upstream, "_INSTALLED", (VERSIONS, {**SAME, "aiokafka.client:AIOKafkaClient.send": "missing"}))
    monkeypatch.setattr(patches, "_installed", False)
    upstream.checked.cache_clear()
    try:
        with pytest.raises(UpstreamChanged, match=r"; changed AIOKafkaClient\.send: re-read"):
            patches.install_recovery_order_fix()
        assert Recovery._resume_streams is before  # nothing was patched
    finally:
        upstream.checked.cache_clear()


def test_the_process_ends_with_status_1_and_the_line_alone_on_stderr() -> None:
    code = (
        "from agents.fence.upstream import check_upstream, READ_AGAINST, FINGERPRINTS\n"
        "check_upstream({**READ_AGAINST, 'aiokafka': '0.15.0'}, FINGERPRINTS)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "tandem worker: agents/fence was read against faust-streaming 0.15.3 and aiokafka 0.14.0; "
        "installed aiokafka 0.15.0 (not 0.14.0): re-read agents/fence for them and update agents/fence/upstream.py"
    ]
