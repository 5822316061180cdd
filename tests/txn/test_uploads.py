"""Write-behind uploads (``storage/uploads.py``): a statement returns while its data file is still going out; the
transaction waits for its uploads before it reads a file it wrote, before it claims, and before it deletes
anything, and a failed upload fails the transaction (nothing of it ever appears, nothing of it is left)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import txlake
from tests.interop.deltars import TableLocation, deltars_read_datafusion
from tests.interop.deltars import rows as canonical_rows
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.errors import InjectedFaultError
from txlake.storage import FaultInjector, FaultRule, ObjectStore
from txlake.storage.uploads import UploadPool, Uploads

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


def test_a_statement_reading_a_file_it_wrote_waits_for_its_upload(lake: txlake.Lakehouse, gate: Gate) -> None:
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


# --------------------------------------------------------------------------------------- Uploads itself


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
