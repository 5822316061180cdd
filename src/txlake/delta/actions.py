"""Delta log actions as frozen dataclasses with exact JSON (de)serialization (Delta PROTOCOL.md).

A commit file is newline-delimited JSON, one action per line, each line an object with exactly one key
naming the action. ``stats`` is a JSON *string*; ``partitionValues`` is always present on add/remove.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from txlake.delta.dv import DeletionVectorDescriptor
from txlake.errors import CorruptLogError


def now_ms() -> int:
    return int(time.time() * 1000)


def _opt_strs(values: Any) -> tuple[str, ...] | None:
    return tuple(values) if values is not None else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dv_or_none(value: Any) -> DeletionVectorDescriptor | None:
    """A ``deletionVector`` field: absent or null is no DV; anything else must be a valid descriptor."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"deletionVector is not an object: {value!r}")
    return DeletionVectorDescriptor.from_json(value)


@dataclass(frozen=True, slots=True)
class Protocol:
    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            body["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            body["writerFeatures"] = list(self.writer_features)
        return {"protocol": body}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Protocol:
        return cls(
            int(d["minReaderVersion"]),
            int(d["minWriterVersion"]),
            _opt_strs(d.get("readerFeatures")),
            _opt_strs(d.get("writerFeatures")),
        )


@dataclass(frozen=True, slots=True)
class Format:
    provider: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Metadata:
    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None
    name: str | None = None
    description: str | None = None
    format: Format = field(default_factory=Format)

    @classmethod
    def new(
        cls,
        schema_string: str,
        partition_columns: Iterable[str] = (),
        configuration: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        table_id: str | None = None,
    ) -> Metadata:
        return cls(
            id=table_id or str(uuid.uuid4()),
            schema_string=schema_string,
            partition_columns=tuple(partition_columns),
            configuration=dict(configuration or {}),
            created_time=now_ms(),
            name=name,
            description=description,
        )

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": {"provider": self.format.provider, "options": dict(self.format.options)},
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": dict(self.configuration),
        }
        if self.created_time is not None:
            body["createdTime"] = self.created_time
        return {"metaData": body}

    @property
    def missing_fields(self) -> tuple[str, ...]:
        """Required fields this metaData lacks (``id``, ``schemaString``); a snapshot cannot be built on it."""
        return tuple(name for name, value in (("id", self.id), ("schemaString", self.schema_string)) if not value)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Metadata:
        """Parse a metaData body, every field of which may be absent or null.

        Only the latest metaData of a snapshot is ever used, so one lacking ``id`` or ``schemaString`` (Delta
        Live Tables start tables so) parses, with ``""`` for them (see :attr:`missing_fields`); loading a
        snapshot whose latest metaData it is fails. Null configuration values are unset keys.
        """
        fmt = d.get("format") or {}
        created = d.get("createdTime")
        return cls(
            id=_str_or_none(d.get("id")) or "",
            schema_string=_str_or_none(d.get("schemaString")) or "",
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration={str(k): str(v) for k, v in (d.get("configuration") or {}).items() if v is not None},
            created_time=created if isinstance(created, int) and not isinstance(created, bool) else None,
            name=_str_or_none(d.get("name")),
            description=_str_or_none(d.get("description")),
            format=Format(fmt.get("provider") or "parquet", dict(fmt.get("options") or {})),
        )


@dataclass(frozen=True, slots=True)
class Add:
    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            body["stats"] = self.stats
        if self.tags is not None:
            body["tags"] = dict(self.tags)
        if self.deletion_vector is not None:
            body["deletionVector"] = self.deletion_vector.to_json()
        if self.base_row_id is not None:
            body["baseRowId"] = self.base_row_id
        if self.default_row_commit_version is not None:
            body["defaultRowCommitVersion"] = self.default_row_commit_version
        return {"add": body}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Add:
        return cls(
            path=d["path"],
            partition_values=dict(d.get("partitionValues") or {}),
            size=int(d.get("size") or 0),
            modification_time=int(d.get("modificationTime") or 0),
            data_change=bool(d.get("dataChange", True)),
            stats=d.get("stats"),
            tags=d.get("tags"),
            deletion_vector=_dv_or_none(d.get("deletionVector")),
            base_row_id=d.get("baseRowId"),
            default_row_commit_version=d.get("defaultRowCommitVersion"),
        )

    def parsed_stats(self) -> dict[str, Any] | None:
        """The stats JSON string decoded, or ``None`` when absent or unreadable."""
        if not self.stats:
            return None
        try:
            value = json.loads(self.stats)
        except (TypeError, ValueError):  # TypeError: a foreign log wrote stats as an object, not a string
            return None
        return value if isinstance(value, dict) else None

    def with_wide_bounds(self) -> Add:
        """This add with ``stats.tightBounds`` false, as Delta writes it once a deletion vector deletes rows the
        stats were taken over: min/max stay valid bounds of the live rows, numRecords and nullCount still count
        the data file's rows, deleted ones included (PROTOCOL.md, "Per-file Statistics")."""
        stats = self.parsed_stats()
        if stats is None:
            return self
        return dataclasses.replace(self, stats=json.dumps({**stats, "tightBounds": False}, separators=(",", ":")))

    @property
    def num_records(self) -> int | None:
        """Rows in the data file (``stats.numRecords``), deleted ones included."""
        stats = self.parsed_stats()
        n = stats.get("numRecords") if stats else None
        return int(n) if isinstance(n, int) else None

    @property
    def live_records(self) -> int | None:
        """Rows of this logical file: the data file's minus those its deletion vector deletes."""
        n = self.num_records
        if n is None or self.deletion_vector is None:
            return n
        return n - self.deletion_vector.cardinality

    def remove(self, *, deletion_timestamp: int | None = None, data_change: bool = True) -> Remove:
        """The remove action that logically deletes this file (the same ``(path, DV)`` logical file)."""
        return Remove(
            path=self.path,
            deletion_timestamp=deletion_timestamp if deletion_timestamp is not None else now_ms(),
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            stats=self.stats,
        )


