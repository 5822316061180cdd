"""Local lakehouse paths as users type them: taken literally (``#`` and ``?`` are part of a name), refused with
one line and exit 7 when unusable, and ``demo --fresh`` on whichever location the demo uses (the real executable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import txlake
from tests.cli.real import EXE, assert_clean_failure, environment, tree
from tests.cli.real import txlake as cli
from txlake.cli.exit_codes import LOCAL_PATH_HINT, ExitCode
from txlake.cli.options import URI_ENV
from txlake.errors import StorageError

DEMO = ("--no-spark", "--seconds", "0.3", "--workers", "1", "--accounts", "2", "--json")


@pytest.mark.parametrize("name", ["a#b", "a?b"])
def test_a_local_path_with_hash_or_question_mark_is_taken_literally(tmp_path: Path, name: str) -> None:
    """Not a URL: ``a#b`` is not the directory ``a`` with a fragment, ``a?b`` not ``a`` with a query."""
    lake = tmp_path / name
    done = cli("init", str(lake))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"created an empty lakehouse at file://{lake} (version 0)"
    done = cli("tables", "--uri", f"file://{lake}", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["uri"] == f"file://{lake}"
    assert txlake.connect(str(lake), create=False).version() == 0

    demo = tmp_path / f"demo-{name}"
    done = cli("demo", "--path", str(demo), *DEMO)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["uri"] == f"file://{demo}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, f"demo-{name}"])  # nothing cut short
    assert txlake.connect(str(demo), create=False).tables() == ["bank.east", "bank.north", "bank.south"]


def test_table_location_is_a_uri_plain_delta_clients_open(tmp_path: Path) -> None:
    """Under a directory named ``a#b c%d``, ``table_location`` percent-encodes what URIs reserve, so delta-rs
    opens the very table (it would read ``#`` as a fragment); ordinary paths are unchanged."""
    lake = txlake.connect(str(tmp_path / "a#b c%d"))
    lake.create_table("s.t", pa.schema([("id", pa.int64())]))
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": [1, 2]}))
    location = lake.table_location("s.t")
    assert location == f"file://{tmp_path}/a%23b%20c%25d/s/t"
    table = deltalake.DeltaTable(location)
    assert table.version() == 1 and len(table.file_uris()) == 1
    plain = txlake.connect(str(tmp_path / "plain"))
    plain.create_table("s.t", pa.schema([("id", pa.int64())]))
    assert plain.table_location("s.t") == f"file://{tmp_path}/plain/s/t"


def test_a_path_that_cannot_hold_a_lakehouse_is_a_storage_error(tmp_path: Path) -> None:
    """A name longer than the file system allows, a path below a regular file: exit 7 naming the path and
    the reason, not an internal error."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    too_long = tmp_path / ("x" * 300)
    for args, reason in (
        (("tables", "--uri", str(too_long)), "300 bytes long"),
        (("init", str(too_long)), "300 bytes long"),
        (("demo", "--path", str(a_file / "demo"), *DEMO), "is a file, not a directory"),
        (("demo", "--path", str(too_long), *DEMO), "300 bytes long"),
    ):
        line = assert_clean_failure(cli(*args), ExitCode.STORAGE)
        assert reason in line and "internal error" not in line, line
    assert a_file.read_text() == "not a directory"
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_directory_where_nothing_can_be_written_names_the_reason_not_credentials() -> None:
    """``/proc/self`` exists but holds no new directories: the first PUT fails; the error says why in plain
    words and the hint is about the local path (not AWS credentials, nor obstore's "Generic LocalFileSystem")."""
    done = cli("init", "/proc/self")
    line = assert_clean_failure(done, ExitCode.STORAGE)
    assert "virtual file system (proc)" in line and "Generic" not in line, line
    assert LOCAL_PATH_HINT in done.stderr and "credentials" not in done.stderr, done.stderr
    with pytest.raises(StorageError, match="virtual file system"):
        txlake.connect("/proc/self")


# ------------------------------------------------------------------------------------- demo --fresh


def _genesis(lake: Path) -> bytes:
    return (lake / "_txlake" / "log" / f"{0:020d}.json").read_bytes()


@pytest.mark.parametrize("given_by", ["--uri", URI_ENV])
def test_fresh_applies_to_the_lakehouse_given_by_uri_too(tmp_path: Path, given_by: str) -> None:
    """``--fresh`` with ``--uri DIR`` or ``$TXLAKE_URI`` follows the rules of ``--path``: it deletes the demo's own
    directory and starts over, and refuses one holding anything else."""
    target = tmp_path / "demo"

    def demo(*extra: str) -> tuple[list[str], dict[str, str]]:
        if given_by == URI_ENV:
            return ["demo", *DEMO, *extra], {URI_ENV: str(target)}
        return ["demo", "--uri", str(target), *DEMO, *extra], {}

    args, env = demo()
    done = cli(*args, **env)
    assert done.returncode == 0, done.stderr
    first = _genesis(target)
    args, env = demo("--fresh")
    done = cli(*args, **env)
    assert done.returncode == 0, done.stderr
    assert _genesis(target) != first  # a new lakehouse, not the old one continued
    assert json.loads(done.stdout)["uri"] == f"file://{target}"

    (target / "notes.txt").write_text("keep me")
    before = tree(target)
    line = assert_clean_failure(cli(*args, **env), ExitCode.USAGE)
    assert "refusing to delete" in line and str(target) in line
    assert tree(target) == before


def test_fresh_refuses_a_lakehouse_that_is_not_local() -> None:
    line = assert_clean_failure(cli("demo", "--uri", "memory://demo", "--fresh", *DEMO), ExitCode.USAGE)
    assert "--fresh" in line and "memory://demo" in line


def test_single_slash_file_uris_name_the_absolute_directory(tmp_path: Path) -> None:
    """``file:/abs/dir`` is how Spark and Java print local paths: it is that directory, not one under the cwd."""
    target = tmp_path / "single"
    done = cli("init", f"file:{target}")
    assert done.returncode == 0, done.stderr
    assert (target / "_txlake").is_dir()
    before = sorted(p.name for p in Path.cwd().iterdir())
    for bad in ("file:relative", "file:", "s3:bucket"):
        assert_clean_failure(cli("init", bad), ExitCode.USAGE)
    assert sorted(p.name for p in Path.cwd().iterdir()) == before  # nothing made under the current directory


@pytest.mark.parametrize(
    "args",
    [
        ["--accounts", "0"],
        ["--workers", "0"],
        ["--seconds", "-1"],
        ["--transfers", "0"],
        ["--chart", "/proc/txlake-demo.png"],
        ["--chart", "{tmp}/no/such/dir/chart.png"],
        ["--chart", "{tmp}"],
        ["--uri", "{tmp}/elsewhere"],  # two places: --path and --uri
        ["--s3"],
    ],
)
def test_demo_arguments_are_checked_before_anything_runs(tmp_path: Path, args: list[str]) -> None:
    target = tmp_path / "demo"
    done = cli("demo", "--no-spark", "--path", str(target), *[a.format(tmp=tmp_path) for a in args])
    assert_clean_failure(done, ExitCode.USAGE)
    assert not target.exists()  # nothing was run


def test_ctrl_c_during_the_demo_stops_its_workers_quietly(tmp_path: Path) -> None:
    """The demo's transfer workers finish their transaction and stop: one line, exit 130, a healthy lakehouse."""
    target = tmp_path / "demo"
    proc = subprocess.Popen(
        [str(EXE), "demo", "--no-spark", "--path", str(target), "--seconds", "30", "--accounts", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment(),
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (target / "bank").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)  # transfers are running
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 130, err
    assert err.strip().splitlines() == ["error: interrupted"], err
    doctor = cli("doctor", "--uri", str(target))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_demo_with_an_empty_path_is_refused_not_the_default(tmp_path: Path) -> None:
    before = sorted(p.name for p in Path.cwd().iterdir())
    line = assert_clean_failure(cli("demo", "--no-spark", "--path", ""), ExitCode.USAGE)
    assert "--path is empty" in line
    assert sorted(p.name for p in Path.cwd().iterdir()) == before
