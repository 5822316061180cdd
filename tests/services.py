"""Real services shared by the test suites: a SeaweedFS S3 server and per-test store locations.

Register the fixtures once with ``pytest_plugins = ["tests.services"]`` (done in ``tests/conftest.py``).

- ``seaweedfs`` (session): a running :class:`SeaweedFS` on free loopback ports, stopped at session end.
- ``s3_bucket`` / ``s3_options`` / ``s3_uri`` (function): a fresh bucket, the storage options that reach it
  and ``s3://<bucket>/lake``; the bucket is deleted after the test.
- ``any_store_uri`` (function, parametrized ``file``/``memory``/``s3``): a :class:`StoreLocation` for a
  fresh empty location on each backend, so one test body runs on all three.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from txlake.testing.seaweedfs import SeaweedFS, SeaweedFSError, weed_binary

__all__ = [
    "SeaweedFS",
    "SeaweedFSError",
    "StoreLocation",
    "any_store_uri",
    "s3_bucket",
    "s3_options",
    "s3_uri",
    "seaweedfs",
    "weed_binary",
]


class StoreLocation(NamedTuple):
    """A fresh, empty place to open an ``ObjectStore``: ``ObjectStore.from_uri(uri, storage_options)``."""

    uri: str
    storage_options: dict[str, str]


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A SeaweedFS server for the whole session (started on first use, stopped at the end)."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(seaweedfs: SeaweedFS) -> Iterator[str]:
    """A fresh, empty bucket for one test; deleted afterwards."""
    bucket = seaweedfs.new_bucket()
    try:
        yield bucket
    finally:
        if seaweedfs.running:
            seaweedfs.delete_bucket(bucket)


@pytest.fixture
def s3_options(seaweedfs: SeaweedFS, s3_bucket: str) -> dict[str, str]:
    """Storage options (``AWS_*`` keys) reaching the test's fresh bucket (see ``s3_uri``)."""
    return seaweedfs.storage_options()


@pytest.fixture
def s3_uri(s3_bucket: str) -> str:
    """``s3://<fresh bucket>/lake`` for this test."""
    return f"s3://{s3_bucket}/lake"


@pytest.fixture(
    params=["file", "memory", pytest.param("s3", marks=pytest.mark.s3)],
)
def any_store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> StoreLocation:
    """A fresh, empty location on each backend: ``(uri, storage_options)``."""
    backend: str = request.param
    if backend == "file":
        return StoreLocation((tmp_path / "lake").as_uri(), {})
    if backend == "memory":
        return StoreLocation(f"memory://{uuid.uuid4().hex}", {})
    server: SeaweedFS = request.getfixturevalue("seaweedfs")
    bucket: str = request.getfixturevalue("s3_bucket")
    return StoreLocation(f"s3://{bucket}/lake", server.storage_options())
