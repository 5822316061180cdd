"""``txlake bench commit``: commit latency, multi-table commits and writer throughput, txlake vs delta-rs.

Four parts, each measured on ``file://`` (a temp dir) and on a real S3 server (SeaweedFS, started and
stopped by the benchmark unless ``--no-s3`` or ``--s3-endpoint``), with the baseline in the same run:

1. ``single``: append of 10,000 rows to one table: a txlake transaction
   (``with lake.transaction() as tx: tx.append(...)``) vs ``deltalake.write_deltalake(uri, mode="append")``
   to a plain Delta table in the same store; median of ``--repeat`` samples after one discarded warm-up.
2. ``tables``: one transaction appending 100 rows to each of k tables vs k sequential delta-rs appends
   (which are not atomic); median latency and object-store requests per transaction by kind.
3. ``throughput``: 1, 2, 4, 8 writer processes (spawned), each committing 10-row transactions to its own
   table of one lakehouse for ``--seconds``; committed transactions/s and abort rate, against the same
   number of delta-rs writer processes appending to their own plain tables through open ``DeltaTable``
   handles (per-second commit counts show how both slow down as their logs grow).
4. ``hot``: the same, but every writer appends to one table (one lakehouse table; one plain Delta table that
   the delta-rs writers share, racing for its next version).

``--profile`` additionally runs cProfile over the ``file://`` single-table and largest k-table commits and
attributes every request to what it touched (global log, Delta log, data files).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import multiprocessing as mp
import pstats
import queue
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pyarrow as pa
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import txlake
from txlake.bench.args import (
    AddedLatency,
    add_latency_option,
    add_s3_options,
    key_value,
    positive,
    positive_float,
)
from txlake.bench.report import BenchReport, BenchRow, print_report, write_report
from txlake.cli.output import console_for
from txlake.errors import ConflictError, TxlakeError
from txlake.lake import Lakehouse
from txlake.storage import FaultInjector, ObjectStore, RequestCounts, RequestKind
from txlake.testing.seaweedfs import SeaweedFS, SeaweedFSError

NAME = "commit"
HELP = "commit latency, k-table transactions and writer throughput: txlake vs deltalake.write_deltalake"
BASELINE = "delta-rs"
Part = Literal["single", "tables", "throughput", "hot"]
PARTS: tuple[Part, ...] = ("single", "tables", "throughput", "hot")
DEFAULT_TABLES = (1, 2, 4, 8, 16, 32)
DEFAULT_WRITERS = (1, 2, 4, 8)
SINGLE_TARGET_RATIO = 1.3
TABLES_TARGET_RATIO = 3.0  # commit phase of the largest k against k = 1
THROUGHPUT_TARGET = 100.0  # committed transactions/s on file://
KINDS: tuple[RequestKind, ...] = ("GET", "HEAD", "LIST", "PUT", "DELETE")
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("name", pa.string())])
WRITER_STARTUP_TIMEOUT = 120.0  # seconds for spawned writers to import and connect
WRITER_GRACE = 60.0  # seconds past --seconds for the last transactions to finish before writers are stopped


@dataclass(frozen=True, slots=True)
class CommitBenchOptions:
    """What to measure, how often, and where."""

    parts: tuple[Part, ...] = PARTS
    repeat: int = 20
    rows: int = 10_000
    tables: tuple[int, ...] = DEFAULT_TABLES
    table_rows: int = 100
    writers: tuple[int, ...] = DEFAULT_WRITERS
    seconds: float = 10.0
    txn_rows: int = 10
    s3: bool = True
    s3_endpoint: str | None = None
    s3_bucket: str = "txlake-bench"
    storage_options: Mapping[str, str] = field(default_factory=dict)
    delta_rs_options: Mapping[str, str] = field(default_factory=dict)
    profile: bool = False
    profile_repeat: int = 10
    keep: bool = False
    group_commit: bool | None = None
    """The writers' ``connect(group_commit=...)``: ``None`` is txlake's default (on for S3 and files)."""
    added_latency: AddedLatency | None = None
    """Latency added to every txlake request (not delta-rs's), emulating a remote object store."""


def make_rows(n: int) -> pa.Table:
    """``n`` rows of (id int64, value float64, name string)."""
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "value": pa.array([i * 0.5 for i in range(n)], pa.float64()),
            "name": pa.array([f"name-{i}" for i in range(n)], pa.string()),
        },
        schema=SCHEMA,
    )


def _import_deltalake() -> ModuleType:
    # deltalake is the baseline, an optional (test) dependency: only the benchmarks need it.
    import deltalake

    return deltalake


# ------------------------------------------------------------------------------------------------ backends


@dataclass(frozen=True, slots=True)
class Backend:
    """Where one run's lakehouses and plain tables go: a root URI and the options that reach it."""

    name: Literal["file", "s3"]
    root: str
    storage_options: Mapping[str, str]
    description: str
    delta_rs_extra: Mapping[str, str] = field(default_factory=dict)

    def uri(self, path: str) -> str:
        return f"{self.root}/{path}"

    def delta_rs_uri(self, path: str) -> str:
        """delta-rs takes local tables as plain paths."""
        return self.uri(path).removeprefix("file://")

    def delta_rs_options(self) -> dict[str, str] | None:
        options = {**self.storage_options, **self.delta_rs_extra}
        return options or None


