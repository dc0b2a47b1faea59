"""scaling.events.WorkloadRef: what ``tandem simulate --jobs`` sends between processes comes back equal."""

from __future__ import annotations

import pickle

from scaling.events import WorkloadRef


def test_a_workload_reference_survives_pickling_with_its_key() -> None:
    ref = WorkloadRef("eu-1", "shop", "Deployment", "api")
    back = pickle.loads(pickle.dumps(ref))
    assert back == ref
    assert back.key == "eu-1/shop/Deployment/api"
    assert back.__reduce__() == (WorkloadRef, ("eu-1", "shop", "Deployment", "api"))
