"""txlake: multi-statement, multi-table ACID transactions over a lakehouse of plain Delta Lake tables."""

from __future__ import annotations

__version__ = "0.1.0"

from txlake.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    ConflictError,
    CorruptLogError,
    DataFileNotFoundError,
    MetadataChangedError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PredicateError,
    ProtocolChangedError,
    SchemaMismatchError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionClosedError,
    TransactionError,
    TxlakeError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

__all__ = [
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "ConflictError",
    "CorruptLogError",
    "DataFileNotFoundError",
    "MetadataChangedError",
    "ObjectAlreadyExistsError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolChangedError",
    "SchemaMismatchError",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TransactionClosedError",
    "TransactionError",
    "TxlakeError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "__version__",
]
