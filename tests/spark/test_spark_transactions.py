"""DataFrames in transactions: tx.read / append / overwrite, multi-statement and multi-table, on both readers.

Every result is checked three ways: against txlake's Arrow path (``read_arrow``), against Spark reading the
published tables (``lake.snapshot().read``), and against delta-rs reading the plain Delta tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import deltars_read, df_rows, staging_objects, txid_files
from txlake.errors import ConcurrentAppendError, PredicateError, TableNotFoundError
from txlake.spark import SparkEngine, register_source

ACCOUNTS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("owner", pa.string()), ("balance", pa.int64())])
AUDIT = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("note", pa.string())])


def accounts_df(spark: SparkSession, data: list[tuple[object, ...]]) -> DataFrame:
    return spark.createDataFrame(data, "id long, owner string, balance long")


def assert_published(lake: txlake.Lakehouse, name: str) -> list[tuple[tuple[str, object], ...]]:
    """Spark, txlake's Arrow path and delta-rs agree on the published table; returns its rows."""
    mine = rows(lake.read_arrow(name))
    assert df_rows(lake.snapshot().read(name)) == mine
    assert rows(deltars_read(lake.table_location(name))) == mine
    return mine


def test_multi_statement_multi_table(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("bank.accounts", ACCOUNTS)
    lake.create_table("bank.audit", AUDIT, partition_by=["day"])
    start = lake.version()
    with lake.transaction() as tx:
        n = tx.append("bank.accounts", accounts_df(spark, [(1, "ann", 100), (2, "bob", 50), (3, "cy", 0)]))
        assert n == 3
        tx.append("bank.audit", pa.table({"id": [1], "day": [date(2024, 1, 1)], "note": ["open"]}, schema=AUDIT))
        # read-your-writes, Spark and Arrow agree
        assert df_rows(tx.read("bank.accounts")) == rows(tx.read_arrow("bank.accounts"))
        rich = tx.read("bank.accounts", where="balance >= 50", columns=["id", "balance"])
        assert df_rows(rich) == rows(tx.read_arrow("bank.accounts", where="balance >= 50", columns=["id", "balance"]))
        # a DataFrame computed from a transactional read, appended to another table
        moved = tx.read("bank.accounts", where="balance > 0").selectExpr(
            "id", "DATE'2024-01-02' AS day", "concat('balance ', CAST(balance AS STRING)) AS note"
        )
        assert tx.append("bank.audit", moved) == 2
        assert df_rows(tx.read("bank.audit")) == rows(tx.read_arrow("bank.audit"))
        # an Arrow update after a Spark append sees the Spark-written files
        assert tx.update("bank.accounts", set={"balance": "balance + 1"}, where="id = 3") == 1
        # nothing is visible outside the transaction yet
        assert lake.version() == start
        assert lake.snapshot().read("bank.accounts").count() == 0
    assert lake.version() == start + 1
    assert assert_published(lake, "bank.accounts") == rows(
        pa.table({"id": [1, 2, 3], "owner": ["ann", "bob", "cy"], "balance": [100, 50, 1]})
    )
    audit = assert_published(lake, "bank.audit")
    assert len(audit) == 3


def test_overwrite_dataframe(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts_df(spark, [(i, f"o{i}", i * 10) for i in range(1, 7)]))
    with lake.transaction() as tx:
        # replace the rows with id <= 3 only: the new rows must all match the condition
        assert tx.overwrite("s.t", accounts_df(spark, [(1, "new", 1), (2, "new", 2)]), where="id <= 3") == 2
        assert df_rows(tx.read("s.t")) == rows(tx.read_arrow("s.t"))
    assert [r["id"] for r in lake.read_arrow("s.t").sort_by("id").to_pylist()] == [1, 2, 4, 5, 6]
    assert_published(lake, "s.t")
    with lake.transaction() as tx:
        assert tx.overwrite("s.t", accounts_df(spark, [(9, "only", 9)])) == 1
    assert assert_published(lake, "s.t") == rows(pa.table({"id": [9], "owner": ["only"], "balance": [9]}))


def test_overwrite_rows_outside_condition_are_rejected(
    lake: txlake.Lakehouse,
    spark: SparkSession,
) -> None:
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts_df(spark, [(1, "a", 1), (5, "b", 5)]))
    before = lake.version()
    tx = lake.transaction()
    with pytest.raises(PredicateError) as err:
        tx.overwrite("s.t", accounts_df(spark, [(2, "ok", 2), (7, "outside", 7)]), where="id < 5")
    assert err.value.expression == "id < 5"
    # the failed statement left nothing: no staged files, no files on storage, no staging objects
    assert txid_files(lake, "s.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    tx.commit()  # nothing staged: read-only commit
    assert lake.version() == before
    assert assert_published(lake, "s.t") == rows(pa.table({"id": [1, 5], "owner": ["a", "b"], "balance": [1, 5]}))


def test_snapshot_read_is_consistent_and_time_travels(
    lake: txlake.Lakehouse,
    spark: SparkSession,
) -> None:
    lake.create_table("s.a", ACCOUNTS)
    lake.create_table("s.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.a", accounts_df(spark, [(1, "x", 1)]))
        tx.append("s.b", accounts_df(spark, [(1, "x", 1)]))
    first = lake.version()
    with lake.transaction() as tx:
        tx.append("s.a", accounts_df(spark, [(2, "y", 2)]))
        tx.append("s.b", accounts_df(spark, [(2, "y", 2)]))
    old = lake.snapshot(first)
    new = lake.snapshot()
    for name in ("s.a", "s.b"):
        assert df_rows(old.read(name)) == rows(old.read_arrow(name))
        assert df_rows(new.read(name)) == rows(new.read_arrow(name))
        assert old.read(name).count() == 1
        assert new.read(name, where="id = 2", columns=["owner"]).collect()[0]["owner"] == "y"
    # the DataFrame of a snapshot keeps reading that snapshot after later commits
    frozen = new.read("s.a")
    with lake.transaction() as tx:
        tx.delete("s.a", where="id = 1")
    assert frozen.count() == 2
    assert lake.snapshot().read("s.a").count() == 1
    with pytest.raises(TableNotFoundError):
        lake.snapshot().read("s.nope")


def test_transactional_read_is_recorded_for_serializable(
    lake: txlake.Lakehouse,
    spark: SparkSession,
) -> None:
    """tx.read records predicate + files like read_arrow: a concurrent matching append aborts the reader."""
    lake.create_table("s.src", ACCOUNTS)
    lake.create_table("s.dst", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.src", accounts_df(spark, [(1, "a", 10)]))
    reader = lake.transaction(isolation="serializable")
    total = reader.read("s.src", where="id < 100").groupBy().sum("balance").collect()[0][0]
    reader.append("s.dst", accounts_df(spark, [(1, "sum", int(total))]))
    with lake.transaction() as other:  # concurrently adds a row the reader's predicate covers
        other.append("s.src", accounts_df(spark, [(2, "b", 5)]))
    with pytest.raises(ConcurrentAppendError):
        reader.commit()
    assert reader.status == "aborted"
    assert txid_files(lake, "s.dst", reader.txid) == []  # the aborted transaction's files are gone
    # a non-matching concurrent append does not conflict (the predicate, not the table, was read)
    reader = lake.transaction(isolation="serializable")
    reader.read("s.src", where="id < 100").count()
    reader.append("s.dst", accounts_df(spark, [(1, "x", 1)]))
    with lake.transaction() as other:
        other.append("s.src", accounts_df(spark, [(500, "c", 1)]))
    reader.commit()
    assert_published(lake, "s.dst")


def test_dataframe_columns_by_name_case_insensitive(
    lake: txlake.Lakehouse,
    spark: SparkSession,
) -> None:
    lake.create_table("s.t", ACCOUNTS)
    df = spark.createDataFrame([(7, 1, "z")], "BALANCE long, Id long, owner string")
    with lake.transaction() as tx:
        assert tx.append("s.t", df) == 1
        assert tx.append("s.t", spark.createDataFrame([(8,)], "id long")) == 1  # missing nullable columns: nulls
    assert assert_published(lake, "s.t") == rows(pa.table({"id": [1, 8], "owner": ["z", None], "balance": [7, None]}))


def test_empty_dataframe_and_empty_table(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        empty = tx.read("s.t")
        assert empty.count() == 0
        assert empty.columns == ["id", "owner", "balance"]
        assert tx.append("s.t", accounts_df(spark, []).where("id > 0")) == 0
        assert txid_files(lake, "s.t", tx.txid) == []
    assert lake.snapshot().read("s.t", where="id = 1").count() == 0


def test_partitioned_table(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("day", pa.date32()), ("v", pa.float64())])
    lake.create_table("s.p", schema, partition_by=["region", "day"])
    data = [
        (1, "eu", date(2024, 1, 1), 1.5),
        (2, "eu", date(2024, 1, 2), None),
        (3, "us/west é%", date(2024, 1, 1), 2.5),
        (4, None, None, 3.5),
        (5, "a=b", date(1999, 12, 31), -1.0),
    ]
    df = spark.createDataFrame(data, "id long, region string, day date, v double")
    with lake.transaction() as tx:
        assert tx.append("s.p", df.repartition(2)) == 5
        assert df_rows(tx.read("s.p")) == rows(tx.read_arrow("s.p"))
        assert sorted(r["id"] for r in tx.read("s.p", where="region = 'eu'").collect()) == [1, 2]
        assert sorted(r["id"] for r in tx.read("s.p", where="region IS NULL").collect()) == [4]
    published = assert_published(lake, "s.p")
    assert len(published) == 5
    files = lake.snapshot().delta_snapshot("s.p").files.values()
    assert {a.partition_values["region"] for a in files} == {"eu", "us/west é%", None, "a=b"}
    with lake.transaction() as tx:
        tx.overwrite("s.p", df.where("region = 'eu'").withColumn("v", df.v * 2), where="region = 'eu'")
    assert sorted((r["id"], r["v"]) for r in lake.snapshot().read("s.p", where="region = 'eu'").collect()) == [
        (1, 3.0),
        (2, None),
    ]
    assert_published(lake, "s.p")


def test_format_reads_committed_table(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    """``spark.read.format("txlake")`` with ``lake`` + ``table`` reads a committed version (no transaction)."""
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts_df(spark, [(1, "a", 1)]))
    first = lake.version()
    with lake.transaction() as tx:
        tx.append("s.t", accounts_df(spark, [(2, "b", 2)]))
    register_source(spark)  # (txlake registers the format itself only when it reads or writes through it)
    reader = spark.read.format("txlake").option("lake", lake.uri).option("table", "s.t")
    assert df_rows(reader.load()) == rows(lake.read_arrow("s.t"))
    assert df_rows(reader.option("version", str(first)).load()) == rows(lake.snapshot(first).read_arrow("s.t"))
    with pytest.raises(PySparkException):  # writes go through tx.append, never straight to a table
        accounts_df(spark, [(3, "c", 3)]).write.format("txlake").mode("append").option("lake", lake.uri).save()


def test_a_thread_of_its_own_writes_through_the_data_source(tmp_path: Path, spark: SparkSession) -> None:
    """PySpark serves each Python thread on a JVM thread of its own, without an active session, and Spark looks
    a Python data source up through the thread's active session: a thread whose first Spark call is a write
    through the data source (here an UPDATE) used to fail with ``ClassNotFoundException: txlake.DefaultSource``."""
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=spark, spark_reader="python", spark_writer="python")
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1, 2], "owner": ["a", "b"], "balance": [10, 20]}, schema=ACCOUNTS))
    errors: list[BaseException] = []

    def update(amount: int) -> None:
        try:
            with lake.transaction() as tx:
                tx.update("s.t", set={"balance": f"balance + {amount}"}, where="id = 1")
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    for amount in (1, 2):  # a new thread each time: a new JVM thread
        worker = threading.Thread(target=update, args=(amount,))
        worker.start()
        worker.join()
    assert errors == []
    expected = [{"id": 1, "owner": "a", "balance": 13}, {"id": 2, "owner": "b", "balance": 20}]
    assert rows(lake.read_arrow("s.t")) == rows(expected)


