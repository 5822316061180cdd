"""The txlake error hierarchy: one root, structured attributes, never message matching.

Not-found errors also derive from the builtin ``FileNotFoundError``/``LookupError`` and bad arguments
from ``ValueError``/``TypeError`` so that generic handlers keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class TxlakeError(Exception):
    """Root of every error txlake raises on purpose."""


class InvalidArgumentError(TxlakeError, ValueError):
    """An argument has the right type but a value txlake refuses (a table name without a namespace, an unknown
    isolation level, an empty ``set=``); ``argument`` names the parameter when known."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


class InvalidArgumentTypeError(TxlakeError, TypeError):
    """An argument has a type txlake cannot use (a predicate that is not a string, a schema that is neither a
    ``pyarrow.Schema``, a Spark ``StructType`` nor a DDL string); ``argument`` names the parameter when known."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


# --------------------------------------------------------------------------------------------- storage


class StorageError(TxlakeError):
    """An object-store request failed for a reason that is not a missing or existing object."""

    def __init__(self, message: str, *, path: str | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind


class TransientStorageError(StorageError):
    """A request failed in a way that may succeed when retried (timeouts, 5xx, connection resets)."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object does not exist."""


class ObjectAlreadyExistsError(StorageError, FileExistsError):
    """``put_if_absent`` lost: another writer created the object first."""


class InvalidObjectPathError(StorageError, ValueError):
    """The store refuses the object's path itself (too long, a file where a directory must be, ...).

    Retrying cannot help: a global version whose publication hits this is decided ``aborted``.
    """


class InjectedFaultError(StorageError):
    """A request failed because a fault-injection rule said so (tests only)."""


class SimulatedCrash(BaseException):
    """A fault-injection rule 'crashed' the client at this request.

    Derives from ``BaseException`` so that ordinary ``except Exception`` clean-up code does not run,
    which is what a real crash looks like to the rest of the system.
    """

    def __init__(self, kind: str, path: str, nth: int) -> None:
        super().__init__(f"simulated crash at {kind} #{nth} ({path})")
        self.kind = kind
        self.path = path
        self.nth = nth


# ----------------------------------------------------------------------------------------------- delta


class DeltaError(TxlakeError):
    """A Delta table or its log is not usable as asked."""

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


class TableNotFoundError(DeltaError, LookupError):
    """No table at that location or name."""


class TableAlreadyExistsError(DeltaError):
    """A table already exists at that location or name."""


class VersionNotFoundError(DeltaError, LookupError):
    """The requested table version (or timestamp) is not available in the log."""

    def __init__(self, message: str, *, table: str | None = None, version: int | None = None) -> None:
        super().__init__(message, table=table)
        self.version = version


class TagNotFoundError(TxlakeError, LookupError):
    """No tag of that name (:meth:`Lakehouse.tag` names lakehouse versions)."""

    def __init__(self, message: str, *, tag: str | None = None) -> None:
        super().__init__(message)
        self.tag = tag


class TagAlreadyExistsError(TxlakeError):
    """A tag of that name exists already (tags never move: drop it first)."""

    def __init__(self, message: str, *, tag: str | None = None, version: int | None = None) -> None:
        super().__init__(message)
        self.tag = tag
        self.version = version


class CorruptLogError(DeltaError):
    """A commit or checkpoint cannot be parsed, or the log has a gap; nothing was loaded."""

    def __init__(
        self, message: str, *, table: str | None = None, version: int | None = None, path: str | None = None
    ) -> None:
        super().__init__(message, table=table)
        self.version = version
        self.path = path


class DataFileNotFoundError(DeltaError, FileNotFoundError):
    """A data file referenced by the log is missing from storage."""

    def __init__(self, message: str, *, table: str | None = None, path: str | None = None) -> None:
        super().__init__(message, table=table)
        self.path = path


class UnsupportedFeatureError(DeltaError):
    """The table uses a Delta feature txlake cannot honour; reading it would risk wrong data."""

    def __init__(self, message: str, *, table: str | None = None, feature: str) -> None:
        super().__init__(message, table=table)
        self.feature = feature


class VersionAlreadyExistsError(DeltaError):
    """A Delta commit at that version was already written by someone else."""

    def __init__(self, message: str, *, table: str | None = None, version: int) -> None:
        super().__init__(message, table=table)
        self.version = version


class AppendOnlyTableError(DeltaError):
    """The table is append-only (``delta.appendOnly=true``): a change would remove or modify rows."""

    def __init__(self, message: str, *, table: str | None = None, property: str = "delta.appendOnly") -> None:
        super().__init__(message, table=table)
        self.property = property


class SchemaMismatchError(DeltaError, ValueError):
    """Data does not match the table schema (missing, extra or incompatible columns)."""

    def __init__(self, message: str, *, table: str | None = None, columns: Sequence[str] = ()) -> None:
        super().__init__(message, table=table)
        self.columns = tuple(columns)


# --------------------------------------------------------------------------------------------- conflicts


