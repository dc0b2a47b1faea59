"""The policy kinds tandem knows: one descriptor per kind and API group (docs/contract.md §5).

Each built-in kind registers itself when its module is imported (``scaling.policies`` imports them
all); a new kind is one module that builds a :class:`PolicyKind` and calls :func:`register`.
Everything outside ``scaling.policies`` that depends on the kinds asks here: the parser
(:func:`scaling.policies.parse_policy`), the collector's watch and the applier's read (the CRD of
:attr:`PolicyKind.plural` in :attr:`PolicyKind.group`), the settings (a kind's own section).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from .base import Policy

__all__ = ["PolicyKind", "kind_names", "kinds", "lookup", "register", "unregister"]


@dataclass(frozen=True, slots=True)
class PolicyKind:
    """One policy kind in one API group: how to parse its manifests and where its CRD lives."""

    kind: str
    #: The API group; a manifest's ``apiVersion`` is ``<group>/<version>``.
    group: str
    #: The CRD's served versions, the one the collector and the applier read first.
    versions: tuple[str, ...]
    #: The CRD's resource name (``kubectl get <plural>``).
    plural: str
    #: Parse a manifest whose kind, group, ``metadata``, ``spec`` and target are already checked.
    parse: Callable[[Mapping[str, Any], WorkloadRef], Policy]
    #: The section of the settings file this kind reads (``tortoise:``), if any, and its validator:
    #: it raises :class:`InvalidPolicy` for a bad key, so a bad setting fails at start-up.
    settings_section: str | None = None
    validate_settings: Callable[[Mapping[str, Any]], object] | None = None

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` the CRD is read with (its first served version)."""
        return f"{self.group}/{self.versions[0]}"

    def accepts(self, api_version: object) -> bool:
        """Whether ``api_version`` is in this kind's group (any version is parsed alike)."""
        return isinstance(api_version, str) and api_version.startswith(self.group + "/")


_KINDS: list[PolicyKind] = []


def register(kind: PolicyKind) -> PolicyKind:
    """Add ``kind``; a second descriptor for the same kind and group is a programming error."""
    for known in _KINDS:
        if (known.kind, known.group) == (kind.kind, kind.group):
            raise ValueError(f"policy kind {kind.kind} in group {kind.group} is already registered")
    _KINDS.append(kind)
    return kind


def unregister(kind: PolicyKind) -> None:
    """Remove ``kind`` (tests that register a kind of their own)."""
    _KINDS.remove(kind)


def kinds() -> tuple[PolicyKind, ...]:
    """Every registered descriptor, in registration order."""
    return tuple(_KINDS)


def kind_names() -> list[str]:
    """The registered kind names, each once, in registration order."""
    return list(dict.fromkeys(k.kind for k in _KINDS))


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def lookup(api_version: object, kind: object) -> PolicyKind:
    """The descriptor for a manifest's ``apiVersion`` and ``kind``, or :class:`InvalidPolicy`
    naming the field: ``kind`` when no such kind is registered (the message lists those that
    are), ``apiVersion`` when the kind is known but not in that group."""
    same = [k for k in _KINDS if k.kind == kind]
    if not same:
        raise InvalidPolicy("kind", f"unknown policy kind {kind!r}; expected {_either(kind_names())}")
    for k in same:
        if k.accepts(api_version):
            return k
    groups = ", ".join(k.group + "/" for k in same)
    raise InvalidPolicy("apiVersion", f"{api_version!r} is not an API version of {kind} ({groups}...)")
