"""Logs and files other engines write (Spark, Databricks, older writers) that txlake must read exactly.

Each test hand-makes the smallest table showing one thing seen in real tables (issue 9): objects in
subfolders of ``_delta_log``, INT96 and nanosecond timestamps outside the nanosecond range, metaData actions
without their optional fields, logs that hold only a checkpoint. What cannot be read raises a typed error.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txlake.delta import DeltaTable
from txlake.delta.features import is_append_only
from txlake.errors import CorruptLogError, SchemaMismatchError, VersionNotFoundError
from txlake.storage import ObjectStore

ID_SCHEMA = pa.schema([("id", pa.int64())])
OLDEST = datetime(1, 1, 1, tzinfo=UTC)
NEWEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def field(name: str, dtype: str) -> dict[str, Any]:
    return {"name": name, "type": dtype, "nullable": True, "metadata": {}}


def schema_string(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)})


def write_log(store: ObjectStore, version: int, *actions: dict[str, Any], path: str = "t") -> None:
    body = "".join(json.dumps(a) + "\n" for a in actions)
    store.put(f"{path}/_delta_log/{version:020d}.json", body.encode())


def protocol() -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def metadata(schema: str, partition_columns: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A metaData action the way Spark writes it (every field), updated with ``extra``."""
    body: dict[str, Any] = {
        "id": "7b9c8f7e-0000-4000-8000-000000000001",
        "name": None,
        "description": None,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema,
        "partitionColumns": partition_columns or [],
        "configuration": {},
        "createdTime": 1700000000000,
    }
    body.update(extra)
    return {"metaData": body}


def parquet_file(store: ObjectStore, key: str, data: pa.Table, **options: Any) -> int:
    """Write ``data`` as one Parquet object at ``key`` (pyarrow writer ``options``); returns its size."""
    buf = io.BytesIO()
    pq.write_table(data, buf, **options)
    store.put(key, buf.getvalue())
    return len(buf.getvalue())


def add(path: str, size: int, partition_values: dict[str, str | None] | None = None, **extra: Any) -> dict[str, Any]:
    body = {
        "path": path,
        "partitionValues": partition_values or {},
        "size": size,
        "modificationTime": 1700000000000,
        "dataChange": True,
    }
    body.update(extra)
    return {"add": body}


# -------------------------------------------------------------------------------- the _delta_log listing


@pytest.fixture
def three_commits(store: ObjectStore) -> DeltaTable:
    """Versions 0 (create), 1 (ids 1-2), 2 (id 3), written by txlake."""
    table = DeltaTable.create(store, "t", ID_SCHEMA)
    table.append(pa.table({"id": [1, 2]}))
    table.append(pa.table({"id": [3]}))
    return table


@pytest.mark.parametrize(
    "stray",
    [
        "_delta_log/.tmp/00000000000000000003.json",  # a writer's staging copy (delta-rs's simple_table)
        "_delta_log/_commits/00000000000000000003.json",  # coordinated / catalog-managed commits
        "_delta_log/_staged_commits/x/00000000000000000004.json",
        "_delta_log/.tmp/00000000000000000002.checkpoint.parquet",
        "_delta_log/_sidecars/00000000000000000002.checkpoint.0000000001.0000000001.parquet",
    ],
)
def test_objects_in_subfolders_of_the_log_are_not_commits_or_checkpoints(
    three_commits: DeltaTable, store: ObjectStore, stray: str
) -> None:
    # The stray object is a commit (or a garbage checkpoint) one level down: only direct children count.
    store.put(f"t/{stray}", b'{"add":{"path":"nowhere.parquet","partitionValues":{},"size":1,"modificationTime":1}}\n')
    assert three_commits.latest_version() == 2
    listing = three_commits.log.list()
    assert sorted(listing.commits) == [0, 1, 2]
    assert listing.checkpoints == {}
    assert three_commits.snapshot().version == 2
    assert sorted(three_commits.read_arrow().column("id").to_pylist()) == [1, 2, 3]
    with pytest.raises(VersionNotFoundError):
        three_commits.snapshot(3)


