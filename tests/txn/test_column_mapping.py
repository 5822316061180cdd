"""``tx.alter_table(rename_columns=, drop_columns=)`` on tables that map columns: metadata-only schema changes."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.interop.deltars import TableLocation, assert_same_version
from txlake.delta.colmap import physical_name
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
