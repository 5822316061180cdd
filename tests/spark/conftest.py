"""A Spark session for the Spark suites (one per test session: starting Spark takes seconds) and lakehouses on it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession

import txlake
from txlake.spark.engine import ReaderChoice
from txlake.spark.session import local_session
from txlake.txn.engine import SparkWriter


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """``local[2]``, UI off, loopback only, UTC session time zone; stopped at the end if we started it."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must import txlake from this environment
    session, created = local_session("txlake-tests")
    try:
        yield session
    finally:
        if created:
            session.stop()


@pytest.fixture(params=["native", "python"])
def spark_reader(request: pytest.FixtureRequest) -> ReaderChoice:
    """How files are read and written: Spark's Parquet reader and writer, or the txlake Python data source."""
    return cast(ReaderChoice, request.param)


def writer_for(reader: ReaderChoice) -> SparkWriter:
    """The writer that goes with a reader in these suites: native reads with ``auto`` writes (Spark's writer
    whenever it can), Python data source reads with Python data source writes."""
    return "python" if reader == "python" else "auto"


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession, spark_reader: ReaderChoice) -> txlake.Lakehouse:
    """A fresh local lakehouse with Spark, once per way of reading and writing."""
    return txlake.connect(
        (tmp_path / "lake").as_uri(), spark=spark, spark_reader=spark_reader, spark_writer=writer_for(spark_reader)
    )
