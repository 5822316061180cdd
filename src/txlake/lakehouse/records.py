"""Global records, outcomes and catalog operations of the lakehouse log, as frozen data.

A global record claims lakehouse version G for one transaction; its outcome (committed with the Delta
versions actually published, or aborted) is the commit point. ``apply(state, record, outcome)`` is a pure
function from the lakehouse state at G-1 to the state at G.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, TypeAlias

from txlake.delta.actions import Action, action_from_json
from txlake.errors import ConcurrentTransactionError, CorruptLogError

FORMAT_VERSION = 1
Isolation: TypeAlias = Literal["snapshot", "write_serializable", "serializable"]
ISOLATION_LEVELS: tuple[Isolation, ...] = ("snapshot", "write_serializable", "serializable")
OutcomeStatus: TypeAlias = Literal["committed", "aborted"]


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


# -------------------------------------------------------------------------------------------- catalog


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A catalog table: stable id (= Delta ``metaData.id``), current name, location below the root."""

    id: str
    name: str
    path: str
    created_version: int
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.name.rsplit(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "path": self.path,
            "createdVersion": self.created_version,
            "properties": dict(self.properties),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableEntry:
        return cls(d["id"], d["name"], d["path"], int(d["createdVersion"]), dict(d.get("properties") or {}))


CatalogOpKind: TypeAlias = Literal[
    "create_namespace",
    "drop_namespace",
    "create_table",
    "register_table",
    "drop_table",
    "rename_table",
    "set_properties",
]


@dataclass(frozen=True, slots=True)
class CatalogOp:
    """One catalog change of a global record; each kind is a subclass with its requirement and its effect.

    ``validate(state)`` raises :class:`ConcurrentTransactionError` when the change no longer fits the latest
    state (a concurrent commit created or dropped what it relies on); ``apply(state, version)`` is the pure
    new state. Records keep them as JSON objects with an ``op`` key.
    """

    op: ClassVar[CatalogOpKind]
    name: str
    table_id: str | None = None
    new_name: str | None = None
    path: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    version: int | None = None
    """The Delta version a table joins the lakehouse at (``register_table``)."""

    def validate(self, state: LakehouseState) -> None:
        """Raise if this change cannot follow ``state``."""

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        """The state after this change, made at global version ``version``."""
        raise NotImplementedError

    def _conflict(self, message: str, name: str | None = None) -> ConcurrentTransactionError:
        return ConcurrentTransactionError(message, table=name or self.name)

    def _require_namespace(self, state: LakehouseState, table_name: str) -> None:
        namespace = table_name.rsplit(".", 1)[0]
        if not state.has_namespace(namespace):
            raise self._conflict(f"namespace {namespace} was dropped concurrently", table_name)

    def _entry(self, state: LakehouseState) -> TableEntry:
        entry = state.tables.get(self.table_id or "")
        if entry is None:
            raise self._conflict(f"table {self.name} was dropped concurrently")
        return entry

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"op": self.op, "name": self.name}
        if self.table_id is not None:
            doc["tableId"] = self.table_id
        if self.new_name is not None:
            doc["newName"] = self.new_name
        if self.path is not None:
            doc["path"] = self.path
        if self.properties:
            doc["properties"] = dict(self.properties)
        if self.version is not None:
            doc["version"] = self.version
        return doc

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CatalogOp:
        kind = _CATALOG_OPS.get(d["op"])
        if kind is None:
            raise ValueError(f"unknown catalog operation {d['op']!r}")
        version = d.get("version")
        return kind(
            d["name"],
            d.get("tableId"),
            d.get("newName"),
            d.get("path"),
            dict(d.get("properties") or {}),
            int(version) if version is not None else None,
        )


@dataclass(frozen=True, slots=True)
class CreateNamespace(CatalogOp):
    op: ClassVar[CatalogOpKind] = "create_namespace"

    def validate(self, state: LakehouseState) -> None:
        if state.has_namespace(self.name):
            raise self._conflict(f"namespace {self.name} was created concurrently")

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        return replace(state, namespaces={**state.namespaces, self.name: dict(self.properties)})


@dataclass(frozen=True, slots=True)
class DropNamespace(CatalogOp):
    op: ClassVar[CatalogOpKind] = "drop_namespace"

    def validate(self, state: LakehouseState) -> None:
        if self.name not in state.namespaces:  # (by its stored name: dropped, or dropped and created again)
            raise self._conflict(f"namespace {self.name} was dropped concurrently")
        if state.table_names(self.name):
            raise self._conflict(f"namespace {self.name} got tables concurrently")

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        return replace(state, namespaces={k: v for k, v in state.namespaces.items() if k != self.name})


