"""Tortoise's cluster-admin settings (``pkg/config/config.go``, reference 1.4): the ``tortoise:``
section of tandem's settings file, validated once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from ...errors import InvalidPolicy
from ...quantity import parse_duration, parse_quantity
from ...spelling import did_you_mean
from .history import PERIODS, ReplicaHistory

__all__ = ["FEATURES", "FEATURE_PREFERRED_MAX", "TortoiseSettings", "go_regexp"]

#: RE2 without its C++ log: a refused pattern is our one error line, not also two lines of absl
#: logging on stderr.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
#: Compiled patterns by text: the settings hold one, used at every tick of every Tortoise.
_COMPILED: dict[str, Any] = {}


def go_regexp(pattern: str) -> Any:
    """``pattern`` compiled as Tortoise compiles it: Go's ``regexp.MustCompile``, RE2 syntax.

    Go's regexp package is RE2 ("The syntax of the regular expressions accepted is the same
    general syntax used by Perl, Python, and other languages. More precisely, it is the syntax
    accepted by RE2", https://pkg.go.dev/regexp), so Python's ``re`` reads some patterns another
    way: ``[[:alpha:]]+`` is a POSIX class in RE2 but a set of ``[:alph`` plus ``]+`` in ``re``
    (with a ``FutureWarning`` printed with a source line), and ``re`` accepts lookarounds and
    backreferences that Go refuses.  google-re2 (``re2``, a C++ extension) gives RE2's own parser
    and matcher; it is imported here in the core because the rule is the core's, and a C extension
    is only called by mypyc's compiled code, as ``math`` is.  Raises ``re2.error``.
    """
    rx = _COMPILED.get(pattern)
    if rx is None:
        rx = _COMPILED[pattern] = re2.compile(pattern, _RE2_OPTIONS)
    return rx


FEATURE_PREFERRED_MAX = "VerticalScalingBasedOnPreferredMaxReplicas"
FEATURES = (FEATURE_PREFERRED_MAX, "GoMemLimitModificationEnabled")


@dataclass(frozen=True, slots=True)
class TortoiseSettings:
    """Tortoise's config file (``pkg/config/config.go``): the ``tortoise:`` section of tandem's settings."""

    slot_hours: int = 1
    period: str = "weekly"
    max_multiplier: float = 2.0
    min_multiplier: float = 0.5
    reduction_factor: float = 0.95
    max_target: int = 90
    min_target: int = 65
    minimum_min_replicas: int = 3
    maximum_min_replicas: int = 10
    preferred_max_replicas: int = 30
    maximum_max_replicas: int = 100
    max_request: Mapping[str, int] = field(default_factory=lambda: {"cpu": 10_000, "memory": 10 * 2**30 * 1000})
    min_request: Mapping[str, int] = field(default_factory=lambda: {"cpu": 50, "memory": 50 * 2**20 * 1000})
    min_request_per_container: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    buffer_ratio: float = 0.1
    minimum_cpu_limit: int = 0
    limit_multiplier: Mapping[str, int] = field(default_factory=dict)
    max_scale_down_ratio: float = 0.8
    timezone: str = "Asia/Tokyo"
    update_interval: float = 15.0
    target_max_increase: int = 5
    target_update_interval: float = 86_400.0
    external_exclusion: str = ""
    grace_period: float = 300.0
    features: frozenset[str] = frozenset()
    global_disable: bool = False
    excluded_namespaces: frozenset[str] = frozenset()

    @property
    def gathering_seconds(self) -> float:
        return 86_400.0 if self.period == "daily" else 7 * 86_400.0

    def global_min(self, container: str, resource: str) -> int:
        per = self.min_request_per_container.get(container)
        if per is not None and resource in per:
            return per[resource]
        return self.min_request.get(resource, 0)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> TortoiseSettings:
        """Validate the ``tortoise:`` settings; :class:`InvalidPolicy` names ``tortoise.<Key>``."""
        raw = _known_keys(raw)
        d = cls()
        width = _slot_hours(raw, d)
        period = raw.get("GatheringDataPeriodType", d.period)
        if period not in PERIODS:
            raise InvalidPolicy("tortoise.GatheringDataPeriodType", f"{period!r} is not weekly or daily")
        tz = _timezone(raw, d, width)
        max_req = {
            "cpu": _qty_setting(raw, "MaximumCPURequest", "10"),
            "memory": _qty_setting(raw, "MaximumMemoryRequest", "10Gi"),
        }
        min_req = {
            "cpu": _qty_setting(raw, "MinimumCPURequest", "50m"),
            "memory": _qty_setting(raw, "MinimumMemoryRequest", "50Mi"),
        }
        per_container = _per_container_minimums(raw)
        limit_mult = _limit_multipliers(raw)
        flags = _feature_flags(raw)
        excluded = raw.get("ExcludedNamespaces") or []
        if not isinstance(excluded, list) or not all(isinstance(n, str) for n in excluded):
            raise InvalidPolicy("tortoise.ExcludedNamespaces", "expected a list of namespace names")
        disable = raw.get("GlobalDisableMode", False)
        if not isinstance(disable, bool):
            raise InvalidPolicy("tortoise.GlobalDisableMode", f"expected true or false, got {disable!r}")
        regex = _exclusion_regex(raw)
        _check_unused(raw)
        s = cls(
            slot_hours=width,
            period=str(period),
            max_multiplier=_float_setting(
                raw, "MaxReplicasRecommendationMultiplier", d.max_multiplier, 0.0, math.inf, _NEGATIVE
            ),
            min_multiplier=_float_setting(
                raw, "MinReplicasRecommendationMultiplier", d.min_multiplier, 0.0, math.inf, _NEGATIVE
            ),
            reduction_factor=_float_setting(raw, "ReplicaReductionFactor", d.reduction_factor, 0.0, 1.0, _REDUCTION),
            max_target=_int_setting(raw, "MaximumTargetResourceUtilization", d.max_target, 1, 100, _TARGET),
            min_target=_int_setting(raw, "MinimumTargetResourceUtilization", d.min_target, 1, 100, _TARGET),
            minimum_min_replicas=_int_setting(
                raw, "MinimumMinReplicas", d.minimum_min_replicas, 0, INT32_MAX, _REPLICAS
            ),
            maximum_min_replicas=_int_setting(
                raw, "MaximumMinReplicas", d.maximum_min_replicas, 1, INT32_MAX, _REPLICAS
            ),
            preferred_max_replicas=_int_setting(
                raw, "PreferredMaxReplicas", d.preferred_max_replicas, 1, INT32_MAX, _REPLICAS
            ),
            maximum_max_replicas=_int_setting(
                raw, "MaximumMaxReplicas", d.maximum_max_replicas, 1, INT32_MAX, _REPLICAS
            ),
            max_request=max_req,
            min_request=min_req,
            min_request_per_container=per_container,
            buffer_ratio=_float_setting(raw, "BufferRatioOnVerticalResource", d.buffer_ratio, 0.0, math.inf, _BUFFER),
            minimum_cpu_limit=_qty_setting(raw, "MinimumCPULimit", "0"),
            limit_multiplier=limit_mult,
            max_scale_down_ratio=_float_setting(raw, "MaxAllowedScalingDownRatio", d.max_scale_down_ratio, 0.0, 1.0),
            timezone=str(tz),
            update_interval=_duration_setting(raw, "TortoiseUpdateInterval", d.update_interval),
            target_max_increase=_int_setting(raw, "HPATargetUtilizationMaxIncrease", d.target_max_increase, 1, 100),
            target_update_interval=_duration_setting(
                raw, "HPATargetUtilizationUpdateInterval", d.target_update_interval
            ),
            external_exclusion=regex,
            grace_period=_duration_setting(raw, "EmergencyModeGracePeriod", d.grace_period),
            features=frozenset(flags),
            global_disable=disable,
            excluded_namespaces=frozenset(excluded),
        )
        _validate(s)
        return s


def _known_keys(raw: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The section as a mapping whose every key is a Tortoise setting (did-you-mean otherwise)."""
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise InvalidPolicy("tortoise", "expected a mapping of Tortoise settings")
    for key in raw:
        if key not in _SETTING_KEYS:
            hint = did_you_mean(str(key), _SETTING_KEYS)
            raise InvalidPolicy(f"tortoise.{key}", "unknown Tortoise setting" + hint)
    return raw


