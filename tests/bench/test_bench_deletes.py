"""``txlake bench deletes`` in a tiny form: it runs, checks both sides agree, and writes JSON + PNG.

Nothing here asserts on speed: timings only have to be positive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txlake.bench import WORKLOADS
from txlake.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_deletes_bench_writes_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    assert "deletes" in WORKLOADS
    out = tmp_path / "results"

    rc = main(["bench", "deletes", "--rows", "3000", "--repeat", "2", "--out", str(out)])

    assert rc == 0
    assert (out / "deletes.png").read_bytes().startswith(PNG_MAGIC)
    doc = json.loads((out / "deletes.json").read_text())
    assert (doc["benchmark"], doc["baseline"], doc["unit"]) == ("deletes", "copy-on-write", "ms")
    assert doc["parameters"]["rows"] == 3000 and doc["parameters"]["repeat"] == 2
    assert [r["config"] for r in doc["rows"]] == ["DELETE 1% (commit included)", "full read after it"]
    for row in doc["rows"]:
        assert len(row["txlake_samples"]) == len(row["baseline_samples"]) == 2
        assert min(row["txlake_samples"] + row["baseline_samples"]) > 0
        assert row["params"]["deleted_per_sample"] == 30
    assert doc["rows"][0]["params"]["dv_bytes"] > 0
