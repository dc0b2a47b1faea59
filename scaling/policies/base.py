"""The policy interface and the helpers every manifest parser shares.

A policy is parsed once from its manifest into an immutable object; on each tick the reconcile
loop calls :meth:`Policy.decide` with a :class:`~scaling.outcome.View` and the policy's own
*memory*: a small JSON-safe ``dict`` that lives in the workload state (and so in a Faust table)
and holds what the upstream controller keeps in its status or in process memory (HVPA's
``lastScaleTime``, Nanit's cooldown timestamps, Tortoise's phase...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from ..outcome import Outcome, View
from ..quantity import parse_duration, parse_quantity
from .bounds import Bounds
from .templates import HpaTemplate, VpaTemplate

__all__ = [
    "Policy",
    "duration_field",
    "get_path",
    "int_field",
    "mapping_field",
    "quantity_field",
]


class Policy(Protocol):
    """A parsed policy: everything code outside ``scaling.policies`` may ask of one.

    Outer code (the reconcile loop, the own recommenders, the applier, the report, the simulator)
    never branches on ``kind`` nor reads a kind's spec: what it needs is declared here, so a new
    kind is one module and one :func:`~scaling.policies.registry.register` call.
    """

    @property
    def kind(self) -> str:
        """The manifest's ``kind`` (the registry's :attr:`PolicyKind.kind`)."""
        ...

    @property
    def name(self) -> str:
        """The manifest's ``metadata.name``."""
        ...

    @property
    def workload(self) -> WorkloadRef:
        """The workload the policy scales."""
        ...

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        """Return what should change at ``view.tick``; may update ``memory`` (JSON-safe values only).

        The caller changes nothing in the outcome but its own note (``Outcome.reported``): a policy
        may hand the same one back for a tick whose inputs repeat the previous one's (HVPA does)."""
        ...

    def bounds(self) -> Bounds:
        """What any decision for this policy must stay within (the applier refuses the rest)."""
        ...

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA the policy would create by now (``memory`` as :meth:`decide` gets it), for
        tandem's own HPA recommender when no cluster sends ``hpa`` events; ``None`` for none."""
        ...

    def vpa_template(self) -> VpaTemplate | None:
        """The VPA the policy would create, for tandem's own VPA recommender; ``None`` for none."""
        ...


#: Upstream's integer fields are int32 (replica counts, percentages, weights): the only upper bound
#: they have, so the only one tandem applies (issue #12: never stricter than upstream).
MAX_INT32 = 2**31 - 1


def get_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def mapping_field(obj: Mapping[str, Any], path: str, *, required: bool = False) -> Mapping[str, Any]:
    value = get_path(obj, path)
    if value is None:
        if required:
            raise InvalidPolicy(path, "required object is missing")
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicy(path, f"expected an object, got {type(value).__name__}")
    return value


def int_field(
    obj: Mapping[str, Any], path: str, default: int | None = None, *, minimum: int = 0, maximum: int = MAX_INT32
) -> int | None:
    value = get_path(obj, path)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy(path, f"expected an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise InvalidPolicy(path, f"{value} is outside {minimum}..{maximum}")
    return value


def duration_field(obj: Mapping[str, Any], path: str, default: float = 0.0) -> float:
    value = get_path(obj, path)
    if value is None:
        return default
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidPolicy(path, str(exc)) from None


def quantity_field(obj: Mapping[str, Any], path: str) -> int | None:
    value = get_path(obj, path)
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except ValueError as exc:
        raise InvalidPolicy(path, str(exc)) from None
