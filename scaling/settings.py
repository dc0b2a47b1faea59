"""tandem's settings (the ``--config`` YAML file, docs/contract.md §5), validated once.

The core receives them as a frozen :class:`Settings`; sections owned by a component (``hpa:``,
``vpa:``, and each policy kind's own, named by its registry descriptor: ``tortoise:``) stay raw
mappings here and are validated by that component with the upstream names and defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidPolicy
from .policies.registry import settings_sections
from .recommend.hpa import HpaConfig
from .recommend.vpa import VpaConfig
from .spelling import did_you_mean

__all__ = ["Settings"]

#: The sections of tandem's own recommenders; the policy kinds add theirs (``settings_sections``).
_RECOMMENDERS = ("hpa", "vpa")


def _top() -> tuple[str, ...]:
    """Every top-level key, the registered kinds' sections included (read at each call: a kind may
    register after this module is imported)."""
    return ("sync_period", "cluster", *_RECOMMENDERS, *settings_sections())


@dataclass(frozen=True, slots=True)
class Settings:
    #: Reconcile ticks fall on every multiple of this many seconds of event time (section 6).
    sync_period: float = 15.0
    #: Cluster of policy manifests without a ``tandem.dev/cluster`` annotation.
    cluster: str = "default"
    hpa: Mapping[str, Any] = field(default_factory=dict)
    vpa: Mapping[str, Any] = field(default_factory=dict)
    #: Each policy kind's own section, by its name (``tortoise``), as given (validated by the kind).
    policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The ``hpa:`` and ``vpa:`` sections, validated with upstream names and defaults.
    hpa_config: HpaConfig = field(default_factory=HpaConfig)
    vpa_config: VpaConfig = field(default_factory=VpaConfig)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, **overrides: Any) -> Settings:
        if raw is not None and not isinstance(raw, Mapping):
            raise InvalidPolicy("", f"settings must be a mapping, got {type(raw).__name__}")
        raw = dict(raw or {})
        top = _top()
        for key in raw:
            if key not in top:
                raise InvalidPolicy(
                    str(key), f"unknown setting{did_you_mean(str(key), top)}; expected one of {', '.join(top)}"
                )
        raw.update({k: v for k, v in overrides.items() if v is not None})
        period = raw.get("sync_period", 15.0)
        if isinstance(period, bool) or not isinstance(period, int | float) or not math.isfinite(period) or period <= 0:
            raise InvalidPolicy("sync_period", f"expected a number of seconds > 0, got {period!r}")
        sections: dict[str, Mapping[str, Any]] = {}
        owners = settings_sections()
        for name in (*_RECOMMENDERS, *owners):
            value = raw.get(name) or {}
            if not isinstance(value, Mapping):
                raise InvalidPolicy(name, "expected a mapping of settings")
            sections[name] = value
        cluster = raw.get("cluster", "default")
        if not isinstance(cluster, str) or not cluster or "/" in cluster:
            raise InvalidPolicy("cluster", f"{cluster!r} is not a cluster name")
        try:
            hpa_config = HpaConfig.from_mapping(sections["hpa"])
        except InvalidPolicy:
            raise
        except ValueError as exc:
            where, _, why = str(exc).partition(": ")
            raise InvalidPolicy(where, why or where) from None
        vpa_config = VpaConfig.from_mapping(sections["vpa"])
        # A policy kind's own section (Tortoise's cluster-admin keys): validated now, by the kind,
        # so a bad key is a settings error at start-up
        for name, kind in owners.items():
            if kind.validate_settings is not None:
                kind.validate_settings(sections[name])
        policies = {name: sections[name] for name in owners}
        return cls(float(period), cluster, sections["hpa"], sections["vpa"], policies, hpa_config, vpa_config)

    def view(self) -> dict[str, Any]:
        """What a policy's ``View.settings`` holds: the period, the recommenders' sections and
        every registered kind's own (empty when the file has none)."""
        out: dict[str, Any] = {"sync_period": self.sync_period, "hpa": self.hpa, "vpa": self.vpa}
        for name in settings_sections():
            out[name] = self.policies.get(name) or {}
        return out
