"""Snapshot replay from JSON commits, the errors a broken log raises, and the DeltaTable write path."""

from __future__ import annotations

import pyarrow as pa
import pytest

from txlake.delta import Add, CommitInfo, DeltaTable, Metadata, Protocol, Remove, Txn, commit_info
from txlake.delta.schema import schema_to_json
from txlake.errors import (
    CorruptLogError,
    DataFileNotFoundError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionAlreadyExistsError,
    VersionNotFoundError,
)
from txlake.storage import ObjectStore

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def data_objects(store: ObjectStore) -> set[str]:
    return {m.path for m in store.list("") if "/_delta_log/" not in m.path and not m.path.startswith("_delta_log/")}


@pytest.fixture
def table(store: ObjectStore) -> DeltaTable:
    """v0 create, v1 ids 1-2, v2 id 3, v3 ids 4-6, v4 removes the file of v2."""
    t = DeltaTable.create(store, "db/t", SCHEMA)
    t.append(rows(1, 2))
    t.append(rows(3))
    t.append(rows(4, 5, 6))
    (add_v2,) = (a for a in t.snapshot(2).files.values() if a not in t.snapshot(1).files.values())
    t.commit(4, [commit_info("DELETE", {"predicate": "id = 3"}), add_v2.remove()])
    return t


def test_replay_gives_the_live_files_of_every_version(table: DeltaTable) -> None:
    expected = {0: [], 1: [1, 2], 2: [1, 2, 3], 3: [1, 2, 3, 4, 5, 6], 4: [1, 2, 4, 5, 6]}
    file_counts = {0: 0, 1: 1, 2: 2, 3: 3, 4: 2}
    for version, ids in expected.items():
        snap = table.snapshot(version)
        assert snap.version == version
        assert len(snap.files) == file_counts[version]
        assert snap.num_records == len(ids)
        assert ids_of(table.read_arrow(version)) == ids
    latest = table.snapshot()
    assert latest.version == 4
    assert latest.files == table.snapshot(4).files
    assert table.latest_version() == 4
    assert table.read_arrow().schema == SCHEMA


def test_removed_file_becomes_a_tombstone(table: DeltaTable) -> None:
    snap = table.snapshot()
    (gone,) = set(table.snapshot(3).files) - set(snap.files)
    assert set(snap.tombstones) == {gone}
    assert isinstance(snap.tombstones[gone], Remove)
    assert table.snapshot(3).tombstones == {}


def test_re_adding_a_removed_path_clears_its_tombstone(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA)
    t.append(rows(1))
    (add,) = t.snapshot().files.values()
    t.commit(2, [add.remove()])
    t.commit(3, [add])
    snap = t.snapshot()
    assert set(snap.files) == {add.path}
    assert snap.tombstones == {}
    assert ids_of(t.read_arrow()) == [1]


def test_snapshot_apply_is_pure(table: DeltaTable) -> None:
    before = table.snapshot(3)
    files_before = dict(before.files)
    (first,) = (a for a in before.files.values() if a.num_records == 2)
    after = before.apply(4, [first.remove()])
    assert after.version == 4
    assert first.path not in after.files
    assert before.files == files_before
    assert before.version == 3


def test_columns_can_be_selected(table: DeltaTable) -> None:
    out = table.read_arrow(columns=["name"])
    assert out.column_names == ["name"]
    assert sorted(out.column("name").to_pylist()) == ["n1", "n2", "n4", "n5", "n6"]


def test_table_at_the_store_root(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "", SCHEMA)
    t.append(rows(7))
    assert store.exists("_delta_log/00000000000000000001.json")
    assert ids_of(DeltaTable(store, "").read_arrow()) == [7]


@pytest.mark.parametrize("version", [-1, -100, 5, 99])
def test_missing_versions_raise_version_not_found(table: DeltaTable, version: int) -> None:
    with pytest.raises(VersionNotFoundError) as info:
        table.snapshot(version)
    assert info.value.version == version
    assert isinstance(info.value, LookupError)


def test_empty_location_is_table_not_found(store: ObjectStore) -> None:
    t = DeltaTable(store, "nothing/here")
    assert not t.exists()
    assert t.latest_version() is None
    with pytest.raises(TableNotFoundError):
        t.snapshot()
    with pytest.raises(TableNotFoundError):
        t.read_arrow()
    with pytest.raises(TableNotFoundError):
        t.append(rows(1))


