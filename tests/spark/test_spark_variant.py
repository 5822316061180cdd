"""Variant tables through Spark: both readers give Spark's own ``VARIANT`` columns holding the bytes the Arrow read
gives; writes of variants are refused by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

import txlake
from txlake.errors import UnsupportedFeatureError

VARIANTS = Path(__file__).resolve().parent.parent / "data" / "delta-rs" / "spark-variant-checkpoint"


@pytest.fixture
def variant_lake(lake: txlake.Lakehouse, tmp_path: Path) -> txlake.Lakehouse:
    """The ``lake`` fixture (at ``tmp_path/lake``) with Spark's variant table registered as ``ext.v``."""
    shutil.copytree(VARIANTS, tmp_path / "lake" / "ext" / "v")
    lake.register_table("ext.v", "ext/v")
    return lake


def test_spark_reads_variants_as_variant_type(variant_lake: txlake.Lakehouse, spark: SparkSession) -> None:
    arrow = {r["id"]: r for r in variant_lake.read_arrow("ext.v").to_pylist()}
    with variant_lake.transaction() as tx:
        df = tx.read("ext.v")
        fields = {f.name: f.dataType for f in df.schema.fields}
        assert isinstance(fields["v"], VariantType)
        assert isinstance(fields["array_of_variants"], ArrayType)
        assert isinstance(fields["array_of_variants"].elementType, VariantType)
        assert isinstance(fields["map_of_variants"], MapType)
        assert isinstance(fields["map_of_variants"].valueType, VariantType)
        assert isinstance(fields["struct_of_variants"], StructType)
        got = df.selectExpr("id", "v", "struct_of_variants.v AS sv", "variant_get(v, '$.key', 'int') AS k").collect()
        assert df.where("id = 7").count() == 1
        # conditions on variants are Spark's to evaluate (txlake cannot bind them: no pruning from them)
        assert tx.read("ext.v", where="variant_get(v, '$.key', 'int') = 7").count() == 1
        assert tx.read("ext.v", where="v IS NOT NULL AND id < 2", columns=["id"]).count() == 4
    assert len(got) == len(arrow) + 2  # ids 0 and 1 appear twice (appended again)
    for row in got:
        want = arrow[row["id"]]
        assert (bytes(row["v"].metadata), bytes(row["v"].value)) == (want["v"]["metadata"], want["v"]["value"])
        assert row["k"] == row["id"] == row["v"].toPython()["key"]
        assert bytes(row["sv"].value) == want["struct_of_variants"]["v"]["value"]


def test_spark_refuses_variant_writes(variant_lake: txlake.Lakehouse, spark: SparkSession) -> None:
    with variant_lake.transaction() as tx:
        df = tx.read("ext.v").limit(1).cache()
    for write in (
        lambda tx: tx.append("ext.v", df),
        lambda tx: tx.create_table("ext.copy", df.schema),
    ):
        with pytest.raises(UnsupportedFeatureError) as info, variant_lake.transaction() as tx:
            write(tx)
        assert info.value.feature == "variantType"
    assert variant_lake.read_arrow("ext.v").num_rows == 102


SHREDDING = VARIANTS.parent / "spark-shredded-variant-preview-delta"


def test_spark_refuses_a_shredded_file_as_the_arrow_path_does(
    lake: txlake.Lakehouse, spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's own Parquet reader would read a shredded file's ``value``/``typed_value`` as it likes; variant
    tables go through the data source, which checks every file (``auto`` would otherwise read this local table
    natively)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(SHREDDING, tmp_path / "lake" / "ext" / "s")
    lake.register_table("ext.s", "ext/s")
    with lake.transaction() as tx:
        assert tx.read("ext.s").count() == lake.read_arrow("ext.s").num_rows  # unshredded files read
    snapshot = lake.snapshot()
    first = sorted(tmp_path.joinpath("lake", "ext", "s").glob("*.parquet"))[0]
    ids = pq.read_table(first, columns=["id"]).column("id")
    shredded = pa.struct(
        [
            pa.field("metadata", pa.binary(), nullable=False),
            pa.field("value", pa.binary()),
            pa.field("typed_value", pa.int64()),
        ]
    )
    values = pa.array([{"metadata": b"\x01\x00\x00", "value": None, "typed_value": i} for i in range(len(ids))])
    pq.write_table(pa.table({"id": ids, "v": values.cast(shredded)}), first)
    with pytest.raises(Exception, match=r"variants of .* shredded"):
        snapshot.read("ext.s").collect()
