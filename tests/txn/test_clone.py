"""Zero-copy clones (``lake.clone``, ``tx.clone_table``): new plain Delta tables over the source's files."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation

SCHEMA = "id long, region string"


def _rows(lake: txlake.Lakehouse | txlake.LakehouseSnapshot, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())


def _deltars_rows(lake: txlake.Lakehouse, name: str, options: dict[str, str]) -> list[int]:
    table = deltalake.DeltaTable(lake.table_location(name), storage_options=options or None)
    query = deltalake.QueryBuilder().register("t", table)
    return sorted(query.execute("SELECT id FROM t").read_all()["id"].to_pylist())


def _source(location: StoreLocation) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("src.sales", SCHEMA, partition_by=["region"])
    with lake.transaction() as tx:
        tx.append("src.sales", pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}))
    lake.create_table("src.empty", SCHEMA)
    return lake


def _data_files(lake: txlake.Lakehouse, name: str) -> set[str]:
    path = lake.snapshot().entry(name).path
    return {m.path for m in lake.store.list(path) if m.path.endswith(".parquet")}


def test_a_clone_reads_like_its_source_and_evolves_on_its_own(any_store_uri: StoreLocation) -> None:
    lake = _source(any_store_uri)
    before = lake.version()
    with lake.transaction() as tx:
        tx.append("src.sales", pa.table({"id": [4], "region": ["us"]}))
    source_files = _data_files(lake, "src.sales")

    result = lake.clone("src.sales", "dev.sales", version=before)
    assert _rows(lake, "dev.sales") == [1, 2, 3]  # as at that version
    assert _data_files(lake, "dev.sales") == set()  # zero-copy: the clone owns no data file yet
    assert lake.snapshot().delta_snapshot("dev.sales").metadata.partition_columns == ("region",)
    assert lake.snapshot(version=result.version).tables() == ["dev.sales", "src.empty", "src.sales"]

    with lake.transaction() as tx:
        tx.delete("dev.sales", "id = 1")
        tx.update("dev.sales", set={"id": "id * 10"}, where="region = 'us'")
        tx.append("dev.sales", pa.table({"id": [7], "region": ["apac"]}))
    with lake.transaction() as tx:
        tx.delete("src.sales", "id = 3")
    assert _rows(lake, "dev.sales") == [3, 7, 20]
    assert _rows(lake, "src.sales") == [1, 2, 4]
    assert source_files <= _data_files(lake, "src.sales")  # the clone's deletes removed none of them
    options = dict(any_store_uri.storage_options)
    if not any_store_uri.uri.startswith("memory://"):
        assert _deltars_rows(lake, "dev.sales", options) == [3, 7, 20]  # a plain reader follows the links
        assert _deltars_rows(lake, "src.sales", options) == [1, 2, 4]


def test_an_aborted_clone_leaves_no_table_and_every_source_file(tmp_path: Path) -> None:
    lake = _source(StoreLocation(tmp_path.as_uri(), {}))
    files = _data_files(lake, "src.sales")
    with pytest.raises(RuntimeError, match="changed my mind"), lake.transaction() as tx:
        assert tx.clone_table("src.sales", "dev.sales") == 2
        tx.delete("dev.sales", "region = 'eu'")  # drops borrowed files from the clone: never from storage
        raise RuntimeError("changed my mind")
    assert lake.tables() == ["src.empty", "src.sales"]
    assert _data_files(lake, "src.sales") == files and _rows(lake, "src.sales") == [1, 2, 3]


def test_a_namespace_clones_table_by_table_in_one_version(tmp_path: Path) -> None:
    lake = _source(StoreLocation(tmp_path.as_uri(), {}))
    first = lake.version()
    result = lake.clone("src", "backup")
    assert result.version == first + 1
    assert lake.tables("backup") == ["backup.empty", "backup.sales"]
    assert _rows(lake, "backup.sales") == [1, 2, 3] and _rows(lake, "backup.empty") == []


def test_clone_mistakes_are_typed_and_write_nothing(tmp_path: Path) -> None:
    lake = _source(StoreLocation(tmp_path.as_uri(), {}))
    version = lake.version()
    with pytest.raises(txlake.TableAlreadyExistsError):
        lake.clone("src.sales", "src.empty")
    with pytest.raises(txlake.TableNotFoundError, match="namespaces: src"):
        lake.clone("nosuch", "backup")
    with pytest.raises(txlake.TableNotFoundError):
        lake.clone("src.nosuch", "backup.x")
    with pytest.raises(txlake.InvalidArgumentError):
        lake.clone("src", "backup.sales")  # a namespace into a table name
    with pytest.raises(txlake.InvalidArgumentTypeError):
        lake.clone("src.sales", 5)  # type: ignore[arg-type]
    with pytest.raises(txlake.VersionNotFoundError):
        lake.clone("src.sales", "backup.sales", version=version + 5)
    with pytest.raises(txlake.InvalidArgumentError, match="changes in this transaction"), lake.transaction() as tx:
        tx.append("src.sales", pa.table({"id": [9], "region": ["eu"]}))
        tx.clone_table("src.sales", "dev.sales")
    assert lake.version() == version and lake.tables() == ["src.empty", "src.sales"]


def test_a_clone_keeps_properties_create_table_would_refuse(tmp_path: Path) -> None:
    """A clone copies its source's Delta configuration as it is (a mapped table's ``maxColumnId``, properties a
    Spark writer set): the property check of ``create_table`` is for what a user asks, not for a copy."""
    root = tmp_path / "lake"
    location = root / "ext" / "t"
    deltalake.write_deltalake(
        str(location),
        pa.table({"id": pa.array([1, 2], pa.int64())}),
        configuration={"delta.checkpoint.writeStatsAsStruct": "true"},
    )
    lake = txlake.connect(root.as_uri())
    lake.register_table("ext.t", "ext/t")
    lake.create_table("s.m", "id long", properties={"delta.columnMapping.mode": "name"})
    with lake.transaction() as tx:
        tx.append("s.m", pa.table({"id": [3]}))
    lake.clone("ext.t", "s.c1")
    lake.clone("s.m", "s.c2")
    assert sorted(lake.read_arrow("s.c1")["id"].to_pylist()) == [1, 2]
    assert lake.read_arrow("s.c2")["id"].to_pylist() == [3]
    configuration = lake.snapshot().delta_snapshot("s.c2").metadata.configuration
    assert configuration["delta.columnMapping.maxColumnId"] == "1"
