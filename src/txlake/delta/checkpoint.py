"""Classic Parquet checkpoints: read (single and multi-part) and write, then ``_last_checkpoint``."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txlake.delta.actions import Add, Metadata, OtherAction, Protocol, Remove, Txn, now_ms, parse_commit
from txlake.delta.dv import DeletionVectorDescriptor
from txlake.delta.filemap import ColumnarAdds, FileMap
from txlake.delta.files import decode_path
from txlake.delta.log import SIDECARS, CheckpointRef, DeltaLog, LastCheckpoint
from txlake.delta.state import Snapshot, SnapshotBuilder
from txlake.errors import CorruptLogError, ObjectNotFoundError

_STR_MAP = pa.map_(pa.string(), pa.string())
_DELETION_VECTOR = pa.struct(
    [
        pa.field("storageType", pa.string()),
        pa.field("pathOrInlineDv", pa.string()),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32()),
        pa.field("cardinality", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        pa.field(
            "add",
            pa.struct(
                [
                    pa.field("path", pa.string()),
                    pa.field("partitionValues", _STR_MAP),
                    pa.field("size", pa.int64()),
                    pa.field("modificationTime", pa.int64()),
                    pa.field("dataChange", pa.bool_()),
                    pa.field("stats", pa.string()),
                    pa.field("tags", _STR_MAP),
                    pa.field("deletionVector", _DELETION_VECTOR),
                ]
            ),
        ),
        pa.field(
            "remove",
            pa.struct(
                [
                    pa.field("path", pa.string()),
                    pa.field("deletionTimestamp", pa.int64()),
                    pa.field("dataChange", pa.bool_()),
                    pa.field("extendedFileMetadata", pa.bool_()),
                    pa.field("partitionValues", _STR_MAP),
                    pa.field("size", pa.int64()),
                    pa.field("tags", _STR_MAP),
                    pa.field("deletionVector", _DELETION_VECTOR),
                ]
            ),
        ),
        pa.field(
            "metaData",
            pa.struct(
                [
                    pa.field("id", pa.string()),
                    pa.field("name", pa.string()),
                    pa.field("description", pa.string()),
                    pa.field("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
                    pa.field("schemaString", pa.string()),
                    pa.field("partitionColumns", pa.list_(pa.string())),
                    pa.field("configuration", _STR_MAP),
                    pa.field("createdTime", pa.int64()),
                ]
            ),
        ),
        pa.field(
            "protocol",
            pa.struct(
                [
                    pa.field("minReaderVersion", pa.int32()),
                    pa.field("minWriterVersion", pa.int32()),
                    pa.field("readerFeatures", pa.list_(pa.string())),
                    pa.field("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
    ]
)
V2_CHECKPOINT_SCHEMA = CHECKPOINT_SCHEMA.append(
    pa.field("checkpointMetadata", pa.struct([pa.field("version", pa.int64()), pa.field("tags", _STR_MAP)]))
)
"""A classic-named checkpoint in the V2 spec: one ``checkpointMetadata`` row, every file action inline."""
DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(\w+?)s?\s*$", re.IGNORECASE)
_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}


def tombstone_retention_ms(metadata: Metadata) -> int:
    """``delta.deletedFileRetentionDuration`` in ms (default one week)."""
    raw = metadata.configuration.get("delta.deletedFileRetentionDuration")
    m = _INTERVAL.match(raw) if raw else None
    if not m or m.group(2).lower() not in _UNIT_MS:
        return DEFAULT_TOMBSTONE_RETENTION_MS
    return int(m.group(1)) * _UNIT_MS[m.group(2).lower()]


# ----------------------------------------------------------------------------------------------- reading


def _as_dict(value: Any) -> dict[str, Any] | None:
    """Arrow maps come back from ``to_pylist`` as lists of (key, value) pairs."""
    if value is None:
        return None
    if isinstance(value, list):
        return dict(value)
    return dict(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _read_part(log: DeltaLog, path: str, ref: CheckpointRef) -> pa.Table:
    try:
        data = log.store.get(path)
    except ObjectNotFoundError as exc:
        raise CorruptLogError(f"checkpoint part {path} is missing", table=log.name, version=ref.version) from exc
    try:
        # stats_parsed may hold INT96 timestamps: as nanoseconds, year 0001 or 9999 would overflow.
        return pq.read_table(pa.BufferReader(data), coerce_int96_timestamp_unit="us")
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptLogError(
            f"checkpoint {path} is not readable Parquet: {exc}", table=log.name, version=ref.version, path=path
        ) from exc


def _field_list(struct: pa.StructArray, name: str, n: int) -> list[Any]:
    index = struct.type.get_field_index(name)
    return struct.field(index).to_pylist() if index >= 0 else [None] * n


def _read_adds(column: pa.ChunkedArray) -> ColumnarAdds:
    """The add actions of a checkpoint column, kept column-wise (the hot path of a checkpoint load)."""
    struct = column.combine_chunks()
    paths = struct.field(struct.type.get_field_index("path"))
    keep = pc.and_(struct.is_valid(), paths.is_valid())
    if not pc.all(keep).as_py():
        struct = struct.filter(keep)
    struct = pa.StructArray.from_arrays(struct.flatten(), fields=list(struct.type))
    n = len(struct)
    dv = struct.type.get_field_index("deletionVector")
    dvs: list[DeletionVectorDescriptor | None] | None = None
    if dv >= 0 and pc.any(struct.field(dv).is_valid()).as_py():
        dvs = [None if v is None else DeletionVectorDescriptor.from_json(v) for v in struct.field(dv).to_pylist()]
    stats = _field_list(struct, "stats", n)
    if struct.type.get_field_index("stats_parsed") >= 0 and any(v is None for v in stats):
        parsed = _field_list(struct, "stats_parsed", n)
        stats = [
            s if s is not None or p is None else json.dumps(p, default=_json_default, separators=(",", ":"))
            for s, p in zip(stats, parsed, strict=True)
        ]
    return ColumnarAdds(
        path=_field_list(struct, "path", n),
        partition_values=_field_list(struct, "partitionValues", n),
        size=_field_list(struct, "size", n),
        modification_time=_field_list(struct, "modificationTime", n),
        data_change=_field_list(struct, "dataChange", n),
        stats=stats,
        tags=_field_list(struct, "tags", n),
        deletion_vector=dvs,
    )


@dataclass(frozen=True, slots=True)
class SidecarRef:
    """A ``sidecar`` action of a V2 checkpoint: a Parquet file of add/remove actions in ``_delta_log/_sidecars``."""

    path: str
    size_in_bytes: int | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SidecarRef:
        path = d.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"sidecar action without a path: {dict(d)!r}")
        size = d.get("sizeInBytes")
        return cls(path, size if isinstance(size, int) else None)


def sidecar_key(log: DeltaLog, sidecar: SidecarRef) -> str:
    """The store key of a sidecar file: a (URI-encoded) name in ``_delta_log/_sidecars``, or a full path there."""
    name = decode_path(sidecar.path)
    if "://" in name:  # a full URI: only one inside this table's own _sidecars directory is valid
        name = name.rsplit("/", 1)[-1] if f"/{log.log_dir}/{SIDECARS}/" in name else ""
    if not name or "/" in name or name in {".", ".."}:
        raise CorruptLogError(f"sidecar {sidecar.path!r} is not a file of {log.log_dir}/{SIDECARS}", table=log.name)
    return f"{log.log_dir}/{SIDECARS}/{name}"


class _CheckpointReader:
    """Accumulates the actions of a checkpoint's files (parts, V2 top-level file, sidecars) into a builder."""

    def __init__(self, log: DeltaLog, ref: CheckpointRef) -> None:
        self.log = log
        self.ref = ref
        self.builder = SnapshotBuilder(log.name)
        self.sidecars: list[SidecarRef] = []
        self.v2_metadata = 0  # checkpointMetadata actions seen
        self.files_inline = False

    def corrupt(self, path: str, what: str) -> CorruptLogError:
        return CorruptLogError(f"checkpoint {path} {what}", table=self.log.name, version=self.ref.version, path=path)

    def parquet(self, path: str, *, sidecar: bool = False) -> None:
        part = _read_part(self.log, path, self.ref)
        names = set(part.column_names)
        builder = self.builder
        try:
            if not sidecar:
                self._non_file_columns(part, names)
            if "add" in names:
                adds = _read_adds(part.column("add"))
                if adds.path and not sidecar:
                    self.files_inline = True
                if builder.files or len(self.ref.paths) > 1 or self.sidecars or sidecar:
                    for i in range(len(adds.path)):
                        builder.files[adds.path[i]] = adds.get(i)
                else:
                    builder.files = FileMap(adds)
            if "remove" in names:
                for row in part.column("remove").to_pylist():
                    if row is None or row.get("path") is None:
                        continue
                    row = dict(row)
                    row["partitionValues"] = _as_dict(row.get("partitionValues"))
                    row["tags"] = _as_dict(row.get("tags"))
                    rm = Remove.from_json(row)
                    builder.tombstones[rm.path] = rm
                    self.files_inline = self.files_inline or not sidecar
        except (KeyError, TypeError, ValueError) as exc:
            raise self.corrupt(path, f"has malformed actions: {exc}") from exc

    def _non_file_columns(self, part: pa.Table, names: set[str]) -> None:
        builder = self.builder
        if "protocol" in names:
            for row in part.column("protocol").to_pylist():
                if row is not None and row.get("minReaderVersion") is not None:
                    builder.protocol = Protocol.from_json(row)
        if "metaData" in names:
            for row in part.column("metaData").to_pylist():
                if row is not None and row.get("id") is not None:
                    row = dict(row)
                    row["configuration"] = _as_dict(row.get("configuration")) or {}
                    fmt = dict(row.get("format") or {})
                    fmt["options"] = _as_dict(fmt.get("options")) or {}
                    row["format"] = fmt
                    builder.metadata = Metadata.from_json(row)
        if "txn" in names:
            for row in part.column("txn").to_pylist():
                if row is not None and row.get("appId") is not None:
                    txn = Txn.from_json(row)
                    builder.txns[txn.app_id] = txn.version
        if "checkpointMetadata" in names:
            self.v2_metadata += sum(
                1 for row in part.column("checkpointMetadata").to_pylist() if row and row.get("version") is not None
            )
        if "sidecar" in names:
            self.sidecars.extend(
                SidecarRef.from_json(row) for row in part.column("sidecar").to_pylist() if row and row.get("path")
            )

    def json(self, path: str) -> None:
        """A UUID-named V2 checkpoint in JSON: one action a line, as in a commit."""
        try:
            data = self.log.store.get(path)
        except ObjectNotFoundError as exc:
            raise self.corrupt(path, "is missing") from exc
        builder = self.builder
        try:
            for action in parse_commit(data, table=self.log.name, version=self.ref.version, what="checkpoint"):
                if isinstance(action, Add):
                    builder.files[action.path] = action
                    self.files_inline = True
                elif isinstance(action, Remove):
                    builder.tombstones[action.path] = action
                    self.files_inline = True
                elif isinstance(action, Protocol):
                    builder.protocol = action
                elif isinstance(action, Metadata):
                    builder.metadata = action
                elif isinstance(action, Txn):
                    builder.txns[action.app_id] = action.version
                elif isinstance(action, OtherAction) and action.kind == "checkpointMetadata":
                    self.v2_metadata += 1
                elif isinstance(action, OtherAction) and action.kind == "sidecar":
                    self.sidecars.append(SidecarRef.from_json(action.body))
        except (KeyError, TypeError, ValueError) as exc:
            raise self.corrupt(path, f"has malformed actions: {exc}") from exc

    def finish(self) -> Snapshot:
        if self.ref.uuid_named and self.v2_metadata != 1:
            raise self.corrupt(self.ref.paths[0], f"has {self.v2_metadata} checkpointMetadata actions, not one")
        if self.sidecars and self.files_inline:  # PROTOCOL.md: all file actions inline, or all in sidecars
            raise self.corrupt(self.ref.paths[0], "has file actions both inline and in sidecars")
        for sidecar in self.sidecars:
            self.parquet(sidecar_key(self.log, sidecar), sidecar=True)
        self.builder.version = self.ref.version
        return self.builder.finish()


