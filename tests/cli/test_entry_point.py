"""The installed ``txlake`` script, run as a real process: stdout, stderr and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import txlake
from txlake.cli.exit_codes import ExitCode

SCRIPT = Path(sys.executable).with_name("txlake")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "TXLAKE_URI" and not k.startswith("AWS_")}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env={**base, **(env or {})}, check=False
    )


def test_entry_point(bank: txlake.Lakehouse) -> None:
    assert SCRIPT.exists(), f"the txlake script is not installed next to {sys.executable}"
    listed = _run("tables", "--json", env={"TXLAKE_URI": bank.uri})
    assert listed.returncode == ExitCode.OK, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tables"]] == ["bank.checking", "bank.savings"]

    missing = _run("describe", "bank.nope", "--uri", bank.uri)
    assert missing.returncode == ExitCode.NOT_FOUND
    assert missing.stdout == ""
    assert missing.stderr.splitlines()[0].startswith("error: no table 'bank.nope'")
    assert missing.stderr.splitlines()[1].startswith("hint: ")
    assert "Traceback" not in missing.stderr

    doctor = _run("doctor", "--uri", bank.uri)
    assert doctor.returncode == ExitCode.OK, doctor.stdout
    assert "healthy" in doctor.stdout

    usage = _run("log", "--limit", "x")
    assert usage.returncode == ExitCode.USAGE
    assert "error: argument --limit" in usage.stderr
