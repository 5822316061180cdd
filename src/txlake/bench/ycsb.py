"""``txlake bench ycsb``: YCSB workload A (50/50 read/update, zipfian keys, 1 KB rows) over two tables, with
1, 4, 8 client processes, on ``file://`` and SeaweedFS -- every concurrency mode in one run.

The data: two tables (``ycsb.a``, ``ycsb.b``) of ``--records`` rows each, YCSB's ``usertable`` shape:
``key`` int64, ``field0`` .. ``field9`` strings of 100 bytes, plus an ``updates`` int64 counter (1,016 bytes
of values a row). Each table is written as files of ``--rows-per-file`` consecutive keys (10 files of 100
rows by default), so an update rewrites one small file and updates of keys in different files touch
different files (their statistics keep them apart).

One operation, as YCSB-A picks it (``readproportion=0.5``, ``updateproportion=0.5``), draws two keys from
YCSB's scrambled zipfian distribution (constant 0.99, the hot keys spread over the key space by a fixed
permutation of the ranks), one for each table, and is one of:

* **read**: both rows, read at one consistent version: ``lake.snapshot()`` then ``read_arrow(where="key =
  k")`` on each table. Read-only; it never conflicts. (A ``tx.read_arrow`` inside the update transaction
  would forbid redo -- the application may have used what it read -- so reads are their own operations,
  as YCSB's are.)
* **update**: one write-only, multi-table transaction that updates the row in each table:
  ``tx.update(t, {"field0": "'<100 new bytes>'", "updates": "updates + 1"}, where="key = k")`` on ``a`` and
  on ``b``. This is YCSB's update (one field rewritten), made atomic across the two tables. With ``--batch K``
  the transaction carries K such updates (K key pairs, 2K statements), as a client bundling its operations;
  each counts as one operation.

Modes (``--modes``), each on fresh tables with the same keys and seeds:

* ``redo``: ``lake.run(fn, redo=True)`` on clients with ``reservations=False``: a conflict on a table is
  resolved at commit by re-executing that table's statements on the newer snapshot (``CommitResult.redone``);
  whatever redo cannot resolve re-runs fn.
* ``redo-reserved``: ``redo`` with ``txlake.connect(reservations=True)`` (a transaction redone twice on a table
  reserves the files it needs and racing clients wait for its claim; see :mod:`txlake.txn.reservations`):
  what fairness costs and what it buys, in the same run. ``connect``'s default is ``redo-reserved`` on S3 and
  ``redo`` on local disk.
* ``rerun``: ``lake.run(fn, redo=False)``: every conflict re-runs the whole function (the baseline for redo).
* ``pessimistic``: ``lake.transaction(concurrency="pessimistic")`` -- included when ``Lakehouse.transaction``
  takes a ``concurrency`` argument, otherwise reported as not available.
* ``delta-rs``: the same operations through ``deltalake`` alone, on plain Delta tables: reads via
  ``QueryBuilder`` (DataFusion) over each table's latest version, updates via ``DeltaTable.update`` one table
  after the other (delta-rs has no multi-table transactions), each re-run on ``CommitFailedError``.

Every mode retries a conflicting operation up to ``RETRIES`` times (``lake.run``'s default) with the same
full-jitter back-off. ``aborts`` counts attempts that failed on a conflict (each re-run of ``rerun``, each
delta-rs retry, the attempts of operations given up); ``failed`` counts operations given up. Latency is per
committed operation, retries included. At the end the counters are summed: each table's ``sum(updates)``
must equal its committed updates (and, for txlake, the two tables must agree: the transactions are atomic).
"""

from __future__ import annotations

import argparse
import inspect
import math
import multiprocessing as mp
import queue
import random
import shutil
import string
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import txlake
from txlake.bench.args import AddedLatency, add_latency_option, add_s3_options, positive, positive_float
from txlake.bench.commit import delete_prefix
from txlake.bench.report import BenchReport, BenchRow, print_report, write_report
from txlake.cli.output import console_for
from txlake.errors import ConflictError, TxlakeError
from txlake.lake import Lakehouse
from txlake.storage import ObjectStore
from txlake.testing.seaweedfs import SeaweedFS, SeaweedFSError
from txlake.txn.commit import CommitResult
from txlake.txn.transaction import Transaction

NAME = "ycsb"
HELP = "YCSB workload A over two tables, 1-8 client processes: redo vs re-runs, pessimistic, delta-rs"
Mode = Literal["redo", "redo-reserved", "rerun", "pessimistic", "delta-rs"]
MODES: tuple[Mode, ...] = ("redo", "redo-reserved", "rerun", "pessimistic", "delta-rs")
REDO_MODES: tuple[Mode, ...] = ("redo", "redo-reserved")
StoreName = Literal["file", "s3"]
STORES: tuple[StoreName, ...] = ("file", "s3")
BASELINE = "rerun"
DEFAULT_CLIENTS = (1, 4, 8)
TABLES = ("ycsb.a", "ycsb.b")
FIELDS = tuple(f"field{i}" for i in range(10))
FIELD_BYTES = 100
ZIPFIAN_CONSTANT = 0.99
READ_PROPORTION = 0.5
RETRIES = 10  # lake.run's default; the pessimistic and delta-rs loops use the same budget and back-off
BASE_DELAY = 0.01
MAX_DELAY = 1.0
REDO_TARGET = 2.0  # redo commits >= 2x the operations/s of whole re-runs under contention
SCHEMA = pa.schema([("key", pa.int64()), *((f, pa.string()) for f in FIELDS), ("updates", pa.int64())])
CLIENT_STARTUP_TIMEOUT = 120.0
CLIENT_GRACE = 60.0  # seconds past --seconds for the last operations to finish before clients are stopped
KINDS = ("GET", "HEAD", "LIST", "PUT", "DELETE")
_ALPHABET = string.ascii_letters + string.digits
Batch = tuple[tuple[int, int], ...]
"""The keys of one update transaction: one (table a, table b) pair per YCSB update."""
Values = tuple[tuple[str, str], ...]