def delete_prefix(store: ObjectStore, prefix: str) -> None:
    """Remove every object below ``prefix`` (concurrently: part 3 leaves thousands of small objects)."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        for _ in pool.map(lambda meta: store.delete(meta.path), store.list(prefix)):
            pass


@contextmanager
def _file_backend(options: CommitBenchOptions, console: Console) -> Iterator[Backend]:
    tmp = tempfile.mkdtemp(prefix="txlake-bench-commit-")
    try:
        yield Backend("file", f"file://{tmp}", {}, f"local filesystem {tmp}", dict(options.delta_rs_options))
    finally:
        if options.keep:
            console.log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _s3_backend(options: CommitBenchOptions, console: Console) -> Iterator[Backend]:
    """A SeaweedFS server started here (and stopped at the end), or the existing ``--s3-endpoint``."""
    extra = dict(options.delta_rs_options)
    if options.s3_endpoint is None:
        server = SeaweedFS()
        with console.status("starting SeaweedFS"):
            server.start()
        try:
            bucket = server.new_bucket()
            console.log(f"SeaweedFS at {server.endpoint} (pid {server.pid}), bucket {bucket}")
            description = f"SeaweedFS {server.endpoint}, started by the benchmark"
            try:
                yield Backend("s3", f"s3://{bucket}/commit", server.storage_options(), description, extra)
            finally:
                with contextlib.suppress(SeaweedFSError, OSError):  # stopping removes the data anyway
                    server.delete_bucket(bucket)
        finally:
            server.stop()
        return
    endpoint = options.s3_endpoint
    storage = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1"}
    if endpoint.startswith("http://"):
        storage["AWS_ALLOW_HTTP"] = "true"
    storage.update(options.storage_options)
    prefix = f"txlake-bench-commit-{uuid.uuid4().hex[:12]}"
    root = f"s3://{options.s3_bucket}/{prefix}"
    try:
        yield Backend("s3", root, storage, f"S3 endpoint {endpoint}", extra)
    finally:
        if options.keep:
            console.log(f"kept {root}")
        else:
            delete_prefix(ObjectStore.from_uri(f"s3://{options.s3_bucket}", storage), prefix)


@contextmanager
def open_backends(options: CommitBenchOptions, console: Console) -> Iterator[list[Backend]]:
    with ExitStack() as stack:
        backends = [stack.enter_context(_file_backend(options, console))]
        if options.s3:
            backends.append(stack.enter_context(_s3_backend(options, console)))
        yield backends


# ----------------------------------------------------------------------------------------------- sampling


@dataclass(frozen=True, slots=True)
class TxnSample:
    """One txlake transaction: total and commit-phase latency, requests (whole transaction, commit phase)."""

    total_ms: float
    commit_ms: float
    requests: RequestCounts
    commit_requests: RequestCounts
    rebases: int


def txlake_append(lake: Lakehouse, batches: Mapping[str, pa.Table], *, collect: bool = True) -> TxnSample:
    """Time ``with lake.transaction() as tx: tx.append(name, data) for each table``."""
    counters = lake.store.counters
    if collect:
        gc.collect()
    before = counters.snapshot()
    start = time.perf_counter()
    with lake.transaction() as tx:
        for name, data in batches.items():
            tx.append(name, data)
        tx.wait_for_uploads()  # the data files are stored: the commit phase is the commit alone
        staged = time.perf_counter()
        staged_counts = counters.snapshot()
    end = time.perf_counter()
    after = counters.snapshot()
    assert tx.result is not None
    return TxnSample(
        (end - start) * 1000, (end - staged) * 1000, after - before, after - staged_counts, tx.result.rebases
    )


def delta_rs_append(
    deltalake: ModuleType, targets: Sequence[Any], data: pa.Table, options: dict[str, str] | None
) -> float:
    """Time sequential ``write_deltalake(target, data, mode="append")`` to each table, in ms.

    A target is a URI (the table is loaded from storage by every call: the baseline) or an open
    ``DeltaTable`` handle (updated in place: what a long-lived delta-rs writer would do).
    """
    gc.collect()
    start = time.perf_counter()
    for target in targets:
        storage = options if isinstance(target, str) else None
        deltalake.write_deltalake(target, data, mode="append", storage_options=storage)
    return (time.perf_counter() - start) * 1000


@dataclass(frozen=True, slots=True)
class PlainTables:
    """Plain Delta tables for the baseline: written by URI, plus twins written through open handles."""

    uris: tuple[str, ...]
    handles: tuple[Any, ...]

    @classmethod
    def create(cls, deltalake: ModuleType, backend: Backend, paths: Sequence[str]) -> PlainTables:
        options = backend.delta_rs_options()
        uris = tuple(backend.delta_rs_uri(p) for p in paths)
        twins = tuple(backend.delta_rs_uri(f"{p}-handle") for p in paths)
        for uri in uris + twins:
            deltalake.DeltaTable.create(uri, SCHEMA, storage_options=options)
        return cls(uris, tuple(deltalake.DeltaTable(t, storage_options=options) for t in twins))


def median_counts(counts: Sequence[RequestCounts]) -> dict[str, float]:
    """Median requests per kind (and in total) over samples."""
    out: dict[str, float] = {kind: float(statistics.median(c.as_dict()[kind] for c in counts)) for kind in KINDS}
    out["total"] = float(statistics.median(c.total for c in counts))
    return out


def _sample_params(samples: Sequence[TxnSample]) -> dict[str, Any]:
    return {
        "txlake_commit_phase_ms": statistics.median(s.commit_ms for s in samples),
        "requests_per_txn": median_counts([s.requests for s in samples]),
        "commit_phase_requests": median_counts([s.commit_requests for s in samples]),
        "rebases": sum(s.rebases for s in samples),
    }


def _baseline_params(uri_ms: Sequence[float], handle_ms: Sequence[float]) -> dict[str, Any]:
    return {
        "baseline_handle_ms": statistics.median(handle_ms),
        "baseline_handle_samples": list(handle_ms),
        "baseline_handle": "write_deltalake(open DeltaTable handle, ...): no table load per write (not the ratio)",
    }


def measure_single(backend: Backend, options: CommitBenchOptions, deltalake: ModuleType, console: Console) -> BenchRow:
    """Part 1: one-table append of ``options.rows`` rows, interleaved txlake / delta-rs samples."""
    lake = txlake.connect(backend.uri("single/lake"), backend.storage_options)
    lake.create_table("bench.single", SCHEMA)
    lake.store.faults = RequestRecorder(latency=options.added_latency)
    plain = PlainTables.create(deltalake, backend, ["single/plain"])
    data = make_rows(options.rows)
    ours: list[TxnSample] = []
    theirs: list[float] = []
    handle: list[float] = []
    for i in range(options.repeat + 1):  # sample 0 is the warm-up
        sample = txlake_append(lake, {"bench.single": data})
        by_uri = delta_rs_append(deltalake, plain.uris, data, backend.delta_rs_options())
        by_handle = delta_rs_append(deltalake, plain.handles, data, None)
        if i:
            ours.append(sample)
            theirs.append(by_uri)
            handle.append(by_handle)
    _check_versions(lake, {"bench.single": options.repeat + 1}, deltalake, plain, options.repeat + 1, backend)
    console.log(f"[{backend.name}] single-table append measured ({options.repeat} samples)")
    return BenchRow.from_samples(
        backend.name,
        [s.total_ms for s in ours],
        theirs,
        {"backend": backend.name, "rows": options.rows, **_sample_params(ours), **_baseline_params(theirs, handle)},
    )


def measure_tables(
    backend: Backend, options: CommitBenchOptions, deltalake: ModuleType, console: Console
) -> list[BenchRow]:
    """Part 2: for each k, transactions appending ``table_rows`` rows to each of k tables."""
    most = max(options.tables)
    lake = txlake.connect(backend.uri("tables/lake"), backend.storage_options)
    names = [f"bench.t{i:02d}" for i in range(most)]
    with lake.transaction() as tx:
        for name in names:
            tx.create_table(name, SCHEMA)
    lake.store.faults = RequestRecorder(latency=options.added_latency)
    plain = PlainTables.create(deltalake, backend, [f"tables/plain/t{i:02d}" for i in range(most)])
    data = make_rows(options.table_rows)
    rows: list[BenchRow] = []
    for k in options.tables:
        ours: list[TxnSample] = []
        theirs: list[float] = []
        handle: list[float] = []
        for i in range(options.repeat + 1):
            sample = txlake_append(lake, dict.fromkeys(names[:k], data))
            by_uri = delta_rs_append(deltalake, plain.uris[:k], data, backend.delta_rs_options())
            by_handle = delta_rs_append(deltalake, plain.handles[:k], data, None)
            if i:
                ours.append(sample)
                theirs.append(by_uri)
                handle.append(by_handle)
        params = {
            "backend": backend.name,
            "k": k,
            "rows_per_table": options.table_rows,
            "baseline_atomic": False,
            **_sample_params(ours),
            **_baseline_params(theirs, handle),
        }
        rows.append(BenchRow.from_samples(f"{backend.name} k={k}", [s.total_ms for s in ours], theirs, params))
        console.log(f"[{backend.name}] k={k}: {rows[-1].txlake:.1f} ms vs {rows[-1].baseline:.1f} ms")
    rows = _compare_commit_phases(rows)
    # table i got one append per sample of every k > i
    appended = [sum(options.repeat + 1 for k in options.tables if k > i) for i in range(most)]
    _check_versions(lake, dict(zip(names, appended, strict=True)), deltalake, plain, appended, backend)
    return rows


def _compare_commit_phases(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """``rows`` with each k's commit phase against k = 1's (``commit_phase_vs_k1``) and the largest k's against
    :data:`TABLES_TARGET_RATIO` (``meets_target``); unchanged when k = 1 was not measured."""
    one = next((r for r in rows if r.params["k"] == 1), None)
    if one is None:
        return list(rows)
    base = float(one.params["txlake_commit_phase_ms"])
    most = max(int(r.params["k"]) for r in rows)
    out = []
    for row in rows:
        ratio = float(row.params["txlake_commit_phase_ms"]) / base if base > 0 else float("inf")
        extra: dict[str, Any] = {"commit_phase_vs_k1": ratio}
        if row.params["k"] == most and most > 1:
            extra |= {"target_commit_phase_vs_k1": TABLES_TARGET_RATIO, "meets_target": ratio <= TABLES_TARGET_RATIO}
        out.append(replace(row, params={**row.params, **extra}))
    return out


def _check_versions(
    lake: Lakehouse,
    expected: Mapping[str, int],
    deltalake: ModuleType,
    plain: PlainTables,
    appended: int | Sequence[int],
    backend: Backend,
) -> None:
    """Both sides committed what was asked: a benchmark of silently failed commits is worthless."""
    snap = lake.snapshot()
    for name, version in expected.items():
        if snap.table_version(name) != version:
            raise RuntimeError(f"{name}: expected Delta version {version}, got {snap.table_version(name)}")
    counts = [appended] * len(plain.uris) if isinstance(appended, int) else list(appended)
    uris = list(plain.uris) + [h.table_uri for h in plain.handles]
    for uri, version in zip(uris, counts + counts, strict=True):
        got = deltalake.DeltaTable(uri, storage_options=backend.delta_rs_options()).version()
        if got != version:  # version 0 is the create
            raise RuntimeError(f"{uri}: expected delta-rs version {version}, got {got}")


# ---------------------------------------------------------------------------------------------- throughput


@dataclass(frozen=True, slots=True)
class WriterTask:
    """What one writer process does (picklable: it crosses to a spawned process)."""

    system: Literal["txlake", "delta-rs"]
    index: int
    uri: str
    storage_options: dict[str, str]
    table: str
    rows: int
    seconds: float
    group_commit: bool | None = None
    added_latency: AddedLatency | None = None


@dataclass(frozen=True, slots=True)
class WriterResult:
    """What one writer process did."""

    index: int
    attempts: int = 0
    commits: int = 0
    conflicts: int = 0
    errors: int = 0
    rebases: int = 0
    elapsed: float = 0.0
    first_error: str | None = None
    per_second: tuple[int, ...] = ()  # commits in each second of the run (shows slow-downs as the log grows)
    requests: dict[str, int] = field(default_factory=dict)  # txlake's object-store requests, whole run
    requests_by_target: dict[str, int] = field(default_factory=dict)  # "<kind> <what it touched>" -> count


def _commit_once(
    task: WriterTask, lake: Lakehouse | None, deltalake: ModuleType | None, handle: Any, data: pa.Table
) -> int:
    """One small transaction; returns its rebases (always 0 for delta-rs)."""
    if lake is not None:
        with lake.transaction() as tx:
            tx.append(task.table, data)
        return tx.result.rebases if tx.result is not None else 0
    assert deltalake is not None
    deltalake.write_deltalake(handle, data, mode="append")
    return 0


def writer_main(task: WriterTask, go: Any, results: Any) -> None:
    """A writer process: connect, report ready, wait for ``go``, commit until ``task.seconds`` have passed."""
    stats = Counter[str]()
    seconds = Counter[int]()
    first_error: str | None = None
    elapsed = 0.0
    lake: Lakehouse | None = None
    recorder = RequestRecorder(latency=task.added_latency)
    try:
        deltalake = _import_deltalake() if task.system == "delta-rs" else None
        conflict_types: tuple[type[BaseException], ...] = (ConflictError,)
        if deltalake is not None:
            conflict_types = (deltalake.exceptions.CommitFailedError,)
        lake = (
            txlake.connect(task.uri, task.storage_options, create=False, group_commit=task.group_commit)
            if task.system == "txlake"
            else None
        )
        # delta-rs writes through one open handle: a long-lived writer, like the long-lived Lakehouse
        handle = None
        if deltalake is not None:
            handle = deltalake.DeltaTable(task.table, storage_options=task.storage_options or None)
        data = make_rows(task.rows)
        results.put(("ready", task.index, None))
        if not go.wait(WRITER_STARTUP_TIMEOUT):
            raise TimeoutError("no start signal")
        if lake is not None:
            lake.store.counters.reset()
            lake.store.faults = recorder
        start = time.monotonic()
        deadline = start + task.seconds
        reported = start
        while (now := time.monotonic()) < deadline:
            stats["attempts"] += 1
            try:
                stats["rebases"] += _commit_once(task, lake, deltalake, handle, data)
                stats["commits"] += 1
                seconds[int(time.monotonic() - start)] += 1
            except conflict_types:
                stats["conflicts"] += 1
            except TxlakeError as exc:  # a failed commit that is not a conflict: counted, reported, go on
                stats["errors"] += 1
                first_error = first_error or repr(exc)
            if now - reported >= 0.25:
                results.put(("progress", task.index, stats["commits"]))
                reported = now
        elapsed = time.monotonic() - start
    except Exception as exc:  # reported to the parent, which marks the run failed
        stats["errors"] += 1
        first_error = first_error or repr(exc)
    results.put(
        (
            "done",
            task.index,
            WriterResult(
                task.index,
                stats["attempts"],
                stats["commits"],
                stats["conflicts"],
                stats["errors"],
                stats["rebases"],
                elapsed,
                first_error,
                tuple(seconds[i] for i in range(max(seconds, default=-1) + 1)),
                lake.store.counters.snapshot().as_dict() if lake is not None else {},
                {f"{kind} {what}": n for (kind, what), n in sorted(recorder.take().items())},
            ),
        )
    )


@dataclass(frozen=True, slots=True)
class ThroughputRun:
    """All writers of one run: committed transactions/s over the longest writer's time, and aborts."""

    system: str
    writers: int
    results: tuple[WriterResult, ...]

    @property
    def commits(self) -> int:
        return sum(r.commits for r in self.results)

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self.results)

    @property
    def conflicts(self) -> int:
        return sum(r.conflicts for r in self.results)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.results) + (self.writers - len(self.results))

    @property
    def per_second(self) -> float:
        elapsed = max((r.elapsed for r in self.results), default=0.0)
        return self.commits / elapsed if elapsed > 0 else 0.0

    @property
    def abort_rate(self) -> float:
        return self.conflicts / self.attempts if self.attempts else 0.0


