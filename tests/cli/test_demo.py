"""``txlake demo`` in a short, bounded form: the bank invariant must hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txlake.cli.main import main


def test_demo_short_run_keeps_the_invariant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--path", str(tmp_path / "lake"), "--seconds", "4", "--workers", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["ok"] is True
    assert out["violations"] == 0
    assert out["commits"] > 0
    assert out["final_total"] == out["expected_total"] == out["time_travel_total"]
    assert Path(out["chart"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
