"""tandem's pure decision core, interpreted or compiled by mypyc (issue 17).

This file is never compiled: it chooses, at import, which code every ``scaling.*`` module runs.

``TANDEM_CORE`` (environment):

* ``auto`` (the default): the compiled build of exactly these sources if one exists, else the
  interpreted modules beside this file;
* ``compiled``: the compiled build, or :class:`CoreUnavailable` at import (the process refuses to
  start rather than silently run the slower core);
* ``interpreted``: never the compiled build (monkeypatching, profiling, debugging).

A build (``scripts/build_core.py``) lives in ``<TANDEM_CACHE or ~/.cache/tandem>/core/<digest>/``
where ``<digest>`` (:func:`source_digest`) is a sha256 over the relative path and bytes of every
``.py`` file under this directory and the interpreter's extension-module ABI.  This file computes
the digest of the sources it sits beside on every import, so an edited source, a checkout of
another commit or another Python changes the digest and the stale build is simply not found: no
timestamp, no install step and no editable install can make a build run over other sources.
(The check costs about 1.5 ms per process: reading and hashing 0.5 MB; measured in
docs/performance.md.)  The cache is outside the repository so that worktrees and clones of the
same sources share one build and packaging never sees a ``.so``; the digest makes sharing safe.

When compiled, ``__path__`` points at the build's ``scaling/`` (the ``.py`` copies the build
compiled, beside their extension modules, which the import system prefers), and the build's
shared library (mypyc puts all modules' code in one, imported by each module's small shim) is
loaded first under its own name, so it needs no ``sys.path`` entry.  :data:`CORE` says which core
runs; ``tandem --version``, the worker's start-up log and the benchmarks show it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig

__all__ = ["BUILD_FORMAT", "CORE", "CORE_BUILD", "CoreUnavailable", "build_root", "source_digest"]

#: Bumped when the build's layout or the meaning of the digest changes.
BUILD_FORMAT = 1


class CoreUnavailable(RuntimeError):
    """``TANDEM_CORE=compiled`` without a build of these sources, or an unknown ``TANDEM_CORE``."""


def source_digest(root: str | None = None) -> str:
    """The sha256 (hex) of the ``.py`` sources under ``root`` (default: this package) and the ABI.

    Sorted relative paths (``/``-separated) and their bytes, each framed by its length, then the
    extension-module suffix (Python version, ABI, platform) and :data:`BUILD_FORMAT`.
    """
    root = root or os.path.dirname(os.path.abspath(__file__))
    files: list[str] = []
    for here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(here, root).replace(os.sep, "/")
        files.extend(n if rel == "." else f"{rel}/{n}" for n in names if n.endswith(".py"))
    h = hashlib.sha256()
    for name in sorted(files):
        with open(os.path.join(root, name), "rb") as f:
            data = f.read()
        h.update(b"%d:%s\0%d:" % (len(name), name.encode(), len(data)))
        h.update(data)
    h.update(f"{sysconfig.get_config_var('EXT_SUFFIX')}\0{BUILD_FORMAT}".encode())
    return h.hexdigest()


def build_root() -> str:
    """Where builds are kept: ``$TANDEM_CACHE/core`` (default ``~/.cache/tandem/core``)."""
    cache = os.environ.get("TANDEM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tandem")
    return os.path.join(cache, "core")


def _use_build(build: str) -> None:
    """Load the build's shared library and point this package at the build's modules."""
    import importlib.util

    with open(os.path.join(build, "BUILD.json"), encoding="utf-8") as f:
        meta = json.load(f)
    for name, rel in meta["shared"].items():
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, os.path.join(build, rel))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {rel} from {build}")
        lib = importlib.util.module_from_spec(spec)
        sys.modules[name] = lib
        try:
            spec.loader.exec_module(lib)
        except BaseException:
            del sys.modules[name]
            raise
    __path__[:] = [os.path.join(build, "scaling")]


def _choose() -> tuple[str, str | None]:
    mode = os.environ.get("TANDEM_CORE", "auto") or "auto"
    if mode not in ("auto", "compiled", "interpreted"):
        raise CoreUnavailable(f"TANDEM_CORE={mode!r}: expected auto, compiled or interpreted")
    if mode == "interpreted":
        return "interpreted", None
    digest = source_digest()
    build = os.path.join(build_root(), digest)
    # BUILD.json is written last, and the directory renamed into place whole: a build is complete.
    if not os.path.isfile(os.path.join(build, "BUILD.json")):
        if mode == "compiled":
            raise CoreUnavailable(
                f"TANDEM_CORE=compiled, but there is no compiled core for these sources ({build} does not "
                "exist): build it with `python scripts/build_core.py`, or unset TANDEM_CORE"
            )
        return "interpreted", None
    try:
        _use_build(build)
    except (OSError, ImportError, ValueError, KeyError) as exc:  # a damaged build, a missing library
        if mode == "compiled":
            raise CoreUnavailable(f"TANDEM_CORE=compiled, but the build {build} does not load: {exc!r}") from exc
        print(
            f"tandem: the compiled core {build} does not load ({exc!r}); running the interpreted core", file=sys.stderr
        )
        return "interpreted", None
    return "compiled", build


#: ``"compiled"`` or ``"interpreted"``: which core this process runs.
CORE: str
#: The compiled build's directory, or ``None``.
CORE_BUILD: str | None
CORE, CORE_BUILD = _choose()
