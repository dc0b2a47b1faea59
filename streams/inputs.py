"""Reading recorded streams and manifests from files: JSON Lines (plain, gzip, stdin), YAML/JSON."""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from scaling.engine import policy_event
from scaling.errors import InvalidEvent
from scaling.settings import Settings

__all__ = [
    "BROKEN",
    "BrokenStream",
    "EmptyStream",
    "RefusedPolicy",
    "SettingsError",
    "UsageError",
    "WatchedErr",
    "check_output_dir",
    "check_output_file",
    "check_stream",
    "iter_lines",
    "load_command_inputs",
    "load_core_settings",
    "load_manifests",
    "load_yaml_file",
    "open_input",
]


#: The first bytes of every gzip member (RFC 1952 section 2.3.1).
_GZIP_MAGIC = b"\x1f\x8b"
#: How much of a stream file is looked at before reading it: enough for a first line.
_SNIFF = 1 << 16


class UsageError(Exception):
    """A missing file, or a settings or policy file tandem cannot use: the command exits 2."""

    #: The command's exit status.
    status = 2


class RefusedPolicy(UsageError):
    """A policy document refused under ``--strict``: the command exits 1, as for a bad line."""

    status = 1


class EmptyStream(UsageError):
    """An input file with no line to read, under ``--strict``: the command exits 1, as for a bad line."""

    status = 1


class SettingsError(ValueError):
    """A settings file (``--config``) or option tandem cannot use; the text names the file or the option."""


#: How every message about a stream file that broke part-way ends (:class:`BrokenStream`): the
#: commands recognise it among the bad lines reported to them, because such a run lost data and so
#: exits 1 whatever ``--strict`` says (a bad line is one line lost; a broken file, the rest of it).
BROKEN = "nothing from here on could be read"