def run_writers(tasks: Sequence[WriterTask], seconds: float, label: str, console: Console) -> ThroughputRun:
    """Spawn one process per task, start them together, show progress, and join them (bounded in time)."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    results: Any = ctx.Queue()
    procs = {
        t.index: ctx.Process(target=writer_main, args=(t, go, results), name=f"txlake-bench-writer-{t.index}")
        for t in tasks
    }
    for proc in procs.values():
        proc.daemon = True
        proc.start()
    done: dict[int, WriterResult] = {}
    progress_counts: dict[int, int] = {}
    try:
        ready: set[int] = set()
        deadline = time.monotonic() + WRITER_STARTUP_TIMEOUT
        while len(ready | set(done)) < len(tasks) and time.monotonic() < deadline:
            _drain(results, ready, done, progress_counts, timeout=0.2)
            if all(not p.is_alive() for i, p in procs.items() if i not in done) and len(done) < len(tasks):
                _drain(results, ready, done, progress_counts, timeout=1.0)
                break  # a writer died before reporting ready: its result (if any) says why
        go.set()
        started = time.monotonic()
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True
        ) as progress:
            bar = progress.add_task(label, total=seconds)
            while len(done) < len(tasks) and time.monotonic() < started + seconds + WRITER_GRACE:
                _drain(results, ready, done, progress_counts, timeout=0.2)
                if all(not p.is_alive() for p in procs.values()):
                    _drain(results, ready, done, progress_counts, timeout=1.0)
                    break
                progress.update(
                    bar,
                    completed=min(seconds, time.monotonic() - started),
                    description=f"{label}: {sum(progress_counts.values())} commits",
                )
    finally:
        go.set()  # writers still waiting for the start give up at once instead of after the timeout
        for proc in procs.values():
            proc.join(timeout=10.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        _drain(results, set(), done, progress_counts, timeout=0.0)
        results.close()
    system = tasks[0].system if tasks else "txlake"
    return ThroughputRun(system, len(tasks), tuple(done[i] for i in sorted(done)))


def _drain(
    results: Any, ready: set[int], done: dict[int, WriterResult], counts: dict[int, int], *, timeout: float
) -> None:
    """Handle every message waiting (the first one waited for up to ``timeout``)."""
    wait = timeout
    while True:
        try:
            kind, index, payload = results.get(timeout=wait) if wait > 0 else results.get_nowait()
        except queue.Empty:
            return
        wait = 0.0
        if kind == "ready":
            ready.add(index)
        elif kind == "progress":
            counts[index] = int(payload)
        elif kind == "done":
            done[index] = payload
            counts[index] = payload.commits


def _requests_per_commit(run: ThroughputRun) -> dict[str, float]:
    totals = Counter[str]()
    for r in run.results:
        totals.update(r.requests)
    return {kind: totals[kind] / run.commits if run.commits else 0.0 for kind in KINDS}


def _requests_by_target(run: ThroughputRun) -> dict[str, float]:
    """Requests per committed transaction by kind and what they touched (:func:`classify`), most first."""
    totals = sum((Counter(r.requests_by_target) for r in run.results), Counter[str]())
    return {what: n / run.commits for what, n in totals.most_common()} if run.commits else {}


def _timeline(run: ThroughputRun) -> list[int]:
    """Commits of all writers in each second of the run."""
    width = max((len(r.per_second) for r in run.results), default=0)
    return [sum(r.per_second[i] for r in run.results if i < len(r.per_second)) for i in range(width)]


def measure_throughput(
    backend: Backend, options: CommitBenchOptions, deltalake: ModuleType, console: Console, *, hot: bool = False
) -> tuple[list[BenchRow], list[tuple[ThroughputRun, ThroughputRun]]]:
    """Part 3: n writer processes on disjoint tables, txlake (one lakehouse) vs delta-rs (plain tables).

    ``hot`` (part 4): every writer appends to the same table instead (one lakehouse table; one plain table).
    """
    rows: list[BenchRow] = []
    runs: list[tuple[ThroughputRun, ThroughputRun]] = []
    part = "hot" if hot else "throughput"
    for n in options.writers:
        uri = backend.uri(f"{part}/w{n}/lake")
        lake = txlake.connect(uri, backend.storage_options)
        names = ["bench.hot"] * n if hot else [f"bench.w{i}" for i in range(n)]
        with lake.transaction() as tx:
            for name in dict.fromkeys(names):
                tx.create_table(name, SCHEMA)
        plains = [backend.delta_rs_uri(f"{part}/w{n}/plain/" + ("hot" if hot else f"w{i}")) for i in range(n)]
        for plain in dict.fromkeys(plains):
            deltalake.DeltaTable.create(plain, SCHEMA, storage_options=backend.delta_rs_options())
        storage = dict(backend.storage_options)
        ours = run_writers(
            [
                WriterTask(
                    "txlake",
                    i,
                    uri,
                    storage,
                    names[i],
                    options.txn_rows,
                    options.seconds,
                    options.group_commit,
                    options.added_latency,
                )
                for i in range(n)
            ],
            options.seconds,
            f"[{backend.name}] txlake, {n} writers" + (" (one table)" if hot else ""),
            console,
        )
        rs_options = backend.delta_rs_options() or {}
        theirs = run_writers(
            [WriterTask("delta-rs", i, "", rs_options, plains[i], options.txn_rows, options.seconds) for i in range(n)],
            options.seconds,
            f"[{backend.name}] delta-rs, {n} writers" + (" (one table)" if hot else ""),
            console,
        )
        runs.append((ours, theirs))
        console.log(
            f"[{backend.name}] {n} writers: txlake {ours.per_second:.1f}/s ({ours.conflicts} aborts, "
            f"{ours.errors} errors), delta-rs {theirs.per_second:.1f}/s"
        )
        params: dict[str, Any] = {
            "backend": backend.name,
            "writers": n,
            "seconds": options.seconds,
            "rows_per_txn": options.txn_rows,
            "group_commit": options.group_commit,
            "txlake_commits": ours.commits,
            "txlake_attempts": ours.attempts,
            "txlake_conflicts": ours.conflicts,
            "txlake_abort_rate": ours.abort_rate,
            "txlake_errors": ours.errors,
            "txlake_rebases_per_commit": sum(r.rebases for r in ours.results) / ours.commits if ours.commits else 0.0,
            "txlake_requests_per_commit": _requests_per_commit(ours),
            "txlake_requests_per_commit_by_target": _requests_by_target(ours),
            "txlake_commits_per_second_timeline": _timeline(ours),
            "baseline_commits_per_second_timeline": _timeline(theirs),
            "txlake_writers": [asdict(r) for r in ours.results],
            "baseline_commits": theirs.commits,
            "baseline_conflicts": theirs.conflicts,
            "baseline_errors": theirs.errors,
            "baseline_writers": [asdict(r) for r in theirs.results],
        }
        if backend.name == "file" and options.added_latency is None:  # the target is of the bare local disk
            params["target_per_second"] = THROUGHPUT_TARGET
            params["meets_target"] = ours.per_second >= THROUGHPUT_TARGET and ours.conflicts == 0
        params["tables"] = "one table shared by every writer" if hot else "one table per writer"
        rows.append(
            BenchRow(f"{backend.name} {n}w" + (" hot" if hot else ""), ours.per_second, theirs.per_second, params)
        )
    return rows, runs


# ------------------------------------------------------------------------------------------------- profile


_TXLAKE_AREAS = {
    "groups": "group intent",
    "txns": "transaction sublog",
    "reservations": "reservation",
    "intents": "pessimistic marker",
}


def classify(path: str) -> str:
    """What an object-store request touched, from its path (a LIST's path is its prefix)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if path.startswith("_txlake/"):
        area = path.split("/", 2)[1]
        if area in _TXLAKE_AREAS:
            return _TXLAKE_AREAS[area]
        if name == "log":
            return "global log listing"
        if name == "_last_checkpoint":
            return "global _last_checkpoint"
        if name.endswith(".outcome.json"):
            return "global outcome"
        if name.endswith(".checkpoint.json"):
            return "global checkpoint"
        return "global record"
    if name == "_delta_log":
        return "delta log listing"
    if "/_delta_log/" in path:
        if name == "_last_checkpoint":
            return "delta _last_checkpoint"
        return "delta checkpoint" if ".checkpoint." in name else "delta commit"
    return "data file" if name.endswith(".parquet") else "other"


@dataclass
class RequestRecorder(FaultInjector):
    """A fault injector without rules that counts the requests by kind and what they touched (``what(path)``:
    :func:`classify` unless told otherwise), and delays each by ``latency`` when given."""

    seen: Counter[tuple[str, str]] = field(default_factory=Counter)
    what: Callable[[str], str] = classify
    latency: AddedLatency | None = None
    _seen_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.latency is not None:
            self.latency.install(self)  # hook rules: the delay follows the count

    def before(self, kind: RequestKind, path: str) -> None:
        with self._seen_lock:
            self.seen[(kind, self.what(path.split("\n", 1)[0]))] += 1  # a bulk delete: by its first key
        super().before(kind, path)

    def take(self) -> Counter[tuple[str, str]]:
        with self._seen_lock:
            out = self.seen
            self.seen = Counter()
        return out


@dataclass(frozen=True, slots=True)
class FunctionCost:
    """One profiled function, per transaction."""

    function: str
    calls_per_txn: float
    cumulative_ms_per_txn: float
    own_ms_per_txn: float


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """One profiled scenario: time per transaction, requests per transaction by target, top functions."""

    scenario: str
    transactions: int
    ms_per_txn: float
    commit_ms_per_txn: float
    requests: dict[str, float]
    top_functions: tuple[FunctionCost, ...]
    text: str


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/src/", "/lib/python"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def profile_scenario(
    lake: Lakehouse, scenario: str, batches: Mapping[str, pa.Table], repeat: int, prof_path: Path
) -> ProfileResult:
    """cProfile ``repeat`` transactions (after one warm-up); attribute requests by what they touched."""
    recorder = RequestRecorder()
    lake.store.faults = recorder
    txlake_append(lake, batches)
    recorder.take()
    profiler = cProfile.Profile()
    samples: list[TxnSample] = []
    profiler.enable()
    for _ in range(repeat):
        samples.append(txlake_append(lake, batches, collect=False))
    profiler.disable()
    seen = recorder.take()
    lake.store.faults = FaultInjector()
    profiler.dump_stats(prof_path)
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    harness = {"<listcomp>", "<method 'disable' of '_lsprof.Profiler' objects>"}
    top = sorted(
        (
            FunctionCost(f"{_short(file)}:{line}({func})", nc / repeat, ct * 1000 / repeat, tt * 1000 / repeat)
            for (file, line, func), (_cc, nc, tt, ct, _callers) in raw.items()
            if func not in harness and not file.endswith("bench/commit.py")
        ),
        key=lambda f: -f.cumulative_ms_per_txn,
    )[:40]
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).strip_dirs().sort_stats("tottime").print_stats(25)
    requests = {f"{kind} {what}": count / repeat for (kind, what), count in sorted(seen.items())}
    return ProfileResult(
        scenario,
        repeat,
        statistics.mean(s.total_ms for s in samples),
        statistics.mean(s.commit_ms for s in samples),
        requests,
        tuple(top),
        buf.getvalue(),
    )


