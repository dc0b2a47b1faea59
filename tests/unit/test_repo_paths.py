"""Every repository path named in the docs, the examples and code comments exists (issue 35).

Paths into a ``seeds`` directory once pointed at files this repository never had;
an upstream document is cited by its title and URL instead.  A *path* here is a relative name with
a ``/`` that ends in a file extension, or a directory of two parts or more (``docs/edge.md``,
``scaling/policies/``), not followed by a placeholder (``eu-1/<namespace>``), found in Markdown, in
the YAML and JSON of ``examples/``, ``schemas/`` and ``docs/``, and in Python comments and docstrings
(Helm templates are Go templates: ``%s/%s`` is no path).  It must name a tracked file
or directory, from the repository's root or as the tail of one (``tortoise/phases.py`` inside
``scaling/policies/``), unless it is a placeholder (``DIR/index.html``), an API group
(``autoscaling.k8s.io/``) or a path inside an upstream project listed in :data:`UPSTREAM`, which
the text beside it names.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A path-like token: not preceded by a character that would make it part of a longer name or a URL.
_PATH = re.compile(r"(?<![\w./:@~$%-])((?:\.\.?/)?[A-Za-z_][\w.-]*/(?:[\w.-]+/)*[\w.-]*)(?![<{*$])")
_FILE = re.compile(r"\.(md|py|ya?ml|json|jsonl|gz|sh|toml|txt|png|html|cfg|ini)$")

#: Paths inside upstream projects (cited with the project beside them), by their first part:
#: aiokafka's and the kubernetes client's modules, Kubernetes' and the VPA's Go packages,
#: the VPA recommender's ``util/``, hvpa-controller's ``config/samples/`` and Tortoise's test data
#: (``before/``, ``after/``).
UPSTREAM = (
    "aiokafka/",
    "kubernetes/",
    "pkg/",
    "vertical-pod-autoscaler/",
    "util/",
    "config/samples/",
    "before/",
    "after/",
)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _texts(path: str) -> list[tuple[int, str]]:
    """(line, text) of what is prose in ``path``: all of a document, comments and docstrings of code."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if not path.endswith(".py"):
        return list(enumerate(text.splitlines(), 1))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (
            tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        ):
            out.append((tok.start[0], tok.string))
    return out


def _documents(tracked: list[str]) -> list[str]:
    # CHANGELOG.md is history: it may name what was removed.
    return [
        p
        for p in tracked
        if (ROOT / p).is_file()
        and p != "CHANGELOG.md"
        and (
            p.endswith((".py", ".md"))
            or (p.endswith((".yaml", ".yml", ".json")) and p.startswith(("examples/", "schemas/", "docs/")))
        )
    ]


def _known(token: str, tracked: set[str], tails: set[str]) -> bool:
    bare = token.removeprefix("./").rstrip("/")
    if bare in tracked or (ROOT / bare).exists() or bare in tails:
        return True
    first = token.split("/", 1)[0]
    return first.isupper() or "." in first or token.startswith(UPSTREAM)


def test_every_repository_path_named_in_docs_examples_and_comments_exists() -> None:
    tracked = _tracked()
    names = set(tracked) | {str(Path(p).parent) for p in tracked}
    # Every tail of every tracked path (file or directory), for paths named relative to a package.
    tails = {"/".join(parts[i:]) for n in names for parts in [n.split("/")] for i in range(len(parts))}
    missing = []
    for path in _documents(tracked):
        for lineno, text in _texts(path):
            for m in _PATH.finditer(text):
                token = m.group(1).rstrip(".,;:")
                is_dir = token.endswith("/") and token.count("/") >= 2  # one part alone is too often a word
                if (_FILE.search(token) or is_dir) and not _known(token, names, tails):
                    missing.append(f"{path}:{lineno}: {token}")
    assert missing == []


def test_the_check_finds_a_path_that_is_not_there() -> None:
    tracked = _tracked()
    names = set(tracked)
    assert not _known("docs/no-such-page.md", names, set())
    assert _known("docs/edge.md", names, set())