def test_lakehouses_on_two_sessions_write_through_the_data_source(tmp_path: Path, spark: SparkSession) -> None:
    """Two sessions of one application (``spark.newSession()``), a lakehouse on each, one thread: registering
    the data source on the second session used to fail (``DATA_SOURCE_ALREADY_EXISTS``: Spark checks the name
    against the thread's active session, the first one), and a write leaves the thread's active session as it
    found it (the caller's own code on the thread resolves through the session it made active)."""
    other = spark.newSession()
    lakes = [
        txlake.connect((tmp_path / name).as_uri(), spark=session, spark_reader="python", spark_writer="python")
        for name, session in (("a", spark), ("b", other))
    ]
    for lake in lakes:
        lake.create_table("s.t", ACCOUNTS)
        with lake.transaction() as tx:
            tx.append("s.t", pa.table({"id": [1], "owner": ["a"], "balance": [10]}, schema=ACCOUNTS))
    jvm = spark._jvm.SparkSession  # type: ignore[union-attr]
    jvm.setActiveSession(other._jsparkSession)
    try:
        for lake in (*lakes, *lakes):
            with lake.transaction() as tx:
                tx.update("s.t", set={"balance": "balance + 1"}, where="id = 1")
            assert jvm.getActiveSession().get().equals(other._jsparkSession)
    finally:
        jvm.setActiveSession(spark._jsparkSession)
    for lake in lakes:
        assert rows(lake.read_arrow("s.t")) == rows([{"id": 1, "owner": "a", "balance": 12}])


