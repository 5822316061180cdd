"""``txlake bench spark``: TPC-H on PySpark, txlake tables vs plain Parquet written and read by Spark itself.

TPC-H ``lineitem`` and ``orders`` at ``--scale`` (SF1 by default) are generated as Parquet by ``tpchgen-cli``
into a temp dir; a local Spark session (``local[2]``, UI off, loopback only, UTC) runs every part, and each
part measures its Spark baseline in the same run, rotating which side goes first:

1. ``load``: ``with lake.transaction() as tx: tx.append("tpch.lineitem", df); tx.append("tpch.orders", df)``
   (the files are written by Spark's own Parquet writer and moved into the tables, then one global commit)
   vs ``df.write.parquet(path)`` for each table, ``df = spark.read.parquet(<generated file>)``. Rows: each
   table's append vs its write, and the whole transaction (commit included) vs both writes. The same
   transaction with ``spark_writer="python"`` (the txlake data source writes the files) is reported alongside.
2. ``query``: TPC-H Q1 and Q6 (standard text, validation substitution parameters) over temp views of
   ``tx.read("tpch.lineitem")`` in a read-only transaction vs temp views of ``spark.read.parquet`` of the
   SAME data files (the table's live files). Each run is collected to completion; both sides must return the
   same rows. Reported for ``spark_reader="native"`` (``spark-query``, the target applies) and ``"python"``
   (the txlake data source, ``spark-query-python``, reading the query's columns: ``tx.read(columns=)``).
3. ``skip``: a selective query (one month of ``l_shipdate``) over a copy of ``lineitem`` written range-
   partitioned and sorted by ``l_shipdate`` (``--ranges`` files with disjoint date ranges):
   ``lake.snapshot().read(name, where=...)`` prunes files by their statistics, against
   ``spark.read.parquet`` of all of the table's files with the same filter (Spark still opens every file and
   skips row groups itself). Reports files total vs files in the planned scan.

Times are medians of ``--repeat`` samples in milliseconds. With ``--warmup N`` (N > 0) the load part first writes
a tiny table once per side, untimed, and each query runs N times per side untimed before its timed runs; the
first results of both sides must agree. The load part also reports the *Python data source floor*: the same DataFrames
written through a Python data source that discards the Arrow batches it receives, i.e. what any Python-source
writer pays before doing its own work.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rich.console import Console
from rich.table import Table

import txlake
from txlake.bench.args import positive, positive_float
from txlake.bench.report import BenchReport, BenchRow, print_report, write_report
from txlake.cli.output import console_for
from txlake.delta.files import decode_path
from txlake.expr import FileStats, parse_predicate
from txlake.lake import Lakehouse
from txlake.txn.engine import SparkWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "spark"
HELP = "TPC-H load, Q1/Q6 and file skipping on PySpark: txlake tables vs Spark's own Parquet"
BASELINE = "spark parquet"
Part = Literal["load", "query", "skip"]
PARTS: tuple[Part, ...] = ("load", "query", "skip")
SparkReader = Literal["native", "python"]
READERS: tuple[SparkReader, ...] = ("native", "python")
LOAD_TARGET_RATIO = 1.1
QUERY_TARGET_RATIO = 1.05
TABLES = ("lineitem", "orders")
NAMESPACE = "tpch"
SORTED_TABLE = f"{NAMESPACE}.lineitem_by_shipdate"
LOOPBACK = "127.0.0.1"
DISCARD_FORMAT = "txlake_bench_discard"
MAX_REPORTED_ROWS = 10
WARMUP_ROWS = 1_000_000
"""Rows of ``lineitem`` each side writes once, untimed, before the load samples (enough for the JIT)."""

Q1 = """
SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
"""
Q6 = """
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
  AND l_quantity < 24
