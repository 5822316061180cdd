"""Exit codes of the ``txlake`` command, the error classes that map to them, and a hint for each failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from txlake.errors import (
    CommitStateUnknownError,
    ConflictError,
    CorruptLogError,
    DataFileNotFoundError,
    InvalidObjectPathError,
    MergeCardinalityError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PredicateError,
    SchemaMismatchError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransientStorageError,
    TxlakeError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)


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
    (ExitCode.USAGE, "bad arguments, no lakehouse URI, bad --storage-option"),
    (ExitCode.NOT_FOUND, "not found: no lakehouse, table, version or object (TableNotFoundError, ...)"),
    (ExitCode.CONFLICT, "conflict or already exists (ConflictError, TableAlreadyExistsError, init)"),
    (ExitCode.CORRUPT, "corrupt log or missing/unreadable data file (CorruptLogError, DataFileNotFoundError)"),
    (ExitCode.UNSUPPORTED, "the table uses a Delta feature txlake cannot read (UnsupportedFeatureError)"),
    (ExitCode.STORAGE, "object store request failed: network, credentials, permissions (StorageError)"),
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


def _feature_hint(exc: BaseException) -> str:
    feature = exc.feature if isinstance(exc, UnsupportedFeatureError) else None
    return f"the table needs Delta feature {feature!r}; read it with an engine that supports it"


# Most specific first: DataFileNotFoundError is also a FileNotFoundError, ObjectNotFoundError a StorageError.
# Each class: its exit code and the hint shown under the error (a function of the exception where it varies).
_CLASSES: tuple[tuple[type[BaseException], ExitCode, str | Callable[[BaseException], str] | None], ...] = (
    (
        DataFileNotFoundError,
        ExitCode.CORRUPT,
        "a data file was deleted outside txlake; run `txlake doctor` to list every missing file",
    ),
    (CorruptLogError, ExitCode.CORRUPT, "run `txlake doctor` to locate the damaged log entry"),
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
    (ConflictError, ExitCode.CONFLICT, "a concurrent transaction won; run the command again"),
    (TableAlreadyExistsError, ExitCode.CONFLICT, _NEW_NAME),
    (ObjectAlreadyExistsError, ExitCode.CONFLICT, _NEW_NAME),
    (UnsupportedFeatureError, ExitCode.UNSUPPORTED, _feature_hint),
    (
        InvalidObjectPathError,
        ExitCode.STORAGE,
        "the object store refuses this path (too long, or a file where a directory must be)",
    ),
    (
        TransientStorageError,
        ExitCode.STORAGE,
        "the object store could not be reached or kept failing; check the endpoint, network and credentials",
    ),
    (
        StorageError,
        ExitCode.STORAGE,
        "check the URI and the credentials (--storage-option KEY=VALUE or AWS_* environment variables)",
    ),
    (
        PredicateError,
        ExitCode.INVALID,
        "check the --where expression; `txlake describe TABLE` lists the columns and types",
    ),
    (SchemaMismatchError, ExitCode.INVALID, "`txlake describe TABLE` lists the columns and types"),
    (MergeCardinalityError, ExitCode.INVALID, _RERUN),
    (
        CommitStateUnknownError,
        ExitCode.ERROR,
        "the commit may still complete: another client rolls it forward after its lease; `txlake log` shows it",
    ),
    (TxlakeError, ExitCode.ERROR, _RERUN),
    (KeyboardInterrupt, ExitCode.INTERRUPTED, None),
)
_BUG_HINT = "this is a bug in txlake: rerun with --debug and report the stack trace"


@dataclass(frozen=True, slots=True)
class Failure:
    """How the command line reports one exception: exit code, one-line message, hint."""

    code: ExitCode
    message: str
    hint: str | None


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code of ``exc`` (:attr:`ExitCode.INTERNAL` for exceptions txlake does not raise on purpose)."""
    if isinstance(exc, CliError):
        return exc.exit_code
    for cls, code, _ in _CLASSES:
        if isinstance(exc, cls):
            return code
    return ExitCode.INTERNAL


def _hint(exc: BaseException) -> str | None:
    if isinstance(exc, CliError):
        return exc.hint
    for cls, _, hint in _CLASSES:
        if isinstance(exc, cls):
            return hint(exc) if callable(hint) else hint
    return _BUG_HINT


def describe_failure(exc: BaseException) -> Failure:
    """The exit code, message and hint for ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return Failure(ExitCode.INTERRUPTED, "interrupted", None)
    code = exit_code_for(exc)
    text = str(exc).strip().splitlines()
    message = text[0] if text else type(exc).__name__
    if code is ExitCode.INTERNAL:
        message = f"internal error: {type(exc).__name__}: {message}"
    return Failure(code, message, _hint(exc))


def epilog() -> str:
    """The exit code table for ``txlake --help``."""
    lines = ["exit codes:"]
    lines += [f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODES]
    return "\n".join(lines)
