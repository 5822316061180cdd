"""``txlake bench snapshot``: time to load a table's snapshot, txlake vs delta-rs, with and without a checkpoint.

For each commit count N a table is built with N commits of one small append each (version 0 also
creates the table), every add pointing at a real Parquet file with true stats. The load is timed
first on the bare log, then again after a checkpoint at the last version. Both readers open the table
from its URI in each sample: txlake ``load_snapshot`` over a fresh store, delta-rs ``DeltaTable(uri)``
(construction replays the log) plus ``.version()``.
"""

from __future__ import annotations

import argparse
import gc
import io
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from txlake.bench.args import key_value, positive
from txlake.bench.report import BenchReport, BenchRow, run_against_delta_rs
from txlake.cli.output import console_for
from txlake.delta import Add, DeltaLog, DeltaTable, commit_info, compute_stats, load_snapshot
from txlake.delta.actions import Action, now_ms
from txlake.storage import ObjectStore

NAME = "snapshot"
HELP = "snapshot load time: txlake load_snapshot vs deltalake.DeltaTable(uri), with and without a checkpoint"
DEFAULT_COMMITS = (1000, 10_000)
TARGET_RATIO = 1.5
BASELINE = "delta-rs"


@dataclass(frozen=True, slots=True)
class SnapshotBenchOptions:
    """What to build and how often to measure."""

    commits: tuple[int, ...] = DEFAULT_COMMITS
    repeat: int = 5
    root: str | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    build_threads: int = 8
    keep: bool = False


@dataclass(frozen=True, slots=True)
class SampleFile:
    """One small real Parquet file (bytes + its stats) written under many names, one per commit."""

    payload: bytes
    stats: str
    num_rows: int

    @classmethod
    def make(cls, num_rows: int = 10) -> SampleFile:
        data = pa.table(
            {
                "id": pa.array(range(num_rows), pa.int64()),
                "value": pa.array([i * 0.5 for i in range(num_rows)], pa.float64()),
                "label": pa.array([f"row-{i}" for i in range(num_rows)], pa.string()),
            }
        )
        buf = io.BytesIO()
        pq.write_table(data, buf, compression="snappy")
        return cls(buf.getvalue(), compute_stats(data), num_rows)

    @property
    def schema(self) -> pa.Schema:
        return pq.read_schema(pa.BufferReader(self.payload))


# ------------------------------------------------------------------------------------------------ building


def build_table(store: ObjectStore, path: str, commits: int, sample: SampleFile, *, threads: int = 8) -> DeltaTable:
    """A table at ``path`` with ``commits`` commits (versions 0..commits-1), each adding one data file."""
    if commits < 1:
        raise ValueError("commits must be >= 1")
    table = DeltaTable(store, path)
    run_id = uuid.uuid4().hex[:12]

    def add_for(version: int) -> Add:
        relative = f"part-{version:06d}-{run_id}.snappy.parquet"
        store.put(f"{table.path}/{relative}" if table.path else relative, sample.payload)
        return Add(relative, {}, len(sample.payload), now_ms(), True, sample.stats)

    def commit(version: int) -> None:
        actions: list[Action]
        if version == 0:
            actions = [*table.create_actions(sample.schema), add_for(0)]
        else:
            actions = [commit_info("WRITE", {"mode": "Append"}, isBlindAppend=True), add_for(version)]
        table.commit(version, actions)

    commit(0)  # the table exists before any other version lands
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for _ in pool.map(commit, range(1, commits)):
            pass
    return table


def delete_prefix(store: ObjectStore, prefix: str) -> None:
    """Remove everything a benchmark wrote below ``prefix`` (for object-store roots)."""
    for meta in store.list(prefix):
        store.delete(meta.path)


# ----------------------------------------------------------------------------------------------- measuring


def _import_deltalake() -> ModuleType:
    # deltalake is the baseline, an optional (test) dependency: only this workload needs it.
    import deltalake

    return deltalake