def _import_deltalake() -> ModuleType:
    # deltalake is the baseline, an optional (test) dependency: only the delta-rs mode needs it.
    import deltalake

    return deltalake


def pessimistic_available() -> bool:
    """Whether this txlake has pessimistic transactions (``Lakehouse.transaction(concurrency=...)``)."""
    return "concurrency" in inspect.signature(Lakehouse.transaction).parameters


@dataclass(frozen=True, slots=True)
class YcsbOptions:
    """What to run: modes x stores x client counts, each client running operations for ``seconds``."""

    clients: tuple[int, ...] = DEFAULT_CLIENTS
    seconds: float = 10.0
    stores: tuple[StoreName, ...] = STORES
    modes: tuple[Mode, ...] = MODES
    records: int = 1000
    rows_per_file: int = 100
    batch: tuple[int, ...] = (1,)
    """YCSB updates per update transaction, on each table (``--batch``): a client bundling its operations.
    Several values sweep the contention (each a run of every mode and client count)."""
    seed: int = 1
    keep: bool = False
    s3_endpoint: str | None = None
    """An existing S3 server to use instead of starting SeaweedFS (with ``s3_bucket``, ``storage_options``)."""
    s3_bucket: str = "txlake-bench"
    storage_options: Mapping[str, str] = field(default_factory=dict)
    added_latency: AddedLatency | None = None
    """Latency added to every request of the txlake clients (not delta-rs's), emulating a remote object store."""


# ------------------------------------------------------------------------------------------------ the data


def random_value(rng: random.Random) -> str:
    """A YCSB field value: 100 random letters and digits (a valid SQL string literal as it is)."""
    return "".join(rng.choices(_ALPHABET, k=FIELD_BYTES))


def make_records(first: int, n: int, rng: random.Random) -> pa.Table:
    """Rows ``first`` .. ``first + n - 1``: key, ten 100-byte fields, ``updates`` 0."""
    columns: dict[str, Any] = {"key": pa.array(range(first, first + n), pa.int64())}
    for name in FIELDS:
        columns[name] = pa.array([random_value(rng) for _ in range(n)], pa.string())
    columns["updates"] = pa.array([0] * n, pa.int64())
    return pa.table(columns, schema=SCHEMA)


class ScrambledZipfian:
    """YCSB's default request distribution: zipfian ranks (item ``i`` drawn with probability ~ 1/i^0.99),
    mapped to keys by a fixed permutation so that the hot keys lie spread over the table's files."""

    def __init__(self, items: int, seed: int, *, theta: float = ZIPFIAN_CONSTANT, batch: int = 4096) -> None:
        weights = 1.0 / np.arange(1, items + 1, dtype=np.float64) ** theta
        self._cdf = np.cumsum(weights) / weights.sum()
        self._keys = np.random.default_rng(0).permutation(items)  # the same scramble in every client
        self._rng = np.random.default_rng(seed)
        self._batch = batch
        self._next: list[int] = []

    def __call__(self) -> int:
        if not self._next:
            ranks = np.searchsorted(self._cdf, self._rng.random(self._batch), side="right")
            self._next = self._keys[np.minimum(ranks, len(self._keys) - 1)].tolist()[::-1]
        return self._next.pop()


# -------------------------------------------------------------------------------------------------- stores


@dataclass(frozen=True, slots=True)
class Store:
    """Where one run's lakehouses and plain Delta tables go."""

    name: StoreName
    root: str
    storage_options: Mapping[str, str]
    description: str

    def uri(self, path: str) -> str:
        return f"{self.root}/{path}"

    def delta_rs_uri(self, path: str) -> str:
        """delta-rs takes local tables as plain paths."""
        return self.uri(path).removeprefix("file://")


@contextmanager
def _file_store(keep: bool, console: Console) -> Iterator[Store]:
    tmp = tempfile.mkdtemp(prefix="txlake-bench-ycsb-")
    try:
        yield Store("file", f"file://{tmp}", {}, f"local filesystem {tmp}")
    finally:
        if keep:
            console.log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)  # a directory this benchmark created


