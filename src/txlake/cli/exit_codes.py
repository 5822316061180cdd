"""Exit codes of the ``txlake`` command, the error classes that map to them, and a hint for each failure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from txlake.errors import (
    CommitStateUnknownError,
    ConflictError,
    CorruptLogError,
    DataFileNotFoundError,
    DeadlockError,
    IntentTimeoutError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidObjectPathError,
    LeaseHeldError,
    LeaseLostError,
    MergeCardinalityError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PredicateError,
    SchemaMismatchError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    TransactionExpiredError,
    TransactionNotFoundError,
    TransactionNotResumableError,
    TransientStorageError,
    TxlakeError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from txlake.storage.messages import storage_problem
from txlake_cli import interrupted


class ExitCode(IntEnum):
    """What the process exit status of ``txlake`` means."""

    OK = 0
    PROBLEMS = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    CORRUPT = 5
    UNSUPPORTED = 6
    STORAGE = 7
    INVALID = 8
    ERROR = 10
    INTERNAL = 11
    INTERRUPTED = 130


EXIT_CODES: tuple[tuple[ExitCode, str], ...] = (
    (ExitCode.OK, "success (doctor: the lakehouse is healthy)"),
    (ExitCode.PROBLEMS, "doctor found problems / an invariant is violated"),
    (ExitCode.USAGE, "bad arguments, no lakehouse URI, bad --storage-option (InvalidArgumentError)"),
    (ExitCode.NOT_FOUND, "not found: no lakehouse, table, version or object (TableNotFoundError, ...)"),
    (ExitCode.CONFLICT, "conflict or already exists (ConflictError, TableAlreadyExistsError, init)"),
    (ExitCode.CORRUPT, "corrupt log or missing/unreadable data file (CorruptLogError, DataFileNotFoundError)"),
    (ExitCode.UNSUPPORTED, "the table uses a Delta feature txlake cannot read (UnsupportedFeatureError)"),
    (ExitCode.STORAGE, "object store request failed: network, credentials, permissions, path (StorageError)"),
    (ExitCode.INVALID, "bad predicate, column or schema (PredicateError, SchemaMismatchError)"),
    (ExitCode.ERROR, "any other txlake error (TxlakeError)"),
    (ExitCode.INTERNAL, "unexpected internal error (a bug: rerun with --debug and report it)"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C)"),
)
"""Every exit code with its meaning, in the order ``txlake --help`` lists them."""


class CliError(Exception):
    """A failure the command line itself detects (not raised by the library)."""

    exit_code: ClassVar[ExitCode] = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class UsageError(CliError):
    """Bad or missing arguments (no lakehouse URI, malformed ``--storage-option``)."""

    exit_code = ExitCode.USAGE


class LakehouseNotFoundError(CliError):
    """No txlake lakehouse at the given location."""

    exit_code = ExitCode.NOT_FOUND


class LakehouseExistsError(CliError):
    """``txlake init`` on a location that already holds a lakehouse."""

    exit_code = ExitCode.CONFLICT


_RERUN = "rerun with --debug for details"
_NEW_NAME = "choose another name or drop the existing object first"
_COLUMNS = "`txlake describe TABLE` lists the columns and types"
LOCAL_PATH_HINT = (
    "choose a directory you may create and write (check the path, the directories above it and their permissions)"
)


STORAGE_OPTIONS_HINT = (
    "storage options are aws_endpoint_url (http://host:port), aws_region, aws_access_key_id, aws_secret_access_key, "
    "aws_session_token, aws_allow_http, aws_virtual_hosted_style_request, aws_skip_signature, max_retries, "
    "retry_base_delay"
)


def _argument_hint(exc: BaseException) -> str:
    if getattr(exc, "argument", None) == "storage_options":
        return STORAGE_OPTIONS_HINT
    return "see `txlake COMMAND --help`"


def _feature_hint(exc: BaseException) -> str:
    feature = exc.feature if isinstance(exc, UnsupportedFeatureError) else None
    return f"the table needs Delta feature {feature!r}; read it with an engine that supports it"


_REQUEST = re.compile(r"^(?P<request>(?:GET|HEAD|LIST|PUT|DELETE) \S+ failed(?: after \d+ attempts)?): ")
_REQUEST_ON_FILE = re.compile(r"^(?:GET|HEAD|LIST|PUT|DELETE) file:/")
_TIMING = re.compile(r" in [0-9.]+(?:ns|µs|us|ms|s) - ")


def _is_local(exc: BaseException) -> bool:
    """A local path's problem: the error names an absolute path, or a request on a ``file://`` store failed."""
    path = getattr(exc, "path", None)
    return (isinstance(path, str) and path.startswith("/")) or _REQUEST_ON_FILE.match(str(exc)) is not None


