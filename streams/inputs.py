"""Reading recorded streams and manifests from files: JSON Lines (plain, gzip, stdin), YAML/JSON."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from scaling.settings import Settings

__all__ = [
    "UsageError",
    "iter_lines",
    "load_command_inputs",
    "load_core_settings",
    "load_manifests",
    "load_yaml_file",
    "open_input",
]


def open_input(path: str) -> IO[bytes]:
    """Open a recorded stream; ``-`` is stdin, ``.gz`` is decompressed.  Missing -> FileNotFoundError."""
    if path == "-":
        return sys.stdin.buffer
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(path)
    if p.suffix == ".gz":
        return io.BufferedReader(gzip.open(p, "rb"))  # type: ignore[arg-type]
    return p.open("rb")


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, line)`` for the non-blank lines of a stream file."""
    with open_input(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if line:
                yield n, line


def load_yaml_file(path: str) -> list[Any]:
    """All documents of a YAML (or JSON) file; a list document is flattened (``kind: List`` too)."""
    with open(path, encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d is not None]
    out: list[Any] = []
    for d in docs:
        if isinstance(d, list):
            out.extend(d)
        elif isinstance(d, dict) and d.get("kind") == "List" and isinstance(d.get("items"), list):
            out.extend(d["items"])
        else:
            out.append(d)
    return out


def load_manifests(path: str) -> list[dict[str, Any]]:
    docs = load_yaml_file(path)
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise ValueError(f"{path}: document {i + 1} is not a manifest object")
    return docs


class UsageError(Exception):
    """A missing file, or a settings or policy file tandem cannot use: the command exits 2."""


def load_command_inputs(
    files: list[str], policy_paths: list[str], config: str | None, cluster: str | None, sync_period: float | None
) -> tuple[Any, list[dict[str, Any]]]:
    """What every file-reading command (replay, publish, report, simulate) checks first, the same way.

    Returns the core settings and the policy manifests, each validated (a policy names its bad
    field); raises :class:`UsageError` with the message to print.
    """
    from scaling.engine import policy_event
    from scaling.errors import InvalidEvent

    for path in [*files, *policy_paths]:
        if path != "-" and not Path(path).is_file():
            raise UsageError(f"{path}: no such file")
    try:
        settings = load_core_settings(config, cluster, sync_period)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    manifests: list[dict[str, Any]] = []
    for path in policy_paths:
        try:
            docs = load_manifests(path)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise UsageError(f"{path}: {exc}") from None
        for doc in docs:
            try:
                policy_event(doc, settings.cluster)
            except InvalidEvent as exc:
                raise UsageError(f"{path}: policy: {exc}") from None
        manifests.extend(docs)
    return settings, manifests


def load_core_settings(config: str | None, cluster: str | None, sync_period: float | str | None) -> Settings:
    """The decision core's settings: ``--config`` YAML plus the ``--cluster``/``--sync-period`` overrides."""
    raw: dict[str, Any] = {}
    if config:
        docs = load_yaml_file(config)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise ValueError(f"{config}: expected one mapping of settings")
        raw = docs[0]
    period = float(sync_period) if sync_period is not None else None
    return Settings.from_mapping(raw, cluster=cluster, sync_period=period)
