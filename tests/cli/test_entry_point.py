"""The installed ``txlake`` script, run as a real process: stdout, stderr and exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import txlake
from txlake.cli.exit_codes import ExitCode, describe_failure
from txlake_cli import interrupted

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


def test_the_script_starts_without_importing_txlake() -> None:
    """The console script's module is light: a Ctrl-C while ``txlake`` itself is importing is its to handle."""
    code = "import sys, txlake_cli; print(sorted(m for m in sys.modules if m.split('.')[0] in {'txlake', 'pyarrow'}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(lake: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCRIPT), "tables", "--uri", str(lake)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TXLAKE_URI" and not k.startswith("AWS_")},
        preexec_fn=_default_sigint,  # a SIGINT ignored by whoever runs the tests would be ignored here too
    )


def _loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")
def test_ctrl_c_while_importing_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """SIGINT as soon as the process has loaded Arrow (txlake is importing): one line, exit 130, no traceback."""
    proc = _start(tmp_path / "absent-lake")
    deadline = time.monotonic() + 30
    while not _loaded(proc.pid, "libarrow") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, (proc.returncode, err)
    assert err.splitlines() == ["error: interrupted"], err


@pytest.mark.parametrize("delay", [0.2, 0.4, 0.8])
def test_ctrl_c_while_starting_is_one_line_and_exit_130(tmp_path: Path, delay: float) -> None:
    """SIGINT at any later moment of start-up (parsing, opening the lakehouse): no traceback; exit 130 with
    ``error: interrupted``, or the command finished first (3: no lakehouse there; or killed by the signal while
    the interpreter shut down, after its error line)."""
    proc = _start(tmp_path / "absent-lake")
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if proc.returncode == ExitCode.INTERRUPTED:
        assert err.splitlines() == ["error: interrupted"], err
    else:
        assert proc.returncode in (ExitCode.NOT_FOUND, -signal.SIGINT), (proc.returncode, err)
        assert err.startswith("error: no lakehouse at "), err


def test_an_error_python_raised_because_of_a_ctrl_c_counts_as_the_ctrl_c() -> None:
    """A Ctrl-C inside ``__set_name__`` while a module is imported reaches us as a ``RuntimeError`` caused by the
    ``KeyboardInterrupt`` (seen once in CI, 0.2 s into start-up): it is an interruption, exit 130, one line."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from exc
    except RuntimeError as wrapped:
        assert interrupted(wrapped)
        assert describe_failure(wrapped).code == ExitCode.INTERRUPTED
    assert not interrupted(RuntimeError("something else"))
