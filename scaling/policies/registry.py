"""The policy kinds tandem knows: one descriptor per kind and API group (docs/contract.md §5).

Each built-in kind registers itself when its module is imported (``scaling.policies`` imports them
all); a new kind is one module that builds a :class:`PolicyKind` and calls :func:`register`.
Everything outside ``scaling.policies`` that depends on the kinds asks here, never by a kind's
name: the parser (:func:`scaling.policies.parse_policy`: the fields, the target's and the HPA
template's places), the collector's watch and the applier's read (the CRD of
:attr:`PolicyKind.plural` in :attr:`PolicyKind.group`), the CRD and RBAC generators
(``schemas/generate.py``), the settings (a kind's own section, validated at start-up, shown to its
policies in ``View.settings``) and the applier's status writer (the kind's :class:`StatusShape`).
A new part of a kind's contract is one more field here with a default that keeps the other kinds
as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from .base import Policy
from .fields import Obj
from .status import StatusShape

__all__ = [
    "PolicyKind",
    "find",
    "kind_names",
    "kinds",
    "lookup",
    "register",
    "replica_learner",
    "settings_sections",
    "unregister",
]


@dataclass(frozen=True, slots=True)
class PolicyKind:
    """One policy kind in one API group: everything outer code needs to know of it."""

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
    #: Every field of its ``spec`` (``scaling.policies.fields``): the unknown-field check, the
    #: policy schema and the CRD's schema.  ``None`` (a test's toy kind): not checked, no schema.
    fields: Obj | None = field(default=None, compare=False)  # a tree of dicts: no hash
    #: Where in ``spec`` a manifest names its scale target (an object with ``kind`` and ``name``),
    #: the first present one wins (:func:`scaling.policies.policy_target`).
    target_paths: tuple[str, ...] = ("targetRef",)
    #: An object of ``spec`` naming the target as ``{deployment, namespace}`` (Nanit's form), tried
    #: after :attr:`target_paths`.
    deployment_target: str | None = None
    #: Where the manifest keeps the HPA the policy would create (an error in its metrics or
    #: behavior names the first present one; ``spec`` when none is) ...
    hpa_places: tuple[str, ...] = ()
    #: ... and the HPA behavior when the kind keeps it outside that template.
    hpa_behavior_place: str | None = None
    #: How the applier writes the kind's ``status`` in its upstream's shape; ``None``: no status
    #: (and no RBAC rule for the ``status`` subresource).
    status: StatusShape | None = None
    #: How the kind takes the past replicas a history envelope taught (docs/contract.md §3,
    #: ``history``): ``learn_replicas(memory, peaks, settings)`` folds ``peaks`` (each ``(slot
    #: start, peak replicas)``, oldest first, 15-minute slots) into the policy's memory, with the
    #: settings a view shows; ``None``: the kind keeps no replica history of its own.
    learn_replicas: Callable[[dict[str, Any], Sequence[tuple[float, int]], Mapping[str, Any]], None] | None = None

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` the CRD is read with (its first served version)."""
        return f"{self.group}/{self.versions[0]}"

    @property
    def resource(self) -> str:
        """The CRD's name (``<plural>.<group>``)."""
        return f"{self.plural}.{self.group}"

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


def settings_sections() -> dict[str, PolicyKind]:
    """The settings sections the registered kinds read, each with the kind that reads it."""
    return {k.settings_section: k for k in _KINDS if k.settings_section is not None}


def replica_learner(
    kind: str,
) -> Callable[[dict[str, Any], Sequence[tuple[float, int]], Mapping[str, Any]], None] | None:
    """The :attr:`PolicyKind.learn_replicas` of the kind named ``kind`` (a policy's ``kind``), or ``None``."""
    return next((k.learn_replicas for k in _KINDS if k.kind == kind and k.learn_replicas is not None), None)


def find(api_version: object, kind: object) -> PolicyKind | None:
    """The descriptor of an object's ``apiVersion`` and ``kind``, or ``None``."""
    return next((k for k in _KINDS if k.kind == kind and k.accepts(api_version)), None)


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
