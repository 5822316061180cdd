"""What the read commands report, as typed results built from the library's public API (no printing here)."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import pyarrow as pa

import txlake
from txlake.cli.arrow_sql import parse_order_by, sort_table
from txlake.cli.output import timestamp
from txlake.cli.suggest import did_you_mean
from txlake.delta import DeltaLog, Snapshot, history
from txlake.delta.schema import arrow_type_to_delta
from txlake.errors import CorruptLogError, SchemaMismatchError, UnsupportedFeatureError, VersionNotFoundError
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import GlobalRecord, LakehouseState, Outcome, TableEntry, apply
from txlake.lakehouse.tables import missing_log_error

# ------------------------------------------------------------------------------------------------ init


@dataclass(frozen=True, slots=True)
class InitResult:
    uri: str
    version: int
    created: bool


# ---------------------------------------------------------------------------------------------- tables


@dataclass(frozen=True, slots=True)
class TableSummary:
    name: str
    id: str
    delta_version: int | None
    files: int | None
    rows: int | None
    size_bytes: int | None
    location: str
    problem: str | None = None
    """Why the table's Delta state cannot be read (its log deleted or damaged, a feature txlake lacks)."""
    damaged: bool = False
    """The problem is damage (``txlake doctor``), not a feature txlake does not read."""


@dataclass(frozen=True, slots=True)
class TableList:
    uri: str
    version: int
    namespace: str | None
    tables: tuple[TableSummary, ...]


def snapshot_at(lake: txlake.Lakehouse, version: int | None) -> txlake.LakehouseSnapshot:
    """The lakehouse at ``version`` (latest when ``None``); a clear not-found error beyond the latest."""
    if version is not None:
        latest = lake.version()
        if version > latest:
            raise VersionNotFoundError(f"no lakehouse version {version} (the latest is {latest})", version=version)
    return lake.snapshot(version)


def _size(snap: Snapshot) -> int:
    return sum(a.size for a in snap.files.values())


def list_tables(lake: txlake.Lakehouse, *, namespace: str | None, version: int | None) -> TableList:
    """Every table at the lakehouse version with its mapped Delta version, file and row counts."""
    snap = snapshot_at(lake, version)
    summaries = []
    for name in snap.tables(namespace):
        entry = snap.entry(name)
        try:
            delta = snap.delta_snapshot(name)
        except (CorruptLogError, UnsupportedFeatureError) as exc:  # the other tables are still listed
            damaged = isinstance(exc, CorruptLogError)
            location = lake.store.url(entry.path)
            summaries.append(TableSummary(name, entry.id, None, None, None, None, location, str(exc), damaged))
            continue
        summaries.append(
            TableSummary(
                name,
                entry.id,
                delta.version,
                len(delta.files),
                delta.num_records,
                _size(delta),
                lake.store.url(entry.path),
            )
        )
    return TableList(lake.uri, snap.version, namespace, tuple(summaries))


# --------------------------------------------------------------------------------------------- optimize


@dataclass(frozen=True, slots=True)
class OptimizeResult:
    table: str
    previous_version: int
    version: int
    files_removed: int
    files_added: int
    bytes_removed: int


# ----------------------------------------------------------------------------------------------- vacuum


@dataclass(frozen=True, slots=True)
class VacuumResult:
    uri: str
    dry_run: bool
    retention: str
    horizon: int
    """The oldest lakehouse version whose files were all kept."""
    latest: int
    files_deleted: int
    bytes_deleted: int
    deleted_by_reason: dict[str, int]
    files_kept: int
    bytes_kept: int
    kept_by_reason: dict[str, int]
    tables_removed: tuple[str, ...]
    tags: tuple[str, ...]
    log_start: int
    """The oldest lakehouse version left in the global log."""
    log_entries_deleted: int
    files: tuple[dict[str, object], ...]
    """Every file deleted (or, in a dry run, to delete): path, size, reason."""


# ---------------------------------------------------------------------------------------------- recover


@dataclass(frozen=True, slots=True)
class RecoverResult:
    uri: str
    dry_run: bool
    guard: str
    transactions: tuple[dict[str, object], ...]
    """Every transaction directory looked at: txid, action, detail, version, status, files."""
    by_action: dict[str, int]
    files_deleted: int
    """Staged files deleted (or, in a dry run, to delete)."""


# ---------------------------------------------------------------------------------------------- restore


