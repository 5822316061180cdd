"""File pruning: txlake prunes by ``where`` before planning; the data source prunes by Spark's pushed filters.

Asserted on what is planned (read tasks of the Python data source, input files of the native reader), never
on timing. Spark applies every filter itself, so results must equal an unpruned read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession, datasource

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import df_rows
from txlake.delta.actions import Add
from txlake.spark.planning import PackingPolicy, filter_sql, pack_files
from txlake.spark.source import TxlakeDataSource, requested_columns
from txlake.spark.specs import encode_scan
from txlake.txn.engine import ScanSpec, TableLocation

SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.string()), ("v", pa.float64()), ("day", pa.date32())])
FILES = 8


@contextlib.contextmanager
def one_file_per_task(spark: SparkSession) -> Iterator[None]:
    """Make every planned file its own read task, so the task count is the planned file count."""
    old = str(spark.conf.get("spark.sql.files.maxPartitionBytes"))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1b")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)


def fill(lake: txlake.Lakehouse, spark: SparkSession, name: str = "s.t", partition_by: list[str] | None = None) -> None:
    """``FILES`` files, file k holding ids 10k..10k+9 (disjoint min/max ranges), grp 'g<k % 2>'."""
    lake.create_table(name, SCHEMA, partition_by=partition_by)
    with lake.transaction() as tx:
        for k in range(FILES):
            df = spark.range(10 * k, 10 * k + 10, numPartitions=1).selectExpr(
                "id", f"'g{k % 2}' AS grp", "CAST(id AS DOUBLE) / 2 AS v", f"DATE'2024-01-01' + {k} AS day"
            )
            tx.append(name, df)


@pytest.fixture
def lakes(tmp_path: Path, spark: SparkSession) -> tuple[txlake.Lakehouse, txlake.Lakehouse]:
    """The same lakehouse through the Python data source and through Spark's Parquet reader."""
    uri = (tmp_path / "lake").as_uri()
    return txlake.connect(uri, spark=spark, spark_reader="python"), txlake.connect(
        uri, spark=spark, spark_reader="native"
    )


