"""The policy schema and the CRDs are generated from ``scaling/policies/fields.py`` and agree with it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from schemas import validator
from schemas.generate import generated_files

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted(generated_files()), ids=lambda p: p.name)
def test_the_checked_in_file_is_what_the_generator_writes(path: Path) -> None:
    # If this fails: python -m schemas.generate (after changing scaling/policies/fields.py).
    assert path.read_text() == generated_files()[path]


def test_the_event_schema_refuses_a_misspelled_policy_field_as_the_parser_does() -> None:
    event = json.loads((ROOT / "schemas" / "examples" / "policy-hvpa-released.json").read_text())
    check = validator("event")
    assert not list(check.iter_errors(event))
    bad = copy.deepcopy(event)
    scale_up = bad["policy"]["spec"]["vpa"]["scaleUp"]
    scale_up["stabilizationDuraton"] = scale_up.pop("stabilizationDuration")
    errors = [e for e in check.iter_errors(bad)]
    assert errors
    assert any("stabilizationDuraton" in e.message for e in _leaves(errors))


def _leaves(errors: list) -> list:
    out = []
    for e in errors:
        out.append(e)
        out.extend(_leaves(list(e.context)))
    return out
