"""The one error type that bad input produces.

Every rejection names the offending field (a dotted path such as ``samples[3].cpu`` or
``spec.hpa.scaleUp.stabilizationDuration``) and says why, so that ``tandem replay`` can print
``FILE:LINE: field 'x': why`` and the worker can put the same sentence in the dead-letter topic.
"""

from __future__ import annotations

__all__ = ["InvalidEvent", "InvalidPolicy"]


class InvalidEvent(ValueError):
    """An input event that does not follow the contract (docs/contract.md §3)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"field '{field}': {reason}" if field else reason)
        self.field = field
        self.reason = reason

    def within(self, prefix: str) -> InvalidEvent:
        """The same error, with its field path placed under ``prefix``."""
        sep = "" if self.field.startswith("[") else "."
        return type(self)(f"{prefix}{sep}{self.field}" if self.field else prefix, self.reason)


class InvalidPolicy(InvalidEvent):
    """A policy manifest that tandem cannot run (docs/contract.md §5)."""