class ConflictError(TxlakeError):
    """A transaction could not commit because a concurrent commit conflicts with it.

    ``read_version`` is the lakehouse version the transaction read at; ``winning_version`` the lakehouse
    version of the conflicting commit (``None`` for a plain Delta writer's commit not yet adopted);
    ``delta_version`` the conflicting Delta version of ``table``; ``files`` the data files involved.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        read_version: int | None = None,
        winning_version: int | None = None,
        delta_version: int | None = None,
        files: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.table = table
        self.read_version = read_version
        self.winning_version = winning_version
        self.delta_version = delta_version
        self.files = tuple(files)


class ConcurrentAppendError(ConflictError):
    """A concurrent commit added files that match what this transaction read."""


class ConcurrentDeleteReadError(ConflictError):
    """A concurrent commit removed files this transaction read."""


class ConcurrentDeleteDeleteError(ConflictError):
    """A concurrent commit removed files this transaction also removes."""


class MetadataChangedError(ConflictError):
    """A concurrent commit changed the metadata (schema, partitioning, properties) of a table involved."""


class ProtocolChangedError(ConflictError):
    """A concurrent commit changed the protocol of a table involved."""


class ConcurrentTransactionError(ConflictError):
    """A concurrent commit used the same application transaction id, or the table was dropped/created."""


class CatalogChangedError(ConcurrentTransactionError):
    """Under serializable, a concurrent commit changed catalog entries this transaction looked up or listed."""


class TransactionExpiredError(ConflictError):
    """The transaction began too long ago to commit (``txlake.lakehouse.ages.MAX_TRANSACTION_AGE``, 24 hours):
    vacuum may have deleted the files it wrote. Running it again (``Lakehouse.run`` does) writes them anew."""


class LeaseLostError(TransactionExpiredError):
    """This client no longer holds the transaction's lease: it expired before a renewal got through, or another
    client took the transaction over (``Lakehouse.resume``/``recover``). Nothing of it may be committed here."""


class DeadlockError(ConflictError):
    """A pessimistic transaction was chosen to break a cycle of transactions waiting for each other's intent
    markers (the youngest of the cycle gives up its markers). ``cycle`` holds the transaction ids of the cycle,
    in waits-for order, starting with this one; ``Lakehouse.run`` runs it again."""

    def __init__(self, message: str, *, cycle: Sequence[str] = (), table: str | None = None) -> None:
        super().__init__(message, table=table)
        self.cycle = tuple(cycle)


class IntentTimeoutError(ConflictError):
    """A pessimistic transaction waited longer than the commit timeout for the intent markers ahead of it on
    ``table`` (held by ``holders``, all alive). ``Lakehouse.run`` runs it again."""

    def __init__(self, message: str, *, table: str | None = None, holders: Sequence[str] = ()) -> None:
        super().__init__(message, table=table)
        self.holders = tuple(holders)


# ------------------------------------------------------------------------------------------ transactions


class CommitStateUnknownError(TxlakeError):
    """The transaction claimed (or may have claimed) lakehouse version ``version`` but could not finish.

    Its claim may still be published by another client after its lease (roll-forward), so the caller must
    not assume it failed: ``Lakehouse.transaction_status(txid, version)`` tells committed, aborted or
    unknown. Nothing of the transaction was deleted.
    """

    def __init__(self, message: str, *, txid: str, version: int | None) -> None:
        super().__init__(message)
        self.txid = txid
        self.version = version


class TransactionError(TxlakeError):
    """Misuse of a transaction (reuse after commit/abort, operations after close)."""


class TransactionClosedError(TransactionError):
    """The transaction has already committed or aborted."""


class LeaseHeldError(TransactionError):
    """The transaction's lease is held by a live client (renewed and not expired): it cannot be taken over."""

    def __init__(self, message: str, *, lease: Any = None) -> None:
        super().__init__(message)
        self.lease = lease


class TransactionNotFoundError(TransactionError, LookupError):
    """``resume(txid)``: the transaction left no sublog (it never wrote one, or it ended and cleaned up)."""

    def __init__(self, message: str, *, txid: str) -> None:
        super().__init__(message)
        self.txid = txid


class TransactionNotResumableError(TransactionError):
    """``resume(txid)``: the transaction cannot be continued. ``reason`` is ``"aborted"`` (``recover`` aborted
    it), ``"decided"`` (it claimed a version, now decided: ``status`` is ``"committed"`` or ``"aborted"`` and
    ``version`` names it; it was rolled forward, never claimed twice) or ``"unsupported"`` (its sublog records
    something resume cannot rebuild: a catalog change, a created table)."""

    def __init__(
        self, message: str, *, txid: str, reason: str, status: str | None = None, version: int | None = None
    ) -> None:
        super().__init__(message)
        self.txid = txid
        self.reason = reason
        self.status = status
        self.version = version


class PredicateError(TxlakeError, ValueError):
    """A predicate or SQL expression could not be parsed or does not fit the table."""

    def __init__(self, message: str, *, expression: str | None = None) -> None:
        super().__init__(message)
        self.expression = expression


class MergeCardinalityError(TxlakeError, ValueError):
    """A merge matched one target row with several source rows, so its outcome is ambiguous (as in Delta)."""

    def __init__(self, message: str, *, table: str | None = None, rows: int = 0) -> None:
        super().__init__(message)
        self.table = table
        self.rows = rows
