"""The first hour with ``txlake``: each mistake a user makes gets one clear line, the right exit code, and
nothing is written or deleted that should not be (the real executable, in its own process)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.cli.conftest import Txlake, build_bank
from tests.cli.real import EXE, assert_clean_failure, environment, error_lines, tree
from tests.cli.real import txlake as cli
from txlake.cli.exit_codes import ExitCode
from txlake.storage.local import local_path_problem

DEMO = ("--no-spark", "--seconds", "0.5", "--workers", "1", "--accounts", "2", "--json")


# ------------------------------------------------------------------------------------------- demo --fresh


def _demo(path: Path, *extra: str) -> dict[str, object]:
    done = cli("demo", "--path", str(path), *DEMO, *extra)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert isinstance(doc, dict) and doc["ok"] is True
    return doc


def test_fresh_refuses_a_directory_with_anything_the_demo_did_not_make(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    (target / "bank").mkdir(parents=True)
    (target / "notes.txt").write_text("keep me")
    (target / "bank" / "ledger.csv").write_text("1,2")
    before = tree(target)
    line = assert_clean_failure(cli("demo", "--path", str(target), "--fresh", *DEMO), ExitCode.USAGE)
    assert "refusing to delete" in line and str(target) in line
    assert tree(target) == before


def test_fresh_refuses_a_lakehouse_that_is_not_the_demos(tmp_path: Path) -> None:
    target = tmp_path / "lake"
    build_bank(f"file://{target}")  # bank.checking and bank.savings: not the demo's tables
    before = tree(target)
    line = assert_clean_failure(cli("demo", "--path", str(target), "--fresh", *DEMO), ExitCode.USAGE)
    assert "bank.checking" in line
    assert tree(target) == before


def test_the_demo_never_touches_a_users_tables_named_like_its_own(tmp_path: Path) -> None:
    """A user's own ``bank.north`` (not marked as the demo's) is neither deleted by --fresh nor written to."""
    target = tmp_path / "mine"
    lake = txlake.connect(f"file://{target}")
    lake.create_table("bank.north", "id long, owner string, balance long")
    with lake.transaction() as tx:
        tx.append("bank.north", pa.table({"id": [1000], "owner": ["a real customer"], "balance": [5]}))
    before = tree(target)
    for extra in (("--fresh",), ()):
        line = assert_clean_failure(cli("demo", "--path", str(target), *extra, *DEMO), ExitCode.USAGE)
        assert "bank.north" in line and "the demo did not make" in line
    assert tree(target) == before


def test_fresh_deletes_only_what_the_demo_made(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    _demo(target)
    genesis = target / "_txlake" / "log" / f"{0:020d}.json"
    first_genesis = genesis.read_bytes()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")

    # anything foreign inside the demo's own layout, or a link out of it, and nothing is deleted
    intruders = (
        target / "bank" / "north" / "notes.txt",
        target / "_txlake" / "backup.json",
        target / "_txlake" / "log" / "notes.txt",
        target / "_txlake" / "txns" / "mine" / "keep.txt",
        target / "bank" / "north" / "_delta_log" / "notes.txt",
        target / "bank" / "north" / "mydata.parquet",
        target / "bank" / "east-abcdef12" / "a.parquet",
    )
    for intruder in intruders:
        made = not intruder.parent.exists()
        intruder.parent.mkdir(parents=True, exist_ok=True)
        intruder.write_text("keep me")
        before = tree(target)
        line = assert_clean_failure(cli("demo", "--path", str(target), "--fresh", *DEMO), ExitCode.USAGE)
        assert str(intruder) in line or (made and str(intruder.parent) in line)
        assert tree(target) == before
        intruder.unlink()
        if made:
            intruder.parent.rmdir()
    chart = next(target.glob("*.png"))
    png = chart.read_bytes()
    chart.write_text("my own picture")  # the chart's name, not a chart
    assert_clean_failure(cli("demo", "--path", str(target), "--fresh", *DEMO), ExitCode.USAGE)
    assert chart.read_text() == "my own picture"
    chart.write_bytes(png)
    (target / "link").symlink_to(outside, target_is_directory=True)
    assert_clean_failure(cli("demo", "--path", str(target), "--fresh", *DEMO), ExitCode.USAGE)
    assert (outside / "precious.txt").read_text() == "keep me"
    (target / "link").unlink()

    # the demo's own directory (lakehouse, tables, chart) is deleted and the demo starts over
    _demo(target, "--fresh")
    assert genesis.read_bytes() != first_genesis  # a new lakehouse, not the old one continued
    assert txlake.connect(target.as_uri(), create=False).tables() == ["bank.east", "bank.north", "bank.south"]
    assert (outside / "precious.txt").read_text() == "keep me"


# ------------------------------------------------------------------------------------------------- init


def test_init_where_no_directory_can_be_created_is_a_storage_error(tmp_path: Path) -> None:
    line = assert_clean_failure(cli("init", "/proc/txlake-nope"), ExitCode.STORAGE)
    assert "/proc" in line and "virtual file system" in line
    assert not os.path.exists("/proc/txlake-nope")

    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    for target in (a_file / "lake", a_file):
        done = cli("init", str(target))
        line = assert_clean_failure(done, ExitCode.STORAGE)
        assert f"{a_file}" in line and "is a file, not a directory" in line
        assert "internal error" not in done.stderr
    assert a_file.read_text() == "not a directory"


def test_a_read_only_place_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    problem, in_the_way = local_path_problem(tmp_path / "lake")
    assert problem == f"{tmp_path} is on a read-only file system" and not in_the_way


# -------------------------------------------------------------------------------------------------- sql


@pytest.fixture
def lake_dir(tmp_path: Path) -> Path:
    build_bank(f"file://{tmp_path / 'lake'}")
    return tmp_path / "lake"


def test_sql_unknown_table_is_not_found_with_the_closest_names(lake_dir: Path) -> None:
    done = cli("sql", "SELECT * FROM bank.chekcing", "--uri", str(lake_dir))
    assert "did you mean 'bank.checking'?" in assert_clean_failure(done, ExitCode.NOT_FOUND)
    done = cli("sql", "SELECT * FROM bank.nope", "--uri", str(lake_dir))
    line = assert_clean_failure(done, ExitCode.NOT_FOUND)
    assert "no table 'bank.nope'" in line and "bank.checking" in line and "bank.savings" in line
    done = cli("sql", "SELECT * FROM bank.checking c JOIN bank.savinsg s USING (id)", "--uri", str(lake_dir))
    assert "did you mean 'bank.savings'?" in assert_clean_failure(done, ExitCode.NOT_FOUND)


def test_sql_errors_name_the_query_not_the_where_option(lake_dir: Path) -> None:
    for query in ("SELECT balanse FROM bank.checking", "SELECT * FROM bank.checking WHERE", "DELETE FROM bank.x"):
        done = cli("sql", query, "--uri", str(lake_dir))
        assert_clean_failure(done, ExitCode.INVALID)
        assert "--where" not in done.stderr
        assert "hint: check the query" in done.stderr
    done = cli("sql", "SELECT balanse FROM bank.checking", "--uri", str(lake_dir))
    assert "unknown column 'balanse' in the query; did you mean 'balance'?" in error_lines(done.stderr)[0]
    done = cli("show", "bank.checking", "--where", "balanse > 1", "--uri", str(lake_dir))
    assert_clean_failure(done, ExitCode.INVALID)
    assert "--where" in done.stderr


def test_a_parse_error_shows_the_expression_and_a_caret(lake_dir: Path) -> None:
    done = cli("show", "bank.checking", "--where", "balance +", "--uri", str(lake_dir))
    line = assert_clean_failure(done, ExitCode.INVALID)
    assert line == "error: cannot parse 'balance +': expected an expression after '+'"
    lines = done.stderr.splitlines()
    assert lines[1:3] == ["  balance +", "           ^"]
    assert "\x1b[" not in done.stderr and "sqlglot" not in done.stderr and "Col:" not in done.stderr


def test_sql_on_spark_reports_analysis_errors_in_one_line(lake_dir: Path) -> None:
    """A join runs on Spark: its AnalysisException is the user's mistake (exit 8), without the JVM's output."""
    query = "SELECT c.id, s.balanse FROM bank.checking c JOIN bank.savings s USING (id)"
    done = cli("sql", query, "--uri", str(lake_dir))
    line = assert_clean_failure(done, ExitCode.INVALID)
    assert "balanse" in line and "did you mean 'balance'?" in line
    assert len(done.stderr) < 1000, done.stderr


def test_ctrl_c_during_a_spark_query_prints_only_interrupted(lake_dir: Path) -> None:
    query = "SELECT max(r.id + c.id) AS m FROM range(100000000000) r CROSS JOIN bank.checking c"
    proc = subprocess.Popen(
        [str(EXE), "sql", query, "--uri", str(lake_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        start_new_session=True,  # Ctrl-C reaches the whole foreground group: the command, its JVM, workers
    )
    try:
        deadline = time.monotonic() + 120
        while not _children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(20)  # Spark starting or the query running: either way only "interrupted" may be printed
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert err == "error: interrupted\n"
    assert out == ""


@pytest.mark.parametrize("after", [0.2, 3.0])
def test_ctrl_c_while_spark_starts_interrupts_at_once(lake_dir: Path, after: float) -> None:
    """Spark takes seconds to start: a Ctrl-C then (``after`` seconds into the JVM's start) ends the command at
    once with "interrupted", and leaves no JVM behind."""
    pytest.importorskip("pyspark")
    proc = subprocess.Popen(
        [str(EXE), "sql", "SELECT count(*) FROM bank.checking", "--uri", str(lake_dir), "--engine", "spark"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (jvms := _children(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert jvms, "no JVM started"
        time.sleep(after)
        assert proc.poll() is None, "Spark started faster than the test assumes"
        interrupted = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert (proc.returncode, err, out) == (ExitCode.INTERRUPTED, "error: interrupted\n", "")
    assert took < 3, f"the interrupt took {took:.1f} s"  # (Spark takes longer to start: it was not waited for)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in jvms) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in jvms), "the JVM outlived the command"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# ------------------------------------------------------------------------------------------ storage


def test_an_http_endpoint_without_allow_http_says_to_set_it(tmp_path: Path) -> None:
    done = cli(
        "tables",
        "--uri",
        "s3://bucket/lake",
        "--storage-option",
        "aws_endpoint_url=http://127.0.0.1:9",
        "--storage-option",
        "aws_access_key_id=AKIDEXAMPLE",
        "--storage-option",
        "aws_secret_access_key=wJalrXUtnFEMIsecret",
    )
    line = assert_clean_failure(done, ExitCode.STORAGE)
    assert "plain HTTP is not allowed" in line and "builder error" not in line
    assert "AWS_ALLOW_HTTP=true" in done.stderr
    assert "Debug source" not in done.stderr and "wJalrXUtnFEMIsecret" not in done.stderr


# ------------------------------------------------------------------------------------ show, names, pipes


def test_show_order_by(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", "balance DESC", "--json")
    assert run.code == 0
    assert [r["balance"] for r in run.json()["rows"]] == [70, 50, 7]  # type: ignore[index]
    run = txlake_cli(
        "show", "bank.checking", "--uri", bank.uri, "--order-by", "owner", "--columns", "id", "--limit", "2", "--json"
    )
    doc = run.json()
    assert doc["rows"] == [{"id": 1}, {"id": 2}] and doc["order_by"] == "owner"  # type: ignore[index]
    bad = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", "balanse")
    assert bad.code == ExitCode.INVALID and "did you mean 'balance'?" in bad.err
    bad = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", "id, (balance")
    assert bad.code == ExitCode.INVALID and "  id, (balance\n" in bad.err


def _ids(run: object) -> list[int]:
    return [row["id"] for row in run.json()["rows"]]  # type: ignore[attr-defined]


def test_show_order_by_a_number_is_a_position_as_in_sql(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    """``--order-by 1`` sorts by the first column shown (of ``--columns`` when given), not by the constant 1."""
    show = ("show", "bank.checking", "--uri", bank.uri, "--json")
    assert _ids(txlake_cli(*show, "--order-by", "3")) == [3, 2, 1]  # balance: 7, 50, 70
    assert _ids(txlake_cli(*show, "--order-by", "1 DESC")) == [3, 2, 1]
    assert _ids(txlake_cli(*show, "--order-by", "1", "--columns", "balance,id")) == [3, 2, 1]
    assert _ids(txlake_cli(*show, "--order-by", "2 DESC, 1", "--columns", "balance,id")) == [3, 2, 1]
    bad = txlake_cli(*show, "--order-by", "4")
    assert bad.code == ExitCode.INVALID
    assert error_lines(bad.err) == [
        "error: --order-by position 4 is not a column of the output (1..3: id, owner, balance)"
    ]


@pytest.mark.parametrize(("order_by", "caret"), [("id,", 2), ("id,,balance", 2), (",id", 0), ("coalesce(id,), id", 11)])
def test_show_order_by_with_an_empty_key_is_refused(
    bank: txlake.Lakehouse, txlake_cli: Txlake, order_by: str, caret: int
) -> None:
    """sqlglot reads ``ORDER BY id,`` as ``ORDER BY id``: a stray comma is refused (exit 2), with a caret."""
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", order_by)
    assert run.code == ExitCode.USAGE and run.out == ""
    lines = run.err.splitlines()
    assert lines[0].startswith("error: --order-by has an empty")
    assert lines[1:3] == [f"  {order_by}", "  " + " " * caret + "^"]
    assert lines[3] == "hint: see `txlake show --help`"
    empty = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", " ")
    assert empty.code == ExitCode.USAGE and "--order-by is empty" in empty.err


def test_sql_mistakes_get_the_caret_where_they_are_and_hints_name_the_command(
    bank: txlake.Lakehouse, txlake_cli: Txlake
) -> None:
    run = txlake_cli("sql", "SELEC * FROM bank.checking", "--uri", bank.uri)
    assert run.code == ExitCode.INVALID
    assert run.err.splitlines()[:3] == [
        "error: cannot parse the query: a query starts with SELECT or WITH, found 'SELEC'; did you mean SELECT?",
        "  SELEC * FROM bank.checking",
        "  ^",
    ]
    for query in ("", "  ", ";"):
        run = txlake_cli("sql", query, "--uri", bank.uri)
        assert run.code == ExitCode.USAGE and run.out == ""
        assert error_lines(run.err) == ['error: the query is empty: give one, e.g. "SELECT * FROM namespace.table"']
        assert "hint: see `txlake sql --help`" in run.err and "COMMAND" not in run.err
    run = txlake_cli("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_endpoint_url=localhost:8333")
    assert run.code == ExitCode.USAGE and "COMMAND" not in run.err
    assert "'aws_endpoint_url' must be an http:// or https:// URL" in run.err
    assert "hint: storage options are aws_endpoint_url (http://host:port)" in run.err


@pytest.mark.parametrize("command", ["show", "describe", "history"])
def test_a_misspelt_table_gets_did_you_mean(bank: txlake.Lakehouse, txlake_cli: Txlake, command: str) -> None:
    run = txlake_cli(command, "bank.chekcing", "--uri", bank.uri)
    assert run.code == ExitCode.NOT_FOUND
    assert "did you mean 'bank.checking'?" in run.err


def test_output_to_a_pipe_keeps_headers_and_titles_whole(tmp_path: Path, lake_dir: Path) -> None:
    done = cli("demo", "--path", str(tmp_path / "demo"), "--no-spark", "--seconds", "0.5", "--workers", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "…" not in done.stdout
    for header in ("elapsed", "global", "commits/s", "conflicts", "violations"):
        assert re.search(rf"\b{re.escape(header)}\b", done.stdout), header
    assert any(line.strip() == "result" for line in lines), done.stdout  # its own line, not on a border
    assert any(line.startswith("invariant held: total") and "time travel" in line for line in lines)

    done = cli("tables", "--uri", str(lake_dir))
    assert done.returncode == 0 and "delta version" in done.stdout and "…" not in done.stdout


def test_sql_runs_simple_queries_without_spark(lake_dir: Path) -> None:
    query = "SELECT id, balance * 2 AS double FROM bank.checking c WHERE c.balance > 10 ORDER BY double DESC LIMIT 5"
    done = cli("sql", query, "--uri", str(lake_dir), "--engine", "arrow", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["engine"] == "arrow" and doc["rows"] == [{"id": 1, "double": 140}, {"id": 2, "double": 100}]
    done = cli("sql", "SELECT count(*) FROM bank.checking", "--uri", str(lake_dir), "--engine", "arrow")
    line = assert_clean_failure(done, ExitCode.INVALID)
    assert "--engine arrow cannot run this query" in line and "--engine spark" in line


def test_a_table_directory_deleted_outside_txlake_points_to_doctor(tmp_path: Path) -> None:
    """Not "no such table, did you mean ...": the catalog names it, its Delta log is gone. ``show``,
    ``describe``, ``history`` and ``sql`` fail with the damage and ``txlake doctor`` (exit 5); ``tables`` still
    lists every table, the broken one without figures, and exits 5."""
    lake = txlake.connect(str(tmp_path / "lake"))
    for name in ("s.gone", "s.kept"):
        lake.create_table(name, "id long")
        with lake.transaction() as tx:
            tx.append(name, pa.table({"id": [1, 2]}))
    gone = tmp_path / "lake" / "s" / "gone"
    assert (gone / "_delta_log").is_dir()
    for path in sorted(gone.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    uri = str(tmp_path / "lake")
    for args in (("show", "s.gone"), ("describe", "s.gone"), ("history", "s.gone"), ("sql", "SELECT * FROM s.gone")):
        done = cli(*args, "--uri", uri)
        line = assert_clean_failure(done, ExitCode.CORRUPT)
        assert "'s.gone' is in the catalog but its Delta log" in line and "did you mean" not in line, line
        assert "txlake doctor" in done.stderr, done.stderr
    done = cli("tables", "--uri", uri, "--json")
    assert done.returncode == ExitCode.CORRUPT, done.stderr
    listed = {t["name"]: t for t in json.loads(done.stdout)["tables"]}
    assert listed["s.kept"]["rows"] == 2 and listed["s.kept"]["problem"] is None
    assert listed["s.gone"]["rows"] is None and listed["s.gone"]["damaged"] is True
    assert error_lines(done.stderr) == [f"error: {listed['s.gone']['problem']}; run `txlake doctor`"]


def test_optimize_on_spark_compacts_and_a_misspelt_table_never_starts_spark(lake_dir: Path) -> None:
    done = cli("optimize", "bank.chekcing", "--engine", "spark", "--uri", str(lake_dir))
    assert "did you mean 'bank.checking'?" in assert_clean_failure(done, ExitCode.NOT_FOUND)
    lake = txlake.connect(f"file://{lake_dir}")
    with lake.transaction() as tx:
        tx.append("bank.checking", pa.table({"id": [4], "owner": ["dan"], "balance": [9]}))
    done = cli("optimize", "bank.checking", "--engine", "spark", "--zorder-by", "balance", "--uri", str(lake_dir))
    assert done.returncode == 0, done.stderr
    assert "bank.checking: 2 file(s)" in done.stdout and "compacted into 1" in done.stdout
    assert sorted(lake.read_arrow("bank.checking")["balance"].to_pylist()) == [7, 9, 50, 70]
    assert len(lake.snapshot().delta_snapshot("bank.checking").files) == 1