def read_checkpoint(log: DeltaLog, ref: CheckpointRef) -> Snapshot:
    """The table state stored in a checkpoint: a classic one (all parts; V1 or V2 spec) or a UUID-named V2 one
    (JSON or Parquet), with the add/remove actions of the sidecar files a V2 checkpoint names."""
    reader = _CheckpointReader(log, ref)
    for path in ref.paths:
        if ref.is_json:
            reader.json(path)
        else:
            reader.parquet(path)
    return reader.finish()


def checkpoint_sidecars(log: DeltaLog, ref: CheckpointRef) -> list[str]:
    """The store keys of the sidecar files a checkpoint names (none for a V1 checkpoint)."""
    reader = _CheckpointReader(log, ref)
    for path in ref.paths:
        if ref.is_json:
            reader.json(path)
        else:
            try:
                names = set(pq.read_schema(pa.BufferReader(log.store.get(path))).names)
            except ObjectNotFoundError as exc:
                raise reader.corrupt(path, "is missing") from exc
            except (pa.ArrowInvalid, OSError) as exc:
                raise reader.corrupt(path, f"is not readable Parquet: {exc}") from exc
            if "sidecar" in names:
                reader.parquet(path)
    return [sidecar_key(log, s) for s in reader.sidecars]


# ----------------------------------------------------------------------------------------------- writing


