"""``txlake bench lifecycle``: reads of a table of many small appends before and after ``optimize``, and
``vacuum`` of many removed files -- txlake and delta-rs on the same tables in the same run.

* **read**: a table built by ``--appends`` one-row transactions (a TPC-H ``lineitem`` shape); TPC-H Q6
  (``sum(extendedprice * discount)`` over a date, discount and quantity range) through ``read_arrow`` and
  pyarrow.compute, against delta-rs's DataFusion (``QueryBuilder``) over the same table. Measured before
  and after ``lake.optimize`` (the files it compacts are then removed, not deleted). Unless ``--no-spark``,
  also Q6 through Spark (a ``local[2]`` session): ``lake.snapshot().read(where=Q6)`` (files pruned by their
  statistics, then Spark's Parquet reader) against ``spark.read.parquet`` of the same live files (the
  delta-rs-free baseline a Spark user without delta-spark has), both with the same ``where`` and ``sum``.
* **vacuum**: a table of ``--vacuum-files`` files, all removed by an overwrite; ``lake.vacuum(0, force=True)``
  against ``deltalake.DeltaTable.vacuum(retention_hours=0, enforce_retention_duration=False)`` on a byte-for-
  byte copy of the table (local disk only). txlake's store requests are in the row's parameters.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import txlake
from txlake.bench.args import positive
from txlake.bench.report import BenchReport, BenchRow, run_against_delta_rs
from txlake.bench.spark import in_turn
from txlake.cli.output import console_for
from txlake.delta.files import decode_path

NAME = "lifecycle"
HELP = "Q6 over many small appends before/after optimize, and vacuum of many files: txlake vs delta-rs"
BASELINE = "delta-rs (Spark rows: spark.read.parquet)"
LINEITEM = pa.schema(
    [
        ("orderkey", pa.int64()),
        ("quantity", pa.float64()),
        ("extendedprice", pa.float64()),
        ("discount", pa.float64()),
        ("shipdate", pa.date32()),
    ]
)
Q6_WHERE = (
    "shipdate >= DATE'1994-01-01' AND shipdate < DATE'1995-01-01' AND discount BETWEEN 0.05 AND 0.07 AND quantity < 24"
)
Q6_SQL = (
    "SELECT sum(extendedprice * discount) AS revenue FROM lineitem WHERE shipdate >= DATE '1994-01-01' AND "
    "shipdate < DATE '1995-01-01' AND discount BETWEEN 0.05 AND 0.07 AND quantity < 24"
)


@dataclass(frozen=True, slots=True)
class LifecycleOptions:
    appends: int = 2000
    rows_per_append: int = 1
    vacuum_files: int = 10_000
    repeat: int = 5
    spark: bool = True


def _row(i: int) -> dict[str, Any]:
    return {
        "orderkey": i,
        "quantity": float(i * 7 % 50),
        "extendedprice": 1000.0 + i % 997,
        "discount": (i % 11) / 100,
        "shipdate": dt.date(1992, 1, 1) + dt.timedelta(days=i * 13 % 2500),
    }


def _batch(first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist([_row(first + i) for i in range(n)], schema=LINEITEM)


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def _q6_txlake(lake: txlake.Lakehouse, name: str) -> float:
    data = lake.read_arrow(name, where=Q6_WHERE, columns=["extendedprice", "discount"])
    revenue = pc.sum(pc.multiply(data["extendedprice"], data["discount"])).as_py()
    return float(revenue or 0.0)


def _q6_delta_rs(deltalake: ModuleType, location: str) -> float:
    table = deltalake.DeltaTable(location)
    result = deltalake.QueryBuilder().register("lineitem", table).execute(Q6_SQL).read_all()
    return float(result["revenue"][0].as_py() or 0.0)


def _measure_q6(
    config: str, lake: txlake.Lakehouse, name: str, deltalake: ModuleType, repeat: int, params: dict[str, Any]
) -> BenchRow:
    location = lake.table_location(name)
    expected = _q6_txlake(lake, name)
    theirs_value = _q6_delta_rs(deltalake, location)
    if abs(expected - theirs_value) > 1e-6 * max(1.0, abs(expected)):
        raise RuntimeError(f"{config}: Q6 differs: txlake {expected}, delta-rs {theirs_value}")
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        ours.append(_timed(lambda: _q6_txlake(lake, name))[0])
        theirs.append(_timed(lambda: _q6_delta_rs(deltalake, location))[0])
    return BenchRow.from_samples(config, ours, theirs, {**params, "revenue": expected})


def _q6_spark(frame: Any) -> float:
    from pyspark.sql import functions as F

    result = frame.agg(F.sum(F.col("extendedprice") * F.col("discount")).alias("revenue")).collect()
    return float(result[0]["revenue"] or 0.0)


def _measure_q6_spark(config: str, lake: txlake.Lakehouse, name: str, spark: Any, repeat: int) -> BenchRow:
    """Q6 on Spark: txlake's pruned read vs ``spark.read.parquet`` of every live file (first runs untimed)."""
    location = lake.table_location(name).rstrip("/")
    urls = [f"{location}/{decode_path(a.path)}" for a in lake.snapshot().delta_snapshot(name).files.values()]
    columns = ["extendedprice", "discount"]

    def ours() -> float:
        return _q6_spark(lake.snapshot().read(name, where=Q6_WHERE, columns=columns))

    def theirs() -> float:
        return _q6_spark(spark.read.parquet(*urls).where(Q6_WHERE).select(*columns))

    expected, baseline = ours(), theirs()  # warm-up (JIT, file listing caches), and the results must agree
    if abs(expected - baseline) > 1e-6 * max(1.0, abs(expected)):
        raise RuntimeError(f"{config}: Q6 differs: txlake {expected}, spark.read.parquet {baseline}")
    our_ms: list[float] = []
    their_ms: list[float] = []
    for i in range(repeat):  # in turns, alternating who goes first
        in_turn(i, lambda: our_ms.append(_timed(ours)[0]), lambda: their_ms.append(_timed(theirs)[0]))
    files = len(urls)
    return BenchRow.from_samples(
        config, our_ms, their_ms, {"files": files, "revenue": expected, "baseline": "spark.read.parquet"}
    )


