"""Fuzzing the settings loader: a broken settings file is one ``SettingsError`` naming it, nothing else.

A complete, valid settings document (every section: ``sync_period``, ``cluster``, ``hpa:``,
``vpa:``, ``tortoise:``) is mutated (:mod:`tests.mutate`) and given to
:meth:`scaling.settings.Settings.from_mapping` (only :class:`~scaling.errors.InvalidEvent` may come
out) and, written to a file as JSON or YAML text or as mangled bytes, to
:func:`streams.inputs.load_core_settings` (only :class:`~streams.inputs.SettingsError`, whose text
starts with the file's name).  ``TANDEM_FUZZ_EXAMPLES`` sets the examples per test.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from scaling.errors import InvalidEvent
from scaling.settings import Settings
from streams.inputs import SettingsError, load_core_settings
from tests.mutate import RUNS, mangled_bytes, mutated, to_json

VALID: dict[str, Any] = {
    "sync_period": 15,
    "cluster": "eu-1",
    "hpa": {
        "tolerance": 0.1,
        "horizontal-pod-autoscaler-downscale-stabilization": "5m0s",
        "cpuInitializationPeriod": 300,
        "initial_readiness_delay": "30s",
        "configurable_tolerance": True,
    },
    "vpa": {
        "target-cpu-percentile": 0.9,
        "recommendationMarginFraction": 0.15,
        "memory_aggregation_interval": "24h",
        "memory-aggregation-interval-count": 8,
        "pod-recommendation-min-memory-mb": 250,
        "container-recommendation-max-allowed-cpu": "4",
        "container_recommendation_max_allowed_memory": "8Gi",
    },
    "tortoise": {
        "RangeOfMinMaxReplicasRecommendationHours": 2,
        "GatheringDataPeriodType": "daily",
        "MaxReplicasRecommendationMultiplier": 2.0,
        "MinimumMinReplicas": 3,
        "MaximumCPURequest": "10",
        "MinimumMemoryRequestPerContainer": {"istio-proxy": "64Mi"},
        "ResourceLimitMultiplier": {"cpu": 3},
        "TimeZone": "Europe/Berlin",
        "TortoiseUpdateInterval": "15s",
        "HPAExternalMetricExclusionRegex": "^datadog",
        "FeatureFlags": [],
        "ExcludedNamespaces": ["kube-system"],
        "GlobalDisableMode": False,
    },
}
N = int(os.environ.get("TANDEM_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=N,
    deadline=None,
    derandomize=os.environ.get("TANDEM_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True, scope="module")
def _deep_enough() -> Any:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    yield
    sys.setrecursionlimit(old)


def test_the_document_is_valid_to_start_with() -> None:
    s = Settings.from_mapping(VALID)
    assert (s.sync_period, s.cluster, s.hpa_config.downscale_stabilization) == (15.0, "eu-1", 300.0)


SCRATCH = Path(tempfile.mkdtemp(prefix="tandem-fuzz-")) / "settings.yaml"


def _load(text: bytes, name: str) -> None:
    RUNS[name] += 1
    SCRATCH.write_bytes(text)
    try:
        load_core_settings(str(SCRATCH), None, None)
    except SettingsError as exc:
        assert str(exc).startswith(f"{SCRATCH}: "), str(exc)


@FUZZ
@given(doc=mutated(VALID, pairs=False))
def test_a_mutated_mapping_raises_only_invalid_event(doc: Any) -> None:
    RUNS["settings: from_mapping"] += 1
    with contextlib.suppress(InvalidEvent):
        Settings.from_mapping(doc)


@FUZZ
@given(doc=mutated(VALID), as_yaml=st.booleans())
def test_a_mutated_file_raises_only_settings_error_naming_it(doc: Any, as_yaml: bool) -> None:
    try:
        text = to_json(doc)
    except RecursionError:  # deeper than this test's own writer goes: not an input to judge
        reject()
    if as_yaml:
        with contextlib.suppress(yaml.YAMLError, RecursionError):  # else the JSON text (JSON is YAML)
            text = yaml.safe_dump(yaml.safe_load(text)).encode()
    _load(text, "settings: file")


@FUZZ
@given(text=mangled_bytes(yaml.safe_dump(VALID).encode(), deepest=300))
def test_mangled_settings_text_raises_only_settings_error_naming_it(text: bytes) -> None:
    _load(text, "settings: mangled bytes")


def test_zz_the_fuzzers_ran() -> None:
    ran = {k: v for k, v in RUNS.items() if k.startswith("settings:")}
    print(f"\nfuzz examples run: {ran}")
    assert all(v >= min(N, 50) for v in ran.values()), ran


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], "settings must be a mapping, got list"),
        ({"tortoise": {"TimeZone": "Europe"}}, "field 'tortoise.TimeZone': 'Europe' is not an IANA time zone name"),
        ({"tortoise": {"TimeZone": [1]}}, "field 'tortoise.TimeZone': expected a time zone name, got list"),
    ],
)
def test_what_the_fuzzers_found_stays_fixed(raw: Any, message: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        Settings.from_mapping(raw)
    assert str(caught.value) == message
