"""ARCHITECTURE: one role per package, layers that only look down, no import cycles, no code
outside ``scaling/policies`` that knows a policy kind by name or imports a kind's module, and no
module that imports another module's private (``_``-prefixed) name: what a package shares is
public inside it.

The checks read the source (``ast``), never import it, so they see imports inside functions too.
Each one is a function of a source tree, run on the repository and, to show that it can fail, on a
small tree with a planted violation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import scaling.policies  # noqa: F401  (registers the built-in kinds)
from scaling.policies.registry import kind_names

ROOT = Path(__file__).resolve().parents[2]
#: Layers, lowest first: a package may import only lower ones; packages on one layer never import
#: each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("scaling",),
    ("schemas",),
    ("streams",),
    ("ops",),
    ("agents", "edge", "analysis"),
    ("cli",),
)
LAYER = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
#: The policy kinds' names, as registered (a new kind is guarded from the day it registers); only
#: ``scaling/policies`` (the registry and the kinds) may compare with them.
KIND_NAMES = tuple(sorted(kind_names()))
KIND_HOME = "scaling/policies"


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # importing module, e.g. "scaling.own"
    target: str  # imported module of ours, e.g. "scaling.policies.templates"
    where: str  # "path:line"


def _modules(root: Path) -> dict[str, Path]:
    """Every module of our packages under ``root``, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for pkg in LAYER:
        for path in sorted((root / pkg).rglob("*.py")) if (root / pkg).is_dir() else ():
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module name of a ``from ... import`` (relative ones against ``module``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports(root: Path) -> list[Import]:
    """Every import of one of our modules by another, wherever it stands (in a function too)."""
    modules = _modules(root)
    out: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        where = str(path.relative_to(root))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node)
                # ``from pkg import mod`` imports the module ``pkg.mod``; ``from mod import name`` the module ``mod``
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                # ``import a.b.c`` loads the deepest of ours it names
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out.append(Import(name, target, f"{where}:{node.lineno}"))
    return out


def layer_violations(root: Path) -> list[str]:
    """Imports of a package above the importer's, or of a sibling on the same layer."""
    bad = []
    for imp in imports(root):
        src, dst = imp.source.split(".")[0], imp.target.split(".")[0]
        if src != dst and LAYER[dst] >= LAYER[src]:
            bad.append(f"{imp.where}: {imp.source} imports {imp.target} ({src} may not import {dst})")
    return bad


def cycles(root: Path) -> list[list[str]]:
    """The import cycles among our modules (Tarjan's strongly connected components of size > 1)."""
    graph: dict[str, set[str]] = {m: set() for m in _modules(root)}
    for imp in imports(root):
        graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _kind_literals(node: ast.AST) -> Iterator[ast.Constant]:
    """Kind-name string literals in ``node`` itself or in a tuple/list/set literal it is."""
    if isinstance(node, ast.Constant) and node.value in KIND_NAMES:
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for elt in node.elts:
            yield from _kind_literals(elt)


def kind_name_uses(root: Path) -> list[str]:
    """Code outside ``scaling/policies`` that compares with a policy kind's name, keys a dict by
    one or matches on one (docstrings and comments are not code and do not count)."""
    bad: list[tuple[str, int, str]] = []
    for path in _modules(root).values():
        rel = path.relative_to(root).as_posix()
        if rel.startswith(KIND_HOME + "/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            operands: list[ast.AST] = []
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                operands = [k for k in node.keys if k is not None]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            for operand in operands:
                bad.extend((rel, c.lineno, str(c.value)) for c in _kind_literals(operand))
    return [f"{rel}:{line}: policy kind {name!r}" for rel, line, name in sorted(bad)]


#: The modules of ``scaling/policies`` that are no kind: the registry and what the kinds share.
SHARED_POLICY_MODULES = frozenset(
    f"scaling.policies.{m}" for m in ("registry", "base", "bounds", "delegating", "fields", "status", "templates")
)


def kind_module_imports(root: Path) -> list[str]:
    """Imports, from outside ``scaling/policies``, of a kind's own module (``scaling.policies.tortoise``):
    outer code reaches a kind through the registry's descriptor and the ``Policy`` protocol."""
    bad = []
    for imp in imports(root):
        if imp.source.startswith("scaling.policies.") or imp.source == "scaling.policies":
            continue
        if imp.target.startswith("scaling.policies.") and imp.target not in SHARED_POLICY_MODULES:
            bad.append(f"{imp.where}: {imp.source} imports the kind module {imp.target}")
    return bad


#: Private names a module may import from another, each with the reason no public name does.
PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str, str], str] = {
    ("agents.fence.inspection", "faust.streams", "_current_event"): (
        "the context variable Faust's tables read the current event from; Faust sets it nowhere public, "
        "and agents/fence is where every private Faust name lives"
    ),
}


def private_imports(root: Path) -> list[str]:
    """``from module import _name`` of another module (ours or a library's), wherever it stands,
    unless :data:`PRIVATE_IMPORTS_ALLOWED` gives the reason."""
    modules = _modules(root)
    bad = []
    for name, path in modules.items():
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _resolve(name, path.name == "__init__.py", node)
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and source != name and (name, source, alias.name) not in PRIVATE_IMPORTS_ALLOWED:
                    bad.append(f"{rel}:{node.lineno}: {name} imports {alias.name} from {source}")
    return sorted(bad)


# --- the repository ---------------------------------------------------------------------------


