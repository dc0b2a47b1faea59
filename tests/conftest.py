"""Shared pytest configuration: the real Kafka broker and the real kube-apiserver fixtures.

The suite runs the interpreted core (``scaling/__init__.py``) unless ``TANDEM_CORE`` says
otherwise: some tests monkeypatch core functions or subclass core classes, which a compiled module
does not allow.  ``tests/e2e/test_compiled_core.py`` runs the compiled build in subprocesses.
"""

import os

os.environ.setdefault("TANDEM_CORE", "interpreted")

pytest_plugins = ["tests.fixtures.kafka", "tests.fixtures.kafka_secure", "tests.fixtures.kube"]