@contextmanager
def _s3_store(options: YcsbOptions, console: Console) -> Iterator[Store]:
    """A SeaweedFS server on free loopback ports, started here and stopped (by its pid) at the end; or a fresh
    prefix in ``--s3-bucket`` at ``--s3-endpoint``, deleted at the end."""
    if options.s3_endpoint is not None:
        storage = {"AWS_ENDPOINT_URL": options.s3_endpoint, "AWS_REGION": "us-east-1"}
        if options.s3_endpoint.startswith("http://"):
            storage["AWS_ALLOW_HTTP"] = "true"
        storage.update(options.storage_options)
        prefix = f"txlake-bench-ycsb-{uuid.uuid4().hex[:12]}"
        root = f"s3://{options.s3_bucket}/{prefix}"
        try:
            yield Store("s3", root, storage, f"S3 endpoint {options.s3_endpoint}")
        finally:
            if options.keep:
                console.log(f"kept {root}")
            else:
                delete_prefix(ObjectStore.from_uri(f"s3://{options.s3_bucket}", storage), prefix)
        return
    server = SeaweedFS()
    with console.status("starting SeaweedFS"):
        server.start()
    try:
        bucket = server.new_bucket()
        console.log(f"SeaweedFS at {server.endpoint} (pid {server.pid}), bucket {bucket}")
        yield Store("s3", f"s3://{bucket}/ycsb", server.storage_options(), f"SeaweedFS {server.endpoint}")
    finally:
        server.stop()


@contextmanager
def open_stores(options: YcsbOptions, console: Console) -> Iterator[list[Store]]:
    with ExitStack() as stack:
        stores = []
        for name in options.stores:
            store = _file_store(options.keep, console) if name == "file" else _s3_store(options, console)
            stores.append(stack.enter_context(store))
        yield stores


def build_tables(
    mode: Mode, store: Store, path: str, options: YcsbOptions, deltalake: ModuleType | None
) -> tuple[str, tuple[str, str]]:
    """Fresh tables for one run: a lakehouse URI and its table names, or (for delta-rs) two plain tables."""
    rng = random.Random(options.seed)
    chunks = [
        (first, min(options.rows_per_file, options.records - first))
        for first in range(0, options.records, options.rows_per_file)
    ]
    if mode == "delta-rs":
        assert deltalake is not None
        uris = (store.delta_rs_uri(f"{path}/a"), store.delta_rs_uri(f"{path}/b"))
        for uri in uris:
            for first, n in chunks:  # one file per chunk, as on the txlake side
                deltalake.write_deltalake(
                    uri, make_records(first, n, rng), mode="append", storage_options=dict(store.storage_options) or None
                )
        return "", uris
    uri = store.uri(f"{path}/lake")
    lake = txlake.connect(uri, store.storage_options)
    with lake.transaction() as tx:
        for name in TABLES:
            tx.create_table(name, SCHEMA)
    with lake.transaction() as tx:
        for name in TABLES:
            for first, n in chunks:  # each append is its own file
                tx.append(name, make_records(first, n, rng))
    return uri, TABLES


# ------------------------------------------------------------------------------------------------- clients


@dataclass(frozen=True, slots=True)
class ClientTask:
    """What one client process does (picklable: it crosses to a spawned process)."""

    mode: Mode
    index: int
    uri: str
    storage_options: dict[str, str]
    tables: tuple[str, str]
    records: int
    seconds: float
    seed: int
    batch: int = 1
    added_latency: AddedLatency | None = None


@dataclass(frozen=True, slots=True)
class ClientResult:
    """What one client process did."""

    index: int
    reads: int = 0
    updates: int = 0
    aborts: int = 0
    failed: int = 0
    errors: int = 0
    redone: int = 0
    most_redone: int = 0  # the most statements one update redid (a chain of redos on a hot table)
    rebases: int = 0
    table_updates: tuple[int, int] = (0, 0)  # committed row updates per table (they differ only for delta-rs)
    elapsed: float = 0.0
    first_error: str | None = None
    latencies_ms: tuple[float, ...] = ()
    update_latencies_ms: tuple[float, ...] = ()
    requests: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Tally:
    aborts: int = 0
    failed: int = 0
    redone: int = 0
    most_redone: int = 0
    rebases: int = 0
    table_updates: list[int] = field(default_factory=lambda: [0, 0])


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(MAX_DELAY, BASE_DELAY * 2**attempt)))


def _update_set(value: str) -> dict[str, str]:
    return {"field0": f"'{value}'", "updates": "updates + 1"}


