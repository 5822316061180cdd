"""Reading column-mapped data files: physical names and Parquet field ids at every level, columns files lack."""

from __future__ import annotations

import json
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import txlake
from txlake.delta import DeltaTable
from txlake.delta.actions import Add
from txlake.delta.colmap import (
    column_id,
    is_mapped,
    mapped_added_columns,
    mapped_for_new_table,
    physical_name,
    to_logical,
    to_physical,
)
from txlake.storage import ObjectStore


def mapped(name: str, dtype: Any, cid: int, physical: str) -> dict[str, Any]:
    meta = {"delta.columnMapping.id": cid, "delta.columnMapping.physicalName": physical}
    return {"name": name, "type": dtype, "nullable": True, "metadata": meta}


def write_log(store: ObjectStore, mode: str, fields: list[dict[str, Any]], adds: list[Add]) -> None:
    lines = [
        {"commitInfo": {"operation": "HAND"}},
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "9"},
                "createdTime": 1,
            }
        },
        *(a.to_json() for a in adds),
    ]
    store.put("t/_delta_log/00000000000000000000.json", "".join(json.dumps(x) + "\n" for x in lines).encode())


def put_parquet(store: ObjectStore, name: str, data: pa.Table) -> Add:
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink)
    payload = sink.getvalue().to_pybytes()
    store.put(f"t/{name}", payload)
    return Add(name, {}, len(payload), 1, True, json.dumps({"numRecords": data.num_rows}))


def with_id(name: str, dtype: pa.DataType, cid: int) -> pa.Field:
    return pa.field(name, dtype, metadata={b"PARQUET:field_id": str(cid).encode()})


def test_id_mode_finds_columns_by_field_id_when_the_physical_name_differs(tmp_path: Any) -> None:
    """Files converted from other formats keep their own column names; in ``id`` mode the ids decide."""
    store = ObjectStore.from_uri(tmp_path.as_uri())
    inner = pa.struct([with_id("q", pa.int32(), 4), with_id("other", pa.string(), 5)])
    file_schema = pa.schema([with_id("x1", pa.int64(), 1), with_id("x2", inner, 3)])
    data = pa.table({"x1": [1, 2], "x2": [{"q": 7, "other": "a"}, None]}, schema=file_schema)
    add = put_parquet(store, "a.parquet", data)
    point = {"type": "struct", "fields": [mapped("p", "integer", 4, "col-p"), mapped("new", "string", 6, "col-n")]}
    fields = [mapped("id", "long", 1, "col-id"), mapped("gone", "long", 2, "col-g"), mapped("pt", point, 3, "col-pt")]
    write_log(store, "id", fields, [add])
    got = DeltaTable(store, "t").read_arrow()
    assert got.column_names == ["id", "gone", "pt"]
    assert got.to_pylist() == [
        {"id": 1, "gone": None, "pt": {"p": 7, "new": None}},  # a nested field the file lacks is null too
        {"id": 2, "gone": None, "pt": None},
    ]


def test_name_mode_maps_nested_names_in_lists_and_maps(tmp_path: Any) -> None:
    store = ObjectStore.from_uri(tmp_path.as_uri())
    s = {"type": "struct", "fields": [mapped("a", "long", 2, "col-a")]}
    fields = [
        mapped("l", {"type": "array", "elementType": s, "containsNull": True}, 1, "col-l"),
        mapped("m", {"type": "map", "keyType": "string", "valueType": s, "valueContainsNull": True}, 3, "col-m"),
    ]
    write_log(store, "name", fields, [])
    table = DeltaTable(store, "t")
    schema = table.snapshot().schema
    data = pa.table(
        {"l": [[{"a": 1}, None], None], "m": [[("k", {"a": 2})], [("z", None)]]},
        schema=pa.schema([pa.field(f.name, f.type) for f in schema]),
    ).cast(schema)
    physical = to_physical(data)
    assert physical.column_names == ["col-l", "col-m"]
    assert physical.schema.field("col-l").type.value_type.field(0).name == "col-a"
    add = put_parquet(store, "b.parquet", physical)
    write_log(store, "name", fields, [add])
    assert DeltaTable(store, "t").read_arrow().to_pylist() == data.to_pylist()
    back = to_logical(physical.column("col-m"), schema.field("m"))
    assert back.to_pylist() == data.column("m").to_pylist()


