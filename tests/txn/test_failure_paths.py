"""Failure paths of a commit (issue: nothing lost, nothing invented): each test failed before its fix."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.errors import (
    CatalogChangedError,
    CommitStateUnknownError,
    ConflictError,
    InjectedFaultError,
    InvalidObjectPathError,
    SimulatedCrash,
    TransientStorageError,
)
from txlake.storage import FaultRule

deltalake = pytest.importorskip("deltalake")
LEASE = 0.3


def _bank(tmp_path: Path) -> txlake.Lakehouse:
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    for name in ("bank.a", "bank.b", "bank.journal"):
        lake.create_table(name, ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("bank.a", accounts([1], [100]))
        tx.append("bank.b", accounts([1], [100]))
    return lake


def _transfer(tx: txlake.Transaction) -> None:
    tx.update("bank.a", set={"balance": "balance - 10"}, where="id = 1")
    tx.update("bank.b", set={"balance": "balance + 10"}, where="id = 1")
    tx.append("bank.journal", accounts([1], [10]))


def _state(lake: txlake.Lakehouse) -> tuple[list[tuple[object, ...]], ...]:
    return tuple(rows(lake.read_arrow(n)) for n in ("bank.a", "bank.b", "bank.journal"))


APPLIED = ([(1, 90)], [(1, 110)], [(1, 10)])
UNTOUCHED = ([(1, 100)], [(1, 100)], [])


# ----------------------------------------------------------------------------- 1. errors after the claim


@pytest.mark.parametrize("target", ["bank/a/_delta_log", "bank/b/_delta_log", "bank/journal/_delta_log", ".outcome"])
def test_a_storage_error_after_the_claim_is_retried(tmp_path: Path, target: str) -> None:
    """A failed PUT after the claim used to delete the staged files of a version that was later rolled
    forward: every read of the table failed and the caller had been told 'failed' (a ghost commit)."""
    lake = _bank(tmp_path)
    client = txlake.connect(lake.uri, lease_seconds=LEASE)
    client.store.faults.add(FaultRule("PUT", 1, "fail", path_contains=target))
    with client.transaction() as tx:
        _transfer(tx)
    assert _state(lake) == APPLIED
    assert client.transaction_status(tx.txid) == "committed"


@pytest.mark.parametrize("target", ["bank/a/_delta_log", "bank/journal/_delta_log", ".outcome"])
def test_an_outage_after_the_claim_is_commit_state_unknown(tmp_path: Path, target: str) -> None:
    lake = _bank(tmp_path)
    client = txlake.connect(lake.uri, lease_seconds=LEASE)
    client.store.faults.add(FaultRule("PUT", 1, "fail", path_contains=target, times=10**6))
    tx = client.transaction()
    _transfer(tx)
    with pytest.raises(CommitStateUnknownError) as info:
        tx.commit()
    assert tx.status == "unknown"
    assert info.value.txid == tx.txid and info.value.version == tx.read_version + 1
    # nothing was deleted: another client rolls the claim forward after its lease, and every read works
    time.sleep(LEASE)
    assert lake.transaction_status(tx.txid, info.value.version) == "committed"
    assert _state(lake) == APPLIED
    tables = {n: lake.table_location(n) for n in ("bank.a", "bank.b", "bank.journal")}
    assert [r["balance"] for r in deltalake.DeltaTable(tables["bank.a"]).to_pyarrow_dataset().to_table().to_pylist()]


def test_a_failed_claim_deletes_and_never_appears(tmp_path: Path) -> None:
    lake = _bank(tmp_path)
    client = txlake.connect(lake.uri, lease_seconds=LEASE)
    client.store.faults.add(FaultRule("PUT", 1, "fail", path_contains="_txlake/log/"))
    tx = client.transaction()
    _transfer(tx)
    with pytest.raises(InjectedFaultError):
        tx.commit()
    assert tx.status == "aborted"
    with lake.transaction() as other:
        other.append("bank.journal", accounts([2], [0]))
    time.sleep(LEASE)
    assert _state(lake) == ([(1, 100)], [(1, 100)], [(2, 0)])
    leftovers = [p for p in tmp_path.rglob("*.parquet") if tx.txid in p.name]
    assert leftovers == []
    assert lake.transaction_status(tx.txid, tx.read_version + 1) == "aborted"


def test_failing_maintenance_after_the_outcome_does_not_fail_the_commit(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri(), checkpoint_interval=1)
    lake.create_table("m.t", ACCOUNTS)
    lake.store.faults.add(FaultRule("PUT", 1, "fail", path_contains="checkpoint", times=10**6))
    with lake.transaction() as tx:
        tx.append("m.t", accounts([1], [1]))
    lake.store.faults.clear()
    assert rows(lake.read_arrow("m.t")) == [(1, 1)]


# ------------------------------------------------------------------------------- 2. catalog reads


def _create_unless(tx: txlake.Transaction, absent: str, create: str) -> None:
    if absent not in tx.tables():
        tx.create_table(create, ACCOUNTS)


@pytest.mark.parametrize("read", ["tables", "table_exists"])
def test_serializable_catalog_write_skew_is_prevented(local_lake: txlake.Lakehouse, read: str) -> None:
    lake = local_lake
    lake.create_namespace("a")
    t1, t2 = lake.transaction("serializable"), lake.transaction("serializable")
    for tx, absent, create in ((t1, "a.z", "a.w"), (t2, "a.w", "a.z")):
        seen = absent in tx.tables() if read == "tables" else tx.table_exists(absent)
        if not seen:
            tx.create_table(create, ACCOUNTS)
    t1.commit()
    with pytest.raises(CatalogChangedError):
        t2.commit()
    assert lake.tables("a") == ["a.w"]


def test_snapshot_isolation_allows_catalog_write_skew(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_namespace("a")
    t1, t2 = lake.transaction("snapshot"), lake.transaction("snapshot")
    _create_unless(t1, "a.z", "a.w")
    _create_unless(t2, "a.w", "a.z")
    t1.commit()
    t2.commit()
    assert lake.tables("a") == ["a.w", "a.z"]


def test_serializable_lookup_of_a_renamed_table_conflicts(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("a.src", ACCOUNTS)
    lake.create_table("a.dst", ACCOUNTS)
    tx = lake.transaction("serializable")
    location = tx.table_location("a.src")
    tx.append("a.dst", accounts([1], [len(location)]))
    lake.rename_table("a.src", "a.moved")
    with pytest.raises(CatalogChangedError):
        tx.commit()


# ------------------------------------------------------------------------ 3. plain writers then a txn


def test_a_transaction_after_a_plain_write_converges(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts([1], [10]))
    deltalake.write_deltalake(lake.table_location("s.t"), accounts([2], [20]), mode="append")
    attempts = []

    def body(tx: txlake.Transaction) -> int:
        attempts.append(tx.read_version)
        return tx.update("s.t", set={"balance": "balance + 1"}, where="id >= 0")

    updated = lake.run(body, retries=3)
    assert updated == 2 and len(attempts) == 2  # the first attempt conflicts once, then the commit is adopted
    assert rows(lake.read_arrow("s.t")) == [(1, 11), (2, 21)]


def test_a_plain_write_conflict_raises_in_a_with_block_and_adopts(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("s.t", ACCOUNTS)
    deltalake.write_deltalake(lake.table_location("s.t"), accounts([2], [20]), mode="append")
    with pytest.raises(ConflictError), lake.transaction() as tx:
        tx.delete("s.t", where="id >= 0")
        tx.append("s.t", accounts([3], [30]))
    assert rows(lake.read_arrow("s.t")) == [(2, 20)]  # adopted: the next transaction sees the row
    with lake.transaction() as tx:
        assert tx.delete("s.t", where="id >= 0") == 1
        tx.append("s.t", accounts([3], [30]))
    assert rows(lake.read_arrow("s.t")) == [(3, 30)]


# ---------------------------------------------------------------------------- 7. a poisoned version


def test_an_overlong_name_is_refused_before_anything_is_claimed(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    before = lake.version()
    with pytest.raises(ValueError, match="at most 128"):
        lake.create_table("ns." + "x" * 300, ACCOUNTS)
    with pytest.raises(ValueError, match="at most 128"):
        lake.create_namespace("y" * 200)
    assert lake.version() == before
    assert lake.context.glog.tail().undecided == ()
    lake.create_table("ns.ok", ACCOUNTS)  # nobody waits: nothing was claimed


def test_an_unpublishable_version_is_decided_aborted_once(tmp_path: Path) -> None:
    """A claimed version whose Delta commit the store refuses used to block every later commit forever."""
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    lake.create_table("p.keep", ACCOUNTS)
    doomed = txlake.connect(lake.uri, lease_seconds=LEASE)
    tx = doomed.transaction()
    tx.create_table("p.new", ACCOUNTS)
    tx.append("p.new", accounts([1], [1]))
    tx.append("p.keep", accounts([1], [1]))
    # tables publish concurrently: every Delta commit PUT of the doomed client dies, so none lands
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log/", times=1000))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    claimed = tx.read_version + 1
    # something makes the new table's log impossible to write: a file where its _delta_log directory goes
    (tmp_path / "p" / "new" / "_delta_log").write_bytes(b"in the way")
    time.sleep(LEASE)
    start = time.monotonic()
    for i in range(3):
        with lake.transaction() as other:
            other.append("p.keep", accounts([10 + i], [0]))
    assert time.monotonic() - start < 10
    outcome = lake.context.glog.read_outcome(claimed)
    assert outcome is not None and not outcome.committed and "unpublishable" in (outcome.reason or "")
    assert lake.tables("p") == ["p.keep"]
    assert rows(lake.read_arrow("p.keep")) == [(10, 0), (11, 0), (12, 0)]
    assert lake.transaction_status(tx.txid, claimed) == "aborted"
    dt = deltalake.DeltaTable(lake.table_location("p.keep"))
    assert sorted(r["id"] for r in dt.to_pyarrow_dataset().to_table().to_pylist()) == [10, 11, 12]


def test_an_unpublishable_table_after_a_published_one_is_compensated(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    lake.create_table("p.keep", ACCOUNTS)
    lake.create_table("p.other", ACCOUNTS)
    ids = {n: lake.snapshot().entry(n).id for n in ("p.keep", "p.other")}
    first, second = sorted(ids, key=ids.__getitem__)  # publication goes in table-id order
    doomed = txlake.connect(lake.uri, lease_seconds=LEASE)
    tx = doomed.transaction()
    tx.append(first, accounts([1], [1]))
    tx.append(second, accounts([2], [2]))
    doomed.store.faults.add(
        FaultRule("PUT", 1, "crash_before", path_contains=lake.snapshot().entry(second).path + "/_delta_log")
    )
    with pytest.raises(SimulatedCrash):
        tx.commit()
    # the second table's next commit cannot be written: its log file name is taken by a directory
    version = lake.snapshot().table_version(second) + 1
    (tmp_path / lake.snapshot().entry(second).path / "_delta_log" / f"{version:020d}.json").mkdir()
    time.sleep(LEASE)
    with lake.transaction() as other:
        other.append(first, accounts([3], [3]))
    assert rows(lake.read_arrow(first)) == [(3, 3)]
    # the first table's published commit was compensated: a plain reader does not see the aborted row
    dt = deltalake.DeltaTable(lake.table_location(first))
    assert [r["id"] for r in dt.to_pyarrow_dataset().to_table().to_pylist()] == [3]


def test_transaction_status(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1], "balance": [1]}, schema=ACCOUNTS))
    assert lake.transaction_status(tx.txid) == "committed"
    assert lake.transaction_status("no-such-txid") == "unknown"
    assert lake.transaction_status("no-such-txid", lake.version()) == "aborted"
    assert lake.transaction_status("no-such-txid", lake.version() + 5) == "unknown"


# ------------------------------------------------------------------------ found by adversarial review


def test_a_bad_checkpoint_interval_property_does_not_fail_a_committed_transaction(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("r.t", ACCOUNTS, properties={"delta.checkpointInterval": "ten"})
    with lake.transaction() as tx:
        tx.append("r.t", accounts([1], [1]))
    assert tx.status == "committed"
    assert rows(lake.read_arrow("r.t")) == [(1, 1)]


def test_a_claim_that_landed_behind_a_timeout_and_an_unreadable_read_back_is_not_deleted(tmp_path: Path) -> None:
    """The claim lands but the client sees a timeout, its retry sees 'exists', and the read-back is refused:
    that used to be reported as a permanent failure, so the files of a decidable claim were deleted."""
    # (a permanent refusal of every read-back would end in CommitStateUnknownError, never in a delete)
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("r.t", ACCOUNTS)
    owner = txlake.connect(lake.uri, lease_seconds=LEASE)
    tx = owner.transaction()
    tx.append("r.t", accounts([42], [0]))
    claim = f"_txlake/log/{owner.version() + 1:020d}.json"
    put = owner.store.put_if_absent
    captured: dict[str, bytes] = {}

    def spy(path: str, data: bytes) -> None:
        captured[path] = data
        put(path, data)

    def land_then_time_out() -> None:
        (tmp_path / claim).write_bytes(captured[claim])
        owner.store.faults.add(FaultRule("GET", 1, "fail", path_contains=claim))
        raise TransientStorageError("timed out after the put landed", path=claim, kind="PUT")

    owner.store.put_if_absent = spy  # type: ignore[method-assign]
    owner.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=claim, hook=land_then_time_out))
    tx.commit()  # the claim is read back once more: ours, so the commit goes on
    assert tx.status == "committed"
    with lake.transaction() as other:
        other.append("r.t", accounts([7], [0]))
    assert rows(lake.read_arrow("r.t")) == [(7, 0), (42, 0)]
    assert lake.transaction_status(tx.txid) == "committed"


def test_an_interrupt_after_the_claim_leaves_the_claim_to_roll_forward(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    lake.create_table("r.t", ACCOUNTS)
    owner = txlake.connect(lake.uri, lease_seconds=LEASE)

    def interrupt() -> None:
        raise KeyboardInterrupt

    owner.store.faults.add(FaultRule("PUT", 1, "hook", path_contains="_delta_log/", hook=interrupt))
    started: list[txlake.Transaction] = []

    def body(tx: txlake.Transaction) -> None:
        started.append(tx)
        tx.append("r.t", accounts([1], [1]))

    with pytest.raises(KeyboardInterrupt):
        owner.run(body)  # run() aborts on an interrupt, but a claimed transaction keeps its files
    assert started[0].status == "unknown"
    time.sleep(LEASE)
    with lake.transaction() as other:
        other.append("r.t", accounts([2], [2]))
    assert rows(lake.read_arrow("r.t")) == [(1, 1), (2, 2)]


def test_a_plain_writer_racing_the_publication_is_adopted_for_the_retry(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("r.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("r.t", accounts([0, 1], [0, 0]))
    location = lake.table_location("r.t")
    raced: list[int] = []

    def plain() -> None:
        if not raced:
            raced.append(1)
            deltalake.write_deltalake(location, accounts([5], [5]), mode="append")

    lake.store.faults.add(FaultRule("PUT", 1, "hook", path_contains="_delta_log/", hook=plain))
    attempts: list[str] = []

    def body(tx: txlake.Transaction) -> int:
        attempts.append(tx.txid)
        return tx.update("r.t", set={"balance": "balance + 1"}, where="id >= 0")

    assert lake.run(body, retries=1) == 3
    assert len(attempts) == 2
    assert rows(lake.read_arrow("r.t")) == [(0, 1), (1, 1), (5, 6)]


def test_an_unreadable_slot_never_blocks_a_compensation(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri(), lease_seconds=LEASE)
    for name in ("s.a", "s.b", "s.c"):
        lake.create_table(name, ACCOUNTS)
    snap = lake.snapshot()
    first, second = sorted(["s.a", "s.b"], key=lambda n: snap.entry(n).id)
    owner = txlake.connect(lake.uri, lease_seconds=LEASE)
    tx = owner.transaction()
    tx.append(first, accounts([1], [1]))
    tx.append(second, accounts([1], [1]))

    def hostile() -> None:  # after validation: garbage where the second commit and the compensation go
        for name, ahead in ((second, 1), (first, 2)):
            version = snap.table_version(name) + ahead
            (tmp_path / snap.entry(name).path / "_delta_log" / f"{version:020d}.json").write_text("not json\n")

    owner.store.faults.add(FaultRule("PUT", 1, "hook", path_contains="_txlake/log/", hook=hostile))
    with pytest.raises(InvalidObjectPathError):
        tx.commit()
    start = time.monotonic()
    with lake.transaction() as other:
        other.append("s.c", accounts([1], [1]))
    assert time.monotonic() - start < 5
    assert lake.transaction_status(tx.txid, tx.read_version + 1) == "aborted"
    assert rows(lake.read_arrow(first)) == []
