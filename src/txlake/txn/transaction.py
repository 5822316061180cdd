"""Multi-statement, multi-table transactions: staged writes, snapshot reads at G0, validate-claim-publish."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import pyarrow as pa

from txlake.arguments import (
    choice_argument,
    columns_argument,
    mapping_argument,
    name_argument,
    size_argument,
    string_mapping_argument,
)
from txlake.ddl import parse_ddl_schema, parse_ddl_type
from txlake.delta.actions import Add, Metadata, now_ms
from txlake.delta.colmap import MAX_COLUMN_ID, mapped_added_columns, mapped_for_new_table
from txlake.delta.dv import unique_id
from txlake.delta.features import check_write_support, protocol_for_new_table, with_deletion_vectors
from txlake.delta.files import decode_path, deletion_vector_location, resolve_file
from txlake.delta.log import DeltaLog
from txlake.delta.renames import renamed_and_dropped
from txlake.delta.schema import conform, normalize_schema, schema_from_json, schema_to_json
from txlake.delta.snapshot import load_snapshot
from txlake.delta.state import Snapshot
from txlake.engine.arrow_dml import delete_rows, merge_rows, update_rows
from txlake.errors import (
    CommitStateUnknownError,
    ConcurrentTransactionError,
    ConflictError,
    DataFileNotFoundError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LeaseLostError,
    PredicateError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionClosedError,
    TxlakeError,
    UnsupportedFeatureError,
)
from txlake.expr import parse_expression
from txlake.lakehouse.log import LogView
from txlake.lakehouse.records import (
    ISOLATION_LEVELS,
    CatalogOp,
    CreateNamespace,
    CreateTable,
    DropNamespace,
    DropTable,
    Isolation,
    LakehouseState,
    RegisterTable,
    RenameTable,
    SetProperties,
    TableEntry,
    apply_catalog,
)
from txlake.storage import ObjectStore
from txlake.storage.store import delete_keys
from txlake.storage.uploads import Uploads
from txlake.txn.commit import Commit, CommitResult, Validation, joining_tables, pending_change, withdraw
from txlake.txn.conflicts import IsolationPolicy
from txlake.txn.engine import DataEngine, MergeSpec, ScanSpec, TableLocation, WriteSpec
from txlake.txn.intents import Concurrency, IntentQueue, check_concurrency, settled_view
from txlake.txn.lease import LeaseHandle, txn_dir
from txlake.txn.redo import changed_files, keepable
from txlake.txn.reservations import RESERVATION_WAIT, Reservation
from txlake.txn.staging import FileKey, TableWork, WorkMark
from txlake.txn.sublog import (
    StagedState,
    StatementForm,
    SublogHeader,
    SublogWriter,
    TableEffect,
    statement_form,
)
from txlake.typenames import spark_type_name
from txlake.variant import has_variant, unmarked

if TYPE_CHECKING:
    from txlake.txn.context import LakeContext

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME_LENGTH = 128
"""Longest namespace or table name part: the table's directory must fit a file name on every store."""
TxStatus = Literal["active", "committed", "aborted", "unknown"]
"""``unknown``: the commit raised :class:`CommitStateUnknownError` (it may still be rolled forward)."""
_log = logging.getLogger("txlake")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class _Statement:
    """A data statement as the application issued it, to re-execute on a newer snapshot (redo)."""

    method: str
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    replayable: bool = True
    """False for a resumed statement whose arguments are not in its sublog form (redo then raises)."""
    effect: TableEffect | None = None
    """What it did to its table's staged state (``None``: not known, as for a resumed statement: a redo then
    runs it again rather than keeping it)."""
    reads: tuple[FileKey, ...] = ()
    """The files it read (its candidates, its own earlier staged files included)."""


def _statement(method: F) -> F:
    """Record a successful data statement (append, overwrite, delete, update, merge) for redo."""

    @functools.wraps(method)
    def run(self: Transaction, name: str, *args: Any, **kwargs: Any) -> Any:
        self._uploads.check()  # an earlier statement's file failed to upload: the transaction cannot commit
        before = self._staged_paths(name)
        state = self._staged_state(name) if not self._replaying else None
        mark = self._mark(name)
        sent = self._uploads.sent
        try:
            result = method(self, name, *args, **kwargs)
        except Exception:
            self._roll_back(name, mark)  # a statement has all its effect or none
            self._delete_sent_since(sent)  # (files it sent but had not staged when it failed)
            raise
        if not self._replaying:
            entry = self._view.table_by_name(name) if isinstance(name, str) else None
            if entry is not None:
                effect, reads = self._effect_since(entry, state)
                statement = _Statement(method.__name__, name, args, kwargs, effect=effect, reads=reads)
                self._statements.setdefault(entry.id, []).append(statement)
                self._log_statement(method.__name__, name, entry.id, args, kwargs, before)
        return result

    return cast(F, run)


DmlEngine = Literal["auto", "arrow", "spark"]
"""Where UPDATE/DELETE run: the data engine when the lakehouse has one (``auto``), Arrow, or the data engine."""


def split_name(name: str) -> tuple[str, str]:
    """``namespace.table`` -> (namespace, table); nested namespaces ``a.b.t`` are allowed."""
    if not isinstance(name, str):
        raise InvalidArgumentTypeError(
            f"name must be a string such as 'namespace.table', got {type(name).__name__} {name!r}", argument="name"
        )
    parts = name.split(".")
    if len(parts) < 2 or not all(_NAME.fullmatch(p) for p in parts):
        raise InvalidArgumentError(
            f"table names look like 'namespace.table' (letters, digits, _), got {name!r}", argument="name"
        )
    _check_lengths(name, parts)
    return ".".join(parts[:-1]), parts[-1]


def _check_new_name(name: str, parts: Sequence[str]) -> None:
    """A new table or namespace: no part may start with ``_`` (its directory would look like txlake's own
    ``_txlake/`` or a Delta ``_delta_log/``, which readers and vacuum treat as not data)."""
    hidden = [p for p in parts if p.startswith("_")]
    if hidden:
        raise InvalidArgumentError(
            f"a new table or namespace name may not start with '_' ({hidden[0]!r} in {name!r}): txlake and Delta "
            "keep such directory names for themselves",
            argument="name",
        )


def _check_lengths(name: str, parts: Sequence[str]) -> None:
    long = [p for p in parts if len(p) > MAX_NAME_LENGTH]
    if long:
        raise InvalidArgumentError(
            f"each part of a name has at most {MAX_NAME_LENGTH} characters; {name[:40]!r}... has one of {len(long[0])}"
        )