def run_profile(backend: Backend, options: CommitBenchOptions, out_dir: Path, console: Console) -> list[ProfileResult]:
    """Profile the single-table commit and the largest k-table commit on ``backend``."""
    most = max(options.tables)
    lake = txlake.connect(backend.uri("profile/lake"), backend.storage_options)
    names = [f"bench.p{i:02d}" for i in range(most)]
    with lake.transaction() as tx:
        for name in names:
            tx.create_table(name, SCHEMA)
    out_dir.mkdir(parents=True, exist_ok=True)
    scenarios = [
        ("single", {names[0]: make_rows(options.rows)}),
        (f"k{most}", dict.fromkeys(names, make_rows(options.table_rows))),
    ]
    results = []
    for scenario, batches in scenarios:
        prof = out_dir / f"{NAME}-profile-{backend.name}-{scenario}.prof"
        results.append(profile_scenario(lake, scenario, batches, options.profile_repeat, prof))
        console.log(f"[{backend.name}] profiled {scenario}: {prof}")
    return results


def write_profile(results: Sequence[ProfileResult], path: Path) -> None:
    lines: list[str] = []
    for r in results:
        lines.append(f"=== {r.scenario}: {r.transactions} transactions (under cProfile) ===")
        lines.append(f"mean {r.ms_per_txn:.2f} ms per transaction, of which commit phase {r.commit_ms_per_txn:.2f} ms")
        lines.append("requests per transaction:")
        lines.extend(f"  {what:40s} {n:8.2f}" for what, n in r.requests.items())
        lines.append("top functions by cumulative time (ms per transaction):")
        lines.extend(
            f"  {f.cumulative_ms_per_txn:9.3f} cum {f.own_ms_per_txn:9.3f} own "
            f"{f.calls_per_txn:9.1f} calls  {f.function}"
            for f in r.top_functions
        )
        lines.append("pstats by own time:")
        lines.append(r.text)
    path.write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------------------- reporting


