"""Build the optional compiled core: ``scaling/`` compiled by mypyc (issue 17).

    python scripts/build_core.py [--force] [--opt-level 3] [--jobs 2] [--keep 3] [--print-dir]

The build goes to ``<TANDEM_CACHE or ~/.cache/tandem>/core/<digest>/``, ``<digest>`` being
:func:`scaling.source_digest` of the sources it compiled, and ``scaling/__init__.py`` uses it only
while the sources beside it have that same digest (see there): a build can never run over edited
sources, so nothing has to remember to rebuild or delete it.  When a build for the current digest
already exists (made by the installed mypyc) this script does nothing, which makes it cheap to run
before every test run.

How: the ``.py`` files are copied to a temporary directory beside the destination, their digest is
checked against the one computed first (another process may be editing the tree), mypyc compiles
them there (``setup.py build_ext --inplace``), the C sources and object files are deleted, and
``BUILD.json`` is written last; then the directory is renamed into place in one step, so a reader
never sees half a build and two concurrent builds of the same digest cannot mix (the second
discards its own).  Older builds beyond ``--keep`` (by time of last build) are removed.

What is compiled: every module but two, kept interpreted beside the compiled ones (their ``.py``
copies in the build are what runs):

* ``scaling/__init__.py``, which chooses the core and so must run before any compiled module;
* ``scaling/errors.py``: its ``InvalidEvent`` is subclassed outside the core
  (``streams.signing.InputRefused``, ``streams.inputs.BrokenStream``) and a compiled class refuses
  interpreted subclasses unless marked with ``mypy_extensions.mypyc_attr`` (as
  ``scaling/policies/delegating.py`` is, for the simulator's Holt-Winters baseline); errors are
  raised once per bad input, so an interpreted exception class costs nothing measurable.

Options (measured in docs/performance.md, "The compiled core"): the whole core in one
group, so calls between modules are direct C calls; ``multi_file`` splits its C code into one file
per module (compiled ``--jobs`` at a time), and ``-O2``: a tick ran the same number of instructions
(301k) with one 23 MB C file or with one per module and at ``-O3`` or ``-O2``, while gcc took 188 s
of CPU and 0.73 GB for one file at ``-O2``, 131-153 s and 0.31 GB per module at ``-O3``, 122 s and
0.31 GB per module at ``-O2``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Modules kept interpreted (see the docstring for why).
INTERPRETED = ("scaling/__init__.py", "scaling/errors.py")

SETUP = """\
import json
import time
from concurrent.futures import ThreadPoolExecutor

from setuptools import setup
from setuptools._distutils.ccompiler import CCompiler
from mypyc.build import mypycify

JOBS = {jobs}


def compile_in_parallel(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                        extra_preargs=None, extra_postargs=None, depends=None):
    # CCompiler.compile, with the C files of one extension compiled JOBS at a time (mypyc's
    # multi_file gives one file per module, which build_ext would compile one after another).
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs
    )
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)
    todo = [(obj, *build[obj]) for obj in objects if obj in build]
    todo.sort(key=lambda job: -__import__("os").path.getsize(job[1]))  # the largest first
    with ThreadPoolExecutor(JOBS) as pool:
        list(pool.map(lambda job: self._compile(job[0], job[1], job[2], cc_args, extra_postargs, pp_opts), todo))
    return objects


CCompiler.compile = compile_in_parallel
started = time.monotonic()
extensions = mypycify({paths!r}, **{opts!r})
with open("cgen.json", "w") as f:
    json.dump({{"cgen_seconds": round(time.monotonic() - started, 1)}}, f)