@dataclass(frozen=True, slots=True)
class RestoreResult:
    restored_version: int
    """The lakehouse version restored to."""
    previous_version: int
    """The latest version before the restore."""
    version: int
    """The new version the restore committed (``previous_version`` when nothing changed)."""
    changed: bool
    tables: tuple[str, ...]
    """The tables asked for (empty: the whole lakehouse)."""


# ----------------------------------------------------------------------------------------------- clone


@dataclass(frozen=True, slots=True)
class CloneResult:
    source: str
    target: str
    from_version: int
    """The lakehouse version the source was cloned at."""
    version: int
    """The lakehouse version that created the clones."""
    tables: tuple[str, ...]
    files: int
    """Data files the clones reference (none copied)."""


# ------------------------------------------------------------------------------------------------ tags


@dataclass(frozen=True, slots=True)
class TagResult:
    action: str
    """``created`` or ``dropped``."""
    name: str
    version: int
    created: dt.datetime | None
    description: str


@dataclass(frozen=True, slots=True)
class TagView:
    name: str
    version: int
    created: dt.datetime | None
    description: str


@dataclass(frozen=True, slots=True)
class TagList:
    uri: str
    tags: tuple[TagView, ...]


# -------------------------------------------------------------------------------------------- describe


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    type: str
    nullable: bool
    partition: bool = False


@dataclass(frozen=True, slots=True)
class ProtocolInfo:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None
    writer_features: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class TableDescription:
    name: str
    id: str
    location: str
    description: str | None
    lakehouse_version: int
    delta_version: int
    latest_delta_version: int | None
    created_version: int
    created_time: dt.datetime | None
    columns: tuple[ColumnInfo, ...]
    partition_columns: tuple[str, ...]
    properties: Mapping[str, str]
    catalog_properties: Mapping[str, str]
    protocol: ProtocolInfo
    files: int
    size_bytes: int
    rows: int | None


def delta_type_name(dtype: Any) -> str:
    """A Delta type as Spark SQL spells it: ``long``, ``array<string>``, ``struct<a:long,b:string>``."""
    if isinstance(dtype, str):
        return dtype
    kind = dtype.get("type")
    if kind == "array":
        return f"array<{delta_type_name(dtype['elementType'])}>"
    if kind == "map":
        return f"map<{delta_type_name(dtype['keyType'])},{delta_type_name(dtype['valueType'])}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{delta_type_name(f['type'])}" for f in dtype["fields"]) + ">"
    return json.dumps(dtype, separators=(",", ":"))


def describe_table(lake: txlake.Lakehouse, name: str, *, version: int | None) -> TableDescription:
    """Schema, partitioning, properties, protocol and versions of one table."""
    snap = snapshot_at(lake, version)
    entry = snap.entry(name)
    delta = snap.delta_snapshot(name)
    meta = delta.metadata
    partitions = set(meta.partition_columns)
    fields = json.loads(meta.schema_string).get("fields") or []
    columns = tuple(
        ColumnInfo(f["name"], delta_type_name(f["type"]), bool(f.get("nullable", True)), f["name"] in partitions)
        for f in fields
    )
    proto = delta.protocol
    return TableDescription(
        name=entry.name,
        id=entry.id,
        location=lake.store.url(entry.path),
        description=meta.description,
        lakehouse_version=snap.version,
        delta_version=delta.version,
        latest_delta_version=DeltaLog(lake.store, entry.path, name=entry.name).latest_version(),
        created_version=entry.created_version,
        created_time=timestamp(meta.created_time),
        columns=columns,
        partition_columns=meta.partition_columns,
        properties=dict(meta.configuration),
        catalog_properties=dict(entry.properties),
        protocol=ProtocolInfo(
            proto.min_reader_version, proto.min_writer_version, proto.reader_features, proto.writer_features
        ),
        files=len(delta.files),
        size_bytes=_size(delta),
        rows=delta.num_records,
    )


# ------------------------------------------------------------------------------------- table history