class _TxlakeClient:
    """Operations through a long-lived ``Lakehouse``: ``redo``, ``rerun`` or ``pessimistic``."""

    def __init__(self, task: ClientTask) -> None:
        reserved = task.mode == "redo-reserved"  # explicit in both modes: connect's default depends on the store
        self.lake = txlake.connect(task.uri, task.storage_options, create=False, reservations=reserved)
        if task.added_latency is not None:
            task.added_latency.install(self.lake.store.faults)
        self.mode = task.mode
        self.tables = task.tables

    def read(self, keys: tuple[int, int]) -> None:
        snap = self.lake.snapshot()
        for name, key in zip(self.tables, keys, strict=True):
            if snap.read_arrow(name, where=f"key = {key}").num_rows != 1:
                raise RuntimeError(f"{name}: key {key} not found")

    def _statements(self, tx: Transaction, keys: Batch, values: Values) -> None:
        for pair, strings in zip(keys, values, strict=True):
            for name, key, value in zip(self.tables, pair, strings, strict=True):
                if tx.update(name, _update_set(value), where=f"key = {key}") != 1:
                    raise RuntimeError(f"{name}: key {key} not updated")

    def update(self, keys: Batch, values: Values, tally: _Tally) -> bool:
        if self.mode == "pessimistic":
            return self._update_pessimistic(keys, values, tally)
        calls = 0

        def body(tx: Transaction) -> CommitResult:
            nonlocal calls
            calls += 1
            self._statements(tx, keys, values)
            return tx.commit()

        try:
            result = self.lake.run(body, redo=self.mode in REDO_MODES, retries=RETRIES, base_delay=BASE_DELAY)
        except ConflictError:
            tally.aborts += calls
            tally.failed += 1
            return False
        tally.aborts += calls - 1
        self._committed(result, tally, len(keys))
        return True

    def _update_pessimistic(self, keys: Batch, values: Values, tally: _Tally) -> bool:
        begin: Callable[..., Transaction] = self.lake.transaction  # concurrency= exists only where available
        for attempt in range(RETRIES + 1):
            try:
                with begin(concurrency="pessimistic") as tx:
                    self._statements(tx, keys, values)
            except ConflictError:
                tally.aborts += 1
                if attempt == RETRIES:
                    break
                _backoff(attempt)
                continue
            assert tx.result is not None
            self._committed(tx.result, tally, len(keys))
            return True
        tally.failed += 1
        return False

    @staticmethod
    def _committed(result: CommitResult, tally: _Tally, updates: int) -> None:
        tally.redone += result.redone
        tally.most_redone = max(tally.most_redone, result.redone)
        tally.rebases += result.rebases
        tally.table_updates[0] += updates
        tally.table_updates[1] += updates

    def requests(self) -> dict[str, int]:
        return self.lake.store.counters.snapshot().as_dict()

    def reset_requests(self) -> None:
        self.lake.store.counters.reset()


class _DeltaRsClient:
    """The same operations with ``deltalake`` alone: long-lived handles brought up to date before each use."""

    def __init__(self, task: ClientTask, deltalake: ModuleType) -> None:
        self.deltalake = deltalake
        options = task.storage_options or None
        self.handles = [deltalake.DeltaTable(uri, storage_options=options) for uri in task.tables]
        self.conflicts: tuple[type[BaseException], ...] = (deltalake.exceptions.CommitFailedError,)

    def read(self, keys: tuple[int, int]) -> None:
        for handle, key in zip(self.handles, keys, strict=True):
            handle.update_incremental()
            query = self.deltalake.QueryBuilder().register("t", handle)
            if query.execute(f"SELECT * FROM t WHERE key = {key}").read_all().num_rows != 1:
                raise RuntimeError(f"{handle.table_uri}: key {key} not found")

    def update(self, keys: Batch, values: Values, tally: _Tally) -> bool:
        # one commit per table and key: delta-rs has no transaction spanning them
        return all([self._update_one(pair, strings, tally) for pair, strings in zip(keys, values, strict=True)])

    def _update_one(self, keys: tuple[int, int], values: tuple[str, str], tally: _Tally) -> bool:
        ok = True
        for i, (handle, key, value) in enumerate(zip(self.handles, keys, values, strict=True)):
            for attempt in range(RETRIES + 1):
                try:
                    handle.update_incremental()
                    metrics = handle.update(updates=_update_set(value), predicate=f"key = {key}")
                except self.conflicts:
                    tally.aborts += 1
                    if attempt == RETRIES:
                        tally.failed += 1
                        ok = False
                        break
                    _backoff(attempt)
                    continue
                if metrics.get("num_updated_rows") != 1:
                    raise RuntimeError(f"{handle.table_uri}: key {key} not updated: {metrics}")
                tally.table_updates[i] += 1
                break
        return ok

    def requests(self) -> dict[str, int]:
        return {}

    def reset_requests(self) -> None:
        pass


def client_main(task: ClientTask, go: Any, results: Any) -> None:
    """A client process: connect, report ready, wait for ``go``, run YCSB-A operations for ``task.seconds``."""
    tally = _Tally()
    reads = updates = errors = 0
    latencies: list[float] = []
    update_latencies: list[float] = []
    first_error: str | None = None
    elapsed = 0.0
    client: _TxlakeClient | _DeltaRsClient | None = None
    try:
        client = _DeltaRsClient(task, _import_deltalake()) if task.mode == "delta-rs" else _TxlakeClient(task)
        keys = ScrambledZipfian(task.records, task.seed)
        rng = random.Random(task.seed)
        # warm-up, outside the measured window: a first read imports what reading needs (pyarrow pulls in
        # pandas, about 0.3 s of CPU per process) and loads both tables' snapshots; it changes nothing
        client.read((0, 0))
        results.put(("ready", task.index, None))
        if not go.wait(CLIENT_STARTUP_TIMEOUT):
            raise TimeoutError("no start signal")
        client.reset_requests()
        start = time.monotonic()
        deadline = start + task.seconds
        reported = start
        while (now := time.monotonic()) < deadline:
            pair = (keys(), keys())
            is_read = rng.random() < READ_PROPORTION
            batch: Batch = () if is_read else (pair, *((keys(), keys()) for _ in range(task.batch - 1)))
            values: Values = tuple((random_value(rng), random_value(rng)) for _ in batch)
            began = time.perf_counter()
            try:
                if is_read:
                    client.read(pair)
                    reads += 1
                elif client.update(batch, values, tally):
                    updates += len(batch)
                else:
                    continue
            except TxlakeError as exc:  # not a conflict (e.g. an unknown commit outcome): counted, go on
                errors += 1
                first_error = first_error or repr(exc)
                continue
            ms = (time.perf_counter() - began) * 1000
            latencies.append(ms)
            if not is_read:
                update_latencies.append(ms)
            if now - reported >= 0.25:
                results.put(("progress", task.index, reads + updates))
                reported = now
        elapsed = time.monotonic() - start
    except Exception as exc:  # reported to the parent, which marks the run failed
        errors += 1
        first_error = first_error or repr(exc)
    results.put(
        (
            "done",
            task.index,
            ClientResult(
                task.index,
                reads=reads,
                updates=updates,
                aborts=tally.aborts,
                failed=tally.failed,
                errors=errors,
                redone=tally.redone,
                most_redone=tally.most_redone,
                rebases=tally.rebases,
                table_updates=(tally.table_updates[0], tally.table_updates[1]),
                elapsed=elapsed,
                first_error=first_error,
                latencies_ms=tuple(latencies),
                update_latencies_ms=tuple(update_latencies),
                requests=client.requests() if client is not None else {},
            ),
        )
    )


