"""Redo: a data conflict re-executes only the conflicting table's statements on the newer snapshot.

A transaction whose statements read only their own table (and literals or sources passed in) does not fail
when a concurrent commit changed what one of them read or rewrote: its commit discards that table's staged
files, runs the table's statements again on the newest decided version, validates again and commits. Its
other tables keep the files they staged. After a data read (``read_arrow``, ``read``) it never redoes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation
from txlake.errors import ConflictError

TABLES = [f"app.t{i}" for i in range(10)]


def _lake(location: StoreLocation) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("app.acct", "k bigint, v bigint")
    for name in TABLES:
        lake.create_table(name, "id bigint")
    with lake.transaction() as tx:
        tx.append("app.acct", pa.table({"k": [1, 2], "v": [100, 200]}))
    return lake


def _v(lake: txlake.Lakehouse, k: int) -> int:
    return int(lake.read_arrow("app.acct", where=f"k = {k}")["v"][0].as_py())


def _staged(tx: txlake.Transaction) -> dict[str, set[str]]:
    return {w.entry.name: set(w.added) for w in tx._work.values()}


def _ten_appends_and_an_update(lake: txlake.Lakehouse, **options: object) -> txlake.Transaction:
    tx = lake.transaction(**options)  # type: ignore[arg-type]
    for i, name in enumerate(TABLES):
        tx.append(name, pa.table({"id": [i]}))
    assert tx.update("app.acct", {"v": "v + 1"}, "k = 1") == 1
    return tx


@pytest.mark.parametrize("isolation", ["serializable", "write_serializable", "snapshot"])
def test_only_the_conflicting_update_is_redone(any_store_uri: StoreLocation, isolation: str) -> None:
    lake = _lake(any_store_uri)
    control = _ten_appends_and_an_update(lake, isolation=isolation)  # the same shape, no conflict: its requests
    control.wait_for_uploads()  # (the commit alone is measured)
    with lake.store.counters.measure() as plain:
        control.commit()
    tx = _ten_appends_and_an_update(lake, isolation=isolation)
    before = _staged(tx)
    with lake.transaction() as other:  # commits first: rewrites the file tx's update rewrote
        other.update("app.acct", {"v": "v + 10"}, "k = 1")
    tx.wait_for_uploads()
    with lake.store.counters.measure() as redone:
        result = tx.commit()
    assert result.redone == 1
    after = {w.entry.name: set(w.added) for w in tx._work.values()}
    assert all(after[name] == before[name] for name in TABLES)  # the ten appends kept their files
    assert after["app.acct"].isdisjoint(before["app.acct"])  # the update wrote its file again
    # one data file written again and the superseded one deleted; every log request as without the conflict
    assert redone.counts.put - plain.counts.put == 1 and redone.counts.delete - plain.counts.delete == 1
    assert _v(lake, 1) == 100 + 1 + 10 + 1 and _v(lake, 2) == 200  # as if run after the other one
    assert sorted(lake.read_arrow("app.t3")["id"].to_pylist()) == [3, 3]


def test_no_redo_after_a_read_or_when_turned_off(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    reader = lake.transaction()
    seen = reader.read_arrow("app.acct", where="k = 1")["v"][0].as_py()
    reader.update("app.acct", {"v": f"{seen} + 1"}, "k = 1")  # a value computed from a read: redo would be wrong
    off = lake.transaction(redo=False)
    off.update("app.acct", {"v": "v + 1"}, "k = 1")
    with lake.transaction() as other:
        other.update("app.acct", {"v": "v + 10"}, "k = 1")
    for tx in (reader, off):
        with pytest.raises(txlake.ConcurrentDeleteDeleteError):
            tx.commit()
        assert tx.status == "aborted"
    assert _v(lake, 1) == 110
    with pytest.raises(txlake.InvalidArgumentTypeError):
        lake.transaction(redo="yes")  # type: ignore[arg-type]


def test_redo_of_delete_merge_and_appends_on_one_table(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    tx = lake.transaction()
    tx.append("app.acct", pa.table({"k": [3], "v": [300]}))
    appended = set(_staged(tx)["app.acct"])
    tx.delete("app.acct", "k = 2")
    source = pa.table({"k": [1, 4], "v": [5, 400]})
    tx.merge("app.acct", source, "t.k = s.k", when_matched_update={"v": "t.v + s.v"}, when_not_matched_insert="*")
    with lake.transaction() as other:  # touches both rows tx's statements read
        other.update("app.acct", {"v": "v * 2"}, "k IN (1, 2)")
    result = tx.commit()
    assert result.redone == 2  # the delete and the merge ran again; the append (it read nothing) kept its file
    kept = {m.path.rsplit("/", 1)[-1] for m in lake.store.list("")}
    assert {p.rsplit("/", 1)[-1] for p in appended} <= kept
    rows = lake.read_arrow("app.acct")
    assert sorted(zip(rows["k"].to_pylist(), rows["v"].to_pylist(), strict=True)) == [
        (1, 205),
        (3, 300),
        (4, 400),
    ]


def test_a_redo_that_fails_leaves_nothing(tmp_path: Path) -> None:
    """The statement redone meets data it cannot handle (here an overflow on the newer value): the commit
    fails with that statement's error, and no file of the transaction stays."""
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    tx = lake.transaction()
    tx.append("app.t0", pa.table({"id": [7]}))
    tx.update("app.acct", {"v": "v + 9223372036854775000"}, "k = 2")  # 200 + that still fits in a bigint
    with lake.transaction() as other:
        other.update("app.acct", {"v": "v + 1000"}, "k = 2")  # now it overflows
    with pytest.raises(txlake.PredicateError, match="overflow"):
        tx.commit()
    assert tx.status == "aborted"
    assert [m.path for m in lake.store.list("") if tx.txid in m.path] == []
    assert _v(lake, 2) == 1200 and lake.read_arrow("app.t0").num_rows == 0


