"""``txlake bench spark`` in a tiny bounded form (TPC-H SF0.01, one sample): every part runs and writes
well-formed JSON and PNGs. Nothing here asserts on speed: times only have to be positive.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from txlake.bench import WORKLOADS
from txlake.bench.spark import TABLES, ToolNotFoundError, tpchgen_binary
from txlake.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RANGES = 4
TINY = ["--scale", "0.01", "--repeat", "1", "--warmup", "0", "--ranges", str(RANGES)]
ORDERS_AT_SF001 = 15_000  # TPC-H: 1,500,000 orders per scale factor
Q1_GROUPS = 4  # (returnflag, linestatus): A/F, N/F, N/O, R/F


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    return bool(java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK)) or shutil.which("java") is not None


def _tpchgen_available() -> bool:
    try:
        tpchgen_binary()
    except ToolNotFoundError:
        return False
    return True


def _load(out: Path, name: str, target: float | None, baseline: str) -> dict[str, Any]:
    assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    doc: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    assert (doc["benchmark"], doc["candidate"], doc["baseline"]) == (name, "txlake", baseline)
    assert doc["target_ratio"] == target
    params = doc["parameters"]
    assert params["scale"] == 0.01 and params["repeat"] == 1 and params["statistic"] == "median"
    assert params["master"] == "local[2]" and params["spark_version"] == doc["machine"]["versions"]["pyspark"]
    assert set(params["source_bytes"]) == set(TABLES)
    for row in doc["rows"]:
        assert row["txlake"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["txlake"] / row["baseline"])
        assert len(row["txlake_samples"]) == len(row["baseline_samples"]) == 1
        assert row["within_target"] is (None if target is None else row["ratio"] <= target)
    return doc


def test_spark_workload_is_registered() -> None:
    assert "spark" in WORKLOADS


def test_spark_bench_writes_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if not _java_available():
        pytest.skip("Spark needs Java")
    if not _tpchgen_available():
        pytest.skip("tpchgen-cli is not installed (test extra)")
    out = tmp_path / "results"

    rc = main(["bench", "spark", *TINY, "--out", str(out)])

    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"spark-{part}.{ext}" for part in ("load", "query", "query-python", "skip") for ext in ("json", "png")
    )

    load = _load(out, "spark-load", 1.1, "spark parquet")
    assert [r["config"] for r in load["rows"]] == ["lineitem", "orders", "transaction"]
    by_config = {r["config"]: r for r in load["rows"]}
    assert by_config["orders"]["params"]["rows"] == ORDERS_AT_SF001
    assert by_config["lineitem"]["params"]["rows"] > ORDERS_AT_SF001  # 1 to 7 lines per order
    for table in TABLES:
        params = by_config[table]["params"]
        assert params["table"] == f"tpch.{table}"
        assert params["txlake_files"] >= 1 and params["baseline_files"] >= 1
        assert params["txlake_bytes"] > 0 and params["baseline_bytes"] > 0
        assert params["python_source_floor_ms"] > 0
    transaction = by_config["transaction"]
    assert transaction["params"]["txlake_commit_ms"] > 0
    assert transaction["txlake"] >= by_config["lineitem"]["txlake"] + by_config["orders"]["txlake"]

    for name, reader, target in (("spark-query", "native", 1.05), ("spark-query-python", "python", None)):
        query = _load(out, name, target, "spark parquet")
        assert query["parameters"]["reader"] == reader
        assert set(query["parameters"]["queries"]) == {"Q1", "Q6"}
        assert [r["config"] for r in query["rows"]] == [f"Q1 {reader}", f"Q6 {reader}"]
        q1, q6 = query["rows"]
        assert q1["params"]["result_rows"] == Q1_GROUPS and q6["params"]["result_rows"] == 1
        assert [g[:2] for g in q1["params"]["result"]] == [["A", "F"], ["N", "F"], ["N", "O"], ["R", "F"]]
        assert q1["params"]["files"] == by_config["lineitem"]["params"]["txlake_files"]

    skip = _load(out, "spark-skip", None, "spark parquet (all files)")
    assert [r["config"] for r in skip["rows"]] == ["selective native", "selective python"]
    for row in skip["rows"]:
        params = row["params"]
        assert params["files_total"] == RANGES == params["baseline_files_scanned"]
        assert 1 <= params["files_scanned"] < params["files_total"]
        assert params["files_skipped"] == params["files_total"] - params["files_scanned"]
        assert int(params["result"][0][0]) > 0  # rows in the selected month
    assert skip["rows"][0]["params"]["result"] == skip["rows"][1]["params"]["result"]


def test_spark_bench_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "spark", "--scale", "0"]) != 0
    assert main(["bench", "spark", "--parts", "nothing"]) != 0
