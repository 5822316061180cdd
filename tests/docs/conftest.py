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
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    active = pyspark_sql.SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("txlake-docs")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
