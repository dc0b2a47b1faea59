"""Reading recorded streams and manifests from files: JSON Lines (plain, gzip, stdin), YAML/JSON."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

__all__ = ["iter_lines", "load_manifests", "load_yaml_file", "open_input"]


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
