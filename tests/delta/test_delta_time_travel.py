"""Time travel by timestamp: commit file modification times, monotonized, as Delta and delta-rs use them."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pytest

from txlake.delta import DeltaTable, version_at
from txlake.errors import TableNotFoundError, VersionNotFoundError
from txlake.storage import ObjectStore

SCHEMA = pa.schema([("id", pa.int64())])
BASE = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def set_mtime(table: DeltaTable, version: int, when: datetime) -> None:
    local = table.store.local_path(table.log.commit_path(version))
    assert local is not None
    os.utime(local, (when.timestamp(), when.timestamp()))


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


@pytest.fixture
def table(file_store: ObjectStore) -> DeltaTable:
    """v0..v3 committed one minute apart from ``BASE`` (v_i at BASE + i minutes); v_i holds ids 1..i."""
    t = DeltaTable.create(file_store, "t", SCHEMA)
    for i in range(1, 4):
        t.append(pa.table({"id": [i]}))
    for v in range(4):
        set_mtime(t, v, BASE + timedelta(minutes=v))
    return t


@pytest.mark.parametrize(
    ("offset", "version"),
    [
        (timedelta(0), 0),
        (timedelta(seconds=30), 0),
        (timedelta(minutes=1) - timedelta(milliseconds=1), 0),
        (timedelta(minutes=1), 1),
        (timedelta(minutes=2, seconds=59), 2),
        (timedelta(minutes=3), 3),
        (timedelta(days=365), 3),
    ],
)
def test_newest_version_at_or_before_the_timestamp(table: DeltaTable, offset: timedelta, version: int) -> None:
    snap = table.snapshot(timestamp=BASE + offset)
    assert snap.version == version
    assert snap.timestamp_ms == ms(BASE + timedelta(minutes=version))
    assert sorted(table.read_arrow(snapshot=snap).column("id").to_pylist()) == list(range(1, version + 1))


def test_timestamps_in_any_zone_mean_the_same_instant(table: DeltaTable) -> None:
    tokyo = timezone(timedelta(hours=9))
    assert table.snapshot(timestamp=(BASE + timedelta(minutes=2)).astimezone(tokyo)).version == 2


def test_before_the_first_commit_is_version_not_found(table: DeltaTable) -> None:
    with pytest.raises(VersionNotFoundError):
        table.snapshot(timestamp=BASE - timedelta(milliseconds=1))
    with pytest.raises(VersionNotFoundError):
        table.snapshot(timestamp=datetime(1999, 1, 1, tzinfo=UTC))


def test_naive_timestamps_are_refused(table: DeltaTable) -> None:
    with pytest.raises(ValueError):
        table.snapshot(timestamp=datetime(2024, 3, 1, 12, 5))


def test_version_and_timestamp_together_are_refused(table: DeltaTable) -> None:
    with pytest.raises(ValueError):
        table.snapshot(1, timestamp=BASE)


def test_no_table_is_table_not_found(file_store: ObjectStore) -> None:
    with pytest.raises(TableNotFoundError):
        DeltaTable(file_store, "none").snapshot(timestamp=BASE)


def test_equal_modification_times_are_monotonized(table: DeltaTable) -> None:
    same = BASE + timedelta(minutes=1)
    set_mtime(table, 2, same)  # v1 and v2 share one mtime: v2 counts as one millisecond later
    assert version_at(table.log, same) == 1
    assert version_at(table.log, same + timedelta(milliseconds=1)) == 2
    assert table.snapshot(2).timestamp_ms == ms(same) + 1
    stamps = {e.version: e.timestamp_ms for e in table.history()}
    assert stamps[1] == ms(same)
    assert stamps[2] == ms(same) + 1
    assert stamps[3] == ms(BASE + timedelta(minutes=3))


def test_an_earlier_mtime_than_the_previous_commit_is_monotonized(table: DeltaTable) -> None:
    set_mtime(table, 2, BASE)  # clock skew: v2 claims to predate v1
    assert version_at(table.log, BASE) == 0
    assert version_at(table.log, BASE + timedelta(minutes=1)) == 1
    assert version_at(table.log, BASE + timedelta(minutes=1, milliseconds=1)) == 2


def test_commit_info_timestamp_is_not_used(table: DeltaTable) -> None:
    # commitInfo.timestamp says "now", the files say BASE + i minutes: the files win
    assert table.history(limit=1)[0].commit_info["timestamp"] > ms(BASE + timedelta(days=1))
    assert table.snapshot(timestamp=BASE + timedelta(minutes=1, seconds=1)).version == 1


def test_time_travel_with_checkpoint_and_cleaned_up_commits(table: DeltaTable) -> None:
    table.checkpoint(2)
    for v in range(2):
        table.store.delete(table.log.commit_path(v))
    assert table.snapshot(timestamp=BASE + timedelta(minutes=2, seconds=1)).version == 2
    assert table.snapshot(timestamp=BASE + timedelta(minutes=3)).num_records == 3
    with pytest.raises(VersionNotFoundError):
        table.snapshot(timestamp=BASE + timedelta(minutes=1, seconds=1))


def test_time_travel_on_a_memory_store_uses_put_times() -> None:
    store = ObjectStore.from_uri(f"memory://{uuid.uuid4()}")
    t = DeltaTable.create(store, "t", SCHEMA)
    time.sleep(0.01)
    after_create = datetime.now(UTC)
    time.sleep(0.01)
    t.append(pa.table({"id": [1]}))
    time.sleep(0.01)
    after_append = datetime.now(UTC)
    assert t.snapshot(timestamp=after_create).version == 0
    assert t.snapshot(timestamp=after_append).version == 1
