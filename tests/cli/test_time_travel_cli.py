"""``txlake tag`` / ``tags`` and ``--timestamp`` / ``--tag`` on the reading commands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import txlake
from tests.cli.conftest import Txlake, accounts
from tests.cli.real import assert_clean_failure
from tests.cli.real import txlake as cli
from txlake.cli.exit_codes import ExitCode


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def test_tag_and_read_by_tag_and_by_time(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    tagged = bank.version()
    decided = bank.context.glog.decided_at_ms(tagged)
    run = txlake_cli("tag", "before-bonus", "--uri", bank.uri, "--description", "month end")
    assert run.code == ExitCode.OK, run.err
    assert run.out.strip() == f"created tag before-bonus -> lakehouse version {tagged} (month end)"
    with bank.transaction() as tx:
        tx.update("bank.checking", set={"balance": "balance + 1000"})

    def balances(*at: str) -> list[int]:
        run = txlake_cli("show", "bank.checking", "--uri", bank.uri, "--order-by", "id", "--json", *at)
        assert run.code == ExitCode.OK, run.err
        return [row["balance"] for row in run.json()["rows"]]  # type: ignore[index]

    now = balances()
    assert balances("--tag", "BEFORE-BONUS") == [b - 1000 for b in now]
    assert balances("--timestamp", _iso(decided)) == [b - 1000 for b in now]
    assert balances("--timestamp", datetime.now(UTC).isoformat()) == now
    assert balances("--version", str(tagged)) == [b - 1000 for b in now]

    run = txlake_cli("tags", "--uri", bank.uri, "--json")
    assert run.code == ExitCode.OK
    assert [(t["name"], t["version"]) for t in run.json()["tags"]] == [("before-bonus", tagged)]  # type: ignore[index]
    run = txlake_cli(
        "sql", "SELECT id, balance FROM bank.checking ORDER BY id", "--tag", "before-bonus", "--uri", bank.uri
    )
    assert run.code == ExitCode.OK and f"lakehouse version {tagged}" in run.out, run.out


def test_time_travel_mistakes_are_clear(bank: txlake.Lakehouse) -> None:
    uri = bank.uri
    for args, code, words in (
        (("tables", "--timestamp", "2026-01-01T00:00:00"), ExitCode.USAGE, "no time zone"),
        (("tables", "--timestamp", "yesterday"), ExitCode.USAGE, "ISO 8601"),
        (("show", "bank.checking", "--tag", "x", "--version", "1"), ExitCode.USAGE, "not allowed with"),
        (("tables", "--timestamp", "2000-01-01T00:00:00Z"), ExitCode.NOT_FOUND, "did not exist yet"),
        (
            ("tables", "--timestamp", (datetime.now(UTC) + timedelta(days=1)).isoformat()),
            ExitCode.USAGE,
            "in the future",
        ),
        (("show", "bank.checking", "--tag", "nope"), ExitCode.NOT_FOUND, "no tag 'nope'"),
        (("tag", "bad name"), ExitCode.USAGE, "invalid tag name"),
        (("tag", "t1", "--version", "999"), ExitCode.NOT_FOUND, "999"),
        (("tag", "nope", "--drop"), ExitCode.NOT_FOUND, "no tag 'nope'"),
    ):
        line = assert_clean_failure(cli(*args, "--uri", uri), code)
        assert words in line, (args, line)
    assert bank.tags() == []  # nothing written by any of them
    assert cli("tag", "t1", "--uri", uri).returncode == ExitCode.OK
    done = cli("tag", "t1", "--uri", uri)
    line = assert_clean_failure(done, ExitCode.CONFLICT)
    assert "exists already" in line and "--drop" in done.stderr
    assert [t.name for t in bank.tags()] == ["t1"]


def test_clone_from_the_command_line(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    before = bank.version()
    with bank.transaction() as tx:
        tx.delete("bank.checking", "id = 1")
    run = txlake_cli("clone", "bank.checking", "audit.checking", "--version", str(before), "--uri", bank.uri)
    assert run.code == ExitCode.OK, run.err
    assert run.out.startswith(f"cloned bank.checking (lakehouse version {before}) -> audit.checking at ")
    assert (
        bank.read_arrow("audit.checking").num_rows == bank.snapshot(version=before).read_arrow("bank.checking").num_rows
    )
    run = txlake_cli("clone", "bank", "copy", "--uri", bank.uri, "--json")
    assert run.code == ExitCode.OK, run.err
    assert run.json()["tables"] == ["copy.checking", "copy.savings"]  # type: ignore[index]
    for args, code in (
        (("bank.checking", "copy.checking"), ExitCode.CONFLICT),
        (("bank.nope", "x.y"), ExitCode.NOT_FOUND),
    ):
        line = assert_clean_failure(cli("clone", *args, "--uri", bank.uri), code)
        assert "error:" in line


def test_restore_from_the_command_line(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    good = bank.version()
    rows = bank.read_arrow("bank.checking").num_rows
    with bank.transaction() as tx:
        tx.delete("bank.checking")
    bank.create_table("bank.scratch", "id long")
    run = txlake_cli("restore", "--version", str(good), "--table", "bank.checking", "--uri", bank.uri)
    assert run.code == ExitCode.OK, run.err
    assert run.out.startswith(f"restored bank.checking to lakehouse version {good} as new version ")
    assert bank.read_arrow("bank.checking").num_rows == rows and "bank.scratch" in bank.tables()
    run = txlake_cli("restore", "--version", str(good), "--uri", bank.uri, "--json")
    assert run.code == ExitCode.OK and run.json()["changed"] is True  # type: ignore[index]
    assert "bank.scratch" not in bank.tables()
    assert_clean_failure(cli("restore", "--uri", bank.uri), ExitCode.USAGE)  # which version?
    assert_clean_failure(cli("restore", "--tag", "nope", "--uri", bank.uri), ExitCode.NOT_FOUND)


def test_optimize_from_the_command_line(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    for first in (10, 20):  # three small files in all
        with bank.transaction() as tx:
            tx.append("bank.checking", accounts([first, first + 1], ["cy", "di"], [1, 2]))
    files = len(bank.snapshot().delta_snapshot("bank.checking").files)
    rows = bank.read_arrow("bank.checking").num_rows
    run = txlake_cli("optimize", "bank.checking", "--uri", bank.uri, "--json")
    assert run.code == ExitCode.OK, run.err
    doc = run.json()
    assert doc["files_removed"] == files and doc["files_added"] == 1  # type: ignore[index]
    assert bank.read_arrow("bank.checking").num_rows == rows
    run = txlake_cli("optimize", "bank.checking", "--uri", bank.uri)
    assert run.code == ExitCode.OK and "no small files to compact" in run.out
    assert_clean_failure(
        cli("optimize", "bank.checking", "--target-file-size", "big", "--uri", bank.uri), ExitCode.USAGE
    )
    assert_clean_failure(cli("optimize", "bank.checking", "--where", "id > 1", "--uri", bank.uri), ExitCode.INVALID)


def test_vacuum_from_the_command_line(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    with bank.transaction() as tx:
        tx.overwrite("bank.checking", accounts([9], ["zed"], [1]))
    run = txlake_cli("vacuum", "--uri", bank.uri)
    assert run.code == ExitCode.OK, run.err
    assert "would delete 0 file(s)" in run.out
    assert_clean_failure(cli("vacuum", "--retention", "0", "--uri", bank.uri), ExitCode.USAGE)  # needs --force
    for bad in ("soon", "7", "99999999999d", "-1d"):
        assert_clean_failure(cli("vacuum", "--retention", bad, "--uri", bank.uri), ExitCode.USAGE)
    run = txlake_cli("vacuum", "--retention", "0", "--force", "--uri", bank.uri, "--json")
    doc = run.json()
    assert run.code == ExitCode.OK and doc["dry_run"] is True and doc["files_deleted"] == 3  # type: ignore[index]
    files = {f["path"] for f in doc["files"]}  # type: ignore[index]
    # replaced by the update (checking, savings) and by the overwrite (checking)
    assert sum(p.startswith("bank/checking/") for p in files) == 2
    assert all(bank.store.exists(p) for p in files)  # a dry run
    run = txlake_cli("vacuum", "--retention", "0", "--force", "--delete", "--uri", bank.uri)
    assert run.code == ExitCode.OK and "deleted 3 file(s)" in run.out
    assert not any(bank.store.exists(p) for p in files)
    assert bank.read_arrow("bank.checking")["id"].to_pylist() == [9]
