"""``lake.restore``: the lakehouse (or some tables) back to an earlier version, as one new transaction."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation


def _bank(location: StoreLocation) -> tuple[txlake.Lakehouse, int]:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("b.acc", "id long, bal long")
    lake.create_table("b.log", "id long")
    with lake.transaction() as tx:
        tx.append("b.acc", pa.table({"id": [1, 2], "bal": [10, 20]}))
        tx.append("b.log", pa.table({"id": [1]}))
    good = lake.version()
    with lake.transaction() as tx:
        tx.update("b.acc", set={"bal": "bal * 100"})
        tx.delete("b.log")
        tx.append("b.acc", pa.table({"id": [3], "bal": [30]}))
    lake.create_table("b.new", "id long")
    lake.rename_table("b.log", "b.journal")
    return lake, good


def _rows(reader: txlake.Lakehouse | txlake.LakehouseSnapshot, name: str) -> list[dict[str, int]]:
    return sorted(reader.read_arrow(name).to_pylist(), key=lambda r: r["id"])


def test_restore_brings_back_names_and_data_and_keeps_history(any_store_uri: StoreLocation) -> None:
    lake, good = _bank(any_store_uri)
    before = lake.version()
    result = lake.restore(good)
    assert result.version == before + 1
    assert lake.tables() == ["b.acc", "b.log"]  # b.new (created since) dropped, b.journal renamed back
    assert _rows(lake, "b.acc") == [{"id": 1, "bal": 10}, {"id": 2, "bal": 20}]
    assert _rows(lake, "b.log") == [{"id": 1}]
    assert _rows(lake.snapshot(version=before), "b.acc")[0] == {"id": 1, "bal": 1000}  # history kept
    assert lake.snapshot(version=before).tables() == ["b.acc", "b.journal", "b.new"]
    if not any_store_uri.uri.startswith("memory://"):
        table = deltalake.DeltaTable(
            lake.table_location("b.acc"), storage_options=any_store_uri.storage_options or None
        )
        rows = pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
        assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == _rows(lake, "b.acc")  # a plain reader agrees
        assert table.history(1)[0]["operation"] == "RESTORE"


def test_restoring_the_lakehouse_restores_its_namespaces(any_store_uri: StoreLocation) -> None:
    """Namespaces are part of the lakehouse state: one created since goes, one dropped since comes back with
    its properties, one dropped and created again with other properties (or in another case) gets its name
    and properties of then back, also when it holds tables until the restore; a restore of some tables
    leaves the namespaces alone."""
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    lake.create_namespace("keep", {"owner": "alice"})
    lake.create_namespace("gone", {"owner": "bob"})
    lake.create_namespace("Meta", {"owner": "dan"})
    lake.create_namespace("x", {"k": "old"})
    lake.create_table("keep.t", pa.schema([("id", pa.int64())]))
    lake.create_table("x.t", pa.schema([("id", pa.int64())]))
    then = lake.version()
    lake.drop_namespace("gone")
    lake.drop_namespace("meta")
    lake.create_namespace("META", {"owner": "eve"})
    lake.create_namespace("new", {"owner": "carol"})
    lake.create_table("new.t", pa.schema([("id", pa.int64())]))
    lake.drop_table("x.t")
    lake.drop_namespace("x")
    lake.create_namespace("X", {"k": "new"})  # not empty once created again: only the restore empties it
    lake.create_table("X.t2", pa.schema([("id", pa.int64())]))
    lake.restore(then, tables=["keep.t"])
    assert sorted(lake.namespaces()) == ["META", "X", "keep", "new"]
    lake.restore(then)
    state = lake.snapshot().state
    assert dict(state.namespaces) == {
        "keep": {"owner": "alice"},
        "gone": {"owner": "bob"},
        "Meta": {"owner": "dan"},
        "x": {"k": "old"},
    }
    assert lake.tables() == ["keep.t", "x.t"]
    assert lake.snapshot(then).state.namespaces == state.namespaces


def test_restore_by_tag_or_timestamp_and_of_some_tables(tmp_path: Path) -> None:
    lake, good = _bank(StoreLocation(tmp_path.as_uri(), {}))
    lake.tag("good", version=good)
    when = datetime.fromtimestamp(lake.context.glog.decided_at_ms(good) / 1000, UTC)
    lake.restore(timestamp=when, tables=["b.acc"])  # only b.acc: the rest stays as it is
    assert lake.tables() == ["b.acc", "b.journal", "b.new"]
    assert _rows(lake, "b.acc") == [{"id": 1, "bal": 10}, {"id": 2, "bal": 20}]
    assert _rows(lake, "b.journal") == []
    version = lake.version()
    assert lake.restore(tag="good", tables=["b.acc"]).read_only  # already so: nothing to commit
    assert lake.version() == version
    lake.restore(tag="good")
    assert lake.tables() == ["b.acc", "b.log"] and _rows(lake, "b.log") == [{"id": 1}]


def test_restore_refuses_what_it_cannot_do_and_writes_nothing(tmp_path: Path) -> None:
    lake, good = _bank(StoreLocation(tmp_path.as_uri(), {}))
    lake.drop_table("b.journal")
    lake.create_table("b.log", "id long")  # the dropped table's old name is taken now
    version = lake.version()
    with pytest.raises(txlake.InvalidArgumentError, match="its name is taken"):
        lake.restore(good, tables=["b.log"])
    with pytest.raises(txlake.InvalidArgumentError, match="version=, timestamp= or tag="):
        lake.restore()
    with pytest.raises(txlake.TableNotFoundError):
        lake.restore(good, tables=["b.nope"])
    with pytest.raises(txlake.TagNotFoundError):
        lake.restore(tag="nope")
    # a file of that version deleted outside txlake: refused before anything is committed
    then = lake.snapshot(version=good).delta_snapshot("b.acc")
    path = lake.snapshot(version=good).entry("b.acc").path
    gone = next(iter(then.files))
    (tmp_path / path / gone).unlink()
    with pytest.raises(txlake.DataFileNotFoundError):
        lake.restore(good, tables=["b.acc"])
    assert lake.version() == version and lake.tables() == ["b.acc", "b.log", "b.new"]


def test_a_writer_that_read_what_restore_replaced_conflicts(tmp_path: Path) -> None:
    lake, good = _bank(StoreLocation(tmp_path.as_uri(), {}))
    writer = lake.transaction(isolation="write_serializable", redo=False)
    writer.update("b.acc", set={"bal": "bal + 1"}, where="id = 3")
    lake.restore(good, tables=["b.acc"])
    with pytest.raises(txlake.ConflictError):
        writer.commit()
    assert _rows(lake, "b.acc") == [{"id": 1, "bal": 10}, {"id": 2, "bal": 20}]


def test_string_arguments_where_lists_are_expected_are_refused(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    with pytest.raises(txlake.InvalidArgumentTypeError, match=r"partition_by must be a list of column names.*\['id'\]"):
        lake.create_table("a.p", "id long, v string", partition_by="id")  # type: ignore[arg-type]
    lake.create_table("a.t", "id long")
    with pytest.raises(txlake.InvalidArgumentTypeError, match="tables must be a list of table names"):
        lake.restore(version=1, tables="a.t")  # type: ignore[arg-type]


def test_restore_undoes_a_swap_of_two_names(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    for name, value in (("ns.x", 1), ("ns.y", 2)):
        lake.create_table(name, "v bigint")
        with lake.transaction() as tx:
            tx.append(name, pa.table({"v": [value]}))
    before = lake.version()
    with lake.transaction() as tx:  # x and y trade names
        tx.rename_table("ns.x", "ns.tmp")
        tx.rename_table("ns.y", "ns.x")
        tx.rename_table("ns.tmp", "ns.y")
    assert lake.read_arrow("ns.x")["v"].to_pylist() == [2]
    with pytest.raises(txlake.InvalidArgumentError, match="another table holds its name"):
        lake.restore(before, tables=["ns.x"])  # its name of then is y's now: y must come back too
    lake.restore(before, tables=["ns.x", "ns.y"])
    assert (lake.read_arrow("ns.x")["v"].to_pylist(), lake.read_arrow("ns.y")["v"].to_pylist()) == ([1], [2])
    with lake.transaction() as tx:  # swapped again, then the whole lakehouse restored
        tx.rename_table("ns.x", "ns.tmp")
        tx.rename_table("ns.y", "ns.x")
        tx.rename_table("ns.tmp", "ns.y")
    lake.restore(before)
    assert sorted(lake.tables()) == ["ns.x", "ns.y"]
    assert (lake.read_arrow("ns.x")["v"].to_pylist(), lake.read_arrow("ns.y")["v"].to_pylist()) == ([1], [2])


def test_restore_refuses_a_version_whose_deletion_vector_file_is_gone(tmp_path: Path) -> None:
    """The restored version's DV files are checked as its data files are: a missing one is refused and
    nothing is committed (the table stays readable); a DV file the live table still uses is not looked up."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", "id long", properties={"delta.enableDeletionVectors": "true"})
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": list(range(10))}))
    with lake.transaction() as tx:
        tx.delete("s.t", where="id = 1")
    target = lake.version()
    (first_dv,) = (tmp_path / "lake" / "s" / "t").glob("deletion_vector_*.bin")
    assert lake.restore(target).version == lake.version()  # nothing to do: the same DV is live
    with lake.transaction() as tx:
        tx.delete("s.t", where="id = 2")
    first_dv.unlink()  # needed by `target` only
    before = lake.version()
    with pytest.raises(txlake.DataFileNotFoundError) as info:
        lake.restore(target)
    assert info.value.path is not None and info.value.path.endswith(first_dv.name)
    assert lake.version() == before
    assert sorted(lake.read_arrow("s.t")["id"].to_pylist()) == [0, *range(3, 10)]