def _pairs(mapping: Mapping[str, Any] | None) -> list[tuple[str, Any]] | None:
    return None if mapping is None else list(mapping.items())


def _dv(dv: DeletionVectorDescriptor | None) -> dict[str, Any] | None:
    """A descriptor as a checkpoint struct (every field present, ``offset`` null for inline DVs)."""
    return None if dv is None else {"offset": None, **dv.to_json()}


def _rows(snapshot: Snapshot, now: int) -> list[dict[str, Any]]:
    p = snapshot.protocol
    m = snapshot.metadata
    rows: list[dict[str, Any]] = [
        {
            "protocol": {
                "minReaderVersion": p.min_reader_version,
                "minWriterVersion": p.min_writer_version,
                "readerFeatures": list(p.reader_features) if p.reader_features is not None else None,
                "writerFeatures": list(p.writer_features) if p.writer_features is not None else None,
            }
        },
        {
            "metaData": {
                "id": m.id,
                "name": m.name,
                "description": m.description,
                "format": {"provider": m.format.provider, "options": _pairs(m.format.options) or []},
                "schemaString": m.schema_string,
                "partitionColumns": list(m.partition_columns),
                "configuration": _pairs(m.configuration) or [],
                "createdTime": m.created_time,
            }
        },
    ]
    rows.extend({"txn": {"appId": app, "version": v, "lastUpdated": None}} for app, v in snapshot.txns.items())
    for add in snapshot.files.values():
        rows.append(
            {
                "add": {
                    "path": add.path,
                    "partitionValues": _pairs(add.partition_values),
                    "size": add.size,
                    "modificationTime": add.modification_time,
                    "dataChange": False,
                    "stats": add.stats,
                    "tags": _pairs(add.tags),
                    "deletionVector": _dv(add.deletion_vector),
                }
            }
        )
    horizon = now - tombstone_retention_ms(m)
    for rm in snapshot.tombstones.values():
        if rm.deletion_timestamp is not None and rm.deletion_timestamp < horizon:
            continue
        rows.append(
            {
                "remove": {
                    "path": rm.path,
                    "deletionTimestamp": rm.deletion_timestamp,
                    "dataChange": rm.data_change,
                    "extendedFileMetadata": rm.extended_file_metadata,
                    "partitionValues": _pairs(rm.partition_values),
                    "size": rm.size,
                    "tags": _pairs(rm.tags),
                    "deletionVector": _dv(rm.deletion_vector),
                }
            }
        )
    return rows