setup(name="tandem-core", ext_modules=extensions, script_args=["build_ext", "--inplace", "--parallel", str(JOBS)])
"""


def mypy_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        import mypyc.build  # noqa: F401
        import setuptools  # noqa: F401

        return version("mypy")
    except (ImportError, PackageNotFoundError) as exc:
        raise SystemExit(
            f"build_core: {exc}: the compiled core needs mypy (mypyc) and setuptools: pip install -e '.[dev]'"
        ) from None


def is_current(build: Path, mypyc: str) -> bool:
    """Whether ``build`` is complete and was made by this mypy (the digest is in its name)."""
    try:
        return bool(json.loads((build / "BUILD.json").read_text()).get("mypy") == mypyc)
    except (OSError, ValueError):
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="build even if a build of these sources exists")
    ap.add_argument("--opt-level", default="2", help="mypyc's C optimisation level (default 2: 3 ran no faster)")
    ap.add_argument("--single-file", action="store_true", help="one C file (mypyc's default) instead of one per module")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel C compilers (default: cpus)")
    ap.add_argument("--keep", type=int, default=3, help="builds to keep in the cache (default 3)")
    ap.add_argument("--print-dir", action="store_true", help="print the build directory for these sources and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="mypyc's and the compiler's output only on failure")
    args = ap.parse_args()

    os.environ["TANDEM_CORE"] = "interpreted"
    sys.path.insert(0, str(ROOT))
    import scaling

    if Path(scaling.__file__).resolve().parent != ROOT / "scaling":
        raise SystemExit(f"build_core: imported {scaling.__file__}, not {ROOT / 'scaling'}")
    digest = scaling.source_digest()
    root = Path(scaling.build_root())
    dest = root / digest
    if args.print_dir:
        print(dest)
        return 0
    mypyc = mypy_version()
    if (dest / "BUILD.json").is_file() and not args.force:
        if is_current(dest, mypyc):
            os.utime(dest)  # recently used: the last to be pruned
            print(f"build_core: up to date: {dest}", file=sys.stderr)
            return 0
        print(f"build_core: {dest} was built by another mypy, rebuilding with {mypyc}", file=sys.stderr)

    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{digest[:16]}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.o")
    shutil.copytree(ROOT / "scaling", tmp / "scaling", ignore=skip)
    try:
        if scaling.source_digest(str(tmp / "scaling")) != digest:
            raise SystemExit("build_core: scaling/ changed while it was copied; run again")
        modules = sorted(p.relative_to(tmp).as_posix() for p in (tmp / "scaling").rglob("*.py"))
        paths = [m for m in modules if m not in INTERPRETED]
        opts = {"opt_level": args.opt_level, "multi_file": not args.single_file}
        (tmp / "setup.py").write_text(SETUP.format(opts=opts, paths=paths, jobs=args.jobs))
        print(
            f"build_core: compiling {len(paths)} modules with mypyc {mypyc} ({opts}, {args.jobs} jobs) "
            f"into {dest} (a few minutes)",
            file=sys.stderr,
        )
        env = dict(os.environ, PYTHONPATH="", TANDEM_CORE="interpreted")
        log = tmp / "build.log"
        with log.open("w") as out:
            quiet = {"stdout": out, "stderr": subprocess.STDOUT} if args.quiet else {}
            proc = subprocess.Popen([sys.executable, "setup.py"], cwd=tmp, env=env, **quiet)
            while True:  # like scripts/kube.sh: say every 30 s that the build is still running
                try:
                    code = proc.wait(timeout=30)
                    break
                except subprocess.TimeoutExpired:
                    print(f"build_core: still building, {time.monotonic() - started:.0f}s elapsed", file=sys.stderr)
        if code:
            if args.quiet:
                sys.stderr.write(log.read_text()[-30000:])
            raise SystemExit(f"build_core: mypyc failed (exit {code}); nothing was installed")
        cgen = json.loads((tmp / "cgen.json").read_text())["cgen_seconds"]
        for junk in ("build", ".mypy_cache", "setup.py", "cgen.json", "build.log"):
            path = tmp / junk
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        shared = {}
        for so in sorted(tmp.rglob("*__mypyc*.so")):
            rel = so.relative_to(tmp)
            shared[".".join((*rel.parts[:-1], so.name.split(".", 1)[0]))] = str(rel)
        if not shared:
            raise SystemExit("build_core: mypyc made no shared library; nothing was installed")
        for c_file in [*tmp.glob("*.c"), *tmp.glob("*.h"), *tmp.rglob("*.c")]:
            c_file.unlink(missing_ok=True)
        seconds = time.monotonic() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        meta = {
            "format": scaling.BUILD_FORMAT,
            "digest": digest,
            "python": sys.version.split()[0],
            "platform": f"{platform.system()} {platform.machine()}",
            "mypy": mypyc,
            "options": opts,
            "jobs": args.jobs,
            "compiled": len(paths),
            "interpreted": list(INTERPRETED),
            "shared": shared,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(seconds, 1),
            "mypyc_seconds": cgen,
            "peak_rss_mb": round(peak),
        }
        (tmp / "BUILD.json").write_text(json.dumps(meta, indent=2) + "\n")
        if dest.exists() and not args.force and is_current(dest, mypyc):
            # A concurrent build of the same sources finished first: keep it (a process may be
            # loading it), drop ours.
            print(f"build_core: another build of {digest[:16]} finished first; keeping it", file=sys.stderr)
        else:
            if dest.exists():  # --force, or an older mypyc: move the old build aside, then drop it
                old = root / f".old-{digest[:16]}-{os.getpid()}"
                dest.rename(old)
                shutil.rmtree(old, ignore_errors=True)
            tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    builds = sorted((p for p in root.iterdir() if not p.name.startswith(".")), key=lambda p: p.stat().st_mtime)
    for stale in builds[: max(0, len(builds) - args.keep)]:
        if stale != dest:
            shutil.rmtree(stale, ignore_errors=True)
    print(
        f"build_core: built the compiled core in {seconds:.0f}s (mypyc {cgen:.0f}s, then the C compiler; "
        f"peak RSS of a child {peak:.0f} MB): {dest}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
