"""The driver program of the standalone-cluster test (``test_cluster.py``), run as its own process.

A Python process can hold one SparkContext; the Spark suites already hold a ``local[2]`` one, so the cluster
driver runs here, in a subprocess started with the same interpreter. It connects txlake to a session on
``--master spark://...``, runs a multi-table transaction with DataFrame appends (Spark's Parquet writer, the
default for a local lakehouse) and a ``tx.read``, a second transaction appending through the txlake data source
writer, reads the results back through the txlake Python data source, and prints one JSON document (the last
stdout line) that the test asserts on: what the tables hold, who wrote the files and which processes ran the
tasks.

Where a task ran is found from inside it: the Python worker walks its ancestor processes up to the JVM that
started it and reads that JVM's command line (an executor is ``CoarseGrainedExecutorBackend --executor-id N``,
the driver is ``SparkSubmit``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import txlake
from txlake.spark import SparkEngine

EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
DRIVER_MAIN = "org.apache.spark.deploy.SparkSubmit"
ORDERS = "id long, amount long, task_pid long, jvm_pid long, jvm_parent_pid long, executor_id string, partition int"
TOTALS = "executor_id string, orders long, amount long"
ROWS = 2_000
PARTITIONS = 3


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")


def _parent(pid: int) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after its last ')'
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def driver_jvm_pid() -> int:
    """The JVM pyspark launched for this driver: a child process of this one running ``SparkSubmit``."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if _parent(int(entry.name)) == me and DRIVER_MAIN in _cmdline(int(entry.name)):
                    return int(entry.name)
    raise RuntimeError("no SparkSubmit JVM among this process's children")


def task_origin() -> dict[str, Any]:
    """Which process runs this task: its pid and the JVM above it (executor id, or ``driver``)."""
    here = os.getpid()
    pid = _parent(here)
    while pid > 1:
        cmd = _cmdline(pid)
        if EXECUTOR_MAIN in cmd:
            executor = cmd[cmd.index("--executor-id") + 1]
            return {"task_pid": here, "jvm_pid": pid, "jvm_parent_pid": _parent(pid), "executor_id": executor}
        if DRIVER_MAIN in cmd:
            return {"task_pid": here, "jvm_pid": pid, "jvm_parent_pid": _parent(pid), "executor_id": "driver"}
        pid = _parent(pid)
    return {"task_pid": here, "jvm_pid": -1, "jvm_parent_pid": -1, "executor_id": "unknown"}


ORIGIN = StructType(
    [
        StructField("task_pid", LongType()),
        StructField("jvm_pid", LongType()),
        StructField("jvm_parent_pid", LongType()),
        StructField("executor_id", StringType()),
        StructField("partition", IntegerType()),
    ]
)


def _origin_row() -> tuple[Any, ...]:
    origin = task_origin()
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else -1
    return (origin["task_pid"], origin["jvm_pid"], origin["jvm_parent_pid"], origin["executor_id"], partition)


# a plain (pickled-rows) Python UDF: Arrow UDFs and mapInArrow would need pandas on the driver
origin_udf = F.udf(_origin_row, ORIGIN).asNondeterministic()


def with_origin(df: DataFrame, prefix: str = "") -> DataFrame:
    """``df`` plus the columns of :data:`ORIGIN` (names prefixed), computed in the task producing each row."""
    origin = [F.col(f"_origin.{n}").alias(prefix + n) for n in ORIGIN.names]
    return df.withColumn("_origin", origin_udf()).select(*[F.col(c) for c in df.columns], *origin)


def spark_written(lake_uri: str, table_path: str, snap: Any, name: str) -> list[bool]:
    """Per live data file of ``name``: whether Spark's own Parquet writer wrote it (its footer says so)."""
    root = Path(lake_uri.removeprefix("file://")) / table_path
    files = snap.delta_snapshot(name).files.values()
    return [b"org.apache.spark.version" in (pq.read_metadata(root / unquote(a.path)).metadata or {}) for a in files]


