"""Write-behind uploads (``storage/uploads.py``): a statement returns while its data file is still going out; the
transaction reads the files it wrote back from memory (past ``HELD_BYTES``, it waits for their uploads and GETs
them), waits for its uploads before it claims and before it deletes anything, and a failed upload fails the
transaction (nothing of it ever appears, nothing of it is left)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.interop.deltars import TableLocation, deltars_read_datafusion
from tests.interop.deltars import rows as canonical_rows
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.errors import ConflictError, InjectedFaultError, TransactionError
from txlake.storage import FaultInjector, FaultRule, ObjectStore
from txlake.storage import uploads as uploads_module
from txlake.storage.uploads import UploadPool, Uploads
from txlake.txn import commit as commit_module

DATA = ".snappy.parquet"
WAIT = 30.0
"""Seconds a test waits for something that happens at once when the code is right (never reached then)."""


class Gate:
    """A hook that holds every data-file PUT until :meth:`open`; counts the PUTs that reached it."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.arrived = threading.Semaphore(0)

    def __call__(self) -> None:
        self.arrived.release()
        assert self.opened.wait(WAIT), "the gate was never opened"

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def gate(lake: txlake.Lakehouse) -> Iterator[Gate]:
    gate = Gate()
    lake.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=DATA, times=10**6, hook=gate))
    yield gate
    gate.open()
    lake.store.faults = FaultInjector()


def _files(lake: txlake.Lakehouse, prefix: str) -> set[str]:
    return {m.path for m in lake.store.list(prefix) if m.path.endswith(DATA)}


def test_statements_go_on_while_their_files_upload(lake: txlake.Lakehouse, gate: Gate) -> None:
    """Three appends return while none of their data files has landed; the commit waits for them all, and the
    committed table is what a plain Delta reader sees."""
    lake.create_table("w.t", ACCOUNTS)
    with lake.transaction() as tx:
        for i in range(3):
            tx.append("w.t", accounts([i], [10 * i]))
        for _ in range(3):  # all three PUTs are held at the gate at once: none waited for the one before
            assert gate.arrived.acquire(timeout=WAIT)
        assert tx._uploads.pending == 3
        assert _files(lake, "w/t") == set()
        gate.open()
    assert tx.status == "committed"
    assert rows(lake.read_arrow("w.t")) == [(0, 0), (1, 10), (2, 20)]
    if lake.store.scheme != "memory":  # (delta-rs cannot reach this process's memory store)
        table = TableLocation(lake.store, lake.snapshot().entry("w.t").path, lake.store.storage_options)
        assert deltars_read_datafusion(table.deltars()) == canonical_rows(lake.read_arrow("w.t"))


def test_the_commit_probes_for_plain_writers_while_its_files_upload(lake: txlake.Lakehouse) -> None:
    """The HEAD that looks for plain writers' commits beyond the lakehouse's map goes out while the data files
    are still uploading, not after (one round trip less per commit on an object store): here the data-file
    PUT waits for that HEAD, and with a probe after the uploads it would wait in vain."""
    lake.create_table("w.t", ACCOUNTS)
    probed = threading.Event()
    seen_before_put: list[bool] = []
    lake.store.faults.add(FaultRule("HEAD", 1, "hook", path_contains="w/t/_delta_log/", times=10**6, hook=probed.set))
    lake.store.faults.add(
        FaultRule(
            "PUT", 1, "hook", path_contains=DATA, times=10**6, hook=lambda: seen_before_put.append(probed.wait(10))
        )
    )
    try:
        with lake.transaction() as tx:
            tx.append("w.t", accounts([1], [10]))
    finally:
        lake.store.faults = FaultInjector()
    assert seen_before_put == [True]
    assert tx.status == "committed"
    assert rows(lake.read_arrow("w.t")) == [(1, 10)]


