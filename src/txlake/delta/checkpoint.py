"""Classic Parquet checkpoints: read (single and multi-part) and write, then ``_last_checkpoint``."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txlake.delta.actions import Metadata, Protocol, Remove, Txn, now_ms
from txlake.delta.dv import DeletionVectorDescriptor
from txlake.delta.filemap import ColumnarAdds, FileMap
from txlake.delta.log import CheckpointRef, DeltaLog, LastCheckpoint
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


def read_checkpoint(log: DeltaLog, ref: CheckpointRef) -> Snapshot:
    """The table state stored in a classic checkpoint (all parts)."""
    builder = SnapshotBuilder(log.name)
    for path in ref.paths:
        part = _read_part(log, path, ref)
        names = set(part.column_names)
        try:
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
            if "add" in names:
                adds = _read_adds(part.column("add"))
                if builder.files or len(ref.paths) > 1:
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
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptLogError(
                f"checkpoint {path} has malformed actions: {exc}", table=log.name, version=ref.version, path=path
            ) from exc
    builder.version = ref.version
    return builder.finish()


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


def write_checkpoint(log: DeltaLog, snapshot: Snapshot, *, parts: int = 1) -> LastCheckpoint:
    """Write a classic checkpoint of ``snapshot`` (``parts`` > 1: multi-part), then ``_last_checkpoint``.

    Checkpoint files are written with plain PUT: a checkpoint's content is a deterministic function of
    the version, so two writers racing produce equivalent files (as in Delta).
    """
    if parts < 1:
        raise ValueError("parts must be >= 1")
    rows = _rows(snapshot, now_ms())
    columns = [f.name for f in CHECKPOINT_SCHEMA]
    full = [{c: r.get(c) for c in columns} for r in rows]
    per_part = -(-len(full) // parts)
    total_bytes = 0
    for i in range(parts):
        chunk = full[i * per_part : (i + 1) * per_part]
        table = pa.Table.from_pylist(chunk, schema=CHECKPOINT_SCHEMA)
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