"""
QUERIES: Mapping[str, str] = {"Q1": Q1, "Q6": Q6}
QUERY_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "Q1": ("l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate"),
    "Q6": ("l_quantity", "l_extendedprice", "l_discount", "l_shipdate"),
}
"""What each query reads: passed as ``tx.read(columns=)`` to the Python data source, which PySpark does not
tell which columns a query uses (Spark's Parquet reader prunes columns itself)."""
SELECTIVE_WHERE = "l_shipdate >= DATE '1995-06-01' AND l_shipdate < DATE '1995-07-01'"
SELECTIVE_AGGREGATES = ("count(*) AS n", "sum(l_extendedprice * (1 - l_discount)) AS revenue")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SparkBenchOptions:
    """What to generate and measure, and how the Spark session is sized."""

    scale: float = 1.0
    repeat: int = 3
    warmup: int = 1
    parts: tuple[Part, ...] = PARTS
    ranges: int = 16
    driver_memory: str = "8g"
    data: str | None = None
    keep: bool = False


class ToolNotFoundError(FileNotFoundError):
    """A program the benchmark runs (``tpchgen-cli``) is not installed."""


# ------------------------------------------------------------------------------------------------ helpers


def tpchgen_binary() -> Path:
    """``tpchgen-cli`` from this environment's scripts dir, else from ``PATH``."""
    for candidate in (Path(sysconfig.get_path("scripts")) / "tpchgen-cli", Path(sys.executable).parent / "tpchgen-cli"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise ToolNotFoundError("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return Path(found)


def generate_tpch(scale: float, directory: Path) -> dict[str, Path]:
    """TPC-H ``lineitem`` and ``orders`` at ``scale`` as one Parquet file each (``tpchgen-cli parquet``)."""
    directory.mkdir(parents=True, exist_ok=True)
    command = [str(tpchgen_binary()), "parquet", "--scale-factor", f"{scale:g}", "--output-dir", str(directory)]
    for table in TABLES:
        command += ["--tables", table]
    subprocess.run([*command, "--quiet"], check=True, stdin=subprocess.DEVNULL)
    return existing_tpch(directory)


def existing_tpch(directory: Path) -> dict[str, Path]:
    files = {t: directory / f"{t}.parquet" for t in TABLES}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"TPC-H Parquet files not found: {missing}")
    return files


def timed_ms(fn: Callable[[], T]) -> tuple[float, T]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def dir_files(path: Path) -> list[Path]:
    """The Parquet data files Spark wrote below ``path``."""
    return sorted(p for p in path.rglob("*.parquet") if p.is_file())


def table_file_urls(lake: Lakehouse, name: str) -> list[str]:
    """URLs of the live data files of ``name`` (what a plain Parquet reader reads as "the same files")."""
    location = lake.table_location(name).rstrip("/")
    return [f"{location}/{decode_path(a.path)}" for a in lake.snapshot().delta_snapshot(name).files.values()]


def planned_files(lake: Lakehouse, name: str, where: str) -> tuple[int, int]:
    """(live files, files whose statistics may match ``where``): the planning ``snapshot().read`` does."""
    snap = lake.snapshot().delta_snapshot(name)
    predicate = parse_predicate(where).bind(snap.schema)
    files = list(snap.files.values())
    kept = [a for a in files if predicate.may_match(FileStats.from_add(a, snap.schema, snap.partition_columns))]
    return len(files), len(kept)


def load_average() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def canonical(rows: Sequence[Any]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in rows)


def in_turn(i: int, *steps: Callable[[], None]) -> None:
    """Run every step, starting with a different one in each sample (none always gets the warmer caches)."""
    k = i % len(steps)
    for step in (*steps[k:], *steps[:k]):
        step()


# ------------------------------------------------------------------------------------------------ session


@contextmanager
def spark_session(options: SparkBenchOptions, console: Console) -> Iterator[tuple[SparkSession, bool]]:
    """A ``local[2]`` session on loopback (UI off, UTC), stopped at the end; an active session is reused."""
    from pyspark.sql import SparkSession  # optional dependency: only this workload needs it

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers must import txlake
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    active = SparkSession.getActiveSession()
    if active is not None:
        console.log("reusing the active Spark session")
        yield active, False
        return
    with console.status("starting Spark"):
        session = (
            SparkSession.builder.master("local[2]")
            .appName("txlake-bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.memory", options.driver_memory)
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session, True
    finally:
        session.stop()


def session_parameters(spark: SparkSession, created: bool) -> dict[str, Any]:
    conf = spark.sparkContext.getConf()
    return {
        "spark_version": spark.version,
        "master": spark.sparkContext.master,
        "driver_memory": conf.get("spark.driver.memory", "1g (default)"),
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "session": "started by the benchmark" if created else "reused the active session",
    }


# ---------------------------------------------------------------------------------------------- part 1: load


def create_tables(lake: Lakehouse, spark: SparkSession, sources: Mapping[str, Path]) -> None:
    for table, path in sources.items():
        lake.create_table(f"{NAMESPACE}.{table}", spark.read.parquet(str(path)).schema, if_not_exists=True)


def load_txlake(lake: Lakehouse, spark: SparkSession, sources: Mapping[str, Path]) -> dict[str, float]:
    """One transaction appending every table (DataFrames read from the generated files); times per step."""
    times: dict[str, float] = {}
    gc.collect()
    start = time.perf_counter()
    with lake.transaction() as tx:
        for table, path in sources.items():
            appending = time.perf_counter()
            tx.append(f"{NAMESPACE}.{table}", spark.read.parquet(str(path)))
            times[table] = (time.perf_counter() - appending) * 1000
        committing = time.perf_counter()
    times["commit"] = (time.perf_counter() - committing) * 1000
    times["transaction"] = (time.perf_counter() - start) * 1000
    return times


def load_parquet(spark: SparkSession, sources: Mapping[str, Path], out: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    gc.collect()
    for table, path in sources.items():
        writing = time.perf_counter()
        spark.read.parquet(str(path)).write.parquet(str(out / table))
        times[table] = (time.perf_counter() - writing) * 1000
    times["transaction"] = sum(times[t] for t in sources)
    return times


def register_discard_source(spark: SparkSession) -> None:
    """A Python data source whose writer only counts the Arrow batches it receives.

    Writing a DataFrame through it costs what every Python data source write pays before doing any work of
    its own (rows to Arrow in the JVM, batches to a Python worker, the job's Python-side planning and commit):
    the floor under the txlake load, reported next to it.
    """
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceWriter, WriterCommitMessage
    from pyspark.sql.types import StructType

    class Counted(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class DiscardWriter(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            return Counted(sum(batch.num_rows for batch in iterator))

    class DiscardSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return DISCARD_FORMAT

        def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
            return DiscardWriter()

    spark.dataSource.register(DiscardSource)


def load_discarded(spark: SparkSession, sources: Mapping[str, Path]) -> dict[str, float]:
    times: dict[str, float] = {}
    gc.collect()
    for table, path in sources.items():
        writing = time.perf_counter()
        spark.read.parquet(str(path)).write.format(DISCARD_FORMAT).mode("append").save()
        times[table] = (time.perf_counter() - writing) * 1000
    times["transaction"] = sum(times[t] for t in sources)
    return times


def warm_up_load(spark: SparkSession, sources: Mapping[str, Path], work: Path) -> None:
    """Untimed: every source file read once (the first sample must not read them from disk for the others),
    then one smaller write per side, so that no sample pays for starting Python workers or a cold JIT."""
    for path in sources.values():
        with path.open("rb") as f:
            while f.read(1 << 24):
                pass
    small = {"lineitem": work / "warmup-source"}
    spark.read.parquet(str(sources["lineitem"])).limit(WARMUP_ROWS).write.parquet(str(small["lineitem"]))
    writers: tuple[tuple[str, SparkWriter], ...] = (("warmup-lake", "auto"), ("warmup-lake-python", "python"))
    for name, writer in writers:
        lake = txlake.connect((work / name).as_uri(), spark=spark, spark_writer=writer)
        create_tables(lake, spark, small)
        load_txlake(lake, spark, small)
    load_parquet(spark, small, work / "warmup-parquet")
    load_discarded(spark, small)
    for name in ("warmup-source", "warmup-lake", "warmup-lake-python", "warmup-parquet"):
        shutil.rmtree(work / name, ignore_errors=True)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def run_load(
    spark: SparkSession, sources: Mapping[str, Path], work: Path, options: SparkBenchOptions, console: Console
) -> tuple[BenchReport, Lakehouse]:
    """Part 1; returns the report and the lakehouse of the last sample (the tables the queries read)."""
    register_discard_source(spark)
    if options.warmup:
        with console.status("warming up"):
            warm_up_load(spark, sources, work)
    ours: dict[str, list[float]] = {}
    theirs: dict[str, list[float]] = {}
    floor: dict[str, list[float]] = {}
    python_writer: dict[str, list[float]] = {}
    commits: list[float] = []
    lake: Lakehouse | None = None
    parquet_out = work / "parquet"
    sizes: dict[str, dict[str, Any]] = {}
    for i in range(options.repeat):
        if lake is not None:  # only the last sample's lakehouse is kept
            shutil.rmtree(work / f"lake-{i - 1}", ignore_errors=True)
        shutil.rmtree(parquet_out, ignore_errors=True)
        current = txlake.connect((work / f"lake-{i}").as_uri(), spark=spark)
        create_tables(current, spark, sources)
        lake = current

        def txlake_sample(lake: Lakehouse = current) -> None:
            times = load_txlake(lake, spark, sources)
            commits.append(times.pop("commit"))
            for key, value in times.items():
                ours.setdefault(key, []).append(value)

        def parquet_sample() -> None:
            for key, value in load_parquet(spark, sources, parquet_out).items():
                theirs.setdefault(key, []).append(value)

        def floor_sample() -> None:
            for key, value in load_discarded(spark, sources).items():
                floor.setdefault(key, []).append(value)

        def python_writer_sample() -> None:
            path = work / "lake-python-writer"
            shutil.rmtree(path, ignore_errors=True)
            other = txlake.connect(path.as_uri(), spark=spark, spark_writer="python")
            create_tables(other, spark, sources)
            times = load_txlake(other, spark, sources)
            times.pop("commit")
            for key, value in times.items():
                python_writer.setdefault(key, []).append(value)
            shutil.rmtree(path, ignore_errors=True)

        in_turn(i, txlake_sample, parquet_sample, floor_sample, python_writer_sample)
        console.log(
            f"load sample {i + 1}/{options.repeat}: txlake {ours['transaction'][-1]:.0f} ms, "
            f"parquet {theirs['transaction'][-1]:.0f} ms, txlake with the data source writer "
            f"{python_writer['transaction'][-1]:.0f} ms, Python-source floor {floor['transaction'][-1]:.0f} ms"
        )
        if i == options.repeat - 1:
            for table in sources:
                adds = list(current.snapshot().delta_snapshot(f"{NAMESPACE}.{table}").files.values())
                written = dir_files(parquet_out / table)
                sizes[table] = {
                    "table": f"{NAMESPACE}.{table}",
                    "rows": int(sum(_num_records(a.stats) for a in adds)),
                    "txlake_files": len(adds),
                    "txlake_bytes": sum(a.size for a in adds),
                    "baseline_files": len(written),
                    "baseline_bytes": sum(p.stat().st_size for p in written),
                }
    shutil.rmtree(parquet_out, ignore_errors=True)
    assert lake is not None

    def floor_params(key: str) -> dict[str, Any]:
        return {
            "python_writer_ms": _median(python_writer[key]),
            "python_writer_samples": python_writer[key],
            "python_writer_ratio": _median(python_writer[key]) / _median(theirs[key]),
            "python_source_floor_ms": _median(floor[key]),
            "python_source_floor_samples": floor[key],
            "python_source_floor_ratio": _median(floor[key]) / _median(theirs[key]),
        }

    rows = [BenchRow.from_samples(t, ours[t], theirs[t], {**sizes[t], **floor_params(t)}) for t in sources]
    transaction = {
        "tables": list(sources),
        "txlake": "one transaction: every append, then the commit",
        "baseline": "sum of the Parquet writes",
        "txlake_commit_ms": _median(commits),
        **floor_params("transaction"),
    }
    rows.append(BenchRow.from_samples("transaction", ours["transaction"], theirs["transaction"], transaction))
    report = BenchReport(
        name=f"{NAME}-load",
        metric="load time (median)",
        unit="ms",
        baseline=BASELINE,
        rows=tuple(rows),
        target_ratio=LOAD_TARGET_RATIO,
        parameters={
            "txlake": "with lake.transaction() as tx: tx.append(name, spark.read.parquet(generated)) "
            "(spark_writer='auto': Spark's Parquet writer, files moved into the table)",
            "python_writer": "the same transaction with spark_writer='python' (the txlake data source writes)",
            "baseline": "spark.read.parquet(generated).write.parquet(path)",
            "python_source_floor": "spark.read.parquet(generated).write.format(<Python source that discards "
            "the Arrow batches>).save(): the cost of any Python data source write before it does its own work",
        },
    )
    return report, lake


def _num_records(stats: str | None) -> int:
    return int(json.loads(stats)["numRecords"]) if stats else 0


# --------------------------------------------------------------------------------------------- part 2: query


def txlake_query(lake: Lakehouse, spark: SparkSession, sql: str, columns: Sequence[str] | None = None) -> list[Any]:
    """Run ``sql`` over a temp view of ``tx.read("tpch.lineitem", columns=columns)`` in a read-only
    transaction, to completion."""
    with lake.transaction() as tx:
        tx.read(f"{NAMESPACE}.lineitem", columns=columns).createOrReplaceTempView("lineitem")
        return spark.sql(sql).collect()


def parquet_query(spark: SparkSession, files: Sequence[str], sql: str) -> list[Any]:
    spark.read.parquet(*files).createOrReplaceTempView("lineitem")
    return spark.sql(sql).collect()


def measure_pair(
    config: str,
    ours: Callable[[], list[Any]],
    theirs: Callable[[], list[Any]],
    options: SparkBenchOptions,
    params: Mapping[str, Any],
    console: Console,
) -> BenchRow:
    """``warmup`` untimed runs per side, then ``repeat`` timed runs in turns; the first results of both sides
    (timed or not) must be the same rows."""
    results: dict[str, list[tuple[Any, ...]]] = {}
    samples: dict[str, list[float]] = {"ours": [], "theirs": []}

    def run(side: str, fn: Callable[[], list[Any]], timed: bool) -> None:
        elapsed, rows = timed_ms(fn)
        results.setdefault(side, canonical(rows))
        if timed:
            samples[side].append(elapsed)

    for i in range(options.warmup + options.repeat):
        timed = i >= options.warmup
        in_turn(i, functools.partial(run, "ours", ours, timed), functools.partial(run, "theirs", theirs, timed))
        if i == 0 and results["ours"] != results["theirs"]:
            got, expected = results["ours"], results["theirs"]
            raise RuntimeError(f"{config}: txlake returned {got[:3]}..., Spark Parquet {expected[:3]}...")
    our_ms, their_ms = samples["ours"], samples["theirs"]
    expected = results["theirs"]
    result: dict[str, Any] = {"result_rows": len(expected)}
    if len(expected) <= MAX_REPORTED_ROWS:
        result["result"] = [[None if v is None else str(v) for v in r] for r in expected]
    row = BenchRow.from_samples(config, our_ms, their_ms, {**params, **result})
    console.log(f"{config}: txlake {row.txlake:.0f} ms, parquet {row.baseline:.0f} ms ({row.ratio:.2f}x)")
    return row


def run_query(spark: SparkSession, lake: Lakehouse, options: SparkBenchOptions, console: Console) -> list[BenchReport]:
    files = table_file_urls(lake, f"{NAMESPACE}.lineitem")
    reports = []
    for reader in READERS:
        reading = txlake.connect(lake.uri, spark=spark, spark_reader=reader, create=False)
        rows = [
            measure_pair(
                f"{query} {reader}",
                functools.partial(
                    txlake_query, reading, spark, sql, QUERY_COLUMNS[query] if reader == "python" else None
                ),
                functools.partial(parquet_query, spark, files, sql),
                options,
                {"query": query, "reader": reader, "files": len(files)},
                console,
            )
            for query, sql in QUERIES.items()
        ]
        reports.append(
            BenchReport(
                name=f"{NAME}-query" if reader == "native" else f"{NAME}-query-python",
                metric=f"TPC-H query time, spark_reader={reader!r} (median)",
                unit="ms",
                baseline=BASELINE,
                rows=tuple(rows),
                target_ratio=QUERY_TARGET_RATIO if reader == "native" else None,
                parameters={
                    "reader": reader,
                    "txlake": (
                        "temp view of tx.read('tpch.lineitem') (read-only transaction); spark.sql(q).collect()"
                        if reader == "native"
                        else "temp view of tx.read('tpch.lineitem', columns=<the query's columns>) (read-only "
                        "transaction); spark.sql(q).collect()"
                    ),
                    "baseline": "temp view of spark.read.parquet(<the table's live files>); spark.sql(q).collect()",
                    "files": len(files),
                    "queries": {k: " ".join(v.split()) for k, v in QUERIES.items()},
                    "target": "applies to the native reader on file:// only" if reader == "native" else None,
                },
            )
        )
    return reports


# ---------------------------------------------------------------------------------------------- part 3: skip


def write_sorted_copy(lake: Lakehouse, spark: SparkSession, source: Path, ranges: int) -> float:
    """``lineitem`` range-partitioned and sorted by ``l_shipdate``: files with disjoint date ranges."""
    df = spark.read.parquet(str(source))
    lake.create_table(SORTED_TABLE, df.schema, if_not_exists=True)
    clustered = df.repartitionByRange(ranges, "l_shipdate").sortWithinPartitions("l_shipdate")

    def write() -> None:
        with lake.transaction() as tx:
            tx.append(SORTED_TABLE, clustered)

    return timed_ms(write)[0]


def selective_txlake(lake: Lakehouse) -> list[Any]:
    """The selective aggregate over ``snapshot().read(where=...)``: only files whose stats may match are read."""
    pruned = lake.snapshot().read(SORTED_TABLE, where=SELECTIVE_WHERE)
    result: list[Any] = pruned.selectExpr(*SELECTIVE_AGGREGATES).collect()
    return result


def selective_parquet(spark: SparkSession, files: Sequence[str]) -> list[Any]:
    """The same aggregate over every file with Spark's Parquet reader (it skips row groups, not files)."""
    result: list[Any] = spark.read.parquet(*files).where(SELECTIVE_WHERE).selectExpr(*SELECTIVE_AGGREGATES).collect()
    return result


def run_skip(
    spark: SparkSession, lake: Lakehouse, source: Path, options: SparkBenchOptions, console: Console
) -> BenchReport:
    with console.status("writing lineitem sorted by l_shipdate"):
        write_ms = write_sorted_copy(lake, spark, source, options.ranges)
    total, kept = planned_files(lake, SORTED_TABLE, SELECTIVE_WHERE)
    files = table_file_urls(lake, SORTED_TABLE)
    baseline_df = spark.read.parquet(*files).where(SELECTIVE_WHERE)
    baseline_files = len(baseline_df.inputFiles())
    native = txlake.connect(lake.uri, spark=spark, spark_reader="native", create=False)
    scanned = len(native.snapshot().read(SORTED_TABLE, where=SELECTIVE_WHERE).inputFiles())
    if scanned != kept:
        raise RuntimeError(f"the native scan reads {scanned} files, the stats planning kept {kept}")
    console.log(f"{SORTED_TABLE}: {total} files, {kept} may match {SELECTIVE_WHERE!r}")
    rows = []
    for reader in READERS:
        reading = (
            native if reader == "native" else txlake.connect(lake.uri, spark=spark, spark_reader=reader, create=False)
        )

        rows.append(
            measure_pair(
                f"selective {reader}",
                functools.partial(selective_txlake, reading),
                functools.partial(selective_parquet, spark, files),
                options,
                {
                    "reader": reader,
                    "files_total": total,
                    "files_scanned": kept,
                    "files_skipped": total - kept,
                    "baseline_files_scanned": baseline_files,
                },
                console,
            )
        )
    return BenchReport(
        name=f"{NAME}-skip",
        metric="selective query time (median)",
        unit="ms",
        baseline=f"{BASELINE} (all files)",
        rows=tuple(rows),
        parameters={
            "table": SORTED_TABLE,
            "layout": f"repartitionByRange({options.ranges}, 'l_shipdate').sortWithinPartitions('l_shipdate')",
            "write_ms": write_ms,
            "where": SELECTIVE_WHERE,
            "aggregates": list(SELECTIVE_AGGREGATES),
            "txlake": "lake.snapshot().read(name, where=...) (files pruned by statistics) .selectExpr(...).collect()",
            "baseline": "spark.read.parquet(<every live file>).where(...).selectExpr(...).collect()",
            "files_total": total,
            "files_scanned": kept,
        },
    )


# -------------------------------------------------------------------------------------------------- driver


@contextmanager
def _work_dir(options: SparkBenchOptions, console: Console) -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="txlake-bench-spark-"))
    try:
        yield tmp
    finally:
        if options.keep:
            console.log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run_spark_bench(options: SparkBenchOptions, console: Console | None = None) -> list[BenchReport]:
    """Generate the data, run the selected parts in one Spark session, return their reports."""
    if options.repeat < 1 or options.warmup < 0 or options.ranges < 1:
        raise ValueError("repeat and ranges must be >= 1, warmup >= 0")
    console = console or console_for(stderr=True)
    reports: list[BenchReport] = []
    with _work_dir(options, console) as work:
        if options.data is not None:
            sources = existing_tpch(Path(options.data))
            generate_s: float | None = None
        else:
            with console.status(f"generating TPC-H SF{options.scale:g} with tpchgen-cli"):
                generate_ms, sources = timed_ms(lambda: generate_tpch(options.scale, work / "tpch"))
            generate_s = round(generate_ms / 1000, 2)
            console.log(f"generated TPC-H SF{options.scale:g} in {generate_s} s")
        load_before = load_average()
        with spark_session(options, console) as (spark, created):
            if "load" in options.parts:
                report, lake = run_load(spark, sources, work, options, console)
                reports.append(report)
            else:
                lake = txlake.connect((work / "lake").as_uri(), spark=spark)
                create_tables(lake, spark, sources)
                with console.status("loading TPC-H into txlake"):
                    load_txlake(lake, spark, sources)
            if "query" in options.parts:
                reports.extend(run_query(spark, lake, options, console))
            if "skip" in options.parts:
                reports.append(run_skip(spark, lake, sources["lineitem"], options, console))
            common = {
                "scale": options.scale,
                "repeat": options.repeat,
                "warmup": options.warmup,
                "statistic": "median",
                "storage": "file",
                "generator": "tpchgen-cli parquet" if options.data is None else f"existing files in {options.data}",
                "generate_seconds": generate_s,
                "source_bytes": {t: p.stat().st_size for t, p in sources.items()},
                "load_average_before": load_before,
                "load_average_after": load_average(),
                **session_parameters(spark, created),
            }
    return [_with_parameters(r, common) for r in reports]


def _with_parameters(report: BenchReport, extra: Mapping[str, Any]) -> BenchReport:
    return BenchReport(
        name=report.name,
        metric=report.metric,
        unit=report.unit,
        baseline=report.baseline,
        rows=report.rows,
        target_ratio=report.target_ratio,
        parameters={**extra, **report.parameters},
    )


def _skip_table(report: BenchReport) -> Table:
    table = Table(title=f"{report.name}: files pruned by statistics ({report.parameters['where']})")
    for column in ("config", "files total", "files scanned", "baseline files", "matching rows"):
        table.add_column(column, justify="left" if column == "config" else "right")
    for row in report.rows:
        p = row.params
        table.add_row(
            row.config,
            str(p["files_total"]),
            str(p["files_scanned"]),
            str(p["baseline_files_scanned"]),
            str(p["result"][0][0]),
        )
    return table


# ------------------------------------------------------------------------------------------------------ CLI


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=positive_float, default=1.0, help="TPC-H scale factor (default: 1)")
    parser.add_argument("--repeat", type=positive, default=3, help="timed samples per measurement (median; default 3)")
    parser.add_argument(
        "--warmup",
        type=non_negative,
        default=1,
        help="untimed query runs per side before the timed ones (default 1; 0 also skips the load warm-up)",
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="parts to run (default: all)")
    parser.add_argument(
        "--ranges", type=positive, default=16, help="l_shipdate ranges (files) of the sorted copy (default 16)"
    )
    parser.add_argument("--driver-memory", default="8g", help="spark.driver.memory of the session (default 8g)")
    parser.add_argument("--data", default=None, help="directory with lineitem.parquet and orders.parquet to reuse")
    parser.add_argument("--keep", action="store_true", help="keep the generated data and tables")


def options_from_args(args: argparse.Namespace) -> SparkBenchOptions:
    return SparkBenchOptions(
        scale=args.scale,
        repeat=args.repeat,
        warmup=args.warmup,
        parts=tuple(p for p in PARTS if p in args.parts),
        ranges=args.ranges,
        driver_memory=args.driver_memory,
        data=args.data,
        keep=args.keep,
    )


def run(args: argparse.Namespace) -> int:
    console = console_for()
    try:
        reports = run_spark_bench(options_from_args(args))
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("pyspark"):
            raise
        console_for(stderr=True).print("the spark benchmark needs PySpark: pip install 'txlake[spark]'")
        return 2
    except ToolNotFoundError as exc:
        console_for(stderr=True).print(str(exc))
        return 2
    for report in reports:
        print_report(report, console)
        if report.name == f"{NAME}-skip":
            console.print(_skip_table(report))
        json_path, png_path = write_report(args.out, report)
        console.print(f"wrote {json_path} and {png_path}")
    return 0