def uses_v2_checkpoints(protocol: Protocol) -> bool:
    """Whether the table supports the ``v2Checkpoint`` feature (its checkpoints may be V2 spec, never multi-part)."""
    return "v2Checkpoint" in (protocol.writer_features or ())


def write_checkpoint(log: DeltaLog, snapshot: Snapshot, *, parts: int = 1) -> LastCheckpoint:
    """Write a classic checkpoint of ``snapshot`` (``parts`` > 1: multi-part), then ``_last_checkpoint``.

    On a table with the ``v2Checkpoint`` feature it is a classic-named V2-spec checkpoint: the same file with a
    ``checkpointMetadata`` row (PROTOCOL.md allows V2 spec under the classic name; multi-part checkpoints are
    forbidden there, so ``parts`` > 1 is a :class:`ValueError`). Every file action is inline (no sidecars), so
    readers without V2 support still find the protocol in it and refuse the table by name.

    Checkpoint files are written with plain PUT: a checkpoint's content is a deterministic function of
    the version, so two writers racing produce equivalent files (as in Delta).
    """
    if parts < 1:
        raise ValueError("parts must be >= 1")
    v2 = uses_v2_checkpoints(snapshot.protocol)
    if v2 and parts > 1:
        raise ValueError(f"{log.name} has the v2Checkpoint feature: multi-part checkpoints are forbidden")
    schema = V2_CHECKPOINT_SCHEMA if v2 else CHECKPOINT_SCHEMA
    rows = _rows(snapshot, now_ms())
    if v2:
        rows.insert(0, {"checkpointMetadata": {"version": snapshot.version, "tags": []}})
    columns = [f.name for f in schema]
    full = [{c: r.get(c) for c in columns} for r in rows]
    per_part = -(-len(full) // parts)
    total_bytes = 0
    for i in range(parts):
        chunk = full[i * per_part : (i + 1) * per_part]
        table = pa.Table.from_pylist(chunk, schema=schema)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="snappy")
        data = buf.getvalue()
        total_bytes += len(data)
        if parts == 1:
            name = f"{snapshot.version:020d}.checkpoint.parquet"
        else:
            name = f"{snapshot.version:020d}.checkpoint.{i + 1:010d}.{parts:010d}.parquet"
        log.store.put(f"{log.log_dir}/{name}", data)
    hint = LastCheckpoint(snapshot.version, len(full), parts if parts > 1 else None)
    log.write_last_checkpoint(hint, sizeInBytes=total_bytes, numOfAddFiles=len(snapshot.files))
    return hint