def test_packages_import_only_lower_layers() -> None:
    assert layer_violations(ROOT) == []


def test_no_module_imports_itself_through_a_cycle() -> None:
    assert cycles(ROOT) == []


def test_only_the_policy_kinds_know_their_names() -> None:
    assert kind_name_uses(ROOT) == []


def test_only_the_registry_reaches_a_kinds_module() -> None:
    assert kind_module_imports(ROOT) == []


def test_no_module_imports_a_private_name_of_another() -> None:
    assert private_imports(ROOT) == []


def test_the_checks_see_the_repository() -> None:
    """Guard against a checker that passes because it reads nothing."""
    found = {(i.source, i.target) for i in imports(ROOT)}
    assert ("scaling.own", "scaling.policies.templates") in found
    assert ("edge.attempt", "scaling.policies") in found
    assert ("scaling.reconcile", "scaling.own") in found


# --- each check fails on a planted violation --------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in LAYER:
        if (root / pkg).is_dir() and not (root / pkg / "__init__.py").exists():
            (root / pkg / "__init__.py").write_text("")
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"scaling/core.py": "from streams import inputs\n", "streams/inputs.py": ""},
            ["scaling/core.py:1: scaling.core imports streams.inputs (scaling may not import streams)"],
        ),
        (  # inside a function, relative to the top
            {"ops/obs.py": "def f():\n    from cli.main import main\n", "cli/main.py": ""},
            ["ops/obs.py:2: ops.obs imports cli.main (ops may not import cli)"],
        ),
        (  # siblings on one layer
            {"edge/applier.py": "import analysis.report\n", "analysis/report.py": ""},
            ["edge/applier.py:1: edge.applier imports analysis.report (edge may not import analysis)"],
        ),
        ({"cli/main.py": "from edge import applier\nimport scaling\n", "edge/applier.py": ""}, []),
    ],
)
def test_a_layer_violation_is_caught(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert layer_violations(_tree(tmp_path, files)) == expected


def test_a_direct_cycle_is_caught(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"scaling/a.py": "from . import b\n", "scaling/b.py": "from .a import X\n"})
    assert cycles(root) == [["scaling.a", "scaling.b"]]


def test_a_cycle_through_a_function_import_and_a_package_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "scaling/own.py": "from .settings import Settings\n",
            "scaling/settings.py": "from .policies.tortoise import TortoiseSettings\n",
            "scaling/policies/__init__.py": "",
            "scaling/policies/tortoise.py": "def f():\n    from ...scaling.own import X\n    from ..own import Y\n",
            "scaling/other.py": "import scaling.own\n",
        },
    )
    assert cycles(root) == [["scaling.own", "scaling.policies.tortoise", "scaling.settings"]]


def test_an_acyclic_tree_has_no_cycle(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"scaling/a.py": "from . import b\n", "scaling/b.py": "import scaling\n"})
    assert cycles(root) == []


def test_an_import_of_a_kinds_module_from_outside_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "edge/status.py": "from scaling.policies import tortoise\nfrom scaling.policies.registry import find\n",
            "scaling/policies/__init__.py": "from . import tortoise\n",
            "scaling/policies/registry.py": "",
            "scaling/policies/tortoise.py": "",
        },
    )
    assert kind_module_imports(root) == [
        "edge/status.py:1: edge.status imports the kind module scaling.policies.tortoise"
    ]


def test_a_private_import_is_caught_in_a_function_too_unless_allowed(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "scaling/recommend/hpa/horizontal.py": "from .arithmetic import _MAX_INT32, wrap\n",
            "scaling/recommend/hpa/arithmetic.py": "_MAX_INT32 = 1\ndef wrap(): pass\n",
            "analysis/report/page.py": "def f():\n    from analysis.report.charts import _strip\n",
            "analysis/report/charts.py": "from . import __doc__\n",
            "agents/fence/inspection.py": "from faust.streams import _current_event\n",
            "agents/app.py": "from faust.streams import _current_event\n",
        },
    )
    assert private_imports(root) == [
        "agents/app.py:1: agents.app imports _current_event from faust.streams",
        "analysis/report/page.py:2: analysis.report.page imports _strip from analysis.report.charts",
        "scaling/recommend/hpa/horizontal.py:1: scaling.recommend.hpa.horizontal imports _MAX_INT32 "
        "from scaling.recommend.hpa.arithmetic",
    ]


def test_a_kind_name_in_code_is_caught_but_not_in_a_docstring(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "edge/applier.py": (
                '"""Refuses what the Hvpa does not allow."""\n'
                "# a Tortoise has no minReplicas\n"
                "def f(kind, policy):\n"
                '    """Tortoise and CustomHpa alike."""\n'
                '    if kind == "Hvpa":\n'
                "        return 1\n"
                '    if policy.kind in ("Tortoise", "Other"):\n'
                "        return 2\n"
                '    names = {"CustomHpa": 3}\n'
                "    match kind:\n"
                '        case "Tortoise":\n'
                "            return 4\n"
                '    return f"no {kind!r}; expected Hvpa"\n'
            ),
            "scaling/policies/hvpa.py": 'kind = "Hvpa"\nok = kind == "Hvpa"\n',
        },
    )
    assert kind_name_uses(root) == [
        "edge/applier.py:5: policy kind 'Hvpa'",
        "edge/applier.py:7: policy kind 'Tortoise'",
        "edge/applier.py:9: policy kind 'CustomHpa'",
        "edge/applier.py:11: policy kind 'Tortoise'",
    ]
