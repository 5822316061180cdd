"""The seam between transactions and a data engine (Spark): what to read, what to write, and the protocol.

The transaction core stays engine-agnostic: it decides *which* files a read covers and records the read, and it
stages the add actions a write produced. An engine (``txlake.spark.SparkEngine``) only moves rows. Everything here
is plain data, picklable, so an engine can ship it to its workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import pyarrow as pa

from txlake.delta.actions import Add, Metadata
from txlake.delta.schema import schema_from_json
from txlake.errors import TxlakeError
from txlake.lakehouse.records import TableEntry
from txlake.storage import ObjectStore

SparkReader = Literal["auto", "native", "python"]
"""How a Spark engine reads files: Spark's Parquet reader, the txlake Python data source, or chosen per scan."""


class NoDataEngineError(TxlakeError, RuntimeError):
    """The operation needs a data engine (a Spark session: ``txlake.connect(..., spark=spark)``)."""


@dataclass(frozen=True, slots=True)
class TableLocation:
    """Where a table lives and what it looks like: enough to reopen its store on any machine."""

    store_uri: str
    storage_options: Mapping[str, Any]
    table_path: str
    table_name: str
    schema_json: str
    partition_columns: tuple[str, ...]

    @classmethod
    def of(cls, store: ObjectStore, entry: TableEntry, metadata: Metadata) -> TableLocation:
        return cls(
            store_uri=store.uri,
            storage_options=store.storage_options,
            table_path=entry.path,
            table_name=entry.name,
            schema_json=metadata.schema_string,
            partition_columns=tuple(metadata.partition_columns),
        )

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.schema_json)

    def open_store(self) -> ObjectStore:
        """A fresh store client for the lakehouse root (opened where it is used, e.g. in a Spark task)."""
        return ObjectStore.from_uri(self.store_uri, self.storage_options)


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """A planned read: the table and the exact data files it covers (already pruned and recorded)."""

    table: TableLocation
    files: tuple[Add, ...] = ()


@dataclass(frozen=True, slots=True)
class WriteSpec:
    """A write into a table for transaction ``txid``: files are named with the txid and staged, never committed.

    ``where``: every written row must satisfy this predicate (``overwrite(..., where=...)``).
    """

    table: TableLocation
    txid: str
    where: str | None = None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What an engine wrote: the add actions to stage and the number of rows."""

    adds: tuple[Add, ...] = ()
    num_rows: int = 0


@runtime_checkable
class DataEngine(Protocol):
    """A data engine the transaction delegates engine-native reads and writes to."""

    def accepts(self, data: object) -> bool:
        """Whether ``data`` is this engine's kind of dataset (e.g. a Spark DataFrame)."""
        ...

    def pruning_predicate(self, where: str | None, schema: pa.Schema) -> str | None:
        """The part of ``where`` txlake may use for file pruning and read sets (``None``: all files)."""
        ...

    def arrow_schema(self, schema: object, *, table: str) -> pa.Schema | None:
        """``schema`` as Arrow if it is this engine's schema type (a Spark StructType), else ``None``."""
        ...

    def read(self, scan: ScanSpec, *, where: str | None = None, columns: Sequence[str] | None = None) -> Any:
        """The rows of ``scan.files`` matching ``where`` as the engine's dataset (lazy)."""
        ...

    def write(self, target: WriteSpec, data: Any) -> WriteOutcome:
        """Write ``data`` as data files of ``target`` and return their add actions (nothing is committed)."""
        ...