def _distinct(rows: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """The distinct task origins (columns ``prefix`` + :data:`ORIGIN` names) among ``rows``."""
    seen = {tuple(r[prefix + n] for n in ORIGIN.names) for r in rows}
    return [dict(zip(ORIGIN.names, t, strict=True)) for t in sorted(seen)]


def run(master: str, lake_uri: str, java_options: str = "") -> dict[str, Any]:
    started = time.perf_counter()
    seconds: dict[str, float] = {}

    def lap(name: str) -> None:
        seconds[name] = round(time.perf_counter() - started - sum(seconds.values()), 2)

    spark = (
        SparkSession.builder.master(master)
        .appName("txlake-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "1")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lap("session")
    try:
        sc = spark.sparkContext
        driver = {"pid": os.getpid(), "jvm_pid": driver_jvm_pid(), "app_id": sc.applicationId}
        lake = txlake.connect(lake_uri, spark=spark)
        lake.create_table("shop.orders", spark.createDataFrame([], ORDERS).schema)
        lake.create_table("shop.totals", spark.createDataFrame([], TOTALS).schema)
        before = lake.version()
        with lake.transaction() as tx:
            orders = with_origin(
                spark.range(0, ROWS, numPartitions=PARTITIONS).select("id", ((F.col("id") * 7) % 100).alias("amount"))
            )
            appended = tx.append("shop.orders", orders)
            # read-your-writes through Spark: the staged files, aggregated, appended to the second table
            staged = tx.read("shop.orders")
            totals = staged.groupBy("executor_id").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
            tx.append("shop.totals", totals)
            in_tx = tx.read("shop.orders", where="amount >= 50").count()
        lap("transaction")
        result = tx.result
        assert result is not None
        native_engine = lake.engine
        assert isinstance(native_engine, SparkEngine) and native_engine.last_write is not None

        # the same kind of append through the txlake data source writer (executors write, a worker commits)
        through_source = txlake.connect(lake_uri, spark=spark, spark_writer="python", create=False)
        through_source.create_table("shop.orders_ds", spark.createDataFrame([], ORDERS).schema)
        with through_source.transaction() as tx:
            ds_appended = tx.append(
                "shop.orders_ds",
                with_origin(
                    spark.range(0, ROWS, numPartitions=PARTITIONS).select(
                        "id", ((F.col("id") * 7) % 100).alias("amount")
                    )
                ),
            )
        source_engine = through_source.engine
        assert isinstance(source_engine, SparkEngine) and source_engine.last_write is not None
        lap("data_source_write")

        # read back through the txlake Python data source, on the cluster; each row also gets the reading task
        reader = txlake.connect(lake_uri, spark=spark, spark_reader="python", create=False)
        snap = reader.snapshot()
        orders_back = snap.read("shop.orders")
        plan = orders_back._jdf.queryExecution().executedPlan().toString()
        back = [r.asDict() for r in with_origin(orders_back, prefix="read_").collect()]
        totals_back = sorted(tuple(r) for r in snap.read("shop.totals").collect())
        ds_back = [r.asDict() for r in snap.read("shop.orders_ds").collect()]
        arrow = reader.read_arrow("shop.orders").to_pylist()
        expected_totals: dict[str, list[int]] = {}
        for row in arrow:
            total = expected_totals.setdefault(row["executor_id"], [0, 0])
            total[0] += 1
            total[1] += row["amount"]
        lap("read_back")
        return {
            "rows": ROWS,
            "partitions": PARTITIONS,
            "master": sc.master,
            "driver": driver,
            "lake_version_before": before,
            "commit": {"version": result.version, "table_versions": dict(result.table_versions)},
            "appended": appended,
            "in_tx_count": in_tx,
            "python_reader_plan": plan,
            "orders_count": len(back),
            "arrow_count": len(arrow),
            "orders_amount": sum(r["amount"] for r in back),
            "expected_amount": sum((i * 7) % 100 for i in range(ROWS)),
            "totals": totals_back,
            "expected_totals": sorted((e, n, a) for e, (n, a) in expected_totals.items()),
            "spark_written": {
                "shop.orders": spark_written(lake_uri, snap.entry("shop.orders").path, snap, "shop.orders"),
                "shop.orders_ds": spark_written(lake_uri, snap.entry("shop.orders_ds").path, snap, "shop.orders_ds"),
            },
            "native_committer_pid": native_engine.last_write.committer.pid,
            "ds_appended": ds_appended,
            "ds_count": len(ds_back),
            "ds_amount": sum(r["amount"] for r in ds_back),
            "ds_committer_pid": source_engine.last_write.committer.pid,
            "ds_writer_tasks": _distinct(ds_back, ""),
            "writer_tasks": _distinct(back, ""),
            "reader_tasks": _distinct(back, "read_"),
            "seconds": seconds,
        }
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", required=True)
    parser.add_argument("--lake", required=True, help="file:// URI of the lakehouse")
    parser.add_argument("--java-options", default="", help="extra JVM options for the driver and the executors")
    args = parser.parse_args(argv)
    doc = run(args.master, args.lake, args.java_options)
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
