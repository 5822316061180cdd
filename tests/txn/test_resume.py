"""Transaction sublog, resume and recover (txlake.txn.sublog, txlake.txn.recovery) on real stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import accounts, rows
from txlake.errors import SimulatedCrash
from txlake.storage import FaultRule, ObjectStore
from txlake.txn.lease import read_lease
from txlake.txn.sublog import LONG_TRANSACTION_MIN_SECONDS, StagedState, SublogEntry, SublogHeader, read_sublog

ROOT = Path(__file__).resolve().parents[2]
LEASE = 1.0
TABLES = ("bank.accounts", "bank.audit", "bank.journal")


def _connect(location: StoreLocation, lease: float = LEASE) -> txlake.Lakehouse:
    return txlake.connect(location.uri, location.storage_options, lease_seconds=lease)


def _setup(lake: txlake.Lakehouse) -> None:
    for name in TABLES:
        lake.create_table(name, "id bigint, balance bigint")
    with lake.transaction() as tx:
        tx.append("bank.accounts", accounts([1, 2], [100, 100]))
        tx.append("bank.audit", accounts([1, 2], [0, 0]))


def _die(tx: txlake.Transaction, lake: txlake.Lakehouse) -> None:
    """As if ``tx``'s process died: its heartbeat stops renewing, its lease object stays until it expires."""
    for handle in lake.context.heartbeat.held():
        if handle.txid == tx.txid:
            lake.context.heartbeat.release(handle, delete=False)


def _parquet(store: ObjectStore) -> set[str]:
    return {m.path for m in store.list("") if m.path.endswith(".parquet")}


def _assert_sublog_matches(lake: txlake.Lakehouse, tx: txlake.Transaction) -> None:
    sublog = read_sublog(lake.store, tx.txid)
    states = sublog.staged_states()
    for table_id, work in tx._work.items():
        expected = StagedState.of(work)
        if not work.writes and not work.dml_predicates and not work.query_predicates:
            continue
        assert states[table_id].same_as(expected), table_id
    for entry in sublog.entries:
        assert SublogEntry.from_bytes(entry.to_bytes(), path="x") == entry
    assert sublog.header is not None
    assert SublogHeader.from_bytes(sublog.header.to_bytes(), path="x") == sublog.header


# ------------------------------------------------------------------------------------------- round trip


def test_the_sublog_folds_to_exactly_the_staged_state(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    steps = [
        lambda: tx.append("bank.accounts", accounts([3], [7])),
        lambda: tx.update("bank.accounts", set={"balance": "balance + 1"}, where="id = 3"),  # rewrites its own file
        lambda: tx.delete("bank.audit", where="id = 2"),
        lambda: tx.read_arrow("bank.journal"),
        lambda: tx.merge(
            "bank.audit",
            accounts([1, 5], [9, 9]),
            on="t.id = s.id",
            when_matched_update={"balance": "s.balance"},
            when_not_matched_insert="*",
        ),
        lambda: tx.overwrite("bank.journal", accounts([8], [8])),
    ]
    for step in steps:
        step()
        _assert_sublog_matches(lake, tx)
    sublog = read_sublog(lake.store, tx.txid)
    forms = [e.statement for e in sublog.entries if e.statement is not None]
    assert [f.method for f in forms] == ["append", "update", "delete", "merge", "overwrite"]
    assert forms[1].arguments == {"set": {"balance": "balance + 1"}, "where": "id = 3"}
    assert forms[0].source_files and not forms[3].replayable
    assert read_lease(lake.store, tx.txid) is not None  # a resumable transaction is leased
    tx.commit()
    assert lake.store.list(f"_txlake/txns/{tx.txid}/") == []  # everything of it goes when it ends


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_an_ended_transaction_leaves_no_directory_on_a_local_lakehouse(tmp_path: Path, end: str) -> None:
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    tx.update("bank.accounts", set={"balance": "balance + 1"}, where="id = 1")
    txns = tmp_path / "_txlake" / "txns"
    assert (txns / tx.txid).is_dir()
    tx.commit() if end == "commit" else tx.abort()
    assert list(txns.iterdir()) == []


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["append", "update", "delete", "overwrite", "read"]), min_size=1, max_size=6))
def test_any_statement_sequence_round_trips(tmp_path: Path, ops: list[str]) -> None:
    lake = txlake.connect(f"memory://{os.urandom(8).hex()}", lease_seconds=5)
    lake.create_table("n.t", "id bigint, balance bigint")
    with lake.transaction() as tx:
        tx.append("n.t", accounts([1, 2], [1, 2]))
    tx = lake.transaction(resumable=True)
    for i, op in enumerate(ops):
        if op == "append":
            tx.append("n.t", accounts([10 + i], [i]))
        elif op == "update":
            tx.update("n.t", set={"balance": "balance * 2"}, where=f"id >= {i}")
        elif op == "delete":
            tx.delete("n.t", where=f"id = {10 + i - 1}")
        elif op == "overwrite":
            tx.overwrite("n.t", accounts([20 + i], [i]))
        else:
            tx.read_arrow("n.t", where="id > 1")
        _assert_sublog_matches(lake, tx)
    tx.abort()


