"""``txlake bench commit`` in a tiny bounded form: it runs every part and writes well-formed JSON and PNGs.

Nothing here asserts on speed: timings and rates only have to be positive.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.services import SeaweedFS
from txlake.bench import WORKLOADS
from txlake.bench.commit import AddedLatency, classify
from txlake.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
KINDS = ("GET", "HEAD", "LIST", "PUT", "DELETE")
TINY = [
    "--repeat", "1",
    "--rows", "50",
    "--tables", "1", "2",
    "--table-rows", "5",
    "--writers", "1",
    "--seconds", "0.5",
    "--txn-rows", "2",
]  # fmt: skip
# One writer: concurrent writers on file:// can hit a spurious CorruptLogError today (a LIST racing
# log writes misses entries on local disks); the benchmark reports such errors and exits 1.


def _load(out: Path, part: str) -> dict[str, Any]:
    assert (out / f"commit-{part}.png").read_bytes().startswith(PNG_MAGIC)
    doc: dict[str, Any] = json.loads((out / f"commit-{part}.json").read_text())
    assert (doc["benchmark"], doc["candidate"], doc["baseline"]) == (f"commit-{part}", "txlake", "delta-rs")
    assert doc["machine"]["versions"]["deltalake"]
    return doc


def _check_latency_rows(rows: list[dict[str, Any]], configs: list[str]) -> None:
    assert [r["config"] for r in rows] == configs
    for row in rows:
        assert row["txlake"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["txlake"] / row["baseline"])
        assert len(row["txlake_samples"]) == len(row["baseline_samples"]) == 1
        params = row["params"]
        assert params["baseline_handle_ms"] > 0
        assert params["txlake_commit_phase_ms"] > 0
        for key in ("requests_per_txn", "commit_phase_requests"):
            assert set(params[key]) == {*KINDS, "total"}
            assert params[key]["total"] == sum(params[key][k] for k in KINDS)
        # a commit claims a global version, decides it and publishes at least one Delta commit
        assert params["commit_phase_requests"]["PUT"] >= 3


def _check_throughput_rows(rows: list[dict[str, Any]], configs: list[str]) -> None:
    assert [r["config"] for r in rows] == configs
    for row in rows:
        params = row["params"]
        assert row["txlake"] > 0 and row["baseline"] > 0
        assert params["txlake_errors"] == 0 and params["baseline_errors"] == 0
        assert params["txlake_conflicts"] == 0  # disjoint tables never conflict
        assert params["txlake_commits"] == sum(w["commits"] for w in params["txlake_writers"]) > 0
        assert len(params["txlake_writers"]) == len(params["baseline_writers"]) == params["writers"]
        assert sum(params["txlake_commits_per_second_timeline"]) == params["txlake_commits"]
        assert set(params["txlake_requests_per_commit"]) == set(KINDS)
        by_target = params["txlake_requests_per_commit_by_target"]
        for kind in KINDS:  # the same requests, by what they touched
            ours = sum(n for what, n in by_target.items() if what.split(" ", 1)[0] == kind)
            assert ours == pytest.approx(params["txlake_requests_per_commit"][kind])
        assert by_target["PUT data file"] == pytest.approx(1.0)  # one file per one-table append


def test_commit_workload_is_registered() -> None:
    assert "commit" in WORKLOADS


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("_txlake/log", "global log listing"),
        ("_txlake/log/00000000000000000007.json", "global record"),
        ("_txlake/log/00000000000000000007.outcome.json", "global outcome"),
        ("_txlake/log/00000000000000000100.checkpoint.json", "global checkpoint"),
        ("_txlake/_last_checkpoint", "global _last_checkpoint"),
        ("bench/t00/_delta_log", "delta log listing"),
        ("bench/t00/_delta_log/00000000000000000003.json", "delta commit"),
        ("bench/t00/_delta_log/00000000000000000010.checkpoint.parquet", "delta checkpoint"),
        ("bench/t00/_delta_log/_last_checkpoint", "delta _last_checkpoint"),
        ("bench/t00/part-abc-123.snappy.parquet", "data file"),
        ("_txlake/groups/00000000000000000007/", "group intent"),
        ("_txlake/groups/00000000000000000007/abc.json", "group intent"),
        ("_txlake/txns/abc/lease-1.json", "transaction sublog"),
        ("_txlake/reservations/t.abc.json", "reservation"),
        ("_txlake/intents/t/00000000000000000001-abc.json", "pessimistic marker"),
    ],
)
def test_requests_are_attributed_by_path(path: str, what: str) -> None:
    assert classify(path) == what


def test_commit_bench_writes_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "results"

    rc = main(["bench", "commit", "--no-s3", *TINY, "--profile", "--profile-repeat", "1", "--out", str(out)])

    assert rc == 0
    single = _load(out, "single")
    assert single["target_ratio"] == 1.3
    assert single["parameters"]["rows"] == 50
    assert list(single["parameters"]["backends"]) == ["file"]
    _check_latency_rows(single["rows"], ["file"])
    tables = _load(out, "tables")
    assert tables["parameters"]["tables"] == [1, 2]
    _check_latency_rows(tables["rows"], ["file k=1", "file k=2"])
    assert [r["params"]["k"] for r in tables["rows"]] == [1, 2]
    one, two = (r["params"] for r in tables["rows"])
    assert one["commit_phase_vs_k1"] == 1.0 and "meets_target" not in one
    assert two["commit_phase_vs_k1"] == pytest.approx(two["txlake_commit_phase_ms"] / one["txlake_commit_phase_ms"])
    assert two["target_commit_phase_vs_k1"] == 3.0
    assert two["meets_target"] == (two["commit_phase_vs_k1"] <= 3.0)
    assert "added_latency" not in tables["parameters"]
    assert (out / "commit-tables-requests.png").read_bytes().startswith(PNG_MAGIC)
    throughput = _load(out, "throughput")
    assert throughput["parameters"]["writers"] == [1]
    _check_throughput_rows(throughput["rows"], ["file 1w", "file 1w hot"])
    shared = ["one table per writer", "one table shared by every writer"]
    assert [r["params"]["tables"] for r in throughput["rows"]] == shared
    assert "meets_target" in throughput["rows"][0]["params"]
    profile = (out / "commit-profile.txt").read_text()
    assert "=== single" in profile and "=== k2" in profile
    assert (out / "commit-profile-file-single.prof").stat().st_size > 0
    assert (out / "commit-profile-file-k2.prof").stat().st_size > 0


def test_added_latency_delays_every_txlake_request(tmp_path: Path) -> None:
    """--added-latency: a commit's record, Delta commit and outcome PUTs go one after another, so its commit
    phase takes at least three added write latencies (a lower bound: sleeping guarantees it)."""
    pytest.importorskip("deltalake")

    rc = main(
        ["bench", "commit", "--no-s3", *TINY, "--parts", "tables", "--added-latency", "40", "5", "--out", str(tmp_path)]
    )

    assert rc == 0
    tables = _load(tmp_path, "tables")
    assert tables["parameters"]["added_latency"].startswith("40 ms per txlake PUT/DELETE, 5 ms per GET/HEAD/LIST")
    assert "not comparable" in tables["parameters"]["ratios_to_delta_rs"]
    for row in tables["rows"]:
        assert row["params"]["txlake_commit_phase_ms"] >= 3 * 40


@pytest.mark.parametrize("bad", [["-1", "10"], ["20", "nan"], ["inf", "1"], ["1e300", "0"], ["20"]])
def test_added_latency_rejects_bad_values(tmp_path: Path, bad: list[str]) -> None:
    assert main(["bench", "commit", "--no-s3", "--added-latency", *bad, "--out", str(tmp_path)]) == 2
    assert not tmp_path.joinpath("commit-single.json").exists()


@pytest.mark.parametrize("bad", [(float("nan"), 0.0), (0.0, -1.0), (1e300, 0.0)])
def test_added_latency_is_checked_when_built_directly(bad: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="added latency"):
        AddedLatency(*bad)


def test_commit_bench_parts_are_selectable(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")

    rc = main(["bench", "commit", "--no-s3", *TINY, "--parts", "single", "--out", str(tmp_path)])

    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["commit-single.json", "commit-single.png"]


@pytest.mark.s3
def test_commit_bench_runs_on_an_existing_s3_server(
    tmp_path: Path, seaweedfs: SeaweedFS, s3_bucket: str, s3_options: dict[str, str]
) -> None:
    pytest.importorskip("deltalake")
    options = [arg for key, value in s3_options.items() for arg in ("--storage-option", f"{key}={value}")]
    server = ["--s3-endpoint", seaweedfs.endpoint, "--s3-bucket", s3_bucket, *options]

    rc = main(["bench", "commit", *TINY, *server, "--out", str(tmp_path)])

    assert rc == 0
    single = _load(tmp_path, "single")
    assert list(single["parameters"]["backends"]) == ["file", "s3"]
    _check_latency_rows(single["rows"], ["file", "s3"])
    _check_latency_rows(_load(tmp_path, "tables")["rows"], ["file k=1", "file k=2", "s3 k=1", "s3 k=2"])
    _check_throughput_rows(_load(tmp_path, "throughput")["rows"], ["file 1w", "file 1w hot", "s3 1w", "s3 1w hot"])
