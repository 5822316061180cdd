"""``txlake demo`` in a short, bounded form: the bank invariant must hold (Arrow, Spark, S3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from txlake.cli.main import main

PNG = b"\x89PNG\r\n\x1a\n"


def _check(out: dict[str, object]) -> None:
    assert out["ok"] is True
    assert out["violations"] == 0
    assert isinstance(out["commits"], int) and out["commits"] > 0
    assert out["final_total"] == out["expected_total"] == out["time_travel_total"]


def test_demo_arrow_short_run_keeps_the_invariant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--path", str(tmp_path / "lake"), "--seconds", "4", "--workers", "2", "--no-spark", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    _check(out)
    assert out["engine"] == "arrow"
    assert Path(str(out["chart"])).read_bytes()[:8] == PNG


def test_demo_with_local_spark_as_a_user_runs_it(tmp_path: Path) -> None:
    """The real command, in its own process, with local Spark (the README's main job, shortened)."""
    exe = Path(sys.executable).parent / "txlake"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [str(exe), "demo", "--path", str(tmp_path / "lake"), "--seconds", "5", "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    _check(out)
    assert out["engine"] == "spark"


@pytest.mark.s3
def test_demo_against_s3_endpoint(
    seaweedfs: object, s3_options: dict[str, str], s3_bucket: str, tmp_path: Path
) -> None:
    args = ["demo", "--s3", "--s3-bucket", s3_bucket, "--seconds", "3", "--workers", "2", "--no-spark", "--json"]
    args += ["--chart", str(tmp_path / "chart.png")]
    for key, value in s3_options.items():
        args += ["--storage-option", f"{key}={value}"]
    code = main(args)
    assert code == 0
    assert (tmp_path / "chart.png").read_bytes()[:8] == PNG