def test_deletion_vectors_round_trip_and_are_resumed(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    lake.create_table("n.dv", "id bigint, balance bigint", properties={"delta.enableDeletionVectors": "true"})
    with lake.transaction() as tx:
        tx.append("n.dv", accounts(list(range(10)), list(range(10))))
    tx = lake.transaction(resumable=True)
    tx.delete("n.dv", where="id < 3")  # merge-on-read: remove (path) + add (path, DV), one .bin file
    _assert_sublog_matches(lake, tx)
    (effect,) = read_sublog(lake.store, tx.txid).entries[0].effects
    assert effect.dv_files and effect.staged[0].deletion_vector is not None and effect.removed
    _die(tx, lake)
    time.sleep(LEASE + 0.1)
    _connect(any_store_uri).resume(tx.txid).commit()
    assert sorted(lake.read_arrow("n.dv")["id"].to_pylist()) == list(range(3, 10))


def test_a_short_transaction_writes_no_sublog(local_lake: txlake.Lakehouse) -> None:
    local_lake.create_table("n.t", "id bigint, balance bigint")
    with local_lake.store.counters.measure() as m, local_lake.transaction() as tx:
        tx.append("n.t", accounts([1], [1]))
        tx.update("n.t", set={"balance": "balance + 1"}, where="id = 1")
    assert local_lake.store.list("_txlake/txns/") == []
    assert m.counts.put == 5  # data file, its rewrite, record, Delta commit, outcome: nothing under txns/


def test_a_long_transaction_starts_its_sublog_after_a_third_of_the_lease(any_store_uri: StoreLocation) -> None:
    """After a third of ``lease_seconds``, and never under LONG_TRANSACTION_MIN_SECONDS."""
    lake = _connect(any_store_uri, lease=0.6)
    _setup(lake)
    tx = lake.transaction()
    tx.append("bank.accounts", accounts([3], [3]))
    time.sleep(0.25)  # past a third of the lease, not past the minimum
    tx.append("bank.accounts", accounts([5], [5]))
    assert lake.store.list(f"_txlake/txns/{tx.txid}/") == []
    tx._started -= LONG_TRANSACTION_MIN_SECONDS  # as if it had been open that long
    tx._started_wall -= LONG_TRANSACTION_MIN_SECONDS
    tx.append("bank.accounts", accounts([4], [4]))  # the statement after the threshold writes all so far
    _assert_sublog_matches(lake, tx)
    assert len(read_sublog(lake.store, tx.txid).entries) == 3
    tx.commit()
    assert lake.store.list(f"_txlake/txns/{tx.txid}/") == []


# ---------------------------------------------------------------------------------------------- resume


@pytest.mark.parametrize("any_store_uri", ["file", "s3"], indirect=True)
def test_a_killed_process_is_resumed_by_another_and_commits_exactly_once(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.txn.resume_worker", any_store_uri.uri, json.dumps(any_store_uri.storage_options)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        txid = child.stdout.readline().decode().strip()
        assert len(txid) == 32, child.stderr.read().decode() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    files_before = _parquet(lake.store)
    deadline = time.monotonic() + 10
    while True:
        try:
            with lake.store.counters.measure() as m:
                tx = lake.resume(txid)
            break
        except txlake.LeaseHeldError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert m.counts.put == 1  # the lease takeover only: no data file is written again
    tx.append("bank.journal", accounts([101], [1]))  # and it goes on like any transaction
    result = tx.commit()
    assert set(result.table_versions) == {lake.snapshot().entry(n).id for n in TABLES}
    new_files = _parquet(lake.store) - files_before
    assert len(new_files) == 1  # the statement added after the resume
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (10, 5), (11, 6)]
    assert rows(lake.read_arrow("bank.audit")) == [(1, 1), (2, 0)]
    assert rows(lake.read_arrow("bank.journal")) == [(100, -1), (101, 1)]
    assert lake.transaction_status(txid) == "committed"
    with pytest.raises((txlake.TransactionNotFoundError, txlake.TransactionNotResumableError)):
        lake.resume(txid)  # ended: never twice
    if any_store_uri.uri.startswith("file://"):
        from deltalake import DeltaTable

        for name, n in (("bank.accounts", 4), ("bank.audit", 2), ("bank.journal", 2)):
            table = DeltaTable(lake.table_location(name))
            assert sum(f.num_rows for f in table.to_pyarrow_dataset().to_batches()) == n


def test_two_resumers_race_and_one_wins(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    _die(tx, lake)
    time.sleep(LEASE + 0.1)
    resumers = [_connect(any_store_uri) for _ in range(2)]
    won: list[txlake.Transaction] = []
    lost: list[BaseException] = []
    barrier = threading.Barrier(2)

    def attempt(other: txlake.Lakehouse) -> None:
        barrier.wait()
        try:
            won.append(other.resume(tx.txid))
        except txlake.LeaseHeldError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=attempt, args=(r,)) for r in resumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 1
    won[0].commit()
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]