@dataclass(frozen=True, slots=True)
class CreateTable(CatalogOp):
    op: ClassVar[CatalogOpKind] = "create_table"

    def validate(self, state: LakehouseState) -> None:
        if state.table_by_name(self.name) is not None:
            raise self._conflict(f"table {self.name} was created concurrently")
        self._require_namespace(state, self.name)

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        if self.table_id is None or self.path is None:
            return state
        entry = TableEntry(self.table_id, self.name, self.path, version, dict(self.properties))
        return replace(state, tables={**state.tables, self.table_id: entry})


@dataclass(frozen=True, slots=True)
class RegisterTable(CatalogOp):
    """An existing Delta table (its own ``metaData.id``) joins the catalog at Delta version ``version``: a table
    written elsewhere (``register_table``) or a dropped table coming back (``restore``)."""

    op: ClassVar[CatalogOpKind] = "register_table"

    def validate(self, state: LakehouseState) -> None:
        if state.table_by_name(self.name) is not None:
            raise self._conflict(f"table {self.name} was created concurrently")
        if (self.table_id or "") in state.tables:
            raise self._conflict(f"the Delta table {self.path} joined the lakehouse concurrently")
        self._require_namespace(state, self.name)

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        if self.table_id is None or self.path is None or self.version is None:
            return state
        entry = TableEntry(self.table_id, self.name, self.path, version, dict(self.properties))
        return replace(
            state,
            tables={**state.tables, self.table_id: entry},
            table_versions={**state.table_versions, self.table_id: self.version},
        )


@dataclass(frozen=True, slots=True)
class DropTable(CatalogOp):
    op: ClassVar[CatalogOpKind] = "drop_table"

    def validate(self, state: LakehouseState) -> None:
        self._entry(state)

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        tables = {k: v for k, v in state.tables.items() if k != self.table_id}
        versions = {k: v for k, v in state.table_versions.items() if k != self.table_id}
        return replace(state, tables=tables, table_versions=versions)


@dataclass(frozen=True, slots=True)
class RenameTable(CatalogOp):
    op: ClassVar[CatalogOpKind] = "rename_table"

    def validate(self, state: LakehouseState) -> None:
        self._entry(state)
        if self.new_name and state.table_by_name(self.new_name) is not None:
            raise self._conflict(f"table {self.new_name} was created concurrently", self.new_name)
        if self.new_name:
            self._require_namespace(state, self.new_name)

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        old = state.tables.get(self.table_id or "")
        if old is None or self.new_name is None:
            return state
        return replace(state, tables={**state.tables, old.id: replace(old, name=self.new_name)})


@dataclass(frozen=True, slots=True)
class SetProperties(CatalogOp):
    op: ClassVar[CatalogOpKind] = "set_properties"

    def validate(self, state: LakehouseState) -> None:
        self._entry(state)

    def apply(self, state: LakehouseState, version: int) -> LakehouseState:
        old = state.tables.get(self.table_id or "")
        if old is None:
            return state
        entry = replace(old, properties={**old.properties, **self.properties})
        return replace(state, tables={**state.tables, old.id: entry})


_CATALOG_OPS: dict[str, type[CatalogOp]] = {
    kind.op: kind
    for kind in (CreateNamespace, DropNamespace, CreateTable, RegisterTable, DropTable, RenameTable, SetProperties)
}


