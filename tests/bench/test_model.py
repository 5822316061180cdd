"""The throughput model (``txlake.bench.model``): deterministic, calibrated, monotone in latency.

Pure simulation: no store, no processes; the whole module runs in a few seconds.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from txlake.bench import WORKLOADS
from txlake.bench.model import (
    MEASURED,
    PROTOCOLS,
    TOLERANCE,
    CalibrationPoint,
    Protocol,
    calibrate,
    s3,
    seaweedfs_here,
    simulate,
)
from txlake.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_seed_determines_the_run() -> None:
    env = seaweedfs_here()

    first = simulate("new", 8, env, seconds=1.0, seed=7)
    again = simulate("new", 8, env, seconds=1.0, seed=7)
    other = simulate("new", 8, env, seconds=1.0, seed=8)

    assert first == again
    assert first.commits > 0
    assert other != first


@pytest.fixture(scope="module")
def calibration() -> list[CalibrationPoint]:
    return calibrate(seconds=3.0)


def test_calibration_points_are_reproduced_within_the_tolerance(calibration: list[CalibrationPoint]) -> None:
    points = calibration

    errors = {(p.measured.protocol, p.measured.writers): round(p.error, 3) for p in points}
    assert len(points) == len(MEASURED)
    assert all(abs(e) <= TOLERANCE for e in errors.values()), errors


def test_calibration_request_mixes_are_close_where_measured(calibration: list[CalibrationPoint]) -> None:
    """Requests per commit (GET, PUT, LIST, HEAD as the store counts them) within the same tolerance."""
    off = {}
    for p in calibration:
        predicted = p.requests()
        for kind, measured in p.measured.requests.items():
            if abs(predicted[kind] / measured - 1) > TOLERANCE:
                off[(p.measured.protocol, p.measured.writers, kind)] = (measured, round(predicted[kind], 2))
    assert not off, off


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_more_latency_never_raises_a_single_writers_rate(protocol: Protocol) -> None:
    rates = [
        simulate(protocol, 1, s3(put, get), seconds=6.0, warmup=0.5).tx_per_s
        for put, get in ((2.0, 1.0), (5.0, 2.0), (20.0, 10.0), (50.0, 20.0), (100.0, 50.0))
    ]

    assert all(a >= b for a, b in itertools.pairwise(rates)), rates
    assert rates[-1] > 0


def test_one_writer_never_races() -> None:
    result = simulate("new", 1, s3(20.0, 10.0), seconds=10.0)

    assert result.rebases == 0
    assert result.group_size == 1.0
    assert result.per_commit("LIST") == 0


def test_s3_writers_are_not_cpu_bound() -> None:
    result = simulate("old", 8, s3(20.0, 10.0), seconds=5.0)

    assert result.cpu_utilization is None
    assert result.server_cpu_ms == 0


def test_model_workload_writes_json_and_png(tmp_path: Path) -> None:
    assert "model" in WORKLOADS
    out = tmp_path / "results"

    rc = main(["bench", "model", "--writers", "1", "2", "--seconds", "0.3", "--s3", "20,10", "--out", str(out)])

    assert rc == 0
    assert (out / "model.png").read_bytes().startswith(PNG_MAGIC)
    doc = json.loads((out / "model.json").read_text())
    assert doc["benchmark"] == "model"
    assert [e["name"] for e in doc["parameters"]["environments"]] == ["seaweedfs-here", "s3-20ms"]
    assert len(doc["calibration"]["points"]) == len(MEASURED)
    combos = {(p["environment"], p["protocol"], p["writers"]) for p in doc["predictions"]}
    assert combos == {(e, p, n) for e in ("seaweedfs-here", "s3-20ms") for p in PROTOCOLS for n in (1, 2)}
    assert all(p["tx_per_s"] > 0 for p in doc["predictions"])


def test_bad_s3_latency_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "model", "--s3", "20"]) == 2
    assert "PUT_MS,GET_MS" in capsys.readouterr().err
