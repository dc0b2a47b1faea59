"""JSON Schemas of the contract (docs/contract.md §3 and §4), and the codec.

The schemas are package data; they refer to each other by ``$id``
(``https://tandem.dev/schemas/<name>.schema.json``).  :func:`validator` needs ``jsonschema``, a
development dependency only, so it is imported when the function is called.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["BASE_URI", "load_schema", "registry", "schema_names", "validator"]

BASE_URI = "https://tandem.dev/schemas/"
_SUFFIX = ".schema.json"


def _file_name(name: str) -> str:
    return name if name.endswith(_SUFFIX) else f"{name}{_SUFFIX}"


def schema_names() -> list[str]:
    """The names of the packaged schemas (``metric``, ``event``, ``decision``...), sorted."""
    return sorted(p.name[: -len(_SUFFIX)] for p in files(__name__).iterdir() if p.name.endswith(_SUFFIX))


@cache
def _load(file_name: str) -> str:
    return files(__name__).joinpath(file_name).read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``name`` (``"metric"`` or ``"metric.schema.json"``) as a fresh ``dict``."""
    schema: dict[str, Any] = json.loads(_load(_file_name(name)))
    return schema


def registry() -> Any:
    """A ``referencing.Registry`` holding every packaged schema under its ``$id``."""
    from referencing import Registry, Resource

    return Registry().with_resources(
        (BASE_URI + _file_name(n), Resource.from_contents(load_schema(n))) for n in schema_names()
    )


def validator(name: str) -> Any:
    """A ``jsonschema`` Draft 2020-12 validator for schema ``name``, resolving ``$ref`` by ``$id``."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        load_schema(name), registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
