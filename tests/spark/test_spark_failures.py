"""A Spark job that fails mid-write leaves no visible data and no data files of the failed write.

Guarantee tested, for both writers (``native``: Spark's Parquet writer; ``python``: the txlake data source):
after ``tx.append(df)`` raises, no file of that write exists and nothing was staged. The native writer's job
writes below ``_txlake/txns/<txid>/spark/<write-id>.out`` (Spark's commit protocol aborts it, the driver deletes
the directory) and moves files into the table only after the job succeeded. With the data source, files of
tasks that succeeded are deleted by the job's ``abort()``; files of the failed or cancelled tasks, whose commit
messages never arrive, are deleted by the driver from the task manifests. When the transaction then
aborts, its other files go too; when it commits, exactly its staged files are published. Files of attempts
that lose to another attempt of the same task (retries, speculation) are removed the same way after a
successful job. A failed job is reported as soon as one task failed, while other attempts still run (or have
not yet begun writing); the driver cleans up only once Spark has seen every attempt of the job end. Not covered:
an executor Spark has given up on while it still runs may leave files; they carry the transaction id for
garbage collection.

Whatever the outcome, nothing of a transaction's Spark writes stays below ``_txlake/txns/``, on a local
lakehouse not even directories.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import txlake
from tests.interop.deltars import rows
from tests.spark.conftest import writer_for
from tests.spark.helpers import deltars_read, df_rows, staging_objects, txid_files
from txlake.errors import SchemaMismatchError
from txlake.spark import SparkEngine
from txlake.spark.engine import ReaderChoice
from txlake.spark.writing import (
    TaskWriter,
    clear_staging,
    commit_write,
    new_write_id,
    remove_staging_dirs,
    remove_unrecorded,
)
from txlake.txn.engine import SparkWriter, TableLocation, WriteSpec

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int64())])
STRICT_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("x", pa.int64())])


@pytest.fixture
def small_batches(spark: SparkSession) -> Iterator[None]:
    """Arrow batches of 50 rows, so a task writes several files before it reaches a failing row."""
    old = str(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    yield
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)


@pytest.fixture
def file_per_batch_lake(tmp_path: Path, spark: SparkSession, spark_reader: ReaderChoice) -> txlake.Lakehouse:
    # with the data source writer every batch becomes a file
    engine = SparkEngine(spark, reader=spark_reader, writer=writer_for(spark_reader), target_file_bytes=1)
    return txlake.connect((tmp_path / "lake").as_uri(), spark=engine)


def failing_rows(spark: SparkSession, fail_at: int) -> DataFrame:
    """1000 rows in 4 tasks; the UDF raises on ``id == fail_at`` (inside the last task)."""

    def check(value: int) -> int:  # defined here: pickled by value into the Python workers
        if value == fail_at:
            raise ValueError(f"boom at {value}")
        return value * 2

    udf = F.udf(check, "long", useArrow=False)
    return spark.range(0, 1000, numPartitions=4).withColumn("x", udf("id"))


def test_failed_write_then_abort(
    file_per_batch_lake: txlake.Lakehouse, spark: SparkSession, small_batches: None
) -> None:
    lake = file_per_batch_lake
    lake.create_table("s.t", SCHEMA)
    before = lake.version()
    tx = lake.transaction()
    with pytest.raises(PySparkException), tx:
        tx.append("s.t", spark.createDataFrame([(1, 1)], "id long, x long"))  # a good write, staged
        assert len(txid_files(lake, "s.t", tx.txid)) == 1
        tx.append("s.t", failing_rows(spark, fail_at=950))
    assert tx.status == "aborted"
    assert lake.version() == before
    assert txid_files(lake, "s.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    assert lake.snapshot().read("s.t").count() == 0
    assert deltars_read(lake.table_location("s.t")).num_rows == 0


def test_failed_write_then_commit(
    file_per_batch_lake: txlake.Lakehouse, spark: SparkSession, small_batches: None
) -> None:
    lake = file_per_batch_lake
    lake.create_table("s.t", SCHEMA)
    with lake.transaction() as tx:
        good = spark.range(0, 100, numPartitions=2).selectExpr("id", "id * 2 AS x")
        assert tx.append("s.t", good) == 100
        staged = set(txid_files(lake, "s.t", tx.txid))
        assert len(staged) >= 2
        with pytest.raises(PySparkException):
            tx.append("s.t", failing_rows(spark, fail_at=999))
        # the failed statement removed its files and staged nothing; earlier statements are intact
        assert set(txid_files(lake, "s.t", tx.txid)) == staged
        assert df_rows(tx.read("s.t")) == rows(tx.read_arrow("s.t"))
        assert tx.read("s.t").count() == 100
    root = lake.snapshot().entry("s.t").path
    published = {f"{root}/{a.path}" for a in lake.snapshot().delta_snapshot("s.t").files.values()}
    assert set(txid_files(lake, "s.t", tx.txid)) == published
    assert deltars_read(lake.table_location("s.t")).num_rows == 100


def test_unrecorded_attempts_are_removed(tmp_path: Path) -> None:
    """Two attempts of one task write files; only the committed attempt's files stay (no Spark needed)."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", SCHEMA, partition_by=["x"])
    entry = lake.snapshot().entry("s.t")
    location = TableLocation.of(lake.store, entry, lake.snapshot().delta_snapshot("s.t").metadata)
    spec = WriteSpec(location, txid="f" * 32)
    write_id = new_write_id()
    batch = pa.record_batch({"id": [1, 2, 3], "x": [1, 1, 2]}, schema=SCHEMA)
    lost = TaskWriter(spec, write_id).write([batch])
    won = TaskWriter(spec, write_id).write([batch])
    assert len(lost.adds) == len(won.adds) == 2  # one file per partition value
    record = commit_write(spec, write_id, [won])
    assert len(txid_files(lake, "s.t", spec.txid)) == 4
    removed = remove_unrecorded(lake.store, spec, write_id, keep=record.adds)
    assert len(removed) == 2
    left = {f"{entry.path}/{unquote(a.path)}" for a in record.adds}
    assert set(txid_files(lake, "s.t", spec.txid)) == left
    clear_staging(lake.store, spec.txid, write_id)
    assert staging_objects(lake, spec.txid) == []


