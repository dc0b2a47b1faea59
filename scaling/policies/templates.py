"""The HPA and VPA objects a policy would create, for tandem's own recommenders (``scaling.own``).

A policy declares them (:meth:`Policy.hpa_template`, :meth:`Policy.vpa_template`); ``scaling.own``
runs the upstream algorithms on them.  They live here, below both, so that neither imports the
other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..recommend.vpa import ContainerPolicy

__all__ = ["HpaTemplate", "VpaTemplate"]


@dataclass(frozen=True, slots=True)
class HpaTemplate:
    """What an HPA object the policy would create looks like (its metrics, behavior and bounds)."""

    metrics: tuple[Mapping[str, Any], ...]
    behavior: Mapping[str, Any] | None
    min_replicas: int
    max_replicas: int


@dataclass(frozen=True, slots=True)
class VpaTemplate:
    """The VPA object the policy would create: its container policies."""

    policies: Mapping[str, ContainerPolicy]
