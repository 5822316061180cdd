"""``optimize`` on Spark: compaction and Z-order as one Spark job, a ``dataChange=false`` transaction."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import txlake
from tests.spark.helpers import deltars_read
from txlake.spark.compact import zorder_key


def _small_files(lake: txlake.Lakehouse, n: int) -> None:
    lake.create_table("s.t", "id long, x double, p string", partition_by=["p"])
    for i in range(n):
        with lake.transaction() as tx:
            tx.append("s.t", pa.table({"id": [i], "x": [float(n - i)], "p": ["even" if i % 2 == 0 else "odd"]}))


def _rows(lake: txlake.Lakehouse) -> list[tuple[int, float, str]]:
    data = lake.read_arrow("s.t")
    return sorted(zip(data["id"].to_pylist(), data["x"].to_pylist(), data["p"].to_pylist(), strict=True))


def test_spark_compaction_packs_each_partition(lake: txlake.Lakehouse) -> None:
    _small_files(lake, 12)
    before, version = _rows(lake), lake.version()
    metrics = lake.optimize("s.t")  # the lakehouse has a Spark session: a Spark job
    assert (metrics.files_removed, metrics.files_added) == (12, 2)  # one file per partition
    snap = lake.snapshot().delta_snapshot("s.t")
    assert len(snap.files) == 2 and all(not a.data_change for a in snap.files.values())
    assert sorted(a.partition_values["p"] for a in snap.files.values()) == ["even", "odd"]
    assert _rows(lake) == before and _rows(lake.snapshot(version=version)) == before  # type: ignore[arg-type]
    plain = deltars_read(lake.table_location("s.t"))
    assert sorted(zip(plain["id"].to_pylist(), plain["x"].to_pylist(), plain["p"].to_pylist(), strict=True)) == before
    assert not [m.path for m in lake.store.list("_txlake/txns") if "/spark/" in m.path]  # no staging left
    assert lake.optimize("s.t").files_removed == 0  # nothing small left


def test_spark_zorder_narrows_every_file(tmp_path: Path, spark: SparkSession) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=spark)
    lake.create_table("s.z", "x bigint, y bigint, v string")
    rng = random.Random(5)
    points = [(rng.randrange(1000), rng.randrange(1000)) for _ in range(4000)]
    for start in range(0, len(points), 500):  # 8 files, each spread over the whole square
        chunk = points[start : start + 500]
        rows = pa.table({"x": [p[0] for p in chunk], "y": [p[1] for p in chunk], "v": ["a"] * len(chunk)})
        with lake.transaction() as tx:
            tx.append("s.z", rows)
    # 4 bins of 2 files: 4 tasks, range-partitioned along the curve, so each file holds about one quadrant
    metrics = lake.optimize("s.z", zorder_by=["x", "y"], target_file_size=2 * _largest(lake, "s.z") + 1)
    assert metrics.files_removed == 8 and metrics.files_added == 4
    files = lake.snapshot().delta_snapshot("s.z").files.values()
    assert sum(a.num_records or 0 for a in files) == 4000
    spans = []
    for add in files:
        stats = json.loads(add.stats or "{}")
        width = stats["maxValues"]["x"] - stats["minValues"]["x"] + stats["maxValues"]["y"] - stats["minValues"]["y"]
        spans.append(width)
    # an unsorted file spans ~2000 (x and y each ~1000), a quadrant ~1000; a range of the curve that straddles two
    # quadrants spans more, but never the whole square
    assert sum(spans) / len(spans) < 1300 and max(spans) < 1800, spans
    data = lake.read_arrow("s.z")
    assert sorted(zip(data["x"].to_pylist(), data["y"].to_pylist(), strict=True)) == sorted(points)


def _largest(lake: txlake.Lakehouse, name: str) -> int:
    return max(a.size for a in lake.snapshot().delta_snapshot(name).files.values())


def test_arrow_engine_is_still_chosen_on_request(lake: txlake.Lakehouse) -> None:
    _small_files(lake, 4)
    assert lake.optimize("s.t", engine="arrow").files_added == 2
    with pytest.raises(txlake.InvalidArgumentError):
        lake.optimize("s.t", engine="duckdb")  # type: ignore[arg-type]


def test_zorder_key_orders_nulls_last_and_interleaves() -> None:
    a = pa.array([3, 0, 1, 2, 0, 1, None])
    b = pa.array([0, 3, 2, 1, 0, 1, 5])
    bounds = [pa.array([0, 1, 2, 3]), pa.array([0, 1, 2, 3, 5])]
    key = zorder_key([a, b], bounds, 8).to_pylist()
    assert min(key) == key[4]  # (0, 0) first
    assert max(key) == key[6]  # the null sorts after every value
    strings = zorder_key([pa.array(["b", "a", None, "zz"])], [pa.array(["a", "b"])], 8).to_pylist()
    assert strings[1] < strings[0] < strings[3] < strings[2]


def test_spark_compaction_of_files_with_deletion_vectors(tmp_path: Path, spark: SparkSession) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=spark)
    lake.create_table("s.dv", "id bigint, v string", properties={"delta.enableDeletionVectors": "true"})
    for start in (0, 10, 20):
        with lake.transaction() as tx:
            tx.append("s.dv", pa.table({"id": list(range(start, start + 10)), "v": ["x"] * 10}))
    with lake.transaction() as tx:
        assert tx.delete("s.dv", "id % 3 = 0", engine="arrow") == 10  # merge-on-read: deletion vectors
    files = lake.snapshot().delta_snapshot("s.dv").files.values()
    assert all(a.deletion_vector is not None for a in files)
    expected = sorted(i for i in range(30) if i % 3)
    metrics = lake.optimize("s.dv", engine="spark")
    assert (metrics.files_removed, metrics.files_added) == (3, 1)
    assert sorted(lake.read_arrow("s.dv")["id"].to_pylist()) == expected
    assert sorted(deltars_read(lake.table_location("s.dv"))["id"].to_pylist()) == expected
    (compacted,) = lake.snapshot().delta_snapshot("s.dv").files.values()
    assert compacted.deletion_vector is None and compacted.num_records == 20


def test_spark_compaction_keeps_files_near_the_target_size_and_odd_column_names(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri(), spark=spark)
    rng = random.Random(3)
    batches = []
    for start in range(0, 4000, 250):  # 16 files of one partition, random strings: they barely compress
        words = ["".join(rng.choice("abcdefghij") for _ in range(40)) for _ in range(250)]
        batches.append(pa.table({"id": list(range(start, start + 250)), "a.b": words, "p": ["one"] * 250}))
    for name, zorder in (("s.packed", None), ("s.zordered", ["a.b"])):
        lake.create_table(name, "id bigint, `a.b` string, p string", partition_by=["p"])
        for batch in batches:
            with lake.transaction() as tx:
                tx.append(name, batch)
        total = sum(a.size for a in lake.snapshot().delta_snapshot(name).files.values())
        metrics = lake.optimize(name, target_file_size=total // 4, zorder_by=zorder, engine="spark")
        assert metrics.files_removed == 16 and 3 <= metrics.files_added <= 6, (name, metrics)  # not one file
        data = lake.read_arrow(name)
        assert sorted(data["id"].to_pylist()) == list(range(4000)) and data.column_names == ["id", "a.b", "p"]


def test_a_missing_data_file_is_data_file_not_found_on_spark(tmp_path: Path, spark: SparkSession) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri(), spark=spark)
    _small_files(lake, 4)
    gone = next(iter(lake.snapshot().delta_snapshot("s.t").files.values()))
    (root / "s" / "t" / gone.path.replace("%3D", "=")).unlink()
    version = lake.version()
    with pytest.raises(txlake.DataFileNotFoundError):
        lake.optimize("s.t", engine="spark")
    assert lake.version() == version
    assert [m.path for m in lake.store.list("s/t") if m.path.endswith(".parquet")].__len__() == 3  # nothing new
