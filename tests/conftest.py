"""Shared pytest configuration."""

pytest_plugins = ["tests.fixtures.kafka"]