def test_a_live_transaction_is_not_resumed(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    time.sleep(LEASE * 1.5)  # the heartbeat keeps it alive
    with pytest.raises(txlake.LeaseHeldError):
        _connect(any_store_uri).resume(tx.txid)
    tx.commit()
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]


def test_resume_after_the_original_claimed_rolls_it_forward_never_twice(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    doomed = _connect(any_store_uri)
    tx = doomed.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains=".outcome.json"))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    _die(tx, doomed)
    time.sleep(LEASE + 0.1)
    claimed = lake.context.glog.tail().latest_claimed
    with pytest.raises(txlake.TransactionNotResumableError) as info:
        lake.resume(tx.txid)
    assert (info.value.reason, info.value.status, info.value.version) == ("decided", "committed", claimed)
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]
    assert lake.context.glog.tail().latest_claimed == claimed  # claimed once, by the original
    with pytest.raises((txlake.TransactionNotFoundError, txlake.TransactionNotResumableError)):
        lake.resume(tx.txid)


def test_a_holder_paused_past_its_lease_gets_lease_lost_and_nothing_appears(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    paused = _connect(any_store_uri)
    tx = paused.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    tx.update("bank.audit", set={"balance": "balance + 5"}, where="id = 1")
    _die(tx, paused)  # the process stalls: no heartbeat
    time.sleep(LEASE + 0.1)
    report = lake.recover(guard=timedelta(0), dry_run=False)
    assert [t.txid for t in report.aborted] == [tx.txid]
    with pytest.raises(txlake.LeaseLostError):
        tx.commit()  # it wakes up and tries to commit
    assert tx.status == "aborted"
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100)]
    assert rows(lake.read_arrow("bank.audit")) == [(1, 0), (2, 0)]
    with pytest.raises(txlake.TransactionNotResumableError) as info:
        lake.resume(tx.txid)
    assert info.value.reason == "aborted"
    assert lake.transaction_status(tx.txid) == "unknown"  # never claimed anything


