"""Tandem's own recommenders: pure re-implementations of upstream autoscalers.

Each module reproduces one upstream controller's arithmetic from explicit inputs and explicit state
(event time is passed in, never read from a clock), so that the stream processor can recompute what
the cluster would decide, replay history deterministically, and test against upstream vectors.
"""