# ------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ReadSet:
    """What a transaction read from one table: predicates (``None`` = whole table) and files scanned."""

    predicates: tuple[str | None, ...] = ()
    files: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.predicates and not self.files

    def to_json(self) -> dict[str, Any]:
        return {"predicates": list(self.predicates), "files": sorted(self.files)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> ReadSet:
        if not d:
            return cls()
        return cls(tuple(d.get("predicates") or ()), frozenset(d.get("files") or ()))

    def union(self, other: ReadSet) -> ReadSet:
        preds = self.predicates + tuple(p for p in other.predicates if p not in self.predicates)
        return ReadSet(preds, self.files | other.files)


@dataclass(frozen=True, slots=True)
class TableChange:
    """What one transaction does to one table, as claimed in its global record.

    ``base_version`` is the Delta version the actions apply to (-1 for a table created here);
    ``adopted_from`` marks plain-Delta commits ``adopted_from..base_version`` this record adopts.
    ``dml_reads`` are the reads of its update/delete/merge/overwrite statements, ``query_reads`` its
    ``read_arrow``/``read`` calls; both are kept so any client can conflict-check a racing plain writer.
    """

    table_id: str
    path: str
    base_version: int
    actions: tuple[Action, ...] = ()
    operation: str = "WRITE"
    blind_append: bool = False
    dml_reads: ReadSet = field(default_factory=ReadSet)
    query_reads: ReadSet = field(default_factory=ReadSet)
    adopted_from: int | None = None

    @property
    def writes(self) -> bool:
        return bool(self.actions)

    @property
    def moves_version(self) -> bool:
        """Whether publishing it changes the table's Delta version (it writes, or adopts plain commits)."""
        return self.writes or self.adopted_from is not None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "tableId": self.table_id,
            "path": self.path,
            "baseVersion": self.base_version,
            "operation": self.operation,
            "blindAppend": self.blind_append,
        }
        doc["actions"] = [a.to_json() for a in self.actions]
        if not self.dml_reads.empty:
            doc["dmlReads"] = self.dml_reads.to_json()
        if not self.query_reads.empty:
            doc["queryReads"] = self.query_reads.to_json()
        if self.adopted_from is not None:
            doc["adoptedFrom"] = self.adopted_from
        return doc

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableChange:
        return cls(
            table_id=d["tableId"],
            path=d["path"],
            base_version=int(d["baseVersion"]),
            actions=tuple(action_from_json(a) for a in d.get("actions") or ()),
            operation=d.get("operation", "WRITE"),
            blind_append=bool(d.get("blindAppend", False)),
            dml_reads=ReadSet.from_json(d.get("dmlReads")),
            query_reads=ReadSet.from_json(d.get("queryReads")),
            adopted_from=d.get("adoptedFrom"),
        )


RecordKind: TypeAlias = Literal["init", "txn"]


@dataclass(frozen=True, slots=True)
class GlobalRecord:
    """The claim of lakehouse version ``version`` by transaction ``txid`` (immutable once written)."""

    version: int
    txid: str
    kind: RecordKind
    read_version: int
    isolation: Isolation
    timestamp_ms: int
    lease_until_ms: int
    tables: tuple[TableChange, ...] = ()
    catalog: tuple[CatalogOp, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)
    members: tuple[str, ...] = ()
    """Transactions of other clients this version commits too (group commit; their changes are merged in)."""
    decided: tuple[Outcome, ...] = ()
    """Outcomes of earlier versions its claimer knew: readers walking the log need not GET them."""

    def table(self, table_id: str) -> TableChange | None:
        return next((t for t in self.tables if t.table_id == table_id), None)

    def includes(self, txid: str) -> bool:
        """Whether this version commits transaction ``txid`` (its claimer's, or one of its members)."""
        return txid == self.txid or txid in self.members

    def to_bytes(self) -> bytes:
        return _dumps(
            {
                "format": FORMAT_VERSION,
                "version": self.version,
                "txid": self.txid,
                "kind": self.kind,
                "readVersion": self.read_version,
                "isolation": self.isolation,
                "timestamp": self.timestamp_ms,
                "leaseUntil": self.lease_until_ms,
                "tables": [t.to_json() for t in self.tables],
                "catalog": [c.to_json() for c in self.catalog],
                "info": dict(self.info),
                **({"members": list(self.members)} if self.members else {}),
                **({"decided": [o.to_json() for o in self.decided]} if self.decided else {}),
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, version: int | None = None) -> GlobalRecord:
        try:
            d = json.loads(data)
            return cls(
                version=int(d["version"]),
                txid=str(d["txid"]),
                kind=d["kind"],
                read_version=int(d["readVersion"]),
                isolation=d["isolation"],
                timestamp_ms=int(d["timestamp"]),
                lease_until_ms=int(d["leaseUntil"]),
                tables=tuple(TableChange.from_json(t) for t in d.get("tables") or ()),
                catalog=tuple(CatalogOp.from_json(c) for c in d.get("catalog") or ()),
                info=dict(d.get("info") or {}),
                members=tuple(str(m) for m in d.get("members") or ()),
                decided=_embedded_outcomes(d.get("decided")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"global record {version} is corrupt: {exc}", version=version) from exc


def _embedded_outcomes(value: Any) -> tuple[Outcome, ...]:
    """A record's embedded outcomes; a malformed list is dropped (they are copies: readers GET the outcomes)."""
    try:
        return tuple(Outcome.from_json(o) for o in value or ())
    except (ValueError, KeyError, TypeError, AttributeError):
        return ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """The decision on global version ``version``: committed (with published Delta versions) or aborted."""

    version: int
    txid: str
    status: OutcomeStatus
    table_versions: Mapping[str, int] = field(default_factory=dict)
    timestamp_ms: int = 0
    reason: str | None = None

    @property
    def committed(self) -> bool:
        return self.status == "committed"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "version": self.version,
            "txid": self.txid,
            "status": self.status,
            "tableVersions": dict(self.table_versions),
            "timestamp": self.timestamp_ms,
        }
        if self.reason is not None:
            doc["reason"] = self.reason
        return doc

    def to_bytes(self) -> bytes:
        return _dumps(self.to_json())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Outcome:
        status = d["status"]
        if status not in ("committed", "aborted"):
            raise ValueError(f"unknown status {status!r}")
        return cls(
            int(d["version"]),
            str(d["txid"]),
            status,
            {k: int(v) for k, v in (d.get("tableVersions") or {}).items()},
            int(d.get("timestamp") or 0),
            d.get("reason"),
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, version: int | None = None) -> Outcome:
        try:
            return cls.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"outcome of global version {version} is corrupt: {exc}", version=version) from exc