def _latency_table(title: str, rows: Sequence[BenchRow]) -> Table:
    """Where txlake's time goes (commit phase) and the second delta-rs baseline (an open handle)."""
    table = Table(title=f"{title}: detail (medians)")
    for column in ("config", "txlake ms", "commit phase ms", "requests", "delta-rs uri ms", "delta-rs handle ms"):
        table.add_column(column, justify="left" if column == "config" else "right")
    table.add_column("txlake/handle", justify="right")
    phases = any("commit_phase_vs_k1" in row.params for row in rows)
    if phases:
        table.add_column(f"commit phase / k=1 (target <= {TABLES_TARGET_RATIO:g}x at the largest k)", justify="right")
    for row in rows:
        p = row.params
        handle = float(p["baseline_handle_ms"])
        cells = [
            row.config,
            f"{row.txlake:.2f}",
            f"{p['txlake_commit_phase_ms']:.2f}",
            f"{p['requests_per_txn']['total']:g}",
            f"{row.baseline:.2f}",
            f"{handle:.2f}",
            f"{row.txlake / handle:.2f}x" if handle > 0 else "-",
        ]
        if phases:
            met = p.get("meets_target")
            mark = "" if met is None else (" [green]met[/green]" if met else " [red]missed[/red]")
            cells.append(f"{p['commit_phase_vs_k1']:.2f}x{mark}" if "commit_phase_vs_k1" in p else "-")
        table.add_row(*cells)
    return table