def test_a_gap_in_the_log_is_corrupt(table: DeltaTable, store: ObjectStore) -> None:
    store.delete(table.log.commit_path(2))
    for version in (None, 3):
        with pytest.raises(CorruptLogError) as info:
            table.snapshot(version)
        assert info.value.version == 2
    assert ids_of(table.read_arrow(1)) == [1, 2]


def test_a_corrupt_commit_loads_nothing(table: DeltaTable, store: ObjectStore) -> None:
    path = table.log.commit_path(3)
    original = store.get(path)
    first_add = next(line for line in original.decode().splitlines() if line.startswith('{"add"'))
    store.put(path, (first_add + "\n" + first_add[: len(first_add) // 2]).encode())
    for version in (None, 3, 4):
        with pytest.raises(CorruptLogError) as info:
            table.snapshot(version)
        assert info.value.version == 3
    with pytest.raises(CorruptLogError):
        table.read_arrow()
    assert ids_of(table.read_arrow(2)) == [1, 2, 3]
    # nothing was cached from the failed load: repairing the file makes the table whole again
    store.put(path, original)
    assert ids_of(table.read_arrow()) == [1, 2, 4, 5, 6]


def test_an_empty_commit_file_is_corrupt(table: DeltaTable, store: ObjectStore) -> None:
    store.put(table.log.commit_path(4), b"")
    with pytest.raises(CorruptLogError) as info:
        table.snapshot()
    assert info.value.version == 4


def test_a_log_without_protocol_is_corrupt(store: ObjectStore) -> None:
    metadata = Metadata.new(schema_to_json(SCHEMA))
    DeltaTable(store, "t").commit(0, [commit_info("CREATE TABLE"), metadata])
    with pytest.raises(CorruptLogError) as info:
        DeltaTable(store, "t").snapshot()
    assert info.value.version == 0


def test_a_missing_data_file_is_reported_by_path(table: DeltaTable, store: ObjectStore) -> None:
    snap = table.snapshot()
    victim = max(snap.files.values(), key=lambda a: a.num_records or 0)
    store.delete(f"db/t/{victim.path}")
    assert table.snapshot().files == snap.files  # the log is fine
    with pytest.raises(DataFileNotFoundError) as info:
        table.read_arrow()
    assert info.value.path == victim.path
    assert isinstance(info.value, FileNotFoundError)
    assert ids_of(table.read_arrow(2)) == [1, 2, 3]  # versions that do not reference it still read


def test_an_unreadable_data_file_is_corrupt(table: DeltaTable, store: ObjectStore) -> None:
    (victim,) = (a for a in table.snapshot().files.values() if a.num_records == 2)
    store.put(f"db/t/{victim.path}", b"PAR1 garbage PAR1")
    with pytest.raises(CorruptLogError) as info:
        table.read_arrow()
    assert info.value.path == victim.path


def test_app_transaction_versions_are_tracked(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA)
    t.commit(1, [commit_info("WRITE"), Txn("app-a", 5, 1000)])
    t.commit(2, [commit_info("WRITE"), Txn("app-a", 7), Txn("app-b", 1)])
    t.commit(3, [commit_info("WRITE")])
    assert t.snapshot(0).txns == {}
    assert t.snapshot(1).txns == {"app-a": 5}
    assert t.snapshot(2).txns == {"app-a": 7, "app-b": 1}
    assert t.snapshot().txns == {"app-a": 7, "app-b": 1}


def test_commit_info_only_commits_are_no_ops(table: DeltaTable) -> None:
    before = table.snapshot()
    table.commit(5, [CommitInfo({"operation": "VACUUM START"})])
    after = table.snapshot()
    assert after.version == 5
    assert after.files == before.files
    assert after.metadata == before.metadata


def test_latest_metadata_wins_and_old_files_read_with_new_columns(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA)
    t.append(rows(1))
    old = t.snapshot().metadata
    wider = SCHEMA.append(pa.field("extra", pa.float64()))
    new = Metadata(old.id, schema_to_json(wider), old.partition_columns, old.configuration, old.created_time)
    t.commit(2, [commit_info("ADD COLUMNS"), new])
    t.append(pa.table({"id": [2], "name": ["b"], "extra": [2.5]}, schema=wider))
    assert t.snapshot(1).schema == SCHEMA
    assert t.snapshot().schema == wider
    out = t.read_arrow().sort_by("id")
    assert out.to_pylist() == [{"id": 1, "name": "n1", "extra": None}, {"id": 2, "name": "b", "extra": 2.5}]


def test_protocol_upgrade_is_replayed(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA)
    t.commit(1, [commit_info("UPGRADE PROTOCOL"), Protocol(3, 7, ("timestampNtz",), ("timestampNtz",))])
    assert t.snapshot(0).protocol == Protocol(1, 2)
    assert t.snapshot().protocol == Protocol(3, 7, ("timestampNtz",), ("timestampNtz",))


def test_num_records_is_unknown_when_a_file_has_no_stats(table: DeltaTable) -> None:
    table.commit(5, [Add("extra.parquet", {}, 1, 1)])
    assert table.snapshot().num_records is None
    assert table.snapshot(4).num_records == 5


# --------------------------------------------------------------------------------------- DeltaTable writes


def test_create_writes_protocol_1_2_and_metadata(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA, description="d", configuration={"delta.appendOnly": "false"})
    snap = t.snapshot()
    assert snap.version == 0
    assert snap.protocol == Protocol(1, 2)
    assert snap.schema == SCHEMA
    assert snap.metadata.description == "d"
    assert snap.metadata.configuration == {"delta.appendOnly": "false"}
    assert snap.files == {}
    assert t.read_arrow().num_rows == 0
    assert t.read_arrow().schema == SCHEMA


def test_create_twice_is_refused(store: ObjectStore) -> None:
    DeltaTable.create(store, "t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        DeltaTable.create(store, "t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        DeltaTable.create(store, "t", pa.schema([("other", pa.string())]))
    assert DeltaTable(store, "t").snapshot().schema == SCHEMA


def test_create_with_unknown_partition_column_is_refused(store: ObjectStore) -> None:
    with pytest.raises(SchemaMismatchError) as info:
        DeltaTable.create(store, "t", SCHEMA, partition_by=["nope"])
    assert info.value.columns == ("nope",)
    assert not DeltaTable(store, "t").exists()


def test_committing_a_taken_version_is_refused_and_keeps_the_winner(table: DeltaTable, store: ObjectStore) -> None:
    winner = store.get(table.log.commit_path(4))
    with pytest.raises(VersionAlreadyExistsError) as info:
        table.commit(4, [commit_info("WRITE")])
    assert info.value.version == 4
    assert store.get(table.log.commit_path(4)) == winner


@pytest.mark.parametrize(
    "bad",
    [
        pa.table({"id": pa.array([1], pa.int64()), "bogus": [1]}),
        pa.table({"name": ["no id"]}),
        pa.table({"id": pa.array([1.5])}),
        pa.table({"id": pa.array([None], pa.int64())}),
    ],
    ids=["extra-column", "missing-required", "lossy", "null-in-required"],
)
def test_append_with_schema_mismatch_commits_nothing(table: DeltaTable, store: ObjectStore, bad: pa.Table) -> None:
    files_before = data_objects(store)
    assert len(files_before) == 3  # one per append; the removed file stays on storage
    with pytest.raises(SchemaMismatchError):
        table.append(bad)
    assert table.latest_version() == 4
    assert data_objects(store) == files_before
    assert ids_of(table.read_arrow()) == [1, 2, 4, 5, 6]


def test_append_returns_the_new_version_and_writes_one_commit(table: DeltaTable) -> None:
    assert table.append(rows(10)) == 5
    assert table.latest_version() == 5
    assert ids_of(table.read_arrow()) == [1, 2, 4, 5, 6, 10]


def test_history_is_newest_first_with_operations(table: DeltaTable) -> None:
    entries = table.history()
    assert [e.version for e in entries] == [4, 3, 2, 1, 0]
    assert [e.operation for e in entries] == ["DELETE", "WRITE", "WRITE", "WRITE", "CREATE TABLE"]
    assert entries[0].commit_info["operationParameters"] == {"predicate": "id = 3"}
    assert entries[1].commit_info["isBlindAppend"] is True
    stamps = [e.timestamp_ms for e in entries]
    assert stamps == sorted(stamps, reverse=True)
    assert len(set(stamps)) == len(stamps)
    assert entries[0].timestamp.tzinfo is not None
    assert [e.version for e in table.history(limit=2)] == [4, 3]


def test_history_of_a_commit_without_commit_info(table: DeltaTable) -> None:
    table.commit(5, [Txn("a", 1)])
    entry = table.history(limit=1)[0]
    assert entry.version == 5
    assert entry.operation is None
    assert entry.commit_info == {}