def test_uploads_outlasting_the_probes_are_followed_by_a_second_probe(lake: txlake.Lakehouse) -> None:
    """A plain Delta writer commits to one of two tables after the probes went out, while the data files are
    still uploading (longer than ``PROBE_AHEAD_SLACK``): the tables are probed again before the claim, so the
    conflict is raised before anything is claimed -- no aborted version, no compensation commit for a plain
    reader of the other table to see -- as when the probes went out after the uploads."""
    if lake.store.scheme == "memory":
        pytest.skip("delta-rs reads no memory:// store")
    for name in ("w.t", "w.u"):
        lake.create_table(name, ACCOUNTS)
        with lake.transaction() as tx:
            tx.append(name, accounts([1, 2], [10, 20]))
    other = TableLocation(lake.store, lake.snapshot().entry("w.u").path, lake.store.storage_options)
    probed = threading.Event()
    last = lake.snapshot().entry("w.t").path

    def plain_commit_during_the_upload() -> None:
        assert probed.wait(WAIT)
        other.deltars().update({"balance": "77"}, predicate="id = 1")
        time.sleep(commit_module.PROBE_AHEAD_SLACK + 0.05)

    lake.store.faults.add(FaultRule("HEAD", 1, "hook", path_contains="w/u/_delta_log/", hook=probed.set))
    lake.store.faults.add(FaultRule("PUT", 2, "hook", path_contains=DATA, hook=plain_commit_during_the_upload))
    tx = lake.transaction("snapshot")
    tx.update("w.t", set={"balance": "11"}, where="id = 1")
    tx.update("w.u", set={"balance": "11"}, where="id = 1")
    with pytest.raises(ConflictError):
        tx.commit()
    lake.store.faults = FaultInjector()
    assert lake.transaction_status(tx.txid) == "unknown"  # never claimed a version (not even an aborted one)
    table = TableLocation(lake.store, last, lake.store.storage_options).deltars()
    assert [h["operation"] for h in table.history()] == ["WRITE", "CREATE TABLE"]  # nothing of it published


def test_a_statement_reading_a_file_it_wrote_reads_it_from_memory(lake: txlake.Lakehouse, gate: Gate) -> None:
    """The transaction holds the bytes it sent: a later statement on the same file neither waits for the upload
    nor GETs the file."""
    lake.create_table("w.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("w.t", accounts([1, 2], [5, 6]))
        assert gate.arrived.acquire(timeout=WAIT)  # the upload is held at the gate
        gets = lake.store.counters.snapshot().get
        assert tx.update("w.t", {"balance": "balance + 1"}) == 2  # returns while the upload is still held
        assert tx.delete("w.t", where="id = 1") == 1  # the update's file, also held
        assert rows(tx.read_arrow("w.t")) == [(2, 7)]
        assert lake.store.counters.snapshot().get == gets
        assert tx._uploads._held_bytes > 0
        gate.open()
    assert rows(lake.read_arrow("w.t")) == [(2, 7)]
    assert not tx._uploads._held and tx._uploads._held_bytes == 0  # let go once the transaction ended
    aborted = lake.transaction()
    aborted.append("w.t", accounts([3], [3]))
    aborted.abort()
    assert not aborted._uploads._held


def test_a_file_it_no_longer_holds_is_read_after_its_upload(
    lake: txlake.Lakehouse, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bytes a transaction holds (``HELD_BYTES``; none here), a statement reading a file it wrote waits
    for the upload, then reads the file from the store."""
    monkeypatch.setattr(uploads_module, "HELD_BYTES", 0)
    lake.create_table("w.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("w.t", accounts([1, 2], [5, 6]))
        assert gate.arrived.acquire(timeout=WAIT)
        reader = threading.Thread(target=lambda: result.append(tx.update("w.t", {"balance": "balance + 1"})))
        result: list[int] = []
        reader.start()
        reader.join(0.3)
        assert reader.is_alive() and not result  # the update reads the staged file: it waits for the upload
        gate.open()
        reader.join(WAIT)
        assert result == [2]
    assert rows(lake.read_arrow("w.t")) == [(1, 6), (2, 7)]


def test_an_abort_waits_for_its_uploads_before_deleting(lake: txlake.Lakehouse, gate: Gate) -> None:
    """Files still uploading when the block fails land first, then go: nothing is left behind."""
    lake.create_table("w.t", ACCOUNTS)
    before = _files(lake, "w/t")
    released = threading.Timer(0.3, gate.open)
    released.start()
    with pytest.raises(RuntimeError), lake.transaction() as tx:
        for i in range(4):
            tx.append("w.t", accounts([i], [i]))
        raise RuntimeError("boom")
    released.join()
    assert tx.status == "aborted" and tx._uploads.pending == 0
    assert _files(lake, "w/t") == before
    assert lake.read_arrow("w.t").num_rows == 0


def test_a_failed_upload_fails_the_transaction_and_leaves_nothing(lake: txlake.Lakehouse) -> None:
    """The second data file's PUT fails in the background: its statement has returned, the commit raises the
    upload's error before claiming anything, the transaction is aborted, and every file it wrote is deleted."""
    lake.create_table("w.t", ACCOUNTS)
    version = lake.snapshot().version
    before = _files(lake, "w/t")
    lake.store.faults.add(FaultRule("PUT", 2, "fail", path_contains=DATA))
    with pytest.raises(InjectedFaultError), lake.transaction() as tx:
        for i in range(3):
            tx.append("w.t", accounts([i], [i]))
    assert tx.status == "aborted"
    assert lake.snapshot().version == version  # nothing claimed
    assert _files(lake, "w/t") == before
    assert lake.transaction_status(tx.txid) != "committed"


def test_after_a_failed_upload_every_statement_fails(lake: txlake.Lakehouse) -> None:
    lake.create_table("w.t", ACCOUNTS)
    lake.store.faults.add(FaultRule("PUT", 1, "fail", path_contains=DATA))
    with pytest.raises(InjectedFaultError), lake.transaction() as tx:
        tx.append("w.t", accounts([1], [1]))  # returns: its file is still on its way
        tx._uploads.settle()
        tx.append("w.t", accounts([2], [2]))  # the transaction has lost a file: refused
    assert tx.status == "aborted"
    assert lake.read_arrow("w.t").num_rows == 0


def test_a_statement_failing_on_an_earlier_upload_leaves_none_of_its_files(lake: txlake.Lakehouse) -> None:
    """The first statement's upload fails after 0.3 s; the second statement (100 partitions, a file each) is
    still sending when its next PUT learns of it and raises: the files it had sent land, and are deleted with
    the transaction -- they were never staged, so only the transaction's record of what it sent finds them."""
    lake.create_table("w.p", pa.schema([("id", pa.int64()), ("p", pa.int64())]), partition_by=["p"])
    before = _files(lake, "w/p")
    first = threading.Event()

    def hook() -> None:
        if not first.is_set():
            first.set()
            time.sleep(0.3)
            raise InjectedFaultError("the first upload fails late", path="w/p", kind="PUT")
        time.sleep(0.05)

    lake.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=DATA, times=10**6, hook=hook))
    with pytest.raises(InjectedFaultError), lake.transaction() as tx:
        tx.append("w.p", pa.table({"id": pa.array([0], pa.int64()), "p": pa.array([0], pa.int64())}))
        ids = pa.array(range(100), pa.int64())
        tx.append("w.p", pa.table({"id": ids, "p": pa.compute.add(ids, 1)}))
    lake.store.faults = FaultInjector()
    assert tx.status == "aborted"
    assert _files(lake, "w/p") == before
    assert lake.read_arrow("w.p").num_rows == 0


