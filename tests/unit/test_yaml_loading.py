"""``streams.inputs.load_yaml_file``: libyaml's parser when PyYAML has it, PyYAML's messages for a bad file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streams import inputs

ROOT = Path(__file__).resolve().parents[2]
needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


@needs_libyaml
def test_policy_files_are_parsed_by_libyaml_into_the_same_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []

    class Spy(yaml.CSafeLoader):
        def __init__(self, stream: Any) -> None:
            used.append(stream.name)
            super().__init__(stream)

    monkeypatch.setattr(inputs, "_FAST_LOADER", Spy)
    paths = [str(p) for p in sorted((ROOT / "examples").rglob("*.yaml"))]
    assert len(paths) >= 4
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            pure = [d for d in yaml.safe_load_all(fh) if d is not None]
        fast = inputs.load_yaml_file(path)
        flat: list[Any] = []
        for d in pure:
            if isinstance(d, list):
                flat.extend(d)
            elif isinstance(d, dict) and d.get("kind") == "List" and isinstance(d.get("items"), list):
                flat.extend(d["items"])
            else:
                flat.append(d)
        assert fast == flat and repr(fast) == repr(flat)
    assert used == paths


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    ["kind: Hvpa\nspec: [1, 2\n", "a: b: c\n", "kind: Hvpa\n\tbad: tab\n", "- \x07\n"],
    ids=["unclosed", "nested-plain", "tab", "control-char"],
)
def test_a_file_libyaml_refuses_is_refused_with_pyyamls_own_message(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with open(bad, encoding="utf-8") as fh, pytest.raises(yaml.YAMLError) as pure:
        list(yaml.safe_load_all(fh))
    with pytest.raises(yaml.YAMLError) as ours:
        inputs.load_yaml_file(str(bad))
    assert str(ours.value) == str(pure.value)
    assert f'in "{bad}"' in str(ours.value)  # PyYAML's marks name the file


DUPLICATE = "kind: Hvpa\nmetadata:\n  name: web\nspec:\n  minReplicas: 2\n  maxReplicas: 9\n  minReplicas: 3\n"


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "pure"])
def test_a_key_given_twice_is_refused_not_read_as_its_last_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    if fast and not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml")
    if not fast:
        monkeypatch.setattr(inputs, "_FAST_LOADER", None)
    bad = tmp_path / "policy.yaml"
    bad.write_text(DUPLICATE, encoding="utf-8")
    with pytest.raises(yaml.YAMLError) as refused:
        inputs.load_yaml_file(str(bad))
    message = str(refused.value)
    assert "found duplicate key 'minReplicas'" in message
    assert f'in "{bad}", line 7, column 3' in message  # the second one
    assert f'in "{bad}", line 5, column 3' in message  # the mapping it is in: spec's


def test_a_key_merged_in_may_be_overridden_as_yaml_allows(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {minReplicas: 2, maxReplicas: 9}\nspec:\n  <<: *b\n  minReplicas: 3\n", encoding="utf-8")
    assert inputs.load_yaml_file(str(path)) == [
        {"base": {"minReplicas": 2, "maxReplicas": 9}, "spec": {"minReplicas": 3, "maxReplicas": 9}}
    ]