def run_clients(tasks: Sequence[ClientTask], seconds: float, label: str, console: Console) -> list[ClientResult]:
    """Spawn one process per task, start them together, show progress, join them (bounded in time)."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    results: Any = ctx.Queue()
    procs = [ctx.Process(target=client_main, args=(t, go, results), name=f"txlake-ycsb-{t.index}") for t in tasks]
    for proc in procs:
        proc.daemon = True
        proc.start()
    ready: set[int] = set()
    done: dict[int, ClientResult] = {}
    counts: dict[int, int] = {}

    def drain(timeout: float) -> None:
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
            else:
                done[index] = payload
                counts[index] = payload.reads + payload.updates

    try:
        deadline = time.monotonic() + CLIENT_STARTUP_TIMEOUT
        while len(ready | set(done)) < len(tasks) and time.monotonic() < deadline:
            drain(0.2)
            if not any(p.is_alive() for p in procs):
                break  # every client died before reporting ready: their results (if any) say why
        go.set()
        started = time.monotonic()
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True
        ) as progress:
            bar = progress.add_task(label, total=seconds)
            while len(done) < len(tasks) and time.monotonic() < started + seconds + CLIENT_GRACE:
                drain(0.2)
                if not any(p.is_alive() for p in procs):
                    drain(1.0)
                    break
                progress.update(
                    bar,
                    completed=min(seconds, time.monotonic() - started),
                    description=f"{label}: {sum(counts.values())} ops",
                )
    finally:
        go.set()
        for proc in procs:
            proc.join(timeout=10.0)
            if proc.is_alive():
                proc.terminate()  # our own child, by its handle
                proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        drain(0.0)
        results.close()
    return [done[i] for i in sorted(done)]


# ------------------------------------------------------------------------------------------------ one run


@dataclass(frozen=True, slots=True)
class ModeRun:
    """All clients of one mode on one store: the numbers that go into the report."""

    mode: Mode
    store: StoreName
    clients: int
    results: tuple[ClientResult, ...]
    final_updates: tuple[int, int]  # sum(updates) of each table after the run
    final_rows: tuple[int, int]

    @property
    def committed(self) -> int:
        return sum(r.reads + r.updates for r in self.results)

    @property
    def elapsed(self) -> float:
        return max((r.elapsed for r in self.results), default=0.0)

    @property
    def ops_per_second(self) -> float:
        return self.committed / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.results) + (self.clients - len(self.results))

    @property
    def expected_updates(self) -> tuple[int, int]:
        return (
            sum(r.table_updates[0] for r in self.results),
            sum(r.table_updates[1] for r in self.results),
        )

    def check(self, records: int) -> bool:
        """Every committed update is in the data exactly once, no row is lost or duplicated, and (txlake) the
        two tables saw the same updates."""
        ok = self.final_updates == self.expected_updates and self.final_rows == (records, records)
        if self.mode != "delta-rs":
            ok = ok and self.final_updates[0] == self.final_updates[1] == sum(r.updates for r in self.results)
        return ok

    def summary(self, records: int) -> dict[str, Any]:
        latencies = [ms for r in self.results for ms in r.latencies_ms]
        update_latencies = [ms for r in self.results for ms in r.update_latencies_ms]
        requests = Counter[str]()
        for r in self.results:
            requests.update(r.requests)
        committed = self.committed
        return {
            "available": True,
            "ops_per_second": self.ops_per_second,
            "committed": committed,
            "reads": sum(r.reads for r in self.results),
            "updates": sum(r.updates for r in self.results),
            "aborts": sum(r.aborts for r in self.results),
            "failed": sum(r.failed for r in self.results),
            "errors": self.errors,
            "first_error": next((r.first_error for r in self.results if r.first_error), None),
            "redone": sum(r.redone for r in self.results),
            "most_redone_in_one_op": max((r.most_redone for r in self.results), default=0),
            "rebases": sum(r.rebases for r in self.results),
            "p50_ms": _percentile(latencies, 50),
            "p99_ms": _percentile(latencies, 99),
            "update_p50_ms": _percentile(update_latencies, 50),
            "update_p99_ms": _percentile(update_latencies, 99),
            "requests_per_op": (
                {k: requests[k] / committed if committed else 0.0 for k in KINDS} if requests else None
            ),
            "elapsed_s": self.elapsed,
            "expected_updates": list(self.expected_updates),
            "final_updates": list(self.final_updates),
            "check": self.check(records),
            "clients": [
                {k: v for k, v in asdict(r).items() if k not in ("latencies_ms", "update_latencies_ms")}
                for r in self.results
            ],
        }


def _percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct``-th percentile (nearest rank), ``None`` without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _final_counts(
    mode: Mode, uri: str, tables: tuple[str, str], store: Store, deltalake: ModuleType | None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """``sum(updates)`` and row count of each table, read back after the clients stopped."""
    sums: list[int] = []
    rows: list[int] = []
    if mode == "delta-rs":
        assert deltalake is not None
        for table in tables:
            handle = deltalake.DeltaTable(table, storage_options=dict(store.storage_options) or None)
            sql = "SELECT sum(updates) AS s, count(*) AS n FROM t"
            got = deltalake.QueryBuilder().register("t", handle).execute(sql).read_all()
            sums.append(int(got["s"][0].as_py() or 0))
            rows.append(int(got["n"][0].as_py()))
    else:
        snap = txlake.connect(uri, store.storage_options, create=False).snapshot()
        for table in tables:
            data = snap.read_arrow(table, columns=["key", "updates"])
            sums.append(int(pc.sum(data["updates"]).as_py() or 0))
            rows.append(data.num_rows)
    return (sums[0], sums[1]), (rows[0], rows[1])


def run_mode(
    mode: Mode,
    store: Store,
    clients: int,
    options: YcsbOptions,
    deltalake: ModuleType | None,
    console: Console,
    batch: int = 1,
) -> ModeRun:
    """Fresh tables, ``clients`` processes for ``options.seconds`` (``batch`` updates per transaction), then the
    counters read back."""
    path = f"{mode}/b{batch}/c{clients}"
    uri, tables = build_tables(mode, store, path, options, deltalake)
    tasks = [
        ClientTask(
            mode,
            i,
            uri,
            dict(store.storage_options),
            tables,
            options.records,
            options.seconds,
            options.seed * 1000 + i,  # each client its own stream; the same streams in every mode
            batch,
            options.added_latency,
        )
        for i in range(clients)
    ]
    what = f"{store.name}, {mode}, {clients} clients" + (f", batch {batch}" if batch > 1 else "")
    results = run_clients(tasks, options.seconds, what, console)
    final_updates, final_rows = _final_counts(mode, uri, tables, store, deltalake)
    run = ModeRun(mode, store.name, clients, tuple(results), final_updates, final_rows)
    s = run.summary(options.records)
    console.log(
        f"{what}: {s['ops_per_second']:.1f} ops/s, {s['aborts']} aborts, "
        f"{s['failed']} failed, {s['redone']} redone, {s['errors']} errors, check {'ok' if s['check'] else 'FAILED'}"
    )
    return run


# ----------------------------------------------------------------------------------------------- reporting


def _not_available() -> dict[str, Any]:
    return {"available": False, "reason": "txlake.Lakehouse.transaction takes no concurrency argument"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run_ycsb_bench(options: YcsbOptions, console: Console | None = None) -> BenchReport:
    """Every mode x store x client count; one report row per (store, clients) with every mode's numbers."""
    console = console or console_for(stderr=True)
    deltalake = _import_deltalake() if "delta-rs" in options.modes else None
    pessimistic = pessimistic_available()
    runnable = [m for m in options.modes if m != "pessimistic" or pessimistic]
    rows: list[BenchRow] = []
    with open_stores(options, console) as stores:
        described = {s.name: s.description for s in stores}
        for store in stores:
            for batch in options.batch:
                for n in options.clients:
                    modes: dict[str, dict[str, Any]] = {}
                    for mode in options.modes:
                        if mode in runnable:
                            ran = run_mode(mode, store, n, options, deltalake, console, batch)
                            modes[mode] = ran.summary(options.records)
                        else:
                            modes[mode] = _not_available()
                    rows.append(_row(store.name, n, modes, batch if len(options.batch) > 1 else None))
    return BenchReport(
        name=NAME,
        metric="committed ops/s, txlake = redo mode (higher is better)",
        unit="ops/s",
        baseline=BASELINE,
        rows=tuple(rows),
        target_ratio=None,
        parameters={
            "stores": described,
            "clients": list(options.clients),
            "seconds": options.seconds,
            "records_per_table": options.records,
            "rows_per_file": options.rows_per_file,
            "batch": options.batch[0] if len(options.batch) == 1 else list(options.batch),
            "row_bytes": 8 + len(FIELDS) * FIELD_BYTES + 8,
            "seed": options.seed,
            **(
                {"added_latency": options.added_latency.describe()}
                if options.added_latency is not None and options.added_latency.any
                else {}
            ),
            "workload": "YCSB A: readproportion 0.5, updateproportion 0.5, scrambled zipfian 0.99, 2 tables",
            "read": "lake.snapshot(), read_arrow(t, where='key = k') on each table (delta-rs: QueryBuilder SQL)",
            "update": "one transaction of `batch` YCSB update(s): tx.update(t, {field0: new 100 bytes, "
            "updates: updates + 1}, 'key = k') on each table per update, each a zipfian key (delta-rs: "
            "DeltaTable.update per table and key, not atomic); each update counts as one operation",
            "isolation": "serializable (txlake default)",
            "retries": RETRIES,
            "modes": {
                "redo": "lake.run(fn, redo=True), connect(reservations=False)",
                "redo-reserved": "lake.run(fn, redo=True), connect(reservations=True)",
                "rerun": "lake.run(fn, redo=False)",
                "pessimistic": 'lake.transaction(concurrency="pessimistic"), retried like lake.run'
                if pessimistic
                else "not available: " + _not_available()["reason"],
                "delta-rs": "deltalake only: QueryBuilder reads, DeltaTable.update per table, each retried on "
                "CommitFailedError",
            },
            "requested_modes": list(options.modes),
            "ratio_meaning": "redo/rerun committed ops/s: > 1 means redo commits more",
            "targets": {
                "pessimistic": "0 aborts at 8 clients",
                "redo": f">= {REDO_TARGET:g}x the committed ops/s of rerun under contention (rerun aborted)",
            },
            "aborts": "attempts that failed on a conflict (re-runs, retries, attempts of operations given up)",
            "check": "each table's sum(updates) == its committed updates; txlake: both tables equal",
        },
    )


