"""The HPA controller's cluster-wide settings: kube-controller-manager's ``--horizontal-pod-autoscaler-*`` flags.

Upstream: ``cmd/kube-controller-manager/app/options/hpacontroller.go`` and
``pkg/controller/podautoscaler/config/types.go`` (defaults), plus the ``HPAConfigurableTolerance``
feature gate.  Parsed strictly from tandem's ``hpa:`` settings section, because a mistyped tuning
knob must not silently fall back to its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ...quantity import parse_duration
from ...spelling import closest

__all__ = ["HpaConfig"]


@dataclass(frozen=True)
class HpaConfig:
    """kube-controller-manager's HPA flags (reference 1.1), in seconds, with upstream defaults.

    ``configurable_tolerance`` is the ``HPAConfigurableTolerance`` feature gate (beta and on by
    default since Kubernetes 1.35, reference 1.4): when off, per-HPA ``behavior.*.tolerance`` is
    ignored, as the controller does.  ``sync_period`` is not used by :func:`recommend` itself (the
    caller decides when to tick) but belongs to the same ``hpa:`` settings section.
    """

    tolerance: float = 0.1
    downscale_stabilization: float = 300.0
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0
    sync_period: float = 15.0
    configurable_tolerance: bool = True

    def __post_init__(self) -> None:
        for name in (
            "tolerance",
            "downscale_stabilization",
            "cpu_initialization_period",
            "initial_readiness_delay",
            "sync_period",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"hpa.{name}: must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"hpa.{name}: must be >= 0, got {value!r}")
        if self.sync_period <= 0:
            raise ValueError(f"hpa.sync_period: must be > 0, got {self.sync_period!r}")
        if not isinstance(self.configurable_tolerance, bool):
            raise ValueError("hpa.configurable_tolerance: must be a boolean")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> HpaConfig:
        """Build from the ``hpa:`` section of tandem's YAML settings.

        Keys may be the upstream flag names (``horizontal-pod-autoscaler-tolerance``,
        ``horizontal-pod-autoscaler-downscale-stabilization``, ...), the component-config names
        (``horizontalPodAutoscalerTolerance``), or the short snake/camel names of this class
        (``tolerance``, ``downscale_stabilization``, ``cpuInitializationPeriod``...).  Durations are
        numbers of seconds or Go duration strings (``"5m0s"``).  An unknown key is a ``ValueError``
        naming it: a typo in a tuning knob must not silently fall back to the default.
        """
        if m is None:
            return cls()
        if not isinstance(m, Mapping):
            raise ValueError("hpa: must be a mapping")
        values: dict[str, Any] = {}
        seen_as: dict[str, str] = {}
        for key, raw in m.items():
            if not isinstance(key, str):
                raise ValueError(f"hpa: keys must be strings, got {key!r}")
            name = _CONFIG_ALIASES.get(_canonical_key(key))
            if name is None:
                raise ValueError(f"hpa.{key}: unknown setting{_suggest(key)}")
            if name in seen_as:
                raise ValueError(f"hpa.{key}: duplicates hpa.{seen_as[name]}")
            seen_as[name] = key
            try:
                if name == "configurable_tolerance":
                    if not isinstance(raw, bool):
                        raise ValueError("must be a boolean")
                    values[name] = raw
                elif name == "tolerance":
                    values[name] = _plain_float(raw)
                else:
                    values[name] = parse_duration(raw)
            except ValueError as exc:
                raise ValueError(f"hpa.{key}: {exc}") from None
        return cls(**values)


def _suggest(key: str) -> str:
    """`` (did you mean X?)`` in the spelling the user chose: the upstream flag or this class's name."""
    match = closest(_canonical_key(key), _CONFIG_ALIASES)
    if match is None:
        return ""
    name = _CONFIG_ALIASES[match]
    if key.startswith("horizontal-pod-autoscaler-") and name != "configurable_tolerance":
        return f" (did you mean horizontal-pod-autoscaler-{name.replace('_', '-')}?)"
    return f" (did you mean {name}?)"


def _canonical_key(key: str) -> str:
    k = key.replace("-", "").replace("_", "").lower()
    for prefix in ("horizontalpodautoscaler", "hpa"):
        if k.startswith(prefix) and k != "hpaconfigurabletolerance":
            k = k[len(prefix) :]
            break
    return k


_CONFIG_ALIASES = {
    "tolerance": "tolerance",
    "downscalestabilization": "downscale_stabilization",
    "downscalestabilizationwindow": "downscale_stabilization",
    "cpuinitializationperiod": "cpu_initialization_period",
    "initialreadinessdelay": "initial_readiness_delay",
    "syncperiod": "sync_period",
    "configurabletolerance": "configurable_tolerance",
    "hpaconfigurabletolerance": "configurable_tolerance",
}


def _plain_float(raw: object) -> float:
    if isinstance(raw, bool):
        raise ValueError("must be a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(Decimal(raw.strip()))
        except InvalidOperation:
            raise ValueError(f"{raw!r} is not a number") from None
    raise ValueError(f"must be a number, got {type(raw).__name__}")