def test_a_log_of_only_a_checkpoint_has_that_version_as_latest(three_commits: DeltaTable, store: ObjectStore) -> None:
    three_commits.checkpoint()
    for v in range(3):  # a cleaned-up log that kept only the checkpoint (delta-rs's table-with-domain-metadata)
        store.delete(three_commits.log.commit_path(v))
    store.delete("t/_delta_log/_last_checkpoint")
    assert three_commits.latest_version() == 2
    assert three_commits.snapshot().version == 2
    assert sorted(three_commits.read_arrow().column("id").to_pylist()) == [1, 2, 3]


# ------------------------------------------------------------------------------------------ timestamps


def test_int96_timestamps_outside_the_nanosecond_range_read_exactly(store: ObjectStore) -> None:
    """Spark writes INT96 by default; read through nanoseconds, year 0001 and 9999 overflow (or wrap)."""
    data = pa.table({"ts": pa.array([OLDEST, NEWEST, None], pa.timestamp("us", tz="UTC")), "id": [1, 2, 3]})
    size = parquet_file(store, "t/part-0.parquet", data, use_deprecated_int96_timestamps=True)
    assert pq.read_schema(pa.BufferReader(store.get("t/part-0.parquet"))).field("ts").type.unit == "ns"
    schema = schema_string(field("ts", "timestamp"), field("id", "long"))
    stats = {
        "numRecords": 3,
        "minValues": {"ts": "0001-01-01T00:00:00.000Z", "id": 1},
        "maxValues": {"ts": "9999-12-31T23:59:59.999Z", "id": 3},
        "nullCount": {"ts": 1, "id": 0},
    }
    write_log(store, 0, protocol(), metadata(schema), add("part-0.parquet", size, stats=json.dumps(stats)))
    table = DeltaTable(store, "t")
    got = table.read_arrow()
    assert got.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert got.column("ts").to_pylist() == [OLDEST, NEWEST, None]
    assert table.snapshot().num_records == 3


def test_int96_timestamp_ntz_outside_the_nanosecond_range(store: ObjectStore) -> None:
    oldest, newest = OLDEST.replace(tzinfo=None), NEWEST.replace(tzinfo=None)
    data = pa.table({"ts": pa.array([oldest, newest], pa.timestamp("us"))})
    size = parquet_file(store, "t/part-0.parquet", data, use_deprecated_int96_timestamps=True)
    ntz = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"]}}
    write_log(store, 0, ntz, metadata(schema_string(field("ts", "timestamp_ntz"))), add("part-0.parquet", size))
    assert DeltaTable(store, "t").read_arrow().column("ts").to_pylist() == [oldest, newest]


def test_timestamp_partition_values_outside_the_nanosecond_range(store: ObjectStore) -> None:
    size = parquet_file(store, "t/x/a.parquet", pa.table({"id": [1]}))
    schema = schema_string(field("id", "long"), field("pts", "timestamp"), field("pntz", "timestamp_ntz"))
    ntz = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"]}}
    write_log(
        store,
        0,
        ntz,
        metadata(schema, ["pts", "pntz"]),
        add("x/a.parquet", size, {"pts": "0001-01-01 00:00:00", "pntz": "9999-12-31 23:59:59.999999"}),
        add("x/b.parquet", size, {"pts": "9999-12-31T23:59:59.999999Z", "pntz": None}),
    )
    store.put("t/x/b.parquet", store.get("t/x/a.parquet"))
    got = sorted(DeltaTable(store, "t").read_arrow().to_pylist(), key=lambda r: str(r["pntz"]))
    assert got == [
        {"id": 1, "pts": OLDEST, "pntz": NEWEST.replace(tzinfo=None)},
        {"id": 1, "pts": NEWEST, "pntz": None},
    ]