def txns_entries(root: Path) -> list[str]:
    """Every file and directory below ``<root>/_txlake/txns``."""
    txns = root / "_txlake" / "txns"
    return sorted(str(p.relative_to(txns)) for p in txns.rglob("*"))


class StopTransaction(Exception):
    """Raised in a transaction block to make it abort."""


@pytest.mark.parametrize("writer", ["native", "python"])
def test_transactions_leave_nothing_in_txns(
    tmp_path: Path, spark: SparkSession, small_batches: None, writer: SparkWriter
) -> None:
    """Spark appends (some failing in a task, some refused by a task) in committed and aborted transactions.

    The first two are resumable: they hold a lease and write a sublog into the same directory, as every
    transaction that runs longer than a few seconds does (in a loaded CI run, this one).
    """
    root = tmp_path / "lake"
    engine = SparkEngine(spark, writer=writer, target_file_bytes=1)
    lake = txlake.connect(root.as_uri(), spark=engine)
    lake.create_table("s.t", SCHEMA)
    lake.create_table("s.p", SCHEMA, partition_by=["x"])
    lake.create_table("s.strict", STRICT_SCHEMA)
    appends = 3

    def rows_from(start: int) -> DataFrame:
        return spark.range(start, start + 100, numPartitions=2).selectExpr("id", "id % 3 AS x")

    def refused() -> DataFrame:  # a null in the non-nullable column: a task refuses its rows
        return spark.createDataFrame([(1, 1), (None, 2)], "id long, x long")

    with lake.transaction(resumable=True) as tx:
        for i in range(appends):
            assert tx.append("s.t", rows_from(100 * i)) == 100
            assert tx.append("s.p", rows_from(100 * i)) == 100
        with pytest.raises(PySparkException):
            tx.append("s.t", failing_rows(spark, fail_at=999))
        with pytest.raises(SchemaMismatchError):
            tx.append("s.strict", refused())
    assert tx.status == "committed"
    assert txns_entries(root) == []
    assert lake.snapshot().read("s.t").count() == lake.snapshot().read("s.p").count() == 100 * appends
    published = set(lake.snapshot().delta_snapshot("s.t").files)
    assert {p.rsplit("/", 1)[-1] for p in txid_files(lake, "s.t", tx.txid)} == published

    aborted = lake.transaction(resumable=True)
    with pytest.raises(StopTransaction), aborted:
        for i in range(appends):
            aborted.append("s.t", rows_from(1000 + 100 * i))
            aborted.append("s.p", rows_from(1000 + 100 * i))
        with pytest.raises(SchemaMismatchError):
            aborted.append("s.strict", refused())
        raise StopTransaction
    assert aborted.status == "aborted"
    assert txns_entries(root) == []

    failed = lake.transaction()
    with pytest.raises(PySparkException), failed:  # the failed statement aborts the transaction
        for i in range(appends):
            failed.append("s.p", rows_from(2000 + 100 * i))
        failed.append("s.t", failing_rows(spark, fail_at=999))
    assert failed.status == "aborted"
    assert txns_entries(root) == []
    for name in ("s.t", "s.p", "s.strict"):
        assert txid_files(lake, name, aborted.txid) == txid_files(lake, name, failed.txid) == []
    assert lake.snapshot().read("s.t").count() == 100 * appends