class Transaction:
    """A multi-statement, multi-table transaction at one isolation level.

    Every table is read at the Delta version the lakehouse state at the start version ``read_version``
    maps it to, plus this transaction's own staged writes. Use it as a context manager: the block
    commits when it succeeds and aborts when it raises. A transaction cannot be reused.
    """

    def __init__(
        self,
        ctx: LakeContext,
        isolation: Isolation = "serializable",
        *,
        redo: bool = True,
        concurrency: Concurrency = "optimistic",
        resumable: bool = False,
    ) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise InvalidArgumentError(
                f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}", argument="isolation"
            )
        if not isinstance(redo, bool):
            raise InvalidArgumentTypeError(f"redo must be True or False, got {redo!r}", argument="redo")
        if not isinstance(resumable, bool):
            raise InvalidArgumentTypeError(f"resumable must be True or False, got {resumable!r}", argument="resumable")
        # redo: on a data conflict, re-execute the conflicting tables' statements on the newer snapshot instead
        # of failing, unless the application read data in this transaction (it may have used what it read)
        self._redo = redo
        self._replaying = False
        self._statements: dict[str, list[_Statement]] = {}
        self._read_data = False
        self._redone = 0
        # reservations this transaction holds (txn/reservations.py), by table id; posted after repeated redos
        self._reserved: dict[str, Reservation] = {}
        self._reservation_wait = RESERVATION_WAIT  # left to wait for others' reservations
        self._waited_out: set[str] = set()  # reservations waited for the longest we wait
        self._ctx = ctx
        self.isolation: Isolation = isolation
        # a pessimistic transaction reads each table at the version it acquired it at, later ones at newer
        # versions: its reads (queries included) are validated as serializable, so that an optimistic writer
        # that ignored its markers cannot make it read two tables at inconsistent versions (read skew)
        self._policy = IsolationPolicy("serializable" if concurrency == "pessimistic" else isolation)
        self.txid = uuid.uuid4().hex
        self._start_view: LogView = ctx.glog.view()
        self._started = time.monotonic()
        self._started_wall = time.time()  # the monotonic clock stops while the machine sleeps; this one does not
        self._start: LakehouseState = self._start_view.decided
        self._view: LakehouseState = self._start
        self._ops: list[CatalogOp] = []
        self._work: dict[str, TableWork] = {}
        # data files go out in the background while the next statement runs (storage/uploads.py); waited for
        # before anything may name them (sublog, intent, claim, a Spark job) and before any is deleted
        self._uploads = Uploads(ctx.uploads)
        self._pid = os.getpid()  # the process that owns what this transaction stages (not a forked child)
        self._adopt: set[str] = set()
        self._unadopted: set[str] = set()  # tables whose unadopted plain-writer commits this one conflicted with
        self._claimed: int | None = None  # the global version this transaction claimed (or may have claimed)
        # the oldest lakehouse version whose data files this transaction re-adds (restore, clone): vacuum may
        # delete them if it recorded a higher horizon, so the commit checks after claiming (see Commit._after_claim)
        self._borrows_from: int | None = None
        self._probed: dict[str, tuple[int, int]] = {}  # table -> (mapped version probed at, newest Delta version)
        # catalog reads (serializable validates them): names looked up, namespaces probed, listings taken
        self._read_names: set[str] = set()
        self._read_namespaces: set[str] = set()
        self._read_listings: set[str | None] = set()
        self._status: TxStatus = "active"
        self.result: CommitResult | None = None
        # held once other clients must tell this transaction alive from dead (txn/lease.py): renewed by the
        # lakehouse's heartbeat until the transaction ends; checked before every claim (Commit._check_age)
        self._lease: LeaseHandle | None = None
        # pessimistic mode (txn/intents.py): an intent marker on every table before it is first read or written
        self.concurrency: Concurrency = check_concurrency(concurrency)
        self._intents = (
            IntentQueue(ctx.store, self.txid, self._hold_lease, timeout=ctx.commit_timeout)
            if concurrency == "pessimistic"
            else None
        )
        # the sublog (txn/sublog.py): written after every statement when resumable, else only once this
        # transaction is long or holds a lease; nothing for a short one
        self._sublog = SublogWriter(
            ctx.store,
            SublogHeader(
                self.txid, isolation, self.read_version, redo, int(self._started_wall * 1000), ctx.heartbeat.owner
            ),
            synchronous=resumable,
        )

    # ------------------------------------------------------------------------------------ lifecycle

    @property
    def read_version(self) -> int:
        return self._start.version

    @property
    def status(self) -> TxStatus:
        return self._status

    def __enter__(self) -> Transaction:
        self._ensure_active()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._status != "active":
            return
        if exc_type is None:
            self.commit()
        elif issubclass(exc_type, Exception):
            self.abort()
        else:
            self._uploads.settle()  # (none lands after we are gone)
            if self._intents is not None and self._lease is not None:
                # an interrupt: leave the markers as a crash would, but stop renewing the lease, so that they
                # expire with it even if this process goes on
                self._ctx.heartbeat.release(self._lease, delete=False)
        # BaseException (KeyboardInterrupt, a simulated crash): leave everything as a crash would

    def _hold_lease(self, **info: Any) -> LeaseHandle:
        """This transaction's lease: put on first call (with ``info`` for readers), renewed until it ends."""
        if self._lease is None:
            self._lease = self._ctx.heartbeat.hold(self.txid, info={"isolation": self.isolation, **info})
        elif info:
            self._lease.update_info(self._ctx.store, **info)
        return self._lease

    def _release_lease(self) -> None:
        """Stop renewing the lease and delete it (the transaction ended: committed, aborted, or unknown and
        left to roll-forward, which does not need it). The sublog goes first, unless the outcome is unknown
        (its claim markers then tell ``resume``/``recover`` which version to look at); then the intent markers:
        a marker never outlives its lease."""
        withdraw(self)
        if self._sublog.active and self._status in ("committed", "aborted") and self._owns_files():
            # (taken over: the sublog is the new holder's now, and so are the files it names)
            with contextlib.suppress(TxlakeError):
                self._sublog.delete()  # left behind, recover deletes it (no claim of it, or a decided one)
        released = True
        if self._intents is not None:
            try:
                self._intents.release()
            except TxlakeError:  # a marker left behind: keep the lease object, so that the marker expires with it
                released = False
        if self._lease is not None:
            with contextlib.suppress(TxlakeError):
                self._ctx.heartbeat.release(self._lease, delete=released)
        if self._sublog.active or self._lease is not None:
            self._ctx.store.remove_empty_dir(txn_dir(self.txid))  # (local: deleting the objects left it)
        self._uploads.drop_held()  # a transaction kept around (a variable, a traceback) keeps no data

    def _ensure_active(self) -> None:
        if self._status != "active":
            raise TransactionClosedError(f"transaction {self.txid} is already {self._status}")

    def abort(self) -> None:
        """Discard everything staged; data files written so far are deleted (nothing was published).

        A transaction interrupted (``KeyboardInterrupt``) after it claimed a version cannot be aborted any
        more: its claim is decidable, so it is left for roll-forward (status ``unknown``), nothing deleted.
        """
        self._ensure_active()
        if self._claimed is not None:
            self._status = "unknown"
        else:
            self._status = "aborted"
            self._discard()
        self._release_lease()

    def _discard(self) -> None:
        if self._claimed is not None:  # a claimed version may be published by anyone: keep its files
            return
        for work in self._work.values():
            try:
                work.discard()
            except TxlakeError:
                continue  # left as an orphan for vacuum: its txid names it

    # ---------------------------------------------------------------------------------------- catalog

    def _entry(self, name: str) -> TableEntry:
        if not isinstance(name, str):
            raise InvalidArgumentTypeError(
                f"name must be a string such as 'namespace.table', got {type(name).__name__} {name!r}",
                argument="name",
            )
        self._read_names.add(name.lower())
        entry = self._view.table_by_name(name)
        if entry is None:
            raise TableNotFoundError(f"no table {name!r} at lakehouse version {self.read_version}", table=name)
        return entry

    def _table(self, name: str) -> TableWork:
        self._ensure_active()
        entry = self._entry(name)
        work = self._work.get(entry.id)
        if work is None:
            snapshot: Snapshot | None = None
            if entry.id in self._start.tables:
                version = self._start.table_versions[entry.id]
                if self._intents is not None:
                    version = self._acquire(entry)
                snapshot = self._ctx.snapshots.get(entry, version)
            elif entry.id in joining_tables(self._ops):  # an existing Delta table joining the catalog here
                snapshot = self._ctx.snapshots.get(entry, self._view.table_versions[entry.id])
            work = TableWork(
                entry, snapshot, self._ctx.store, self.txid, owns_files=self._owns_files, uploads=self._uploads
            )
            self._work[entry.id] = work
        return work

    def _acquire(self, entry: TableEntry) -> int:
        """Pessimistic mode: hold the table's intent marker (waiting for those ahead), then the Delta version to
        read it at: the newest decided one, which holds what the earlier holders committed. The tables touched
        before are checked up to that version as under serializable, so everything this transaction read
        still reads the same there (docs/protocol.md, "Pessimistic mode")."""
        assert self._intents is not None
        self._intents.acquire(entry.id, entry.name)
        view = settled_view(self._ctx, [*self._intents.held])
        decided = view.decided
        if entry.id not in decided.tables:
            raise ConcurrentTransactionError(
                f"table {entry.name!r} was dropped by a concurrent commit",
                table=entry.name,
                read_version=self.read_version,
                winning_version=decided.version,
            )
        self._recheck(decided)
        if decided.version >= self._start_view.decided.version:
            self._start_view = view  # a commit reusing its view must not validate against claims we read
        return decided.table_versions[entry.id]

    def _recheck(self, decided: LakehouseState) -> None:
        """Pessimistic mode: everything this transaction touched still reads the same at ``decided`` (checked as
        under serializable); else the :class:`ConflictError` of the commit that changed it."""
        validation = Validation(self)
        for tid, work in self._work.items():
            mapped = decided.table_versions.get(tid, -1)
            if work.snapshot is not None and mapped > work.base_version:
                versions = list(range(work.base_version + 1, mapped + 1))
                validation.check_commits(work, pending_change(work), versions, mapped, isolation="serializable")

    def _writable(self, name: str) -> TableWork:
        """``name`` for a write, before anything is written: :class:`UnsupportedFeatureError` if its protocol has
        a feature txlake does not honour when writing (CHECK constraints, row tracking, ...)."""
        work = self._table(name)
        if work.snapshot is not None:
            check_write_support(work.snapshot.protocol, work.snapshot.metadata, table=work.entry.name)
        return work

    def _catalog(self, op: CatalogOp) -> None:
        self._ops.append(op)
        self._view = apply_catalog(self._view, [op], self._view.version)

    def create_namespace(
        self, name: str, properties: Mapping[str, str] | None = None, *, if_not_exists: bool = False
    ) -> None:
        self._ensure_active()
        if not all(_NAME.fullmatch(p) for p in name.split(".")):
            raise InvalidArgumentError(f"invalid namespace name {name!r}", argument="name")
        _check_lengths(name, name.split("."))
        self._read_namespaces.add(name.lower())
        if self._view.has_namespace(name):
            if if_not_exists:
                return
            raise TableAlreadyExistsError(f"namespace {name!r} already exists", table=name)
        _check_new_name(name, name.split("."))
        self._catalog(CreateNamespace(name, properties=dict(properties or {})))

    def drop_namespace(self, name: str) -> None:
        self._ensure_active()
        self._read_namespaces.add(name.lower())
        self._read_listings.add(name.lower())
        if not self._view.has_namespace(name):
            raise TableNotFoundError(f"no namespace {name!r}", table=name)
        if self._view.table_names(name):
            raise InvalidArgumentError(f"namespace {name!r} is not empty", argument="name")
        # names are case-insensitive; the record names it as it was created (replay matches the exact name)
        self._catalog(DropNamespace(next(n for n in self._view.namespaces if n.lower() == name.lower())))

    def create_table(
        self,
        name: str,
        schema: pa.Schema | object,
        *,
        partition_by: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        description: str | None = None,
        if_not_exists: bool = False,
    ) -> None:
        """Create a table (visible to this transaction at once, to others when it commits).

        Of the ``delta.*`` ``properties`` only those txlake honours are accepted (:data:`CREATE_DELTA_PROPERTIES`);
        others raise :class:`UnsupportedFeatureError`, as ``alter_table`` does.
        """
        self._ensure_active()
        if properties is not None:
            properties = string_mapping_argument(properties, "properties")
            refuse_unhonoured_properties(properties, CREATE_DELTA_PROPERTIES, table=name)
        self._create_table(
            name,
            schema,
            partition_by=partition_by,
            properties=properties,
            description=description,
            if_not_exists=if_not_exists,
        )

    def _create_table(
        self,
        name: str,
        schema: pa.Schema | object,
        *,
        partition_by: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        description: str | None = None,
        if_not_exists: bool = False,
    ) -> None:
        """:meth:`create_table` without the property check (a clone copies a table txlake can write as it is)."""
        self._ensure_active()
        namespace, short = split_name(name)
        if properties is not None:
            properties = string_mapping_argument(properties, "properties")
        if description is not None and not isinstance(description, str):
            raise InvalidArgumentTypeError(
                f"description must be a string, got {type(description).__name__}", argument="description"
            )
        if isinstance(schema, str):  # Spark DDL: "id long NOT NULL, v string"
            schema = parse_ddl_schema(schema)
        if not isinstance(schema, pa.Schema):
            converted = self._ctx.engine.arrow_schema(schema, table=name) if self._ctx.engine is not None else None
            if converted is None:
                raise InvalidArgumentTypeError(
                    "schema must be a pyarrow.Schema, a Spark StructType or a Spark DDL string, "
                    f"got {type(schema).__name__}",
                    argument="schema",
                )
            schema = converted
        if len(schema) == 0:
            raise InvalidArgumentError(f"table {name!r} needs at least one column", argument="schema")
        try:
            schema, configuration = mapped_for_new_table(schema, properties)
        except UnsupportedFeatureError as exc:
            raise UnsupportedFeatureError(str(exc), table=name, feature=exc.feature) from exc
        self._read_names.add(name.lower())
        self._read_namespaces.add(namespace.lower())
        if self._view.table_by_name(name) is not None:
            if if_not_exists:
                return
            raise TableAlreadyExistsError(f"table {name!r} already exists", table=name)
        _check_new_name(name, name.split("."))
        self._ensure_namespace(namespace)
        partition_by = list(columns_argument(partition_by, "partition_by") or [])
        missing = [c for c in partition_by if c not in schema.names]
        if missing:
            raise SchemaMismatchError(f"partition columns not in schema: {missing}", table=name, columns=missing)
        if partition_by and set(partition_by) >= set(schema.names):  # as Spark: rows need a column in the files
            raise InvalidArgumentError(
                f"table {name!r} needs at least one column outside its partition columns", argument="partition_by"
            )
        table_id = str(uuid.uuid4())
        path = self._ctx.table_path(namespace, short, table_id, taken=[t.path for t in self._view.tables.values()])
        metadata = Metadata.new(
            schema_to_json(schema), partition_by, configuration, name=short, description=description, table_id=table_id
        )
        stored = {k: configuration.get(k, v) for k, v in (properties or {}).items()}  # (a normalized mapping mode)
        self._catalog(CreateTable(name, table_id=table_id, path=path, properties=stored))
        entry = self._entry(name)
        self._work[table_id] = TableWork(
            entry,
            None,
            self._ctx.store,
            self.txid,
            owns_files=self._owns_files,
            uploads=self._uploads,
            created_metadata=metadata,
            created_protocol=with_deletion_vectors(
                protocol_for_new_table(metadata.schema_string, metadata.configuration), metadata.configuration
            ),
        )

    def register_table(self, name: str, location: str) -> int:
        """Make the Delta table at ``location`` (a path below the lakehouse root, or a URI inside it) table
        ``name`` of the catalog, at its current Delta version, without copying anything; returns that version.

        Its Delta table id (``metaData.id``) becomes the catalog id, so the same table cannot be registered
        twice. From then on it is a lakehouse table like any other: plain writers' later commits are adopted
        as usual. A location outside the lakehouse root is refused (:class:`InvalidArgumentError`): open the
        lakehouse at a directory that holds the table (a lakehouse adds only ``_txlake/`` there).
        """
        self._ensure_active()
        namespace, _ = split_name(name)
        path = self._ctx.relative_location(location)
        snapshot = load_snapshot(DeltaLog(self._ctx.store, path, name=name))
        self._read_names.add(name.lower())
        self._read_namespaces.add(namespace.lower())
        if self._view.table_by_name(name) is not None:
            raise TableAlreadyExistsError(f"table {name!r} already exists", table=name)
        known = self._view.tables.get(snapshot.metadata.id)
        if known is not None:
            raise TableAlreadyExistsError(
                f"the Delta table at {location} is in the lakehouse already, as {known.name!r}", table=known.name
            )
        taken = next((t for t in self._view.tables.values() if t.path.strip("/") == path), None)
        if taken is not None:
            raise TableAlreadyExistsError(f"{location} is the location of table {taken.name!r}", table=taken.name)
        self._ensure_namespace(namespace)
        self._catalog(RegisterTable(name, table_id=snapshot.metadata.id, path=path, version=snapshot.version))
        return snapshot.version

    def clone_table(self, source: str, target: str) -> int:
        """Create ``target`` as a zero-copy clone of ``source`` as this transaction sees it; returns its files.

        The clone is a new plain Delta table (same schema, partitioning, properties and protocol) whose log names
        ``source``'s data files by absolute URI: nothing is copied, and from then on the two evolve independently
        (writes to either never touch the other; txlake never deletes a file it did not write). Reading
        ``source`` is a query read (``serializable`` validates it). A table with changes in this transaction
        cannot be cloned in it (its new files are not published yet).
        """
        work = self._table(source)
        if work.writes:
            raise InvalidArgumentError(
                f"table {work.entry.name!r} has changes in this transaction: clone it after they commit",
                argument="source",
            )
        assert work.snapshot is not None
        self._borrow(self.read_version)
        return self._clone(work.entry, work.snapshot, work.plan_query(None), target)

    def _borrow(self, version: int) -> None:
        """Note that this transaction re-adds data files of lakehouse ``version`` (see
        :meth:`~txlake.txn.commit.Commit._after_claim`)."""
        self._borrows_from = version if self._borrows_from is None else min(self._borrows_from, version)

    def _clone(self, entry: TableEntry, snapshot: Snapshot, files: Sequence[Add], target: str) -> int:
        """Create ``target`` with ``snapshot``'s metadata and protocol and ``files`` (of ``entry``) as its data."""
        check_write_support(snapshot.protocol, snapshot.metadata, table=entry.name)
        with_dv = [a.path for a in files if a.deletion_vector is not None]
        if with_dv:
            raise UnsupportedFeatureError(
                f"{entry.name} has files with deletion vectors ({with_dv[0]}, ...): cloning them is not supported",
                table=entry.name,
                feature="deletionVectors",
            )
        meta = snapshot.metadata
        self._create_table(
            target,
            schema_from_json(meta.schema_string),
            partition_by=meta.partition_columns,
            properties=dict(meta.configuration),
            description=meta.description,
        )
        clone = self._work[self._entry(target).id]
        clone.created_metadata = dataclasses.replace(
            meta, id=clone.metadata.id, name=clone.metadata.name, created_time=now_ms()
        )
        clone.created_protocol = snapshot.protocol
        store = self._ctx.store
        adds = [
            dataclasses.replace(
                add,
                path=add.path if "://" in add.path else store.public_url(f"{entry.path}/{decode_path(add.path)}"),
                data_change=True,
            )
            for add in files
        ]
        clone.stage_adds(adds, "CLONE")
        return len(adds)

    def optimize(
        self,
        name: str,
        where: str | None = None,
        *,
        target_file_size: int | str = "128MB",
        zorder_by: Sequence[str] | None = None,
        engine: DmlEngine = "auto",
    ) -> OptimizeMetrics:
        """Compact ``name``'s small files (in the partitions ``where`` selects) into files of about
        ``target_file_size`` (bytes, or a text such as ``"128MB"``); with ``zorder_by``, also cluster each
        partition's rows along a Z-order curve of those columns. Rows do not change (``dataChange=false``):
        concurrent appends never conflict with it; a concurrent removal of a compacted file does.

        With a data engine (``connect(..., spark=)``) the files are read and written by a Spark job;
        ``engine="arrow"`` compacts in this process instead, ``engine="spark"`` requires Spark.
        """
        target = size_argument(target_file_size, "target_file_size")
        work = self._writable(name)
        zorder = work.zorder_columns(list(columns_argument(zorder_by) or []))
        data_engine = self._dml_engine(engine)
        if data_engine is None:
            removed, added, size = work.compact(where, target, zorder)
            return OptimizeMetrics(removed, added, size)
        bins = work.plan_compaction(where, target, zorder)
        rewritten = [a for bin_ in bins for a in bin_]
        if not rewritten:
            return OptimizeMetrics(0, 0, 0)
        location = self._location(work)
        written = data_engine.compact(
            ScanSpec(location, tuple(rewritten)), WriteSpec(location, self.txid), files=len(bins), zorder_by=zorder
        )
        try:
            counts = [a.live_records for a in rewritten]  # (rows a deletion vector deletes are not read)
            expected = None if None in counts else sum(n or 0 for n in counts)
            if expected is not None and expected != written.num_rows:
                raise TxlakeError(
                    f"optimize of {work.entry.name}: the engine wrote {written.num_rows} rows, the "
                    f"{len(rewritten)} compacted files hold {expected}"
                )
            removed, added, size = work.stage_compaction(rewritten, written.adds)
        except BaseException:
            work.delete_unstaged(written.adds)
            raise
        return OptimizeMetrics(removed, added, size)

    def alter_table(
        self,
        name: str,
        *,
        add_columns: pa.Schema | str | None = None,
        set_properties: Mapping[str, str] | None = None,
        widen: Mapping[str, pa.DataType | str] | None = None,
        rename_columns: Mapping[str, str] | None = None,
        drop_columns: Sequence[str] | None = None,
    ) -> None:
        """Change a table's schema or properties, as part of this transaction.

        ``add_columns``: new nullable columns (a ``pyarrow.Schema`` or Spark DDL such as ``"note string"``),
        appended to the schema; files written before read them as NULL. ``set_properties``: table properties
        (the Delta configuration and the catalog entry); of the ``delta.*`` ones only those txlake honours
        (:data:`ALTERABLE_DELTA_PROPERTIES`). Plain readers see an ordinary Delta metadata change. A concurrent
        commit that writes the table conflicts with it (:class:`MetadataChangedError`), either way round.

        ``widen``: columns to a wider type (``{"qty": "bigint"}``; a ``pyarrow.DataType`` or a Spark type name):
        integers to larger integers, ``tinyint``/``smallint``/``int`` to double (not ``bigint``: a double does not
        hold every one), float to double, decimals to more digits. Every data file is
        rewritten with the new type in this transaction (no Delta type-widening feature: every plain reader reads
        the table), so it costs a rewrite of the table and reads all of it.

        ``rename_columns`` (``{"old": "new"}``, ``{"s.a": "b"}``) and ``drop_columns`` (``["col", "s.c"]``):
        columns and fields inside structs, named by paths as in Spark SQL (backticks quote a name holding a dot:
        ```a.b`.c``; :mod:`txlake.delta.renames`); a new name is one field name, the field stays where it is.
        Partition columns may be renamed, not dropped. Only on tables that map columns
        (``delta.columnMapping.mode`` ``name`` or ``id``, set when the table is created): only the metadata
        changes, data files keep the columns under their physical names. Other tables refuse them
        (:class:`UnsupportedFeatureError`, ``feature="columnMapping"``).
        """
        work = self._writable(name)
        if add_columns is None and not set_properties and not widen and not rename_columns and not drop_columns:
            raise InvalidArgumentError(
                "alter_table needs add_columns=, set_properties=, widen=, rename_columns= or drop_columns=",
                argument="add_columns",
            )
        meta = work.metadata
        schema = work.schema
        configuration = dict(meta.configuration)
        partition_columns = list(meta.partition_columns)
        operations: list[str] = []
        if rename_columns or drop_columns:
            if widen:
                raise InvalidArgumentError(
                    "widen= rewrites the table's files: it cannot come with rename_columns= or drop_columns= in one "
                    "alter_table",
                    argument="widen",
                )
            schema, partition_columns, configuration = renamed_and_dropped(
                work.entry.name,
                schema,
                partition_columns,
                configuration,
                mapping_argument(rename_columns or {}, "rename_columns"),
                list(columns_argument(drop_columns, "drop_columns") or []),
            )
            operations.extend(
                op for op, given in (("RENAME COLUMN", rename_columns), ("DROP COLUMNS", drop_columns)) if given
            )
        if widen:
            schema = _widened(work.entry.name, schema, mapping_argument(widen, "widen", of="types"), work)
            operations.append("CHANGE COLUMN TYPE")
        if add_columns is not None:
            new = parse_ddl_schema(add_columns) if isinstance(add_columns, str) else add_columns
            if not isinstance(new, pa.Schema):
                raise InvalidArgumentTypeError(
                    f"add_columns must be a pyarrow.Schema or Spark DDL, got {type(add_columns).__name__}",
                    argument="add_columns",
                )
            existing = {n.lower() for n in schema.names}
            taken = [f.name for f in new if f.name.lower() in existing]
            if taken or len({n.lower() for n in new.names}) != len(new):
                raise SchemaMismatchError(
                    f"{work.entry.name} already has column(s) {', '.join(taken) or 'named twice'}",
                    table=work.entry.name,
                    columns=taken,
                )
            required = [f.name for f in new if not f.nullable]
            if required:
                raise InvalidArgumentError(
                    f"added columns must be nullable (rows written before have none): {', '.join(required)}",
                    argument="add_columns",
                )
            added, configuration = mapped_added_columns(new, configuration, schema)
            schema = pa.schema([*schema, *added])
            operations.append("ADD COLUMNS")
        if set_properties:
            properties = string_mapping_argument(set_properties, "set_properties")
            refuse_unhonoured_properties(properties, ALTERABLE_DELTA_PROPERTIES, table=work.entry.name)
            configuration.update(properties)
            self._catalog(SetProperties(work.entry.name, table_id=work.entry.id, properties=dict(properties)))
            operations.append("SET TBLPROPERTIES")
        new_meta = dataclasses.replace(
            meta,
            schema_string=schema_to_json(schema),
            configuration=configuration,
            partition_columns=tuple(partition_columns),
        )
        protocol = work.created_protocol or (work.snapshot.protocol if work.snapshot is not None else None)
        assert protocol is not None  # a table either exists (snapshot) or was created here
        needed = set(protocol_for_new_table(new_meta.schema_string).writer_features or ())
        if needed - set(protocol.writer_features or ()):
            raise UnsupportedFeatureError(
                f"the new columns of {work.entry.name} need Delta feature(s) {', '.join(sorted(needed))}, which the "
                "table's protocol lacks (txlake does not upgrade protocols)",
                table=work.entry.name,
                feature=sorted(needed)[0],
            )
        check_write_support(protocol, new_meta, table=work.entry.name)
        old_schema = work.schema
        work.change_metadata(new_meta, " + ".join(operations))
        if widen and work.snapshot is not None:  # every file again, with the wider types
            cast_to = work.schema

            def rewrite(rows: pa.Table, _: object) -> tuple[pa.Table, int]:
                columns = [
                    rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                    for f in cast_to
                ]  # columns added in the same alter come as nulls
                return pa.Table.from_arrays(columns, schema=cast_to), max(rows.num_rows, 1)

            work.rewrite_as(old_schema, rewrite)

    def _free_names(self, entries: Sequence[TableEntry]) -> None:
        """Before restoring ``entries``' names: move every one of them that is named otherwise now to a
        temporary name, so that names swapped since (x and y renamed into each other) can all come back."""
        for i, then in enumerate(entries):
            now = self._view.tables.get(then.id)
            if now is not None and now.name.lower() != then.name.lower():
                namespace, _ = split_name(now.name)
                self.rename_table(now.name, f"{namespace}.txlake_restore_{self.txid[:12]}_{i}")

    def _restore_table(self, then: TableEntry, delta: Snapshot) -> tuple[int, int]:
        """Bring table ``then`` (its catalog entry at an earlier version, where its Delta state was ``delta``)
        back: its name, then its files. Returns the numbers of files removed and added back."""
        now = self._view.tables.get(then.id)
        if now is None:  # dropped since: it joins the catalog again, at the newest version of its own log
            self._rejoin(then)
            now = self._view.tables[then.id]
        if now.name.lower() != then.name.lower():
            holder = self._view.table_by_name(then.name)
            if holder is not None and holder.id != then.id:
                raise InvalidArgumentError(
                    f"table {then.name!r} of then is named otherwise now, and another table holds its name: restore "
                    f"that table too (its name of then frees this one), or rename it first",
                    argument="tables",
                )
            self.rename_table(now.name, then.name)
        seen = self._table(then.name)
        current = seen.metadata
        restored = dataclasses.replace(
            delta.metadata, id=current.id, configuration=_kept_max_column_id(delta.metadata, current)
        )
        altered = (current.schema_string, current.partition_columns, dict(current.configuration)) != (
            restored.schema_string,
            restored.partition_columns,
            dict(restored.configuration),
        )
        then_files = {path: unique_id(add.deletion_vector) for path, add in delta.files.items()}
        if not altered and {a.path: unique_id(a.deletion_vector) for a in seen.live_files()} == then_files:
            # as it was then: nothing to write (so a table txlake only reads may be part of a restore); its
            # files are a read of the restore, so a concurrent change of the table conflicts with it
            seen.plan_query(None)
            return 0, 0
        work = self._writable(then.name)
        if altered:  # altered since: its metadata of then comes back with its files (a metadata change, like an alter)
            check_write_support(work.snapshot.protocol if work.snapshot else delta.protocol, restored)
            work.change_metadata(restored, "RESTORE METADATA")
            changed = {k: v for k, v in then.properties.items() if work.entry.properties.get(k) != v}
            if changed:
                self._catalog(SetProperties(then.name, table_id=then.id, properties=changed))
        live = {a.path: unique_id(a.deletion_vector) for a in work.live_files()}
        missing = [
            add.path
            for path, add in delta.files.items()
            if path not in live and not _exists(self._ctx.store, work.entry.path, add)
        ]
        if missing:
            raise DataFileNotFoundError(
                f"{len(missing)} data file(s) of {then.name!r} at that version are gone ({missing[0]}, ...)",
                table=then.name,
                path=missing[0],
            )
        dvs: dict[str, ObjectStore] = {}  # the DV files restored files need that no live file uses (inline: none)
        for path, add in delta.files.items():
            dv = add.deletion_vector
            if dv is not None and not dv.is_inline and live.get(path, "") != unique_id(dv):
                dv_store, key = deletion_vector_location(self._ctx.store, work.entry.path, dv)
                dvs[key] = dv_store
        gone = sorted(key for key, dv_store in dvs.items() if not dv_store.exists(key))
        if gone:
            raise DataFileNotFoundError(
                f"{len(gone)} deletion vector file(s) of {then.name!r} at that version are gone ({gone[0]}, ...)",
                table=then.name,
                path=gone[0],
            )
        return work.restore(delta.files)

    def _rejoin(self, then: TableEntry) -> None:
        """Bring dropped table ``then`` back into the catalog under its old name, id and location."""
        if self._view.table_by_name(then.name) is not None:
            raise InvalidArgumentError(
                f"table {then.name!r} was dropped since and its name is taken now: restore the other table's name "
                f"first, or clone it instead (`txlake clone {then.name} NEW_NAME --version G`)",
                argument="tables",
            )
        try:
            latest = load_snapshot(DeltaLog(self._ctx.store, then.path, name=then.name))
        except TxlakeError as exc:
            raise DataFileNotFoundError(
                f"table {then.name!r} was dropped since and its Delta log is gone (vacuumed?): {exc}",
                table=then.name,
            ) from exc
        namespace, _ = split_name(then.name)
        self._ensure_namespace(namespace)
        self._catalog(
            RegisterTable(
                then.name, table_id=then.id, path=then.path, properties=dict(then.properties), version=latest.version
            )
        )
        self._ctx.snapshots.put(then.id, latest)

    def drop_table(self, name: str) -> None:
        """Remove the table from the catalog (its files stay until vacuum; time travel still sees it)."""
        entry = self._entry(name)
        self._ensure_active()
        work = self._work.pop(entry.id, None)
        if work is not None:
            work.discard()
        self._catalog(DropTable(entry.name, table_id=entry.id))

    def rename_table(self, name: str, new_name: str) -> None:
        entry = self._entry(name)
        self._ensure_active()
        namespace, _ = split_name(new_name)
        self._read_names.add(new_name.lower())
        self._read_namespaces.add(namespace.lower())
        if self._view.table_by_name(new_name) is not None:
            raise TableAlreadyExistsError(f"table {new_name!r} already exists", table=new_name)
        self._ensure_namespace(namespace)
        self._catalog(RenameTable(entry.name, table_id=entry.id, new_name=new_name))

    def tables(self, namespace: str | None = None) -> list[str]:
        """Table names this transaction sees (a catalog read: serializable validates it at commit)."""
        self._ensure_active()
        if namespace is not None:
            name_argument(namespace, "namespace", example="'bank'")
        self._read_listings.add(namespace.lower() if namespace is not None else None)
        return self._view.table_names(namespace)

    def table_exists(self, name: str) -> bool:
        """Whether this transaction sees a table ``name`` (a catalog read, like :meth:`tables`)."""
        self._ensure_active()
        name_argument(name)
        self._read_names.add(name.lower())
        return self._view.table_by_name(name) is not None

    def table_location(self, name: str) -> str:
        """The URI of the Delta table behind ``name`` as this transaction sees the catalog (see
        :meth:`Lakehouse.table_location`)."""
        self._ensure_active()
        return self._ctx.store.public_url(self._entry(name).path)

    # ------------------------------------------------------------------------------------------ reads

    def read_arrow(self, name: str, where: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows of ``name`` matching ``where`` as this transaction sees them (its snapshot + own writes).

        The application may use what it read in later statements, so after a read a conflict is never resolved
        by redo: it is raised (``lake.run`` then runs the whole function again).
        """
        self._read_data = True
        data = self._table(name).scan(where, columns)
        self._log_read()
        return data

    def read(self, name: str, where: str | None = None, columns: Sequence[str] | None = None) -> Any:
        """Rows of ``name`` matching ``where`` (Spark SQL) as a Spark DataFrame over this transaction's view.

        The files it covers are fixed now (snapshot + own staged writes, pruned by ``where``) and recorded as a
        query read like :meth:`read_arrow`. Evaluate the DataFrame before a later statement of this transaction
        rewrites those files (or cache it).
        """
        engine = self._ctx.require_engine()
        work = self._table(name)
        self._read_data = True  # (as read_arrow: no redo after a read)
        files = work.plan_query(engine.pruning_predicate(where, work.schema), columns)
        self._log_read()
        return engine.read(ScanSpec(self._location(work), tuple(files)), where=where, columns=columns)

    def schema(self, name: str) -> pa.Schema:
        return self._table(name).schema

    # ----------------------------------------------------------------------------------------- writes

    def _location(self, work: TableWork) -> TableLocation:
        """Where the data engine finds ``work``'s table; the files this transaction staged are all uploaded (its
        jobs may read them)."""
        self._uploads.flush()
        return TableLocation.of(self._ctx.store, work.entry, work.metadata)

    def _engine_for(self, data: object) -> DataEngine:
        engine = self._ctx.engine
        if engine is None or not engine.accepts(data):
            raise InvalidArgumentTypeError(
                f"data must be a pyarrow.Table or a Spark DataFrame, got {type(data).__name__}", argument="data"
            )
        return engine

    @_statement
    def append(self, name: str, data: pa.Table | Any, *, schema_mode: Literal["strict", "merge"] = "strict") -> int:
        """Stage ``data`` (an Arrow table or a Spark DataFrame) as new rows of ``name``; returns the row count.

        ``schema_mode="merge"``: columns of ``data`` the table lacks are first added to it (nullable, as
        :meth:`alter_table` does); by default (``"strict"``) they are a :class:`SchemaMismatchError`.
        """
        choice_argument(schema_mode, "schema_mode", ("strict", "merge"))
        if schema_mode == "merge":
            self._merge_schema(name, data)
        if isinstance(data, pa.Table):
            return self._writable(name).append(data)
        engine = self._engine_for(data)
        work = self._writable(name)
        written = engine.write(WriteSpec(self._location(work), self.txid), data)
        work.stage_adds(written.adds)
        return written.num_rows

    def _merge_schema(self, name: str, data: object) -> None:
        """Add the columns of ``data`` that ``name`` lacks (``append(..., schema_mode="merge")``)."""
        if isinstance(data, pa.Table):
            incoming = data.schema
        else:
            converted = self._engine_for(data).arrow_schema(data.schema, table=name)  # type: ignore[attr-defined]
            if converted is None:
                return
            incoming = converted
        known = {n.lower() for n in self._table(name).schema.names}
        extra = [field.with_nullable(True) for field in incoming if field.name.lower() not in known]
        if extra:
            self.alter_table(name, add_columns=pa.schema(extra))

    @_statement
    def overwrite(self, name: str, data: pa.Table | Any, where: str | None = None) -> int:
        """Replace all rows (or the rows matching ``where``) with ``data``; every row of ``data`` must match."""
        if not isinstance(data, pa.Table):
            return self._overwrite_engine(name, data, where)
        work = self._writable(name)
        work.check_removable()
        if where is None:
            return work.overwrite_all(data)
        predicate = work.bind(where)
        assert predicate is not None
        conformed = conform(data, normalize_schema(work.schema), table=work.entry.name)
        mask = predicate.mask(conformed)
        if mask.null_count or not all(mask.to_pylist()):
            raise PredicateError(f"data written to {name} does not all match the replace condition", expression=where)
        work.rewrite(where, "OVERWRITE", lambda rows, p: delete_rows(rows, p))
        work.append(conformed)
        return int(data.num_rows)

    def _overwrite_engine(self, name: str, data: object, where: str | None) -> int:
        engine = self._engine_for(data)
        work = self._writable(name)
        work.check_removable()
        if where is not None:
            work.bind(where)  # a bad condition fails before any job runs
        # the engine checks that every written row satisfies ``where`` (txlake's predicate semantics)
        written = engine.write(WriteSpec(self._location(work), self.txid, where), data)
        try:
            if where is None:
                work.replace_all(written.adds)
                return written.num_rows
            work.rewrite(where, "OVERWRITE", lambda rows, p: delete_rows(rows, p))
        except BaseException:
            work.delete_unstaged(written.adds)
            raise
        work.stage_adds(written.adds)
        return written.num_rows

    def _dml_engine(self, engine: DmlEngine) -> DataEngine | None:
        """The data engine an UPDATE/DELETE runs on (``None``: the Arrow path)."""
        if engine not in ("auto", "arrow", "spark"):
            raise InvalidArgumentError(f"engine must be 'auto', 'arrow' or 'spark', got {engine!r}", argument="engine")
        if engine == "arrow":
            return None
        if engine == "spark":
            return self._ctx.require_engine()
        return self._ctx.engine

    def _rewrite_engine(
        self,
        engine: DataEngine,
        work: TableWork,
        where: str | None,
        operation: str,
        set: Mapping[str, str] | None = None,
    ) -> int:
        """UPDATE/DELETE on the data engine: candidate files pruned and recorded as on the Arrow path."""
        prune = engine.pruning_predicate(where, work.schema)
        files = work.candidates(work.bind(prune))
        location = self._location(work)
        outcome = engine.rewrite(
            ScanSpec(location, tuple(files)),
            WriteSpec(location, self.txid),
            where=where,
            set=set,
            delete=set is None,
        )
        # a condition txlake cannot read (Spark-only functions) is recorded as a read of the whole table
        self._stage_rewrite(work, prune, files, outcome.removed, outcome.adds, operation)
        return outcome.num_rows

    def _stage_rewrite(
        self,
        work: TableWork,
        predicate: str | None,
        files: Sequence[Add],
        removed: Sequence[Add],
        adds: Sequence[Add],
        operation: str,
    ) -> None:
        """Record an engine statement's read (``predicate`` over candidate ``files``) and stage its rewrite.

        The read is recorded once the statement succeeded: a failed statement staged nothing, so its read
        cannot matter (the engine wrote nothing either).
        """
        try:
            work.record_dml(predicate, files)
            work.replace_files(removed, adds, operation)
        except BaseException:
            work.delete_unstaged(adds)
            raise

    @_statement
    def delete(self, name: str, where: str | None = None, *, engine: DmlEngine = "auto") -> int:
        """Delete the rows matching ``where`` (all rows when ``None``); returns the number deleted.

        With a data engine (``connect(..., spark=)``) this is a Spark job over the candidate files (Spark SQL
        semantics); ``engine="arrow"`` runs it in this process instead, ``engine="spark"`` requires Spark. On the
        Arrow path, a table with ``delta.enableDeletionVectors=true`` (and the ``deletionVectors`` feature) gets
        deletion vectors instead of rewritten files (merge-on-read).
        """
        work = self._writable(name)
        work.check_removable()
        data_engine = self._dml_engine(engine)
        if data_engine is not None:
            return self._rewrite_engine(data_engine, work, where, "DELETE")
        if work.writes_deletion_vectors:
            return work.delete_with_deletion_vectors(where, lambda rows, p: delete_rows(rows, p))
        return work.rewrite(where, "DELETE", lambda rows, p: delete_rows(rows, p))

    @_statement
    def update(self, name: str, set: Mapping[str, str], where: str | None = None, *, engine: DmlEngine = "auto") -> int:
        """``UPDATE name SET col = expr, ... WHERE where``; expressions are Spark SQL strings.

        Returns the number of rows updated. Runs like :meth:`delete` (``engine=``); only the files holding a
        matching row are rewritten.
        """
        work = self._writable(name)
        work.check_removable()
        mapping_argument(set, "set", of="column names to Spark SQL expressions, e.g. {'v': 'v + 1'}")
        if not set:
            raise InvalidArgumentError("update needs at least one column in set=", argument="set")
        schema = work.schema
        lower = {n.lower(): n for n in schema.names}
        columns: dict[str, str] = {}
        for col, expr in set.items():
            real = lower.get(col.lower())
            if real is None:
                raise SchemaMismatchError(f"no column {col!r} in {name}", table=name, columns=[col])
            if real in work.partition_columns:
                raise InvalidArgumentError(f"updating partition column {real!r} is not supported", argument="set")
            columns[real] = expr
        data_engine = self._dml_engine(engine)
        if data_engine is not None:
            return self._rewrite_engine(data_engine, work, where, "UPDATE", columns)
        bound = {real: parse_expression(expr).bind(schema) for real, expr in columns.items()}
        return work.rewrite(where, "UPDATE", lambda rows, p: update_rows(rows, bound, p))

    @_statement
    def merge(
        self,
        name: str,
        source: pa.Table | Any,
        on: str,
        *,
        when_matched_update: Mapping[str, str] | Literal["*"] | None = None,
        when_matched_update_condition: str | None = None,
        when_matched_delete: bool | str | None = None,
        when_not_matched_insert: Mapping[str, str] | Literal["*"] | None = None,
        when_not_matched_insert_condition: str | None = None,
        target_alias: str = "t",
        source_alias: str = "s",
    ) -> MergeMetrics:
        """``MERGE INTO name AS t USING source AS s ON on`` with the given clauses (copy-on-write).

        ``when_matched_delete`` is ``True`` or a condition; ``*`` maps every target column from the source
        column of the same name. A Spark DataFrame source runs as Spark jobs over the target files its join keys
        may reach (pruned by the source's key range when ``on`` has ``t.col = s.expr`` conjuncts); an Arrow
        source runs in this process over the whole table. A target row matched by several source rows raises
        :class:`~txlake.errors.MergeCardinalityError` (unless the only matched clause is an unconditional delete).
        """
        spec = MergeSpec(
            on,
            matched_update=when_matched_update,
            matched_update_condition=when_matched_update_condition,
            matched_delete=when_matched_delete,
            not_matched_insert=when_not_matched_insert,
            not_matched_insert_condition=when_not_matched_insert_condition,
            target_alias=target_alias,
            source_alias=source_alias,
        )
        if spec.matched_update is not None or spec.matched_delete not in (None, False):
            self._writable(name).check_removable()  # as Delta: a MERGE that may change rows, before it runs
        if not isinstance(source, pa.Table):
            if self._ctx.engine is None or not self._ctx.engine.accepts(source):
                raise InvalidArgumentTypeError(
                    f"source must be a pyarrow.Table or a Spark DataFrame, got {type(source).__name__}",
                    argument="source",
                )
            return self._merge_engine(self._ctx.engine, name, source, spec)
        return self._merge_arrow(name, source, spec)

    def _merge_arrow(self, name: str, source: pa.Table, spec: MergeSpec) -> MergeMetrics:
        """MERGE an Arrow table in this process over every live file of the target."""
        work = self._writable(name)
        if any(has_variant(f.type) for f in source.schema):
            # the target has no variant (txlake writes none): a marked struct goes in as the plain struct it is, as
            # append takes it, instead of making every source column reference a variant read
            source = source.cast(pa.schema([unmarked(f) for f in source.schema], metadata=source.schema.metadata))
        files = work.live_files()
        work.record_dml(None, files)  # merge reads the whole target: conservative read set
        targets = [work.read_one(a) for a in files]
        clauses = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        result = merge_rows(targets, source, **clauses, table_name=work.entry.name, schema=work.schema)
        for add, new_rows in zip(files, result.files, strict=True):
            if new_rows is not None:
                work.replace_file(add, new_rows)
        if result.inserted.num_rows:
            work.append(result.inserted)
        work.operations.append("MERGE")
        return MergeMetrics(result.num_updated, result.num_deleted, result.num_inserted)

    def _merge_engine(self, engine: DataEngine, name: str, source: Any, spec: MergeSpec) -> MergeMetrics:
        """MERGE a DataFrame on the data engine: target files pruned by the source's key range, then recorded."""
        work = self._writable(name)
        location = self._location(work)
        # an empty target needs no key range (that would cost a job)
        prune = engine.merge_pruning_predicate(source, spec, location) if work.live_files() else None
        files = work.candidates(work.bind(prune))
        outcome = engine.merge(ScanSpec(location, tuple(files)), WriteSpec(location, self.txid), source, spec)
        self._stage_rewrite(work, prune, files, outcome.removed, outcome.adds, "MERGE")
        return MergeMetrics(outcome.num_updated, outcome.num_deleted, outcome.num_inserted)

    # ----------------------------------------------------------------------------------------- commit

    def adopt(self, name: str) -> None:
        """Record plain-Delta commits of ``name`` beyond the lakehouse's map in this transaction's version."""
        self._ensure_active()
        self._table(name)
        self._adopt.add(self._entry(name).id)

    @property
    def writes(self) -> bool:
        return bool(self._ops) or bool(self._adopt) or any(w.writes for w in self._work.values())

    def wait_for_uploads(self) -> None:
        """Block until every data file this transaction's statements wrote is stored.

        Statements return before their files' PUTs end (write-behind, see ``docs/protocol.md``); :meth:`commit`
        waits for them itself. Raises the error of an upload that failed: the transaction cannot commit then,
        and every later statement and :meth:`commit` raise it too.
        """
        self._ensure_active()
        self._uploads.flush()

    def commit(self) -> CommitResult:
        """Validate, claim the next global version, publish, decide.

        Raises a :class:`ConflictError` on conflict; files are deleted only when this transaction provably
        did not claim a version, or its version was decided aborted. When the outcome cannot be established
        after a claim, :class:`CommitStateUnknownError` leaves everything for roll-forward.
        """
        self._ensure_active()
        try:
            return self._commit_once()
        finally:
            if self._status != "active":
                self._release_lease()

    def _commit_once(self) -> CommitResult:
        if not self.writes:
            if self._intents is not None and len(self._work) > 1:
                # a pessimistic reader may have read its tables at different versions (each at its acquisition;
                # an optimistic writer ignores markers): what it read must still hold at the newest of them
                try:
                    self._recheck(self._ctx.view().decided)
                except ConflictError:
                    self._status = "aborted"
                    raise
            self._status = "committed"
            self.result = CommitResult(self.read_version, self.read_version, read_only=True)
            self._release_dropped()
            return self.result
        try:
            result = Commit(self).run()
        except CommitStateUnknownError:
            self._status = "unknown"
            raise
        except Exception:
            self._status = "aborted"
            if self._claimed is None:
                self._discard()  # never claimed: nobody can ever reference these files
            self._adopt_unadopted()
            raise
        self._status = "committed"
        self.result = result
        self._release_dropped()
        return result

    def _release_dropped(self) -> None:
        """After the commit: delete the files this transaction wrote and replaced itself (never published)."""
        for work in self._work.values():
            try:
                work.release_dropped()
            except TxlakeError as exc:  # left as orphans for vacuum: their names carry the txid
                _log.debug("txlake: %s: deleting replaced staged files: %s", self.txid, exc)

    def _redo_statements(
        self, entry: TableEntry, work: TableWork, snapshot: Snapshot, statements: Sequence[_Statement]
    ) -> int:
        """Rebuild ``entry``'s staged state on ``snapshot``: each statement either keeps what it staged (nothing
        it read changed, and no file it might have read appeared) or runs again. Returns the number run again.

        A statement is kept only when it would do exactly the same on the new state: every file it read is
        there unchanged (the same logical file ``(path, DV)``), and no file it did not see (added by the
        concurrent commits, or written differently by a statement run again) may hold a row its conditions
        match. Running a statement again is always correct; keeping one saves its reads and writes.
        """
        new = TableWork(entry, snapshot, self._ctx.store, self.txid, owns_files=self._owns_files, uploads=self._uploads)
        changes = changed_files(work.snapshot, snapshot) if keepable(work, snapshot, statements) else None
        if changes is None:
            # a resumed append's data is in its staged files: they are staged again, not deleted
            work.discard(keep={a.path for s in statements if s.method.endswith("_staged") for a in s.args[0]})
        self._work[entry.id] = new
        out: list[_Statement] = []
        try:
            for statement in statements:
                assert statement.effect is not None or changes is None
                if changes is not None and not changes.affects(statement, new):
                    assert statement.effect is not None
                    new.apply_effect(statement.effect)
                    out.append(statement)
                    continue
                before = (StagedState.of(new), len(new.read_keys))
                self._replaying = True
                try:
                    getattr(self, statement.method)(statement.name, *statement.args, **statement.kwargs)
                finally:
                    self._replaying = False
                effect, reads = self._effect_since(entry, before)
                if changes is not None:
                    assert statement.effect is not None and effect is not None
                    changes.redone(statement.effect, effect, before[0], new)
                out.append(dataclasses.replace(statement, effect=effect, reads=reads))
        finally:
            if changes is not None:  # what only the first run staged: never published, never read again
                work.forget(keep=set(new.added) | set(new.dropped))
        self._statements[entry.id] = out
        return sum(1 for a, b in zip(statements, out, strict=False) if a is not b)

    def _mark(self, name: object) -> WorkMark:
        entry = self._view.table_by_name(name) if isinstance(name, str) else None
        work = self._work.get(entry.id) if entry is not None else None
        return work.mark() if work is not None else WorkMark.empty()

    def _roll_back(self, name: object, mark: WorkMark) -> None:
        """Undo what a failed statement staged on ``name`` (its files deleted; a failed delete leaves an orphan
        for vacuum, whose name carries the txid)."""
        entry = self._view.table_by_name(name) if isinstance(name, str) else None
        work = self._work.get(entry.id) if entry is not None else None
        if work is None:
            return
        try:
            work.roll_back(mark)
        except TxlakeError as exc:
            _log.warning("txlake: %s: undoing a failed statement on %s: %s", self.txid, work.entry.name, exc)

    def _delete_sent_since(self, mark: int) -> None:
        """Delete every data file uploaded since ``mark`` (a failed statement's: none of them is staged), after
        letting those in flight land."""
        sent = self._uploads.sent_since(mark)
        if not sent:
            return
        self._uploads.settle()
        if not self._owns_files():
            return
        try:
            delete_keys(sent)
        except TxlakeError as exc:  # left as orphans for vacuum: their names carry the txid
            _log.warning("txlake: %s: deleting the files of a failed statement: %s", self.txid, exc)

    def _staged_state(self, name: object) -> tuple[StagedState, int] | None:
        """A table's staged state and the length of its read log, before a statement (``None``: no work yet)."""
        entry = self._view.table_by_name(name) if isinstance(name, str) else None
        work = self._work.get(entry.id) if entry is not None else None
        return None if work is None else (StagedState.of(work), len(work.read_keys))

    def _effect_since(
        self, entry: TableEntry, before: tuple[StagedState, int] | None
    ) -> tuple[TableEffect | None, tuple[FileKey, ...]]:
        """A statement's effect on ``entry``'s staged state and the files it read, from the state ``before`` it."""
        work = self._work.get(entry.id)
        if work is None:
            return None, ()
        state, reads = before if before is not None else (None, 0)
        effect = StagedState.of(work).effect_since(state) or TableEffect(entry.id, entry.path)
        return effect, tuple(work.read_keys[reads:])

    def _staged_paths(self, name: object) -> frozenset[str]:
        entry = self._view.table_by_name(name) if isinstance(name, str) else None
        work = self._work.get(entry.id) if entry is not None else None
        return frozenset(work.added) if work is not None else frozenset()

    def _log_statement(
        self,
        method: str,
        name: str,
        table_id: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        before: frozenset[str],
    ) -> None:
        """Note a statement for the sublog; write the sublog now if it is due (resumable, long, leased)."""
        work = self._work.get(table_id)
        new = [p for p in work.added if p not in before] if work is not None else []
        self._sublog.note(statement_form(method, name, table_id, args, kwargs, new))
        age = max(time.monotonic() - self._started, time.time() - self._started_wall)
        if self._sublog.due(age, self._ctx.lease_seconds, self._lease is not None):
            self._write_sublog()

    def _log_read(self) -> None:
        """A query read is part of the read set a resumed transaction validates: written like a statement."""
        age = max(time.monotonic() - self._started, time.time() - self._started_wall)
        if self._sublog.due(age, self._ctx.lease_seconds, self._lease is not None):
            self._write_sublog()

    def _write_sublog(self) -> None:
        """Hold the lease (others can then tell this transaction alive) and write the sublog's new entries."""
        self._uploads.flush()  # the entries name the staged files: they must be there for a resumer
        self._hold_lease(sublog=True)
        resumable = not self._ops and not self._adopt and all(w.created_metadata is None for w in self._work.values())
        self._sublog.flush(self._work.values(), read_data=self._read_data, resumable=resumable)

    def _owns_files(self) -> bool:
        """Whether the files this transaction staged are still its own to delete: always without a lease; with
        one, only while it is safely held (after a takeover they are the resumer's: a fenced holder deletes
        nothing, so a caller told "failed" never removes what another client commits)."""
        if os.getpid() != self._pid:  # a forked child: the files are the parent's transaction's
            return False
        if self._lease is None:
            return True
        try:
            self._lease.ensure()
        except LeaseLostError:
            return False
        return True

    def _log_claim(self, version: int) -> None:
        """Before claiming ``version`` (or offering an intent for it): bring the sublog up to date (a redo may
        have changed the staged files) and record the claim, so that a resumer finds it."""
        age = max(time.monotonic() - self._started, time.time() - self._started_wall)
        if not self._sublog.due(age, self._ctx.lease_seconds, self._lease is not None):
            return
        self._write_sublog()
        if self._lease is not None:
            self._lease.ensure()
        self._sublog.before_claim(version)

    def _restore(
        self,
        *,
        txid: str,
        start: LakehouseState,
        started_ms: int,
        works: Mapping[str, TableWork],
        forms: Sequence[StatementForm],
        read_data: bool,
        lease: LeaseHandle,
        sublog: SublogWriter,
    ) -> None:
        """Become transaction ``txid`` as its sublog describes it (``Lakehouse.resume``): the same start
        version and staged files; its statements are replayable for redo where their logical form allows."""
        self.txid = txid
        self._start = self._view = start
        self._start_view = LogView(start)
        self._started_wall = started_ms / 1000
        self._started = time.monotonic() - max(0.0, time.time() - self._started_wall)
        self._work = dict(works)
        for work in self._work.values():
            work.owns_files = self._owns_files
        self._read_data = read_data
        self._lease = lease
        self._sublog = sublog
        self._statements = {}
        for form in forms:
            target = self._work.get(form.table_id)
            staged = dict(target.added) if target is not None else {}
            sources = form.source_files or ()
            replayable = form.replayable and all(p in staged for p in sources)
            if replayable and form.method in ("append", "overwrite"):
                statement = _Statement(f"_{form.method}_staged", form.table, (tuple(staged[p] for p in sources),), {})
            else:
                statement = _Statement(form.method, form.table, (), dict(form.arguments), replayable)
            self._statements.setdefault(form.table_id, []).append(statement)

    def _append_staged(self, name: str, adds: Sequence[Add]) -> int:
        """Redo of a resumed append: its data is in the files it staged; stage them again."""
        self._writable(name).stage_adds(adds)
        return sum(a.num_records or 0 for a in adds)

    def _overwrite_staged(self, name: str, adds: Sequence[Add]) -> int:
        """Redo of a resumed overwrite without condition: replace every live file by its staged files again."""
        self._writable(name).replace_all(adds)
        return sum(a.num_records or 0 for a in adds)

    def _ensure_namespace(self, namespace: str) -> None:
        """Create ``namespace`` in this transaction unless it exists (tables create their namespace)."""
        if not self._view.has_namespace(namespace):
            self._catalog(CreateNamespace(namespace))

    def _adopt_unadopted(self) -> None:
        """After a conflict with plain writers' commits no global version holds yet, adopt them.

        Without this, a retry would start from the same lakehouse version, meet the same commits, and
        conflict forever; adopted, they are part of the snapshot the retry begins at.
        """
        if not self._unadopted:
            return
        try:
            sync = Transaction(self._ctx, "snapshot")
            for tid in sorted(self._unadopted):
                entry = sync._start.tables.get(tid)
                if entry is not None:
                    sync.adopt(entry.name)
            sync.commit()
        except TxlakeError as exc:  # best effort: the next writer of the table adopts them too
            _log.info("txlake: adopting plain-writer commits after a conflict failed: %s", exc)


_WIDER_INTEGERS = {pa.int8(): 0, pa.int16(): 1, pa.int32(): 2, pa.int64(): 3}


def _widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of type ``old`` is one of ``new`` (the widenings Delta and Spark allow)."""
    if old in _WIDER_INTEGERS and new in _WIDER_INTEGERS:
        return _WIDER_INTEGERS[new] > _WIDER_INTEGERS[old]
    if new == pa.float64():
        return old == pa.float32() or old in (pa.int8(), pa.int16(), pa.int32())
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        more_digits: bool = new.precision - new.scale >= old.precision - old.scale
        return new.scale >= old.scale and more_digits and new != old
    return False


def _widened(table: str, schema: pa.Schema, widen: Mapping[str, Any], work: TableWork) -> pa.Schema:
    fields = list(schema)
    by_name = {f.name.lower(): i for i, f in enumerate(fields)}
    for column, wanted in widen.items():
        index = by_name.get(str(column).lower())
        if index is None:
            raise SchemaMismatchError(
                f"{table} has no column {column!r} (columns: {', '.join(schema.names)})", table=table, columns=[column]
            )
        if fields[index].name in work.partition_columns:
            raise InvalidArgumentError(f"{column!r} is a partition column of {table}: it cannot change type")
        if isinstance(wanted, str):
            new_type = parse_ddl_type(wanted)
        elif isinstance(wanted, pa.DataType):
            new_type = wanted
        else:
            raise InvalidArgumentTypeError(
                f"widen values must be types (a pyarrow.DataType or a Spark type name), got {wanted!r}",
                argument="widen",
            )
        old = fields[index]
        if not _widens(old.type, new_type):
            raise InvalidArgumentError(
                f"cannot change {table}.{old.name} from {spark_type_name(old.type)} to {spark_type_name(new_type)}: "
                "only widening is supported (integers to larger integers, tinyint/smallint/int to double (a bigint "
                "may not fit), float to double, decimals to more digits)",
                argument="widen",
            )
        fields[index] = old.with_type(new_type)
    return pa.schema(fields, metadata=schema.metadata)


@dataclass(frozen=True, slots=True)
class OptimizeMetrics:
    """What ``optimize`` rewrote: files removed and added, and the bytes of the files removed."""

    files_removed: int
    files_added: int
    bytes_removed: int


@dataclass(frozen=True, slots=True)
class MergeMetrics:
    num_updated: int
    num_deleted: int
    num_inserted: int


ALTERABLE_DELTA_PROPERTIES = frozenset(
    {
        "delta.appendOnly",
        "delta.checkpointInterval",
        "delta.deletedFileRetentionDuration",
        "delta.logRetentionDuration",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
    }
)
"""``delta.*`` table properties ``alter_table`` may set: they change no reader's or writer's protocol."""

CREATE_DELTA_PROPERTIES = ALTERABLE_DELTA_PROPERTIES | {"delta.columnMapping.mode", "delta.enableDeletionVectors"}
"""``delta.*`` table properties ``create_table`` may set: the alterable ones and the features txlake writes."""


def refuse_unhonoured_properties(properties: Mapping[str, str], allowed: frozenset[str], *, table: str) -> None:
    """Refuse ``delta.*`` properties txlake would not honour (CHECK constraints, change data feed, row tracking,
    in-commit timestamps, V2 checkpoints, ``delta.feature.*``, UniForm, ...): create and alter share this check.

    Raises:
        UnsupportedFeatureError: the first such property (``feature`` is its key).
    """
    refused = [
        k
        for k, v in properties.items()
        if k.lower().startswith("delta.")
        and k not in allowed
        and not (k == "delta.checkpointPolicy" and v.lower() == "classic")  # what txlake writes
    ]
    if refused:
        raise UnsupportedFeatureError(
            f"txlake cannot honour Delta property {refused[0]!r} (it changes how the table must be read or "
            f"written); alterable: {', '.join(sorted(ALTERABLE_DELTA_PROPERTIES))}",
            table=table,
            feature=refused[0],
        )


def _kept_max_column_id(restored: Metadata, current: Metadata) -> dict[str, str]:
    """``restored``'s configuration with ``delta.columnMapping.maxColumnId`` never below ``current``'s: a column
    added after a restore must not reuse the id of a column the restore removed (its files may still hold it)."""
    configuration = dict(restored.configuration)
    ids = [
        int(c[MAX_COLUMN_ID]) for c in (restored.configuration, current.configuration) if _is_int(c.get(MAX_COLUMN_ID))
    ]
    if MAX_COLUMN_ID in restored.configuration and ids:
        configuration[MAX_COLUMN_ID] = str(max(ids))
    return configuration


def _is_int(value: str | None) -> bool:
    return value is not None and value.strip().isdigit()


def _exists(store: ObjectStore, table_path: str, add: Add) -> bool:
    file_store, key = resolve_file(store, table_path, add.path)
    return file_store.exists(key)
