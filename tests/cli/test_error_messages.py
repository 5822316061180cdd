"""How failures read: storage problems in plain words, hints that fit the command, caret lines kept."""

from __future__ import annotations

import obstore
import pytest
from obstore.store import S3Store

from tests.cli.conftest import Txlake
from txlake.cli.exit_codes import ExitCode, describe_failure
from txlake.cli.main import _suggest_choice, is_panic
from txlake.errors import (
    ConcurrentAppendError,
    ConflictError,
    DeadlockError,
    IntentTimeoutError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LeaseLostError,
    PredicateError,
    StorageError,
    TableNotFoundError,
    TransactionExpiredError,
    TransientStorageError,
)
from txlake.storage.messages import ALLOW_HTTP_HINT, CREDENTIALS_HINT

# Messages as obstore / S3 produce them (the first line; the debug dump follows it in the exception text).
NO_CREDENTIALS = (
    "HEAD s3://somebucket/x/_txlake/log/00000000000000000000.json failed: Generic S3 error: Error performing PUT "
    "http://169.254.169.254/latest/api/token in 1.567256ms - Server returned non-2xx status code: 403 Forbidden: "
    'resolve_deny: denied destination\n\nDebug source:\nGeneric {\n    store: "S3",\n}'
)
NO_ALLOW_HTTP = (
    "HEAD s3://b/x/_txlake/log/00000000000000000000.json failed: Generic S3 error: Error performing HEAD "
    "http://127.0.0.1:9/b/x/_txlake/log/00000000000000000000.json in 143.143µs - HTTP error: builder error"
)


@pytest.mark.parametrize(
    ("exc", "message", "hint"),
    [
        (
            StorageError(NO_CREDENTIALS, path="_txlake/log/00000000000000000000.json", kind="HEAD"),
            "HEAD s3://somebucket/x/_txlake/log/00000000000000000000.json failed: no AWS credentials found",
            CREDENTIALS_HINT,
        ),
        (
            TransientStorageError(NO_CREDENTIALS.replace("failed:", "failed after 6 attempts:")),
            "failed after 6 attempts: no AWS credentials found",
            CREDENTIALS_HINT,
        ),
        (StorageError(NO_ALLOW_HTTP), "failed: the endpoint is http:// but plain HTTP is not allowed", ALLOW_HTTP_HINT),
        (StorageError("PUT s3://b/k failed: ... <Code>NoSuchBucket</Code>"), "the bucket does not exist", "bucket"),
        (
            StorageError("PUT s3://b/k failed: ... <Code>AccessDenied</Code>"),
            "PUT s3://b/k failed: access denied (403)",
            CREDENTIALS_HINT,  # the whole list of ways to give other credentials
        ),
    ],
)
def test_storage_problems_in_plain_words(exc: StorageError, message: str, hint: str) -> None:
    failure = describe_failure(exc)
    assert failure.code == ExitCode.STORAGE
    assert message in failure.message
    assert failure.hint is not None and hint in failure.hint
    for noise in ("Debug source", "169.254", "builder error", "ms -", "µs"):
        assert noise not in failure.message
    assert failure.detail == ()


def test_the_credentials_hint_lists_the_ways() -> None:
    for way in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "aws_access_key_id=", "IAM role", "aws_skip_signature"):
        assert way in CREDENTIALS_HINT


def test_hints_fit_the_command() -> None:
    bad = PredicateError("cannot parse 'x +': expected an expression after '+'\n  x +\n     ^", expression="x +")
    show, sql, other = (describe_failure(bad, command) for command in ("show", "sql", None))
    assert show.hint is not None and "--where" in show.hint
    assert sql.hint is not None and "query" in sql.hint and "--where" not in sql.hint
    assert other.hint is not None and "--where" not in other.hint
    assert show.detail == ("  x +", "     ^")  # the caret lines stay, under the error line
    missing = describe_failure(TableNotFoundError("no table 'a.b'", table="a.b"), "sql")
    assert missing.code == ExitCode.NOT_FOUND and missing.hint is not None and "namespace.table" in missing.hint


def test_argument_errors_are_usage_errors() -> None:
    assert describe_failure(InvalidArgumentError("isolation must be one of ...")).code == ExitCode.USAGE
    assert describe_failure(InvalidArgumentTypeError("expected a SQL string")).code == ExitCode.USAGE