def _storage_message(exc: BaseException, first_line: str) -> str:
    """One line: the request that failed and, for a recognised problem, what is wrong in plain words."""
    problem = storage_problem(exc)
    if problem is None:
        return _TIMING.sub(" - ", first_line)
    request = _REQUEST.match(first_line)
    return f"{request.group('request')}: {problem.problem}" if request else problem.problem


def _storage_hint(exc: BaseException) -> str:
    problem = storage_problem(exc)
    if problem is not None:
        return problem.hint
    if _is_local(exc):
        return LOCAL_PATH_HINT
    return "check the URI and the credentials (--storage-option KEY=VALUE or AWS_* environment variables)"


def _conflict_hint(exc: BaseException) -> str:
    if isinstance(exc, LeaseLostError):
        return "another client took the transaction over, or its lease ran out; `txlake log` shows what committed"
    if isinstance(exc, TransactionExpiredError):
        return "the transaction began too long ago to commit; run the command again"
    if isinstance(exc, DeadlockError):
        return "it was chosen to break a cycle of transactions waiting for each other; run the command again"
    if isinstance(exc, IntentTimeoutError):
        return "transactions holding the same data took too long; run the command again later"
    winner = getattr(exc, "winning_version", None)
    if winner is not None:
        return f"the transaction of lakehouse version {winner} won; run the command again"
    # a plain Delta writer's commit (even one that ended before this command began: the lakehouse takes it in
    # with this attempt), or a claim race lost for too long
    return "another writer (a transaction, or a plain Delta writer) changed the data this command used; run it again"


# Most specific first: DataFileNotFoundError is also a FileNotFoundError, ObjectNotFoundError a StorageError.
# Each class: its exit code and the hint shown under the error (a function of the exception where it varies).
_CLASSES: tuple[tuple[type[BaseException], ExitCode, str | Callable[[BaseException], str] | None], ...] = (
    (
        DataFileNotFoundError,
        ExitCode.CORRUPT,
        "a data file was deleted outside txlake; run `txlake doctor` to list every missing file",
    ),
    (CorruptLogError, ExitCode.CORRUPT, "run `txlake doctor`: it lists every damaged table and log entry"),
    (TableNotFoundError, ExitCode.NOT_FOUND, "list the tables with `txlake tables` (names are namespace.table)"),
    (
        VersionNotFoundError,
        ExitCode.NOT_FOUND,
        "list the lakehouse versions with `txlake log`, a table's Delta versions with `txlake history TABLE`",
    ),
    (
        ObjectNotFoundError,
        ExitCode.NOT_FOUND,
        "check the lakehouse URI; `txlake doctor` checks every object the log refers to",
    ),
    (ConflictError, ExitCode.CONFLICT, _conflict_hint),
    (TableAlreadyExistsError, ExitCode.CONFLICT, _NEW_NAME),
    (TagNotFoundError, ExitCode.NOT_FOUND, "list the tags with `txlake tags`"),
    (TransactionNotFoundError, ExitCode.NOT_FOUND, "`txlake recover` lists the transactions that left a sublog"),
    (LeaseHeldError, ExitCode.CONFLICT, "the transaction is alive (its lease is renewed); try again after its lease"),
    (
        TransactionNotResumableError,
        ExitCode.CONFLICT,
        "the transaction is over: `txlake log` shows the version it claimed, if any",
    ),
    (
        TagAlreadyExistsError,
        ExitCode.CONFLICT,
        "tags never move: choose another name, or `txlake tag NAME --drop` first",
    ),
    (ObjectAlreadyExistsError, ExitCode.CONFLICT, _NEW_NAME),
    (UnsupportedFeatureError, ExitCode.UNSUPPORTED, _feature_hint),
    (
        InvalidObjectPathError,
        ExitCode.STORAGE,
        lambda exc: (
            LOCAL_PATH_HINT
            if _is_local(exc)
            else "the object store refuses this path (too long, or a file where a directory must be)"
        ),
    ),
    (
        TransientStorageError,
        ExitCode.STORAGE,
        lambda exc: (
            _storage_hint(exc)
            if storage_problem(exc)
            else "the object store could not be reached or kept failing; check the endpoint, network and credentials"
        ),
    ),
    (StorageError, ExitCode.STORAGE, _storage_hint),
    (PredicateError, ExitCode.INVALID, f"{_COLUMNS}; expressions are Spark SQL"),
    (SchemaMismatchError, ExitCode.INVALID, _COLUMNS),
    (MergeCardinalityError, ExitCode.INVALID, _RERUN),
    (InvalidArgumentError, ExitCode.USAGE, _argument_hint),
    (InvalidArgumentTypeError, ExitCode.USAGE, _argument_hint),
    (
        CommitStateUnknownError,
        ExitCode.ERROR,
        "the commit may still complete: another client rolls it forward after its lease; `txlake log` shows it",
    ),
    (TxlakeError, ExitCode.ERROR, _RERUN),
    (KeyboardInterrupt, ExitCode.INTERRUPTED, None),
)
# Hints that depend on the command: only `show` has --where, only `sql` takes a query.
_COMMAND_HINTS: tuple[tuple[str, type[BaseException], str], ...] = (
    ("show", PredicateError, f"check the --where / --order-by expression; {_COLUMNS}"),
    ("show", SchemaMismatchError, f"check --columns / --order-by; {_COLUMNS}"),
    (
        "sql",
        PredicateError,
        "check the query (Spark SQL, SELECT only); `txlake describe TABLE` lists a table's columns",
    ),
    ("sql", TableNotFoundError, "list the tables with `txlake tables`; a query names them namespace.table"),
    ("init", InvalidArgumentError, "see `txlake init --help` for URI forms and storage options"),
)
_BUG_HINT = "this is a bug in txlake: rerun with --debug and report the stack trace"


