"""Transactions over tables with deletion vectors (copy-on-write): every write works, a rewritten file loses the
rows its DV deleted and is removed by ``(path, DV)``, and a plain writer's DV update conflicts like a rewrite.

The DV tables are set up as Spark leaves them: a plain writer turns the ``deletionVectors`` feature on and deletes
rows with an inline DV (CRoaring's bitmap through pyroaring, see ``tests/txn/conftest.py``). delta-rs (DataFusion)
reads every version txlake writes; ``deltalake`` 1.x itself never writes a DV (its DELETE rewrites files), so the
plain DV updates here are hand-made commits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, delete_with_deletion_vector, rows, update_deletion_vector
from tests.txn.test_plain_writers import TxlakeFaultHook
from txlake.delta import DeltaTable
from txlake.delta.actions import Add, Remove
from txlake.errors import ConcurrentDeleteDeleteError, ConcurrentDeleteReadError, ConflictError

IDS = list(range(10))
DELETED = [2, 5]  # rows (= positions in the one data file) the plain writer's DV deletes
LIVE = [(i, i) for i in IDS if i not in DELETED]


def dv_table(lake: txlake.Lakehouse, name: str = "p.t") -> Add:
    """``name`` with ids 0-9 (balance = id) in one file whose DV deletes ids 2 and 5, adopted; returns its add."""
    lake.create_table(name, ACCOUNTS, if_not_exists=True)
    with lake.transaction() as tx:
        tx.append(name, accounts(IDS, IDS))
    delete_with_deletion_vector(lake, name, DELETED)
    lake.sync()
    (add,) = lake.snapshot().delta_snapshot(name).files.values()
    assert add.deletion_vector is not None and rows(lake.read_arrow(name)) == LIVE
    return add


def deltars_rows(lake: txlake.Lakehouse, name: str, version: int | None = None) -> list[tuple[object, ...]]:
    dt = deltalake.DeltaTable(lake.table_location(name), version=version)
    return rows(pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all()))


def assert_every_version_reads_alike(lake: txlake.Lakehouse, name: str) -> None:
    table = DeltaTable(lake.store, lake.delta_log(name).path)
    latest = table.latest_version()
    assert latest is not None
    for version in range(latest + 1):
        assert rows(table.read_arrow(version)) == deltars_rows(lake, name, version), f"v{version}"


def last_commit(lake: txlake.Lakehouse, name: str) -> tuple[list[Add], list[Remove]]:
    log = lake.delta_log(name)
    latest = log.latest_version()
    assert latest is not None
    actions = log.read_commit(latest)
    return [a for a in actions if isinstance(a, Add)], [a for a in actions if isinstance(a, Remove)]


Write = Callable[[txlake.Transaction], object]
WRITES: dict[str, tuple[Write, list[tuple[int, int]]]] = {
    "delete": (lambda tx: tx.delete("p.t", where="id = 1"), [r for r in LIVE if r[0] != 1]),
    "update": (
        lambda tx: tx.update("p.t", set={"balance": "balance + 100"}, where="id >= 7"),
        [(i, b + 100 if i >= 7 else b) for i, b in LIVE],
    ),
    "merge": (
        lambda tx: tx.merge(
            "p.t",
            accounts([1, 2, 20], [-1, -2, -20]),
            on="t.id = s.id",
            when_matched_update="*",
            when_not_matched_insert="*",
        ),
        sorted([*[(i, -1 if i == 1 else b) for i, b in LIVE], (2, -2), (20, -20)]),
    ),
    "overwrite-where": (
        lambda tx: tx.overwrite("p.t", accounts([3], [33]), where="id = 3"),
        sorted([*[r for r in LIVE if r[0] != 3], (3, 33)]),
    ),
    "optimize": (lambda tx: tx.optimize("p.t", zorder_by=["balance"]), LIVE),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_rewrite_of_a_file_with_a_dv_drops_its_deleted_rows_and_removes_it_by_dv(
    local_lake: txlake.Lakehouse, write: str
) -> None:
    lake = local_lake
    original = dv_table(lake)
    statement, expected = WRITES[write]
    with lake.transaction() as tx:
        statement(tx)
    got = lake.read_arrow("p.t")
    assert rows(got) == expected
    adds, removes = last_commit(lake, "p.t")
    (gone,) = [r for r in removes if r.path == original.path]
    assert gone.deletion_vector == original.deletion_vector  # PROTOCOL.md: the remove names the logical file
    if write == "delete":  # delta.enableDeletionVectors=true: merge-on-read, the file gets a bigger DV
        assert [(a.path, a.deletion_vector and a.deletion_vector.cardinality) for a in adds] == [(original.path, 3)]
    else:
        assert all(a.deletion_vector is None for a in adds)  # copy-on-write: new files, no DVs
    assert lake.snapshot().delta_snapshot("p.t").num_records == len(expected)  # stats count live rows
    assert deltars_rows(lake, "p.t") == rows(got)
    assert_every_version_reads_alike(lake, "p.t")


def test_appends_are_plain_files_and_restore_brings_back_the_logical_file(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    original = dv_table(lake)
    before = lake.version()
    with lake.transaction() as tx:
        tx.append("p.t", accounts([20], [20]))
    adds, removes = last_commit(lake, "p.t")
    assert not removes and [a.deletion_vector for a in adds] == [None]
    (appended,) = adds
    # a plain writer deletes one more row of the original file (a DV update), then the lakehouse is restored
    update_deletion_vector(lake, "p.t", original.path, [*DELETED, 0])
    lake.sync()
    assert rows(lake.read_arrow("p.t")) == sorted([*LIVE[1:], (20, 20)])
    lake.restore(before)
    assert rows(lake.read_arrow("p.t")) == LIVE  # row 0 is back: (path, old DV) re-added, (path, new DV) removed
    adds, removes = last_commit(lake, "p.t")
    assert [(a.path, a.deletion_vector) for a in adds] == [(original.path, original.deletion_vector)]
    cardinalities = {r.path: r.deletion_vector.cardinality if r.deletion_vector else None for r in removes}
    assert cardinalities == {original.path: 3, appended.path: None}
    assert_every_version_reads_alike(lake, "p.t")


# ------------------------------------------------------------------------------------ plain DV updates


def test_a_plain_dv_update_conflicts_with_a_txlake_rewrite_of_the_file(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    original = dv_table(lake)
    tx = lake.transaction("snapshot")
    tx.update("p.t", set={"balance": "0"}, where="id = 9")  # rewrites the file
    update_deletion_vector(lake, "p.t", original.path, [*DELETED, 8])  # a plain writer deletes row 8 with a DV
    with pytest.raises(ConcurrentDeleteDeleteError) as info:
        tx.commit()
    assert tuple(info.value.files) == (original.path,)
    lake.sync()  # the plain writer's DV update is intact
    assert rows(lake.read_arrow("p.t")) == [r for r in LIVE if r[0] != 8]
    assert deltars_rows(lake, "p.t") == [r for r in LIVE if r[0] != 8]


@pytest.mark.parametrize("level", ["write_serializable", "serializable"])
def test_a_plain_dv_update_conflicts_with_a_txlake_read_of_the_file(local_lake: txlake.Lakehouse, level: str) -> None:
    """A transaction whose delete read the file (matching nothing there) writes elsewhere; the plain writer's DV
    update of that file, adopted meanwhile, is a remove + add of it, so the read conflicts as with a rewrite.
    (Not adopted, the plain commit comes after the transaction in the lakehouse's order: no conflict.)"""
    lake = local_lake
    original = dv_table(lake)
    lake.create_table("p.other", ACCOUNTS)
    tx = lake.transaction(level)  # type: ignore[arg-type]
    assert tx.delete("p.t", where="id = 8") == 1  # reads (and rewrites) the file...
    tx.abort()
    tx = lake.transaction(level, redo=False)  # type: ignore[arg-type]
    assert tx.delete("p.t", where="id = 3 and balance = 4") == 0  # ...reads it, changes nothing
    tx.append("p.other", accounts([1], [1]))
    update_deletion_vector(lake, "p.t", original.path, [*DELETED, 8])
    lake.sync()
    with pytest.raises(ConflictError) as info:
        tx.commit()
    assert isinstance(info.value, ConcurrentDeleteReadError)
    assert tuple(info.value.files) == (original.path,)
    assert rows(lake.read_arrow("p.other")) == []


def test_an_append_commits_over_a_plain_dv_update(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    original = dv_table(lake)
    tx = lake.transaction("serializable")
    tx.append("p.t", accounts([30], [30]))
    update_deletion_vector(lake, "p.t", original.path, [*DELETED, 8])
    tx.commit()  # a blind append does not read the file: no conflict, the plain commit is adopted
    want = sorted([*[r for r in LIVE if r[0] != 8], (30, 30)])
    assert rows(lake.read_arrow("p.t")) == want
    assert deltars_rows(lake, "p.t") == want
    assert_every_version_reads_alike(lake, "p.t")


# ------------------------------------------------------------------------------------------ merge-on-read


def mor_table(lake: txlake.Lakehouse, name: str = "p.m") -> list[Add]:
    """``name`` with ``delta.enableDeletionVectors=true``: ids 0-49 and 50-99 (balance = id) in two files."""
    lake.create_table(name, ACCOUNTS, properties={"delta.enableDeletionVectors": "true"})
    for start in (0, 50):
        with lake.transaction() as tx:
            tx.append(name, accounts(list(range(start, start + 50)), list(range(start, start + 50))))
    protocol = lake.snapshot().delta_snapshot(name).protocol
    assert "deletionVectors" in (protocol.reader_features or ()) and "deletionVectors" in (
        protocol.writer_features or ()
    )
    return sorted(lake.snapshot().delta_snapshot(name).files.values(), key=lambda a: a.num_records or 0)


def dv_files(lake: txlake.Lakehouse, name: str) -> set[str]:
    return {m.path for m in lake.store.list(lake.delta_log(name).path) if m.path.endswith(".bin")}


def parquet_files(lake: txlake.Lakehouse, name: str) -> set[str]:
    path = lake.delta_log(name).path
    return {m.path for m in lake.store.list(path) if m.path.endswith(".parquet") and "/_delta_log/" not in m.path}


def test_merge_on_read_delete_writes_deletion_vectors_delta_rs_reads(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    low, high = sorted(mor_table(lake), key=lambda a: a.path)
    by_first = {0: None, 50: None}
    for add in (low, high):
        first = min(int(v) for v in [add.parsed_stats()["minValues"]["id"]])  # type: ignore[index]
        by_first[first] = add  # type: ignore[assignment]
    first_file, second_file = by_first[0], by_first[50]
    assert first_file is not None and second_file is not None
    data_before = parquet_files(lake, "p.m")
    want = {i: i for i in range(100)}

    with lake.transaction() as tx:  # rows of both files: each gets a DV, no data file is written
        assert tx.delete("p.m", where="id = 3 or id = 7 or id = 60") == 3
    for i in (3, 7, 60):
        want.pop(i)
    adds, removes = last_commit(lake, "p.m")
    assert parquet_files(lake, "p.m") == data_before and len(dv_files(lake, "p.m")) == 1
    assert sorted((r.path, r.deletion_vector) for r in removes) == sorted(
        [(first_file.path, None), (second_file.path, None)]
    )
    cardinality = {a.path: a.deletion_vector.cardinality for a in adds if a.deletion_vector is not None}
    assert cardinality == {first_file.path: 2, second_file.path: 1}
    assert all(a.deletion_vector and a.deletion_vector.storage_type == "u" for a in adds)
    assert all(a.num_records == 50 for a in adds)  # numRecords of the data file, as the protocol requires
    assert rows(lake.read_arrow("p.m")) == sorted(want.items())
    assert lake.snapshot().delta_snapshot("p.m").num_records == len(want)

    with lake.transaction() as tx:  # two statements on one file: one remove (of the committed DV), one add
        assert tx.delete("p.m", where="id = 4") == 1
        assert tx.delete("p.m", where="id = 5 or id = 3") == 1  # 3 is deleted already
        assert tx.delete("p.m", where="id = 1000") == 0
    for i in (4, 5):
        want.pop(i)
    adds, removes = last_commit(lake, "p.m")
    (removed,) = removes
    assert removed.path == first_file.path and removed.deletion_vector is not None
    assert removed.deletion_vector.cardinality == 2
    (added,) = adds
    assert added.path == first_file.path and added.deletion_vector is not None
    assert added.deletion_vector.cardinality == 4
    assert rows(lake.read_arrow("p.m")) == sorted(want.items())

    with lake.transaction() as tx:  # every row left in the second file: the file is removed (by its DV)
        assert tx.delete("p.m", where="id >= 50") == 49
    for i in range(50, 100):
        want.pop(i, None)
    adds, removes = last_commit(lake, "p.m")
    assert not adds and [(r.path, r.deletion_vector is not None) for r in removes] == [(second_file.path, True)]

    with lake.transaction() as tx:  # UPDATE stays copy-on-write: the rewrite drops the DV's rows
        assert tx.update("p.m", set={"balance": "-1"}, where="id = 0") == 1
    want[0] = -1
    assert rows(lake.read_arrow("p.m")) == sorted(want.items())
    with lake.transaction() as tx:  # a file this transaction wrote is rewritten, not given a DV
        tx.append("p.m", accounts([200, 201], [200, 201]))
        assert tx.delete("p.m", where="id = 200") == 1
    want[201] = 201
    adds, removes = last_commit(lake, "p.m")
    assert not removes and [(a.deletion_vector, a.num_records) for a in adds] == [(None, 1)]
    assert rows(lake.read_arrow("p.m")) == deltars_rows(lake, "p.m") == sorted(want.items())
    assert_every_version_reads_alike(lake, "p.m")


def test_an_aborted_merge_on_read_delete_leaves_no_dv_file(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    mor_table(lake)
    tx = lake.transaction()
    assert tx.delete("p.m", where="id = 1") == 1
    assert len(dv_files(lake, "p.m")) == 1
    tx.abort()
    assert dv_files(lake, "p.m") == set()
    assert len(rows(lake.read_arrow("p.m"))) == 100


def test_concurrent_merge_on_read_deletes_of_one_file_conflict(local_lake: txlake.Lakehouse) -> None:
    """Two DV updates of one data file: the second committer's remove names a logical file that is gone."""
    lake = local_lake
    mor_table(lake)
    first = lake.transaction("snapshot")
    second = lake.transaction("snapshot", redo=False)
    assert first.delete("p.m", where="id = 1") == 1
    assert second.delete("p.m", where="id = 2") == 1
    first.commit()
    with pytest.raises(ConcurrentDeleteDeleteError):
        second.commit()
    assert dv_files(lake, "p.m") and len(dv_files(lake, "p.m")) == 1  # the loser's DV file is gone
    assert rows(lake.read_arrow("p.m")) == [(i, i) for i in range(100) if i != 1]
    assert_every_version_reads_alike(lake, "p.m")


def test_a_redone_merge_on_read_delete_extends_the_winners_deletion_vector(local_lake: txlake.Lakehouse) -> None:
    """With redo the second delete runs again on the file as the first left it: its new DV deletes both rows,
    and the DV file it wrote first is deleted."""
    lake = local_lake
    mor_table(lake)
    first, second = lake.transaction("snapshot"), lake.transaction("snapshot")
    assert first.delete("p.m", where="id = 1") == 1
    assert second.delete("p.m", where="id = 2") == 1
    first.commit()
    assert second.commit().redone == 1
    assert rows(lake.read_arrow("p.m")) == [(i, i) for i in range(100) if i not in (1, 2)]
    assert len(dv_files(lake, "p.m")) == 2  # the winner's and the redone one's
    assert_every_version_reads_alike(lake, "p.m")


def test_a_compensated_publication_gives_a_file_back_its_deletion_vector(local_lake: txlake.Lakehouse) -> None:
    """A transaction deletes rows of a DV file (merge-on-read) and of another table; a plain writer's delete on
    the other table during publication aborts it, so its commit on the first table is compensated: the inverse
    removes the file with the new DV and re-adds it with its old one (not without a DV: rows would come back)."""
    lake = local_lake
    for name in ("p.x", "p.y"):
        lake.create_table(name, ACCOUNTS)
    # tables publish in id order: the DV table is the first, the plain writer races the second
    a, b = sorted((lake.snapshot().entry(n) for n in ("p.x", "p.y")), key=lambda e: e.id)
    original = dv_table(lake, a.name)
    with lake.transaction() as tx:
        tx.append(b.name, accounts([1], [10]))
    racer = TxlakeFaultHook(lambda: deltalake.DeltaTable(lake.store.url(b.path)).delete("id = 1"))
    tx = lake.transaction("snapshot")
    assert tx.delete(a.name, where="id = 1") == 1
    tx.update(b.name, set={"balance": "11"}, where="id = 1")
    lake.store.faults.add(racer.rule(f"{b.path}/_delta_log/"))
    with pytest.raises(ConflictError):
        tx.commit()
    assert racer.fired
    adds, removes = last_commit(lake, a.name)
    assert [(a_.path, a_.deletion_vector) for a_ in adds] == [(original.path, original.deletion_vector)]
    assert [(r.path, r.deletion_vector and r.deletion_vector.cardinality) for r in removes] == [(original.path, 3)]
    assert rows(DeltaTable(lake.store, a.path).read_arrow()) == LIVE == deltars_rows(lake, a.name)
    lake.sync()
    assert rows(lake.read_arrow(a.name)) == LIVE
    assert_every_version_reads_alike(lake, a.name)


def test_merge_on_read_on_a_partitioned_table(local_lake: txlake.Lakehouse) -> None:
    """Predicates over data and partition columns; a partition-only predicate empties (removes) its file."""
    lake = local_lake
    lake.create_table(
        "p.parts", "id long, part string", partition_by=["part"], properties={"delta.enableDeletionVectors": "true"}
    )
    with lake.transaction() as tx:
        tx.append("p.parts", pa.table({"id": list(range(10)), "part": ["a"] * 5 + ["b"] * 5}))
    with lake.transaction() as tx:
        assert tx.delete("p.parts", where="part = 'a' and id > 2") == 2
    adds, _ = last_commit(lake, "p.parts")
    assert [a.partition_values for a in adds] == [{"part": "a"}] and adds[0].deletion_vector is not None
    with lake.transaction() as tx:
        assert tx.delete("p.parts", where="part = 'b'") == 5
    adds, removes = last_commit(lake, "p.parts")
    assert not adds and [r.partition_values for r in removes] == [{"part": "b"}]
    assert rows(lake.read_arrow("p.parts")) == [(0, "a"), (1, "a"), (2, "a")] == deltars_rows(lake, "p.parts")
    assert_every_version_reads_alike(lake, "p.parts")


def test_a_merge_on_read_delete_marks_the_stats_wide_and_pruning_stays_right(tmp_path: Path) -> None:
    """As Spark: the re-added file's stats keep numRecords, nullCount and the old min/max (still bounds of the
    live rows) with ``"tightBounds": false``; queries inside the wide bounds read the right rows in txlake and
    delta-rs."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", "id long, v string", properties={"delta.enableDeletionVectors": "true"})
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": list(range(10)), "v": [None, *"abcdefghi"]}))
    with lake.transaction() as tx:
        tx.delete("s.t", where="id = 9 or id = 0")
    (add,) = lake.snapshot().delta_snapshot("s.t").files.values()
    stats = add.parsed_stats()
    assert add.deletion_vector is not None and stats is not None
    assert stats["tightBounds"] is False and stats["numRecords"] == 10
    assert (stats["minValues"]["id"], stats["maxValues"]["id"], stats["nullCount"]["v"]) == (0, 9, 1)
    for where, expected in (("id = 0", []), ("id = 9", []), ("id >= 8", [8]), ("v IS NULL", []), ("v = 'a'", [1])):
        assert sorted(lake.read_arrow("s.t", where=where)["id"].to_pylist()) == expected, where
        table = deltalake.DeltaTable(lake.table_location("s.t"))
        got = deltalake.QueryBuilder().register("t", table).execute(f"SELECT id FROM t WHERE {where}").read_all()
        assert sorted(pa.table(got)["id"].to_pylist()) == expected, where
