"""Tortoise (mercari/tortoise, ``autoscaling.mercari.com/v1beta3``) on tandem's decision core.

What Tortoise's controller keeps in the Tortoise status lives in the policy *memory* (phase,
per-resource phases, the replica history, the sticky VPA maximum, condition timestamps); what it
writes to the HPA and, through its pod webhook, to the pods comes back as an :class:`Outcome`
(``hpa`` min/max/target utilization, container requests and limits).  ``updateMode: Off`` (and
Tortoise's "effectively Off": ``GlobalDisableMode``, ``ExcludedNamespaces``) is a dry run.

The algorithms follow Tortoise's code (see docs/tortoise.md,
numbers in comments), except the min/max replica history, which follows the seed's four-week
rule (``scaling.policies.tortoise.history``).  Every other choice where tandem differs, or where Tortoise's
behaviour had to be mapped onto tandem's event-time model, is listed in ``docs/tortoise.md``.
Arithmetic that Tortoise does in float64 (buffers, ratios, ``ceil``/``trunc``) is done on Python
floats, which are the same IEEE doubles, so the results land on the same milli-units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..fields import TORTOISE_SPEC
from ..registry import PolicyKind, register
from .history import learn_replicas
from .hpa import DEFAULT_HPA_BEHAVIOR, NEW_METRIC_TARGET
from .policy import TortoisePolicy, parse_tortoise
from .settings import FEATURE_PREFERRED_MAX, FEATURES, TortoiseSettings
from .spec import API_VERSION, AUTOSCALING_TYPES, PHASES, RESOURCES, UPDATE_MODES, ContainerBounds, TortoiseSpec
from .status import STATUS
from .tick import HpaState

__all__ = [
    "API_VERSION",
    "AUTOSCALING_TYPES",
    "DEFAULT_HPA_BEHAVIOR",
    "FEATURES",
    "FEATURE_PREFERRED_MAX",
    "NEW_METRIC_TARGET",
    "PHASES",
    "RESOURCES",
    "UPDATE_MODES",
    "ContainerBounds",
    "HpaState",
    "TortoisePolicy",
    "TortoiseSettings",
    "TortoiseSpec",
    "parse_tortoise",
]


def _learn_replicas(memory: dict[str, Any], peaks: Sequence[tuple[float, int]], settings: Mapping[str, Any]) -> None:
    """The replica history's part of a history envelope, in the admin's ``TimeZone`` and slot width."""
    st = TortoiseSettings.from_mapping(settings.get("tortoise"))
    learn_replicas(memory, peaks, st.timezone, st.slot_hours)


KIND = register(
    PolicyKind(
        "Tortoise",
        "autoscaling.mercari.com",
        ("v1beta3",),
        "tortoises",
        parse_tortoise,
        settings_section="tortoise",
        validate_settings=TortoiseSettings.from_mapping,
        fields=TORTOISE_SPEC,
        target_paths=("targetRefs.scaleTargetRef",),
        hpa_behavior_place="spec.horizontalPodAutoscalerBehavior",
        status=STATUS,
        learn_replicas=_learn_replicas,
    )
)
