"""A Spark session for the documentation examples that use PySpark (started only if such a page runs)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def docs_spark() -> Iterator[object]:
    """``local[2]`` on loopback, UTC, UI off (as the Spark suites use); stopped at the end if we started it.

    The examples build their session with ``SparkSession.builder...getOrCreate()``, which returns this one.
    """
    pytest.importorskip("pyspark.sql")
    from txlake.spark.session import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session, created = local_session("txlake-docs")
    try:
        yield session
    finally:
        if created:
            session.stop()