def test_restore_keeps_the_highest_column_id_so_new_columns_never_reuse_one(tmp_path: Path) -> None:
    """In id mode a restore to before an added column keeps ``maxColumnId``: the next added column gets a
    fresh id, not the one of the column the restore removed (whose files still hold it)."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", "id long", properties={"delta.columnMapping.mode": "id"})
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1]}))
    target = lake.version()
    with lake.transaction() as tx:
        tx.alter_table("s.t", add_columns="secret string")
        tx.append("s.t", pa.table({"id": [2], "secret": ["x"]}))
    lake.restore(target)
    assert lake.snapshot().delta_snapshot("s.t").metadata.configuration["delta.columnMapping.maxColumnId"] == "2"
    with lake.transaction() as tx:
        tx.alter_table("s.t", add_columns="note string")
    field = lake.snapshot().delta_snapshot("s.t").schema.field("note")
    assert field.metadata[b"delta.columnMapping.id"] == b"3"
    assert lake.read_arrow("s.t").to_pylist() == [{"id": 1, "note": None}]
    assert _deltars_rows_with_note(lake) == [{"id": 1, "note": None}]


def _deltars_rows_with_note(lake: txlake.Lakehouse) -> list[dict[str, object]]:
    table = deltalake.DeltaTable(lake.table_location("s.t"))
    return pa.table(
        deltalake.QueryBuilder().register("t", table).execute("SELECT id, note FROM t").read_all()
    ).to_pylist()
