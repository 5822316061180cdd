"""The public entry point: ``txlake.connect(uri)`` -> :class:`Lakehouse`."""

from __future__ import annotations

import contextlib
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias, TypeVar, get_args

import pyarrow as pa

from txlake.arguments import (
    bool_argument,
    callable_argument,
    choice_argument,
    columns_argument,
    name_argument,
    number_argument,
    timestamp_ms_argument,
)
from txlake.delta.actions import now_ms
from txlake.delta.files import read_files
from txlake.delta.log import DeltaLog
from txlake.delta.state import Snapshot
from txlake.errors import (
    ConflictError,
    DataFileNotFoundError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from txlake.expr import parse_predicate
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import GlobalRecord, Isolation, LakehouseState, Outcome, TableEntry
from txlake.lakehouse.tables import SnapshotCache
from txlake.lakehouse.tags import Tag, TagStore, tag_name_argument
from txlake.lakehouse.vacuum import DEFAULT_RETENTION, VacuumReport, highest_horizon, vacuum
from txlake.storage import ObjectStore
from txlake.txn.commit import CommitResult
from txlake.txn.context import LakeContext
from txlake.txn.engine import DataEngine, ScanSpec, SparkReader, SparkWriter, TableLocation
from txlake.txn.intents import Concurrency
from txlake.txn.recovery import DEFAULT_GUARD, RecoveryReport, recover, resume
from txlake.txn.reservations import RESERVE_AFTER
from txlake.txn.transaction import DmlEngine, OptimizeMetrics, Transaction

T = TypeVar("T")
TransactionStatus: TypeAlias = Literal["committed", "aborted", "unknown"]


_log = logging.getLogger("txlake")


class LakehouseSnapshot:
    """A consistent, read-only view of every table at one lakehouse version."""

    def __init__(self, ctx: LakeContext, state: LakehouseState) -> None:
        self._ctx = ctx
        self.state = state

    @property
    def version(self) -> int:
        """The lakehouse version this snapshot shows."""
        return self.state.version

    def tables(self, namespace: str | None = None) -> list[str]:
        """Table names (``namespace.table``) at this version, optionally of one namespace."""
        return self.state.table_names(namespace)

    def entry(self, name: str) -> TableEntry:
        """The catalog entry (id, name, location, properties) of ``name``; :class:`TableNotFoundError` if absent."""
        entry = self.state.table_by_name(name_argument(name))
        if entry is None:
            raise TableNotFoundError(f"no table {name!r} at lakehouse version {self.version}", table=name)
        return entry

    def table_version(self, name: str) -> int:
        """The Delta version of ``name`` at this lakehouse version."""
        return self.state.table_versions[self.entry(name).id]

    def delta_snapshot(self, name: str) -> Snapshot:
        """The Delta snapshot (files, metadata, protocol) of ``name`` at the version this snapshot maps it to."""
        entry = self.entry(name)
        return self._ctx.snapshots.get(entry, self.state.table_versions[entry.id])

    def schema(self, name: str) -> pa.Schema:
        """The Arrow schema of ``name`` at this version."""
        return self.delta_snapshot(name).schema

    def read_arrow(self, name: str, where: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows of ``name`` at this version matching ``where`` (file pruning by stats, then filtering)."""
        columns = columns_argument(columns)
        entry = self.entry(name)
        snap = self.delta_snapshot(name)
        if columns is not None:
            unknown = [c for c in columns if c not in snap.schema.names]
            if unknown:
                message = f"unknown columns {unknown} in {entry.name}"
                raise SchemaMismatchError(message, table=entry.name, columns=unknown)
        files = list(snap.files.values())
        predicate = None
        if where is not None:
            predicate = parse_predicate(where).bind(snap.schema)
            files = snap.stats_index.matching(predicate.node)
        try:
            data = read_files(self._ctx.store, entry.path, files, snap.schema, snap.partition_columns, table=entry.name)
        except DataFileNotFoundError as exc:
            horizon = highest_horizon(self._ctx.store)
            if self.version < horizon:  # not damage: vacuum deleted what this old version needed
                raise VersionNotFoundError(
                    f"lakehouse version {self.version} is older than the vacuum horizon (version {horizon}): "
                    f"its files were vacuumed ({exc})",
                    version=self.version,
                ) from exc
            raise
        if predicate is not None:
            data = predicate.filter(data)
        return data.select(list(columns)) if columns is not None else data

    def read(self, name: str, where: str | None = None, columns: Sequence[str] | None = None) -> Any:
        """Rows of ``name`` at this version matching ``where`` (Spark SQL) as a Spark DataFrame.

        Files are pruned by ``where`` against their statistics and partition values; Spark applies ``where``.
        """
        columns = columns_argument(columns)
        engine = self._ctx.require_engine()
        entry = self.entry(name)
        snap = self.delta_snapshot(name)
        files = list(snap.files.values())
        prune = engine.pruning_predicate(where, snap.schema)
        if prune is not None:
            predicate = parse_predicate(prune).bind(snap.schema)
            files = snap.stats_index.matching(predicate.node)
        location = TableLocation.of(self._ctx.store, entry, snap.metadata)
        return engine.read(ScanSpec(location, tuple(files)), where=where, columns=columns)


class Lakehouse:
    """A lakehouse of plain Delta tables under one root, with a transactional catalog and global versions."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        lease_seconds: float = 30.0,
        checkpoint_interval: int = 100,
        spark: Any = None,
        spark_reader: SparkReader = "auto",
        spark_writer: SparkWriter = "auto",
        group_commit: bool | None = None,
        reservations: bool | None = None,
    ) -> None:
        number_argument(lease_seconds, "lease_seconds", minimum=0.001)
        number_argument(checkpoint_interval, "checkpoint_interval", minimum=0, integer=True)
        choice_argument(spark_reader, "spark_reader", get_args(SparkReader))
        choice_argument(spark_writer, "spark_writer", get_args(SparkWriter))
        if group_commit is not None and not isinstance(group_commit, bool):
            raise InvalidArgumentTypeError(
                f"group_commit must be True, False or None, got {type(group_commit).__name__}", argument="group_commit"
            )
        if reservations is not None and not isinstance(reservations, bool):
            raise InvalidArgumentTypeError(
                f"reservations must be True, False or None, got {type(reservations).__name__}", argument="reservations"
            )
        self.store = store
        self._ctx = LakeContext(
            store,
            GlobalLog(store),
            SnapshotCache(store),
            lease_seconds=lease_seconds,
            checkpoint_interval=checkpoint_interval,
            engine=_engine(spark, spark_reader, spark_writer),
            group_commit=group_commit if group_commit is not None else store.scheme != "memory",
            reserve_after=RESERVE_AFTER if (reservations if reservations is not None else store.scheme == "s3") else 0,
        )

    @property
    def _tags(self) -> TagStore:
        return TagStore(self.store)

    @property
    def engine(self) -> DataEngine | None:
        """The data engine for DataFrame reads and writes (``None`` without a Spark session)."""
        return self._ctx.engine

    @property
    def uri(self) -> str:
        """The normalized URI of the lakehouse root (``file:///`` for the file system's root)."""
        return "file:///" if self.store.uri == "file:" else self.store.uri

    @property
    def context(self) -> LakeContext:
        """Internal services (global log, snapshot cache, settings); for tools like ``txlake doctor``."""
        return self._ctx

    def _initialize(self) -> None:
        """Write global version 0 (empty catalog), idempotently: racing initializers are fine."""
        glog = self._ctx.glog
        now = now_ms()
        record = GlobalRecord(0, "init", "init", -1, "serializable", now, now, info={"format": 1})
        with contextlib.suppress(ObjectAlreadyExistsError):
            self.store.put_if_absent(glog.record_path(0), record.to_bytes())
        glog.decide(Outcome(0, "init", "committed", {}, now))

    # ----------------------------------------------------------------------------------------- reads

    def version(self) -> int:
        """The latest committed (decided) lakehouse version."""
        return self._ctx.latest_state().version

    def snapshot(
        self, version: int | None = None, *, timestamp: datetime | None = None, tag: str | None = None
    ) -> LakehouseSnapshot:
        """A consistent read-only view of the whole lakehouse: at ``version``, as of ``timestamp`` (the newest
        version decided then; a timezone-aware datetime), at the version ``tag`` names, or the latest.

        At most one of the three. A timestamp before the lakehouse existed, after now, or a version not decided
        is :class:`VersionNotFoundError`; an unknown tag :class:`TagNotFoundError`.
        """
        given = [n for n, v in (("version", version), ("timestamp", timestamp), ("tag", tag)) if v is not None]
        if len(given) > 1:
            raise InvalidArgumentError(f"give one of version, timestamp and tag, not {' and '.join(given)}")
        if tag is not None:
            version = self._tags.get(tag).version
        elif timestamp is not None:
            version = self._ctx.glog.version_at_time(
                timestamp_ms_argument(timestamp), await_prefix=self._settle_for_time
            )
        if version is None:
            return LakehouseSnapshot(self._ctx, self._ctx.latest_state())
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidArgumentTypeError(
                f"version must be an int (a lakehouse version), got {type(version).__name__}", argument="version"
            )
        if version < 0:
            raise VersionNotFoundError(f"no lakehouse version {version}", version=version)
        return LakehouseSnapshot(self._ctx, self._ctx.glog.state_at(version))

    def _settle_for_time(self, version: int) -> None:
        """Before time travel: wait for the claims up to ``version`` (rolling an expired one forward). A client that
        cannot write (read-only credentials) answers from the versions decided so far instead."""
        try:
            self._ctx.await_prefix(version)
        except StorageError as exc:
            _log.warning(
                "txlake: could not finish the claims up to lakehouse version %d (%s); the version for this time may "
                "change once they are decided",
                version,
                exc,
            )

    def version_at(self, timestamp: datetime) -> int:
        """The newest lakehouse version decided at or before ``timestamp`` (timezone-aware)."""
        return self._ctx.glog.version_at_time(timestamp_ms_argument(timestamp), await_prefix=self._settle_for_time)

    # --------------------------------------------------------------------------------------- optimize

    def optimize(
        self,
        name: str,
        where: str | None = None,
        *,
        target_file_size: int | str = "128MB",
        zorder_by: Sequence[str] | None = None,
        retries: int = 10,
        engine: DmlEngine = "auto",
    ) -> OptimizeMetrics:
        """Compact a table's small files in its own transaction (see :meth:`Transaction.optimize`; on Spark when
        the lakehouse has a session, unless ``engine="arrow"``), retried when a concurrent commit removed a file
        it was compacting. Appends never conflict with it."""
        return self.run(
            lambda tx: tx.optimize(name, where, target_file_size=target_file_size, zorder_by=zorder_by, engine=engine),
            isolation="write_serializable",
            retries=retries,
        )

    # ----------------------------------------------------------------------------------------- vacuum

    def vacuum(
        self,
        retention: timedelta = DEFAULT_RETENTION,
        *,
        dry_run: bool = False,
        force: bool = False,
        progress: Callable[[int, int], None] | None = None,
        log_retention: timedelta | None = None,
    ) -> VacuumReport:
        """Delete the files no lakehouse version of the last ``retention`` needs, nor any tag, clone, claim in
        flight or running transaction; tables dropped before then go whole. Returns what was (``dry_run``: would
        be) deleted and what was kept, and why.

        A ``retention`` below a table's ``delta.deletedFileRetentionDuration`` (7 days by default) is refused
        unless ``force=True``: readers of older versions would lose files. Files no log references are deleted
        only once 26 hours old whatever the retention (they may belong to a running transaction; see
        ``docs/protocol.md``, "Vacuum"). ``progress(done, total)`` is called as files are deleted.

        The logs are cleaned up too: global log entries and each table's Delta commits and checkpoints below
        the newest checkpoint that every retained version, tag and claim in flight can start from, once older
        than ``log_retention`` (default: each table's ``delta.logRetentionDuration``, 30 days; never less than
        26 hours). Plain Delta readers then load each table from that checkpoint.
        """
        if not isinstance(retention, timedelta):
            raise InvalidArgumentTypeError(
                f"retention must be a datetime.timedelta, got {type(retention).__name__}", argument="retention"
            )
        if retention < timedelta(0):
            raise InvalidArgumentError(f"retention must not be negative, got {retention}", argument="retention")
        for flag, value in (("dry_run", dry_run), ("force", force)):
            if not isinstance(value, bool):
                raise InvalidArgumentTypeError(f"{flag} must be True or False, got {value!r}", argument=flag)
        if log_retention is not None:
            if not isinstance(log_retention, timedelta):
                raise InvalidArgumentTypeError(
                    f"log_retention must be a datetime.timedelta, got {type(log_retention).__name__}",
                    argument="log_retention",
                )
            if log_retention < timedelta(0):
                raise InvalidArgumentError(
                    f"log_retention must not be negative, got {log_retention}", argument="log_retention"
                )
        return vacuum(
            self._ctx, retention, dry_run=dry_run, force=force, progress=progress, log_retention=log_retention
        )

    def _check_not_vacuumed(self, version: int) -> None:
        """:class:`VersionNotFoundError` if a vacuum ran with a horizon above ``version``: its files may be gone."""
        horizon = highest_horizon(self.store)
        if version < horizon and version not in {t.version for t in self._tags.list()}:  # tags are kept
            raise VersionNotFoundError(
                f"lakehouse version {version} is older than the vacuum horizon (version {horizon}): "
                "its files may have been deleted",
                version=version,
            )

    # ---------------------------------------------------------------------------------------- restore

    def restore(
        self,
        version: int | None = None,
        *,
        timestamp: datetime | None = None,
        tag: str | None = None,
        tables: Sequence[str] | None = None,
    ) -> CommitResult:
        """Bring the lakehouse (or only ``tables``, named as they were then) back to an earlier version, as one
        new transaction: history is kept, and the earlier versions stay readable.

        Each table gets that version's name and data files back (re-added as they were; a file deleted since is
        :class:`DataFileNotFoundError` and nothing changes), and its schema and properties of then if altered
        since. Restoring the whole lakehouse also drops the tables created since; tables dropped since come back
        (a dropped table whose name is taken now is :class:`InvalidArgumentError`), and so do its namespaces
        (with their properties of then; those created since are dropped). Concurrent writes to a
        restored table conflict with the restore (it reads every file).
        """
        if version is None and timestamp is None and tag is None:
            raise InvalidArgumentError("give the version to restore: version=, timestamp= or tag=", argument="version")
        then = self.snapshot(version, timestamp=timestamp, tag=tag)
        if tag is None:  # a tag's files are kept by every vacuum
            self._check_not_vacuumed(then.version)
        if tables is not None:
            names = list(columns_argument(tables, "tables", what="table names") or [])
            entries = [then.entry(name) for name in names]
        else:
            entries = sorted(then.state.tables.values(), key=lambda e: e.name)
        with self.transaction() as tx:
            if tables is None:
                kept = {e.id for e in entries}
                for name in tx.tables():
                    if tx._entry(name).id not in kept:
                        tx.drop_table(name)
                self._restore_namespaces(tx, then.state.namespaces)
            tx._borrow(then.version)
            tx._free_names(entries)
            for entry in entries:
                tx._restore_table(entry, then.delta_snapshot(entry.name))
            if tables is None:
                self._restore_namespaces(tx, then.state.namespaces)
        assert tx.result is not None
        return tx.result

    @staticmethod
    def _restore_namespaces(tx: Transaction, then: Mapping[str, Mapping[str, str]]) -> None:
        """The namespaces of a whole-lakehouse restore, as they were ``then``: one created since is dropped, one
        dropped since is created again with its properties and name of then, and one that differs (dropped and
        created again since with other properties, or another case) is dropped and created as it was -- each
        once it is empty (namespace properties cannot change otherwise). Called before the tables come back
        and after them: a namespace the restore empties only by bringing its tables back to their old names is
        handled the second time; one still holding tables then keeps its present name and properties."""
        was = {name.lower(): (name, dict(props)) for name, props in then.items()}
        now = {name.lower(): (name, dict(props)) for name, props in tx._view.namespaces.items()}
        for key, present in sorted(now.items(), key=lambda item: (-item[0].count("."), item[0])):  # inner first
            if was.get(key) != present and not tx._view.table_names(present[0]):
                tx.drop_namespace(present[0])
        for name, props in sorted(then.items()):
            if not tx._view.has_namespace(name):
                tx.create_namespace(name, props)

    # ------------------------------------------------------------------------------------------ clone

    def clone(self, source: str, target: str, *, version: int | None = None) -> CommitResult:
        """Zero-copy clone, in one transaction: table ``source`` to table ``target``, or every table of namespace
        ``source`` (a name without a dot) into namespace ``target``, as at lakehouse ``version`` (default latest).

        Each clone is a new plain Delta table whose log names the source's data files (nothing is copied); the
        clones and their sources evolve independently. See :meth:`Transaction.clone_table`.
        """
        name_argument(source, "source")
        name_argument(target, "target")
        at = self.snapshot(version)
        if version is not None:
            self._check_not_vacuumed(at.version)
        if "." in source:
            pairs = [(at.entry(source).name, target)]
        else:
            if "." in target:
                raise InvalidArgumentError(
                    f"a namespace ({source!r}) clones into a namespace, got table name {target!r}", argument="target"
                )
            names = at.tables(source)
            if not names:
                known = ", ".join(at.state.namespaces) or "none"
                raise TableNotFoundError(
                    f"no table and no namespace {source!r} at lakehouse version {at.version} (namespaces: {known})",
                    table=source,
                )
            pairs = [(name, f"{target}.{name.split('.', 1)[1]}") for name in names]
        with self.transaction() as tx:
            tx._borrow(at.version)
            for name, new_name in pairs:
                entry = at.entry(name)
                delta = at.delta_snapshot(name)
                tx._clone(entry, delta, list(delta.files.values()), new_name)
        assert tx.result is not None
        return tx.result

    # ------------------------------------------------------------------------------------------- tags

    def tag(self, name: str, version: int | None = None, *, description: str = "") -> Tag:
        """Name lakehouse ``version`` (default: the latest) ``name``: ``snapshot(tag=name)`` reads it later.

        Tags never move: :class:`TagAlreadyExistsError` if ``name`` exists (drop it first). A version that is
        not decided (yet) is :class:`VersionNotFoundError`.
        """
        tag_name_argument(name)
        if not isinstance(description, str):
            raise InvalidArgumentTypeError(
                f"description must be a string, got {type(description).__name__}", argument="description"
            )
        state = self.snapshot(version).state  # checks the version exists and is decided
        self._check_not_vacuumed(state.version)
        tag = self._tags.create(Tag(name, state.version, now_ms(), description))
        try:  # a vacuum that began meanwhile either saw the tag, or recorded its horizon before: look again
            self._check_not_vacuumed(state.version)
        except VersionNotFoundError:
            self._tags.store.delete(self._tags.path(tag.name))
            raise
        return tag

    def tags(self) -> list[Tag]:
        """Every tag, oldest version first."""
        return self._tags.list()

    def drop_tag(self, name: str) -> Tag:
        """Delete tag ``name`` (not the version it names); :class:`TagNotFoundError` if there is none."""
        return self._tags.drop(name)

    def tables(self, namespace: str | None = None) -> list[str]:
        """Table names at the latest version, optionally of one namespace."""
        if namespace is not None:
            name_argument(namespace, "namespace", example="'bank'")
        return self._ctx.latest_state().table_names(namespace)

    def namespaces(self) -> list[str]:
        """Namespace names at the latest version."""
        return sorted(self._ctx.latest_state().namespaces)

    def table_location(self, name: str) -> str:
        """The URI of the plain Delta table behind ``name``, as delta-rs, Polars and DuckDB open it (characters
        URIs reserve, such as ``#`` or a space in a local path, are percent-encoded)."""
        entry = self.snapshot().entry(name)
        return self.store.public_url(entry.path)

    def read_arrow(self, name: str, where: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows of ``name`` at the latest version (a shortcut for ``snapshot().read_arrow(...)``)."""
        return self.snapshot().read_arrow(name, where, columns)

    # ------------------------------------------------------------------------------------ transactions

    def transaction(
        self,
        isolation: Isolation = "serializable",
        *,
        redo: bool = True,
        concurrency: Concurrency = "optimistic",
        resumable: bool = False,
    ) -> Transaction:
        """Begin a transaction at the latest lakehouse version (use it as a context manager).

        ``redo`` (default): when a concurrent commit changed data a statement read or rewrote, the commit
        re-executes that table's statements on the newer data instead of failing (the others keep their files;
        ``CommitResult.redone`` counts them), unless the transaction read data (``read_arrow``, ``read``): what
        the application did with it cannot be redone, so the conflict is raised. ``redo=False`` raises every
        conflict.

        ``concurrency="pessimistic"``: before it first reads or writes a table, the transaction places an intent
        marker on it and waits for the pessimistic transactions ahead of it there, so they do not conflict with
        each other (see ``docs/concepts/pessimistic.md``); a wait that closes a cycle raises
        :class:`~txlake.errors.DeadlockError` in its youngest member. ``"optimistic"`` (default) places none
        and ignores them.

        ``resumable=True``: the transaction holds a lease (renewed by a heartbeat) and writes its sublog after
        every statement (one PUT each), so that if this process dies another one can :meth:`resume` it by its
        ``txid``. Without it a transaction writes a sublog only once it is older than a third of
        ``lease_seconds``, and at least 5 s (see docs/protocol.md, "Sublog, resume and recover").
        """
        return Transaction(self._ctx, isolation, redo=redo, concurrency=concurrency, resumable=resumable)

    def resume(self, txid: str) -> Transaction:
        """Continue transaction ``txid`` of a process that died, from its sublog: the same start version and
        staged files (no data is written again); add statements and commit as usual.

        Raises :class:`~txlake.errors.LeaseHeldError` while its lease is still renewed (its process is alive, or
        another client resumed it first), :class:`~txlake.errors.TransactionNotResumableError` when it was
        aborted by :meth:`recover`, or already claimed a version (``reason="decided"``: that version is rolled
        forward here if needed, and ``status``/``version`` say how it ended; it is never claimed twice), and
        :class:`~txlake.errors.TransactionNotFoundError` when it left no sublog.
        """
        if not isinstance(txid, str) or not re.fullmatch(r"[0-9a-f]{32}", txid):
            raise InvalidArgumentError(f"txid must be a transaction id (32 hex digits), got {txid!r}", argument="txid")
        return resume(self._ctx, txid)

    def recover(
        self,
        *,
        guard: timedelta = DEFAULT_GUARD,
        dry_run: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> RecoveryReport:
        """Finish the transactions of dead processes found under ``_txlake/txns/``: one that claimed a version
        is rolled forward; any other with an expired lease is taken over, marked aborted (``resume`` refuses it)
        and, once silent for ``guard``, its staged files and sublog are deleted. Transactions whose lease is
        still renewed are never touched. A claim in the lakehouse log whose lease expired undecided, of a
        transaction without a sublog, is rolled forward too (as the next writer would; until then plain Delta
        readers may see some of its tables published and not others). ``dry_run`` (the default) only reports.
        """
        if not isinstance(guard, timedelta):
            raise InvalidArgumentTypeError(
                f"guard must be a datetime.timedelta, got {type(guard).__name__}", argument="guard"
            )
        if guard < timedelta(0):
            raise InvalidArgumentError(f"guard must not be negative, got {guard}", argument="guard")
        if not isinstance(dry_run, bool):
            raise InvalidArgumentTypeError(f"dry_run must be True or False, got {dry_run!r}", argument="dry_run")
        return recover(self._ctx, guard=guard, dry_run=dry_run, progress=progress)

    def transaction_status(self, txid: str, version: int | None = None, *, search: int = 1000) -> TransactionStatus:
        """Whether transaction ``txid`` committed, aborted, or is not decided yet.

        Pass the ``version`` of a :class:`~txlake.errors.CommitStateUnknownError` for a definite answer: a
        claim of that version whose lease has expired is rolled forward here, and a version claimed by
        another transaction means ``txid`` never claimed (``aborted``: it can never appear). Without
        ``version`` the newest ``search`` claims are searched; not finding ``txid`` there is ``unknown``.
        """
        glog = self._ctx.glog
        latest = glog.tail().latest_claimed
        if version is None:
            found = next(
                (v for v in range(latest, max(-1, latest - search), -1) if glog.read_record(v).includes(txid)), None
            )
            if found is None:
                return "unknown"
            version = found
        if version > latest:
            return "unknown"  # not claimed by anyone yet: an ambiguous claim of ours might still land
        record = glog.read_record(version)
        if not record.includes(txid):
            return "aborted"
        outcome = glog.read_outcome(version)
        if outcome is None and now_ms() >= record.lease_until_ms:
            self._ctx.settle(version)
            outcome = glog.read_outcome(version)
        if outcome is None:
            return "unknown"
        return "committed" if outcome.committed else "aborted"

    def run(
        self,
        fn: Callable[[Transaction], T],
        *,
        isolation: Isolation = "serializable",
        retries: int = 10,
        base_delay: float = 0.01,
        max_delay: float = 1.0,
        redo: bool = True,
        concurrency: Concurrency = "optimistic",
    ) -> T:
        """Run ``fn(tx)`` in a transaction; on a conflict re-run it on a fresh snapshot (backoff + jitter).

        Conflicts the commit resolves by redo (see :meth:`transaction`) never reach here: only those after a
        data read, or on the schema or catalog, make ``fn`` run again.
        """
        callable_argument(fn, "fn")
        number_argument(retries, "retries", minimum=0, integer=True)
        attempt = 0
        while True:
            tx = self.transaction(isolation, redo=redo, concurrency=concurrency)
            try:
                value = fn(tx)
                if tx.status == "active":
                    tx.commit()
                return value
            except ConflictError:
                if tx.status == "active":  # raised by a statement (a deadlock, a catch-up check): not committed
                    tx.abort()
                if attempt >= retries:
                    raise
            except BaseException:
                if tx.status == "active":
                    tx.abort()
                raise
            time.sleep(random.uniform(0, min(max_delay, base_delay * 2**attempt)))
            attempt += 1

    def _ddl(self, fn: Callable[[Transaction], None]) -> CommitResult:
        def body(tx: Transaction) -> CommitResult:
            fn(tx)
            return tx.commit()

        return self.run(body, isolation="snapshot")

    # ----------------------------------------------------------------------------------------- catalog

    def create_namespace(
        self, name: str, properties: Mapping[str, str] | None = None, *, if_not_exists: bool = False
    ) -> None:
        """Create a namespace (one transaction); :class:`TableAlreadyExistsError` if it exists."""
        name_argument(name, example="'sales'")
        self._ddl(lambda tx: tx.create_namespace(name, properties, if_not_exists=if_not_exists))

    def drop_namespace(self, name: str) -> None:
        """Drop an empty namespace (one transaction)."""
        name_argument(name, example="'sales'")
        self._ddl(lambda tx: tx.drop_namespace(name))

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
        """Create an empty Delta table ``namespace.table`` (the namespace is created if needed)."""
        name_argument(name)
        self._ddl(
            lambda tx: tx.create_table(
                name,
                schema,
                partition_by=partition_by,
                properties=properties,
                description=description,
                if_not_exists=if_not_exists,
            )
        )

    def register_table(self, name: str, location: str) -> int:
        """Make the existing Delta table at ``location`` (below the lakehouse root: a relative path, or a URI or
        absolute path inside it) table ``name``, at its current Delta version, without copying; returns that
        Delta version. See :meth:`Transaction.register_table`."""
        name_argument(name)
        joined: list[int] = []
        self._ddl(lambda tx: joined.append(tx.register_table(name, location)))
        return joined[-1]

    def drop_table(self, name: str) -> None:
        """Remove ``name`` from the catalog; its files stay (time travel still sees it) until vacuumed."""
        name_argument(name)
        self._ddl(lambda tx: tx.drop_table(name))

    def rename_table(self, name: str, new_name: str) -> None:
        """Rename a table in the catalog (its location does not move)."""
        name_argument(name)
        name_argument(new_name, "new_name")
        self._ddl(lambda tx: tx.rename_table(name, new_name))

    def sync(self) -> CommitResult:
        """Adopt commits that plain Delta writers made to lakehouse tables into a new global version.

        Until adopted (by ``sync`` or by the next txlake transaction writing that table), lakehouse readers
        keep seeing each table at the version the lakehouse log maps it to.
        """

        def body(tx: Transaction) -> CommitResult:
            for name in tx.tables():
                tx.adopt(name)
            return tx.commit()

        return self.run(body, isolation="snapshot")

    def delta_log(self, name: str) -> DeltaLog:
        """The Delta log of ``name`` (the plain Delta table behind it)."""
        entry = self.snapshot().entry(name)
        return DeltaLog(self.store, entry.path, name=entry.name)

    def __repr__(self) -> str:
        return f"Lakehouse({self.uri!r}, version={self.version()})"


def _engine(spark: Any, reader: SparkReader, writer: SparkWriter) -> DataEngine | None:
    """A Spark engine for ``spark`` (a SparkSession, or a ready :class:`DataEngine`), or ``None``."""
    if spark is None or isinstance(spark, DataEngine):
        return spark
    # pyspark is an optional dependency: only a caller that passes a session needs it installed
    from txlake.spark.engine import SparkEngine

    if not hasattr(spark, "sparkContext"):
        raise InvalidArgumentTypeError(
            f"spark must be a SparkSession (or a txlake DataEngine), got {type(spark).__name__}", argument="spark"
        )

    return SparkEngine(spark, reader=reader, writer=writer)


def connect(
    uri: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    create: bool = True,
    lease_seconds: float = 30.0,
    checkpoint_interval: int = 100,
    spark: Any = None,
    spark_reader: SparkReader = "auto",
    spark_writer: SparkWriter = "auto",
    group_commit: bool | None = None,
    reservations: bool | None = None,
) -> Lakehouse:
    """Open the lakehouse at ``uri`` (``file:///dir``, ``s3://bucket/prefix``, ``memory://name``).

    Args:
        uri: the lakehouse root; a plain absolute path means ``file://``.
        storage_options: S3 settings in delta-rs naming (``AWS_ENDPOINT_URL``, ``AWS_REGION``,
            ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ALLOW_HTTP``, ...)
            and txlake's ``max_retries`` / ``retry_base_delay``; unknown keys are a ``ValueError``.
        create: initialize an empty location (default); otherwise a location without a lakehouse log
            raises :class:`VersionNotFoundError` and nothing is created.
        lease_seconds: how long other clients wait for a claimed but undecided version of this client
            before rolling it forward themselves.
        checkpoint_interval: write a global checkpoint every this many lakehouse versions.
        spark: a SparkSession: tables can then be read as DataFrames (``tx.read``), DataFrames appended,
            and update/delete/merge run as Spark jobs.
        spark_reader: how Spark reads files: Spark's own Parquet reader (``"native"``, local files only),
            the txlake Python data source (``"python"``), or ``"auto"`` (native for ``file://``).
        spark_writer: how Spark writes files: Spark's own Parquet writer (``"native"``, local files only; the
            files are moved into the table after the job), the txlake Python data source (``"python"``), or
            ``"auto"`` (native whenever the table and the DataFrame allow it, see :mod:`txlake.spark.native`).
        group_commit: after losing a claim race, offer blind appends to the next claimer and take in the
            others' (docs/protocol.md §3). ``None`` (default): on for ``s3://`` and ``file://`` (measured on
            local disk at 8 and 16 writers: 1.4-2.7x the commits of a client without it, which loses a claim
            race a dozen times per commit), off for ``memory://`` (one process).
        reservations: fairness for redo under contention on hot rows: a transaction whose statements on a
            table were redone twice in one commit reserves the files they read, and racing clients wait for
            its claim before they replace those files (docs/protocol.md §3, "Reservations"). Bounds the
            latency of the unlucky transactions (measured: p99 of YCSB updates at 8 clients 2.5 s instead of
            12-16 s on SeaweedFS, 1.1-1.3 s instead of 8-14 s on local disk). ``None`` (default): on for object
            stores (``s3://``), where throughput stayed the same; off for local disk and memory, where the
            waits cost 15-25% of a CPU-bound client's throughput. A client without it neither reserves nor
            waits: give every client of a lakehouse the same setting.
    """
    if not isinstance(uri, str):
        raise InvalidArgumentTypeError(f"uri must be a string, got {type(uri).__name__}", argument="uri")
    bool_argument(create, "create")
    try:
        store = ObjectStore.from_uri(uri, storage_options, must_exist=not create)
    except ObjectNotFoundError as exc:
        raise VersionNotFoundError(f"no txlake lakehouse at {uri}", version=0) from exc
    lake = Lakehouse(
        store,
        lease_seconds=lease_seconds,
        checkpoint_interval=checkpoint_interval,
        spark=spark,
        spark_reader=spark_reader,
        spark_writer=spark_writer,
        group_commit=group_commit,
        reservations=reservations,
    )
    initialized = store.exists(GlobalLog.record_path(0)) and store.exists(GlobalLog.outcome_path(0))
    if not initialized:
        listing = lake.context.glog.list()
        # a log vacuum cleaned up starts later; one with later versions but no version 0 lost it (a corrupt
        # log for the doctor, never a new lakehouse written over it)
        initialized = listing.start > 0 or bool(listing.records - {0})
    if not initialized:
        if not create:
            raise VersionNotFoundError(f"no txlake lakehouse at {store.uri}", version=0)
        lake._initialize()
    return lake