def _row(store: StoreName, clients: int, modes: dict[str, dict[str, Any]], batch: int | None = None) -> BenchRow:
    """One configuration's row (``batch`` named in it when the run sweeps several)."""

    def rate(mode: str) -> float:
        m = modes.get(mode)
        return float(m["ops_per_second"]) if m and m["available"] else 0.0

    redo, rerun = modes.get("redo"), modes.get("rerun")
    contended = bool(rerun and rerun.get("available") and rerun["aborts"] > 0)
    pess = modes.get("pessimistic")
    targets: dict[str, bool | None] = {
        "redo_2x_rerun": (rate("redo") >= REDO_TARGET * rate("rerun")) if contended and redo else None,
        "pessimistic_zero_aborts": (pess["aborts"] == 0) if pess and pess["available"] and clients >= 8 else None,
    }
    for name, summary in modes.items():
        if summary["available"]:
            summary["ratio_vs_rerun"] = _ratio(rate(name), rate("rerun")) if "rerun" in modes else None
            summary["ratio_vs_delta_rs"] = _ratio(rate(name), rate("delta-rs")) if "delta-rs" in modes else None
    params = {"store": store, "clients": clients, "contended": contended, "targets": targets, "modes": modes}
    config = f"{store} {clients}c"
    if batch is not None:
        params["batch"] = batch
        config = f"{store} batch {batch} {clients}c"
    return BenchRow(config, rate("redo"), rate("rerun"), params)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def detail_table(report: BenchReport) -> Table:
    """Every mode of every configuration: rate, ratios, aborts, redo, latency, requests, check."""
    table = Table(title=f"{NAME}: every mode (ratios: ops/s against rerun and against delta-rs)")
    for column in ("config", "mode", "ops/s", "/rerun", "/delta-rs", "aborts", "failed", "redone"):
        table.add_column(column, justify="left" if column in ("config", "mode") else "right")
    for column in ("p50/p99 ms", "updates p50/p99 ms", "req/op", "errors", "check", "target"):
        table.add_column(column, justify="right")
    for row in report.rows:
        targets = row.params["targets"]
        for mode, m in row.params["modes"].items():
            if not m["available"]:
                table.add_row(row.config, mode, "[dim]not available[/dim]")
                continue
            target = {"redo": targets["redo_2x_rerun"], "pessimistic": targets["pessimistic_zero_aborts"]}.get(mode)
            requests = m["requests_per_op"]
            table.add_row(
                row.config,
                mode,
                f"{m['ops_per_second']:.1f}",
                _fmt(m["ratio_vs_rerun"], ".2f") + ("x" if m["ratio_vs_rerun"] is not None else ""),
                _fmt(m["ratio_vs_delta_rs"], ".2f") + ("x" if m["ratio_vs_delta_rs"] is not None else ""),
                str(m["aborts"]),
                str(m["failed"]),
                str(m["redone"]),
                f"{_fmt(m['p50_ms'])} / {_fmt(m['p99_ms'])}",
                f"{_fmt(m['update_p50_ms'])} / {_fmt(m['update_p99_ms'])}",
                _fmt(sum(requests.values()) if requests else None),
                str(m["errors"]) if not m["errors"] else f"[red]{m['errors']}[/red]",
                "[green]ok[/green]" if m["check"] else "[red]FAILED[/red]",
                "" if target is None else ("[green]met[/green]" if target else "[red]missed[/red]"),
            )
    return table


