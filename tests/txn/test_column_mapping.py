"""``tx.alter_table(rename_columns=, drop_columns=)`` on tables that map columns: metadata-only schema changes."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.interop.deltars import TableLocation, assert_same_version
from txlake.delta.colmap import physical_name
from txlake.delta.renames import format_column_path, parse_column_path
from txlake.delta.schema import normalize_schema
from txlake.expr import parse_predicate
from txlake.expr.stats import FileStats
from txlake.storage import ObjectStore

MAPPED = {"delta.columnMapping.mode": "name"}


def _lake(tmp_path: Path, properties: dict[str, str] | None = None) -> txlake.Lakehouse:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table(
        "s.t", "id long, v string, qty int, region string", partition_by=["region"], properties=properties or MAPPED
    )
    with lake.transaction() as tx:
        data = pa.table({"id": [1, 2], "v": ["a", "b"], "qty": pa.array([10, 20], pa.int32()), "region": ["eu", "us"]})
        tx.append("s.t", data)
    return lake


def _files(lake: txlake.Lakehouse) -> set[str]:
    return set(lake.snapshot().delta_snapshot("s.t").files)


def test_rename_and_drop_change_only_the_metadata_and_every_reader_agrees(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    files = _files(lake)
    before = lake.snapshot().schema("s.t")
    with lake.transaction() as tx:
        tx.alter_table("s.t", rename_columns={"v": "label", "REGION": "area"}, drop_columns=["qty"])
        assert tx.schema("s.t").names == ["id", "label", "area"]
        tx.append("s.t", pa.table({"id": [3], "label": ["c"], "area": ["eu"]}))
    assert _files(lake) >= files  # no file rewritten
    after = lake.snapshot().schema("s.t")
    assert physical_name(after.field("label")) == physical_name(before.field("v"))
    assert lake.snapshot().delta_snapshot("s.t").partition_columns == ("area",)
    rows = sorted(lake.read_arrow("s.t").to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "label": "a", "area": "eu"},
        {"id": 2, "label": "b", "area": "us"},
        {"id": 3, "label": "c", "area": "eu"},
    ]
    assert lake.read_arrow("s.t", where="area = 'eu' AND label >= 'b'")["id"].to_pylist() == [3]
    # a column added again under a dropped name is a new column: the old values stay gone
    with lake.transaction() as tx:
        tx.alter_table("s.t", add_columns="qty int")
    assert sorted(lake.read_arrow("s.t")["qty"].to_pylist(), key=str) == [None, None, None]
    old = lake.snapshot(version=lake.version() - 2)  # time travel reads the old names
    assert sorted(old.read_arrow("s.t")["qty"].to_pylist()) == [10, 20]
    loc = TableLocation(ObjectStore.from_uri(lake.table_location("s.t")), "", {})
    for version in range(lake.snapshot().delta_snapshot("s.t").version + 1):
        assert_same_version(loc, version, readers=("datafusion",), predicates={"id > 1": lambda r: r["id"] > 1})


def test_rename_and_drop_need_column_mapping_and_mistakes_change_nothing(tmp_path: Path) -> None:
    plain = _lake(tmp_path / "plain", {"owner": "ops"})
    with pytest.raises(txlake.UnsupportedFeatureError) as info, plain.transaction() as tx:
        tx.alter_table("s.t", rename_columns={"v": "w"})
    assert info.value.feature == "columnMapping"
    with pytest.raises(txlake.UnsupportedFeatureError), plain.transaction() as tx:
        tx.alter_table("s.t", drop_columns=["v"])
    lake = _lake(tmp_path / "mapped")
    version = lake.version()
    for kwargs, error in (
        ({"rename_columns": {"nope": "x"}}, txlake.SchemaMismatchError),
        ({"rename_columns": {"v": "ID"}}, txlake.SchemaMismatchError),  # names are case-insensitive
        ({"rename_columns": {"v": "x", "qty": "x"}}, txlake.SchemaMismatchError),
        ({"rename_columns": {"v": 5}}, txlake.InvalidArgumentTypeError),
        ({"rename_columns": ["v"]}, txlake.InvalidArgumentTypeError),
        ({"drop_columns": ["region"]}, txlake.InvalidArgumentError),  # a partition column
        ({"drop_columns": ["nope"]}, txlake.SchemaMismatchError),
        ({"drop_columns": "v"}, txlake.InvalidArgumentTypeError),
        ({"drop_columns": ["v"], "rename_columns": {"v": "w"}}, txlake.InvalidArgumentError),
        ({"drop_columns": ["v"], "widen": {"qty": "bigint"}}, txlake.InvalidArgumentError),
    ):
        with pytest.raises(error), lake.transaction() as tx:
            tx.alter_table("s.t", **kwargs)  # type: ignore[arg-type]
    assert lake.version() == version
    assert lake.snapshot().schema("s.t").names == ["id", "v", "qty", "region"]
    with pytest.raises(txlake.UnsupportedFeatureError), lake.transaction() as tx:
        tx.create_table("s.u", "id long", properties={"delta.columnMapping.mode": "bogus"})
    assert lake.version() == version and "s.u" not in lake.tables("s")


@pytest.mark.parametrize("change", ["rename", "drop"])
def test_a_rename_or_drop_and_a_concurrent_write_conflict(tmp_path: Path, change: str) -> None:
    lake = _lake(tmp_path)
    kwargs = {"rename_columns": {"v": "w"}} if change == "rename" else {"drop_columns": ["v"]}
    for alter_first in (True, False):
        alter = lake.transaction()
        alter.alter_table("s.t", **kwargs)  # type: ignore[arg-type]
        write = lake.transaction(isolation="snapshot")
        write.update("s.t", {"v": "'z'"}, "id = 1")
        first, second = (alter, write) if alter_first else (write, alter)
        first.commit()
        with pytest.raises(txlake.MetadataChangedError):
            second.commit()
        if alter_first:  # back to the original schema for the second round
            lake = _lake(tmp_path / "again")
    assert lake.snapshot().schema("s.t").names == ["id", "v", "qty", "region"]
    assert sorted(lake.read_arrow("s.t")["v"].to_pylist()) == ["b", "z"]


def test_deltars_reads_renamed_partition_columns(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    with lake.transaction() as tx:
        tx.alter_table("s.t", rename_columns={"region": "zone"})
    dt = deltalake.DeltaTable(lake.table_location("s.t"))
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT id, zone FROM t ORDER BY id").read_all())
    assert got.to_pylist() == [{"id": 1, "zone": "eu"}, {"id": 2, "zone": "us"}]


def test_a_plain_table_made_from_a_mapped_tables_schema_stays_plain(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    schema = lake.snapshot().schema("s.t")  # carries the physical names in its field metadata
    lake.create_table("s.copy", schema)
    with lake.transaction() as tx:
        tx.append("s.copy", lake.read_arrow("s.t"))
        tx.append("s.copy", lake.read_arrow("s.t").append_column("extra", pa.array([1, 2])), schema_mode="merge")
    assert all(physical_name(f) == f.name for f in lake.snapshot().schema("s.copy"))
    dt = deltalake.DeltaTable(lake.table_location("s.copy"))
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT v, extra FROM t").read_all())
    assert sorted(got.to_pylist(), key=str) == sorted(
        [{"v": "a", "extra": None}, {"v": "b", "extra": None}, {"v": "a", "extra": 1}, {"v": "b", "extra": 2}], key=str
    )


# ------------------------------------------------------------------------------------------ nested fields

NESTED = "id long, s struct<a: int, c: string, inner: struct<x: int, y: int>>, `dot.ted` struct<k: int>, region string"


def _nested_lake(tmp_path: Path, properties: dict[str, str] | None = None) -> txlake.Lakehouse:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.n", NESTED, partition_by=["region"], properties=properties or MAPPED)
    schema = lake.snapshot().schema("s.n")
    with lake.transaction() as tx:  # two files: ids 1-2 (s.a 1..2) and ids 3-4 (s.a 30..40)
        for ids, region in (([1, 2], "eu"), ([3, 4], "us")):
            rows = [
                {
                    "id": i,
                    "s": {"a": i * (1 if i < 3 else 10), "c": f"c{i}", "inner": {"x": i, "y": -i}},
                    "dot.ted": {"k": i},
                    "region": region,
                }
                for i in ids
            ]
            tx.append("s.n", pa.Table.from_pylist(rows, schema=normalize_schema(schema)))
    return lake


@pytest.mark.parametrize("mode", ["name", "id"])
def test_nested_fields_rename_and_drop_as_metadata_and_every_reader_agrees(tmp_path: Path, mode: str) -> None:
    lake = _nested_lake(tmp_path, {"delta.columnMapping.mode": mode})
    files = set(lake.snapshot().delta_snapshot("s.n").files)
    with lake.transaction() as tx:
        tx.alter_table(
            "s.n",
            rename_columns={"s.a": "b", "S.Inner.X": "ex", "`dot.ted`.k": "key", "s": "t"},
            drop_columns=["s.c", "s.inner.y"],
        )
        assert tx.schema("s.n").names == ["id", "t", "dot.ted", "region"]
        row = {"id": 5, "t": {"b": 500, "inner": {"ex": 5}}, "dot.ted": {"key": 5}, "region": "eu"}
        tx.append("s.n", pa.Table.from_pylist([row], schema=normalize_schema(tx.schema("s.n"))))
    assert set(lake.snapshot().delta_snapshot("s.n").files) >= files  # no file rewritten
    schema = lake.snapshot().schema("s.n")
    assert str(schema.field("t").type) == "struct<b: int32, inner: struct<ex: int32>>"
    got = sorted(lake.read_arrow("s.n").to_pylist(), key=lambda r: r["id"])
    assert [r["t"] for r in got] == [
        {"b": 1, "inner": {"ex": 1}},
        {"b": 2, "inner": {"ex": 2}},
        {"b": 30, "inner": {"ex": 3}},
        {"b": 40, "inner": {"ex": 4}},
        {"b": 500, "inner": {"ex": 5}},
    ]
    assert [r["dot.ted"] for r in got] == [{"key": i} for i in range(1, 6)]
    # predicates on the renamed fields, and the stats (keyed by physical names) still prune
    assert sorted(lake.read_arrow("s.n", where="t.b >= 30 AND t.inner.ex < 5")["id"].to_pylist()) == [3, 4]
    assert lake.read_arrow("s.n", where="`dot.ted`.key = 2")["id"].to_pylist() == [2]
    snap = lake.snapshot().delta_snapshot("s.n")
    predicate = parse_predicate("t.b > 100").bind(schema)
    kept = [a for a in snap.files.values() if predicate.may_match(FileStats.from_add(a, schema, ["region"]))]
    assert len(kept) == 1 and len(snap.files) == 3
    with lake.transaction() as tx:
        assert tx.delete("s.n", "t.inner.ex = 2") == 1
        assert tx.update("s.n", {"id": "id * 100"}, "t.b = 30") == 1
    loc = TableLocation(ObjectStore.from_uri(lake.table_location("s.n")), "", {})
    for version in range(lake.snapshot().delta_snapshot("s.n").version + 1):
        assert_same_version(
            loc,
            version,
            readers=("datafusion",),
            predicates={"t.b >= 30": lambda r: r["t"]["b"] >= 30}
            if version >= 2
            else {"s.a >= 30": lambda r: r["s"]["a"] >= 30},
        )
    old = lake.snapshot(version=lake.version() - 2)  # time travel reads the old names
    assert sorted(r["s"]["c"] for r in old.read_arrow("s.n").to_pylist()) == ["c1", "c2", "c3", "c4"]


def test_nested_rename_and_drop_mistakes_are_typed_and_change_nothing(tmp_path: Path) -> None:
    plain = _nested_lake(tmp_path / "plain", {"owner": "ops"})
    for kwargs in ({"rename_columns": {"s.a": "b"}}, {"drop_columns": ["s.c"]}):
        with pytest.raises(txlake.UnsupportedFeatureError) as info, plain.transaction() as tx:
            tx.alter_table("s.n", **kwargs)  # type: ignore[arg-type]
        assert info.value.feature == "columnMapping"
    lake = _nested_lake(tmp_path / "mapped")
    version = lake.version()
    for kwargs, error in (
        ({"rename_columns": {"s.nope": "x"}}, txlake.SchemaMismatchError),  # unknown path
        ({"drop_columns": ["nope.a"]}, txlake.SchemaMismatchError),
        ({"drop_columns": ["dot.ted.k"]}, txlake.SchemaMismatchError),  # a dotted name needs backticks
        ({"rename_columns": {"s.a.z": "x"}}, txlake.SchemaMismatchError),  # s.a is no struct
        ({"rename_columns": {"region.x": "y"}}, txlake.SchemaMismatchError),  # a partition column has no fields
        ({"drop_columns": ["region"]}, txlake.InvalidArgumentError),  # a partition column
        ({"rename_columns": {"s.a": "C"}}, txlake.SchemaMismatchError),  # s.c exists (case-insensitive)
        ({"rename_columns": {"s.a": "x", "s.c": "x"}}, txlake.SchemaMismatchError),
        ({"drop_columns": ["s.a", "s.c", "s.inner"]}, txlake.InvalidArgumentError),  # a struct with no field left
        ({"drop_columns": ["s"], "rename_columns": {"s.a": "b"}}, txlake.InvalidArgumentError),
        ({"drop_columns": ["s.a"], "rename_columns": {"s.a": "b"}}, txlake.InvalidArgumentError),
        ({"drop_columns": ["s", "s.a"]}, txlake.InvalidArgumentError),
        ({"drop_columns": ["`s"]}, txlake.InvalidArgumentError),  # unclosed backtick
        ({"drop_columns": ["s..a"]}, txlake.InvalidArgumentError),
        ({"rename_columns": {"s.a": ""}}, txlake.InvalidArgumentTypeError),
    ):
        with pytest.raises(error), lake.transaction() as tx:
            tx.alter_table("s.n", **kwargs)  # type: ignore[arg-type]
    assert lake.version() == version
    with pytest.raises(txlake.InvalidArgumentError, match="both renamed and dropped"), lake.transaction() as tx:
        tx.alter_table("s.n", rename_columns={"s.a": "b"}, drop_columns=["s.a"])
    inside = r"s\.a \(in s\) is a field of a column dropped"
    with pytest.raises(txlake.InvalidArgumentError, match=inside), lake.transaction() as tx:
        tx.alter_table("s.n", rename_columns={"s.a": "b"}, drop_columns=["s"])
    assert lake.snapshot().schema("s.n") == normalize_schema(lake.snapshot().schema("s.n"))
    assert str(lake.snapshot().schema("s.n").field("s").type).startswith("struct<a: int32, c: string")


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("a", ("a",)),
        ("s.a", ("s", "a")),
        ("`a.b`.c", ("a.b", "c")),
        ("`we``ird`", ("we`ird",)),
        ("s.`x y`", ("s", "x y")),
    ],
)
def test_column_paths_parse_as_spark_writes_them(text: str, path: tuple[str, ...]) -> None:
    assert parse_column_path(text) == path
    assert parse_column_path(format_column_path(path)) == path


@pytest.mark.parametrize("text", ["", "a.", ".a", "`a", "a`b", "`a`b", "a..b"])
def test_malformed_column_paths_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_column_path(text)


def test_no_table_is_left_with_partition_columns_only(tmp_path: Path) -> None:
    """As Spark: neither create_table nor drop_columns may leave only partition columns (their files would hold
    no column, and a Parquet file of no columns holds no rows)."""
    lake = _lake(tmp_path)
    with pytest.raises(txlake.errors.InvalidArgumentError) as info, lake.transaction() as tx:
        tx.alter_table("s.t", drop_columns=["id", "v", "qty"])
    assert info.value.argument == "drop_columns"
    assert lake.read_arrow("s.t").num_rows == 2
    with pytest.raises(txlake.errors.InvalidArgumentError) as info:
        lake.create_table("s.u", "p string", partition_by=["p"])
    assert info.value.argument == "partition_by"
    assert "s.u" not in lake.tables("s")


def test_rename_and_drop_rewrite_the_data_skipping_stats_columns(tmp_path: Path) -> None:
    """As Spark: ``delta.dataSkippingStatsColumns`` follows renamed columns and struct fields and loses dropped
    ones, so a column added later under an old name does not become a stats column."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table(
        "s.t",
        "id long, a long, c long, s struct<x: long, y: long>",
        properties={**MAPPED, "delta.dataSkippingStatsColumns": "a, c,s.x,S.y,`id`"},
    )
    with lake.transaction() as tx:
        tx.alter_table("s.t", rename_columns={"a": "b", "s.x": "z"}, drop_columns=["c", "s.y"])
    configuration = lake.snapshot().delta_snapshot("s.t").metadata.configuration
    assert configuration["delta.dataSkippingStatsColumns"] == "b,s.z,`id`"
    with lake.transaction() as tx:
        tx.alter_table("s.t", rename_columns={"s": "r"})
    configuration = lake.snapshot().delta_snapshot("s.t").metadata.configuration
    assert configuration["delta.dataSkippingStatsColumns"] == "b,r.z,`id`"
