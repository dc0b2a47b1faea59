"""Unknown fields are errors, and the error names the field it was probably meant to be.

A misspelled field that is silently ignored changes behaviour without a word (``ready_replica``
instead of ``ready_replicas`` drops a fact the HPA algorithm needs), so every door of tandem refuses
unknown fields and says which known name is closest.  ``difflib``'s ratio with a 0.6 cutoff is what
Python's own ``NameError`` suggestions approximate; it catches transpositions, a missing or extra
letter and case slips, and stays quiet for names that resemble nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from difflib import get_close_matches

__all__ = ["closest", "did_you_mean", "unknown_fields"]


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, or ``None`` when none is close."""
    candidates = sorted(known)
    match = get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in candidates}
        if name.lower() in lowered:
            match = [lowered[name.lower()]]
    return match[0] if match else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean X?)"`` for the closest known name, or ``""`` when none is close."""
    match = closest(name, known)
    return f" (did you mean {match}?)" if match else ""


def unknown_fields(keys: Iterable[object], known: Collection[str]) -> list[str]:
    """The keys that are not known, in their original order (non-string keys as their repr)."""
    return [k if isinstance(k, str) else repr(k) for k in keys if k not in known]
