"""Writes with Spark's own Parquet writer (``spark_writer="native"``/``"auto"`` on local lakehouses).

Checked: the files carry what the table stores (TIMESTAMP_MICROS, table types, table column names), their Delta
statistics (read from the footers) equal those the Arrow writer computes for the same rows, partition values
equal the Arrow writer's, delta-rs reads the same rows, a DataFrame the native path cannot write as the table
stores it goes through the data source under ``auto`` and is a ``ValueError`` under ``native``, nulls in a
non-nullable column are a typed error that leaves nothing behind, and the session's settings are restored.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import deltars_read, df_rows, staging_objects, txid_files
from txlake.errors import SchemaMismatchError
from txlake.spark import SparkEngine

SPARK_VERSION_KEY = b"org.apache.spark.version"

STATS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("nan", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("wide", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("long_s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("b", pa.bool_()),
        ("bin", pa.binary()),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string()), ("inner", pa.struct([("z", pa.date32())]))])),
        ("arr", pa.list_(pa.int64())),
        ("mp", pa.map_(pa.string(), pa.int64())),
    ]
)
STATS_DDL = (
    "id long not null, i32 int, f64 double, nan double, dec decimal(10,2), wide decimal(38,10), s string, "
    "long_s string, d date, ts timestamp, ntz timestamp_ntz, b boolean, bin binary, "
    "st struct<x:int, y:string, inner:struct<z:date>>, arr array<bigint>, mp map<string,bigint>"
)


def stats_rows() -> list[dict[str, Any]]:
    out = []
    for i in range(40):
        out.append(
            {
                "id": i,
                "i32": None if i % 7 == 0 else i * 3 - 50,
                "f64": i / 3 - 2.0,
                "nan": float("nan") if i == 11 else float(i),
                "dec": Decimal(i * 101 - 999) / 100,
                "wide": Decimal("1234567890123456789.0123456789") + i,
                "s": None if i % 5 == 0 else f"name-{i:03d}",
                "long_s": "x" * (20 + i),  # the longest are cut (min) or dropped (max)
                "d": date(2024, 1, 1 + i % 28),
                "ts": datetime(2024, 3, 1, 12, 0, 0, 123456 + i, tzinfo=UTC),  # millisecond rounding
                "ntz": datetime(1999, 12, 31, 23, 59, 59, 999000 + i),
                "b": i % 2 == 0,
                "bin": bytes([i]),
                "st": None
                if i % 9 == 0
                else {"x": i, "y": None if i % 4 else "y", "inner": {"z": date(2000, 1, 1 + i % 20)}},
                "arr": [i, None],
                "mp": [("k", i)],
            }
        )
    return out


def stats_df(spark: SparkSession, data: list[dict[str, Any]]) -> DataFrame:
    spark_rows = [r | {"mp": dict(r["mp"])} for r in data]
    return spark.createDataFrame(spark_rows, STATS_DDL).repartition(1)


def native_lake(tmp_path: Path, spark: SparkSession, writer: str = "native") -> txlake.Lakehouse:
    return txlake.connect((tmp_path / "lake").as_uri(), spark=spark, spark_reader="native", spark_writer=writer)  # type: ignore[arg-type]


def footer_metadata(lake: txlake.Lakehouse, name: str) -> list[dict[bytes, bytes]]:
    root = Path(lake.table_location(name).removeprefix("file://"))
    return [
        pq.read_metadata(root / unquote(a.path)).metadata or {}
        for a in lake.snapshot().delta_snapshot(name).files.values()
    ]


def only_stats(lake: txlake.Lakehouse, name: str) -> dict[str, Any]:
    files = list(lake.snapshot().delta_snapshot(name).files.values())
    assert len(files) == 1
    doc = files[0].parsed_stats()
    assert doc is not None
    return doc


def test_footer_stats_equal_arrow_stats(tmp_path: Path, spark: SparkSession) -> None:
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.native", STATS_SCHEMA)
    lake.create_table("s.arrow", STATS_SCHEMA)
    data = stats_rows()
    with lake.transaction() as tx:
        tx.append("s.native", stats_df(spark, data))
        tx.append("s.arrow", pa.Table.from_pylist(data, schema=STATS_SCHEMA))
    assert all(SPARK_VERSION_KEY in m for m in footer_metadata(lake, "s.native"))
    assert not any(SPARK_VERSION_KEY in m for m in footer_metadata(lake, "s.arrow"))
    native, arrow = only_stats(lake, "s.native"), only_stats(lake, "s.arrow")
    assert native["numRecords"] == arrow["numRecords"] == 40
    assert native["minValues"] == arrow["minValues"]
    assert native["maxValues"] == arrow["maxValues"]
    # list and map columns get no null count from footers (their leaves count element nulls)
    assert native["nullCount"] == {k: v for k, v in arrow["nullCount"].items() if k not in ("arr", "mp")}
    assert "nan" not in native["minValues"] and "long_s" not in native["maxValues"]
    assert native["minValues"]["ts"] == "2024-03-01T12:00:00.123Z"
    assert native["maxValues"]["ts"] == "2024-03-01T12:00:00.124Z"
    expected = rows(pa.Table.from_pylist(data, schema=STATS_SCHEMA))
    assert df_rows(lake.snapshot().read("s.native")) == expected
    assert rows(lake.read_arrow("s.native")) == expected


def test_files_store_the_table_types(tmp_path: Path, spark: SparkSession) -> None:
    """TIMESTAMP_MICROS whatever the session says; narrower DataFrame columns are cast to the table's types."""
    lake = native_lake(tmp_path, spark)
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("amount", pa.decimal128(12, 2))])
    lake.create_table("s.t", schema)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        df = spark.sql("SELECT CAST(1 AS INT) AS ID, TIMESTAMP'2024-05-06 07:08:09.123456' AS ts, 1.25BD AS amount")
        with lake.transaction() as tx:
            assert tx.append("s.t", df) == 1
        assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96"
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    root = Path(lake.table_location("s.t").removeprefix("file://"))
    (add,) = lake.snapshot().delta_snapshot("s.t").files.values()
    stored = pq.read_schema(root / unquote(add.path))
    assert stored.names == ["id", "ts", "amount"]
    assert [stored.field(n).type for n in stored.names] == list(schema.types)
    assert pq.ParquetFile(root / unquote(add.path)).schema.column(1).physical_type == "INT64"
    assert rows(deltars_read(lake.table_location("s.t"))) == rows(
        pa.table(
            {"id": [1], "ts": [datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)], "amount": [Decimal("1.25")]},
            schema=schema,
        )
    )