def _slot_hours(raw: Mapping[str, Any], d: TortoiseSettings) -> int:
    width = _int_setting(raw, "RangeOfMinMaxReplicasRecommendationHours", d.slot_hours, 1, 24)
    if 24 % width:
        # Tortoise's config accepts it, but initializeMinMaxReplicas (pkg/tortoise/tortoise.go)
        # then steps its slots past hour 24 and never leaves its loop.
        raise InvalidPolicy(
            "tortoise.RangeOfMinMaxReplicasRecommendationHours",
            f"{width} does not divide 24: the day must split into equal slots (Tortoise accepts it, "
            "but its slot loop never reaches hour 24 and the controller hangs)",
        )
    return width


def _timezone(raw: Mapping[str, Any], d: TortoiseSettings, width: int) -> str:
    tz = raw.get("TimeZone", d.timezone)
    if not isinstance(tz, str):  # config.go: TimeZone string
        raise InvalidPolicy("tortoise.TimeZone", f"expected a time zone name, got {type(tz).__name__}")
    try:
        ReplicaHistory(str(tz), width)
    except ValueError as exc:
        raise InvalidPolicy("tortoise.TimeZone", str(exc)) from None
    except OSError:  # "Europe": a directory of the tz database, not a zone (found by fuzzing)
        raise InvalidPolicy("tortoise.TimeZone", f"{tz!r} is not an IANA time zone name") from None
    return tz