def test_interrupted_is_one_word() -> None:
    failure = describe_failure(KeyboardInterrupt())
    assert (failure.code, failure.message, failure.hint) == (ExitCode.INTERRUPTED, "interrupted", None)


def test_tables_of_an_unknown_namespace_say_so(bank: object, txlake_cli: Txlake) -> None:
    run = txlake_cli("tables", "--uri", bank.uri, "--namespace", "bnak")  # type: ignore[attr-defined]
    assert run.code == ExitCode.OK
    assert "no namespace 'bnak'" in run.err and "did you mean 'bank'?" in run.err


def test_a_rust_panic_is_one_internal_error_line() -> None:
    """obstore panics (``pyo3_runtime.PanicException``, a BaseException) on input txlake failed to refuse first:
    the command line reports it as an internal error (exit 11) in one line, never as a traceback."""
    store = S3Store(
        "bucket",
        config={"endpoint": "http://a b:1", "access_key_id": "key", "secret_access_key": "secret"},
        client_options={"allow_http": True},
    )
    with pytest.raises(BaseException) as caught:  # (the panic's class cannot be imported)
        obstore.head(store, "x")
    panic = caught.value
    assert not isinstance(panic, Exception) and is_panic(panic)
    failure = describe_failure(panic, "tables")
    assert failure.code == ExitCode.INTERNAL and "\n" not in failure.message
    assert failure.message.startswith("internal error: PanicException: ")
    assert not is_panic(KeyboardInterrupt()) and not is_panic(SystemExit(0))


def test_a_misspelt_command_or_choice_gets_did_you_mean(txlake_cli: Txlake) -> None:
    run = txlake_cli("tabels")
    assert run.code == ExitCode.USAGE and "unknown command 'tabels'; did you mean 'tables'?" in run.err
    run = txlake_cli("optimize", "a.b", "--engine", "sprak")
    assert run.code == ExitCode.USAGE and "invalid choice 'sprak'; did you mean 'spark'?" in run.err
    message = "argument COMMAND: invalid choice: 'tabels' (choose from 'init', 'tables', 'tags')"
    assert _suggest_choice(message) == "unknown command 'tabels'; did you mean 'tables'?"
    bare = "argument --engine: invalid choice: 'duck' (choose from auto, arrow, spark)"
    assert _suggest_choice(bare) == "argument --engine: invalid choice 'duck' (choose from auto, arrow, spark)"
    assert _suggest_choice("the following arguments are required: table") == (
        "the following arguments are required: table"
    )


def test_init_of_a_memory_lakehouse_is_refused(txlake_cli: Txlake) -> None:
    run = txlake_cli("init", "memory://x")
    assert run.code == ExitCode.USAGE and "lives only as long as one process" in run.err
    run = txlake_cli("tables", "--uri", "memory://x")
    assert run.code == ExitCode.NOT_FOUND and "only inside the process that made it" in run.err


def test_a_conflict_hint_names_the_winner_or_a_plain_writer() -> None:
    """A conflict with a lakehouse transaction names its version; one with a plain Delta writer's commit (which
    may have ended before the command began) does not claim "a concurrent transaction won"."""
    won = describe_failure(ConcurrentAppendError("files were added", table="s.t", winning_version=7))
    assert won.code == ExitCode.CONFLICT and won.hint is not None and "version 7 won" in won.hint
    plain = describe_failure(ConcurrentAppendError("files were added", table="s.t", winning_version=None))
    assert plain.code == ExitCode.CONFLICT and plain.hint is not None and "plain Delta writer" in plain.hint


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (LeaseLostError("lease lost"), "took the transaction over"),
        (TransactionExpiredError("too old"), "began too long ago"),
        (DeadlockError("cycle", cycle=("a", "b")), "cycle"),
        (IntentTimeoutError("waited", table="s.t"), "took too long"),
    ],
)
def test_conflicts_without_a_winner_get_hints_of_their_own(exc: ConflictError, words: str) -> None:
    failure = describe_failure(exc)
    assert failure.code == ExitCode.CONFLICT and failure.hint is not None and words in failure.hint
    assert "changed the data" not in failure.hint
