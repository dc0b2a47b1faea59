"""Gardener HVPA: the weight-based line (the released API and the seed proposal's form) and,
in :mod:`.v2` and :mod:`.v2_spec`, line B's scale intervals (``autoscaling.gardener.cloud``).

Two manifests map onto one :class:`HvpaSpec`:

* the **released** API (``autoscaling.k8s.io/v1alpha1`` with ``hpa``/``vpa`` blocks, integer
  ``vpaWeight`` 0-100) follows the released controller (hvpa-controller v0.17.0, ``master``;
  reference ``hvpa.md`` section 2), quirks included;
* the **seed** form (``hpaTemplate``/``vpaTemplate``, fractional ``vpaWeight`` 0-1, stage fields,
  ``minCpuChange``...) follows Gardener's "HVPA controller" proposal
  (https://github.com/gardener/hvpa-controller/blob/master/Proposal.md) and adds its modes
  (HPA-preferred, HPA-biased, VPA-biased, mixed).

Every place where the two differ is listed in ``docs/hvpa.md``.  Weights are kept as exact
``Fraction`` of 1 so that ``ceil``/``floor``/``trunc`` land where Go's integer and float64 maths do.
"""

from __future__ import annotations

from ..fields import HVPA_SPEC
from ..registry import PolicyKind, register
from .policy import HvpaPolicy, hvpa_bounds, parse_hvpa_policy
from .rules import min_change_threshold, scaled_limit, vpa_usable, vpa_weight
from .spec import (
    MODES,
    Change,
    ContainerPolicy,
    HvpaSpec,
    Interval,
    MixedThresholds,
    ScaleType,
    Window,
    find_container_policy,
    parse_hvpa,
)
from .status import RELEASED

__all__ = [
    "MODES",
    "Change",
    "ContainerPolicy",
    "HvpaPolicy",
    "HvpaSpec",
    "Interval",
    "MixedThresholds",
    "ScaleType",
    "Window",
    "find_container_policy",
    "hvpa_bounds",
    "min_change_threshold",
    "parse_hvpa",
    "scaled_limit",
    "vpa_usable",
    "vpa_weight",
]

KIND = register(
    PolicyKind(
        "Hvpa",
        "autoscaling.k8s.io",
        ("v1alpha1",),
        "hvpas",
        parse_hvpa_policy,
        fields=HVPA_SPEC,
        # the released API's targetRef, then the seed form's places
        target_paths=("targetRef", "scaleTargetRef", "hpaTemplate.scaleTargetRef", "hpaSpec.scaleTargetRef"),
        hpa_places=("spec.hpa.template.spec", "spec.hpaTemplate", "spec.hpaSpec"),
        status=RELEASED,
    )
)

# Line B registers after line A (its own API group): the order of ``registry.kinds()``.
from . import v2  # noqa: E402, F401
