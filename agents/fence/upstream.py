"""The Faust and aiokafka this package was read against, checked when the worker starts.

Every module of ``agents.fence`` reaches private names of faust-streaming and aiokafka, wraps some
of their methods or re-implements one of their loops, and each says which and why.  A version pin
alone lets an upgrade change one of those methods silently, and the worker would then misbehave
in production, not fail.  So the exact versions and a fingerprint of each method it wraps,
recognises by its code or re-implements (the sha256 of its source, as installed) are recorded
here, and :func:`check_upstream` compares them with what is installed before the first patch is
applied (each ``install_*`` of :mod:`agents.fence.patches` calls it): any difference stops the
worker at start with one line naming what changed.  After an upgrade: re-read the methods named,
update the modules that depend on them, then :data:`READ_AGAINST` and :data:`FINGERPRINTS`
(``python -m agents.fence.upstream`` prints what is installed, in their form).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Mapping
from functools import cache
from importlib.metadata import version
from typing import Any

__all__ = ["FINGERPRINTS", "READ_AGAINST", "UpstreamChanged", "check_upstream", "fingerprint", "installed"]

#: The distributions and the exact versions this package was read against.
READ_AGAINST: Mapping[str, str] = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}

#: ``module:Class.method`` -> the first 16 hex digits of the sha256 of its source.
FINGERPRINTS: Mapping[str, str] = {
    # wrapped by agents.fence.patches
    "faust.tables.recovery:Recovery._resume_streams": "d986a6710c1aca98",
    "faust.tables.recovery:Recovery.on_recovery_completed": "6ef567acf072e46d",
    "faust.transport.consumer:Consumer._commit_offsets": "1a69799041188441",
    "faust.transport.drivers.aiokafka:AIOKafkaConsumerThread._fetch_records": "39a2c6c79fc1455a",
    "faust.transport.consumer:Consumer.wait_empty": "e4662fe24f094819",
    "faust.transport.consumer:Consumer.wait_first": "feade6a31f8a6789",
    # overridden by agents.fence.patches.ConfirmedTable
    "faust:Table.send_changelog": "3dd3884e1b5fc0e1",
    # recognised by their code in agents.fence.watch (a fetch task safe to cancel)
    "aiokafka.consumer.fetcher:Fetcher._update_fetch_positions": "d7774d8241dc6a7e",
    "aiokafka.consumer.fetcher:Fetcher._proc_fetch_request": "59bf948fff47eed5",
    "aiokafka.client:AIOKafkaClient.send": "246b277687d7b687",
    # called for its side effect (the parked error taken) by agents.fence.inspection.take_parked_error
    "aiokafka.consumer.group_coordinator:GroupCoordinator.check_errors": "ba6ca51ad34838d9",
    # re-implemented by agents.fence.batches.take_batches
    "faust.streams:Stream._py_aiter": "3a48ee257a65435b",
    "faust.streams:Stream.noack_take": "f2cc2dbfc162d200",
}


class UpstreamChanged(SystemExit):
    """Faust or aiokafka is not what ``agents.fence`` was read against.  A ``SystemExit``: the
    process ends at start with this one line on stderr and status 1, never a traceback."""


def fingerprint(function: Any) -> str:
    """The first 16 hex digits of the sha256 of ``function``'s source (unwrapped)."""
    source = inspect.getsource(inspect.unwrap(function))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _resolve(where: str) -> Any:
    module, _, path = where.partition(":")
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def installed() -> tuple[dict[str, str], dict[str, str]]:
    """The installed versions of :data:`READ_AGAINST`'s distributions and the fingerprints of
    :data:`FINGERPRINTS`' methods (``missing`` for one that is gone)."""
    versions = {name: version(name) for name in READ_AGAINST}
    found: dict[str, str] = {}
    for where in FINGERPRINTS:
        try:
            found[where] = fingerprint(_resolve(where))
        except (AttributeError, ImportError, OSError, TypeError):
            found[where] = "missing"
    return versions, found


#: What is installed, read when this module is first imported: before any patch of
#: :mod:`agents.fence.patches` replaced a method (and before a test stands in for one).
_INSTALLED = installed()


def check_upstream(versions: Mapping[str, str] | None = None, found: Mapping[str, str] | None = None) -> None:
    """Raise :class:`UpstreamChanged` unless the installed Faust and aiokafka (or ``versions`` and
    ``found``, in the form of :func:`installed`, given by a test) are what this package was read
    against."""
    versions = _INSTALLED[0] if versions is None else versions
    found = _INSTALLED[1] if found is None else found
    other = [
        f"{name} {versions.get(name)} (not {want})" for name, want in READ_AGAINST.items() if versions.get(name) != want
    ]
    changed = [where.split(":")[1] for where, want in FINGERPRINTS.items() if found.get(where) != want]
    if not other and not changed:
        return
    said = []
    if other:
        said.append("installed " + ", ".join(other))
    if changed:
        said.append("changed " + ", ".join(changed))
    raise UpstreamChanged(
        "tandem worker: agents/fence was read against "
        + " and ".join(f"{n} {v}" for n, v in READ_AGAINST.items())
        + f"; {'; '.join(said)}: re-read agents/fence for them and update agents/fence/upstream.py"
    )


@cache
def checked() -> None:
    """:func:`check_upstream` once per process (the ``install_*`` functions call it first)."""
    check_upstream()


if __name__ == "__main__":  # pragma: no cover - a maintainer's aid after an upgrade
    now_versions, now_found = _INSTALLED
    print(dict(now_versions))
    for key, value in now_found.items():
        print(f'    "{key}": "{value}",')
