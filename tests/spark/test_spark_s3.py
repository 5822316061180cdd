"""An ``s3://`` lakehouse (SeaweedFS) with Spark: every byte goes through the txlake Python data source,
whose tasks open obstore clients themselves (no Hadoop S3 connector involved)."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import deltars_read, df_rows, staging_objects, txid_files
from tests.spark.test_spark_pushdown import one_file_per_task
from txlake.errors import PredicateError

pytestmark = pytest.mark.s3

SCHEMA = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()), ("amount", pa.decimal128(12, 2))]
)


def test_s3_read_write_through_data_source(spark: SparkSession, s3_uri: str, s3_options: dict[str, str]) -> None:
    lake = txlake.connect(s3_uri, s3_options, spark=spark)
    lake.create_table("sales.orders", SCHEMA, partition_by=["region"])
    lake.create_table("sales.totals", pa.schema([("region", pa.string()), ("total", pa.decimal128(22, 2))]))
    df = spark.createDataFrame(
        [(i, ["eu", "us", None][i % 3], date(2024, 1, 1 + i % 28), f"{i}.25") for i in range(60)],
        "id long, region string, day date, amount string",
    ).selectExpr("id", "region", "day", "CAST(amount AS DECIMAL(12,2)) AS amount")
    with lake.transaction() as tx:
        assert tx.append("sales.orders", df.repartition(3)) == 60
        orders = tx.read("sales.orders")
        assert orders.inputFiles() == []  # not Spark's file reader: the txlake data source
        assert df_rows(orders) == rows(tx.read_arrow("sales.orders"))
        totals = tx.read("sales.orders", where="region IS NOT NULL").groupBy("region").agg({"amount": "sum"})
        assert tx.append("sales.totals", totals.withColumnRenamed("sum(amount)", "total")) == 2
        assert lake.snapshot().read("sales.orders").count() == 0
    for name in ("sales.orders", "sales.totals"):
        mine = rows(lake.read_arrow(name))
        assert df_rows(lake.snapshot().read(name)) == mine
        assert rows(deltars_read(lake.table_location(name), s3_options)) == mine
    partitions = {a.partition_values["region"] for a in lake.snapshot().delta_snapshot("sales.orders").files.values()}
    assert partitions == {"eu", "us", None}
    with one_file_per_task(spark):
        files = len(lake.snapshot().delta_snapshot("sales.orders").files)
        assert lake.snapshot().read("sales.orders").rdd.getNumPartitions() == files
        eu = lake.snapshot().read("sales.orders").where("region = 'eu'")
        assert eu.rdd.getNumPartitions() < files
        assert eu.count() == 20


def test_s3_rejected_rows_leave_nothing(spark: SparkSession, s3_uri: str, s3_options: dict[str, str]) -> None:
    lake = txlake.connect(s3_uri, s3_options, spark=spark)
    lake.create_table("s.t", SCHEMA)
    df = spark.createDataFrame(
        [(1, "eu", None, None), (9, "us", None, None)], "id long, region string, day date, amount decimal(12,2)"
    )
    tx = lake.transaction()
    with pytest.raises(PredicateError):
        tx.overwrite("s.t", df.repartition(2), where="id < 5")
    assert txid_files(lake, "s.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    tx.abort()


def test_native_reader_needs_local_files(spark: SparkSession, s3_uri: str, s3_options: dict[str, str]) -> None:
    lake = txlake.connect(s3_uri, s3_options, spark=spark, spark_reader="native")
    lake.create_table("s.t", SCHEMA)
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1]}).cast(pa.schema([("id", pa.int64())])))
    with pytest.raises(ValueError):
        lake.snapshot().read("s.t")
