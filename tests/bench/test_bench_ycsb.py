"""``txlake bench ycsb`` in a tiny bounded form: every mode runs with real client processes, every committed update
is found in the data (the counter check), pessimistic is run or reported as not available, and the report is
well-formed JSON with PNGs. Nothing here asserts on speed: rates and latencies only have to be positive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench.test_bench_snapshot import PNG_MAGIC
from tests.services import SeaweedFS
from txlake.bench import WORKLOADS
from txlake.bench.ycsb import ScrambledZipfian, pessimistic_available
from txlake.cli.main import main

TINY = ["--clients", "1", "2", "--seconds", "2", "--records", "200", "--rows-per-file", "50"]
KINDS = {"GET", "HEAD", "LIST", "PUT", "DELETE"}


def _load(out: Path) -> dict[str, Any]:
    assert (out / "ycsb.png").read_bytes().startswith(PNG_MAGIC)
    assert (out / "ycsb-modes.png").read_bytes().startswith(PNG_MAGIC)
    doc: dict[str, Any] = json.loads((out / "ycsb.json").read_text())
    assert (doc["benchmark"], doc["baseline"], doc["unit"]) == ("ycsb", "rerun", "ops/s")
    assert doc["parameters"]["records_per_table"] == 200
    assert doc["parameters"]["row_bytes"] >= 1000
    return doc


def _check_rows(doc: dict[str, Any], configs: list[str]) -> None:
    assert [r["config"] for r in doc["rows"]] == configs
    for row in doc["rows"]:
        modes = row["params"]["modes"]
        assert list(modes) == ["redo", "redo-reserved", "rerun", "pessimistic", "delta-rs"]
        assert modes["pessimistic"]["available"] is pessimistic_available()
        if not pessimistic_available():
            assert modes["pessimistic"]["reason"]
        assert row["txlake"] == modes["redo"]["ops_per_second"]
        assert row["baseline"] == modes["rerun"]["ops_per_second"]
        for name, m in modes.items():
            if not m["available"]:
                continue
            assert m["errors"] == 0, (name, m["first_error"])
            assert m["check"], (name, m["expected_updates"], m["final_updates"])
            assert m["committed"] == m["reads"] + m["updates"] > 0
            assert m["ops_per_second"] > 0 and m["p50_ms"] > 0 and m["p99_ms"] >= m["p50_ms"]
            assert len(m["clients"]) == row["params"]["clients"]
            assert m["failed"] <= m["aborts"]
            if name == "delta-rs":
                assert m["requests_per_op"] is None and m["redone"] == 0
            else:
                assert set(m["requests_per_op"]) == KINDS and m["requests_per_op"]["GET"] > 0
                # atomic: both tables got exactly the committed updates
                assert m["final_updates"] == [m["updates"], m["updates"]]
            if name == "rerun":
                assert m["redone"] == 0
        if row["params"]["clients"] == 1:  # alone, nothing conflicts
            assert all(m["aborts"] == 0 for m in modes.values() if m["available"])


def test_ycsb_workload_is_registered() -> None:
    assert "ycsb" in WORKLOADS


def test_scrambled_zipfian_is_skewed_and_spread() -> None:
    draw = ScrambledZipfian(1000, seed=3)
    keys = [draw() for _ in range(20_000)]
    assert all(0 <= k < 1000 for k in keys)
    counts = sorted((keys.count(k) for k in set(keys)), reverse=True)
    assert counts[0] > 20_000 * 0.08  # the hottest key: ~1/H(1000, 0.99) ~ 13% of the draws
    hot = sorted(set(keys), key=keys.count, reverse=True)[:10]
    assert max(hot) - min(hot) > 100  # scrambled: the hot keys do not sit in one file


def test_ycsb_bench_on_file(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "results"

    rc = main(["bench", "ycsb", *TINY, "--stores", "file", "--out", str(out)])

    assert rc == 0
    doc = _load(out)
    assert list(doc["parameters"]["stores"]) == ["file"]
    _check_rows(doc, ["file 1c", "file 2c"])


@pytest.mark.s3
def test_ycsb_bench_on_an_existing_s3_server(
    tmp_path: Path, seaweedfs: SeaweedFS, s3_bucket: str, s3_options: dict[str, str]
) -> None:
    pytest.importorskip("deltalake")
    options = [arg for key, value in s3_options.items() for arg in ("--storage-option", f"{key}={value}")]
    server = ["--s3-endpoint", seaweedfs.endpoint, "--s3-bucket", s3_bucket, *options]

    rc = main(["bench", "ycsb", "--clients", "2", *TINY[3:], "--stores", "s3", *server, "--out", str(tmp_path)])

    assert rc == 0
    doc = _load(tmp_path)
    assert list(doc["parameters"]["stores"]) == ["s3"]
    _check_rows(doc, ["s3 2c"])


def test_ycsb_bench_with_batched_updates(tmp_path: Path) -> None:
    """``--batch 3``: each update transaction carries three YCSB updates per table; each counts as one operation
    and every one of them is in the data (the counter check covers the batch)."""
    pytest.importorskip("deltalake")
    out = tmp_path / "results"

    rc = main(["bench", "ycsb", "--clients", "2", *TINY[3:], "--batch", "3", "--stores", "file", "--out", str(out)])

    assert rc == 0
    doc = _load(out)
    assert doc["parameters"]["batch"] == 3
    _check_rows(doc, ["file 2c"])
    for m in doc["rows"][0]["params"]["modes"].values():
        if m["available"]:
            assert m["updates"] % 3 == 0 and m["updates"] > 0


def test_ycsb_bench_sweeps_batch_sizes(tmp_path: Path) -> None:
    """``--batch 1 3``: one run of every mode per batch size, rows named by it, and the ratio plot against it."""
    out = tmp_path / "results"

    args = ["--clients", "2", *TINY[3:], "--batch", "1", "3", "--modes", "redo", "rerun", "--stores", "file"]
    rc = main(["bench", "ycsb", *args, "--out", str(out)])

    assert rc == 0
    doc = _load(out)
    assert doc["parameters"]["batch"] == [1, 3]
    assert [r["config"] for r in doc["rows"]] == ["file batch 1 2c", "file batch 3 2c"]
    for row, batch in zip(doc["rows"], [1, 3], strict=True):
        assert row["params"]["batch"] == batch
        for m in row["params"]["modes"].values():
            assert m["check"] and m["updates"] % batch == 0 and m["updates"] > 0
            assert m["ratio_vs_rerun"] is not None
    assert (out / "ycsb-batch-ratio.png").read_bytes().startswith(PNG_MAGIC)


def test_ycsb_added_latency_delays_the_txlake_clients(tmp_path: Path) -> None:
    """``--added-latency 40 0``: every update commits at least its data file and its record with a PUT each, one
    after the other, so no committed update takes under 80 ms; the JSON names the latency."""
    out = tmp_path / "results"
    args = ["--clients", "1", *TINY[3:], "--modes", "redo", "--stores", "file", "--added-latency", "40", "0"]

    rc = main(["bench", "ycsb", *args, "--out", str(out)])

    assert rc == 0
    doc = _load(out)
    assert doc["parameters"]["added_latency"].startswith("40 ms per txlake PUT/DELETE, 0 ms per GET/HEAD/LIST")
    redo = doc["rows"][0]["params"]["modes"]["redo"]
    assert redo["updates"] > 0 and redo["check"]
    assert redo["update_p50_ms"] >= 80


@pytest.mark.parametrize("bad", [["-1", "0"], ["nan", "0"], ["0", "1e300"]])
def test_ycsb_added_latency_rejects_bad_values(tmp_path: Path, bad: list[str]) -> None:
    assert main(["bench", "ycsb", "--stores", "file", "--added-latency", *bad, "--out", str(tmp_path)]) == 2