# --------------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class LakehouseState:
    """The catalog and the table -> Delta version map at lakehouse version ``version``."""

    version: int
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    tables: Mapping[str, TableEntry] = field(default_factory=dict)
    table_versions: Mapping[str, int] = field(default_factory=dict)
    timestamp_ms: int = 0

    def table_by_name(self, name: str) -> TableEntry | None:
        key = name.lower()
        return next((t for t in self.tables.values() if t.name.lower() == key), None)

    def table_names(self, namespace: str | None = None) -> list[str]:
        names = [t.name for t in self.tables.values()]
        if namespace is not None:
            names = [n for n in names if n.rsplit(".", 1)[0].lower() == namespace.lower()]
        return sorted(names)

    def has_namespace(self, name: str) -> bool:
        return name.lower() in {n.lower() for n in self.namespaces}

    def to_bytes(self) -> bytes:
        return _dumps(
            {
                "version": self.version,
                "namespaces": {k: dict(v) for k, v in self.namespaces.items()},
                "tables": [t.to_json() for t in self.tables.values()],
                "tableVersions": dict(self.table_versions),
                "timestamp": self.timestamp_ms,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, version: int | None = None) -> LakehouseState:
        try:
            d = json.loads(data)
            tables = [TableEntry.from_json(t) for t in d.get("tables") or ()]
            return cls(
                int(d["version"]),
                {k: dict(v) for k, v in (d.get("namespaces") or {}).items()},
                {t.id: t for t in tables},
                {k: int(v) for k, v in (d.get("tableVersions") or {}).items()},
                int(d.get("timestamp") or 0),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"global checkpoint {version} is corrupt: {exc}", version=version) from exc


def apply_catalog(state: LakehouseState, ops: Sequence[CatalogOp], version: int) -> LakehouseState:
    """The state after catalog operations (validated before claiming; applied blindly here)."""
    for op in ops:
        state = op.apply(state, version)
    return state


def apply(state: LakehouseState, record: GlobalRecord, outcome: Outcome) -> LakehouseState:
    """The lakehouse state at ``record.version`` given the state just before it (pure)."""
    if record.version != state.version + 1 or outcome.version != record.version:
        raise CorruptLogError(
            f"cannot apply global version {record.version} to state {state.version}", version=record.version
        )
    if outcome.txid != record.txid:
        raise CorruptLogError(
            f"the outcome of global version {record.version} names transaction {outcome.txid}, its record "
            f"{record.txid}: the log lost a record (run `txlake doctor`)",
            version=record.version,
        )
    if not outcome.committed:
        return replace(state, version=record.version)
    after = apply_catalog(state, record.catalog, record.version)
    versions = dict(after.table_versions)
    for table_id, delta_version in outcome.table_versions.items():
        if table_id in after.tables:
            versions[table_id] = delta_version
    return replace(after, version=record.version, table_versions=versions, timestamp_ms=outcome.timestamp_ms)
