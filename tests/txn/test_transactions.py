"""Transactions through the public API: multi-statement, multi-table, catalog, bad input, on every backend."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.delta import DeltaTable
from txlake.delta.actions import CommitInfo
from txlake.errors import (
    ConcurrentTransactionError,
    PredicateError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionClosedError,
    VersionNotFoundError,
)


def delta_table(lake: txlake.Lakehouse, name: str) -> DeltaTable:
    log = lake.delta_log(name)
    return DeltaTable(lake.store, log.path, name=name)


def test_connect_initializes_version_zero(lake: txlake.Lakehouse) -> None:
    assert lake.version() == 0
    assert lake.tables() == []
    again = txlake.connect(lake.uri, lake.store.storage_options)
    assert again.version() == 0


def test_connect_without_create_on_empty_location(tmp_path: object) -> None:
    with pytest.raises(VersionNotFoundError):
        txlake.connect(f"file://{tmp_path}/nothing", create=False)


def test_create_append_read(lake: txlake.Lakehouse) -> None:
    lake.create_table("bank.accounts", ACCOUNTS)
    assert lake.tables() == ["bank.accounts"]
    assert lake.namespaces() == ["bank"]
    with lake.transaction() as tx:
        tx.append("bank.accounts", accounts([1, 2, 3], [10, 20, 30]))
    assert rows(lake.read_arrow("bank.accounts")) == [(1, 10), (2, 20), (3, 30)]
    assert rows(lake.read_arrow("bank.accounts", where="id >= 2", columns=["id"])) == [(2,), (3,)]
    assert lake.version() == 2
    snap = delta_table(lake, "bank.accounts").snapshot()
    assert snap.version == 1
    info = next(a for a in delta_table(lake, "bank.accounts").log.read_commit(1) if isinstance(a, CommitInfo))
    assert info.txlake is not None and info.txlake["globalVersion"] == 2


def test_multi_statement_read_your_writes(lake: txlake.Lakehouse) -> None:
    lake.create_table("bank.a", ACCOUNTS)
    lake.create_table("bank.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("bank.a", accounts([1, 2], [100, 200]))
        tx.append("bank.b", accounts([1], [0]))
        assert rows(tx.read_arrow("bank.a")) == [(1, 100), (2, 200)]
        assert tx.update("bank.a", set={"balance": "balance - 40"}, where="id = 1") == 1
        assert tx.update("bank.b", set={"balance": "balance + 40"}, where="id = 1") == 1
        assert rows(tx.read_arrow("bank.a", where="id = 1")) == [(1, 60)]
        assert tx.delete("bank.a", where="id = 2") == 1
        assert rows(tx.read_arrow("bank.a")) == [(1, 60)]
        # nothing is visible outside before commit
        assert lake.read_arrow("bank.a").num_rows == 0
    assert rows(lake.read_arrow("bank.a")) == [(1, 60)]
    assert rows(lake.read_arrow("bank.b")) == [(1, 40)]
    # own staged files that were rewritten inside the transaction are never published
    live = delta_table(lake, "bank.a").snapshot().files
    assert len(live) == 1


def test_update_delete_overwrite_across_commits(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.t", accounts([1, 2, 3, 4], [1, 2, 3, 4]))
    with lake.transaction() as tx:
        assert tx.delete("s.t", where="balance > 2") == 2
    assert rows(lake.read_arrow("s.t")) == [(1, 1), (2, 2)]
    with lake.transaction() as tx:
        assert tx.update("s.t", set={"balance": "balance * 10"}) == 2
    assert rows(lake.read_arrow("s.t")) == [(1, 10), (2, 20)]
    with lake.transaction() as tx:
        tx.overwrite("s.t", accounts([9], [90]))
    assert rows(lake.read_arrow("s.t")) == [(9, 90)]
    with lake.transaction() as tx:
        tx.append("s.t", accounts([1, 2], [1, 2]))
        tx.overwrite("s.t", accounts([2], [200]), where="id = 2")
    assert rows(lake.read_arrow("s.t")) == [(1, 1), (2, 200), (9, 90)]
    with lake.transaction() as tx, pytest.raises(PredicateError):
        tx.overwrite("s.t", accounts([3], [3]), where="id = 2")


def test_exception_in_block_aborts_and_cleans_up(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    before = {m.path for m in lake.store.list("s/t")}
    with pytest.raises(RuntimeError), lake.transaction() as tx:
        tx.append("s.t", accounts([1], [1]))
        raise RuntimeError("boom")
    assert tx.status == "aborted"
    assert lake.read_arrow("s.t").num_rows == 0
    assert {m.path for m in lake.store.list("s/t")} == before  # staged files deleted
    with pytest.raises(TransactionClosedError):
        tx.append("s.t", accounts([1], [1]))


def test_an_abort_deletes_its_staged_files_in_bulk(lake: txlake.Lakehouse) -> None:
    """An aborted transaction deletes what it staged with one bulk DELETE per table, not one per file: on S3 each
    request is a round trip, and a retried transaction waits for them (``lake.run`` aborts before it retries)."""
    from txlake.bench.commit import RequestRecorder
    from txlake.storage import FaultInjector

    names = ["s.a", "s.b"]
    for name in names:
        lake.create_table(name, ACCOUNTS)
    before = {m.path for m in lake.store.list("s")}
    recorder = RequestRecorder()
    with pytest.raises(RuntimeError), lake.transaction() as tx:
        for i in range(10):
            for name in names:
                tx.append(name, accounts([i], [i]))
        lake.store.faults = recorder  # from here: the abort
        raise RuntimeError("boom")
    lake.store.faults = FaultInjector()
    assert tx.status == "aborted"
    assert {m.path for m in lake.store.list("s")} == before  # all 20 staged files gone
    assert recorder.take()[("DELETE", "data file")] == len(names)


def test_finished_transaction_cannot_be_reused(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    tx = lake.transaction()
    tx.append("s.t", accounts([1], [1]))
    tx.commit()
    for call in (lambda: tx.commit(), lambda: tx.abort(), lambda: tx.read_arrow("s.t")):
        with pytest.raises(TransactionClosedError):
            call()


def test_read_only_transaction_never_claims(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    v = lake.version()
    with lake.transaction() as tx:
        tx.read_arrow("s.t")
    assert tx.result is not None and tx.result.read_only
    assert lake.version() == v


def test_catalog_is_transactional_with_data(lake: txlake.Lakehouse) -> None:
    with lake.transaction() as tx:
        tx.create_table("shop.orders", ACCOUNTS, partition_by=["id"])
        tx.append("shop.orders", accounts([1, 2], [5, 6]))
        assert tx.tables() == ["shop.orders"]
        assert lake.tables() == []
    assert lake.tables() == ["shop.orders"]
    assert rows(lake.read_arrow("shop.orders")) == [(1, 5), (2, 6)]
    # Delta version 0 holds the schema and the first rows together
    assert delta_table(lake, "shop.orders").snapshot().version == 0

    # a failed transaction leaves no table behind
    with pytest.raises(RuntimeError), lake.transaction() as tx:
        tx.create_table("shop.returns", ACCOUNTS)
        tx.append("shop.returns", accounts([1], [1]))
        raise RuntimeError("boom")
    assert lake.tables() == ["shop.orders"]
    assert not lake.store.list("shop/returns")


def test_rename_drop_recreate_and_time_travel(lake: txlake.Lakehouse) -> None:
    lake.create_table("a.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("a.t", accounts([1], [1]))
    v_before = lake.version()
    location = lake.table_location("a.t")
    lake.rename_table("a.t", "b.t")
    assert lake.tables() == ["b.t"]
    assert lake.table_location("b.t") == location
    lake.drop_table("b.t")
    assert lake.tables() == []
    with pytest.raises(TableNotFoundError):
        lake.read_arrow("b.t")
    lake.create_table("a.t", ACCOUNTS)
    assert lake.table_location("a.t") != location  # the dropped table's files stay where they were
    assert lake.read_arrow("a.t").num_rows == 0
    old = lake.snapshot(v_before)
    assert old.tables() == ["a.t"]
    assert rows(old.read_arrow("a.t")) == [(1, 1)]
    with pytest.raises(VersionNotFoundError):
        lake.snapshot(lake.version() + 5)


def test_a_namespace_is_dropped_by_its_name_in_any_case(lake: txlake.Lakehouse) -> None:
    """Names are case-insensitive: ``drop_namespace("meta")`` drops ``Meta`` (it used to succeed and drop
    nothing), and a new ``META`` may then be created."""
    lake.create_namespace("Meta", {"owner": "dan"})
    lake.drop_namespace("meta")
    assert lake.namespaces() == []
    lake.create_namespace("META")
    assert lake.namespaces() == ["META"]


def test_catalog_errors(lake: txlake.Lakehouse) -> None:
    lake.create_table("a.t", ACCOUNTS)
    with pytest.raises(TableAlreadyExistsError):
        lake.create_table("a.t", ACCOUNTS)
    lake.create_table("a.t", ACCOUNTS, if_not_exists=True)
    with pytest.raises(ValueError):
        lake.create_table("no_namespace", ACCOUNTS)
    with pytest.raises(TableNotFoundError):
        lake.drop_table("a.missing")
    with pytest.raises(SchemaMismatchError):
        lake.create_table("a.u", ACCOUNTS, partition_by=["nope"])
    with pytest.raises(TypeError):
        lake.create_table("a.v", {"id": "long"})  # type: ignore[arg-type]


def test_bad_input_is_typed_and_leaks_nothing(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    with lake.transaction() as tx:
        with pytest.raises(TableNotFoundError):
            tx.append("s.nope", accounts([1], [1]))
        with pytest.raises(SchemaMismatchError) as err:
            tx.append("s.t", pa.table({"id": [1], "balance": ["lots"]}))
        assert err.value.columns == ("balance",)
        with pytest.raises(SchemaMismatchError):
            tx.append("s.t", pa.table({"id": [1], "balance": [1], "extra": [1]}))
        with pytest.raises(PredicateError):
            tx.delete("s.t", where="id = = 1")
        with pytest.raises(PredicateError):
            tx.update("s.t", set={"balance": "balance +"}, where="id = 1")
        with pytest.raises(PredicateError):
            tx.read_arrow("s.t", where="no_such_column = 1")
        with pytest.raises(TypeError):
            tx.append("s.t", [{"id": 1}])  # type: ignore[arg-type]
        tx.append("s.t", accounts([7], [70]))
    assert rows(lake.read_arrow("s.t")) == [(7, 70)]
    assert len(delta_table(lake, "s.t").snapshot().files) == 1
    with pytest.raises(ValueError):
        lake.transaction(isolation="read_committed")  # type: ignore[arg-type]


def test_int32_data_widens_but_lossy_cast_refused(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    narrow = pa.table({"id": pa.array([1], pa.int32()), "balance": pa.array([5], pa.int32())})
    with lake.transaction() as tx:
        tx.append("s.t", narrow)
    assert rows(lake.read_arrow("s.t")) == [(1, 5)]
    with lake.transaction() as tx, pytest.raises(SchemaMismatchError):
        tx.append("s.t", pa.table({"id": [1.5], "balance": [1]}))


def test_write_to_table_dropped_concurrently(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.t", ACCOUNTS)
    tx = lake.transaction()
    tx.append("s.t", accounts([1], [1]))
    lake.drop_table("s.t")
    with pytest.raises(ConcurrentTransactionError) as err:
        tx.commit()
    assert err.value.table == "s.t"
    assert tx.status == "aborted"


def test_concurrent_create_of_same_table(lake: txlake.Lakehouse) -> None:
    t1 = lake.transaction()
    t2 = lake.transaction()
    t1.create_table("s.t", ACCOUNTS)
    t2.create_table("s.t", ACCOUNTS)
    t1.append("s.t", accounts([1], [1]))
    t2.append("s.t", accounts([2], [2]))
    t1.commit()
    with pytest.raises(ConcurrentTransactionError):
        t2.commit()
    assert rows(lake.read_arrow("s.t")) == [(1, 1)]


def test_snapshot_is_consistent_view(lake: txlake.Lakehouse) -> None:
    lake.create_table("s.a", ACCOUNTS)
    lake.create_table("s.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("s.a", accounts([1], [1]))
        tx.append("s.b", accounts([1], [1]))
    snap = lake.snapshot()
    with lake.transaction() as tx:
        tx.update("s.a", set={"balance": "2"})
        tx.update("s.b", set={"balance": "2"})
    assert rows(snap.read_arrow("s.a")) == [(1, 1)]
    assert rows(snap.read_arrow("s.b")) == [(1, 1)]
    assert rows(lake.snapshot().read_arrow("s.b")) == [(1, 2)]
    assert snap.table_version("s.a") == 1


def test_merge_statements(lake: txlake.Lakehouse) -> None:
    lake.create_table("m.t", ACCOUNTS)
    with lake.transaction() as tx:  # merge into an empty table inserts everything
        metrics = tx.merge("m.t", accounts([1, 2, 3], [10, 20, 30]), on="t.id = s.id", when_not_matched_insert="*")
    assert metrics == txlake.MergeMetrics(0, 0, 3)
    with lake.transaction() as tx:
        metrics = tx.merge(
            "m.t",
            accounts([2, 3, 4], [200, -1, 400]),
            on="t.id = s.id",
            when_matched_update={"balance": "s.balance"},
            when_matched_delete="s.balance < 0",
            when_not_matched_insert="*",
        )
    assert metrics == txlake.MergeMetrics(1, 1, 1)
    assert rows(lake.read_arrow("m.t")) == [(1, 10), (2, 200), (4, 400)]
    with lake.transaction() as tx, pytest.raises(txlake.TxlakeError):
        tx.merge("m.t", accounts([2, 2], [1, 2]), on="t.id = s.id", when_matched_update="*")


def test_connect_without_create_leaves_no_directory(tmp_path: object) -> None:
    missing = f"{tmp_path}/not-here"
    with pytest.raises(VersionNotFoundError):
        txlake.connect(f"file://{missing}", create=False)
    assert not os.path.exists(missing)


def test_timestamp_ntz_table_is_readable_by_deltars(tmp_path: object) -> None:
    deltalake = pytest.importorskip("deltalake")
    lake = txlake.connect(f"file://{tmp_path}")
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("us"))])
    with lake.transaction() as tx:
        tx.create_table("n.t", schema)
        tx.append("n.t", pa.table({"id": [1], "at": pa.array([0], pa.timestamp("us"))}))
    dt = deltalake.DeltaTable(lake.table_location("n.t"))
    assert "timestampNtz" in (dt.protocol().writer_features or [])


def test_a_committer_reads_none_of_the_delta_commits_it_wrote(lake: txlake.Lakehouse) -> None:
    """A committed version's Delta commits are its record's changes: the claimer caches them as the members do.
    Its commit phase makes one HEAD and one PUT per table (and the record and outcome PUTs), no GET; its next
    transaction on those tables reads none of them either."""
    from txlake.bench.commit import RequestRecorder
    from txlake.storage import FaultInjector

    names = [f"k.t{i}" for i in range(4)]
    with lake.transaction() as tx:
        for name in names:
            tx.create_table(name, ACCOUNTS)
    seen = []
    for round_ in range(3):
        with lake.transaction() as tx:
            for i, name in enumerate(names):
                tx.append(name, accounts([10 * round_ + i], [round_]))
            recorder = RequestRecorder()
            lake.store.faults = recorder  # the commit phase only
        lake.store.faults = FaultInjector()
        seen.append(recorder.take())
    for counts in seen:
        assert counts[("GET", "delta commit")] == 0, counts
        assert counts[("HEAD", "delta commit")] == len(names)
        assert counts[("PUT", "delta commit")] == len(names)
        assert counts[("PUT", "global record")] == counts[("PUT", "global outcome")] == 1
    recorder = RequestRecorder()
    lake.store.faults = recorder
    with lake.transaction() as tx:  # a whole transaction: BEGIN, statements and commit
        for name in names:
            tx.append(name, accounts([99], [9]))
    lake.store.faults = FaultInjector()
    assert recorder.take()[("GET", "delta commit")] == 0
    fresh = txlake.connect(lake.uri, lake.store.storage_options)
    for i, name in enumerate(names):
        assert rows(fresh.snapshot().read_arrow(name)) == [(i, 0), (10 + i, 1), (20 + i, 2), (99, 9)]
        cached, loaded = lake.snapshot().delta_snapshot(name), fresh.snapshot().delta_snapshot(name)
        assert cached.version == loaded.version and cached.files == loaded.files  # the cache is the log
        assert rows(lake.snapshot().read_arrow(name)) == rows(fresh.snapshot().read_arrow(name))


def test_a_client_reads_none_of_the_delta_commits_others_committed_through_the_lakehouse(
    lake: txlake.Lakehouse,
) -> None:
    """Another client's committed versions hold their Delta commits in their records, which a client reads
    walking the log anyway: its next snapshots of those tables GET none of them. A plain writer's commit,
    adopted by one of those versions, is not in any record and is read. The snapshots equal a cold load."""
    from txlake.bench.commit import RequestRecorder
    from txlake.storage import FaultInjector

    names = ["o.t0", "o.t1"]
    for name in names:
        lake.create_table(name, ACCOUNTS)
    other = txlake.connect(lake.uri, lake.store.storage_options)
    for name in names:
        other.read_arrow(name)  # its snapshots of the tables as they are now
    with lake.transaction() as tx:
        for i, name in enumerate(names):
            tx.append(name, accounts([i, 10 + i], [1, 1]))
    with lake.transaction() as tx:
        tx.update("o.t0", {"balance": "balance + 1"}, where="id = 0")
        tx.delete("o.t1", where="id = 11")
    plain = lake.uri.startswith("file://")  # a delta-rs writer too (on local disk)
    if plain:
        pytest.importorskip("deltalake").write_deltalake(
            lake.table_location("o.t1"), accounts([50], [5]), mode="append"
        )
        with lake.transaction() as tx:  # adopts the plain commit before its own
            tx.append("o.t1", accounts([60], [6]))
    recorder = RequestRecorder()
    other.store.faults = recorder
    seen = {name: rows(other.read_arrow(name)) for name in names}
    other.store.faults = FaultInjector()
    assert recorder.take()[("GET", "delta commit")] == (1 if plain else 0)
    assert seen == {
        "o.t0": [(0, 2), (10, 1)],
        "o.t1": [(1, 1), (50, 5), (60, 6)] if plain else [(1, 1)],
    }
    cold = txlake.connect(lake.uri, lake.store.storage_options)
    for name in names:
        cached, loaded = other.snapshot().delta_snapshot(name), cold.snapshot().delta_snapshot(name)
        assert (cached.version, cached.files) == (loaded.version, loaded.files)


@pytest.mark.parametrize("writer", ["txlake", "delta-rs"])
def test_a_new_table_at_a_dropped_tables_path_gets_none_of_its_cached_commits(tmp_path: Path, writer: str) -> None:
    """Vacuum removes a dropped table's directory whole; a table created later under the same name gets the same
    path and Delta versions from 0 again. Clients that cached the old table's commits (one walked past them as
    they were written, one by time travel later) must not build the new table's snapshots from them: the cache is
    keyed by table id too. Until 2026-11-29 they returned the old table's rows or failed on its deleted files."""
    uri = tmp_path.as_uri()
    writer_lake, early = txlake.connect(uri), txlake.connect(uri)
    writer_lake.create_table("ns.t", ACCOUNTS)
    with writer_lake.transaction() as tx:
        tx.append("ns.t", accounts([100, 101], [9, 9]))
    with writer_lake.transaction() as tx:
        tx.delete("ns.t", where="id = 100")  # Delta version 2 removes a file and adds one
    before_drop = writer_lake.version()
    assert rows(early.read_arrow("ns.t")) == [(101, 9)]
    path = writer_lake.delta_log("ns.t").path
    writer_lake.drop_table("ns.t")
    long_ago = time.time() - 40 * 86400
    for directory, _, files in os.walk(tmp_path / path):
        for name in files:
            os.utime(os.path.join(directory, name), (long_ago, long_ago))
    assert writer_lake.vacuum(timedelta(0), force=True).tables_removed
    writer_lake.create_table("ns.t", ACCOUNTS)
    assert writer_lake.delta_log("ns.t").path == path  # the same path, Delta versions from 0 again
    with writer_lake.transaction() as tx:
        tx.append("ns.t", accounts([1], [1]))
    late = txlake.connect(uri)
    for reader in (early, late):
        assert rows(reader.read_arrow("ns.t")) == [(1, 1)]
    if writer == "txlake":
        with writer_lake.transaction() as tx:
            tx.append("ns.t", accounts([2], [2]))
    else:  # a plain commit at Delta version 2, in no record: adopted by sync
        deltalake = pytest.importorskip("deltalake")
        deltalake.write_deltalake(writer_lake.table_location("ns.t"), accounts([2], [2]), mode="append")
        writer_lake.sync()
    expected = [(1, 1), (2, 2)]
    for reader in (early, late):
        reader.snapshot()  # walks the new versions
        reader.snapshot(version=before_drop)  # then, the late one for the first time, the old table's
        assert rows(reader.read_arrow("ns.t")) == expected
    assert rows(txlake.connect(uri).read_arrow("ns.t")) == expected