def test_the_data_source_is_registered_on_first_use_only(tmp_path: Path) -> None:
    """Registering the ``txlake`` format costs seconds: connecting with a session does not, the first data source
    read does, and registering again (from racing threads too) is harmless. In a process of its own: its session
    must not have the data source yet."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("registration_job.py")), str(tmp_path / "lake")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["after_connect"] is False and doc["after_read"] is True
    assert doc["rows"] == doc["direct"] == doc["expected"] == [[1, "a"], [2, "b"]]


def test_auto_reader_choice(tmp_path: Path, spark: SparkSession) -> None:
    """``auto``: Spark's Parquet reader for local tables with few partitions, the data source otherwise."""
    engine = SparkEngine(spark, native_max_partition_groups=2)
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=engine)
    lake.create_table("s.flat", ACCOUNTS)
    lake.create_table("s.parts", ACCOUNTS, partition_by=["owner"])
    df = accounts_df(spark, [(1, "a", 1), (2, "b", 2), (3, "c", 3)])
    with lake.transaction() as tx:
        tx.append("s.flat", df)
        tx.append("s.parts", df)
    snap = lake.snapshot()
    assert snap.read("s.flat").inputFiles() != []  # native
    assert snap.read("s.parts", where="owner <> 'c'").inputFiles() != []  # two partitions: native
    assert snap.read("s.parts").inputFiles() == []  # three partitions: the data source
    # (a table of partition columns only, which the data source would read, can no longer be created)
    for name in ("s.flat", "s.parts"):
        assert df_rows(snap.read(name)) == rows(snap.read_arrow(name))


