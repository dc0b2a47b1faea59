"""A stalled input is never silent: the watchdog of ``tandem worker`` (issue #18).

An autoscaler that quietly stops reconciling part of a fleet is worse than none, so the worker
watches every assigned input topic-partition: one that has messages waiting (its high watermark
is past what the merge has seen) and whose position has not moved for ``stall_timeout`` seconds
is *stalled*.  So is one whose committed offset stays behind what was read for as long (a
message read but never acknowledged holds the group's commit back for good: the shape of the
rebalance defect of issue #18, which the read position alone does not show).  The worker then
logs which topic-partition and what it knows, sets the gauge
``tandem_input_stalled{topic,partition}``, fails ``/readyz``, and after ``stall_exit`` seconds
exits non-zero so that Kubernetes restarts it (the liveness probe sees the process gone).

Pure and clock-free: the caller passes monotonic ``now``, positions and high watermarks, so the
rules are unit-tested without Kafka.  A partition with no lag is never stalled (an idle input is
caught up, not stuck), and any movement of its position resets its timer.  Every input of a
partition whose merge is held back by a stuck input is reported too: none of them is reconciled
any more, and the log line says which ones the merge itself paused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Stall", "StallWatch"]


@dataclass(frozen=True, slots=True)
class Stall:
    """One stalled input: where, how far behind, and for how long (seconds)."""

    topic: str
    partition: int
    position: int | None
    highwater: int
    seconds: float
    #: ``"read"``: the input is not read (``position`` read up to, ``highwater`` the log end);
    #: ``"commit"``: it is read but its offset is not committed (``position`` the committed offset,
    #: ``highwater`` what was read), so a restart would read it again and the group's lag never ends.
    what: str = "read"

    def describe(self) -> str:
        if self.what == "commit":
            return (
                f"input {self.topic}[{self.partition}] stalled: committed offset {self.position} while read up "
                f"to {self.highwater}, no commit progress for {self.seconds:.0f} s"
            )
        seen = "nothing read yet" if self.position is None else f"position {self.position}"
        return (
            f"input {self.topic}[{self.partition}] stalled: {seen}, high watermark {self.highwater}, "
            f"no progress for {self.seconds:.0f} s"
        )


class StallWatch:
    """Tracks progress per input topic-partition; :meth:`check` says which ones are stalled."""

    def __init__(self, stall_timeout: float, stall_exit: float, what: str = "read") -> None:
        if stall_timeout <= 0 or stall_exit <= 0:
            raise ValueError("stall timeouts must be > 0")
        self.stall_timeout = stall_timeout
        self.stall_exit = stall_exit
        self.what = what
        #: (topic, partition) -> (last position seen, monotonic time it was first seen)
        self._since: dict[tuple[str, int], tuple[int | None, float]] = {}

    def forget(self, keep: Iterable[tuple[str, int]] = ()) -> None:
        """After a rebalance: forget every input but ``keep`` (a new owner starts its own timer)."""
        kept = set(keep)
        self._since = {tp: v for tp, v in self._since.items() if tp in kept}

    def check(
        self, now: float, inputs: Mapping[tuple[str, int], tuple[int | None, int | None]]
    ) -> tuple[list[Stall], bool]:
        """``inputs``: (topic, partition) -> (position, high watermark) of every assigned input.

        Returns the stalled inputs and whether one has been stalled for ``stall_exit`` seconds
        (the worker should then exit).  Inputs not in ``inputs`` are forgotten.
        """
        stalled: list[Stall] = []
        must_exit = False
        since = {}
        for tp, (position, highwater) in inputs.items():
            # An unknown position (start offset not learned yet) cannot be judged; the next round can.
            lagging = highwater is not None and position is not None and highwater > position
            prev = self._since.get(tp)
            if not lagging:
                since[tp] = (position, now)
                continue
            if prev is None or prev[0] != position:
                since[tp] = (position, now)
                continue
            since[tp] = prev
            waited = now - prev[1]
            if waited >= self.stall_timeout:
                assert highwater is not None
                stalled.append(Stall(tp[0], tp[1], position, highwater, waited, self.what))
                if waited >= self.stall_exit:
                    must_exit = True
        self._since = since
        return stalled, must_exit
