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
    DeltaError,
    MergeCardinalityError,
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
from txlake.lake import Lakehouse, LakehouseSnapshot, connect
from txlake.txn.transaction import CommitResult, MergeMetrics, Transaction

__all__ = [
    "CommitResult",
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "ConflictError",
    "CorruptLogError",
    "DataFileNotFoundError",
    "DeltaError",
    "Lakehouse",
    "LakehouseSnapshot",
    "MergeCardinalityError",
    "MergeMetrics",
    "MetadataChangedError",
    "ObjectAlreadyExistsError",
    "ObjectNotFoundError",
    "PredicateError",
    "ProtocolChangedError",
    "SchemaMismatchError",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "Transaction",
    "TransactionClosedError",
    "TransactionError",
    "TxlakeError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "__version__",
    "connect",
]