def _per_container_minimums(raw: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """MinimumCPURequestPerContainer and MinimumMemoryRequestPerContainer, by container."""
    per_container: dict[str, dict[str, int]] = {}
    for key, res in (("MinimumCPURequestPerContainer", "cpu"), ("MinimumMemoryRequestPerContainer", "memory")):
        values = raw.get(key) or {}
        if not isinstance(values, Mapping):
            raise InvalidPolicy(f"tortoise.{key}", "expected a mapping of container name to quantity")
        for cname, q in values.items():
            try:
                per_container.setdefault(str(cname), {})[res] = parse_quantity(q)
            except ValueError as exc:
                raise InvalidPolicy(f"tortoise.{key}.{cname}", str(exc)) from None
    return per_container


def _limit_multipliers(raw: Mapping[str, Any]) -> dict[str, int]:
    multipliers = raw.get("ResourceLimitMultiplier") or {}
    if not isinstance(multipliers, Mapping):
        raise InvalidPolicy("tortoise.ResourceLimitMultiplier", "expected a mapping of resource to integer")
    limit_mult: dict[str, int] = {}
    for res, m in multipliers.items():
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InvalidPolicy(f"tortoise.ResourceLimitMultiplier.{res}", f"expected an integer >= 1, got {m!r}")
        limit_mult[str(res)] = m
    return limit_mult


def _feature_flags(raw: Mapping[str, Any]) -> list[Any]:
    flags = raw.get("FeatureFlags") or []
    if not isinstance(flags, list):
        raise InvalidPolicy("tortoise.FeatureFlags", f"expected a list of {', '.join(FEATURES)}")
    for flag in flags:
        if flag not in FEATURES:
            # Tortoise ignores a flag it does not know: a misspelled flag is silently off.
            raise InvalidPolicy(
                "tortoise.FeatureFlags",
                f"unknown feature flag {flag!r}{did_you_mean(str(flag), FEATURES)} (Tortoise would ignore it "
                f"and leave the feature off; known: {', '.join(FEATURES)})",
            )
    return flags


def _exclusion_regex(raw: Mapping[str, Any]) -> str:
    """HPAExternalMetricExclusionRegex as Tortoise would read it, checked to be a Go (RE2) regexp."""
    regex = raw.get("HPAExternalMetricExclusionRegex")
    if regex is None:  # unset, or null (Tortoise's zero value): no external metric is excluded
        regex = ""
    elif isinstance(regex, int) and not isinstance(regex, bool):
        # Tortoise reads its config with gopkg.in/yaml.v3, which puts any scalar's literal text
        # into a string field: `5` is the regex "5" there too (never stricter than upstream).
        regex = str(regex)
    elif not isinstance(regex, str):
        # A float or a boolean: yaml.v3 would keep its literal text (`1.50`, `yes`), which
        # tandem's YAML reader does not keep, so it cannot know the regex Tortoise would use;
        # a list or a mapping Tortoise refuses too.  str() would make up a text.
        scalar = isinstance(regex, float | bool)
        raise InvalidPolicy(
            "tortoise.HPAExternalMetricExclusionRegex",
            f"expected a regular expression (a string), got {type(regex).__name__} {regex!r}"
            + (" (quote it: Tortoise would take its literal text, which tandem cannot see)" if scalar else ""),
        )
    try:
        go_regexp(regex)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidPolicy(
            "tortoise.HPAExternalMetricExclusionRegex", f"not a Go (RE2) regular expression: {why}"
        ) from None
    return regex


def _check_unused(raw: Mapping[str, Any]) -> None:
    """The settings tandem accepts but does not use, checked all the same."""
    for key in ("DefaultHPABehavior",):
        if raw.get(key) is not None and not isinstance(raw[key], Mapping):
            raise InvalidPolicy(f"tortoise.{key}", "expected an HPA behavior object")
    for key in ("IstioSidecarProxyDefaultCPU", "IstioSidecarProxyDefaultMemory"):
        if raw.get(key) is not None:
            _qty_setting(raw, key, "0")


def _validate(s: TortoiseSettings) -> None:
    """What Tortoise validates at start-up (config.go ``validate``, reference 1.4)."""
    if not s.minimum_min_replicas < s.maximum_min_replicas <= s.maximum_max_replicas:
        raise InvalidPolicy(
            "tortoise.MaximumMinReplicas", "need MinimumMinReplicas < MaximumMinReplicas <= MaximumMaxReplicas"
        )
    if not s.minimum_min_replicas < s.preferred_max_replicas < s.maximum_max_replicas:
        raise InvalidPolicy(
            "tortoise.PreferredMaxReplicas", "need MinimumMinReplicas < PreferredMaxReplicas < MaximumMaxReplicas"
        )
    if s.min_target > s.max_target:
        raise InvalidPolicy("tortoise.MinimumTargetResourceUtilization", "is above MaximumTargetResourceUtilization")
    if s.min_multiplier <= 0 or s.max_multiplier <= 0:
        raise InvalidPolicy("tortoise.MinReplicasRecommendationMultiplier", "multipliers must be > 0")


_SETTING_KEYS = frozenset(
    {
        "RangeOfMinMaxReplicasRecommendationHours",
        "GatheringDataPeriodType",
        "MaxReplicasRecommendationMultiplier",
        "MinReplicasRecommendationMultiplier",
        "ReplicaReductionFactor",
        "MaximumTargetResourceUtilization",
        "MinimumTargetResourceUtilization",
        "MinimumMinReplicas",
        "MaximumMinReplicas",
        "PreferredMaxReplicas",
        "MaximumMaxReplicas",
        "MaximumCPURequest",
        "MaximumMemoryRequest",
        "MinimumCPURequest",
        "MinimumCPURequestPerContainer",
        "MinimumMemoryRequest",
        "MinimumMemoryRequestPerContainer",
        "BufferRatioOnVerticalResource",
        "MinimumCPULimit",
        "ResourceLimitMultiplier",
        "MaxAllowedScalingDownRatio",
        "TimeZone",
        "TortoiseUpdateInterval",
        "HPATargetUtilizationMaxIncrease",
        "HPATargetUtilizationUpdateInterval",
        "HPAExternalMetricExclusionRegex",
        "EmergencyModeGracePeriod",
        "DefaultHPABehavior",
        "IstioSidecarProxyDefaultCPU",
        "IstioSidecarProxyDefaultMemory",
        "FeatureFlags",
        "GlobalDisableMode",
        "ExcludedNamespaces",
    }
)


#: Why a bound exists, where Tortoise's own config does not check it (config.go ``validate``
#: checks only RangeOfMinMaxReplicasRecommendationHours, HPATargetUtilizationMaxIncrease,
#: MaxAllowedScalingDownRatio, ResourceLimitMultiplier and the replica orderings).
_NEGATIVE = "a negative multiplier makes negative replica counts (Tortoise does not check it)"
_REDUCTION = (
    "BackToNormal multiplies minReplicas by it until the recommendation is reached: above 1 it would "
    "grow and never end (Tortoise does not check it)"
)
_TARGET = "an HPA utilization target in percent; tandem's applier writes only 1..100 (Tortoise does not check it)"
_REPLICAS = "HPA replica counts are int32 (Tortoise's MaximumMinReplicas and MaximumMaxReplicas are int32)"
_BUFFER = (
    "the recommendation is multiplied by 1 + the ratio: below 0 it would shrink every request "
    "(Tortoise does not check it)"
)
INT32_MAX = 2**31 - 1


def _int_setting(raw: Mapping[str, Any], key: str, default: int, lo: int, hi: int, why: str = "") -> int:
    value = raw.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy(f"tortoise.{key}", f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidPolicy(f"tortoise.{key}", f"{value} is outside {lo}..{hi}" + (f": {why}" if why else ""))
    return value


def _float_setting(raw: Mapping[str, Any], key: str, default: float, lo: float, hi: float, why: str = "") -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPolicy(f"tortoise.{key}", f"expected a number, got {value!r}")
    if not lo <= value <= hi:
        text = f"{value} is below {lo}" if hi == math.inf else f"{value} is outside {lo}..{hi}"
        raise InvalidPolicy(f"tortoise.{key}", text + (f": {why}" if why else ""))
    return float(value)


def _qty_setting(raw: Mapping[str, Any], key: str, default: str) -> int:
    try:
        return parse_quantity(raw.get(key, default))
    except ValueError as exc:
        raise InvalidPolicy(f"tortoise.{key}", str(exc)) from None


def _duration_setting(raw: Mapping[str, Any], key: str, default: float) -> float:
    if key not in raw:
        return default
    try:
        return parse_duration(raw[key])
    except ValueError as exc:
        raise InvalidPolicy(f"tortoise.{key}", str(exc)) from None