def test_nanosecond_timestamp_files_are_read_as_microseconds(store: ObjectStore) -> None:
    """A writer's TIMESTAMP(NANOS) column: sub-microsecond digits are dropped, as delta-rs does."""
    data = pa.table({"ts": pa.array([1_000_000_123, 2_000_000_999, None], pa.timestamp("ns", tz="UTC"))})
    size = parquet_file(store, "t/part-0.parquet", data, version="2.6")
    write_log(store, 0, protocol(), metadata(schema_string(field("ts", "timestamp"))), add("part-0.parquet", size))
    got = DeltaTable(store, "t").read_arrow().column("ts")
    assert got.type == pa.timestamp("us", tz="UTC")
    assert got.cast(pa.int64()).to_pylist() == [1_000_000, 2_000_000, None]


def test_checkpoint_stats_parsed_int96_timestamps_are_kept_exactly(store: ObjectStore) -> None:
    """A checkpoint carrying only ``stats_parsed`` with INT96 timestamps (Spark's parquet default)."""
    size = parquet_file(store, "t/part-0.parquet", pa.table({"ts": pa.array([NEWEST], pa.timestamp("us", tz="UTC"))}))
    ts_struct = pa.struct([("ts", pa.timestamp("us", tz="UTC"))])
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats", pa.string()),
            (
                "stats_parsed",
                pa.struct([("numRecords", pa.int64()), ("minValues", ts_struct), ("maxValues", ts_struct)]),
            ),
        ]
    )
    schema = schema_string(field("ts", "timestamp"))
    checkpoint = pa.table(
        {
            "protocol": pa.array(
                [{"minReaderVersion": 1, "minWriterVersion": 2}, None, None],
                pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())]),
            ),
            "metaData": pa.array(
                [None, {"id": "x", "schemaString": schema, "partitionColumns": []}, None],
                pa.struct(
                    [("id", pa.string()), ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string()))]
                ),
            ),
            "add": pa.array(
                [
                    None,
                    None,
                    {
                        "path": "part-0.parquet",
                        "partitionValues": [],
                        "size": size,
                        "modificationTime": 1,
                        "dataChange": False,
                        "stats": None,
                        "stats_parsed": {"numRecords": 1, "minValues": {"ts": NEWEST}, "maxValues": {"ts": NEWEST}},
                    },
                ],
                add_type,
            ),
        }
    )
    parquet_file(
        store, "t/_delta_log/00000000000000000000.checkpoint.parquet", checkpoint, use_deprecated_int96_timestamps=True
    )
    table = DeltaTable(store, "t")
    (only,) = table.snapshot().files.values()
    stats = only.parsed_stats()
    assert stats is not None
    assert stats["numRecords"] == 1
    stamp = datetime.fromisoformat(stats["maxValues"]["ts"])  # INT96 has no zone: an instant in UTC, as in Spark
    assert (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)) == NEWEST
    assert table.read_arrow().column("ts").to_pylist() == [NEWEST]


def test_a_data_file_column_of_another_type_is_a_schema_mismatch(store: ObjectStore) -> None:
    size = parquet_file(store, "t/part-0.parquet", pa.table({"id": ["one", "two"]}))
    write_log(store, 0, protocol(), metadata(schema_string(field("id", "long"))), add("part-0.parquet", size))
    with pytest.raises(SchemaMismatchError) as info:
        DeltaTable(store, "t").read_arrow()
    assert list(info.value.columns) == ["id"]


@pytest.mark.parametrize(
    ("dtype", "raw"), [("integer", "abc"), ("byte", "300"), ("date", "2024-13-45"), ("timestamp", "soon")]
)
def test_an_unparsable_partition_value_is_corrupt(store: ObjectStore, dtype: str, raw: str) -> None:
    size = parquet_file(store, "t/p/a.parquet", pa.table({"id": [1]}))
    schema = schema_string(field("id", "long"), field("p", dtype))
    write_log(store, 0, protocol(), metadata(schema, ["p"]), add("p/a.parquet", size, {"p": raw}))
    with pytest.raises(CorruptLogError) as info:
        DeltaTable(store, "t").read_arrow()
    assert info.value.path == "p/a.parquet"


