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


# --- RE2, as Go's regexp (issue 35) ------------------------------------------------------------


def test_a_posix_class_is_a_class_as_in_go_and_warns_nothing() -> None:
    import warnings

    from scaling.policies.tortoise.settings import go_regexp

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Python's re warned "Possible nested set" with a source line
        settings = TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": "^[[:alpha:]]+-exclude$"})
        rx = go_regexp(settings.external_exclusion)
    assert [bool(rx.search(name)) for name in ("datadog-exclude", "a-exclude", "dd1-exclude", "[:-exclude")] == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(?=x)", "invalid perl operator: (?="),  # lookahead: Python's re accepts it, Go refuses it
        ("(a)\\1", "invalid escape sequence: \\1"),  # a backreference: the same
        ("x{1001}", "invalid repetition size: {1001}"),
        ("(unclosed", "missing ): (unclosed"),
    ],
)
def test_what_re2_refuses_is_refused_in_one_line_and_nothing_else_is_printed(
    pattern: str, why: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        TortoiseSettings.from_mapping({"HPAExternalMetricExclusionRegex": pattern})
    assert str(caught.value) == f"field '{FIELD}': not a Go (RE2) regular expression: {why}"
    assert capfd.readouterr() == ("", "")  # RE2's C++ log stays silent (log_errors off)


def test_the_exclusion_removes_external_metrics_by_re2_semantics() -> None:
    from tests.unit.test_tortoise import external, hpa_raw, make_view, policy, vpa_of, with_metrics, working

    p = policy()
    raw = with_metrics(hpa_raw(3, 10, {"app/cpu": 70}), external("datadog-exclude"), external("dd2-exclude"))
    settings = {"HPAExternalMetricExclusionRegex": "^[[:alpha:]]+-exclude$"}
    view = make_view(hpa=raw, vpa=vpa_of(app=("1", "1Gi")), settings=settings)
    out = p.decide(view, working(p, view))
    assert out.hpa["metrics"] == {"removed": [{"type": "External", "name": "datadog-exclude"}]}
