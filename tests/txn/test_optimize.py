"""``optimize``: compaction (and Z-order) as a ``dataChange=false`` transaction that appends never conflict with."""

from __future__ import annotations

import threading
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation
from txlake.txn.staging import zorder_indices


def _small_files(location: StoreLocation, n: int) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("s.t", "id long, x double, p string", partition_by=["p"])
    for i in range(n):
        with lake.transaction() as tx:
            tx.append("s.t", pa.table({"id": [i], "x": [float(n - i)], "p": ["even" if i % 2 == 0 else "odd"]}))
    return lake


def _ids(lake: txlake.Lakehouse) -> list[int]:
    return sorted(lake.read_arrow("s.t")["id"].to_pylist())


def test_optimize_packs_small_files_without_changing_rows(any_store_uri: StoreLocation) -> None:
    lake = _small_files(any_store_uri, 12)
    before, version = _ids(lake), lake.version()
    metrics = lake.optimize("s.t")
    assert (metrics.files_removed, metrics.files_added) == (12, 2)  # one file per partition
    assert _ids(lake) == before and len(lake.snapshot().delta_snapshot("s.t").files) == 2
    assert _ids(lake.snapshot(version=version)) == before  # time travel still reads the small files
    commit = lake.snapshot().delta_snapshot("s.t")
    assert all(not a.data_change for a in commit.files.values())  # written as a rearrangement
    if not any_store_uri.uri.startswith("memory://"):
        table = deltalake.DeltaTable(lake.table_location("s.t"), storage_options=any_store_uri.storage_options or None)
        assert table.history(1)[0]["operation"] == "OPTIMIZE" and len(table.file_uris()) == 2
    assert lake.optimize("s.t").files_removed == 0  # nothing small left: nothing to commit


def test_where_and_target_size_and_zorder(tmp_path: Path) -> None:
    lake = _small_files(StoreLocation(tmp_path.as_uri(), {}), 10)
    assert lake.optimize("s.t", where="p = 'odd'").files_removed == 5
    assert len(lake.snapshot().delta_snapshot("s.t").files) == 6  # 5 even ones untouched
    assert lake.optimize("s.t", target_file_size=1).files_removed == 0  # every file is already "big"
    metrics = lake.optimize("s.t", zorder_by=["x"])
    assert metrics.files_removed == 6 and _ids(lake) == list(range(10))
    for bad, error in (
        ({"where": "id > 1"}, txlake.PredicateError),
        ({"zorder_by": ["p"]}, txlake.SchemaMismatchError),
        ({"zorder_by": ["nope"]}, txlake.SchemaMismatchError),
        ({"target_file_size": "12XB"}, txlake.InvalidArgumentError),
        ({"target_file_size": -5}, txlake.InvalidArgumentError),
        ({"target_file_size": 1.5}, txlake.InvalidArgumentTypeError),
    ):
        with pytest.raises(error):
            lake.optimize("s.t", **bad)  # type: ignore[arg-type]


def test_zorder_interleaves_the_columns() -> None:
    data = pa.table({"a": [3, 0, 1, 2, 0, 1, None], "b": [0, 3, 2, 1, 0, 1, 5]})
    order = zorder_indices(data, ["a", "b"]).to_pylist()
    assert sorted(order) == list(range(7))
    assert order[0] == 4  # (0, 0) first
    assert zorder_indices(data, ["a"]).to_pylist()[:2] in ([1, 4], [4, 1])  # one column: a plain sort


def test_appenders_never_conflict_with_a_compaction(tmp_path: Path) -> None:
    location = StoreLocation(tmp_path.as_uri(), {})
    lake = _small_files(location, 6)
    conflicts: list[BaseException] = []
    stop = threading.Event()

    def append(worker: int) -> None:
        writer = txlake.connect(location.uri)
        for i in range(15):
            try:
                with writer.transaction() as tx:
                    tx.append("s.t", pa.table({"id": [1000 * (worker + 1) + i], "x": [0.5], "p": ["even"]}))
            except txlake.ConflictError as exc:
                conflicts.append(exc)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    compactions = 0
    while any(t.is_alive() for t in threads) and not stop.is_set():
        compactions += lake.optimize("s.t").files_removed > 0
    for thread in threads:
        thread.join()
    assert conflicts == [] and compactions >= 1
    expected = list(range(6)) + [1000 * (w + 1) + i for w in range(4) for i in range(15)]
    assert _ids(lake) == sorted(expected)


def test_a_delete_that_wins_makes_only_the_compaction_retry(tmp_path: Path) -> None:
    lake = _small_files(StoreLocation(tmp_path.as_uri(), {}), 6)
    compaction = lake.transaction(isolation="write_serializable")
    compaction.optimize("s.t")
    with lake.transaction() as tx:
        tx.delete("s.t", "id = 2")  # removes a file the compaction rewrote
    with pytest.raises(txlake.ConcurrentDeleteDeleteError):  # both removed it: the compaction gives way
        compaction.commit()
    metrics = lake.optimize("s.t")  # the retry compacts what is there now
    assert metrics.files_removed >= 2 and _ids(lake) == [0, 1, 3, 4, 5]


def test_a_failed_compaction_leaves_no_file_and_zorder_names_are_checked(tmp_path: Path) -> None:
    lake = _small_files(StoreLocation(tmp_path.as_uri(), {}), 6)
    snap = lake.snapshot().delta_snapshot("s.t")
    odd = next(a for a in snap.files.values() if a.partition_values["p"] == "odd")
    (tmp_path / "s" / "t" / odd.path).unlink()  # one partition cannot be read: the other was compacted first
    before = {p for p in tmp_path.rglob("*.parquet")}
    with pytest.raises(txlake.DataFileNotFoundError):
        lake.optimize("s.t", engine="arrow")
    assert {p for p in tmp_path.rglob("*.parquet")} == before  # nothing written stays
    assert lake.optimize("s.t", where="p = 'even'", zorder_by=["X"]).files_removed == 3  # names: any case
    lake.create_table("s.n", "id bigint, st struct<a: int>, tags array<string>")
    for column in ("st", "tags"):
        with pytest.raises(txlake.SchemaMismatchError, match="needs columns with an order"):
            lake.optimize("s.n", zorder_by=[column])
    with pytest.raises(txlake.SchemaMismatchError, match="names no column"):
        lake.optimize("s.n", zorder_by=["nope"])
