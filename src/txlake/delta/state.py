"""The immutable state of a Delta table at one version, and the builder that replays commits into it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import pyarrow as pa

from txlake.delta.actions import Action, Add, Cdc, CommitInfo, Metadata, OtherAction, Protocol, Remove, Txn
from txlake.delta.dv import unique_id
from txlake.delta.features import check_read_support
from txlake.delta.filemap import FileMap
from txlake.delta.schema import schema_from_json
from txlake.errors import CorruptLogError, UnsupportedFeatureError

if TYPE_CHECKING:
    from txlake.expr.prune import StatsIndex


@dataclass(frozen=True)
class Snapshot:
    """An immutable table state at ``version``: live files, metadata, protocol, app-transaction versions."""

    table: str
    version: int
    protocol: Protocol
    metadata: Metadata
    files: Mapping[str, Add]
    txns: Mapping[str, int] = field(default_factory=dict)
    tombstones: Mapping[str, Remove] = field(default_factory=dict)
    timestamp_ms: int | None = None

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.metadata.schema_string)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @cached_property
    def stats_index(self) -> StatsIndex:
        """The live files' statistics, parsed once per snapshot, for pruning them by predicates."""
        from txlake.expr.prune import StatsIndex  # (txlake.expr imports this package)

        return StatsIndex(list(self.files.values()), self.schema, self.partition_columns)

    @property
    def num_records(self) -> int | None:
        """Row count from stats (less the rows deletion vectors delete), or ``None`` if any file lacks
        ``numRecords``."""
        total = 0
        for add in self.files.values():
            n = add.live_records
            if n is None:
                return None
            total += n
        return total

    def apply(self, version: int, actions: Sequence[Action], timestamp_ms: int | None = None) -> Snapshot:
        """The snapshot after applying one more commit (pure: ``self`` is unchanged)."""
        replay = SnapshotBuilder.from_snapshot(self)
        replay.apply(version, actions, timestamp_ms)
        return replay.finish()


@dataclass
class SnapshotBuilder:
    """Mutable accumulator used while replaying many commits; frozen into a :class:`Snapshot` at the end."""

    table: str
    version: int = -1
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    files: FileMap = field(default_factory=FileMap)
    txns: dict[str, int] = field(default_factory=dict)
    tombstones: dict[str, Remove] = field(default_factory=dict)
    timestamp_ms: int | None = None

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> SnapshotBuilder:
        return cls(
            snap.table,
            snap.version,
            snap.protocol,
            snap.metadata,
            snap.files.copy() if isinstance(snap.files, FileMap) else FileMap.of(snap.files),
            dict(snap.txns),
            dict(snap.tombstones),
            snap.timestamp_ms,
        )

    def apply(self, version: int, actions: Iterable[Action], timestamp_ms: int | None) -> None:
        for action in actions:
            if isinstance(action, Add):
                self.files[action.path] = action
                dead = self.tombstones.get(action.path)
                if dead is not None and unique_id(dead.deletion_vector) == unique_id(action.deletion_vector):
                    del self.tombstones[action.path]
            elif isinstance(action, Remove):
                # A logical file is (path, DV unique id): a remove of the data file with another DV (the one it had
                # before a DV update, in the same commit in either order) leaves the live file alone.
                live = self.files.get(action.path)
                if live is not None and unique_id(live.deletion_vector) == unique_id(action.deletion_vector):
                    del self.files[action.path]
                self.tombstones[action.path] = action
            elif isinstance(action, Metadata):
                self.metadata = action
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, Txn):
                self.txns[action.app_id] = action.version
            elif isinstance(action, (CommitInfo, Cdc, OtherAction)):
                continue
        self.version = version
        if timestamp_ms is not None:
            # Delta monotonizes commit timestamps: never earlier than the previous commit's.
            if self.timestamp_ms is not None and timestamp_ms <= self.timestamp_ms:
                timestamp_ms = self.timestamp_ms + 1
            self.timestamp_ms = timestamp_ms

    def finish(self) -> Snapshot:
        if self.protocol is None or self.metadata is None:
            missing = "protocol" if self.protocol is None else "metaData"
            raise CorruptLogError(
                f"{self.table} has no {missing} action up to version {self.version}",
                table=self.table,
                version=self.version,
            )
        if self.metadata.missing_fields:
            raise CorruptLogError(
                f"{self.table} v{self.version}: the latest metaData has no {' or '.join(self.metadata.missing_fields)}",
                table=self.table,
                version=self.version,
            )
        try:
            check_read_support(self.protocol, self.metadata, table=self.table)
            schema_from_json(self.metadata.schema_string)  # memoized: a malformed schema or unknown type fails now
        except UnsupportedFeatureError as exc:
            if exc.table is None:
                exc.table = self.table
            raise
        except CorruptLogError as exc:
            raise CorruptLogError(
                f"{self.table} v{self.version}: {exc}", table=self.table, version=self.version
            ) from exc
        return Snapshot(
            self.table,
            self.version,
            self.protocol,
            self.metadata,
            self.files,
            self.txns,
            self.tombstones,
            self.timestamp_ms,
        )