def plot_modes(report: BenchReport, path: Path) -> None:
    """Grouped bars: committed ops/s of every mode per configuration (missing modes left out)."""
    # Imported here: see report.plot_report (matplotlib is slow to import for every CLI call).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = report.rows
    modes = [m for m in MODES if any(r.params["modes"].get(m, {}).get("available") for r in rows)]
    width = 0.8 / max(1, len(modes))
    fig = Figure(figsize=(max(6.0, 1.4 * len(rows) + 2.0), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    for j, mode in enumerate(modes):
        values = [
            float(r.params["modes"][mode]["ops_per_second"]) if r.params["modes"].get(mode, {}).get("available") else 0
            for r in rows
        ]
        ax.bar([x - 0.4 + width * (j + 0.5) for x in xs], values, width, label=mode)
    ax.set_xticks(xs, [r.config for r in rows], fontsize=8)
    ax.set_ylabel("committed ops/s")
    ax.set_title(f"{NAME}: YCSB A over 2 tables, committed ops/s by mode")
    ax.legend()
    fig.savefig(path, dpi=120)


def plot_batch_ratio(report: BenchReport, path: Path) -> bool:
    """redo / rerun against ``--batch`` (statements per transaction), a line per store and client count, with
    the target; ``False`` (nothing written) unless the run swept several batch sizes."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for row in report.rows:
        ratio = row.params["modes"].get("redo", {}).get("ratio_vs_rerun")
        if "batch" in row.params and ratio is not None:
            lines.setdefault(f"{row.params['store']} {row.params['clients']}c", []).append((row.params["batch"], ratio))
    if not any(len(points) > 1 for points in lines.values()):
        return False
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for label, points in lines.items():
        ax.plot([b for b, _ in points], [r for _, r in points], marker="o", label=label)
    ax.axhline(REDO_TARGET, color="grey", linestyle="--", linewidth=1, label=f"target {REDO_TARGET:g}x")
    ax.set_xlabel("YCSB updates per transaction and table (--batch)")
    ax.set_ylabel("redo / rerun, committed ops/s")
    ax.set_title(f"{NAME}: what redo saves as transactions grow")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120)
    return True


# ------------------------------------------------------------------------------------------------------ CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clients",
        type=positive,
        nargs="+",
        default=list(DEFAULT_CLIENTS),
        metavar="N",
        help="client processes per run (default: " + " ".join(map(str, DEFAULT_CLIENTS)) + ")",
    )
    parser.add_argument("--seconds", type=positive_float, default=10.0, help="duration of each run (default 10)")
    parser.add_argument(
        "--stores", nargs="+", choices=STORES, default=list(STORES), help="file:// and/or SeaweedFS (default: both)"
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="modes to run (default: all)")
    parser.add_argument("--records", type=positive, default=1000, help="rows per table (default 1000)")
    parser.add_argument("--rows-per-file", type=positive, default=100, help="rows per data file (default 100)")
    parser.add_argument(
        "--batch",
        type=positive,
        nargs="+",
        default=[1],
        metavar="K",
        help="YCSB updates per update transaction on each table, as a client bundling its operations (default 1); "
        "several values sweep the contention",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the data and the clients' key streams")
    parser.add_argument("--keep", action="store_true", help="keep the tables written")
    add_latency_option(parser)
    add_s3_options(parser)


def options_from_args(args: argparse.Namespace) -> YcsbOptions:
    return YcsbOptions(
        clients=tuple(dict.fromkeys(args.clients)),
        seconds=args.seconds,
        stores=tuple(dict.fromkeys(args.stores)),
        modes=tuple(dict.fromkeys(args.modes)),
        records=args.records,
        rows_per_file=args.rows_per_file,
        batch=tuple(dict.fromkeys(args.batch)),
        seed=args.seed,
        keep=args.keep,
        s3_endpoint=args.s3_endpoint,
        s3_bucket=args.s3_bucket,
        storage_options=dict(args.storage_option),
        added_latency=AddedLatency(*args.added_latency) if args.added_latency else None,
    )


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    console = console_for()
    try:
        report = run_ycsb_bench(options_from_args(args))
    except ModuleNotFoundError as exc:
        if exc.name != "deltalake":
            raise
        console_for(stderr=True).print("the ycsb benchmark's delta-rs mode needs: pip install deltalake")
        return 2
    except SeaweedFSError as exc:
        console_for(stderr=True).print(f"could not start SeaweedFS ({exc}); use --stores file or --s3-endpoint")
        return 2
    print_report(report, console)
    console.print(detail_table(report))
    if "added_latency" in report.parameters:
        console.print(f"added latency: {report.parameters['added_latency']}; delta-rs's numbers are not comparable")
    json_path, png_path = write_report(out, report)
    modes_png = out / f"{NAME}-modes.png"
    plot_modes(report, modes_png)
    written = [str(json_path), str(png_path), str(modes_png)]
    ratio_png = out / f"{NAME}-batch-ratio.png"
    if plot_batch_ratio(report, ratio_png):
        written.append(str(ratio_png))
    console.print(f"wrote {', '.join(written[:-1])} and {written[-1]}")
    failed = [
        f"{row.config} {mode}"
        for row in report.rows
        for mode, m in row.params["modes"].items()
        if m["available"] and (m["errors"] or not m["check"])
    ]
    if failed:
        console.print(f"[red]errors or a failed check in: {', '.join(failed)} (see the JSON)[/red]")
        return 1
    return 0