@dataclass(frozen=True, slots=True)
class DeltaCommitView:
    """One Delta commit of a table; ``global_version`` and ``txid`` when txlake wrote it."""

    version: int
    timestamp: dt.datetime | None
    operation: str | None
    global_version: int | None
    txid: str | None
    compensates: bool
    in_lakehouse: bool
    client: str | None
    operation_parameters: Mapping[str, Any]
    operation_metrics: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TableHistory:
    table: str
    location: str
    lakehouse_version: int
    mapped_version: int
    commits: tuple[DeltaCommitView, ...]


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def table_history(lake: txlake.Lakehouse, name: str, *, limit: int | None) -> TableHistory:
    """The Delta history of a table, newest first, annotated with the lakehouse versions that wrote it.

    ``in_lakehouse`` is false for commits beyond the version the lakehouse maps the table to (plain Delta
    writers not yet adopted) -- lakehouse readers do not see those yet.
    """
    snap = lake.snapshot()
    entry = snap.entry(name)
    mapped = snap.table_version(name)
    log = DeltaLog(lake.store, entry.path, name=entry.name)
    entries = history(log, limit)
    if not entries and not log.exists():
        raise missing_log_error(entry, log)
    commits = []
    for c in entries:
        info = c.commit_info
        tag = info.get("txlake")
        tag = tag if isinstance(tag, Mapping) else {}
        params = info.get("operationParameters")
        metrics = info.get("operationMetrics")
        client = info.get("clientVersion") or info.get("engineInfo")
        commits.append(
            DeltaCommitView(
                version=c.version,
                timestamp=timestamp(c.timestamp_ms),
                operation=c.operation,
                global_version=_int_or_none(tag.get("globalVersion")),
                txid=str(tag["txn"]) if "txn" in tag else None,
                compensates=bool(tag.get("compensates", False)),
                in_lakehouse=c.version <= mapped,
                client=str(client) if client is not None else None,
                operation_parameters=dict(params) if isinstance(params, Mapping) else {},
                operation_metrics=dict(metrics) if isinstance(metrics, Mapping) else {},
            )
        )
    return TableHistory(entry.name, lake.store.url(entry.path), snap.version, mapped, tuple(commits))


# ------------------------------------------------------------------------------------------ global log

Status: TypeAlias = Literal["committed", "aborted", "undecided"]


@dataclass(frozen=True, slots=True)
class CatalogChangeView:
    op: str
    name: str
    new_name: str | None
    table_id: str | None