def test_a_fenced_holder_never_deletes_what_its_resumer_commits(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    paused = _connect(any_store_uri)
    tx = paused.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    _die(tx, paused)
    time.sleep(LEASE + 0.1)
    resumed = lake.resume(tx.txid)
    with pytest.raises(txlake.LeaseLostError):
        tx.commit()
    with pytest.raises(txlake.TransactionClosedError):
        tx.abort()
    assert read_sublog(lake.store, tx.txid).header is not None  # the fenced holder left the sublog alone
    resumed.commit()
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]


def test_redo_works_for_resumed_statements(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    tx.append("bank.journal", accounts([7], [7]))
    tx.update("bank.accounts", set={"balance": "balance - 10"}, where="id = 1")
    _die(tx, lake)
    time.sleep(LEASE + 0.1)
    other = _connect(any_store_uri)
    resumed = other.resume(tx.txid)
    with other.transaction() as winner:  # rewrites the row the resumed update rewrote
        winner.update("bank.accounts", set={"balance": "balance + 1"}, where="id = 1")
    result = resumed.commit()
    assert result.redone == 1
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 91), (2, 100)]
    assert rows(lake.read_arrow("bank.journal")) == [(7, 7)]


# --------------------------------------------------------------------------------------------- recover


@pytest.mark.parametrize("any_store_uri", ["file", "s3"], indirect=True)
def test_recover_aborts_the_dead_rolls_forward_the_claimed_and_keeps_the_live(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    dead_lake, claimed_lake = _connect(any_store_uri), _connect(any_store_uri)
    dead = dead_lake.transaction(resumable=True)
    dead.append("bank.accounts", accounts([3], [3]))
    dead_files = _parquet(lake.store)
    claimed = claimed_lake.transaction(resumable=True)
    claimed.append("bank.journal", accounts([9], [9]))
    claimed_lake.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains=".outcome.json"))
    with pytest.raises(SimulatedCrash):
        claimed.commit()
    _die(dead, dead_lake)
    _die(claimed, claimed_lake)
    live = _connect(any_store_uri, lease=10).transaction(resumable=True)  # another client's, alive throughout
    live.append("bank.audit", accounts([4], [4]))
    time.sleep(LEASE + 0.1)

    dry = lake.recover(guard=timedelta(0))
    assert dry.dry_run and {t.txid: t.action for t in dry.transactions} == {
        dead.txid: "aborted",
        claimed.txid: "rolled_forward",
        live.txid: "live",
    }
    assert read_sublog(lake.store, dead.txid).header is not None  # a dry run changes nothing

    report = lake.recover(guard=timedelta(0), dry_run=False)
    actions = {t.txid: t for t in report.transactions}
    assert actions[dead.txid].action == "aborted" and actions[dead.txid].files
    assert actions[claimed.txid].action == "rolled_forward" and actions[claimed.txid].status == "committed"
    assert actions[live.txid].action == "live"
    assert not set(actions[dead.txid].files) & (
        _parquet(lake.store) | {f for f in dead_files if "part-" + dead.txid not in f}
    )
    assert rows(lake.read_arrow("bank.journal")) == [(9, 9)]
    live.commit()  # the live one's files were kept
    assert rows(lake.read_arrow("bank.audit")) == [(1, 0), (2, 0), (4, 4)]
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100)]
    # what is left: the dead one's tombstone and fencing lease, nothing of the others
    left = {m.path.split("/")[2] for m in lake.store.list("_txlake/txns/")}
    assert left == {dead.txid}
    local = lake.store.local_path("_txlake/txns")
    if local is not None:  # not even their directories
        assert sorted(os.listdir(local)) == [dead.txid]
    again = lake.recover(guard=timedelta(0), dry_run=False)
    assert [t.action for t in again.transactions] == ["skipped"]


def _nothing_left(lake: txlake.Lakehouse, txid: str) -> None:
    assert lake.store.list(f"_txlake/txns/{txid}/") == []
    local = lake.store.local_path(f"_txlake/txns/{txid}")
    assert local is None or not os.path.exists(local)