def _requests_table(rows: Sequence[BenchRow]) -> Table:
    table = Table(title="tables: object-store requests per transaction (median; commit phase in brackets)")
    table.add_column("config")
    for kind in (*KINDS, "total"):
        table.add_column(kind, justify="right")
    for row in rows:
        whole, commit = row.params["requests_per_txn"], row.params["commit_phase_requests"]
        table.add_row(row.config, *[f"{whole[k]:g} [{commit[k]:g}]" for k in (*KINDS, "total")])
    return table


def _first_last(timeline: Sequence[int]) -> str:
    full = list(timeline[:-1]) if len(timeline) > 1 else list(timeline)  # the last second is partial
    return f"{full[0]} → {full[-1]}" if full else "-"


def _throughput_table(rows: Sequence[BenchRow]) -> Table:
    table = Table(title=f"throughput: aborts and target (>= {THROUGHPUT_TARGET:g}/s on file://, 0 aborts)")
    for column in ("config", "txlake tx/s", "delta-rs tx/s", "attempts", "aborts", "abort rate", "errors"):
        table.add_column(column, justify="left" if column == "config" else "right")
    table.add_column("rebases/commit", justify="right")
    table.add_column("requests/commit", justify="right")
    table.add_column("tx in 1st s → last full s", justify="right")
    table.add_column("target", justify="center")
    for row in rows:
        p = row.params
        met = p.get("meets_target")
        target = "" if met is None else ("[green]met[/green]" if met else "[red]missed[/red]")
        table.add_row(
            row.config,
            f"{row.txlake:.1f}",
            f"{row.baseline:.1f}",
            str(p["txlake_attempts"]),
            str(p["txlake_conflicts"]),
            f"{p['txlake_abort_rate']:.2%}",
            str(p["txlake_errors"]),
            f"{p['txlake_rebases_per_commit']:.2f}",
            f"{sum(p['txlake_requests_per_commit'].values()):.1f}",
            _first_last(p["txlake_commits_per_second_timeline"]),
            target,
        )
    return table


