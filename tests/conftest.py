"""Registers the shared real-service fixtures (SeaweedFS, per-test store locations) for every suite."""

from __future__ import annotations

pytest_plugins = ["tests.services"]
