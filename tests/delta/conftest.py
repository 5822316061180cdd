"""Fixtures for the Delta-layer tests: a fresh object store per test, on local disk and in memory."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from txlake.storage import ObjectStore


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An empty store: ``file://`` below ``tmp_path`` or a ``memory://<uuid4>`` store nobody else uses."""
    if request.param == "file":
        return ObjectStore.from_uri(f"file://{tmp_path}/lake")
    return ObjectStore.from_uri(f"memory://{uuid.uuid4()}")


@pytest.fixture
def file_store(tmp_path: Path) -> ObjectStore:
    """A ``file://`` store, for tests that need the local filesystem (modification times)."""
    return ObjectStore.from_uri(f"file://{tmp_path}/lake")