def plot_requests(rows: Sequence[BenchRow], path: Path) -> None:
    """Stacked bars of txlake's requests per k-table transaction by kind."""
    # Imported here: see report.plot_report (matplotlib is slow to import for every CLI call).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 0.8 * len(rows) + 2.0), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for kind in KINDS:
        values = [float(r.params["requests_per_txn"][kind]) for r in rows]
        if any(values):
            ax.bar(xs, values, 0.6, bottom=bottom, label=kind)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(xs, [r.config for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("requests per transaction (median)")
    ax.set_title("txlake k-table transaction: object-store requests by kind")
    ax.legend()
    fig.savefig(path, dpi=120)


@dataclass(frozen=True, slots=True)
class CommitBenchResult:
    """Everything one run produced."""

    reports: tuple[BenchReport, ...]
    profiles: tuple[ProfileResult, ...] = ()
    failed_writers: int = 0


def run_commit_bench(options: CommitBenchOptions, out_dir: Path, console: Console | None = None) -> CommitBenchResult:
    """Measure every requested part on every backend; return the reports (progress goes to ``console``)."""
    if options.repeat < 1:
        raise ValueError("repeat must be >= 1")
    console = console or console_for(stderr=True)
    deltalake = _import_deltalake()
    single: list[BenchRow] = []
    tables: list[BenchRow] = []
    throughput: list[BenchRow] = []
    profiles: list[ProfileResult] = []
    failed = 0
    with open_backends(options, console) as backends:
        described = {b.name: b.description for b in backends}
        for backend in backends:
            if "single" in options.parts:
                single.append(measure_single(backend, options, deltalake, console))
            if "tables" in options.parts:
                tables.extend(measure_tables(backend, options, deltalake, console))
            for part in ("throughput", "hot"):
                if part in options.parts:
                    rows, runs = measure_throughput(backend, options, deltalake, console, hot=part == "hot")
                    throughput.extend(rows)
                    failed += sum(ours.errors + theirs.errors for ours, theirs in runs)
            if options.profile and backend.name == "file":
                profiles.extend(run_profile(backend, options, out_dir, console))
    common = {
        "backends": described,
        "repeat": options.repeat,
        "warmup": 1,
        "statistic": "median",
        "isolation": "serializable (txlake default)",
        "txlake": "with lake.transaction() as tx: tx.append(name, rows) (one long-lived Lakehouse)",
        "delta_rs_storage_options": "the same AWS_* options as txlake"
        + (f", plus {sorted(options.delta_rs_options)}" if options.delta_rs_options else ""),
    }
    if options.added_latency is not None and options.added_latency.any:
        common["added_latency"] = options.added_latency.describe()
        common["ratios_to_delta_rs"] = "not comparable: only txlake's requests are delayed"
    reports = []
    if single:
        reports.append(
            BenchReport(
                f"{NAME}-single",
                f"append latency, {options.rows} rows (median)",
                "ms",
                BASELINE,
                tuple(single),
                SINGLE_TARGET_RATIO,
                {**common, "rows": options.rows, "baseline": 'write_deltalake(uri, rows, mode="append")'},
            )
        )
    if tables:
        reports.append(
            BenchReport(
                f"{NAME}-tables",
                f"latency, {options.table_rows} rows/table (median)",
                "ms",
                BASELINE,
                tuple(tables),
                None,
                {
                    **common,
                    "tables": list(options.tables),
                    "rows_per_table": options.table_rows,
                    "baseline": 'k x write_deltalake(uri_i, rows, mode="append"), sequential, no atomicity',
                },
            )
        )
    if throughput:
        reports.append(
            BenchReport(
                f"{NAME}-throughput",
                "committed transactions/s (higher is better)",
                "tx/s",
                BASELINE,
                tuple(throughput),
                None,
                {
                    **common,
                    "repeat": 1,
                    "writers": list(options.writers),
                    "seconds": options.seconds,
                    "rows_per_txn": options.txn_rows,
                    "processes": "multiprocessing spawn, one table per writer (disjoint; rows ending in 'hot': "
                    "every writer on one table)",
                    "baseline": 'per process: write_deltalake(DeltaTable(uri), rows, mode="append") in a loop',
                    "ratio_meaning": "txlake/delta-rs throughput: > 1 means txlake commits more per second",
                    "target_per_second_file": THROUGHPUT_TARGET,
                },
            )
        )
    return CommitBenchResult(tuple(reports), tuple(profiles), failed)


# ------------------------------------------------------------------------------------------------------ CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which parts to run (default: all)"
    )
    parser.add_argument("--repeat", type=positive, default=20, help="samples per configuration after a warm-up")
    parser.add_argument("--rows", type=positive, default=10_000, help="rows of the single-table append")
    parser.add_argument(
        "--tables",
        type=positive,
        nargs="+",
        default=list(DEFAULT_TABLES),
        metavar="K",
        help="tables per transaction (default: " + " ".join(map(str, DEFAULT_TABLES)) + ")",
    )
    parser.add_argument("--table-rows", type=positive, default=100, help="rows appended to each of the k tables")
    parser.add_argument(
        "--writers",
        type=positive,
        nargs="+",
        default=list(DEFAULT_WRITERS),
        metavar="N",
        help="concurrent writer processes (default: " + " ".join(map(str, DEFAULT_WRITERS)) + ")",
    )
    parser.add_argument("--seconds", type=positive_float, default=10.0, help="duration of each throughput run")
    parser.add_argument("--txn-rows", type=positive, default=10, help="rows per throughput transaction")
    parser.add_argument("--no-s3", action="store_true", help="only file:// (no SeaweedFS)")
    add_s3_options(parser, both=True)
    parser.add_argument(
        "--delta-rs-option",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra storage option for the delta-rs baseline only, e.g. conditional_put=etag (repeatable)",
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile the file:// commits (writes .prof/.txt)")
    parser.add_argument("--profile-repeat", type=positive, default=10, help="profiled transactions per scenario")
    parser.add_argument("--keep", action="store_true", help="keep the lakehouses and tables written")
    add_latency_option(parser)
    parser.add_argument(
        "--group-commit",
        choices=("auto", "on", "off"),
        default="auto",
        help="the txlake writers' group commit: auto (txlake's default: on for S3 and files), on, off (for A/B runs)",
    )


def options_from_args(args: argparse.Namespace) -> CommitBenchOptions:
    if args.no_s3 and args.s3_endpoint:
        raise ValueError("--no-s3 and --s3-endpoint contradict each other")
    return CommitBenchOptions(
        parts=tuple(dict.fromkeys(args.parts)),
        repeat=args.repeat,
        rows=args.rows,
        tables=tuple(args.tables),
        table_rows=args.table_rows,
        writers=tuple(args.writers),
        seconds=args.seconds,
        txn_rows=args.txn_rows,
        s3=not args.no_s3,
        s3_endpoint=args.s3_endpoint,
        s3_bucket=args.s3_bucket,
        storage_options=dict(args.storage_option),
        delta_rs_options=dict(args.delta_rs_option),
        profile=args.profile,
        profile_repeat=args.profile_repeat,
        keep=args.keep,
        group_commit={"auto": None, "on": True, "off": False}[args.group_commit],
        added_latency=AddedLatency(*args.added_latency) if args.added_latency else None,
    )


def _print_profiles(profiles: Sequence[ProfileResult], console: Console) -> None:
    for p in profiles:
        table = Table(title=f"profile {p.scenario}: {p.ms_per_txn:.2f} ms/txn under cProfile")
        table.add_column("cum ms/txn", justify="right")
        table.add_column("own ms/txn", justify="right")
        table.add_column("calls/txn", justify="right")
        table.add_column("function")
        for f in p.top_functions[:15]:
            table.add_row(
                f"{f.cumulative_ms_per_txn:.2f}", f"{f.own_ms_per_txn:.2f}", f"{f.calls_per_txn:.1f}", f.function
            )
        console.print(table)
        console.print("requests/txn: " + ", ".join(f"{k} {v:g}" for k, v in p.requests.items()))


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    console = console_for()
    try:
        options = options_from_args(args)
        result = run_commit_bench(options, out)
    except ModuleNotFoundError as exc:
        if exc.name != "deltalake":
            raise
        console_for(stderr=True).print("the commit benchmark needs the baseline: pip install deltalake")
        return 2
    except SeaweedFSError as exc:
        console_for(stderr=True).print(f"could not start SeaweedFS ({exc}); use --no-s3 or --s3-endpoint")
        return 2
    for report in result.reports:
        print_report(report, console)
        if report.name in (f"{NAME}-single", f"{NAME}-tables"):
            console.print(_latency_table(report.name, report.rows))
        if report.name == f"{NAME}-tables":
            console.print(_requests_table(report.rows))
        if report.name == f"{NAME}-throughput":
            console.print(_throughput_table(report.rows))
        json_path, png_path = write_report(out, report)
        console.print(f"wrote {json_path} and {png_path}")
        if report.name == f"{NAME}-tables":
            requests_png = out / f"{report.name}-requests.png"
            plot_requests(report.rows, requests_png)
            console.print(f"wrote {requests_png}")
    if options.added_latency is not None and options.added_latency.any:
        note = f"added latency: {options.added_latency.describe()}; the ratios to delta-rs are not comparable"
        console.print(f"[yellow]{note}[/yellow]")
    if result.profiles:
        _print_profiles(result.profiles, console)
        profile_txt = out / f"{NAME}-profile.txt"
        write_profile(result.profiles, profile_txt)
        console.print(f"wrote {profile_txt}")
    if result.failed_writers:
        console.print(f"[red]{result.failed_writers} writer errors: see the throughput JSON[/red]")
        return 1
    return 0