@pytest.mark.parametrize("isolation", ["serializable", "snapshot"])
def test_hot_row_increments_commit_without_aborts(tmp_path: Path, isolation: str) -> None:
    """8 threads incrementing the same row: with redo no increment is lost and none fails."""
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    errors: list[BaseException] = []
    redone: list[int] = []

    def work() -> None:
        try:
            for _ in range(5):
                with lake.transaction(isolation) as tx:  # type: ignore[arg-type]
                    tx.update("app.acct", {"v": "v + 1"}, "k = 1")
                    tx.append("app.t0", pa.table({"id": [1]}))
                assert tx.result is not None
                redone.append(tx.result.redone)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _v(lake, 1) == 100 + 40 and lake.read_arrow("app.t0").num_rows == 40
    assert sum(redone) > 0  # they did race


def test_conflicts_redo_cannot_fix_are_raised(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    tx = lake.transaction()
    tx.update("app.acct", {"v": "v + 1"}, "k = 1")
    lake.run(lambda t: t.alter_table("app.acct", add_columns="note string"))
    with pytest.raises(ConflictError) as caught:
        tx.commit()
    assert isinstance(caught.value, txlake.MetadataChangedError)


# --------------------------------------------------------------------------- statement by statement


def _files_lake(location: StoreLocation) -> txlake.Lakehouse:
    """``app.big``: keys 0..99 in ten files of ten consecutive keys (statistics keep the files apart)."""
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("app.big", "k bigint, v bigint")
    with lake.transaction() as tx:
        for first in range(0, 100, 10):
            tx.append("app.big", pa.table({"k": list(range(first, first + 10)), "v": [0] * 10}))
    return lake


def _big(lake: txlake.Lakehouse) -> dict[int, int]:
    rows = lake.read_arrow("app.big")
    return dict(zip(rows["k"].to_pylist(), rows["v"].to_pylist(), strict=True))


def test_only_the_statements_that_read_a_changed_file_run_again(any_store_uri: StoreLocation) -> None:
    """Five updates of one table, each in its own file; a concurrent commit rewrites one of those files: the
    redo runs that one update again (one data file written again) and keeps the four others' files."""
    lake = _files_lake(any_store_uri)
    tx = lake.transaction()
    for k in (5, 15, 25, 35, 45):
        assert tx.update("app.big", {"v": "v + 1"}, f"k = {k}") == 1
    before = _staged(tx)["app.big"]
    with lake.transaction() as other:
        other.update("app.big", {"v": "v + 10"}, "k = 26")  # the file of keys 20..29
    tx.wait_for_uploads()  # (the commit alone is measured)
    with lake.store.counters.measure() as redo:
        result = tx.commit()
    assert result.redone == 1
    after = {w.entry.name: set(w.added) for w in tx._work.values()}["app.big"]
    assert len(before - after) == 1 and len(after - before) == 1  # one file replaced, four kept
    expected = {k: 0 for k in range(100)} | {5: 1, 15: 1, 25: 1, 35: 1, 45: 1, 26: 10}
    assert _big(lake) == expected
    control = lake.transaction()  # the same commit without a conflict: one data file less
    for k in (5, 15, 25, 35, 45):
        control.update("app.big", {"v": "v + 1"}, f"k = {k}")
    control.wait_for_uploads()
    with lake.store.counters.measure() as plain:
        control.commit()
    assert redo.counts.put - plain.counts.put == 1


def test_a_statement_that_read_a_redone_statements_file_runs_again(tmp_path: Path) -> None:
    """The second update reads the file the first one wrote; the first one conflicts: both run again, in order,
    and the result is as if the transaction ran after the concurrent one."""
    lake = _files_lake(StoreLocation(tmp_path.as_uri(), {}))
    tx = lake.transaction()
    tx.update("app.big", {"v": "v + 1"}, "k = 1")
    tx.update("app.big", {"v": "v * 3"}, "k IN (1, 2)")  # reads the first update's file
    tx.update("app.big", {"v": "v + 5"}, "k = 95")  # another file: kept
    with lake.transaction() as other:
        other.update("app.big", {"v": "v + 100"}, "k = 2")
    assert tx.commit().redone == 2
    assert _big(lake) == {k: 0 for k in range(100)} | {1: 3, 2: 300, 95: 5}


def test_a_statement_whose_condition_matches_a_new_file_runs_again(tmp_path: Path) -> None:
    """A concurrent append of a row the update's condition matches (a write-serializable conflict): the update
    runs again and updates that row too; an update of a key the new file cannot hold keeps its file."""
    lake = _files_lake(StoreLocation(tmp_path.as_uri(), {}))
    tx = lake.transaction(isolation="write_serializable")
    tx.update("app.big", {"v": "v + 1"}, "k >= 50 AND k < 60")
    tx.update("app.big", {"v": "v + 7"}, "k = 3")
    with lake.transaction() as other:
        other.append("app.big", pa.table({"k": [55], "v": [1000]}))
    assert tx.commit().redone == 1
    rows = lake.read_arrow("app.big", where="k = 55")["v"].to_pylist()
    assert sorted(rows) == [1, 1001]
    assert _big(lake)[3] == 7


def test_a_statement_run_again_that_writes_other_rows_makes_later_ones_run_again(tmp_path: Path) -> None:
    """The first update moves a key by a value another commit changed: run again, its new file holds a key the
    third statement's condition matches, which the first run's file did not; the third runs again too."""
    lake = _files_lake(StoreLocation(tmp_path.as_uri(), {}))
    lake.run(lambda t: t.update("app.big", {"v": "-1000"}, "k = 4"))
    tx = lake.transaction()
    tx.update("app.big", {"k": "v"}, "k = 4")  # moves key 4 to -1000 (after the other commit, to -2000)
    tx.update("app.big", {"v": "v + 1"}, "k = 70")
    tx.update("app.big", {"v": "1"}, "k = -2000")  # matches nothing in the first run
    with lake.transaction() as other:
        other.update("app.big", {"v": "-2000"}, "k = 4")
    assert tx.commit().redone == 2  # the first and the third; the second (another file) kept its file
    rows = _big(lake)
    assert 4 not in rows and rows[-2000] == 1 and rows[70] == 1


def _three_rows(tmp_path: Path) -> txlake.Lakehouse:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("a.t", "k bigint, v bigint")
    with lake.transaction() as tx:  # three files
        tx.append("a.t", pa.table({"k": [1], "v": [1]}))
        tx.append("a.t", pa.table({"k": [2], "v": [9223372036854775000]}))
        tx.append("a.t", pa.table({"k": [3], "v": [3]}))
    return lake


def _rows(lake: txlake.Lakehouse) -> list[tuple[int, int]]:
    return sorted((r["k"], r["v"]) for r in lake.read_arrow("a.t").to_pylist())


@pytest.mark.parametrize("conflict", [False, True])
def test_a_statement_that_fails_part_way_leaves_no_effect(tmp_path: Path, conflict: bool) -> None:
    """An update rewrites the first file, then overflows on the second: the application catches the error and
    goes on. Nothing of the failed update stays (with or without a redo later), and its file is deleted."""
    lake = _three_rows(tmp_path)
    tx = lake.transaction()
    with pytest.raises(txlake.PredicateError, match="overflow"):
        tx.update("a.t", {"v": "v + 1000"}, "k <= 2")
    assert tx.update("a.t", {"v": "v + 1"}, "v = 1") == 1  # sees k = 1 as it was: the failed update undone
    tx.update("a.t", {"v": "v + 1"}, "k = 3")
    if conflict:
        with lake.transaction() as other:
            other.update("a.t", {"v": "v + 5"}, "k = 3")  # conflicts with the last statement only
    result = tx.commit()
    assert result.redone == (1 if conflict else 0)
    assert _rows(lake) == [(1, 2), (2, 9223372036854775000), (3, 9 if conflict else 4)]
    # the two updates' files, and not the failed update's nor a redone statement's first file
    written = [m.path for m in lake.store.list("") if tx.txid in m.path and m.path.endswith(".parquet")]
    assert len(written) == 2


def test_a_redo_that_keeps_every_statement_still_checks_a_new_protocol(tmp_path: Path) -> None:
    """A conflict whose changes are gone again by the time of the redo, and meanwhile the table got a CHECK
    constraint from a plain Delta writer, adopted (a feature txlake cannot enforce): the statements must be
    checked against the new table, not kept as they were, so the commit is refused as the statement alone
    would be."""
    lake = _three_rows(tmp_path)
    tx = lake.transaction()
    tx.update("a.t", {"v": "-1"}, "k = 3")
    tx.update("a.t", {"v": "v + 1"}, "k = 5")  # matches nothing now
    with lake.transaction() as other:  # a row the second update matches: a data conflict
        other.append("a.t", pa.table({"k": [5], "v": [500]}))
    with lake.transaction() as other:
        other.delete("a.t", "k = 5")
    deltalake = pytest.importorskip("deltalake")
    deltalake.DeltaTable(lake.table_location("a.t")).alter.add_constraint({"pos": "v > 0"})  # a plain writer
    lake.run(lambda t: t.adopt("a.t"))
    with pytest.raises(txlake.UnsupportedFeatureError, match="CHECK constraints"):
        tx.commit()
    assert tx.status == "aborted"
    assert _rows(lake) == [(1, 1), (2, 9223372036854775000), (3, 3)]


def test_files_replaced_within_a_read_only_commit_are_deleted(tmp_path: Path) -> None:
    lake = _three_rows(tmp_path)
    tx = lake.transaction()
    tx.append("a.t", pa.table({"k": [7], "v": [7]}))
    tx.delete("a.t", "k = 7")
    assert tx.commit().read_only
    assert [m.path for m in lake.store.list("") if tx.txid in m.path] == []
