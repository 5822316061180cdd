"""``txlake bench snapshot`` in a tiny form: it runs, and writes a well-formed JSON report and a PNG plot.

Nothing here asserts on speed: timings only have to be positive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txlake.bench import WORKLOADS
from txlake.bench.report import BenchReport, BenchRow, write_report
from txlake.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_snapshot_workload_is_registered() -> None:
    assert "snapshot" in WORKLOADS


def test_bench_row_from_samples_takes_medians() -> None:
    row = BenchRow.from_samples("c", [3.0, 1.0, 2.0], [4.0, 8.0, 6.0], {"commits": 1})

    assert (row.txlake, row.baseline, row.ratio) == (2.0, 6.0, pytest.approx(1 / 3))
    assert row.txlake_samples == (3.0, 1.0, 2.0)
    with pytest.raises(ValueError):
        BenchRow.from_samples("c", [], [1.0])


def test_write_report_is_generic(tmp_path: Path) -> None:
    report = BenchReport(
        name="latency",
        metric="commit latency p50",
        unit="ms",
        baseline="Spark",
        rows=(BenchRow("a", 2.0, 1.0), BenchRow("b", 1.0, 4.0)),
    )

    json_path, png_path = write_report(tmp_path / "nested", report)

    doc = json.loads(json_path.read_text())
    assert doc["baseline"] == "Spark"
    assert doc["target_ratio"] is None
    assert [(r["config"], r["ratio"], r["within_target"]) for r in doc["rows"]] == [("a", 2.0, None), ("b", 0.25, None)]
    assert png_path.read_bytes().startswith(PNG_MAGIC)


def test_snapshot_bench_writes_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "results"

    rc = main(["bench", "snapshot", "--commits", "3", "20", "--repeat", "1", "--out", str(out)])

    assert rc == 0
    json_path, png_path = out / "snapshot.json", out / "snapshot.png"
    assert png_path.read_bytes().startswith(PNG_MAGIC)
    doc = json.loads(json_path.read_text())
    assert (doc["benchmark"], doc["unit"]) == ("snapshot", "ms")
    assert (doc["candidate"], doc["baseline"]) == ("txlake", "delta-rs")
    assert doc["target_ratio"] == 1.5
    assert doc["parameters"]["commits"] == [3, 20]
    assert doc["parameters"]["repeat"] == 1
    machine = doc["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["python"]
    assert machine["timestamp"]
    assert machine["versions"]["pyarrow"]
    assert machine["versions"]["deltalake"]
    rows = doc["rows"]
    assert [(r["params"]["commits"], r["params"]["checkpoint_version"]) for r in rows] == [
        (3, None),
        (3, 2),
        (20, None),
        (20, 19),
    ]
    for row in rows:
        assert row["params"]["latest_version"] == row["params"]["commits"] - 1
        assert row["params"]["files"] == row["params"]["commits"]
        assert row["txlake"] > 0
        assert row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["txlake"] / row["baseline"])
        assert isinstance(row["within_target"], bool)
        assert len(row["txlake_samples"]) == len(row["baseline_samples"]) == 1
        assert all(s > 0 for s in row["txlake_samples"] + row["baseline_samples"])


@pytest.mark.s3
def test_snapshot_bench_runs_on_s3(tmp_path: Path, s3_uri: str, s3_options: dict[str, str]) -> None:
    pytest.importorskip("deltalake")
    options = [arg for key, value in s3_options.items() for arg in ("--storage-option", f"{key}={value}")]

    rc = main(
        ["bench", "snapshot", "--commits", "3", "--repeat", "1", "--root", s3_uri, *options, "--out", f"{tmp_path}"]
    )

    assert rc == 0
    doc = json.loads((tmp_path / "snapshot.json").read_text())
    assert doc["parameters"]["storage"] == "s3"
    assert all(row["txlake"] > 0 and row["baseline"] > 0 for row in doc["rows"])