class WatchedErr(io.StringIO):
    """A stand-in for stderr that passes every write on and counts the stream files that broke.

    The readers report a broken file as one more bad line (``FILE:LINE: why; ... BROKEN``), on the
    ``err`` they are given; a command hands them this instead of ``sys.stderr`` and exits 1 if
    :attr:`broken` is not zero, whatever ``--strict`` says.  (An ``io.StringIO`` only for its
    type: nothing is kept.)
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self.broken = 0

    def write(self, text: str) -> int:
        self.broken += text.count(BROKEN + "\n")
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


class BrokenStream(InvalidEvent):
    """A stream file that stops being readable part-way (a truncated or corrupt gzip, an I/O error).

    Raised by :func:`iter_lines` in place of the line it could not read, as a bad line is:
    ``FILE:LINE: why``; the lines before it were read and stand.
    """

    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__("", reason)
        self.lineno = lineno


def _why_unreadable(path: str, exc: BaseException) -> str:
    """One line saying why ``path`` cannot be read: no traceback, no errno noise."""
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, PermissionError):
        return f"{path}: cannot be read (permission denied)"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{path}: not valid YAML: line {mark.line + 1} column {mark.column + 1}: {exc.problem or exc.context}"
    if isinstance(exc, yaml.YAMLError):
        return f"{path}: not valid YAML: {exc}"
    if isinstance(exc, RecursionError):
        return f"{path}: nested too deeply to read"
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); is it a binary file?"
    why = _stream_reason(exc)
    return why if why.startswith(f"{path}: ") else f"{path}: {why}"


def _gzip_reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the gzip data ends early (a truncated file?)"
    return f"corrupt gzip data ({exc})"


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def open_input(path: str) -> IO[bytes]:
    """Open a recorded stream; ``-`` is stdin; gzip data (by its magic bytes) is decompressed.

    Pipes and process substitutions (``<(zcat x.gz)``) are read as they come.  Raises
    :class:`OSError` (``FileNotFoundError``, ``IsADirectoryError``...) for a file that cannot be opened.
    """
    if path == "-":
        return sys.stdin.buffer
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(21, "Is a directory", path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file", path)
    if p.is_file() and _is_gzip(p):
        return io.BufferedReader(gzip.open(p, "rb"))  # type: ignore[arg-type]
    return p.open("rb")


def check_stream(path: str) -> bool:
    """Refuse, before anything runs, a stream file that cannot be read at all; ``True`` if it is empty.

    A missing file, a directory, an unreadable file, gzip data that breaks before its first line,
    or binary data (a NUL byte: JSON text never holds one unescaped) raise :class:`UsageError` with
    one line that says which.  Only regular files are looked into: reading a pipe would consume it
    (and a pipe is never called empty here).  Empty means no line but blank ones: nothing to read.
    """
    if path == "-":
        return False
    p = Path(path)
    head = b""
    try:
        if p.exists() and not p.is_dir() and not p.is_file():
            return False  # a pipe (opening it would wait for a writer) or a device
        with open_input(path) as fh:
            while len(head) < _SNIFF:
                line = fh.readline(_SNIFF)
                if not line:
                    break
                head += line
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        if b"\n" not in head:  # else a later line is where it breaks: the bad-line path says so
            raise UsageError(_why_unreadable(path, exc)) from None
    except OSError as exc:
        raise UsageError(_why_unreadable(path, exc)) from None
    if b"\x00" in head:
        raise UsageError(f"{path}: binary data, not JSON Lines (a NUL byte near the start)")
    return not head.strip()


def check_output_file(path: str, option: str = "--out") -> None:
    """Refuse, before anything runs, an output file that cannot be written: one line naming it.

    Checked first so that a long run does not end in a traceback (or in nothing written) because of
    a typo in the path: a directory, a parent directory that does not exist or is not writable.
    ``-`` (stdout) is always fine.
    """
    if path == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory; name a file to write")
    parent = p.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: no such directory {str(parent)!r}; create it first or name another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: cannot be written (permission denied)")


def check_output_dir(path: str, option: str = "--out") -> None:
    """Refuse, before anything runs, an output directory that cannot be made or written into.

    An existing file in its place, or an ancestor that is a file or not writable, is one line
    naming the path; missing directories are made by the command, as ``mkdir -p`` would.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a directory; name a directory (it is made if missing)")
    existing = p
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {str(existing)!r} is a file, so this directory cannot be made")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: {str(existing)!r} cannot be written (permission denied)")


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, line)`` for the non-blank lines of a stream file.

    If the file breaks part-way (truncated gzip, corrupt data, an I/O error), :class:`BrokenStream`
    is raised for the line that could not be read, after every line before it was yielded; its
    message says how much was read (lines and uncompressed bytes) and ends with :data:`BROKEN`.
    """
    with open_input(path) as fh:
        n = 0
        size = 0
        try:
            for n, line in enumerate(fh, 1):
                size += len(line)
                line = line.strip()
                if line:
                    yield n, line
        except (OSError, EOFError, zlib.error) as exc:
            read = f"{n} line(s) ({size} bytes) were read before it"
            raise BrokenStream(n + 1, f"{_stream_reason(exc)}; {read}, {BROKEN}") from None


def _stream_reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError | gzip.BadGzipFile | zlib.error):
        return _gzip_reason(exc)
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    return str(exc)


class _UniqueKeys:
    """A mapping that names a key twice is refused, not read as its last value.

    YAML says a mapping's keys are unique, but PyYAML (pure and libyaml alike) keeps the last of
    two: a policy with ``minReplicas`` twice would silently run with the second.  Keys merged in
    with ``<<`` may be overridden, as YAML allows; only a mapping's own keys are compared.
    """

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)  # type: ignore[attr-defined]
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: PyYAML refuses it below
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r} (each key once: the second would silently win)",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep)  # type: ignore[misc]


class _StrictSafeLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's pure safe loader, refusing duplicate keys."""


#: libyaml's parser under PyYAML's own safe constructor, where PyYAML was built with it: the same
#: documents as ``yaml.safe_load_all`` (the scalars are resolved and built by the same Python code)
#: about ten times faster; three policy files took ``tandem simulate`` 0.19 G instructions before
#: its first line was read.  Duplicate keys are refused by both.
_FAST_LOADER: type[Any] | None = (
    type("_StrictCSafeLoader", (_UniqueKeys, yaml.CSafeLoader), {}) if hasattr(yaml, "CSafeLoader") else None
)


def load_yaml_file(path: str) -> list[Any]:
    """All documents of a YAML (or JSON) file; a list document is flattened (``kind: List`` too).

    Parsed with libyaml when PyYAML has it; a file it refuses is parsed again by PyYAML's pure
    parser, so that a bad file is refused with the same message whichever is installed."""
    loaded: list[Any] | None = None
    if _FAST_LOADER is not None:
        try:
            with open(path, encoding="utf-8") as fh:
                loaded = list(yaml.load_all(fh, Loader=_FAST_LOADER))
        except Exception:  # refused again below, with PyYAML's own message
            loaded = None
    if loaded is None:
        with open(path, encoding="utf-8") as fh:
            loaded = list(yaml.load_all(fh, Loader=_StrictSafeLoader))
    docs = [d for d in loaded if d is not None]
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


