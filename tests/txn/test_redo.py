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
    with lake.store.counters.measure() as plain:
        control.commit()
    tx = _ten_appends_and_an_update(lake, isolation=isolation)
    before = _staged(tx)
    with lake.transaction() as other:  # commits first: rewrites the file tx's update rewrote
        other.update("app.acct", {"v": "v + 10"}, "k = 1")
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
    tx.delete("app.acct", "k = 2")
    source = pa.table({"k": [1, 4], "v": [5, 400]})
    tx.merge("app.acct", source, "t.k = s.k", when_matched_update={"v": "t.v + s.v"}, when_not_matched_insert="*")
    with lake.transaction() as other:  # touches both rows tx's statements read
        other.update("app.acct", {"v": "v * 2"}, "k IN (1, 2)")
    result = tx.commit()
    assert result.redone == 3
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