def test_only_empty_own_staging_dirs_are_removed(tmp_path: Path) -> None:
    """A write removes its own empty directories; another write's, or anything not named by ids, stays."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    txid, mine, theirs = "a" * 32, new_write_id(), new_write_id()
    spark_dir = tmp_path / "lake" / "_txlake" / "txns" / txid / "spark"
    for name in (f"{mine}.tasks", f"{mine}.rejected", f"{theirs}.tasks"):
        (spark_dir / name).mkdir(parents=True)
    (spark_dir / f"{theirs}.tasks" / "attempt.json").write_text("{}")
    remove_staging_dirs(lake.store, txid, mine)
    assert sorted(p.name for p in spark_dir.iterdir()) == [f"{theirs}.tasks"]
    (spark_dir / f"{theirs}.tasks" / "attempt.json").unlink()
    remove_staging_dirs(lake.store, "..", theirs)  # not a transaction id: nothing is touched
    remove_staging_dirs(lake.store, txid, "../" + theirs)
    assert (spark_dir / f"{theirs}.tasks").is_dir()
    remove_staging_dirs(lake.store, txid, theirs)
    assert txns_entries(tmp_path / "lake") == []


def test_a_ctrl_c_just_before_a_job_starts_cancels_that_job_too(spark: SparkSession) -> None:
    """The CLI's Ctrl-C handling (``InterruptWatch``): a Ctrl-C that lands before the interrupted call submitted
    its job (``toArrow`` starts it in a JVM thread, then waits for it in its ``finally``) used to cancel nothing,
    and the command waited for a job of hours. Here the handler runs first, then such a job starts: it must be
    cancelled (without the repeated cancellation this test runs into its timeout)."""
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

    from txlake.cli.jvm import InterruptWatch

    watch = InterruptWatch(spark)
    with watch:
        with pytest.raises(KeyboardInterrupt):
            watch._handle(signal.SIGINT, None)  # the Ctrl-C: no job runs yet
        time.sleep(1.0)  # the cancellation it started has run: the job comes after it
        endless = spark.range(10**11).crossJoin(spark.range(10).toDF("j")).selectExpr("max(id + j) AS m")
        with pytest.raises((PySparkException, Py4JJavaError)):
            endless.toArrow()
    assert watch.interrupted
    assert spark.range(3).count() == 3  # once the block ended, jobs run again
