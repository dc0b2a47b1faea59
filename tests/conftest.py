"""Shared pytest configuration: the real Kafka broker and the real kube-apiserver fixtures."""

pytest_plugins = ["tests.fixtures.kafka", "tests.fixtures.kafka_secure", "tests.fixtures.kube"]