@dataclass(frozen=True, slots=True)
class TableChangeView:
    """One table a global record touched: ``published_version`` is its Delta version once committed."""

    table: str
    table_id: str
    operation: str
    writes: bool
    base_version: int
    published_version: int | None
    adopted_from: int | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One lakehouse version: the record claiming it and its outcome (``undecided`` while there is none)."""

    version: int
    status: Status
    txid: str
    kind: str
    isolation: str
    read_version: int
    timestamp: dt.datetime | None
    decided_at: dt.datetime | None
    lease_until: dt.datetime | None
    lease_expired: bool
    tables: tuple[TableChangeView, ...]
    catalog: tuple[CatalogChangeView, ...]
    reason: str | None


@dataclass(frozen=True, slots=True)
class LogView:
    uri: str
    latest_version: int | None
    latest_claimed: int | None
    undecided: tuple[int, ...]
    entries: tuple[LogEntry, ...]


def _state_before(glog: GlobalLog, version: int) -> LakehouseState:
    """The decided state just before ``version`` (to name tables), or the newest decided one before it."""
    if version <= 0:
        return LakehouseState(version=-1)
    try:
        return glog.state_at(version - 1)
    except VersionNotFoundError:
        return glog.tail().state


def _table_name(table_id: str, path: str, record: GlobalRecord, *states: LakehouseState) -> str:
    for state in states:
        entry: TableEntry | None = state.tables.get(table_id)
        if entry is not None:
            return entry.name
    joined = ("create_table", "register_table")
    created = next((op.name for op in record.catalog if op.table_id == table_id and op.op in joined), None)
    return created or path


def _entry(record: GlobalRecord, outcome: Outcome | None, before: LakehouseState, after: LakehouseState) -> LogEntry:
    status: Status = "undecided" if outcome is None else outcome.status
    published = dict(outcome.table_versions) if outcome is not None and outcome.committed else {}
    tables = tuple(
        TableChangeView(
            table=_table_name(c.table_id, c.path, record, after, before),
            table_id=c.table_id,
            operation=c.operation,
            writes=c.writes,
            base_version=c.base_version,
            published_version=published.get(c.table_id),
            adopted_from=c.adopted_from,
        )
        for c in record.tables
    )
    catalog = tuple(CatalogChangeView(op.op, op.name, op.new_name, op.table_id) for op in record.catalog)
    return LogEntry(
        version=record.version,
        status=status,
        txid=record.txid,
        kind=record.kind,
        isolation=record.isolation,
        read_version=record.read_version,
        timestamp=timestamp(record.timestamp_ms),
        decided_at=timestamp(outcome.timestamp_ms) if outcome is not None and outcome.timestamp_ms else None,
        lease_until=timestamp(record.lease_until_ms),
        lease_expired=outcome is None and time.time() * 1000 >= record.lease_until_ms,
        tables=tables,
        catalog=catalog,
        reason=outcome.reason if outcome is not None else None,
    )


def read_log(lake: txlake.Lakehouse, *, start: int | None, limit: int | None) -> LogView:
    """Global records with their outcomes, oldest first: versions ``start..`` or the newest ``limit``."""
    glog = lake.context.glog
    listing = glog.list()
    versions = sorted(listing.records)
    if start is not None:
        versions = [v for v in versions if v >= start]
        versions = versions[:limit] if limit else versions
    elif limit:
        versions = versions[-limit:]

    def fetch(v: int) -> tuple[GlobalRecord, Outcome | None]:
        return glog.read_record(v), glog.read_outcome(v) if v in listing.outcomes else None

    with ThreadPoolExecutor(max_workers=16) as pool:
        fetched = list(pool.map(fetch, versions))
    state = _state_before(glog, versions[0]) if versions else LakehouseState(version=-1)
    entries = []
    for record, outcome in fetched:
        after = state
        if outcome is not None and state.version == record.version - 1:
            after = apply(state, record, outcome)
        entries.append(_entry(record, outcome, state, after))
        state = after
    undecided = sorted(set(listing.records) - set(listing.outcomes))
    decided = sorted(listing.outcomes & listing.records)
    return LogView(
        uri=lake.uri,
        latest_version=lake.version() if decided else None,
        latest_claimed=max(listing.records) if listing.records else None,
        undecided=tuple(undecided),
        entries=tuple(entries),
    )


# ------------------------------------------------------------------------------------------------ show


@dataclass(frozen=True)
class RowsResult:
    """Rows of a table at one lakehouse version; ``rows`` holds at most ``limit`` of ``matched`` rows."""

    table: str
    lakehouse_version: int
    delta_version: int
    where: str | None
    order_by: str | None
    columns: tuple[ColumnInfo, ...]
    matched: int
    limit: int | None
    truncated: bool
    rows: pa.Table


def _type_name(dtype: pa.DataType) -> str:
    try:
        return delta_type_name(arrow_type_to_delta(dtype))
    except TypeError:
        return str(dtype)


def parse_columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",") if c.strip()]
    return names or None


def read_rows(
    lake: txlake.Lakehouse,
    name: str,
    *,
    version: int | None,
    where: str | None,
    columns: Sequence[str] | None,
    limit: int | None,
    order_by: str | None = None,
) -> RowsResult:
    """The rows of ``name`` matching ``where`` at the lakehouse version, sorted by ``order_by``, cut to ``limit``."""
    snap = snapshot_at(lake, version)
    entry = snap.entry(name)
    schema = snap.schema(name)
    if columns is not None:
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            close = did_you_mean(unknown[0], schema.names) if len(unknown) == 1 else ""
            raise SchemaMismatchError(
                f"{entry.name} has no column(s) {', '.join(unknown)}{close} (columns: {', '.join(schema.names)})",
                table=entry.name,
                columns=unknown,
            )
    keys = parse_order_by(order_by, schema, columns) if order_by is not None else ()
    data = snap.read_arrow(name, where=where, columns=None if keys else columns)
    if keys:
        data = sort_table(data, keys)
        data = data.select(list(columns)) if columns is not None else data
    shown = data.slice(0, limit) if limit else data
    partitions = set(snap.delta_snapshot(name).partition_columns)
    infos = tuple(ColumnInfo(f.name, _type_name(f.type), f.nullable, f.name in partitions) for f in shown.schema)
    return RowsResult(
        table=entry.name,
        lakehouse_version=snap.version,
        delta_version=snap.table_version(name),
        where=where,
        order_by=order_by,
        columns=infos,
        matched=data.num_rows,
        limit=limit,
        truncated=shown.num_rows < data.num_rows,
        rows=shown,
    )