CONDITIONS = [
    "id >= 60",
    "id < 15",
    "id = 42",
    "id IN (3, 77)",
    "id <> 5",
    "NOT (id > 10)",
    "v <= 4.5",
    "grp = 'g1'",
    "grp LIKE 'g%'",
    "day = DATE'2024-01-03'",
    "day > '2024-01-06'",
    "id IS NULL",
    "grp IS NOT NULL AND id BETWEEN 20 AND 29",
    "id = 1 OR id = 79",
    "id % 10 = 0",
]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_pushed_filters_prune_and_stay_exact(
    lakes: tuple[txlake.Lakehouse, txlake.Lakehouse],
    spark: SparkSession,
    condition: str,
) -> None:
    py, native = lakes
    fill(py, spark)
    with one_file_per_task(spark):
        full = py.snapshot().read("s.t")
        assert full.rdd.getNumPartitions() == FILES
        pushed = full.where(condition)  # filters Spark pushes into the data source prune its files
        planned = pushed.rdd.getNumPartitions()
        result = df_rows(pushed)
    expected_rows = py.read_arrow("s.t").to_pylist()
    # the reference: Spark's own reader, no txlake pruning at all
    assert result == df_rows(native.snapshot().read("s.t").where(condition))
    # files the filter cannot touch were not planned (min/max ranges are disjoint per file)
    hit = {r["id"] // 10 for r in native.snapshot().read("s.t").where(condition).collect()}
    assert len(hit) <= planned <= FILES
    assert len(expected_rows) == 10 * FILES


def test_pruning_counts(lakes: tuple[txlake.Lakehouse, txlake.Lakehouse], spark: SparkSession) -> None:
    py, native = lakes
    fill(py, spark)
    with one_file_per_task(spark):
        df = py.snapshot().read("s.t")
        assert df.where("id >= 60").rdd.getNumPartitions() == 2
        assert df.where("id = 42").rdd.getNumPartitions() == 1
        assert df.where("id IN (3, 77)").rdd.getNumPartitions() == 2
        assert df.where("day = DATE'2024-01-03'").rdd.getNumPartitions() == 1
        assert df.where("id > 1000").rdd.getNumPartitions() == 1  # nothing left: one empty task
        assert df.where("id > 1000").count() == 0
        # txlake's own pruning by where= (before the scan is planned), on both readers
        assert py.snapshot().read("s.t", where="id < 25").rdd.getNumPartitions() == 3
        with py.transaction() as tx:
            assert tx.read("s.t", where="id BETWEEN 30 AND 49").rdd.getNumPartitions() == 2
    assert len(native.snapshot().read("s.t", where="id < 25").inputFiles()) == 3
    assert len(native.snapshot().read("s.t").inputFiles()) == FILES
    with native.transaction() as tx:
        assert len(tx.read("s.t", where="id >= 70").inputFiles()) == 1
        assert df_rows(tx.read("s.t", where="id >= 70")) == rows(tx.read_arrow("s.t", where="id >= 70"))


def test_partition_pruning(lakes: tuple[txlake.Lakehouse, txlake.Lakehouse], spark: SparkSession) -> None:
    py, native = lakes
    fill(py, spark, "s.p", partition_by=["grp"])
    files = native.snapshot().read("s.p", where="grp = 'g0'").inputFiles()
    assert len(files) == FILES // 2
    assert all("/grp=g0/" in f for f in files)
    with one_file_per_task(spark):
        assert py.snapshot().read("s.p").where("grp = 'g1'").rdd.getNumPartitions() == FILES // 2
        assert py.snapshot().read("s.p", where="grp = 'g1' AND id < 20").rdd.getNumPartitions() == 1
    assert df_rows(py.snapshot().read("s.p").where("grp = 'g1'")) == rows(py.read_arrow("s.p", where="grp = 'g1'"))


# ---------------------------------------------------------------------------------------------- units


def test_filter_translation() -> None:
    ds = datasource
    assert filter_sql(ds.EqualTo(("id",), 1)) == "`id` = 1"
    assert filter_sql(ds.GreaterThanOrEqual(("a", "b"), 2.5)) == "`a`.`b` >= 2.5"
    assert filter_sql(ds.LessThan(("s",), "it's")) == "`s` < 'it\\'s'"
    assert filter_sql(ds.In(("d",), (Decimal("1.50"), None))) == "`d` IN (1.50, NULL)"
    assert filter_sql(ds.EqualTo(("d",), date(2024, 1, 2))) == "`d` = DATE '2024-01-02'"
    aware = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert filter_sql(ds.GreaterThan(("ts",), aware)) == "`ts` > TIMESTAMP '2024-01-02 03:04:05.000006'"
    assert filter_sql(ds.GreaterThan(("ntz",), datetime(2024, 1, 2))) == (
        "`ntz` > CAST('2024-01-02 00:00:00' AS TIMESTAMP_NTZ)"
    )
    assert filter_sql(ds.IsNull(("x",))) == "`x` IS NULL"
    assert filter_sql(ds.Not(ds.IsNotNull(("x",)))) == "NOT (`x` IS NOT NULL)"
    assert filter_sql(ds.EqualNullSafe(("x",), None)) == "`x` IS NULL"
    assert filter_sql(ds.Not(ds.EqualNullSafe(("x",), 3))) == "NOT (`x` <=> 3)"
    # only implied, not equivalent: usable alone, never under NOT
    assert filter_sql(ds.StringStartsWith(("s",), "ab")) == "`s` >= 'ab'"
    assert filter_sql(ds.Not(ds.StringStartsWith(("s",), "ab"))) is None
    assert filter_sql(ds.StringContains(("s",), "ab")) == "`s` IS NOT NULL"
    # no safe literal: no pruning from it
    assert filter_sql(ds.EqualTo(("b",), b"\x00")) is None
    assert filter_sql(ds.EqualTo(("f",), float("nan"))) is None
    assert filter_sql(ds.In(("b",), (b"\x00",))) is None


def _add(i: int, size: int) -> Add:
    return Add(path=f"f{i}.parquet", partition_values={}, size=size, modification_time=0)


def test_file_packing() -> None:
    few = [_add(i, 1000) for i in range(3)]
    assert [len(g) for g in pack_files(few, PackingPolicy(parallelism=2))] == [1, 1, 1]
    many = [_add(i, 1000) for i in range(100)]
    groups = pack_files(many, PackingPolicy(parallelism=2))
    assert len(groups) == 4  # 128 MiB tasks of ~4 MiB (open cost) per small file
    assert sorted(a.path for g in groups for a in g) == sorted(a.path for a in many)
    big = [_add(i, 200 * 1024 * 1024) for i in range(2)] + [_add(9, 10)]
    assert len(pack_files(big, PackingPolicy(parallelism=8))) == 3
    assert pack_files([], PackingPolicy()) == []
    assert [len(g) for g in pack_files(many, PackingPolicy(max_partition_bytes=1))] == [1] * 100


def test_python_reader_reads_only_the_requested_columns(
    lakes: tuple[txlake.Lakehouse, txlake.Lakehouse], spark: SparkSession
) -> None:
    """PySpark tells Python data sources no required columns: ``tx.read(columns=)`` (plus the columns of
    ``where``) is the schema handed to the data source, and its reader reads only those from the files."""
    python, native = lakes
    fill(python, spark)
    with python.transaction() as tx:
        df = tx.read("s.t", where="v > 30", columns=["day"])
        assert df.columns == ["day"]
        relation = df._jdf.queryExecution().analyzed().collectLeaves().head()  # what the data source yields
        assert list(relation.schema().fieldNames()) == ["v", "day"]
        assert df_rows(df) == rows(tx.read_arrow("s.t", where="v > 30", columns=["day"]))
    with native.transaction() as tx:
        assert df_rows(tx.read("s.t", where="v > 30", columns=["day"])) == df_rows(df)
    # the reader itself: batches of the requested columns only, in table order
    snap = python.snapshot()
    delta = snap.delta_snapshot("s.t")
    scan = ScanSpec(TableLocation.of(python.store, snap.entry("s.t"), delta.metadata), tuple(delta.files.values()))
    source = TxlakeDataSource({"scan": encode_scan(scan)})
    reader = source.reader(spark.createDataFrame([], "v double, day date").schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    assert batches and all(b.schema.names == ["v", "day"] for b in batches)
    assert sum(b.num_rows for b in batches) == 10 * FILES
    assert requested_columns(scan.table, source.schema(), None) is None
    with pytest.raises(ValueError, match="does not match"):
        requested_columns(scan.table, spark.createDataFrame([], "v string").schema, None)
