"""Failures: one ``error:`` line and one ``hint:`` line on stderr, an exit code per error class, no secrets."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import txlake
from tests.cli.conftest import Txlake
from txlake.cli import commands
from txlake.cli.exit_codes import EXIT_CODES, ExitCode, LakehouseNotFoundError, UsageError, exit_code_for
from txlake.errors import (
    ConcurrentAppendError,
    CorruptLogError,
    DataFileNotFoundError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PredicateError,
    SchemaMismatchError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionClosedError,
    TransientStorageError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from txlake.lakehouse.log import GlobalLog


def _assert_one_error(err: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith(("error:", "hint:"))]
    assert [line.split(":")[0] for line in lines] == ["error", "hint"]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UsageError("x"), ExitCode.USAGE),
        (LakehouseNotFoundError("x"), ExitCode.NOT_FOUND),
        (TableNotFoundError("x"), ExitCode.NOT_FOUND),
        (VersionNotFoundError("x"), ExitCode.NOT_FOUND),
        (ObjectNotFoundError("x"), ExitCode.NOT_FOUND),
        (ConcurrentAppendError("x"), ExitCode.CONFLICT),
        (TableAlreadyExistsError("x"), ExitCode.CONFLICT),
        (ObjectAlreadyExistsError("x"), ExitCode.CONFLICT),
        (CorruptLogError("x"), ExitCode.CORRUPT),
        (DataFileNotFoundError("x"), ExitCode.CORRUPT),
        (UnsupportedFeatureError("x", feature="deletionVectors"), ExitCode.UNSUPPORTED),
        (StorageError("x"), ExitCode.STORAGE),
        (TransientStorageError("x"), ExitCode.STORAGE),
        (PredicateError("x"), ExitCode.INVALID),
        (SchemaMismatchError("x"), ExitCode.INVALID),
        (TransactionClosedError("x"), ExitCode.ERROR),
        (RuntimeError("x"), ExitCode.INTERNAL),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
    ],
)
def test_each_error_class_has_its_exit_code(exc: BaseException, code: ExitCode) -> None:
    assert exit_code_for(exc) == code


def test_exit_code_numbers_are_stable() -> None:
    assert {code.name: int(code) for code, _ in EXIT_CODES} == {
        "OK": 0,
        "PROBLEMS": 1,
        "USAGE": 2,
        "NOT_FOUND": 3,
        "CONFLICT": 4,
        "CORRUPT": 5,
        "UNSUPPORTED": 6,
        "STORAGE": 7,
        "INVALID": 8,
        "ERROR": 10,
        "INTERNAL": 11,
        "INTERRUPTED": 130,
    }


def test_help_documents_every_exit_code(txlake_cli: Txlake) -> None:
    run = txlake_cli("--help")
    assert run.code == ExitCode.OK
    for code, meaning in EXIT_CODES:
        assert f"{int(code):>3}  {meaning}" in run.out
    assert "TXLAKE_URI" in run.out and "AWS_SECRET_ACCESS_KEY" in run.out
    assert txlake_cli("--version").out.startswith("txlake ")


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["show"],  # missing TABLE
        ["log", "--limit", "many"],
        ["log", "--limit", "-1"],
        ["tables", "--storage-option", "no-equals-sign"],
        ["tables", "--no-such-flag"],
        ["--uri", "/a", "tables", "--uri", "/b"],  # two different lakehouses
        ["--uri", "/a", "bench", "model"],  # a command without a lakehouse
        ["--storage-option", "aws_region=x", "bench", "model"],
        ["--uri", "/a"],  # lakehouse options and no command
    ],
)
def test_bad_arguments_exit_2(txlake_cli: Txlake, argv: list[str]) -> None:
    run = txlake_cli(*argv)
    assert run.code == ExitCode.USAGE
    assert run.out == ""
    _assert_one_error(run.err)


def test_lakehouse_options_may_come_before_the_command(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    run = txlake_cli("--uri", bank.uri, "tables", "--json")
    assert run.code == ExitCode.OK, run.err
    assert [t["name"] for t in run.json()["tables"]] == ["bank.checking", "bank.savings"]  # type: ignore[index]
    run = txlake_cli("--uri", bank.uri, "--storage-option", "max_retries=1", "describe", "bank.checking")
    assert run.code == ExitCode.OK, run.err
    assert txlake_cli("--uri", bank.uri, "tables", "--uri", bank.uri).code == ExitCode.OK  # the same, twice


def test_a_word_a_command_does_not_take_shows_that_commands_usage(txlake_cli: Txlake) -> None:
    run = txlake_cli("tables", "extra", "--uri", "/nowhere")
    assert run.code == ExitCode.USAGE
    assert run.err.startswith("usage: txlake tables ") and "error: unrecognized arguments: extra" in run.err
    assert "see `txlake tables --help`" in run.err


def test_missing_uri_is_a_usage_error(txlake_cli: Txlake) -> None:
    run = txlake_cli("tables", "--json")
    assert run.code == ExitCode.USAGE
    assert run.out == ""
    _assert_one_error(run.err)
    assert "no lakehouse given" in run.err and "TXLAKE_URI" in run.err


def test_no_lakehouse_at_location_is_not_found_and_creates_nothing(tmp_path: Path, txlake_cli: Txlake) -> None:
    missing = tmp_path / "nothing-here"
    run = txlake_cli("tables", "--uri", str(missing))
    assert run.code == ExitCode.NOT_FOUND
    _assert_one_error(run.err)
    assert "txlake init" in run.err
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert txlake_cli("log", "--uri", str(empty)).code == ExitCode.NOT_FOUND
    assert list(empty.iterdir()) == []


def test_unknown_table_and_version(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    for argv in (["describe", "bank.nope"], ["show", "nope.nope"], ["history", "bank.nope"]):
        run = txlake_cli(*argv, "--uri", bank.uri, "--json")
        assert run.code == ExitCode.NOT_FOUND, argv
        assert run.out == ""
        _assert_one_error(run.err)
        assert "txlake tables" in run.err
    run = txlake_cli("show", "bank.checking", "--version", "99", "--uri", bank.uri)
    assert run.code == ExitCode.NOT_FOUND
    assert "no lakehouse version 99 (the latest is 4)" in run.err


def test_bad_predicate_and_columns_exit_8(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    for extra in (["--where", "id = = 1"], ["--where", "nope > 1"], ["--columns", "id,nope"]):
        run = txlake_cli("show", "bank.checking", "--uri", bank.uri, *extra)
        assert run.code == ExitCode.INVALID, extra
        _assert_one_error(run.err)


def test_garbage_global_record_is_a_corrupt_log(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    bank.store.put(GlobalLog.record_path(3), b"{ this is not json")
    for argv in (["log"], ["tables"], ["history"]):
        run = txlake_cli(*argv, "--uri", bank.uri)
        assert run.code == ExitCode.CORRUPT, argv
        _assert_one_error(run.err)
        assert "txlake doctor" in run.err


def test_garbage_delta_commit_is_a_corrupt_log(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.checking")
    bank.store.put(log.commit_path(1), b'{"add": {"path": "x"\n')
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri)
    assert run.code == ExitCode.CORRUPT
    _assert_one_error(run.err)
    assert txlake_cli("show", "bank.savings", "--uri", bank.uri).code == ExitCode.OK


def test_a_deleted_newest_delta_commit_is_a_corrupt_log(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.checking")
    latest = log.latest_version()
    assert latest is not None
    bank.store.delete(log.commit_path(latest))
    for argv in (["show", "bank.checking"], ["tables"]):  # tables lists the others and marks this one
        run = txlake_cli(*argv, "--uri", bank.uri)
        assert run.code == ExitCode.CORRUPT, argv
        assert "Traceback" not in run.err and "txlake doctor" in run.err
        assert f"maps bank.checking to Delta version {latest}, but its log ends at {latest - 1}" in run.err


def test_missing_data_file_is_reported_with_exit_5(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    snap = bank.snapshot()
    entry = snap.entry("bank.checking")
    (add,) = snap.delta_snapshot("bank.checking").files.values()
    bank.store.delete(f"{entry.path}/{add.path}")
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri)
    assert run.code == ExitCode.CORRUPT
    _assert_one_error(run.err)
    assert "txlake doctor" in run.err


def test_unexpected_errors_are_internal_and_traced_only_with_debug(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(commands, "list_tables", broken)
    run = txlake_cli("tables", "--uri", bank.uri)
    assert run.code == ExitCode.INTERNAL
    _assert_one_error(run.err)
    assert "internal error: RuntimeError: boom" in run.err
    traced = txlake_cli("--debug", "tables", "--uri", bank.uri)
    assert traced.code == ExitCode.INTERNAL
    assert "Traceback" in traced.err and "RuntimeError: boom" in traced.err
    assert "Traceback" in txlake_cli("tables", "--uri", bank.uri, "--debug").err  # after the command too


def test_interrupt_exits_130(bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "list_tables", interrupted)
    run = txlake_cli("tables", "--uri", bank.uri)
    assert run.code == ExitCode.INTERRUPTED
    assert run.err.strip() == "error: interrupted"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"


def test_secrets_never_appear_in_any_output(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    unreachable = [
        "--uri",
        "s3://bucket/lake",
        "--storage-option",
        f"aws_endpoint_url={endpoint}",
        "--storage-option",
        f"aws_access_key_id={KEY_ID}",
        "--storage-option",
        "aws_allow_http=true",
        "--storage-option",
        "max_retries=0",
    ]
    runs = [
        txlake_cli("--debug", "tables", *unreachable),
        txlake_cli("doctor", "--json", "--debug", *unreachable),
        txlake_cli("tables", "--uri", bank.uri, "--storage-option", f"aws_secret_access_key={SECRET}", "--debug"),
        txlake_cli("tables", "--storage-opton", f"aws_secret_access_key={SECRET}"),  # misspelled flag: echoed
        txlake_cli("show", "bank.nope", "--uri", bank.uri, "--debug", "--storage-option", f"aws_session_token={TOKEN}"),
    ]
    assert runs[0].code == runs[1].code == ExitCode.STORAGE
    assert runs[2].code == ExitCode.OK
    assert runs[3].code == ExitCode.USAGE
    assert runs[4].code == ExitCode.NOT_FOUND
    for run in runs:
        for secret in (SECRET, KEY_ID, TOKEN):
            assert secret not in run.out and secret not in run.err
    assert "aws_access_key_id': '****'" in runs[0].err  # --debug shows which options are set, masked
    assert f"aws_endpoint_url': '{endpoint}'" in runs[0].err
    assert "****" in runs[3].err
