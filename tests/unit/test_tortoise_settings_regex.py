"""Tortoise's ``HPAExternalMetricExclusionRegex`` setting: a string, an integer read as its text
(as Tortoise's yaml.v3 does), or nothing; never a value silently turned into made-up text (a list
became its Python repr, ``None`` the regex ``"None"``)."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.policies.tortoise.settings import TortoiseSettings
from scaling.settings import Settings

FIELD = "tortoise.HPAExternalMetricExclusionRegex"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            0.5,
            "expected a regular expression (a string), got float 0.5 "
            "(quote it: Tortoise would take its literal text, which tandem cannot see)",
        ),
        (
            True,
            "expected a regular expression (a string), got bool True "
            "(quote it: Tortoise would take its literal text, which tandem cannot see)",
        ),
        (["^datadog", "-exclude$"], "expected a regular expression (a string), got list ['^datadog', '-exclude$']"),
        ({"name": "x"}, "expected a regular expression (a string), got dict {'name': 'x'}"),
    ],
)
def test_a_non_string_regex_is_an_error_naming_the_setting(value: Any, message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": value})
    assert caught.value.field == FIELD
    assert str(caught.value) == f"field '{FIELD}': {message}"


def test_the_settings_file_says_the_same() -> None:
    with pytest.raises(InvalidPolicy) as caught:
        Settings.from_mapping({"tortoise": {"HPAExternalMetricExclusionRegex": [5]}})
    assert caught.value.field == FIELD


def test_an_integer_is_its_text_as_in_tortoise() -> None:
    assert TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": 5}).external_exclusion == "5"


@pytest.mark.parametrize(("raw", "expected"), [({}, ""), ({"HPAExternalMetricExclusionRegex": None}, "")])
def test_unset_or_null_excludes_nothing(raw: dict[str, Any], expected: str) -> None:
    assert TortoiseSettings.from_mapping(raw).external_exclusion == expected


def test_a_string_is_kept_as_written_and_a_bad_one_is_still_refused() -> None:
    assert TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": "5"}).external_exclusion == "5"
    assert (
        TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": ".*-exclude-metric"}).external_exclusion
        == ".*-exclude-metric"
    )
    with pytest.raises(InvalidPolicy) as caught:
        TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": "(unclosed"})
    assert caught.value.field == FIELD
