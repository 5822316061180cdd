"""A Delta table as one object: create, load snapshots, commit actions, checkpoint, read rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from txlake.delta.actions import Action, CommitInfo, Metadata, now_ms
from txlake.delta.checkpoint import write_checkpoint
from txlake.delta.colmap import mapped_for_new_table
from txlake.delta.features import check_write_support, protocol_for_new_table, with_deletion_vectors
from txlake.delta.files import read_files, write_data_files
from txlake.delta.log import DeltaLog, LastCheckpoint
from txlake.delta.schema import conform, normalize_schema, schema_to_json
from txlake.delta.snapshot import CommitEntry, history, load_snapshot, version_at
from txlake.delta.state import Snapshot
from txlake.errors import SchemaMismatchError, TableAlreadyExistsError, VersionAlreadyExistsError
from txlake.storage import ObjectStore

TXLAKE_VERSION = "0.1.0"


def commit_info(operation: str, parameters: Mapping[str, Any] | None = None, **extra: Any) -> CommitInfo:
    """A ``commitInfo`` action in the shape Spark and delta-rs write."""
    values: dict[str, Any] = {
        "timestamp": now_ms(),
        "operation": operation,
        "operationParameters": dict(parameters or {}),
        "clientVersion": f"txlake-{TXLAKE_VERSION}",
    }
    values.update(extra)
    return CommitInfo(values)


class DeltaTable:
    """The Delta table at ``path`` below ``store``'s root (pure Delta protocol, no lakehouse log)."""

    def __init__(self, store: ObjectStore, path: str, *, name: str | None = None) -> None:
        self.store = store
        self.path = path.strip("/")
        self.log = DeltaLog(store, self.path, name=name)
        self.name = self.log.name

    @property
    def uri(self) -> str:
        return self.store.url(self.path)

    # --------------------------------------------------------------------------------------- creation

    @classmethod
    def create(
        cls,
        store: ObjectStore,
        path: str,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] = (),
        name: str | None = None,
        description: str | None = None,
        configuration: Mapping[str, str] | None = None,
        table_id: str | None = None,
        extra_commit_info: Mapping[str, Any] | None = None,
    ) -> DeltaTable:
        """Create an empty table at version 0 with protocol (1, 2); :class:`TableAlreadyExistsError` if taken."""
        table = cls(store, path, name=name)
        if table.log.exists():
            raise TableAlreadyExistsError(f"a Delta table already exists at {table.uri}", table=table.name)
        actions = table.create_actions(
            schema,
            partition_by=partition_by,
            description=description,
            configuration=configuration,
            table_id=table_id,
            extra_commit_info=extra_commit_info,
        )
        try:
            table.log.write_commit(0, actions)
        except VersionAlreadyExistsError as exc:
            raise TableAlreadyExistsError(f"a Delta table already exists at {table.uri}", table=table.name) from exc
        return table

    def create_actions(
        self,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] = (),
        description: str | None = None,
        configuration: Mapping[str, str] | None = None,
        table_id: str | None = None,
        extra_commit_info: Mapping[str, Any] | None = None,
    ) -> list[Action]:
        """The actions of version 0 of a new table (validated, not written)."""
        missing = [c for c in partition_by if c not in schema.names]
        if missing:
            raise SchemaMismatchError(f"partition columns not in schema: {missing}", table=self.name, columns=missing)
        schema, configuration = mapped_for_new_table(schema, configuration)
        metadata = Metadata.new(
            schema_to_json(schema),
            partition_by,
            configuration,
            name=self.name.rsplit(".", 1)[-1] if self.name else None,
            description=description,
            table_id=table_id,
        )
        info = commit_info(
            "CREATE TABLE",
            {"mode": "ErrorIfExists", "partitionBy": list(partition_by)},
            **dict(extra_commit_info or {}),
        )
        protocol = protocol_for_new_table(metadata.schema_string, metadata.configuration)
        return [info, with_deletion_vectors(protocol, metadata.configuration), metadata]

    # ---------------------------------------------------------------------------------------- reading

    def exists(self) -> bool:
        return self.log.exists()

    def latest_version(self) -> int | None:
        return self.log.latest_version()

    def snapshot(self, version: int | None = None, *, timestamp: datetime | None = None) -> Snapshot:
        """The table at ``version``, at ``timestamp`` (newest commit at or before it), or latest."""
        if version is not None and timestamp is not None:
            raise ValueError("give version or timestamp, not both")
        if timestamp is not None:
            version = version_at(self.log, timestamp)
        return load_snapshot(self.log, version)

    def read_arrow(
        self,
        version: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        snapshot: Snapshot | None = None,
    ) -> pa.Table:
        """All live rows at ``version`` (or of ``snapshot``) as one Arrow table."""
        snap = snapshot or self.snapshot(version)
        return read_files(
            self.store,
            self.path,
            snap.files.values(),
            snap.schema,
            snap.partition_columns,
            columns=columns,
            table=self.name,
        )

    def history(self, limit: int | None = None) -> list[CommitEntry]:
        return history(self.log, limit)

    # ---------------------------------------------------------------------------------------- writing

    def write_files(self, data: pa.Table, snapshot: Snapshot, *, txid: str | None = None) -> list[Action]:
        """Conform ``data`` to the table schema and write it as Parquet; returns the add actions."""
        conformed = conform(data, normalize_schema(snapshot.schema), table=self.name)
        return list(
            write_data_files(self.store, self.path, conformed, partition_columns=snapshot.partition_columns, txid=txid)
        )

    def commit(self, version: int, actions: Iterable[Action]) -> None:
        """Put-if-absent ``actions`` as commit ``version``; :class:`VersionAlreadyExistsError` if taken."""
        self.log.write_commit(version, actions)

    def append(self, data: pa.Table, *, max_attempts: int = 15) -> int:
        """Blind-append ``data`` as one commit (plain Delta, no lakehouse log); returns the new version.

        Blind appends never conflict, so a lost race just retries at the next version.
        """
        snap = self.snapshot()
        check_write_support(snap.protocol, snap.metadata, table=self.name)
        adds = self.write_files(data, snap)
        actions: list[Action] = [commit_info("WRITE", {"mode": "Append"}, isBlindAppend=True), *adds]
        version = snap.version + 1
        for _ in range(max_attempts):
            try:
                self.commit(version, actions)
                return version
            except VersionAlreadyExistsError:
                version += 1
        raise VersionAlreadyExistsError(
            f"gave up appending to {self.name} after {max_attempts} lost races", table=self.name, version=version
        )

    def checkpoint(self, version: int | None = None, *, parts: int = 1) -> LastCheckpoint:
        """Write a checkpoint at ``version`` (latest by default) and point ``_last_checkpoint`` at it."""
        return write_checkpoint(self.log, self.snapshot(version), parts=parts)

    def __repr__(self) -> str:
        return f"DeltaTable({self.uri!r})"
