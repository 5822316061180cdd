"""A local Spark session that stays on loopback (for the demo, benchmarks and examples)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["SparkSession", "active_session", "local_session"]


def active_session() -> SparkSession | None:
    """The session active in this thread, if any (starts nothing)."""
    return SparkSession.getActiveSession()


def local_session(app_name: str = "txlake", *, cores: int = 2, driver_memory: str = "2g") -> tuple[SparkSession, bool]:
    """``local[cores]``, UI off, loopback only, UTC; returns (session, created) — stop it only if created."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import txlake from this environment
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session, True


def pyspark_exception() -> Any:
    """PySpark's error base class (its analysis, parse and runtime errors derive from it)."""
    from pyspark.errors import PySparkException

    return PySparkException


def silence_pyspark_loggers(names: Sequence[str]) -> None:
    """Disable PySpark's own Python loggers (they print JSON error records to stderr); older PySparks have none."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in names:
        PySparkLogger.getLogger(name).disabled = True
