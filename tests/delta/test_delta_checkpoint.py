"""Classic Parquet checkpoints: loading from one must give exactly the state JSON replay gives."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txlake.delta import (
    Add,
    DeltaTable,
    Protocol,
    Remove,
    Snapshot,
    Txn,
    commit_info,
    read_checkpoint,
    write_checkpoint,
)
from txlake.delta.actions import now_ms
from txlake.delta.log import LastCheckpoint, parse_last_checkpoint
from txlake.errors import CorruptLogError, VersionNotFoundError
from txlake.storage import ObjectStore

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
DAY_MS = 24 * 3600 * 1000


def rows(p: str | None, *ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [p] * len(ids)}, schema=SCHEMA)


def sorted_rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: int(str(r["id"])))


def cp_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def part_name(version: int, part: int, parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet"


def delete_commits(table: DeltaTable, below: int) -> None:
    for v in range(below):
        table.store.delete(table.log.commit_path(v))


def assert_same_state(a: Snapshot, b: Snapshot) -> None:
    assert a.version == b.version
    assert a.protocol == b.protocol
    assert a.metadata == b.metadata
    assert a.txns == b.txns
    assert a.num_records == b.num_records
    assert set(a.files) == set(b.files)
    for path, add in a.files.items():
        other = b.files[path]
        assert (add.partition_values, add.size, add.modification_time, add.stats, add.tags) == (
            other.partition_values,
            other.size,
            other.modification_time,
            other.stats,
            other.tags,
        )
    assert set(a.tombstones) == set(b.tombstones)


@pytest.fixture
def table(store: ObjectStore) -> DeltaTable:
    """Six versions: partitioned appends (odd values, a live null), two app txns, a remove, tags on a file."""
    t = DeltaTable.create(
        store,
        "t",
        SCHEMA,
        partition_by=["p"],
        description="checkpointed",
        configuration={"delta.appendOnly": "false", "custom.key": "v"},
    )
    t.append(pa.concat_tables([rows("a", 1, 2), rows(None, 3)]))  # v1
    t.commit(2, [commit_info("WRITE"), Txn("app-1", 10), Txn("app-2", 3)])  # v2
    t.append(rows("b/c d=e%", 4, 5))  # v3
    (victim,) = (a for a in t.snapshot().files.values() if a.partition_values["p"] == "a")
    t.commit(4, [commit_info("DELETE"), victim.remove()])  # v4
    (written,) = t.write_files(rows("a", 6), t.snapshot())
    assert isinstance(written, Add)
    tagged = replace(written, tags={"k": "v"})
    t.commit(5, [commit_info("WRITE"), tagged, Txn("app-1", 11)])  # v5
    return t


def test_single_checkpoint_equals_json_replay(table: DeltaTable, store: ObjectStore) -> None:
    from_json = table.snapshot()
    hint = table.checkpoint()
    assert (hint.version, hint.parts) == (5, None)
    assert store.exists(f"t/_delta_log/{cp_name(5)}")
    doc = json.loads(store.get("t/_delta_log/_last_checkpoint"))
    assert doc["version"] == 5
    assert doc["size"] == hint.size
    assert "parts" not in doc
    delete_commits(table, 5)  # from now on only the checkpoint can rebuild the table
    from_checkpoint = table.snapshot()
    assert_same_state(from_checkpoint, from_json)
    assert from_checkpoint.txns == {"app-1": 11, "app-2": 3}
    assert sorted_rows(table.read_arrow()) == sorted_rows(table.read_arrow(snapshot=from_json))


def test_multi_part_checkpoint_equals_json_replay(table: DeltaTable, store: ObjectStore) -> None:
    from_json = table.snapshot()
    hint = table.checkpoint(parts=3)
    assert (hint.version, hint.parts) == (5, 3)
    names = {m.path.rsplit("/", 1)[-1] for m in store.list("t/_delta_log")}
    assert {part_name(5, i, 3) for i in (1, 2, 3)} <= names
    assert cp_name(5) not in names
    assert json.loads(store.get("t/_delta_log/_last_checkpoint"))["parts"] == 3
    delete_commits(table, 5)
    assert_same_state(table.snapshot(), from_json)
    listing = table.log.list()
    assert_same_state(read_checkpoint(table.log, listing.checkpoints[5]), from_json)


@pytest.mark.parametrize("parts", [2, 7])
def test_more_parts_than_needed_still_load(table: DeltaTable, parts: int) -> None:
    from_json = table.snapshot()
    table.checkpoint(parts=parts)
    delete_commits(table, 5)
    assert_same_state(table.snapshot(), from_json)


def test_checkpoint_with_later_commits(table: DeltaTable) -> None:
    expected = {v: table.snapshot(v) for v in (3, 4, 5)}
    hint = table.checkpoint(3)
    assert hint.version == 3
    table.append(rows("z", 9))
    expected[6] = table.snapshot()
    delete_commits(table, 3)
    for v in (3, 4, 5):
        assert_same_state(table.snapshot(v), expected[v])
    assert_same_state(table.snapshot(), expected[6])
    assert sorted(r["id"] for r in table.read_arrow().to_pylist()) == [3, 4, 5, 6, 9]


def test_versions_older_than_the_checkpoint_load_from_json(table: DeltaTable) -> None:
    expected = {v: table.snapshot(v) for v in range(5)}
    table.checkpoint()
    for v, snap in expected.items():
        assert_same_state(table.snapshot(v), snap)


def test_versions_older_than_the_checkpoint_are_gone_with_their_commits(table: DeltaTable) -> None:
    table.checkpoint()
    delete_commits(table, 5)
    for v in (0, 2, 4):
        with pytest.raises(VersionNotFoundError) as info:
            table.snapshot(v)
        assert info.value.version == v
    assert table.snapshot(5).version == 5


def test_stale_last_checkpoint_still_finds_the_newest_checkpoint(table: DeltaTable) -> None:
    table.checkpoint(2)
    from_json = table.snapshot()
    table.checkpoint()
    table.log.write_last_checkpoint(LastCheckpoint(2, 4))  # points at the older checkpoint
    assert_same_state(table.snapshot(), from_json)
    delete_commits(table, 5)  # only checkpoint 5 can serve now
    assert_same_state(table.snapshot(), from_json)


def test_stale_last_checkpoint_without_newer_checkpoint_replays_json(table: DeltaTable) -> None:
    table.checkpoint(2)
    expected = table.snapshot()
    table.append(rows("q", 7))
    delete_commits(table, 2)
    assert table.snapshot().num_records == (expected.num_records or 0) + 1
    assert_same_state(table.snapshot(5), expected)


@pytest.mark.parametrize(
    "hint",
    [
        b"this is not json",
        b"",
        b"{}",
        b"[5]",
        b'{"version": "five"}',
        b'{"version": 999, "size": 3}',
        b'{"version": 1, "size": 3}',
        b"null",
        b'{"version": null}',
        b'{"version": 1e400}',
        b'{"version": 3.0}',
        b'{"version": true}',
        b'{"version": -3}',
        b'{"version": 3, "size": "big", "parts": "many"}',
        b'{"version": 3, "si',
        b"[" * 100_000,
        b"\x00\xff\xfe",
    ],
    ids=[
        "text",
        "empty",
        "no-version",
        "array",
        "bad-version",
        "too-new",
        "no-checkpoint-there",
        "null",
        "null-version",
        "huge-version",
        "float-version",
        "bool-version",
        "negative-version",
        "bad-size-and-parts",
        "truncated",
        "deeply-nested",
        "binary",
    ],
)
def test_garbage_last_checkpoint_still_loads(table: DeltaTable, store: ObjectStore, hint: bytes) -> None:
    from_json = table.snapshot()
    table.checkpoint(3)
    store.put("t/_delta_log/_last_checkpoint", hint)
    assert_same_state(table.snapshot(), from_json)
    assert table.latest_version() == 5
    delete_commits(table, 3)
    assert_same_state(table.snapshot(), from_json)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"version": 7, "size": 12, "parts": 3, "sizeInBytes": 99}', LastCheckpoint(7, 12, 3)),
        (b'{"version": 7}', LastCheckpoint(7)),
        (b'{"version": 7, "size": -1, "parts": 0}', LastCheckpoint(7)),
        (b'{"version": 7, "size": 1.5, "parts": "2"}', LastCheckpoint(7)),
        (b'{"version": "7"}', None),
        (b'{"version": 7.0}', None),
        (b'{"version": false}', None),
        (b'{"version": 1e400}', None),
        (b"", None),
        (b"7", None),
        (b"[" * 100_000, None),
    ],
)
def test_last_checkpoint_parsing_keeps_only_well_formed_fields(raw: bytes, expected: LastCheckpoint | None) -> None:
    assert parse_last_checkpoint(raw) == expected


def test_last_checkpoint_pointing_at_an_incomplete_checkpoint(table: DeltaTable, store: ObjectStore) -> None:
    from_json = table.snapshot()
    table.checkpoint(parts=3)
    store.delete(f"t/_delta_log/{part_name(5, 2, 3)}")
    assert_same_state(table.snapshot(), from_json)  # the incomplete checkpoint is ignored: JSON replay
    delete_commits(table, 5)
    with pytest.raises(VersionNotFoundError):  # never a table built from two thirds of a checkpoint
        table.snapshot()


@pytest.mark.parametrize("broken", [None, 2, 3])
def test_two_checkpoints_of_one_version_with_different_part_counts(
    table: DeltaTable, store: ObjectStore, broken: int | None
) -> None:
    from_json = table.snapshot()
    table.checkpoint(parts=3)
    table.checkpoint(parts=2)
    if broken is not None:  # one of the two lost a part: the other one is complete and must be used
        store.delete(f"t/_delta_log/{part_name(5, 1, broken)}")
    delete_commits(table, 5)
    assert_same_state(table.snapshot(), from_json)


def test_an_unreadable_checkpoint_is_corrupt(table: DeltaTable, store: ObjectStore) -> None:
    table.checkpoint()
    store.put(f"t/_delta_log/{cp_name(5)}", b"not parquet at all")
    with pytest.raises(CorruptLogError) as info:
        table.snapshot()
    assert info.value.version == 5


def test_checkpoint_file_layout_follows_the_protocol(table: DeltaTable, store: ObjectStore) -> None:
    table.checkpoint()
    cp = pq.read_table(pa.BufferReader(store.get(f"t/_delta_log/{cp_name(5)}")))
    assert {"protocol", "metaData", "add", "remove", "txn"} <= set(cp.column_names)
    protocol_type = cp.schema.field("protocol").type
    assert protocol_type.field("minReaderVersion").type == pa.int32()
    assert protocol_type.field("minWriterVersion").type == pa.int32()
    adds = [a for a in cp.column("add").to_pylist() if a is not None]
    assert len(adds) == 3
    assert all(a["dataChange"] is False for a in adds)
    assert all(isinstance(a["stats"], str) for a in adds)
    (meta,) = (m for m in cp.column("metaData").to_pylist() if m is not None)
    assert meta["format"]["options"] == []
    assert dict(meta["configuration"]) == {"delta.appendOnly": "false", "custom.key": "v"}
    assert meta["partitionColumns"] == ["p"]
    txns = {t["appId"]: t["version"] for t in cp.column("txn").to_pylist() if t is not None}
    assert txns == {"app-1": 11, "app-2": 3}
    assert store.exists(table.log.commit_path(5))  # the JSON commit at the checkpoint version is kept


@pytest.mark.parametrize(
    "protocol",
    [Protocol(3, 7, ("timestampNtz",), ("timestampNtz", "appendOnly")), Protocol(3, 7, (), ("appendOnly",))],
    ids=["features", "no-reader-features"],
)
def test_protocol_features_survive_checkpoints(table: DeltaTable, protocol: Protocol) -> None:
    table.commit(6, [commit_info("UPGRADE PROTOCOL"), protocol])
    table.checkpoint()
    delete_commits(table, 6)
    assert table.snapshot().protocol == protocol


def test_parts_must_be_positive(table: DeltaTable) -> None:
    with pytest.raises(ValueError):
        table.checkpoint(parts=0)


def _removed(path: str, deleted_at: int) -> Remove:
    return Remove(path, deleted_at, True, True, {"p": "x"}, 10)


def test_old_tombstones_are_dropped_from_checkpoints(store: ObjectStore) -> None:
    t = DeltaTable.create(store, "t", SCHEMA, partition_by=["p"])
    now = now_ms()
    t.commit(1, [_removed("old", now - 8 * DAY_MS), _removed("fresh", now - DAY_MS)])
    assert set(t.snapshot().tombstones) == {"old", "fresh"}
    t.checkpoint()
    delete_commits(t, 1)
    assert set(t.snapshot().tombstones) == {"fresh"}
    kept = t.snapshot().tombstones["fresh"]
    assert (kept.deletion_timestamp, kept.size, kept.partition_values) == (now - DAY_MS, 10, {"p": "x"})


def test_tombstone_retention_follows_table_configuration(store: ObjectStore) -> None:
    config = {"delta.deletedFileRetentionDuration": "interval 1 hours"}
    t = DeltaTable.create(store, "t", SCHEMA, configuration=config)
    now = now_ms()
    t.commit(1, [_removed("two-hours", now - 2 * 3600 * 1000), _removed("ten-minutes", now - 600 * 1000)])
    write_checkpoint(t.log, t.snapshot())
    listing = t.log.list()
    assert set(read_checkpoint(t.log, listing.checkpoints[1]).tombstones) == {"ten-minutes"}