def _read_rows(
    lake: txlake.Lakehouse,
    options: LifecycleOptions,
    deltalake: ModuleType,
    log: Callable[[str], None],
    spark: Any = None,
) -> list[BenchRow]:
    lake.create_table("bench.lineitem", LINEITEM)
    started = time.perf_counter()
    for i in range(options.appends):
        with lake.transaction("write_serializable") as tx:
            tx.append("bench.lineitem", _batch(i * options.rows_per_append, options.rows_per_append))
    log(f"built {options.appends} appends in {time.perf_counter() - started:.1f} s")
    files = len(lake.snapshot().delta_snapshot("bench.lineitem").files)
    rows = [
        _measure_q6(
            f"Q6 after {options.appends} appends", lake, "bench.lineitem", deltalake, options.repeat, {"files": files}
        )
    ]
    on_spark = None if spark is None else txlake.connect(lake.uri, spark=spark)
    if on_spark is not None:
        rows.append(
            _measure_q6_spark(
                f"Q6 via Spark after {options.appends} appends", on_spark, "bench.lineitem", spark, options.repeat
            )
        )
    optimize_ms, metrics = _timed(lambda: lake.optimize("bench.lineitem"))
    assert isinstance(metrics, txlake.OptimizeMetrics)
    log(f"optimize: {metrics.files_removed} files into {metrics.files_added} in {optimize_ms:.0f} ms")
    after = len(lake.snapshot().delta_snapshot("bench.lineitem").files)
    rows.append(
        _measure_q6(
            "Q6 after optimize",
            lake,
            "bench.lineitem",
            deltalake,
            options.repeat,
            {"files": after, "optimize_ms": round(optimize_ms, 1), "files_compacted": metrics.files_removed},
        )
    )
    if on_spark is not None:
        rows.append(_measure_q6_spark("Q6 via Spark after optimize", on_spark, "bench.lineitem", spark, options.repeat))
    return rows


def _load_txlake(uri: str, name: str) -> int:
    """A cold client: connect, find the newest lakehouse version, load the table's snapshot."""
    return len(txlake.connect(uri).snapshot().delta_snapshot(name).files)


def _load_rows(
    lake: txlake.Lakehouse, root: Path, name: str, deltalake: ModuleType, repeat: int, log: Callable[[str], None]
) -> list[BenchRow]:
    """Cold snapshot loads of ``name`` before and after the log clean-up (every object aged past 30 days)."""
    location = lake.table_location(name)

    def measure(config: str, params: dict[str, Any]) -> BenchRow:
        files = _load_txlake(lake.uri, name)
        theirs_files = len(deltalake.DeltaTable(location).file_uris())
        if files != theirs_files:
            raise RuntimeError(f"{config}: txlake sees {files} files, delta-rs {theirs_files}")
        ours = [_timed(lambda: _load_txlake(lake.uri, name))[0] for _ in range(repeat)]
        theirs = [_timed(lambda: deltalake.DeltaTable(location).version())[0] for _ in range(repeat)]
        return BenchRow.from_samples(config, ours, theirs, {**params, "files": files})

    delta_log = root / lake.snapshot().entry(name).path / "_delta_log"
    commits = len(list(delta_log.glob("*.json")))
    rows = [measure("cold load before log clean-up", {"delta_commits": commits})]
    when = time.time() - dt.timedelta(days=40).total_seconds()
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))  # as if everything so far were 40 days old
    report = lake.vacuum(dt.timedelta(0), force=True)
    left = len(list(delta_log.glob("*.json")))
    log(f"log clean-up: {report.log_entries_deleted} entries, the log starts at version {report.log_start}")
    rows.append(
        measure(
            "cold load after log clean-up",
            {"delta_commits": left, "log_entries_deleted": report.log_entries_deleted, "log_start": report.log_start},
        )
    )
    return rows