def test_partitioned_native_write_matches_arrow(tmp_path: Path, spark: SparkSession) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("s", pa.string()),
            ("n", pa.int16()),
            ("d", pa.date32()),
            ("dec", pa.decimal128(6, 2)),
            ("flag", pa.bool_()),
            ("v", pa.float64()),
        ]
    )
    parts = ["s", "n", "d", "dec", "flag"]
    data = [
        {"id": 1, "s": "x/y é%", "n": 1, "d": date(2024, 1, 1), "dec": Decimal("1.50"), "flag": True, "v": 1.0},
        {"id": 2, "s": None, "n": None, "d": None, "dec": None, "flag": None, "v": 2.0},
        {"id": 3, "s": "a=b c", "n": -3, "d": date(1999, 12, 31), "dec": Decimal("-2.00"), "flag": False, "v": 3.0},
        {"id": 4, "s": "", "n": 4, "d": date(2024, 1, 1), "dec": Decimal("0.00"), "flag": True, "v": 4.0},
        {"id": 5, "s": "x/y é%", "n": 1, "d": date(2024, 1, 1), "dec": Decimal("1.50"), "flag": True, "v": 5.0},
    ]
    lake = native_lake(tmp_path, spark)
    lake.create_table("p.native", schema, partition_by=parts)
    lake.create_table("p.arrow", schema, partition_by=parts)
    ddl = "id long, s string, n smallint, d date, dec decimal(6,2), flag boolean, v double"
    with lake.transaction() as tx:
        tx.append("p.native", spark.createDataFrame([tuple(r.values()) for r in data], ddl))
        tx.append("p.arrow", pa.Table.from_pylist(data, schema=schema))
    snap = lake.snapshot()

    def layout(name: str) -> dict[tuple[str, tuple[tuple[str, str | None], ...]], int]:
        """Rows per (directory, partition values)."""
        out: dict[tuple[str, tuple[tuple[str, str | None], ...]], int] = {}
        for a in snap.delta_snapshot(name).files.values():
            key = (a.path.rsplit("/", 1)[0], tuple(sorted(a.partition_values.items())))
            out[key] = out.get(key, 0) + (a.num_records or 0)
        return out

    assert layout("p.native") == layout("p.arrow")
    assert len(layout("p.native")) == 4  # rows 1 and 5 share a partition; "" and null are the same one
    assert all(SPARK_VERSION_KEY in m for m in footer_metadata(lake, "p.native"))
    expected = rows(pa.Table.from_pylist([r | {"s": r["s"] or None} for r in data], schema=schema))
    assert rows(lake.read_arrow("p.native")) == expected
    assert df_rows(snap.read("p.native")) == expected
    assert rows(deltars_read(lake.table_location("p.native"))) == expected
    assert snap.read("p.native", where="d = DATE'1999-12-31'").count() == 1


