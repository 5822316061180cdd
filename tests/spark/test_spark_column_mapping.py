"""Column-mapped tables through Spark: the data source reads and writes physical names, DML and pruning work
by logical names, and delta-rs reads what Spark wrote (whatever reader is configured: mapped tables always go
through the ``txlake`` data source)."""

from __future__ import annotations

import deltalake
import pyarrow as pa
from pyspark.sql import SparkSession

import txlake
from tests.interop.deltars import rows, sql_rows
from tests.spark.helpers import df_rows
from txlake.delta.colmap import physical_name

SCHEMA = pa.schema(
    [("id", pa.int64()), ("who", pa.string()), ("pt", pa.struct([("x", pa.int32())])), ("day", pa.string())]
)


def test_spark_reads_writes_and_updates_a_mapped_table(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("s.m", SCHEMA, partition_by=["day"], properties={"delta.columnMapping.mode": "name"})
    first = pa.table({"id": [1, 2], "who": ["a", "b"], "pt": [{"x": 1}, None], "day": ["d1", "d2"]}, schema=SCHEMA)
    with lake.transaction() as tx:
        tx.append(
            "s.m", spark.createDataFrame(first.to_pandas(), schema="id long, who string, pt struct<x:int>, day string")
        )
        tx.append("s.m", pa.table({"id": [3], "who": ["c"], "pt": [{"x": 3}], "day": ["d1"]}, schema=SCHEMA))
    with lake.transaction() as tx:
        tx.alter_table("s.m", rename_columns={"who": "name"})
        assert tx.update("s.m", {"name": "upper(name)"}, "pt.x >= 3 AND day = 'd1'") == 1
        assert tx.delete("s.m", "name = 'b'") == 1
    snap = lake.snapshot().delta_snapshot("s.m")
    for add in snap.files.values():
        assert set(add.partition_values) == {physical_name(snap.schema.field("day"))}
    want = [
        {"id": 1, "name": "a", "pt": {"x": 1}, "day": "d1"},
        {"id": 3, "name": "C", "pt": {"x": 3}, "day": "d1"},
    ]
    with lake.transaction() as tx:
        assert df_rows(tx.read("s.m")) == rows(want)
        assert df_rows(tx.read("s.m", where="name = 'C' AND day = 'd1'")) == rows(want[1:])
    assert rows(lake.read_arrow("s.m")) == rows(want)
    dt = deltalake.DeltaTable(lake.table_location("s.m"))
    assert rows(sql_rows(dt, "SELECT * FROM t")) == rows(want)
    metrics = lake.optimize("s.m", zorder_by=["name"], engine="spark")  # read and written by the data source
    assert metrics.files_added >= 1
    assert rows(lake.read_arrow("s.m")) == rows(want)
    assert rows(sql_rows(deltalake.DeltaTable(lake.table_location("s.m")), "SELECT * FROM t")) == rows(want)


def test_spark_reads_renamed_and_dropped_struct_fields(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("s.n", "id long, s struct<a: int, c: string>", properties={"delta.columnMapping.mode": "name"})
    with lake.transaction() as tx:
        tx.append("s.n", spark.createDataFrame([(1, (10, "x")), (2, (20, "y"))], "id long, s struct<a:int, c:string>"))
    with lake.transaction() as tx:
        tx.alter_table("s.n", rename_columns={"s.a": "b"}, drop_columns=["s.c"])
        tx.append("s.n", spark.createDataFrame([(3, (30,))], "id long, s struct<b:int>"))
    want = [{"id": 1, "s": {"b": 10}}, {"id": 2, "s": {"b": 20}}, {"id": 3, "s": {"b": 30}}]
    with lake.transaction() as tx:
        df = tx.read("s.n")
        assert df.schema.simpleString() == "struct<id:bigint,s:struct<b:int>>"
        assert df_rows(df) == rows(want)
        assert df_rows(tx.read("s.n", where="s.b >= 20")) == rows(want[1:])
        assert tx.delete("s.n", "s.b = 20") == 1
    dt = deltalake.DeltaTable(lake.table_location("s.n"))
    assert rows(sql_rows(dt, "SELECT * FROM t")) == rows([want[0], want[2]])