def load_command_inputs(
    files: list[str],
    policy_paths: list[str],
    config: str | None,
    cluster: str | None,
    sync_period: float | None,
    *,
    strict: bool = False,
    report: Callable[[str], None] | None = None,
    accepted: dict[str, list[dict[str, Any]]] | None = None,
    refused: list[str] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """What every file-reading command (replay, publish, report, simulate) checks first, the same way.

    Returns the core settings and the policy manifests that can run.  A policy document that
    cannot (a misspelled field, a bad value) is refused with one line naming the file, the
    document (its index and ``kind namespace/name``), the field's full path and why; the run goes
    on without it (the line goes to ``report``, stderr by default), as for a bad line, unless
    ``strict``: then :class:`RefusedPolicy` (exit 1).  Files tandem cannot use at all raise
    :class:`UsageError` (exit 2).  An empty input file is a warning, or :class:`EmptyStream`
    (exit 1) under ``strict``: a run that reads nothing is rarely what was meant.

    ``accepted``, if given, receives the manifests that can run per policy file (in file order),
    and ``refused`` one ``kind namespace/name`` per refused document (a later "no policy" hint
    says that the policy passed was refused, rather than to pass one).
    """
    warn = report if report is not None else (lambda msg: print(msg, file=sys.stderr))
    empty = [path for path in files if check_stream(path)]  # said after the policies: they matter more
    try:
        settings = load_core_settings(config, cluster, sync_period)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    manifests: list[dict[str, Any]] = []
    for path in policy_paths:
        try:
            docs = load_manifests(path)
        except (OSError, ValueError, yaml.YAMLError, RecursionError) as exc:
            raise UsageError(_why_unreadable(path, exc)) from None
        if not docs:
            raise UsageError(f"{path}: no policy manifest in this file (expected Hvpa, Tortoise or CustomHpa)")
        kept = accepted.setdefault(path, []) if accepted is not None else []
        for i, doc in enumerate(docs, 1):
            try:
                policy_event(doc, settings.cluster)
            except InvalidEvent as exc:
                msg = f"{path}: document {i} ({describe_manifest(doc)}): {exc.field or 'policy'}: {exc.reason}"
                if strict:
                    raise RefusedPolicy(msg) from None
                warn(f"{msg}; this policy is refused")
                if refused is not None:
                    refused.append(describe_manifest(doc))
                continue
            manifests.append(doc)
            kept.append(doc)
    for path in empty:
        msg = f"{path}: empty file, no event to read"
        if strict:
            raise EmptyStream(msg)
        warn(f"{msg} (a warning; --strict makes it an error)")
    return settings, manifests


def describe_manifest(doc: Any) -> str:
    """``kind namespace/name`` of a manifest, as far as it says (for errors about it)."""
    if not isinstance(doc, dict):
        return type(doc).__name__
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else "?"
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else "default"
    name = meta.get("name") if isinstance(meta.get("name"), str) else "?"
    return f"{kind} {ns}/{name}"


def load_core_settings(config: str | None, cluster: str | None, sync_period: float | str | None) -> Settings:
    """The decision core's settings: ``--config`` YAML plus the ``--cluster``/``--sync-period`` overrides.

    Every error is a :class:`SettingsError` (a ``ValueError``) whose text names the file, or the
    option, it is about.
    """
    raw: dict[str, Any] = {}
    if config:
        try:
            docs = load_yaml_file(config)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            raise SettingsError(_why_unreadable(config, exc)) from None
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise SettingsError(f"{config}: expected one mapping of settings")
        raw = docs[0]
    try:
        period = float(sync_period) if sync_period is not None else None
    except ValueError:
        raise SettingsError(f"--sync-period: {sync_period!r} is not a number of seconds") from None
    try:
        return Settings.from_mapping(raw, cluster=cluster, sync_period=period)
    except InvalidEvent as exc:
        options = {"cluster": cluster, "sync_period": period}
        if options.get(exc.field) is not None:
            raise SettingsError(f"--{exc.field.replace('_', '-')}: {exc.reason}") from None
        raise SettingsError(f"{config}: {exc}" if config else str(exc)) from None
