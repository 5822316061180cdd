"""Tables never lose data silently: on a narrow terminal they turn into one block per row, on a terminal long
values are cut with an ellipsis, and to a pipe or file nothing is cut whatever ``$COLUMNS`` says."""

from __future__ import annotations

import re
import subprocess

import pytest

import txlake
from tests.cli.conftest import Txlake, accounts
from tests.cli.real import EXE, environment

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TABLES_HEADERS = ("table", "delta version", "files", "rows", "size", "location")


def _terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    """What rich sees on a terminal of ``columns`` characters (it honours ``TTY_COMPATIBLE`` and ``COLUMNS``)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", str(columns))


def test_a_narrow_terminal_shows_one_block_per_row_instead_of_dropping_columns(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch, 30)
    run = txlake_cli("tables", "--uri", bank.uri)
    assert run.code == 0
    out = ANSI.sub("", run.out)
    assert "one row per block" in out
    for header in TABLES_HEADERS:
        assert len(re.findall(rf"^{re.escape(header)} ", out, re.MULTILINE)) == 2, (header, out)  # in both blocks
    assert "bank.checking" in out and "bank.savings" in out
    assert all(len(line) <= 30 for line in out.splitlines()), out


def test_a_terminal_wide_enough_gets_the_table_with_long_values_cut(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch, 120)
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri)
    out = ANSI.sub("", run.out)
    assert run.code == 0 and "one row per block" not in out
    assert "x" * 100 not in out and "x" * 39 + "…" in out  # cut, and visibly so
    assert re.search(r"^ id +owner +balance $", out, re.MULTILINE), out


@pytest.mark.parametrize("command", [("tables",), ("log",), ("show", "bank.checking")])
def test_to_a_pipe_nothing_is_cut_even_with_narrow_columns(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    """Not a terminal: every column and every whole value, one row per line (``$COLUMNS`` cannot hide any)."""
    monkeypatch.setenv("COLUMNS", "30")
    run = txlake_cli(*command, "--uri", bank.uri)
    assert run.code == 0 and "…" not in run.out and "one row per block" not in run.out
    if command == ("tables",):
        header = next(line for line in run.out.splitlines() if line.lstrip().startswith("table "))
        assert all(name in header for name in TABLES_HEADERS), header
        assert f"{bank.uri}/bank/checking" in run.out
    elif command == ("log",):
        txids = {r.txid for r in (bank.context.glog.read_record(v) for v in (3, 4))}
        assert all(txid in run.out for txid in txids), run.out  # whole transaction ids
    else:
        assert "x" * 100 in run.out


@pytest.mark.parametrize(
    "command", [["show", "bank.checking", "--limit", "5000"], ["sql", "SELECT * FROM bank.checking"]]
)
def test_a_reader_that_goes_away_ends_the_command_quietly(command: list[str], bank: txlake.Lakehouse) -> None:
    """``txlake show ... | head -1``: the pipe closes early; like the tools people know, no error and exit 0."""
    n = 4000  # far more output than a pipe buffers, so the writer meets the closed pipe
    with bank.transaction() as tx:
        tx.append("bank.checking", accounts(list(range(100, 100 + n)), [f"owner{i}" for i in range(n)], [1] * n))
    proc = subprocess.Popen(
        [str(EXE), *command, "--uri", bank.uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment()
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "error:" not in err, err


@pytest.mark.parametrize("columns", ["0", "-3", "wide"])
def test_a_columns_value_that_is_no_width_is_ignored(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    """``COLUMNS=0`` used to make rich drop the title and the footer; now it is as if ``COLUMNS`` were unset."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", columns)
    run = txlake_cli("tables", "--uri", bank.uri)
    out = ANSI.sub("", run.out)
    assert run.code == 0
    assert out.startswith("tables at lakehouse version ") and "2 table(s)" in out, out
    assert "bank.checking" in out and "bank.savings" in out


def test_no_color_means_no_terminal_styles_at_all(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _terminal(monkeypatch, 120)
    run = txlake_cli("tables", "--uri", bank.uri)
    assert ANSI.search(run.out), "a terminal gets styles (the check below would prove nothing)"
    monkeypatch.setenv("NO_COLOR", "1")
    run = txlake_cli("tables", "--uri", bank.uri)
    assert run.code == 0 and "bank.checking" in run.out
    assert "\x1b" not in run.out and "\x1b" not in run.err


def test_control_characters_in_data_never_reach_the_terminal_raw(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    with bank.transaction() as tx:
        tx.append("bank.checking", accounts([77], ["a\nb \x1b[31mred\x1b[0m \x07"], [1]))
    monkeypatch.setenv("NO_COLOR", "1")
    for extra in ((), ("--json",)):
        run = txlake_cli("show", "bank.checking", "--where", "id = 77", "--uri", bank.uri, *extra)
        assert run.code == 0 and "\x1b" not in run.out and "\x07" not in run.out
    run = txlake_cli("show", "bank.checking", "--where", "id = 77", "--uri", bank.uri)
    assert "a⏎b \\x1b[31mred\\x1b[0m \\x07" in run.out