@dataclass(frozen=True, slots=True)
class Remove:
    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    stats: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path, "dataChange": self.data_change}
        if self.deletion_timestamp is not None:
            body["deletionTimestamp"] = self.deletion_timestamp
        if self.extended_file_metadata is not None:
            body["extendedFileMetadata"] = self.extended_file_metadata
        if self.partition_values is not None:
            body["partitionValues"] = dict(self.partition_values)
        if self.size is not None:
            body["size"] = self.size
        if self.tags is not None:
            body["tags"] = dict(self.tags)
        if self.deletion_vector is not None:
            body["deletionVector"] = self.deletion_vector.to_json()
        if self.stats is not None:
            body["stats"] = self.stats
        return {"remove": body}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Remove:
        return cls(
            path=d["path"],
            deletion_timestamp=d.get("deletionTimestamp"),
            data_change=bool(d.get("dataChange", True)),
            extended_file_metadata=d.get("extendedFileMetadata"),
            partition_values=d.get("partitionValues"),
            size=d.get("size"),
            tags=d.get("tags"),
            deletion_vector=_dv_or_none(d.get("deletionVector")),
            stats=d.get("stats"),
        )


@dataclass(frozen=True, slots=True)
class Txn:
    """Application transaction id (idempotent writes): ``appId`` reached ``version``."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            body["lastUpdated"] = self.last_updated
        return {"txn": body}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Txn:
        return cls(d["appId"], int(d["version"]), d.get("lastUpdated"))


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Free-form provenance of a commit; txlake puts its own keys under ``txlake``."""

    values: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"commitInfo": dict(self.values)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CommitInfo:
        return cls(dict(d))

    @property
    def txlake(self) -> Mapping[str, Any] | None:
        value = self.values.get("txlake")
        return value if isinstance(value, Mapping) else None


@dataclass(frozen=True, slots=True)
class Cdc:
    """Change-data file (read-only: txlake never writes CDF)."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    data_change: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "cdc": {
                "path": self.path,
                "partitionValues": dict(self.partition_values),
                "size": self.size,
                "dataChange": self.data_change,
            }
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Cdc:
        return cls(d["path"], dict(d.get("partitionValues") or {}), int(d.get("size") or 0), bool(d.get("dataChange")))


@dataclass(frozen=True, slots=True)
class OtherAction:
    """An action this client does not interpret (e.g. ``domainMetadata``); kept so replay can judge it."""

    kind: str
    body: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {self.kind: dict(self.body)}


Action: TypeAlias = Protocol | Metadata | Add | Remove | Txn | CommitInfo | Cdc | OtherAction

_PARSERS: dict[str, Any] = {
    "protocol": Protocol.from_json,
    "metaData": Metadata.from_json,
    "add": Add.from_json,
    "remove": Remove.from_json,
    "txn": Txn.from_json,
    "commitInfo": CommitInfo.from_json,
    "cdc": Cdc.from_json,
}


def action_from_json(obj: Mapping[str, Any]) -> Action:
    """Parse one decoded log line."""
    if len(obj) != 1:
        raise ValueError(f"a log line holds exactly one action, got keys {sorted(obj)}")
    ((kind, body),) = obj.items()
    parser = _PARSERS.get(kind)
    if parser is None:
        return OtherAction(kind, dict(body or {}))
    result: Action = parser(body)
    return result


def parse_commit(
    data: bytes, *, table: str | None = None, version: int | None = None, what: str = "commit"
) -> list[Action]:
    """Parse a whole NDJSON commit file; any malformed line makes the whole commit a :class:`CorruptLogError`.

    ``what`` names the file in errors (``"checkpoint"`` for a V2 JSON checkpoint, which has the same form).
    """
    actions: list[Action] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptLogError(f"{what} {version} is not UTF-8", table=table, version=version) from exc
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            actions.append(action_from_json(obj))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise CorruptLogError(
                f"{what} {version} of {table or 'table'} is corrupt at line {lineno}: {exc}",
                table=table,
                version=version,
            ) from exc
    if not actions:
        raise CorruptLogError(f"{what} {version} of {table or 'table'} is empty", table=table, version=version)
    return actions


def serialize_commit(actions: Iterable[Action]) -> bytes:
    """NDJSON bytes of a commit, commitInfo first (as Spark and delta-rs write it)."""
    ordered = sorted(actions, key=lambda a: 0 if isinstance(a, CommitInfo) else 1)
    return ("\n".join(json.dumps(a.to_json(), separators=(",", ":")) for a in ordered) + "\n").encode()
