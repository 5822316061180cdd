"""Pessimistic mode (txn/intents.py): intent markers queue writers instead of aborting them."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation
from txlake.txn.intents import INTENTS_DIR, list_markers

ACCOUNTS = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
WORKER = Path(__file__).with_name("pessimistic_worker.py")


def _bank(location: StoreLocation, **options: float) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options, **options)  # type: ignore[arg-type]
    for name in ("bank.a", "bank.b"):
        lake.create_table(name, ACCOUNTS)
        with lake.transaction() as tx:
            tx.append(name, pa.table({"id": [1, 2], "balance": [0, 100]}, schema=ACCOUNTS))
    return lake


def _balance(lake: txlake.Lakehouse, name: str, row: int = 1) -> int:
    rows = lake.read_arrow(name, where=f"id = {row}").to_pylist()
    assert len(rows) == 1, rows
    return int(rows[0]["balance"])


def _threads(n: int, body: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            body(i)
        except BaseException as exc:  # collected and asserted on by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _markers(lake: txlake.Lakehouse) -> list[str]:
    return [m.path for m in lake.store.list(INTENTS_DIR + "/")]


def test_eight_threads_increment_the_same_rows_of_two_tables_without_an_abort(any_store_uri: StoreLocation) -> None:
    lake = _bank(any_store_uri)
    per_thread = 3 if any_store_uri.uri.startswith("s3") else 5

    def increment(_: int) -> None:
        for _ in range(per_thread):

            def fn(tx: txlake.Transaction) -> None:
                # a read-modify-write (what it read decides what it writes) and an expression update
                (row,) = tx.read_arrow("bank.a", where="id = 1").to_pylist()
                tx.update("bank.a", set={"balance": str(row["balance"] + 1)}, where="id = 1")
                tx.update("bank.b", set={"balance": "balance + 1"}, where="id = 1")

            # no retry and no redo: a single abort fails the thread
            lake.run(fn, concurrency="pessimistic", retries=0, redo=False)

    assert _threads(8, increment) == []
    assert _balance(lake, "bank.a") == _balance(lake, "bank.b") == 8 * per_thread
    assert _balance(lake, "bank.a", 2) == 100
    assert _markers(lake) == []  # every marker released
    assert [p for p in lake.store.list("_txlake/txns/") if "/lease-" in p.path] == []  # and every lease


@pytest.mark.s3
def test_four_processes_on_seaweedfs_increment_without_an_abort(s3_uri: str, s3_options: dict[str, str]) -> None:
    location = StoreLocation(s3_uri, s3_options)
    lake = _bank(location)
    n = 4
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "increment", s3_uri, json.dumps(s3_options), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err.decode()[-3000:]
        assert out.decode().strip() == "done"
    assert _balance(lake, "bank.a") == _balance(lake, "bank.b") == 4 * n
    assert _markers(lake) == []


def test_a_crafted_cross_table_cycle_aborts_the_youngest(any_store_uri: StoreLocation) -> None:
    lake = _bank(any_store_uri)
    older = lake.transaction(concurrency="pessimistic")
    older.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")  # holds a
    time.sleep(0.01)  # the younger one's lease starts later
    younger = lake.transaction(concurrency="pessimistic")
    younger.update("bank.b", set={"balance": "balance + 10"}, where="id = 1")  # holds b
    waiting = threading.Thread(
        target=lambda: older.update("bank.b", set={"balance": "balance + 1"}, where="id = 1")
    )  # waits for the younger one on b
    waiting.start()
    time.sleep(0.1)
    with pytest.raises(txlake.DeadlockError) as caught:
        younger.update("bank.a", set={"balance": "balance + 10"}, where="id = 1")  # closes the cycle
    assert set(caught.value.cycle) == {older.txid, younger.txid} and caught.value.cycle[0] == younger.txid
    assert isinstance(caught.value, txlake.ConflictError)  # lake.run re-runs it
    younger.abort()  # releases b: the older one goes on
    waiting.join(timeout=30)
    assert not waiting.is_alive()
    older.commit()
    assert _balance(lake, "bank.a") == _balance(lake, "bank.b") == 1
    assert _markers(lake) == []


def test_opposite_orders_resolve_by_rerunning_the_youngest(any_store_uri: StoreLocation) -> None:
    lake = _bank(any_store_uri)
    per_thread = 2 if any_store_uri.uri.startswith("s3") else 4
    deadlocks: list[int] = []

    def increment(i: int) -> None:
        first, second = ("bank.a", "bank.b") if i % 2 else ("bank.b", "bank.a")
        for _ in range(per_thread):
            attempts = 0

            def fn(tx: txlake.Transaction) -> None:
                nonlocal attempts
                attempts += 1
                tx.update(first, set={"balance": "balance + 1"}, where="id = 1")
                time.sleep(0.005)  # widen the window in which the other order takes its first table
                tx.update(second, set={"balance": "balance + 1"}, where="id = 1")

            lake.run(fn, concurrency="pessimistic", retries=50, redo=False)
            deadlocks.append(attempts - 1)

    assert _threads(4, increment) == []
    assert _balance(lake, "bank.a") == _balance(lake, "bank.b") == 4 * per_thread
    assert _markers(lake) == []


def test_a_killed_holders_marker_expires_and_the_queue_moves_on(any_store_uri: StoreLocation) -> None:
    if any_store_uri.uri.startswith("memory"):
        pytest.skip("another process cannot reach memory://")
    location = any_store_uri
    lake = _bank(location)
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), "hold", location.uri, json.dumps(location.storage_options)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert holder.stdout is not None
    line = holder.stdout.readline().decode().split()
    assert line[:1] == ["holding"], line
    killed_txid = line[1]
    table_id = lake.snapshot().entry("bank.a").id
    assert [m.txid for m in list_markers(lake.store, table_id)] == [killed_txid]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    with lake.transaction(concurrency="pessimistic") as tx:
        tx.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")
    waited = time.monotonic() - started
    assert waited < 20, waited  # the killed holder's lease is 1 s
    assert _balance(lake, "bank.a") == 1  # the killed transaction never appears
    assert lake.transaction_status(killed_txid) == "unknown"  # it never claimed a version
    assert _markers(lake) == []


def test_a_plain_delta_writer_is_never_blocked_by_markers(tmp_path: Path) -> None:
    location = StoreLocation((tmp_path / "lake").as_uri(), {})
    lake = _bank(location)
    tx = lake.transaction(concurrency="pessimistic")
    tx.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")  # holds a's marker
    started = time.monotonic()
    deltalake.write_deltalake(
        lake.table_location("bank.a"), pa.table({"id": [3], "balance": [7]}, schema=ACCOUNTS), mode="append"
    )
    assert time.monotonic() - started < 5
    assert not any("intents" in p.name for p in (tmp_path / "lake" / "bank" / "a" / "_delta_log").iterdir())
    tx.commit()  # the plain append is adopted as usual (a blind append does not conflict)
    rows = {r["id"]: r["balance"] for r in lake.read_arrow("bank.a").to_pylist()}
    assert rows == {1: 1, 2: 100, 3: 7}
    dt = deltalake.DeltaTable(lake.table_location("bank.a"))
    assert sorted(dt.to_pyarrow_dataset().to_table().column("id").to_pylist()) == [1, 2, 3]


def test_optimistic_and_pessimistic_side_by_side_on_the_same_rows(any_store_uri: StoreLocation) -> None:
    lake = _bank(any_store_uri)
    per_thread = 2 if any_store_uri.uri.startswith("s3") else 4

    def increment(i: int) -> None:
        concurrency = "pessimistic" if i % 2 else "optimistic"
        for _ in range(per_thread):

            def fn(tx: txlake.Transaction) -> None:
                tx.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")
                tx.update("bank.b", set={"balance": "balance + 1"}, where="id = 1")

            lake.run(fn, concurrency=concurrency, retries=100)  # type: ignore[arg-type]

    assert _threads(6, increment) == []
    assert _balance(lake, "bank.a") == _balance(lake, "bank.b") == 6 * per_thread
    assert _markers(lake) == []


def test_optimistic_transactions_make_no_intent_request(tmp_path: Path) -> None:
    lake = _bank(StoreLocation((tmp_path / "lake").as_uri(), {}))
    with lake.transaction() as tx:
        tx.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")
    assert not (tmp_path / "lake" / "_txlake" / "intents").exists()
    assert not list((tmp_path / "lake" / "_txlake").glob("txns/*/lease-*"))


def test_concurrency_is_checked() -> None:
    lake = txlake.connect(f"memory://{time.time_ns()}")
    with pytest.raises(txlake.InvalidArgumentError):
        lake.transaction(concurrency="hopeful")  # type: ignore[arg-type]


def test_vacuum_collects_dead_holders_markers_only(tmp_path: Path) -> None:
    lake = _bank(StoreLocation((tmp_path / "lake").as_uri(), {}))
    table_id = lake.snapshot().entry("bank.a").id
    live = lake.transaction(concurrency="pessimistic")
    live.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")
    dead = f"{INTENTS_DIR}/{table_id}/{0:020d}-{'d' * 32}.json"  # a holder that ended without deleting it
    lake.store.put(dead, b"{}")
    old = time.time() - 3600
    os.utime(tmp_path / "lake" / dead, (old, old))
    (live_path,) = (m.path for m in lake.store.list(INTENTS_DIR + "/") if m.path != dead)
    os.utime(tmp_path / "lake" / live_path, (old, old))  # old, but its holder is alive
    report = lake.vacuum(retention=datetime.timedelta(0), dry_run=False, force=True)
    assert dead in {f.path for f in report.deleted}
    assert live_path not in {f.path for f in report.deleted}
    assert _markers(lake) == [live_path]
    live.commit()


def test_an_optimistic_commit_between_two_acquisitions_cannot_cause_read_skew(tmp_path: Path) -> None:
    lake = _bank(StoreLocation((tmp_path / "lake").as_uri(), {}))
    tx = lake.transaction("snapshot", concurrency="pessimistic")
    assert _balance_in(tx, "bank.b") == 0  # holds b, read at the newest version
    with lake.transaction() as other:  # optimistic: ignores markers; moves 5 from a to b
        other.update("bank.a", set={"balance": "balance - 5"}, where="id = 1")
        other.update("bank.b", set={"balance": "balance + 5"}, where="id = 1")
    # a is acquired at the newest version (-5): with b read before the transfer, the sum would be off by 5
    with pytest.raises(txlake.ConcurrentDeleteReadError) as caught:  # the catch-up check on b
        _balance_in(tx, "bank.a")
    assert caught.value.table == "bank.b"
    tx.abort()
    assert _markers(lake) == []


def _balance_in(tx: txlake.Transaction, name: str) -> int:
    (row,) = tx.read_arrow(name, where="id = 1").to_pylist()
    return int(row["balance"])
