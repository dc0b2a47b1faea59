"""A policy that is another policy with one change: the delegation, written once.

``spec.predictive`` (:class:`~scaling.policies.predictive.Predictive`) and the simulator's
Holt-Winters baseline (``analysis/holt_winters.py``) both take a parsed policy of any kind and
change only what its :meth:`decide` returns; everything else a caller may ask of a
:class:`~scaling.policies.base.Policy` (its kind, name, workload, bounds and the HPA and VPA it
would create) is the inner policy's.  :class:`DelegatingPolicy` forwards all of it, so a wrapper
overrides :meth:`decide` alone and a new member of the protocol is forwarded in one place.

The core is compiled by mypyc (``scripts/build_core.py``), whose classes refuse subclasses defined
in interpreted code unless marked so: the Holt-Winters baseline lives outside the core (in
``analysis/``), hence ``allow_interpreted_subclasses`` ("Native classes", mypyc's documentation,
https://mypyc.readthedocs.io/en/latest/native_classes.html#inheritance).  ``mypy_extensions`` is
the decorator's home; it is a dependency of faust-streaming already, and declared in pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mypy_extensions import mypyc_attr

from ..events import WorkloadRef
from ..outcome import Outcome, View
from .base import Policy
from .bounds import Bounds
from .templates import HpaTemplate, VpaTemplate

__all__ = ["DelegatingPolicy"]


@mypyc_attr(allow_interpreted_subclasses=True)
class DelegatingPolicy:
    """``inner``, unchanged: a subclass overrides :meth:`decide` (module docstring)."""

    def __init__(self, inner: Policy) -> None:
        #: The wrapped policy, of any kind (possibly another wrapper).
        self.inner = inner

    @property
    def kind(self) -> str:
        return self.inner.kind

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def workload(self) -> WorkloadRef:
        return self.inner.workload

    def bounds(self) -> Bounds:
        return self.inner.bounds()

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        return self.inner.hpa_template(memory)

    def vpa_template(self) -> VpaTemplate | None:
        return self.inner.vpa_template()

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        return self.inner.decide(view, memory)
