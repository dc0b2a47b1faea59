"""Hypothesis strategies that break valid documents the ways real input breaks (issue #12 fuzzing).

:func:`mutated` takes a valid JSON-like document and applies one to three mutations at random
places: drop a key, rename it (typo, case, suffix), duplicate it (only visible in the JSON text,
so :func:`to_json` writes :class:`Pairs` with the repeated key), replace a value by one of the
wrong type, an extreme number (huge, negative, NaN, infinite, subnormal) or a deep nesting.
:func:`mangled_bytes` then corrupts the text itself (non-UTF-8 bytes, lone surrogates, a cut).

Every fuzz test counts the examples it ran in :data:`RUNS`; ``test_fuzz_*`` print the totals.
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import strategies as st

__all__ = ["RUNS", "Pairs", "junk", "mangled_bytes", "mutated", "to_json"]

#: Examples run per fuzz target, across the session (reported by the tests' last check).
RUNS: Counter[str] = Counter()


class Pairs:
    """A JSON object written with its pairs as given: a key may repeat (the last one wins in orjson).

    Not a ``dict`` nor a ``list``, so later mutations take it for a leaf.
    """

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs

    def __repr__(self) -> str:
        return f"Pairs({self.pairs!r})"


def to_json(value: Any) -> bytes:
    """JSON text of ``value``; NaN and infinities are written as the bare words some producers emit."""
    if isinstance(value, Pairs):
        return b"{" + b",".join(to_json(str(k)) + b":" + to_json(v) for k, v in value.pairs) + b"}"
    if isinstance(value, dict):
        return to_json(Pairs(list(value.items())))
    if isinstance(value, list):
        return b"[" + b",".join(to_json(v) for v in value) + b"]"
    if isinstance(value, float) and not math.isfinite(value):
        return b"NaN" if math.isnan(value) else (b"Infinity" if value > 0 else b"-Infinity")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()  # beyond 64 bits too
    if isinstance(value, str):
        return json.dumps(value).encode()  # a lone surrogate becomes the escape "\\ud800"
    return orjson.dumps(value)


NUMBERS = (
    st.sampled_from(
        [
            -1,
            0,
            -0.0,
            1.5,
            -(2**31),
            2**31,
            2**63,
            -(2**63) - 1,
            10**30,
            1e308,
            -1e308,
            5e-324,
            math.nan,
            math.inf,
            -math.inf,
        ]
    )
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
)

TEXTS = st.sampled_from(
    ["", " ", "-1", "1e400", "NaN", "inf", "1Gi", "5m", "1h2m", "0x10", "true", "null", "\u00e9\u4e2d", "a/b", "\ud800"]
) | st.text(max_size=12)


def _deep(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


junk: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    TEXTS,
    st.lists(st.one_of(st.none(), NUMBERS, TEXTS), max_size=3),
    st.dictionaries(TEXTS, st.one_of(st.none(), NUMBERS, TEXTS), max_size=3),
    st.builds(_deep, st.integers(2, 400), st.one_of(st.none(), NUMBERS, TEXTS)),
)


def _places(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (keys and list indexes), the root included."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(_places(v, (*path, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(_places(v, (*path, i)))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _typo(key: str) -> st.SearchStrategy[str]:
    options = [key + "s", key.upper(), key.lower(), key[:-1], key + "_", "x" + key]
    if len(key) > 2:
        options.append(key[0] + key[2] + key[1] + key[3:])
    return st.sampled_from([o for o in options if o != key] or [key + "x"]) | TEXTS


@st.composite
def mutated(draw: st.DrawFn, doc: Any, *, pairs: bool = True) -> Any:
    """``doc`` broken in one to three places (a deep copy; ``doc`` is not touched)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        places = _places(doc)
        path = draw(st.sampled_from(places))
        target = _get(doc, path)
        kinds = ["replace"]
        if isinstance(target, dict) and target:
            kinds += ["drop", "rename", "add"] + (["duplicate"] if pairs else [])
        if isinstance(target, list) and target:
            kinds += ["drop", "repeat"]
        kind = draw(st.sampled_from(kinds))
        value = draw(junk)
        if kind == "replace":
            if not path:
                return value
            _get(doc, path[:-1])[path[-1]] = value
        elif kind == "drop":
            key = draw(st.sampled_from(sorted(target, key=str) if isinstance(target, dict) else range(len(target))))
            del target[key]
        elif kind == "rename":
            key = draw(st.sampled_from(sorted(target)))
            target[draw(_typo(key))] = target.pop(key)
        elif kind == "add":
            target[draw(TEXTS)] = value
        elif kind == "repeat":
            target.append(copy.deepcopy(draw(st.sampled_from(target))))
        else:  # duplicate: the same key twice in the text, the second with another value
            key = draw(st.sampled_from(sorted(target)))
            dup = Pairs(list(target.items()))
            dup.pairs.insert(draw(st.integers(0, len(dup.pairs))), (key, value))
            if not path:
                return dup
            _get(doc, path[:-1])[path[-1]] = dup
    return doc


@st.composite
def mangled_bytes(draw: st.DrawFn, text: bytes, deepest: int = 5000) -> bytes:
    """``text`` with bytes that are not UTF-8, an escaped lone surrogate, a NUL, a nesting up to
    ``deepest`` levels (orjson stops at 1024; PyYAML recurses, slowly) or a cut inserted."""
    at = draw(st.integers(0, len(text)))
    bad = draw(
        st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\\ud800", b"\x00", b"\xf0\x28\x8c\xbc", b"\x80"])
        | st.binary(min_size=1, max_size=4)
    )
    how = draw(st.sampled_from(["insert", "cut", "nest"]))
    if how == "insert":
        return text[:at] + bad + text[at:]
    if how == "nest":  # deeper than any parser's limit
        depth = draw(st.integers(min(500, deepest), deepest))
        return text[:at] + b"[" * depth + b"]" * depth + text[at:]
    return text[:at]


def counted(name: str) -> Callable[[], None]:
    """A callable that counts one example of fuzz target ``name``."""

    def tick() -> None:
        RUNS[name] += 1

    return tick