def _timed_ms(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


@dataclass(frozen=True, slots=True)
class TableUnderTest:
    """How each reader opens the table: txlake by store URI, delta-rs by its own URI form."""

    uri: str
    storage_options: Mapping[str, str]
    deltalake: ModuleType

    @property
    def delta_rs_uri(self) -> str:
        return self.uri.removeprefix("file://")

    def load_txlake(self) -> tuple[int, int]:
        """(version, live files) as txlake sees it."""
        snap = load_snapshot(DeltaLog(ObjectStore.from_uri(self.uri, self.storage_options), ""))
        return snap.version, len(snap.files)

    def load_delta_rs(self) -> Any:
        table = self.deltalake.DeltaTable(self.delta_rs_uri, storage_options=dict(self.storage_options) or None)
        table.version()
        return table

    def measure(self, config: str, repeat: int, params: Mapping[str, Any]) -> BenchRow:
        """Warm up both readers once (checking they agree), then alternate ``repeat`` timed loads."""
        expected = (int(params["latest_version"]), int(params["files"]))
        seen = self.load_txlake()
        baseline = self.load_delta_rs()
        seen_rs = (baseline.version(), len(baseline.file_uris()))
        if seen != expected or seen_rs != expected:
            raise RuntimeError(f"{config}: expected (version, files) {expected}, txlake {seen}, delta-rs {seen_rs}")
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(repeat):
            ours.append(_timed_ms(self.load_txlake))
            theirs.append(_timed_ms(self.load_delta_rs))
        return BenchRow.from_samples(config, ours, theirs, params)


@contextmanager
def _bench_root(options: SnapshotBenchOptions) -> Iterator[tuple[ObjectStore, str]]:
    """The store the tables go in and the prefix of this run; removed afterwards unless ``keep``."""
    if options.root is None:
        tmp = tempfile.mkdtemp(prefix="txlake-bench-snapshot-")
        store = ObjectStore.from_uri(f"file://{tmp}")
        try:
            yield store, ""
        finally:
            if not options.keep:
                shutil.rmtree(tmp, ignore_errors=True)
        return
    store = ObjectStore.from_uri(options.root, options.storage_options)
    prefix = f"txlake-bench-snapshot-{uuid.uuid4().hex[:12]}"
    try:
        yield store, prefix
    finally:
        if not options.keep:
            delete_prefix(store, prefix)


def run_snapshot_bench(options: SnapshotBenchOptions, console: Console | None = None) -> BenchReport:
    """Build, measure and return the report (nothing printed but progress)."""
    if options.repeat < 1:
        raise ValueError("repeat must be >= 1")
    console = console or console_for(stderr=True)
    deltalake = _import_deltalake()
    sample = SampleFile.make()
    rows: list[BenchRow] = []
    with _bench_root(options) as (store, prefix):
        for n in options.commits:
            path = f"{prefix}/commits-{n}" if prefix else f"commits-{n}"
            started = time.perf_counter()
            table = build_table(store, path, n, sample, threads=options.build_threads)
            console.log(f"built {n} commits at {table.uri} in {time.perf_counter() - started:.1f} s")
            under_test = TableUnderTest(table.uri, options.storage_options, deltalake)
            params = {"commits": n, "latest_version": n - 1, "files": n}
            rows.append(under_test.measure(f"{n} commits", options.repeat, {**params, "checkpoint_version": None}))
            table.checkpoint()
            rows.append(
                under_test.measure(f"{n} commits + checkpoint", options.repeat, {**params, "checkpoint_version": n - 1})
            )
            console.log(f"measured {n} commits")
    return BenchReport(
        name=NAME,
        metric="snapshot load time (median)",
        unit="ms",
        baseline=BASELINE,
        rows=tuple(rows),
        target_ratio=TARGET_RATIO,
        parameters={
            "commits": list(options.commits),
            "repeat": options.repeat,
            "warmup": 1,
            "statistic": "median",
            "storage": store.scheme,
            "rows_per_file": sample.num_rows,
            "txlake": "load_snapshot(DeltaLog(ObjectStore.from_uri(uri), ''))",
            "baseline": "deltalake.DeltaTable(uri).version()",
            "checkpoint": "same table, measured again after DeltaTable.checkpoint() at the last version",
        },
    )


# ------------------------------------------------------------------------------------------------------ CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--commits",
        type=positive,
        nargs="+",
        default=list(DEFAULT_COMMITS),
        metavar="N",
        help="commit counts to build tables with (default: " + " ".join(map(str, DEFAULT_COMMITS)) + ")",
    )
    parser.add_argument(
        "--repeat",
        type=positive,
        default=5,
        help="timed loads per reader and table, after one warm-up (default: 5; the median is reported)",
    )
    parser.add_argument(
        "--root",
        default=None,
        help="where to build the tables, e.g. s3://bucket/prefix (default: a fresh local temp dir)",
    )
    parser.add_argument(
        "--storage-option",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="object-store option for both readers, e.g. AWS_ENDPOINT_URL=http://127.0.0.1:8333 (repeatable)",
    )
    parser.add_argument("--build-threads", type=positive, default=8, help="threads writing commits and files")
    parser.add_argument("--keep", action="store_true", help="keep the built tables")


def options_from_args(args: argparse.Namespace) -> SnapshotBenchOptions:
    return SnapshotBenchOptions(
        commits=tuple(args.commits),
        repeat=args.repeat,
        root=args.root,
        storage_options=dict(args.storage_option),
        build_threads=args.build_threads,
        keep=args.keep,
    )


def run(args: argparse.Namespace) -> int:
    return run_against_delta_rs(NAME, args.out, lambda: run_snapshot_bench(options_from_args(args)))
