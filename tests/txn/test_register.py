"""``lake.register_table``: an existing Delta table joins the lakehouse; ``restore`` brings dropped tables back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake


def _rows(lake: txlake.Lakehouse | txlake.LakehouseSnapshot, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())


def _deltars_rows(location: str) -> list[int]:
    table = deltalake.DeltaTable(location)
    result = deltalake.QueryBuilder().register("t", table).execute("SELECT id FROM t").read_all()
    return sorted(result["id"].to_pylist())


def test_a_delta_table_written_by_delta_rs_joins_at_its_current_version(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    before = lake.version()
    location = root / "ext" / "sales"
    deltalake.write_deltalake(str(location), pa.table({"id": pa.array([1, 2], pa.int64())}))
    deltalake.write_deltalake(str(location), pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    assert lake.register_table("ext.sales", "ext/sales") == 1
    assert _rows(lake, "ext.sales") == [1, 2, 3]
    assert "ext.sales" not in lake.snapshot(before).tables()  # time travel: it joined at a later version
    with lake.transaction() as tx:
        tx.append("ext.sales", pa.table({"id": [4]}))
    assert _deltars_rows(str(location)) == [1, 2, 3, 4]
    deltalake.write_deltalake(str(location), pa.table({"id": pa.array([5], pa.int64())}), mode="append")
    lake.sync()  # a plain writer's later commit is adopted like any other
    assert _rows(lake, "ext.sales") == [1, 2, 3, 4, 5]
    assert lake.vacuum(timedelta(0), force=True).files_deleted == 0  # every file is live

    with pytest.raises(txlake.TableAlreadyExistsError, match=r"already, as 'ext\.sales'"):
        lake.register_table("ext.again", location.as_uri())  # the same Delta table (by its id)
    with pytest.raises(txlake.InvalidArgumentError, match="outside the lakehouse root"):
        lake.register_table("ext.elsewhere", (tmp_path / "elsewhere").as_uri())
    with pytest.raises(txlake.TableNotFoundError, match="no Delta table"):
        lake.register_table("ext.nothing", "ext/nothing")
    with pytest.raises(txlake.InvalidArgumentError, match="not a table location"):
        lake.register_table("ext.log", "_txlake/log")
    assert lake.tables() == ["ext.sales"]


def test_restore_brings_dropped_tables_back(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("b.keep", "id long")
    lake.create_table("b.gone", "id long")
    with lake.transaction() as tx:
        tx.append("b.keep", pa.table({"id": [1]}))
        tx.append("b.gone", pa.table({"id": [2, 3]}))
    lake.tag("good")
    lake.drop_table("b.gone")
    with lake.transaction() as tx:
        tx.append("b.keep", pa.table({"id": [9]}))
    lake.restore(tag="good")
    assert lake.tables() == ["b.gone", "b.keep"]
    assert _rows(lake, "b.gone") == [2, 3] and _rows(lake, "b.keep") == [1]
    assert _deltars_rows(lake.table_location("b.gone")) == [2, 3]
    with lake.transaction() as tx:  # writable as before
        tx.append("b.gone", pa.table({"id": [4]}))
    assert _rows(lake, "b.gone") == [2, 3, 4]

    lake.drop_table("b.gone")
    lake.create_table("b.gone", "id long")  # the name is someone else's now
    with pytest.raises(txlake.InvalidArgumentError, match="its name is taken"):
        lake.restore(tag="good", tables=["b.gone"])
    lake.restore(tag="good")  # the whole lakehouse: the newer b.gone is dropped, the old one comes back
    assert _rows(lake, "b.gone") == [2, 3]


def test_restore_of_a_namespace_after_drop_rename_and_alter(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    for name in ("n.a", "n.b", "n.c"):
        lake.create_table(name, "id int")
        with lake.transaction() as tx:
            tx.append(name, pa.table({"id": pa.array([1, 2], pa.int32())}))
    lake.tag("before")
    lake.drop_table("n.a")
    lake.rename_table("n.b", "n.b2")
    with lake.transaction() as tx:
        tx.alter_table("n.c", add_columns="note string", widen={"id": "bigint"}, set_properties={"owner": "x"})
        tx.append("n.c", pa.table({"id": [3], "note": ["new"]}))
    lake.restore(tag="before", tables=["n.a", "n.b", "n.c"])
    assert lake.tables("n") == ["n.a", "n.b", "n.c"]
    for name in ("n.a", "n.b", "n.c"):
        assert lake.snapshot().schema(name) == pa.schema([("id", pa.int32())]), name
        assert _rows(lake, name) == [1, 2], name
        assert _deltars_rows(lake.table_location(name)) == [1, 2], name
    with lake.transaction() as tx:  # and they take writes as before
        tx.append("n.c", pa.table({"id": pa.array([3], pa.int32())}))
    assert _rows(lake, "n.c") == [1, 2, 3]


def test_a_location_that_is_not_a_string_is_a_type_error(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    with pytest.raises(txlake.InvalidArgumentTypeError):
        lake.register_table("ext.x", 5)  # type: ignore[arg-type]
    with pytest.raises(txlake.InvalidArgumentError):
        lake.register_table("ext.x", "  ")


def test_a_registered_tables_own_checkpoint_interval_is_honoured(tmp_path: Path) -> None:
    """``delta.checkpointInterval`` in the table's Delta configuration (not in its catalog entry) decides when
    txlake writes its Delta checkpoints; delta-rs reads the table from them."""
    location = tmp_path / "ext" / "t"
    deltalake.write_deltalake(
        str(location), pa.table({"id": pa.array([0], pa.int64())}), configuration={"delta.checkpointInterval": "2"}
    )
    lake = txlake.connect(tmp_path.as_uri())
    lake.register_table("ext.t", "ext/t")
    assert "delta.checkpointInterval" not in lake.snapshot().entry("ext.t").properties
    for i in range(1, 5):
        with lake.transaction() as tx:
            tx.append("ext.t", pa.table({"id": [i]}))
    checkpoints = sorted(p.name for p in (location / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == [f"{2:020d}.checkpoint.parquet", f"{4:020d}.checkpoint.parquet"]
    assert _deltars_rows(str(location)) == [0, 1, 2, 3, 4]
