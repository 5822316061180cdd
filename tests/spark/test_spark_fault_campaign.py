"""The fault campaign for a transfer whose statements run on Spark (driver requests: write records, footers,
staging clean-up, then the commit), on a local lakehouse with both writers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import txlake
from tests.faults.campaign import Run, campaign
from tests.faults.scenarios import Transfer

JOURNAL_DDL = "id long, amount long"


class SparkTransfer(Transfer):
    """The transfer with its updates as Spark jobs and its journal row appended as a Spark DataFrame."""

    def __init__(self, spark: SparkSession, writer: str) -> None:
        self.spark = spark
        self.name = f"spark-transfer-{writer}"
        self.client: dict[str, Any] = {"spark": spark, "spark_writer": writer, "spark_reader": "python"}

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction() as tx:
            run.txids.append(tx.txid)
            tx.update("bank.a", set={"balance": "balance - 10"}, where="id = 1")
            tx.update("bank.b", set={"balance": "balance + 10"}, where="id = 1")
            tx.append("bank.journal", self.spark.createDataFrame([(1, 10)], JOURNAL_DDL))

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            row = {"id": pa.array([100], pa.int64()), "amount": pa.array([0], pa.int64())}
            tx.append("bank.journal", pa.table(row))


# Spark's writer makes over a hundred requests (two hundred cases of Spark jobs): 150-200 s on a quiet 2-core
# machine, and the CI's other worker loads it
@pytest.mark.timeout(900)
@pytest.mark.parametrize("writer", ["auto", "python"])
def test_spark_transfer_campaign(spark: SparkSession, writer: str, tmp_path: Path) -> None:
    scenario = SparkTransfer(spark, writer)
    # Spark jobs make each case cost about a second: an outage from each request on, and a crash after it. The
    # cases run four at a time on the one Spark session (as a caller's thread pool would)
    report = campaign(
        scenario, lambda tag: ((tmp_path / tag).as_uri(), {}), "file", actions=("outage", "crash_after"), workers=4
    )
    print("\n" + report.table())
    # 29 requests x 2 actions when this was written (fewer GETs since records carry earlier outcomes)
    assert len(report.results) >= 54
    assert report.violations == [], "\n".join(report.violations[:20])