def _vacuum_row(
    lake: txlake.Lakehouse, root: Path, options: LifecycleOptions, deltalake: ModuleType, log: Callable[[str], None]
) -> BenchRow:
    lake.create_table("bench.churn", LINEITEM)
    started = time.perf_counter()
    per_tx = 500
    for first in range(0, options.vacuum_files, per_tx):
        with lake.transaction("write_serializable") as tx:
            for i in range(first, min(first + per_tx, options.vacuum_files)):
                tx.append("bench.churn", _batch(i, 1))
    with lake.transaction() as tx:
        tx.overwrite("bench.churn", _batch(0, 1))
    log(f"built {options.vacuum_files} removed files in {time.perf_counter() - started:.1f} s")
    location = lake.snapshot().entry("bench.churn").path
    copy = root / "baseline-copy"
    shutil.copytree(root / location, copy)
    time.sleep(0.05)  # older than the zero retention
    with lake.store.counters.measure() as requests:
        ours_ms, report = _timed(lambda: lake.vacuum(dt.timedelta(0), force=True))
    assert isinstance(report, txlake.VacuumReport)
    table = deltalake.DeltaTable(str(copy))
    theirs_ms, deleted = _timed(
        lambda: table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    )
    assert isinstance(deleted, list)
    if report.files_deleted < options.vacuum_files or len(deleted) < options.vacuum_files:
        raise RuntimeError(f"vacuum: txlake deleted {report.files_deleted}, delta-rs {len(deleted)} files")
    log(
        f"vacuum: txlake {report.files_deleted} files in {ours_ms:.0f} ms, "
        f"delta-rs {len(deleted)} in {theirs_ms:.0f} ms"
    )
    return BenchRow.from_samples(
        f"vacuum {options.vacuum_files} files",
        [ours_ms],
        [theirs_ms],
        {
            "txlake_files_deleted": report.files_deleted,
            "delta_rs_files_deleted": len(deleted),
            "txlake_requests": requests.counts.as_dict(),
        },
    )


def run_lifecycle_bench(options: LifecycleOptions) -> BenchReport:
    import deltalake

    console = console_for(stderr=True)
    tmp = Path(tempfile.mkdtemp(prefix="txlake-bench-lifecycle-"))
    try:
        lake = txlake.connect(tmp.as_uri())
        with contextlib.ExitStack() as stack:
            spark = None
            if options.spark:
                from txlake.bench.spark import SparkBenchOptions, spark_session

                spark, _ = stack.enter_context(spark_session(SparkBenchOptions(driver_memory="2g"), console))
            rows = _read_rows(lake, options, deltalake, console.log, spark)
        rows.extend(_load_rows(lake, tmp, "bench.lineitem", deltalake, options.repeat, console.log))
        rows.append(_vacuum_row(lake, tmp, options, deltalake, console.log))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return BenchReport(
        name=NAME,
        metric="time (median)",
        unit="ms",
        baseline=BASELINE,
        rows=tuple(rows),
        parameters={
            "appends": options.appends,
            "rows_per_append": options.rows_per_append,
            "vacuum_files": options.vacuum_files,
            "repeat": options.repeat,
            "storage": "file",
            "txlake_q6": "lake.read_arrow(where=Q6, columns) + pyarrow.compute sum",
            "txlake_q6_spark": "lake.snapshot().read(where=Q6, columns) (native reader) + Spark sum",
            "baseline_q6_spark": "spark.read.parquet(live files).where(Q6) + Spark sum",
            "baseline_q6": "deltalake.QueryBuilder (DataFusion) SQL Q6 over DeltaTable(location)",
            "vacuum": "lake.vacuum(timedelta(0), force=True) vs DeltaTable.vacuum(0, enforce=False) on a copy",
            "cold_load": "txlake.connect(uri).snapshot().delta_snapshot(name) vs DeltaTable(location).version(); "
            "log clean-up by vacuum after every object was aged 40 days (os.utime)",
        },
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--appends", type=positive, default=2000, help="one-row append transactions (default 2000)")
    parser.add_argument("--vacuum-files", type=positive, default=10_000, help="files to vacuum (default 10000)")
    parser.add_argument("--repeat", type=positive, default=5, help="timed Q6 runs per reader (default 5)")
    parser.add_argument("--no-spark", action="store_true", help="skip Q6 via Spark (no local Spark session)")


def run(args: argparse.Namespace) -> int:
    options = LifecycleOptions(
        appends=args.appends, vacuum_files=args.vacuum_files, repeat=args.repeat, spark=not args.no_spark
    )
    return run_against_delta_rs(NAME, args.out, lambda: run_lifecycle_bench(options))
