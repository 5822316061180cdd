"""No ``txlake`` command prints a Python or Java stack trace, py4j or JVM logging unless ``--debug``.

Each failing invocation runs the real executable in its own process and must end with its exit code and
exactly one ``error:`` line; with ``--debug`` the stack trace is there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import txlake
from tests.cli.conftest import build_bank
from tests.cli.real import assert_clean_failure
from tests.cli.real import txlake as cli
from txlake.cli.exit_codes import ExitCode

LAKE = "{lake}"
CASES: list[tuple[tuple[str, ...], ExitCode]] = [
    (("tables", "--nope"), ExitCode.USAGE),
    (("tables",), ExitCode.USAGE),
    (("tables", "--uri", "ftp://host/x"), ExitCode.USAGE),
    (("tables", "--uri", "s3://ab/x"), ExitCode.USAGE),
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "nosuch=1"), ExitCode.USAGE),
    (("tables", "--uri", "{tmp}/nothing"), ExitCode.NOT_FOUND),
    (("doctor", "--uri", "{tmp}/nothing"), ExitCode.NOT_FOUND),
    (("show", "nope.x", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("show", "nodots", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("show", "bank.checking", "--uri", LAKE, "--version", "99"), ExitCode.NOT_FOUND),
    (("show", "bank.checking", "--uri", LAKE, "--where", "balance +"), ExitCode.INVALID),
    (("show", "bank.checking", "--uri", LAKE, "--where", "owner = 'abc"), ExitCode.INVALID),
    (("show", "bank.checking", "--uri", LAKE, "--columns", "nope"), ExitCode.INVALID),
    (("show", "bank.checking", "--uri", LAKE, "--order-by", "nope"), ExitCode.INVALID),
    (("describe", "bank.chekcing", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("history", "nope.x", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("log", "--uri", LAKE, "--limit", "x"), ExitCode.USAGE),
    (("init", LAKE), ExitCode.CONFLICT),
    (("init", "/proc/txlake-nope"), ExitCode.STORAGE),
    (("init", "{tmp}/a-file/lake"), ExitCode.STORAGE),
    (("sql", "SELECT nosuch FROM bank.checking", "--uri", LAKE), ExitCode.INVALID),
    (("sql", "SELECT * FROM bank.nope", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("sql", "SELECT * FROM bank.checking c JOIN bank.nope n USING (id)", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("sql", "DROP TABLE bank.checking", "--uri", LAKE), ExitCode.INVALID),
    (("sql", "SELECT FROM (", "--uri", LAKE), ExitCode.INVALID),
    (("sql", "SELECT 1", "--uri", LAKE), ExitCode.INVALID),
    (("sql", "SELECT sum(id) FROM bank.checking", "--uri", LAKE, "--engine", "arrow"), ExitCode.INVALID),
    # the issue's own case: on Spark, an AnalysisException is the user's mistake, not an internal error
    (("sql", "SELECT nosuch FROM bank.checking", "--uri", LAKE, "--engine", "spark"), ExitCode.INVALID),
    (("demo", "--path", "{tmp}", "--fresh", "--no-spark", "--seconds", "0.2"), ExitCode.USAGE),
    (("demo", "--path", "{tmp}/a-file/demo", "--no-spark", "--seconds", "0.2"), ExitCode.STORAGE),
    (("demo", "--uri", "memory://demo", "--fresh", "--no-spark", "--seconds", "0.2"), ExitCode.USAGE),
    (("tables", "--uri", "{tmp}/" + "x" * 300), ExitCode.STORAGE),
    # obstore panics (a BaseException) on these endpoints, region and bucket names: refused before any request
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_endpoint_url=localhost:8333"), ExitCode.USAGE),
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_endpoint_url="), ExitCode.USAGE),
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_region=us east"), ExitCode.USAGE),
    (("tables", "--uri", "s3://a b/x"), ExitCode.USAGE),
    (("show", "bank.checking", "--uri", LAKE, "--order-by", "id,"), ExitCode.USAGE),
    (("show", "bank.checking", "--uri", LAKE, "--order-by", ""), ExitCode.USAGE),
    (("show", "bank.checking", "--uri", LAKE, "--order-by", "9"), ExitCode.INVALID),
    (("sql", "", "--uri", LAKE), ExitCode.USAGE),
    (("sql", "SELEC * FROM bank.checking", "--uri", LAKE), ExitCode.INVALID),
    (("sql", "SELECT 1 / 0 FROM bank.checking", "--uri", LAKE, "--engine", "arrow"), ExitCode.INVALID),
    (("init", "/proc/self"), ExitCode.STORAGE),
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_allow_http=maybe"), ExitCode.USAGE),
    (("tables", "--uri", "s3://bucket/x", "--storage-option", "aws_endpoint_url=http://h:1/b"), ExitCode.USAGE),
    (("tables", "extra", "--uri", LAKE), ExitCode.USAGE),
    (("--uri", LAKE, "tables", "--uri", "{tmp}"), ExitCode.USAGE),
    (("demo", "--path", "{tmp}/d", "--uri", "{tmp}/e", "--no-spark"), ExitCode.USAGE),
    (("show", "bank.checking", "--uri", LAKE, "--tag", "nope"), ExitCode.NOT_FOUND),
    (("show", "bank.checking", "--uri", LAKE, "--timestamp", "2000-01-01T00:00:00Z"), ExitCode.NOT_FOUND),
    (("show", "bank.checking", "--uri", LAKE, "--timestamp", "2000-01-01"), ExitCode.USAGE),
    (("tag", "bad name", "--uri", LAKE), ExitCode.USAGE),
    (("tag", "nope", "--drop", "--uri", LAKE), ExitCode.NOT_FOUND),
    (("tags", "--uri", "{tmp}/nothing"), ExitCode.NOT_FOUND),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("no-tracebacks")
    build_bank(f"file://{tmp / 'lake'}")
    (tmp / "a-file").write_text("not a directory")
    return {"lake": str(tmp / "lake"), "tmp": str(tmp)}


@pytest.mark.parametrize(("args", "code"), CASES, ids=[" ".join(a[:2]) for a, _ in CASES])
def test_failures_print_one_error_line_and_no_stack_trace(
    places: dict[str, str], args: tuple[str, ...], code: ExitCode
) -> None:
    argv = [a.format(**places) for a in args]
    assert_clean_failure(cli(*argv), code)


def test_debug_shows_the_stack_trace(places: dict[str, str]) -> None:
    done = cli("show", "bank.checking", "--uri", places["lake"], "--where", "balance +", "--debug")
    assert done.returncode == ExitCode.INVALID
    assert "Traceback (most recent call last)" in done.stderr


def test_the_lakehouse_is_unchanged_by_the_failures(places: dict[str, str]) -> None:
    """Every failing invocation above left the lakehouse as it was (version 4 of the bank fixture)."""
    lake = txlake.connect(Path(places["lake"]).as_uri(), create=False)
    assert lake.version() == 4 and lake.tables() == ["bank.checking", "bank.savings"]