def test_a_forked_child_leaving_the_block_deletes_nothing_of_the_parents(lake: txlake.Lakehouse) -> None:
    """A transaction belongs to the process that began it: in a forked child (simulated: another pid) leaving
    the block aborts the child's copy of it without deleting a file the parent (its own copy, untouched) is
    about to commit."""
    lake.create_table("w.t", ACCOUNTS)
    before = _files(lake, "w/t")
    tx = lake.transaction()
    tx.append("w.t", accounts([1], [1]))
    tx.wait_for_uploads()
    staged = _files(lake, "w/t")
    assert staged - before
    tx._pid = -1  # as seen from a child forked now
    tx.abort()
    assert _files(lake, "w/t") == staged


def test_writes_in_an_atexit_handler_commit(tmp_path: Path) -> None:
    """The upload threads are daemons with their own queue, and the library's other concurrent requests (the
    plain-writer probes and publication of a two-table commit, reads of several files) run one after another
    once a ``ThreadPoolExecutor`` refuses work: commits while the interpreter shuts down work. Until 2026-11-29
    a two-table commit there failed with "cannot schedule new futures after interpreter shutdown"."""
    script = textwrap.dedent(
        f"""
        import atexit
        import pyarrow as pa
        import txlake

        lake = txlake.connect({tmp_path.as_uri()!r})
        lake.create_table("w.t", "id bigint")
        lake.create_table("w.u", "id bigint")

        @atexit.register
        def last_words():
            for i in range(2):
                with lake.transaction() as tx:
                    for name in ("w.t", "w.u"):
                        tx.append(name, pa.table({{"id": pa.array([i], pa.int64())}}))
            assert sorted(lake.read_arrow("w.u")["id"].to_pylist()) == [0, 1]
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr
    lake = txlake.connect(tmp_path.as_uri())
    for name in ("w.t", "w.u"):
        assert sorted(lake.read_arrow(name)["id"].to_pylist()) == [0, 1]


# --------------------------------------------------------------------------------------- Uploads itself


def test_the_pool_serves_transactions_in_turn(tmp_path: object) -> None:
    """One thread, a transaction with five uploads queued behind a held one, then another transaction's single
    upload: it goes second or third, not last (a transaction of one file never waits behind another's
    hundred)."""
    pool = UploadPool(1)
    held = threading.Event()
    order: list[str] = []

    def upload(name: str) -> Callable[[], None]:
        def run() -> None:
            if name == "a0":
                assert held.wait(WAIT)
            order.append(name)

        return run

    futures: list[Future[None]] = [pool.submit(1, upload(f"a{i}")) for i in range(6)]
    futures.append(pool.submit(2, upload("b0")))
    held.set()
    for future in futures:
        future.result(WAIT)
    # a0 first (held), then b0 at once or after a1 (the thread may have taken a0 before a1 was queued, or after)
    assert order[0] == "a0" and order.index("b0") <= 2
    assert sorted(order) == ["a0", "a1", "a2", "a3", "a4", "a5", "b0"]


def test_a_burst_after_a_quiet_spell_gets_threads_of_its_own() -> None:
    """One thread left idle by an earlier upload, then three uploads that each wait for the others to start: they
    run side by side (the pool starts threads while more uploads wait than threads are idle)."""
    pool = UploadPool(4)
    pool.submit(1, lambda: None).result(WAIT)
    while pool._idle != 1:  # the first thread is back waiting for work
        time.sleep(0.001)
    started = threading.Semaphore(0)
    together = threading.Barrier(3, timeout=WAIT)

    def upload() -> None:
        started.release()
        together.wait()  # breaks (BrokenBarrierError) unless all three run at once

    futures = [pool.submit(2, upload) for _ in range(3)]
    for future in futures:
        future.result(WAIT)


def test_uploads_in_flight_at_a_fork_fail_the_transaction_instead_of_hanging(tmp_path: object) -> None:
    """A forked child inherits the transaction but not the threads of its uploads: it must not wait for them."""
    store = ObjectStore.from_uri(f"file://{tmp_path}")
    gate = Gate()
    store.faults.add(FaultRule("PUT", 1, "hook", times=10**6, hook=gate))
    uploads = Uploads(UploadPool(1))
    uploads.put(store, "a", b"1")
    assert gate.arrived.acquire(timeout=WAIT)
    uploads._pid = -1  # as in a child forked now (the parent's pid is not ours)
    with pytest.raises(TransactionError, match="forked"):
        uploads.flush()
    gate.open()


def test_uploads_hold_at_most_max_in_flight(tmp_path: object) -> None:
    """The next PUT waits for a slot: with one upload allowed and it held, ``put`` does not return."""
    store = ObjectStore.from_uri(f"file://{tmp_path}")
    gate = Gate()
    store.faults.add(FaultRule("PUT", 1, "hook", times=10**6, hook=gate))
    uploads = Uploads(UploadPool(2), max_in_flight=1)
    uploads.put(store, "a", b"1")
    assert gate.arrived.acquire(timeout=WAIT)
    second = threading.Thread(target=uploads.put, args=(store, "b", b"2"))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting for "a"
    gate.open()
    second.join(WAIT)
    uploads.flush()
    assert store.get("a") == b"1" and store.get("b") == b"2" and uploads.pending == 0


def test_uploads_bound_the_bytes_in_flight(tmp_path: object) -> None:
    store = ObjectStore.from_uri(f"file://{tmp_path}")
    gate = Gate()
    store.faults.add(FaultRule("PUT", 1, "hook", times=10**6, hook=gate))
    uploads = Uploads(UploadPool(4), max_bytes=10)
    uploads.put(store, "big", b"x" * 20)  # larger than the bound: goes, alone
    assert gate.arrived.acquire(timeout=WAIT)
    small = threading.Thread(target=uploads.put, args=(store, "small", b"y"))
    small.start()
    small.join(0.3)
    assert small.is_alive()
    gate.open()
    small.join(WAIT)
    uploads.flush()
    assert store.get("big") == b"x" * 20 and store.get("small") == b"y"