def test_job_commit_runs_outside_the_users_process(tmp_path: Path, spark: SparkSession) -> None:
    """Why the data source's adds travel through storage: Spark runs ``commit()`` in a Python worker, not in
    this interpreter."""
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=spark, spark_writer="python")
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts_df(spark, [(1, "a", 1)]))
        written = set(txid_files(lake, "s.t", tx.txid))
        engine = lake.engine
        assert isinstance(engine, SparkEngine)
        assert engine.last_write is not None
        assert engine.last_write.committer.pid != os.getpid()
        assert staging_objects(lake, tx.txid) == []  # the record was taken over and removed
        assert {a.path.rsplit("/", 1)[-1] for a in engine.last_write.adds} == {p.rsplit("/", 1)[-1] for p in written}
    assert {a.path for a in lake.snapshot().delta_snapshot("s.t").files.values()} == {
        a.path for a in engine.last_write.adds
    }


def test_create_table_from_spark_schema(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

    schema = StructType(
        [
            StructField("id", LongType(), False),
            StructField("name", StringType()),
            StructField("amount", DecimalType(12, 2)),
            StructField("at", TimestampType()),
        ]
    )
    lake.create_table("sp.typed", schema)
    arrow = lake.snapshot().schema("sp.typed")
    assert arrow.names == ["id", "name", "amount", "at"]
    assert arrow.field("id").type == pa.int64() and not arrow.field("id").nullable
    assert arrow.field("amount").type == pa.decimal128(12, 2)
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    with lake.transaction() as tx:
        tx.append("sp.typed", spark.createDataFrame([(1, "a", None, None)], schema))
    assert lake.read_arrow("sp.typed").num_rows == 1
    with pytest.raises(TypeError):
        txlake.connect(lake.uri).create_table("sp.other", schema)  # no Spark engine: not convertible


def test_a_dataframe_with_new_columns_merges_the_schema(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    """``append(df, schema_mode="merge")`` adds the DataFrame's new columns; by default they are refused."""
    lake.create_table("s.evolving", "id long, owner string")
    with lake.transaction() as tx:
        tx.append("s.evolving", spark.createDataFrame([(1, "ann")], "id long, owner string"))
    wider = spark.createDataFrame([(2, "bob", "vip")], "id long, owner string, tier string")
    with pytest.raises(txlake.SchemaMismatchError), lake.transaction() as tx:
        tx.append("s.evolving", wider)
    with lake.transaction() as tx:
        assert tx.append("s.evolving", wider, schema_mode="merge") == 1
    assert lake.snapshot().schema("s.evolving").names == ["id", "owner", "tier"]
    assert assert_published(lake, "s.evolving") == rows(
        pa.table({"id": [1, 2], "owner": ["ann", "bob"], "tier": [None, "vip"]})
    )