def test_a_resume_racing_the_holders_end_finds_nothing_to_resume(any_store_uri: StoreLocation) -> None:
    """The holder ends its transaction after the resumer read the sublog, before it takes the lease over:
    the resumer then holds an empty directory's lease. It lets go and says there is nothing to resume."""
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = lake.transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    resumer = _connect(any_store_uri)
    ended: list[txlake.CommitResult] = []
    # the second LIST of the directory is take_over's look for the lease (the first read the sublog)
    hook = FaultRule("LIST", 2, "hook", path_contains=f"txns/{tx.txid}", hook=lambda: ended.append(tx.commit()))
    resumer.store.faults.add(hook)
    with pytest.raises(txlake.TransactionNotFoundError, match="ended meanwhile"):
        resumer.resume(tx.txid)
    assert len(ended) == 1
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]
    _nothing_left(lake, tx.txid)


def test_recover_racing_the_holders_end_leaves_no_tombstone(any_store_uri: StoreLocation) -> None:
    """The holder ends its transaction after recover listed it, before recover looks at its lease: recover
    takes over an empty directory. It reports the transaction *ended* and leaves nothing behind (it used to
    tombstone a transaction that had just committed)."""
    lake = _connect(any_store_uri)
    _setup(lake)
    tx = _connect(any_store_uri).transaction(resumable=True)
    tx.append("bank.accounts", accounts([3], [3]))
    ended: list[txlake.CommitResult] = []
    hook = FaultRule("LIST", 1, "hook", path_contains=f"txns/{tx.txid}", hook=lambda: ended.append(tx.commit()))
    lake.store.faults.add(hook)
    report = lake.recover(guard=timedelta(0), dry_run=False)
    assert len(ended) == 1
    assert [(t.txid, t.action) for t in report.transactions] == [(tx.txid, "ended")]
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 100), (2, 100), (3, 3)]
    _nothing_left(lake, tx.txid)
    assert lake.transaction_status(tx.txid) == "committed"


def test_recover_leaves_the_directory_of_a_transaction_it_did_not_finish(tmp_path: Path) -> None:
    """A directory holding only Spark staging is not recover's: between two writes its transaction may have
    emptied it and be about to write into it again (a PUT two levels down creates the directories one at a
    time, and failed when one was removed in between)."""
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    txid = "a" * 32
    lake.store.put(f"_txlake/txns/{txid}/spark/w.json", b"{}")
    staging = tmp_path / "_txlake" / "txns" / txid

    def between_two_writes() -> None:
        lake.store.delete(f"_txlake/txns/{txid}/spark/w.json")
        (staging / "spark").rmdir()

    lake.store.faults.add(FaultRule("LIST", 1, "hook_after", path_contains="_txlake/txns", hook=between_two_writes))
    report = lake.recover(guard=timedelta(0), dry_run=False)
    assert [(t.txid, t.action) for t in report.transactions] == [(txid, "skipped")]
    assert staging.is_dir()


def test_recover_keeps_files_until_the_guard(any_store_uri: StoreLocation) -> None:
    lake = _connect(any_store_uri)
    _setup(lake)
    dead_lake = _connect(any_store_uri)
    dead = dead_lake.transaction(resumable=True)
    dead.append("bank.accounts", accounts([3], [3]))
    _die(dead, dead_lake)
    time.sleep(LEASE + 0.1)
    files = _parquet(lake.store)
    report = lake.recover(guard=timedelta(hours=1), dry_run=False)
    assert [t.action for t in report.transactions] == ["pending"]
    assert _parquet(lake.store) == files
    with pytest.raises(txlake.TransactionNotResumableError):
        lake.resume(dead.txid)  # aborted already
    report = lake.recover(guard=timedelta(0), dry_run=False)
    assert [t.action for t in report.transactions] == ["aborted"] and report.deleted_files
    assert _parquet(lake.store) == files - set(report.deleted_files)