def test_auto_falls_back_and_native_explains(tmp_path: Path, spark: SparkSession) -> None:
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("st", pa.struct([("a", pa.int64())]))])
    auto = native_lake(tmp_path, spark, writer="auto")
    auto.create_table("s.byfloat", schema, partition_by=["f"])
    auto.create_table("s.flat", schema)
    strict = txlake.connect(auto.uri, spark=spark, spark_writer="native", create=False)
    ok = spark.sql("SELECT 1L AS id, 1.5D AS f, named_struct('a', 1L) AS st")
    narrow_struct = spark.sql("SELECT 2L AS id, 2.5D AS f, named_struct('a', 2) AS st")  # struct<a:int>
    cases = [
        ("s.byfloat", ok, None, "partition column 'f' of type double"),
        ("s.flat", narrow_struct, None, "column 'st' is struct<a:int>"),
        ("s.flat", ok, "id = 1", "an overwrite with a condition"),
    ]
    for name, df, where, reason in cases:
        with strict.transaction() as tx, pytest.raises(ValueError, match=reason):
            if where is None:
                tx.append(name, df)
            else:
                tx.overwrite(name, df, where=where)
        with auto.transaction() as tx:
            if where is None:
                tx.append(name, df)
            else:
                tx.overwrite(name, df, where=where)
            assert not any(SPARK_VERSION_KEY in m for m in _staged_footers(auto, name, tx.txid))
    assert sorted(auto.read_arrow("s.flat").column("id").to_pylist()) == [1, 2]
    assert auto.read_arrow("s.byfloat").num_rows == 1
    with auto.transaction() as tx:
        tx.append("s.flat", ok)
        assert all(SPARK_VERSION_KEY in m for m in _staged_footers(auto, "s.flat", tx.txid))
    engine = strict.engine
    assert isinstance(engine, SparkEngine) and engine.writer == "native"


def test_native_writer_needs_a_local_lakehouse(spark: SparkSession) -> None:
    lake = txlake.connect("memory://native-writer", spark=spark, spark_writer="native")
    lake.create_table("s.t", pa.schema([("id", pa.int64())]))
    with lake.transaction() as tx, pytest.raises(ValueError, match="not on the local file system"):
        tx.append("s.t", spark.range(3))
    assert lake.read_arrow("s.t").num_rows == 0


def _staged_footers(lake: txlake.Lakehouse, name: str, txid: str) -> list[dict[bytes, bytes]]:
    files = txid_files(lake, name, txid)
    assert files
    return [pq.read_metadata(lake.store.local_path(f)).metadata or {} for f in files]  # type: ignore[arg-type]


