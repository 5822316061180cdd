"""The lakehouse log: records and outcomes round-trip, state is a pure fold, checkpoints, corruption."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.delta.actions import Add
from txlake.errors import CorruptLogError, VersionNotFoundError
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import (
    CreateNamespace,
    CreateTable,
    DropTable,
    GlobalRecord,
    LakehouseState,
    Outcome,
    ReadSet,
    TableChange,
    apply,
)


def _record(version: int, **kw: object) -> GlobalRecord:
    base = dict(
        version=version,
        txid="t1",
        kind="txn",
        read_version=version - 1,
        isolation="serializable",
        timestamp_ms=1,
        lease_until_ms=2,
    )
    base.update(kw)
    return GlobalRecord(**base)  # type: ignore[arg-type]


def test_record_and_outcome_round_trip() -> None:
    change = TableChange(
        table_id="id1",
        path="ns/t",
        base_version=4,
        actions=(Add("part-1.parquet", {}, 10, 5, True, '{"numRecords":1}'),),
        operation="UPDATE",
        dml_reads=ReadSet(("id = 1",), frozenset({"part-0.parquet"})),
        query_reads=ReadSet((None,), frozenset()),
        adopted_from=3,
    )
    record = _record(7, tables=(change,), catalog=(CreateNamespace("ns"),))
    assert GlobalRecord.from_bytes(record.to_bytes()) == record
    outcome = Outcome(7, "t1", "committed", {"id1": 5}, 9)
    assert Outcome.from_bytes(outcome.to_bytes()) == outcome


def test_apply_is_pure_and_ignores_aborted() -> None:
    s0 = LakehouseState(version=0)
    create = _record(
        1,
        catalog=(
            CreateNamespace("ns"),
            CreateTable("ns.t", table_id="id1", path="ns/t"),
        ),
    )
    s1 = apply(s0, create, Outcome(1, "t1", "committed", {"id1": 0}, 5))
    assert s0.tables == {} and s0.version == 0
    assert s1.table_names() == ["ns.t"] and s1.table_versions == {"id1": 0}
    s2 = apply(s1, _record(2, catalog=(DropTable("ns.t", table_id="id1"),)), Outcome(2, "t1", "aborted"))
    assert s2.version == 2 and s2.table_names() == ["ns.t"]
    with pytest.raises(CorruptLogError):
        apply(s1, _record(5), Outcome(5, "t1", "committed"))


def test_checkpoints_are_written_and_used(tmp_path: object) -> None:
    uri = f"file://{tmp_path}"
    lake = txlake.connect(uri, checkpoint_interval=4)
    lake.create_table("c.t", ACCOUNTS)
    for i in range(9):
        with lake.transaction() as tx:
            tx.append("c.t", accounts([i], [i]))
    glog = lake.context.glog
    assert {4, 8} <= glog.list().checkpoints
    fresh = txlake.connect(uri)
    counters = fresh.store.counters
    before = counters.snapshot()
    state = fresh.context.glog.tail().state
    used = counters.snapshot() - before
    assert state == lake.snapshot().state
    # hint + checkpoint + each record/outcome after it + one probe of the next version (absent)
    assert used.get <= 3 + 2 * (state.version - 8)
    assert used.list <= 1
    assert rows(fresh.read_arrow("c.t")) == [(i, i) for i in range(9)]
    # an old version before the newest checkpoint is still reachable
    assert fresh.snapshot(3).tables() == ["c.t"]


def test_corrupt_record_is_a_typed_error(tmp_path: object) -> None:
    lake = txlake.connect(f"file://{tmp_path}")
    lake.create_table("c.t", ACCOUNTS)
    lake.store.put(GlobalLog.record_path(2), b'{"version": 2, "txid"')
    with pytest.raises(CorruptLogError) as err:
        txlake.connect(f"file://{tmp_path}").version()
    assert err.value.version == 2


def test_outcome_is_put_once(tmp_path: object) -> None:
    lake = txlake.connect(f"file://{tmp_path}")
    glog = lake.context.glog
    first = glog.decide(Outcome(0, "init", "committed"))  # version 0 is decided at connect
    assert first.committed
    again = GlobalLog(lake.store).decide(Outcome(0, "init", "aborted"))
    assert again.committed and again.txid == "init"  # the first outcome is the outcome
    with pytest.raises(VersionNotFoundError):
        lake.snapshot(42)


def test_a_lost_record_is_reported_not_filled(tmp_path: Path) -> None:
    """A record deleted outside txlake (its outcome left behind): the next writer refuses to claim that version
    instead of taking another transaction's outcome for its own."""
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    lake.create_table("t.a", "id long")
    with lake.transaction() as tx:
        tx.append("t.a", pa.table({"id": [1]}))
    version = lake.version()
    (root / "_txlake" / "log" / f"{version:020d}.json").unlink()
    fresh = txlake.connect(root.as_uri())
    with pytest.raises(txlake.CorruptLogError, match="outcome but no record"), fresh.transaction() as tx:
        tx.append("t.a", pa.table({"id": [2]}))
    assert not (root / "_txlake" / "log" / f"{version:020d}.json").exists()


def test_a_version_beyond_the_latest_is_named_as_such(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    with pytest.raises(txlake.VersionNotFoundError, match=r"no lakehouse version 99 \(the latest is 0\)"):
        lake.snapshot(99)


def test_a_lost_newest_record_and_outcome_never_half_commit_their_transaction(tmp_path: Path) -> None:
    """Both log entries of the newest version deleted outside txlake: its Delta commits are txlake's, not a plain
    writer's, so the next writer refuses to adopt them (one table's half of the transaction)."""
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    lake.create_table("t.a", "id long")
    lake.create_table("t.b", "id long")
    with lake.transaction() as tx:
        tx.append("t.a", pa.table({"id": [1]}))
        tx.append("t.b", pa.table({"id": [1]}))
    version = lake.version()
    for name in (f"{version:020d}.json", f"{version:020d}.outcome.json"):
        (root / "_txlake" / "log" / name).unlink()
    fresh = txlake.connect(root.as_uri())
    with pytest.raises(txlake.CorruptLogError, match="lost entries"), fresh.transaction() as tx:
        tx.append("t.a", pa.table({"id": [2]}))
    assert fresh.read_arrow("t.a").num_rows == 0 and fresh.read_arrow("t.b").num_rows == 0


def test_a_lost_version_0_is_a_corrupt_log_never_a_new_lakehouse(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    lake.create_table("a.b", "id long")
    (root / "_txlake" / "log" / f"{0:020d}.json").unlink()
    with pytest.raises(txlake.CorruptLogError, match="lost version 0"):
        txlake.connect(root.as_uri()).tables()
    assert not (root / "_txlake" / "log" / f"{0:020d}.json").exists()  # nothing written over it