def test_new_mapped_tables_get_fresh_names_at_every_level_even_for_copied_schemas() -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int32())]))])
    first, config = mapped_for_new_table(schema, {"delta.columnMapping.mode": "id"})
    assert config["delta.columnMapping.maxColumnId"] == "3"
    again, _ = mapped_for_new_table(first, {"delta.columnMapping.mode": "name"})  # e.g. another table's schema
    assert physical_name(again.field("id")) != physical_name(first.field("id"))
    assert physical_name(again.field("s").type.field(0)).startswith("col-")
    assert mapped_for_new_table(schema, None) == (schema, {})
    plain, _ = mapped_for_new_table(first, None)  # a mapped table's schema for a plain table: plain names
    assert plain == schema and not is_mapped(plain)
    added, config = mapped_added_columns(first, {"delta.columnMapping.mode": "none"}, [])
    assert not is_mapped(added) and config == {"delta.columnMapping.mode": "none"}
    added, config = mapped_added_columns(
        [pa.field("z", pa.int8())], {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}, first
    )
    assert column_id(added[0]) == 8 and config["delta.columnMapping.maxColumnId"] == "8"


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_mapped_table_created_by_txlake_has_the_protocol_and_names(tmp_path: Any, mode: str) -> None:
    store = ObjectStore.from_uri(tmp_path.as_uri())
    table = DeltaTable.create(
        store, "t", pa.schema([("id", pa.int64())]), configuration={"delta.columnMapping.mode": mode}
    )
    table.append(pa.table({"id": [1, 2]}))
    snap = table.snapshot()
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (2, 5)
    assert table.read_arrow().column("id").to_pylist() == [1, 2]
    (add,) = snap.files.values()
    assert pq.read_schema(str(tmp_path / "t" / add.path)).names == [physical_name(snap.schema.field("id"))]
    ntz = DeltaTable.create(
        store, "n", pa.schema([("t", pa.timestamp("us"))]), configuration={"delta.columnMapping.mode": mode}
    )
    features = ("columnMapping", "timestampNtz")
    assert ntz.snapshot().protocol.reader_features == features and ntz.snapshot().protocol.writer_features == features


@pytest.mark.parametrize("given", ["Name", "ID"])
def test_the_mapping_mode_is_stored_lowercase_and_read_in_any_case(tmp_path: Any, given: str) -> None:
    """``Name``/``ID`` are accepted (Spark parses the mode case-insensitively) but stored lowercase, the only
    spelling delta-rs knows; a table another writer stored as ``Name`` is still read as mapped, as Spark does."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", "id long", properties={"delta.columnMapping.mode": given})
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1, 2]}))
    snapshot = lake.snapshot()
    assert snapshot.delta_snapshot("s.t").metadata.configuration["delta.columnMapping.mode"] == given.lower()
    assert snapshot.entry("s.t").properties["delta.columnMapping.mode"] == given.lower()
    location = lake.table_location("s.t")
    table = deltalake.DeltaTable(location)
    rows = pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT id FROM t").read_all())
    assert sorted(rows["id"].to_pylist()) == [1, 2]
    first = tmp_path / "lake" / "s" / "t" / "_delta_log" / f"{0:020d}.json"
    text = first.read_text()
    key = '"delta.columnMapping.mode":'
    assert f'{key}"{given.lower()}"' in text
    first.write_text(text.replace(f'{key}"{given.lower()}"', f'{key}"{given}"'))
    fresh = txlake.connect((tmp_path / "lake").as_uri())
    assert fresh.snapshot().delta_snapshot("s.t").metadata.configuration["delta.columnMapping.mode"] == given
    assert sorted(fresh.read_arrow("s.t")["id"].to_pylist()) == [1, 2]


@pytest.mark.parametrize("mode", ["name", None])
def test_a_data_file_lacking_a_not_null_column_is_a_typed_error(tmp_path: Any, mode: str | None) -> None:
    """A file without a NOT NULL column (written by another tool) fails every read, delete included, with
    :class:`SchemaMismatchError` naming the column (and the file in its message), not a pyarrow error."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    properties = {"delta.columnMapping.mode": mode} if mode else None
    lake.create_table("s.t", "id long not null, v string", properties=properties)
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1, 2], "v": ["a", "b"]}))
    (path,) = (tmp_path / "lake" / "s" / "t").glob("*.parquet")
    stored = pq.read_table(path)
    pq.write_table(stored.drop_columns([stored.schema.names[0]]), path)
    with pytest.raises(txlake.SchemaMismatchError) as read:
        lake.read_arrow("s.t")
    assert read.value.columns == ("id",) and path.name in str(read.value)
    with pytest.raises(txlake.SchemaMismatchError) as deleted:
        lake.run(lambda tx: tx.delete("s.t", where="v = 'a'"))
    assert deleted.value.columns == ("id",)


@pytest.mark.parametrize("mode", ["name", None])
def test_a_number_stored_where_the_table_has_a_string_is_a_mismatch(tmp_path: Any, mode: str | None) -> None:
    """A file storing a string column as int64 (or a long as strings) is not cast into digits: it is a
    :class:`SchemaMismatchError`, as Spark refuses it; a narrower integer still widens."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    properties = {"delta.columnMapping.mode": mode} if mode else None
    lake.create_table("s.t", "id long, v string", properties=properties)
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1, 2], "v": ["a", "b"]}))
    (path,) = (tmp_path / "lake" / "s" / "t").glob("*.parquet")
    names = pq.read_schema(path).names
    pq.write_table(pa.table({names[0]: pa.array([1, 2], pa.int32()), names[1]: pa.array([5, 6])}), path)
    with pytest.raises(txlake.SchemaMismatchError) as info:
        lake.read_arrow("s.t")
    assert info.value.columns == ("v",)
    pq.write_table(pa.table({names[0]: pa.array([1, 2], pa.int32()), names[1]: ["a", "b"]}), path)
    assert lake.read_arrow("s.t").to_pylist() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    pq.write_table(pa.table({names[0]: ["x", "y"], names[1]: ["a", "b"]}), path)
    with pytest.raises(txlake.SchemaMismatchError) as info:
        lake.read_arrow("s.t")
    assert info.value.columns == ("id",)