# ------------------------------------------------------------------------------------------- metaData


def test_metadata_without_any_optional_field_reads(store: ObjectStore) -> None:
    size = parquet_file(store, "t/part-0.parquet", pa.table({"id": [7]}))
    bare = {"metaData": {"id": "x", "schemaString": schema_string(field("id", "long"))}}
    write_log(store, 0, protocol(), bare, add("part-0.parquet", size))
    table = DeltaTable(store, "t")
    meta = table.snapshot().metadata
    assert (meta.name, meta.description, meta.created_time, meta.partition_columns) == (None, None, None, ())
    assert (meta.format.provider, dict(meta.format.options), dict(meta.configuration)) == ("parquet", {}, {})
    assert table.read_arrow().column("id").to_pylist() == [7]
    table.checkpoint()  # and a checkpoint of it loads back the same
    assert table.snapshot().metadata == meta


@pytest.mark.parametrize(
    "nulls",
    [
        {"name": None, "description": None, "createdTime": None, "configuration": None, "partitionColumns": None},
        {"format": None},
        {"format": {"provider": "parquet"}},
        {"format": {"provider": "parquet", "options": None}},
        {"configuration": {"delta.appendOnly": None, "delta.columnMapping.mode": None}},
    ],
    ids=["null-fields", "null-format", "no-format-options", "null-format-options", "null-config-values"],
)
def test_metadata_with_null_optional_fields_reads(store: ObjectStore, nulls: dict[str, Any]) -> None:
    size = parquet_file(store, "t/part-0.parquet", pa.table({"id": [7]}))
    write_log(store, 0, protocol(), metadata(schema_string(field("id", "long")), **nulls), add("part-0.parquet", size))
    table = DeltaTable(store, "t")
    assert table.read_arrow().column("id").to_pylist() == [7]
    meta = table.snapshot().metadata
    assert dict(meta.configuration) == {}  # a null value is an unset key
    assert not is_append_only(meta)


def test_a_superseded_metadata_without_schema_does_not_matter(store: ObjectStore) -> None:
    """Delta Live Tables start a table with a metaData that has no schemaString, name or description."""
    size = parquet_file(store, "t/part-0.parquet", pa.table({"id": [7]}))
    setup = {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "partitionColumns": []}}
    write_log(store, 0, {"commitInfo": {"operation": "DLT REFRESH"}}, protocol(), setup)
    write_log(store, 1, metadata(schema_string(field("id", "long")), id="x", name="live"), add("part-0.parquet", size))
    table = DeltaTable(store, "t")
    assert table.snapshot().metadata.name == "live"
    assert table.read_arrow().column("id").to_pylist() == [7]
    with pytest.raises(CorruptLogError) as info:  # version 0 itself has no schema: delta-rs fails on it too
        table.snapshot(0)
    assert info.value.version == 0
    assert [e.version for e in table.history()] == [1, 0]


@pytest.mark.parametrize(
    "bad",
    [
        {"schemaString": "not json"},
        {"schemaString": "[1]"},
        {"schemaString": '{"type":"struct","fields":[{}]}'},
        {"id": None},
    ],
    ids=["not-json", "not-a-struct", "field-without-name", "no-id"],
)
def test_a_latest_metadata_without_a_usable_schema_or_id_is_corrupt(store: ObjectStore, bad: dict[str, Any]) -> None:
    write_log(store, 0, protocol(), metadata(schema_string(field("id", "long")), **bad))
    with pytest.raises(CorruptLogError) as info:
        DeltaTable(store, "t").snapshot()
    assert info.value.version == 0
