"""Partitioned tables: Hive-style directories, escaped values, nulls, typed values read back exactly."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txlake.delta import Action, DeltaTable, commit_info
from txlake.delta.files import (
    HIVE_NULL,
    encode_path,
    parse_partition_value,
    partition_dir,
    serialize_partition_value,
    write_data_files,
)
from txlake.errors import SchemaMismatchError
from txlake.storage import ObjectStore

TRICKY = ["plain", "with space", "a/b", "k=v", "100%", "%2F", "ü-ñ", "q?#&", "", None]


def by_id(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by("id").to_pylist()


def test_special_characters_round_trip(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    data = pa.table({"id": list(range(len(TRICKY))), "p": TRICKY}, schema=schema)
    t.append(data)
    snap = t.snapshot()
    assert len(snap.files) == len(TRICKY)
    # the Delta protocol reads an empty partition value as null, so "" is stored (and read back) as null
    stored = [None if v == "" else v for v in TRICKY]
    assert sorted(repr(a.partition_values["p"]) for a in snap.files.values()) == sorted(repr(v) for v in stored)
    assert by_id(t.read_arrow()) == [{"id": i, "p": v} for i, v in enumerate(stored)]


def test_add_paths_are_uri_encoded_and_resolve_to_stored_objects(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    t.append(pa.table({"id": [1, 2, 3, 4], "p": ["a b", "x/y", "k=v", "50%"]}, schema=schema))
    stored = {m.path for m in store.list("t") if "_delta_log" not in m.path}
    for add in t.snapshot().files.values():
        assert " " not in add.path
        assert add.path.count("/") == 1  # one partition directory: '/' in the value is escaped
        assert f"t/{unquote(add.path)}" in stored
        directory = unquote(add.path).split("/")[0]
        assert directory == "p=" + partition_dir(["p"], add.partition_values).split("=", 1)[1]
    dirs = {p.split("/")[1] for p in stored}
    assert dirs == {"p=a b", "p=x%2Fy", "p=k%3Dv", "p=50%25"}


def test_null_partition_values_go_to_the_hive_default_partition(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("n", pa.int32())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p", "n"])
    data = pa.table({"id": [1, 2, 3], "p": [None, "x", None], "n": pa.array([1, None, None], pa.int32())})
    t.append(data)
    stored = {m.path for m in store.list("t") if "_delta_log" not in m.path}
    dirs = {"/".join(p.split("/")[1:3]) for p in stored}
    assert dirs == {f"p={HIVE_NULL}/n=1", f"p=x/n={HIVE_NULL}", f"p={HIVE_NULL}/n={HIVE_NULL}"}
    values = sorted((a.partition_values["p"] or "", a.partition_values["n"] or "") for a in t.snapshot().files.values())
    assert values == [("", ""), ("", "1"), ("x", "")]
    assert all(None in a.partition_values.values() for a in t.snapshot().files.values())
    assert by_id(t.read_arrow()) == data.to_pylist()


def test_typed_partition_columns_round_trip(store: ObjectStore) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("i", pa.int32()),
            ("l", pa.int64()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ntz", pa.timestamp("us")),
            ("b", pa.bool_()),
            ("dec", pa.decimal128(6, 2)),
            ("f", pa.float64()),
        ]
    )
    t = DeltaTable.create(store, "t", schema, partition_by=[n for n in schema.names if n != "id"])
    data = pa.table(
        {
            "id": [1, 2, 3],
            "i": [-5, None, 7],
            "l": [2**40, 0, None],
            "d": [date(2024, 2, 29), None, date(1970, 1, 1)],
            "ts": [datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), None, datetime(2000, 1, 1, tzinfo=UTC)],
            "ntz": [datetime(2024, 1, 2, 3, 4, 5, 6), datetime(1999, 12, 31, 23, 59, 59), None],
            "b": [True, False, None],
            "dec": [Decimal("1.50"), None, Decimal("-3.25")],
            "f": [1.5, None, float("nan")],
        },
        schema=schema,
    )
    t.append(data)
    out = t.read_arrow()
    assert out.schema == schema
    got = by_id(out)
    expected = data.to_pylist()
    nan = got[2].pop("f")
    expected[2].pop("f")
    assert nan != nan  # NaN partition rows are kept, NaN and all
    assert got == expected
    (third,) = (a for a in t.snapshot().files.values() if a.partition_values["i"] == "7")
    assert third.partition_values["ts"] == "2000-01-01 00:00:00.000000"
    assert third.partition_values["b"] is None


def test_partition_columns_are_not_stored_in_data_files(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    t.append(pa.table({"id": [1], "p": ["a"]}, schema=schema))
    (add,) = t.snapshot().files.values()
    stored = pq.read_table(pa.BufferReader(store.get(f"t/{unquote(add.path)}")))
    assert stored.column_names == ["id"]
    assert t.read_arrow(columns=["p"]).to_pylist() == [{"p": "a"}]


def test_appends_into_existing_partitions_add_files(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    t.append(pa.table({"id": [1, 2], "p": ["a", "b"]}, schema=schema))
    t.append(pa.table({"id": [3], "p": ["a"]}, schema=schema))
    assert len(t.snapshot().files) == 3
    assert t.snapshot().num_records == 3
    assert [r["id"] for r in by_id(t.read_arrow())] == [1, 2, 3]


def test_empty_partitioned_append_writes_no_files(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    assert t.append(schema.empty_table()) == 1
    assert t.snapshot().files == {}


@pytest.mark.parametrize(
    ("value", "dtype", "text"),
    [
        (True, pa.bool_(), "true"),
        (False, pa.bool_(), "false"),
        (-12, pa.int16(), "-12"),
        (date(2024, 1, 31), pa.date32(), "2024-01-31"),
        (datetime(2024, 1, 31, 1, 2, 3), pa.timestamp("us"), "2024-01-31 01:02:03.000000"),
        (datetime(2024, 1, 31, 1, 2, 3, 4, tzinfo=UTC), pa.timestamp("us", tz="UTC"), "2024-01-31 01:02:03.000004"),
        (Decimal("-0.05"), pa.decimal128(3, 2), "-0.05"),
        ("x y", pa.string(), "x y"),
        (None, pa.int64(), None),
    ],
    ids=str,
)
def test_partition_value_text_form(value: object, dtype: pa.DataType, text: str | None) -> None:
    assert serialize_partition_value(value) == text
    assert parse_partition_value(text, dtype) == value


def test_hive_default_partition_text_reads_as_null() -> None:
    assert parse_partition_value(HIVE_NULL, pa.string()) is None
    assert parse_partition_value("", pa.int32()) is None
    assert parse_partition_value("2024-01-01T00:00:00Z", pa.timestamp("us", tz="UTC")) == datetime(
        2024, 1, 1, tzinfo=UTC
    )


def _clone_actions(source: DeltaTable, prefix: str) -> list[Action]:
    """A shallow clone's version 1: the source's files by absolute, fully URI-encoded paths."""
    adds = [replace(a, path=prefix + a.path) for a in source.snapshot().files.values()]
    return [commit_info("CLONE"), *adds]


def _tricky_source(store: ObjectStore, path: str) -> DeltaTable:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    source = DeltaTable.create(store, path, schema, partition_by=["p"])
    source.append(pa.table({"id": [1, 2, 3], "p": ["a b", "x/y", "50%"]}, schema=schema))
    return source


def test_absolute_add_paths_in_the_same_store(store: ObjectStore) -> None:
    source = _tricky_source(store, "src dir/t")
    clone = DeltaTable.create(store, "clone", source.snapshot().schema, partition_by=["p"])
    clone.commit(1, _clone_actions(source, store.uri + "/" + encode_path("src dir/t/")))
    assert by_id(clone.read_arrow()) == by_id(source.read_arrow())


def test_absolute_add_paths_into_another_store(tmp_path: Path) -> None:
    source = _tricky_source(ObjectStore.from_uri(f"file://{tmp_path}/source lake"), "t")
    target = ObjectStore.from_uri(f"file://{tmp_path}/target")
    clone = DeltaTable.create(target, "clone", source.snapshot().schema, partition_by=["p"])
    clone.commit(1, _clone_actions(source, "file://" + encode_path(f"{tmp_path}/source lake/t/")))
    assert by_id(clone.read_arrow()) == by_id(source.read_arrow())


def test_empty_string_in_a_non_nullable_partition_column_is_refused(store: ObjectStore) -> None:
    """Delta stores an empty partition string as null, which a non-nullable column does not allow."""
    schema = pa.schema([("id", pa.int64()), pa.field("p", pa.string(), nullable=False)])
    data = pa.table({"id": [1, 2], "p": ["a", ""]}, schema=schema)
    with pytest.raises(SchemaMismatchError, match="empty strings") as err:
        write_data_files(store, "t", data, partition_columns=["p"])
    assert err.value.columns == ("p",)
    assert list(store.list("t")) == []


def test_rows_for_a_table_of_partition_columns_only_are_refused_not_lost(store: ObjectStore) -> None:
    """A table whose every column partitions it (made by another tool): its files would hold no column and so no
    rows; writing to it is refused by name and writes nothing."""
    schema = pa.schema([("p", pa.string())])
    t = DeltaTable.create(store, "t", schema, partition_by=["p"])
    with pytest.raises(SchemaMismatchError) as info:
        t.append(pa.table({"p": ["a", "b", "b"]}))
    assert list(info.value.columns) == ["p"]
    assert t.snapshot().files == {}
    assert t.read_arrow().num_rows == 0
    with pytest.raises(SchemaMismatchError):
        write_data_files(store, "t", pa.table({"p": ["a"]}), partition_columns=["p"])
    assert not [o for o in store.list("t") if o.path.endswith(".parquet")]