@dataclass(frozen=True, slots=True)
class Failure:
    """How the command line reports one exception: exit code, one-line message, detail lines, hint.

    ``detail`` holds the indented lines some errors carry under their message (the expression and a caret
    under the position of a parse error); everything else in an exception's text stays out.
    """

    code: ExitCode
    message: str
    hint: str | None
    detail: tuple[str, ...] = ()


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code of ``exc`` (:attr:`ExitCode.INTERNAL` for exceptions txlake does not raise on purpose)."""
    if isinstance(exc, CliError):
        return exc.exit_code
    for cls, code, _ in _CLASSES:
        if isinstance(exc, cls):
            return code
    return ExitCode.INTERNAL


def _hint(exc: BaseException, command: str | None) -> str | None:
    if isinstance(exc, CliError):
        return exc.hint
    for name, cls, command_hint in _COMMAND_HINTS:
        if name == command and isinstance(exc, cls):
            return command_hint
    for cls, _, hint in _CLASSES:
        if isinstance(exc, cls):
            text = hint(exc) if callable(hint) else hint
            if text is None:
                return None
            # the command's own name, not a placeholder ("see `txlake show --help`")
            return text.replace("txlake COMMAND", f"txlake {command}" if command else "txlake")
    return _BUG_HINT


def describe_failure(exc: BaseException, command: str | None = None) -> Failure:
    """The exit code, message, detail lines and hint for ``exc`` raised by ``txlake COMMAND``."""
    if interrupted(exc):
        return Failure(ExitCode.INTERRUPTED, "interrupted", None)
    code = exit_code_for(exc)
    text = str(exc).strip("\n").splitlines()
    message = text[0].strip() if text else type(exc).__name__
    detail: tuple[str, ...] = ()
    if isinstance(exc, StorageError):
        message = _storage_message(exc, message)
    elif isinstance(exc, (TxlakeError, CliError)):
        detail = tuple(line for line in text[1:] if line.startswith("  "))
    if code is ExitCode.INTERNAL:
        message = f"internal error: {type(exc).__name__}: {message}"
    return Failure(code, message, _hint(exc, command), detail)


def epilog() -> str:
    """The exit code table for ``txlake --help``."""
    lines = ["exit codes:"]
    lines += [f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODES]
    return "\n".join(lines)
