"""``tx.alter_table``: new nullable columns and table properties as a transactional metadata change."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation


def _lake(location: StoreLocation) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("s.t", "id long")
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1]}))
    return lake


def test_added_columns_read_as_null_in_old_files_and_plain_readers_agree(any_store_uri: StoreLocation) -> None:
    lake = _lake(any_store_uri)
    with lake.transaction() as tx:
        tx.alter_table("s.t", add_columns="note string", set_properties={"owner": "ops"})
        assert tx.schema("s.t").names == ["id", "note"]  # the transaction sees its own change
        tx.append("s.t", pa.table({"id": [2], "note": ["new"]}))
        assert tx.read_arrow("s.t").sort_by("id").to_pylist() == [{"id": 1, "note": None}, {"id": 2, "note": "new"}]
    assert lake.snapshot().schema("s.t").names == ["id", "note"]
    assert lake.snapshot().entry("s.t").properties == {"owner": "ops"}
    assert lake.snapshot().delta_snapshot("s.t").metadata.configuration["owner"] == "ops"
    assert lake.snapshot(version=lake.version() - 1).schema("s.t").names == ["id"]  # time travel keeps the old one
    if not any_store_uri.uri.startswith("memory://"):
        table = deltalake.DeltaTable(lake.table_location("s.t"), storage_options=any_store_uri.storage_options or None)
        rows = pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
        assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "note": None}, {"id": 2, "note": "new"}]


def test_alter_and_a_concurrent_write_of_the_table_conflict(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    for first_alters in (True, False):
        alter = lake.transaction()
        alter.alter_table("s.t", set_properties={"round": str(first_alters)})
        append = lake.transaction(isolation="snapshot")
        append.append("s.t", pa.table({"id": [9]}))
        first, second = (alter, append) if first_alters else (append, alter)
        first.commit()
        with pytest.raises(txlake.MetadataChangedError):
            second.commit()
    assert lake.read_arrow("s.t").num_rows == 2  # one append got in, in the second round


def test_alter_mistakes_are_typed_and_change_nothing(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    version = lake.version()
    for kwargs, error in (
        ({"add_columns": "ID long"}, txlake.SchemaMismatchError),  # names are case-insensitive
        ({"add_columns": "x long NOT NULL"}, txlake.InvalidArgumentError),
        ({"add_columns": "x long, x string"}, txlake.InvalidArgumentError),  # the DDL itself names x twice
        ({"add_columns": "t timestamp_ntz"}, txlake.UnsupportedFeatureError),  # would need a protocol upgrade
        ({"set_properties": {"delta.columnMapping.mode": "name"}}, txlake.UnsupportedFeatureError),
        ({"set_properties": {"owner": 5}}, txlake.InvalidArgumentTypeError),
        ({"add_columns": 5}, txlake.InvalidArgumentTypeError),
        ({}, txlake.InvalidArgumentError),
    ):
        with pytest.raises(error), lake.transaction() as tx:
            tx.alter_table("s.t", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(txlake.TableNotFoundError), lake.transaction() as tx:
        tx.alter_table("s.nope", add_columns="x long")
    assert lake.version() == version and lake.snapshot().schema("s.t").names == ["id"]


def test_append_with_schema_mode_merge_adds_the_new_columns(tmp_path: Path) -> None:
    lake = _lake(StoreLocation(tmp_path.as_uri(), {}))
    wider = pa.table({"id": [2], "Tier": ["vip"]})
    with pytest.raises(txlake.SchemaMismatchError), lake.transaction() as tx:
        tx.append("s.t", wider)  # strict by default
    with lake.transaction() as tx:
        tx.append("s.t", wider, schema_mode="merge")
        tx.append("s.t", pa.table({"id": [3]}), schema_mode="merge")  # fewer columns: nothing to add
    assert lake.snapshot().schema("s.t").names == ["id", "Tier"]
    rows = sorted(lake.read_arrow("s.t").to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "Tier": None}, {"id": 2, "Tier": "vip"}, {"id": 3, "Tier": None}]
    with pytest.raises(txlake.InvalidArgumentError), lake.transaction() as tx:
        tx.append("s.t", wider, schema_mode="evolve")  # type: ignore[arg-type]


def test_widening_a_column_rewrites_the_table_for_every_reader(any_store_uri: StoreLocation) -> None:
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    lake.create_table(
        "s.w", "id int, qty smallint, price float, amount decimal(5,2), region string", partition_by=["region"]
    )
    with lake.transaction() as tx:
        tx.append(
            "s.w",
            pa.table(
                {"id": [1, 2], "qty": [3, 4], "price": [1.5, 2.5], "amount": [None, None], "region": ["eu", "us"]}
            ).cast(lake.snapshot().schema("s.w")),
        )
    before = lake.version()
    with lake.transaction() as tx:
        tx.alter_table("s.w", widen={"id": "bigint", "qty": pa.int32(), "price": "double", "amount": "decimal(10,3)"})
        tx.append(
            "s.w",
            pa.table({"id": [2**40], "qty": [70000], "price": [1e300], "amount": [None], "region": ["eu"]}).cast(
                tx.schema("s.w")
            ),
        )
    schema = lake.snapshot().schema("s.w")
    assert [str(schema.field(c).type) for c in ("id", "qty", "price", "amount")] == [
        "int64",
        "int32",
        "double",
        "decimal128(10, 3)",
    ]
    assert sorted(lake.read_arrow("s.w")["id"].to_pylist()) == [1, 2, 2**40]
    assert lake.snapshot(before).schema("s.w").field("id").type == pa.int32()  # time travel: the old schema
    assert sorted(lake.snapshot(before).read_arrow("s.w")["id"].to_pylist()) == [1, 2]
    if not any_store_uri.uri.startswith("memory://"):
        table = deltalake.DeltaTable(lake.table_location("s.w"), storage_options=any_store_uri.storage_options or None)
        rows = deltalake.QueryBuilder().register("t", table).execute("SELECT id, qty FROM t ORDER BY id").read_all()
        assert rows["id"].to_pylist() == [1, 2, 2**40] and rows["qty"].to_pylist() == [3, 4, 70000]
    with pytest.raises(txlake.InvalidArgumentError, match="only widening"), lake.transaction() as tx:
        tx.alter_table("s.w", widen={"id": "int"})
    with pytest.raises(txlake.InvalidArgumentError, match="partition column"), lake.transaction() as tx:
        tx.alter_table("s.w", widen={"region": "string"})
    with pytest.raises(txlake.SchemaMismatchError, match="no column 'nope'"), lake.transaction() as tx:
        tx.alter_table("s.w", widen={"nope": "bigint"})


def test_an_append_only_table_refuses_every_change_of_its_rows_and_takes_appends(tmp_path: Path) -> None:
    """``delta.appendOnly=true`` (Delta's appendOnly feature): delete, update, overwrite, a merge that may
    update or delete, and a delete staged before the property is set in the same transaction are refused;
    appends, inserting merges and optimize (dataChange=false) are not."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("s.t", "id long, v string")
    for i in range(2):
        with lake.transaction() as tx:
            tx.append("s.t", pa.table({"id": [i], "v": ["x"]}))
    with lake.transaction() as tx:
        tx.alter_table("s.t", set_properties={"delta.appendOnly": "true"})
    before = lake.version()
    statements = {
        "delete": lambda tx: tx.delete("s.t", where="id = 0"),
        "update": lambda tx: tx.update("s.t", {"v": "'y'"}, where="id = 0"),
        "overwrite": lambda tx: tx.overwrite("s.t", pa.table({"id": [0], "v": ["z"]}), where="id = 0"),
        "overwrite all": lambda tx: tx.overwrite("s.t", pa.table({"id": [0], "v": ["z"]})),
        "merge": lambda tx: tx.merge(
            "s.t", pa.table({"id": [0], "v": ["m"]}), on="t.id = s.id", when_matched_update="*"
        ),
        "merge delete": lambda tx: tx.merge(
            "s.t", pa.table({"id": [0], "v": ["m"]}), on="t.id = s.id", when_matched_delete=True
        ),
    }
    for statement in statements.values():
        with pytest.raises(txlake.errors.AppendOnlyTableError) as info:
            lake.run(statement)
        assert (info.value.table, info.value.property) == ("s.t", "delta.appendOnly")
    assert lake.version() == before
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [2], "v": ["x"]}))
        tx.merge("s.t", pa.table({"id": [0, 3], "v": ["m", "n"]}), on="t.id = s.id", when_not_matched_insert="*")
    lake.optimize("s.t")
    assert sorted(lake.read_arrow("s.t")["id"].to_pylist()) == [0, 1, 2, 3]
    lake.create_table("s.u", "id long")
    with lake.transaction() as tx:
        tx.append("s.u", pa.table({"id": [1]}))
    with pytest.raises(txlake.errors.AppendOnlyTableError), lake.transaction() as tx:
        tx.delete("s.u")
        tx.alter_table("s.u", set_properties={"delta.appendOnly": "true"})
    assert lake.read_arrow("s.u").num_rows == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.constraints.positive", "id > 0"),
        ("delta.enableChangeDataFeed", "true"),
        ("delta.enableRowTracking", "true"),
        ("delta.enableInCommitTimestamps", "true"),
        ("delta.checkpointPolicy", "v2"),
        ("delta.feature.domainMetadata", "supported"),
        ("delta.universalFormat.enabledFormats", "iceberg"),
    ],
)
def test_create_refuses_the_properties_alter_cannot_honour(tmp_path: Path, key: str, value: str) -> None:
    """One check for both: a property txlake would ignore is refused when the table is created, as by alter."""
    lake = txlake.connect((tmp_path / "lake").as_uri())
    with pytest.raises(txlake.UnsupportedFeatureError) as created:
        lake.create_table("s.u", "id long", properties={key: value})
    assert (created.value.feature, created.value.table) == (key, "s.u")
    assert "s.u" not in lake.tables("s") if "s" in lake.namespaces() else True
    lake.create_table("s.t", "id long", properties={"delta.checkpointPolicy": "classic", "delta.appendOnly": "false"})
    with pytest.raises(txlake.UnsupportedFeatureError) as altered, lake.transaction() as tx:
        tx.alter_table("s.t", set_properties={key: value})
    assert altered.value.feature == key
    assert str(altered.value).replace("s.t", "s.u") == str(created.value)
