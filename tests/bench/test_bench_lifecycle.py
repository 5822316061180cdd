"""``txlake bench lifecycle`` in a tiny form: every part runs (Q6 on Arrow and on Spark, cold loads, vacuum) and
the report is well-formed JSON with a PNG. Nothing here asserts on speed: timings only have to be positive."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.bench.test_bench_snapshot import PNG_MAGIC
from txlake.bench import WORKLOADS
from txlake.cli.main import main


def test_lifecycle_bench_writes_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    assert "lifecycle" in WORKLOADS
    out = tmp_path / "results"

    rc = main(["bench", "lifecycle", "--appends", "8", "--vacuum-files", "30", "--repeat", "1", "--out", str(out)])

    assert rc == 0
    assert (out / "lifecycle.png").read_bytes().startswith(PNG_MAGIC)
    doc = json.loads((out / "lifecycle.json").read_text())
    rows = {r["config"]: r for r in doc["rows"]}
    assert list(rows) == [
        "Q6 after 8 appends",
        "Q6 via Spark after 8 appends",
        "Q6 after optimize",
        "Q6 via Spark after optimize",
        "cold load before log clean-up",
        "cold load after log clean-up",
        "vacuum 30 files",
    ]
    assert all(r["txlake"] > 0 and r["baseline"] > 0 for r in rows.values())
    assert rows["Q6 via Spark after 8 appends"]["params"]["files"] == 8
    assert rows["Q6 via Spark after optimize"]["params"]["files"] == 1
    revenue = rows["Q6 after 8 appends"]["params"]["revenue"]
    assert rows["Q6 via Spark after optimize"]["params"]["revenue"] == pytest.approx(revenue)
    assert rows["vacuum 30 files"]["params"]["txlake_files_deleted"] >= 30
