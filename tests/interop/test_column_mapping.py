"""Column mapping with delta-rs: what txlake writes to a mapped table, delta-rs reads at every version, and back.

delta-rs's pyarrow reader does not map columns (it returns nulls for physical names it does not know), so the
tables are compared through its DataFusion reader.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import txlake
from tests.interop.deltars import TableLocation, assert_same_version, rows, sql_rows
from txlake.delta import DeltaTable
from txlake.delta.colmap import PARQUET_FIELD_ID, column_id, physical_name
from txlake.expr import FileStats, parse_predicate
from txlake.storage import ObjectStore

READERS = ("datafusion",)
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("point", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("tags", pa.list_(pa.struct([("k", pa.string())]))),
        ("region", pa.string()),
    ]
)


def _rows(ids: list[int], region: str) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i}" for i in ids],
            "point": [{"x": i, "y": f"y{i}"} if i % 3 else None for i in ids],
            "tags": [[{"k": f"k{i}"}] for i in ids],
            "region": [region] * len(ids),
        },
        schema=SCHEMA,
    )


def _lake(tmp_path: Path) -> txlake.Lakehouse:
    return txlake.connect((tmp_path / "lake").as_uri())


def _location(lake: txlake.Lakehouse, name: str) -> TableLocation:
    return TableLocation(ObjectStore.from_uri(lake.table_location(name)), "", {})


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_mapped_table_txlake_writes_reads_the_same_in_deltars_at_every_version(tmp_path: Path, mode: str) -> None:
    lake = _lake(tmp_path)
    lake.create_table("s.t", SCHEMA, partition_by=["region"], properties={"delta.columnMapping.mode": mode})
    with lake.transaction() as tx:
        tx.append("s.t", _rows([1, 2, 3], "eu"))
        tx.append("s.t", _rows([4, 5], "us"))
    with lake.transaction() as tx:
        tx.delete("s.t", "id = 2")
        tx.update("s.t", {"name": "'renamed'"}, "point.x = 4")
    with lake.transaction() as tx:
        tx.alter_table("s.t", add_columns="note string")
        tx.append("s.t", _rows([6], "eu").append_column("note", pa.array(["hi"])))
    loc = _location(lake, "s.t")
    snap = loc.txlake().snapshot()
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (2, 5)
    config = snap.metadata.configuration
    assert config["delta.columnMapping.mode"] == mode
    assert config["delta.columnMapping.maxColumnId"] == "9"  # 6 top-level columns, 2 in point, 1 in tags' structs
    fields = {f.name: f for f in snap.schema}
    assert all(physical_name(f).startswith("col-") for f in fields.values())
    assert physical_name(fields["point"].type.field("x")).startswith("col-")  # nested fields too
    for add in snap.files.values():  # files, stats and partition values use physical names only
        assert set(add.partition_values) == {physical_name(fields["region"])}
        stats = json.loads(add.stats or "{}")
        assert set(stats["nullCount"]) <= {physical_name(f) for f in fields.values()}
        assert physical_name(fields["id"]) in stats["minValues"]
        file = pq.read_schema(lake.table_location("s.t").removeprefix("file://") + "/" + add.path)
        assert "id" not in file.names and physical_name(fields["id"]) in file.names
        ids = {f.name: (f.metadata or {}).get(PARQUET_FIELD_ID) for f in file}
        assert ids[physical_name(fields["id"])] == str(column_id(fields["id"])).encode()
    predicates: dict[str, Any] = {
        "id >= 4": lambda r: r["id"] >= 4,
        "region = 'us'": lambda r: r["region"] == "us",
        "name = 'renamed'": lambda r: r["name"] == "renamed",
    }
    for version in range(snap.version + 1):
        assert_same_version(loc, version, readers=READERS, predicates=predicates)
    got = sorted(lake.read_arrow("s.t").to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [1, 3, 4, 5, 6]
    assert got[2]["name"] == "renamed" and got[0]["point"] == {"x": 1, "y": "y1"} and got[1]["point"] is None
    assert got[-1]["note"] == "hi" and got[0]["note"] is None and got[0]["tags"] == [{"k": "k1"}]


def test_stats_on_mapped_columns_prune_files(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    lake.create_table("s.t", SCHEMA, partition_by=["region"], properties={"delta.columnMapping.mode": "name"})
    for ids, region in (([1, 2], "eu"), ([10, 11], "eu"), ([20], "us")):
        with lake.transaction() as tx:
            tx.append("s.t", _rows(ids, region))
    snap = DeltaTable(ObjectStore.from_uri(lake.table_location("s.t")), "").snapshot()
    stats = [FileStats.from_add(a, snap.schema, snap.partition_columns) for a in snap.files.values()]
    assert sorted(s.column("id").lo for s in stats) == [1, 10, 20]
    assert sorted(s.column("region").lo for s in stats) == ["eu", "eu", "us"]
    assert sorted(s.column("point", ["x"]).hi for s in stats) == [2, 11, 20]
    assert [s.null_count for s in (st.column("point") for st in stats)] == [None, None, None]  # a struct: no count
    predicate = parse_predicate("id >= 10 AND region = 'eu'").bind(snap.schema)
    assert sum(predicate.may_match(s) for s in stats) == 1
    assert lake.read_arrow("s.t", where="id >= 10 AND region = 'eu'")["id"].to_pylist() == [10, 11]


def test_txlake_reads_and_writes_a_mapped_table_deltars_created(tmp_path: Path) -> None:
    uri = (tmp_path / "t").as_uri()
    data = pa.table({"id": [1, 2], "v": ["a", "b"], "p": ["x", "y"]})
    deltalake.write_deltalake(
        str(tmp_path / "t"), data, partition_by=["p"], configuration={"delta.columnMapping.mode": "name"}
    )
    table = DeltaTable(ObjectStore.from_uri(uri), "")
    assert rows(table.read_arrow()) == rows(data)
    table.append(pa.table({"id": [3], "v": ["c"], "p": ["x"]}))
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"id": [4], "v": ["d"], "p": ["z"]}), mode="append")
    want = [(1, "a", "x"), (2, "b", "y"), (3, "c", "x"), (4, "d", "z")]
    assert sorted(tuple(r.values()) for r in table.read_arrow().to_pylist()) == want
    dt = deltalake.DeltaTable(str(tmp_path / "t"))
    theirs = sql_rows(dt, "SELECT id, v, p FROM t ORDER BY id").to_pylist()
    assert [tuple(r.values()) for r in theirs] == want


def test_a_mapped_table_with_deletion_vectors_reads_the_same_in_deltars(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    properties = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    lake.create_table("s.t", SCHEMA, partition_by=["region"], properties=properties)
    with lake.transaction() as tx:
        tx.append("s.t", _rows([1, 2, 3, 4], "eu"))
    with lake.transaction() as tx:
        assert tx.delete("s.t", "id = 2 OR point.x = 4") == 2  # merge-on-read: a deletion vector
        tx.alter_table("s.t", rename_columns={"name": "label"})
    loc = _location(lake, "s.t")
    snap = loc.txlake().snapshot()
    assert snap.protocol.reader_features == ("columnMapping", "deletionVectors")
    assert set(snap.protocol.writer_features or ()) >= {"columnMapping", "deletionVectors"}
    assert any(a.deletion_vector is not None for a in snap.files.values())
    for version in range(snap.version + 1):
        assert_same_version(loc, version, readers=READERS, predicates={"id > 1": lambda r: r["id"] > 1})
    assert sorted(lake.read_arrow("s.t")["label"].to_pylist()) == ["n1", "n3"]


def test_txlake_writes_the_spark_table_with_deletion_vectors_and_column_mapping(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parent.parent / "data" / "delta-kernel-rs" / "dv-with-columnmapping" / "delta"
    shutil.copytree(source, tmp_path / "t")
    loc = TableLocation(ObjectStore.from_uri((tmp_path / "t").as_uri()), "", {})
    table = loc.txlake()
    before = table.snapshot()
    schema = before.schema
    assert table.append(pa.table({n: pa.nulls(1, schema.field(n).type) for n in schema.names}).cast(schema)) > 0
    after = table.snapshot()
    assert_same_version(loc, before.version, readers=READERS)
    assert_same_version(loc, after.version, readers=READERS)
    assert after.num_records == (before.num_records or 0) + 1