def test_nulls_in_non_nullable_column_leave_nothing(tmp_path: Path, spark: SparkSession) -> None:
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("x", pa.string())]))
    bad = spark.createDataFrame([(1, "a"), (None, "b"), (3, "c")], "id long, x string").repartition(2)
    tx = lake.transaction()
    with pytest.raises(SchemaMismatchError, match="does not allow") as err, tx:
        tx.append("s.t", bad)
    assert list(err.value.columns) == ["id"]
    assert tx.status == "aborted"
    assert txid_files(lake, "s.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    assert lake.read_arrow("s.t").num_rows == 0


def test_empty_dataframe_and_staging_cleanup(tmp_path: Path, spark: SparkSession) -> None:
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.t", pa.schema([("id", pa.int64())]))
    with lake.transaction() as tx:
        assert tx.append("s.t", spark.range(0)) == 0
        assert tx.append("s.t", spark.range(5, numPartitions=2)) == 5
        assert staging_objects(lake, tx.txid) == []
        names = [os.path.basename(p) for p in txid_files(lake, "s.t", tx.txid)]
    assert len(names) == 2 and all(n.startswith(f"part-{tx.txid}-") for n in names)
    assert sorted(lake.read_arrow("s.t").column("id").to_pylist()) == [0, 1, 2, 3, 4]
    commit = json.dumps(sorted(a.path for a in lake.snapshot().delta_snapshot("s.t").files.values()))
    assert tx.txid in commit


NULLABILITY = pa.schema(
    [
        ("id", pa.int64()),
        pa.field("n", pa.int64(), nullable=False),
        pa.field("st", pa.struct([pa.field("a", pa.int64(), nullable=False), ("b", pa.string())]), nullable=False),
        ("arr", pa.list_(pa.field("element", pa.int64(), nullable=False))),
        ("mp", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
        pa.field("p", pa.string(), nullable=False),
    ]
)
NULLABILITY_DDL = "id long, n long, st struct<a:long, b:string>, arr array<long>, mp map<string,long>, p string"
GOOD = "1L, 1L, named_struct('a', 1L, 'b', CAST(NULL AS STRING)), CAST(NULL AS array<bigint>), map('k', 1L), 'x'"


@pytest.mark.parametrize(
    ("column", "bad_row"),
    [
        ("n", "2L, NULL, named_struct('a', 1L, 'b', 'b'), array(1L), map('k', 1L), 'x'"),
        ("st", "2L, 2L, NULL, array(1L), map('k', 1L), 'x'"),
        ("st", "2L, 2L, named_struct('a', CAST(NULL AS BIGINT), 'b', 'b'), array(1L), map('k', 1L), 'x'"),
        ("arr", "2L, 2L, named_struct('a', 1L, 'b', 'b'), array(1L, NULL), map('k', 1L), 'x'"),
        ("mp", "2L, 2L, named_struct('a', 1L, 'b', 'b'), array(1L), map('k', CAST(NULL AS BIGINT)), 'x'"),
        ("p", "2L, 2L, named_struct('a', 1L, 'b', 'b'), array(1L), map('k', 1L), NULL"),
        ("p", "2L, 2L, named_struct('a', 1L, 'b', 'b'), array(1L), map('k', 1L), ''"),
    ],
    ids=["column", "struct", "struct-field", "array-element", "map-value", "partition", "partition-empty"],
)
def test_the_job_enforces_the_tables_nullability(
    tmp_path: Path, spark: SparkSession, column: str, bad_row: str
) -> None:
    """The DataFrame may hold nulls anywhere (Spark reads everything as nullable); the table decides."""
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.t", NULLABILITY, partition_by=["p"])
    frame = spark.sql(f"SELECT * FROM VALUES ({GOOD}), ({bad_row}) AS t(id, n, st, arr, mp, p)")
    frame = spark.createDataFrame(frame.rdd, NULLABILITY_DDL)
    tx = lake.transaction()
    with pytest.raises(SchemaMismatchError, match="nulls the table does not allow") as err, tx:
        tx.append("s.t", frame)
    assert list(err.value.columns) == [column]
    assert txid_files(lake, "s.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    assert lake.read_arrow("s.t").num_rows == 0


def test_nullable_dataframes_without_nulls_are_written_natively(tmp_path: Path, spark: SparkSession) -> None:
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.t", NULLABILITY, partition_by=["p"])
    frame = spark.createDataFrame(spark.sql(f"SELECT {GOOD}").rdd, NULLABILITY_DDL)
    with lake.transaction() as tx:
        tx.append("s.t", frame)
    with lake.transaction() as tx:  # read back by Spark (all nullable), rewritten by Spark's writer
        tx.update("s.t", set={"n": "n + 1"}, where="id = 1")
        tx.append("s.t", tx.read("s.t").withColumn("id", F.lit(2)))
    assert all(SPARK_VERSION_KEY in m for m in footer_metadata(lake, "s.t"))
    assert sorted((r["id"], r["n"]) for r in lake.read_arrow("s.t").to_pylist()) == [(1, 2), (2, 2)]
    assert rows(deltars_read(lake.table_location("s.t"))) == rows(lake.read_arrow("s.t"))


def test_partition_key_prefix_in_a_column_name(tmp_path: Path, spark: SparkSession) -> None:
    schema = pa.schema([("id", pa.int64()), ("__txlake_p0", pa.string()), ("p", pa.string())])
    auto = native_lake(tmp_path, spark, writer="auto")
    auto.create_table("s.t", schema, partition_by=["p"])
    df = spark.sql("SELECT 1L AS id, 'zz' AS __txlake_p0, 'pp' AS p")
    with auto.transaction() as tx:
        tx.append("s.t", df)
    assert auto.read_arrow("s.t").to_pylist() == [{"id": 1, "__txlake_p0": "zz", "p": "pp"}]
    strict = txlake.connect(auto.uri, spark=spark, spark_writer="native", create=False)
    with strict.transaction() as tx, pytest.raises(ValueError, match="prefix"):
        tx.append("s.t", df)


def test_files_without_column_statistics(tmp_path: Path, spark: SparkSession) -> None:
    """A session that turned Parquet statistics off: files get row counts only, nothing is refused."""
    lake = native_lake(tmp_path, spark)
    lake.create_table("s.t", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    spark.conf.set("parquet.column.statistics.enabled", "false")
    try:
        with lake.transaction() as tx:
            assert tx.append("s.t", spark.range(5)) == 5
    finally:
        spark.conf.unset("parquet.column.statistics.enabled")
    adds = list(lake.snapshot().delta_snapshot("s.t").files.values())
    assert sum(a.num_records or 0 for a in adds) == 5
    assert all(
        a.parsed_stats() == {"numRecords": a.num_records, "minValues": {}, "maxValues": {}, "nullCount": {}}
        for a in adds
    )
    assert lake.snapshot().read("s.t", where="id = 3").count() == 1
