"""Variant columns: txlake reads Spark's variant tables as delta-rs does (same Arrow schema, same bytes), refuses
writes to them, predicates on them and shredded files, all by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import txlake
from tests.interop.deltars import deltars_read_datafusion, rows
from txlake.delta import DeltaTable
from txlake.errors import PredicateError, UnsupportedFeatureError
from txlake.expr.stats import FileStats
from txlake.storage import ObjectStore

CORPUS = Path(__file__).resolve().parent.parent / "data" / "delta-rs"
VARIANTS = CORPUS / "spark-variant-checkpoint"
SHREDDING = CORPUS / "spark-shredded-variant-preview-delta"  # shredding allowed; its files are unshredded


def txlake_table(location: Path) -> DeltaTable:
    return DeltaTable(ObjectStore.from_uri(location.as_uri()), "")


def test_the_schema_is_deltars_own_nullability_included() -> None:
    deltars = pa.schema(deltalake.DeltaTable(str(VARIANTS)).schema().to_arrow())
    table = txlake_table(VARIANTS)
    assert table.snapshot().schema.equals(deltars)
    got = table.read_arrow()
    assert got.schema.equals(deltars)
    assert not got.schema.field("v").type.field("metadata").nullable


def test_a_table_that_allows_shredding_reads_as_its_unshredded_twin_reads_in_deltars() -> None:
    """delta-rs refuses the table (``variantShredding-preview``); its files are unshredded and hold the rows the
    unshredded table holds, which delta-rs reads."""
    with pytest.raises(Exception, match=r"(?i)variantShredding"):
        deltars_read_datafusion(deltalake.DeltaTable(str(SHREDDING)))
    twin = deltars_read_datafusion(deltalake.DeltaTable(str(VARIANTS)))
    assert rows(txlake_table(SHREDDING).read_arrow()) == twin
    for version in (0, 1):
        twin = deltars_read_datafusion(deltalake.DeltaTable(str(VARIANTS), version=version))
        assert rows(txlake_table(SHREDDING).read_arrow(version)) == twin


def test_a_shredded_data_file_is_refused_by_name(tmp_path: Path) -> None:
    """A file whose variant has a ``typed_value`` (and an optional ``value``) is not read as if unshredded."""
    shutil.copytree(SHREDDING, tmp_path / "t")
    table = txlake_table(tmp_path / "t")
    add = next(a for a in table.snapshot(0).files.values())
    path = tmp_path / "t" / add.path.replace("%25", "%")
    ids = pq.read_table(path, columns=["id"]).column("id")
    shredded = pa.struct(
        [
            pa.field("metadata", pa.binary(), nullable=False),
            pa.field("value", pa.binary()),
            pa.field("typed_value", pa.int64()),
        ]
    )
    values = pa.array([{"metadata": b"\x01\x00\x00", "value": None, "typed_value": i} for i in range(len(ids))])
    pq.write_table(pa.table({"id": ids, "v": values.cast(shredded)}), path)
    with pytest.raises(UnsupportedFeatureError) as info:
        table.read_arrow(0)
    assert info.value.feature == "variantShredding"
    assert table.read_arrow(0, columns=["id"]).num_rows == 100  # the other columns still read


def test_variant_stats_never_prune() -> None:
    """Spark logs a nullCount for variant columns; txlake keeps none of it (and predicates cannot use it)."""
    table = txlake_table(VARIANTS)
    snap = table.snapshot()
    stats = FileStats.from_add(next(iter(snap.files.values())), snap.schema, ())
    assert "v" not in stats.null_count
    assert "v" not in stats.null_count.get("struct_of_variants", {})
    assert stats.null_count["id"] == 0


@pytest.fixture
def lake(tmp_path: Path) -> txlake.Lakehouse:
    shutil.copytree(VARIANTS, tmp_path / "lake" / "ext" / "v")
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.register_table("ext.v", "ext/v")
    return lake


def test_a_registered_variant_table_reads_and_refuses_every_write(lake: txlake.Lakehouse) -> None:
    data = lake.read_arrow("ext.v")
    assert rows(data) == deltars_read_datafusion(deltalake.DeltaTable(lake.table_location("ext.v")))
    assert lake.read_arrow("ext.v", where="id < 3").num_rows == 5
    writes = [
        lambda tx: tx.append("ext.v", data.slice(0, 1)),
        lambda tx: tx.append("ext.v", data.select(["id"]).slice(0, 1)),
        lambda tx: tx.delete("ext.v", "id = 1"),
        lambda tx: tx.update("ext.v", {"id": "id + 1"}, "id = 1"),
        lambda tx: tx.alter_table("ext.v", add_columns=pa.schema([("x", pa.int64())])),
        lambda tx: tx.overwrite("ext.v", data),
        lambda tx: tx.optimize("ext.v"),
        lambda tx: tx.clone_table("ext.v", "ext.clone"),
    ]
    for write in writes:
        with pytest.raises(UnsupportedFeatureError) as info, lake.transaction() as tx:
            write(tx)
        assert info.value.feature == "variantType"
    with pytest.raises(UnsupportedFeatureError) as info:
        lake.create_table("ext.copy", data.schema)
    assert info.value.feature == "variantType"
    assert lake.read_arrow("ext.v").num_rows == data.num_rows


@pytest.mark.parametrize(
    "where", ["v IS NULL", "v.value IS NOT NULL", "struct_of_variants.v IS NULL", "array_of_variants IS NULL"]
)
def test_predicates_on_variants_are_refused(lake: txlake.Lakehouse, where: str) -> None:
    with pytest.raises(PredicateError):
        lake.read_arrow("ext.v", where=where)
    with pytest.raises(PredicateError), lake.transaction() as tx:
        tx.read_arrow("ext.v", where=f"id > 1 AND {where}")


def test_a_whole_lakehouse_restore_passes_over_an_unchanged_variant_table(lake: txlake.Lakehouse) -> None:
    """txlake does not write variant tables, but a restore that would leave one as it is needs no write: the
    lakehouse is restored as a whole, the variant table untouched."""
    lake.create_table("app.t", "k bigint")
    lake.run(lambda tx: tx.append("app.t", pa.table({"k": [1]})))
    then = lake.snapshot().version
    lake.run(lambda tx: tx.append("app.t", pa.table({"k": [2]})))
    before = rows(lake.read_arrow("ext.v"))

    lake.restore(version=then)

    assert lake.read_arrow("app.t")["k"].to_pylist() == [1]
    assert rows(lake.read_arrow("ext.v")) == before


def test_a_marked_struct_merges_into_a_plain_struct_column_as_append_takes_it(tmp_path: Path) -> None:
    """A source column carrying the variant marker, into a table whose column is the plain struct of that shape:
    MERGE takes it as append does (the bytes as they are), instead of refusing every source reference."""
    from txlake.variant import VARIANT

    plain = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)])
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("a.t", pa.schema([("k", pa.int64()), ("s", plain)]))
    source = pa.table({"k": [1, 2], "s": pa.array([{"metadata": b"\x01", "value": b"\x0c"}] * 2, VARIANT)})
    lake.run(lambda tx: tx.append("a.t", source.slice(0, 1)))
    lake.run(lambda tx: tx.merge("a.t", source, "t.k = s.k", when_matched_update="*", when_not_matched_insert="*"))
    assert lake.read_arrow("a.t").sort_by("k").to_pylist() == [
        {"k": 1, "s": {"metadata": b"\x01", "value": b"\x0c"}},
        {"k": 2, "s": {"metadata": b"\x01", "value": b"\x0c"}},
    ]
