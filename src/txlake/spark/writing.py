"""The parts of a DataFrame write that run in Spark's Python workers, and the staging objects they leave.

A write never commits anything to Delta. Executors write Parquet files named with the transaction id (and the
write id) and return their add actions; the job commit, which Spark runs in a Python worker process rather
than in the user's interpreter, persists them as a *write record* under the transaction's directory
(``_txlake/txns/<txid>/spark/<write-id>.json``, put-if-absent). Back in the user's process the transaction reads
the record and stages the adds.

Before a task attempt writes data files it lists their names in its *task manifest*
(``<write-id>.tasks/<attempt>.json``). After the job, once Spark has seen every task attempt of it end
(:mod:`txlake.spark.jobs`), the driver deletes every manifest-listed file that the write record does not hold:
files of failed, killed, retried or speculative attempts, whose commit messages never reached the job commit.
Rows that break the table's rules are reported as a *rejection* object so that the driver can raise a typed
error instead of matching Spark's message text. Then the write's staging objects go, and on a local lakehouse
the directories that held them (:func:`remove_staging_dirs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from txlake.delta.actions import Add
from txlake.delta.files import (
    check_data_columns,
    data_file_name,
    encode_path,
    partition_dir,
    resolve_file,
    split_by_partition,
    write_one_file,
)
from txlake.delta.schema import conform, normalize_schema
from txlake.errors import ObjectNotFoundError, PredicateError, SchemaMismatchError, StorageError, TxlakeError
from txlake.expr import BoundPredicate, parse_predicate
from txlake.storage import ObjectStore
from txlake.txn.engine import WriteSpec
from txlake.txn.lease import txn_dir

DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
"""Arrow bytes buffered per task before a file (per partition value) is written."""
TARGET_FILE_ROWS = 1_000_000
"""At most this many rows per data file (as the Arrow path writes them)."""


def staging_dir(txid: str) -> str:
    return f"{txn_dir(txid)}spark"


def write_record_path(txid: str, write_id: str) -> str:
    return f"{staging_dir(txid)}/{write_id}.json"


def rejection_dir(txid: str, write_id: str) -> str:
    return f"{staging_dir(txid)}/{write_id}.rejected"


def manifest_dir(txid: str, write_id: str) -> str:
    return f"{staging_dir(txid)}/{write_id}.tasks"


def file_tag(txid: str, write_id: str) -> str:
    """What data file names carry: ``part-<txid>-<write-id>-<uuid>`` (GC still sees the txid first)."""
    return f"{txid}-{write_id}"


def new_write_id() -> str:
    return uuid.uuid4().hex[:16]


# -------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """The outcome of one successful Spark write job: the add actions it produced (not yet staged)."""

    txid: str
    write_id: str
    table: str
    adds: tuple[Add, ...]
    num_rows: int
    committer: Committer

    def to_bytes(self) -> bytes:
        doc = {
            "txid": self.txid,
            "writeId": self.write_id,
            "table": self.table,
            "numRows": self.num_rows,
            "committer": {"host": self.committer.host, "pid": self.committer.pid},
            "adds": [a.to_json()["add"] for a in self.adds],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> WriteRecord:
        doc = json.loads(data)
        return cls(
            txid=doc["txid"],
            write_id=doc["writeId"],
            table=doc["table"],
            adds=tuple(Add.from_json(a) for a in doc["adds"]),
            num_rows=int(doc["numRows"]),
            committer=Committer(str(doc["committer"]["host"]), int(doc["committer"]["pid"])),
        )


@dataclass(frozen=True, slots=True)
class Committer:
    """The process that ran the job commit (a Spark Python worker, not the user's interpreter)."""

    host: str
    pid: int

    @classmethod
    def here(cls) -> Committer:
        return cls(socket.gethostname(), os.getpid())


@dataclass(frozen=True, slots=True)
class TaskFiles:
    """What one write task produced: add actions as JSON strings (cheap to pickle) and its row count."""

    adds: tuple[str, ...] = ()
    num_rows: int = 0

    def actions(self) -> list[Add]:
        return [Add.from_json(json.loads(a)) for a in self.adds]


def commit_write(spec: WriteSpec, write_id: str, tasks: Iterable[TaskFiles | None]) -> WriteRecord:
    """Job commit: persist every task's adds as the write record (put-if-absent: a record is written once)."""
    done = [t for t in tasks if t is not None]
    record = WriteRecord(
        txid=spec.txid,
        write_id=write_id,
        table=spec.table.table_name,
        adds=tuple(a for t in done for a in t.actions()),
        num_rows=sum(t.num_rows for t in done),
        committer=Committer.here(),
    )
    spec.table.open_store().put_if_absent(write_record_path(spec.txid, write_id), record.to_bytes())
    return record


def abort_write(spec: WriteSpec, write_id: str, tasks: Iterable[TaskFiles | None]) -> int:
    """Job abort: delete the files of the tasks that succeeded; returns how many were deleted."""
    store = spec.table.open_store()
    adds = [a for t in tasks if t is not None for a in t.actions()]
    delete_files(store, spec.table.table_path, adds)
    return len(adds)


def load_write(store: ObjectStore, txid: str, write_id: str) -> WriteRecord | None:
    """The write record of a committed write job (``None`` if its job commit never ran)."""
    try:
        data = store.get(write_record_path(txid, write_id))
    except ObjectNotFoundError:
        return None
    return WriteRecord.from_bytes(data)


def record_rejection(store: ObjectStore, spec: WriteSpec, write_id: str, error: TxlakeError) -> None:
    """Leave a typed description of why a task refused its rows (read back by :func:`load_rejection`)."""
    doc: dict[str, object] = {"error": type(error).__name__, "message": str(error), "table": spec.table.table_name}
    if isinstance(error, SchemaMismatchError):
        doc["columns"] = list(error.columns)
    if isinstance(error, PredicateError):
        doc["expression"] = error.expression
    path = f"{rejection_dir(spec.txid, write_id)}/{uuid.uuid4().hex}.json"
    store.put(path, json.dumps(doc).encode())


def load_rejection(store: ObjectStore, txid: str, write_id: str) -> TxlakeError | None:
    """The typed error a task of the write recorded, if any."""
    for meta in store.list(rejection_dir(txid, write_id)):
        try:
            doc = json.loads(store.get(meta.path))
        except ObjectNotFoundError:
            continue
        if doc.get("error") == "SchemaMismatchError":
            return SchemaMismatchError(doc["message"], table=doc.get("table"), columns=doc.get("columns") or ())
        if doc.get("error") == "PredicateError":
            return PredicateError(doc["message"], expression=doc.get("expression"))
    return None


def clear_staging(store: ObjectStore, txid: str, write_id: str) -> None:
    """Remove the write's record, manifests and rejections once the transaction has taken it over."""
    for prefix in (rejection_dir(txid, write_id), manifest_dir(txid, write_id)):
        for meta in store.list(prefix):
            store.delete(meta.path)
    store.delete(write_record_path(txid, write_id))


_TOKEN = re.compile(r"[0-9A-Za-z_-]+")
"""What transaction and write ids look like (hex): a single path segment, never ``.``/``..`` or a separator."""


def remove_staging_dirs(store: ObjectStore, txid: str, write_id: str) -> None:
    """On a local lakehouse, remove the write's empty staging directories and, if empty, the transaction's.

    ``LocalStore`` deletes files but leaves their directories. Only directories whose paths are built here from
    the transaction and write ids are considered (``<write-id>.tasks``, ``.rejected``, ``.out``, then
    ``_txlake/txns/<txid>/spark`` and ``_txlake/txns/<txid>``), and each only if empty
    (:meth:`ObjectStore.remove_empty_dir`): one that still holds something (another write of the transaction)
    stays.
    """
    if not (_TOKEN.fullmatch(txid) and _TOKEN.fullmatch(write_id)):
        return
    spark_dir = staging_dir(txid)
    for name in (f"{write_id}.tasks", f"{write_id}.rejected", f"{write_id}.out"):
        store.remove_empty_dir(f"{spark_dir}/{name}")
    store.remove_empty_dir(spark_dir)
    store.remove_empty_dir(txn_dir(txid))


def delete_files(store: ObjectStore, table_path: str, adds: Iterable[Add]) -> None:
    for add in adds:
        file_store, key = resolve_file(store, table_path, add.path)
        file_store.delete(key)


def remove_unrecorded(store: ObjectStore, spec: WriteSpec, write_id: str, keep: Iterable[Add] = ()) -> list[str]:
    """Delete every file a task attempt of the write announced that is not in ``keep``; returns their keys.

    ``keep`` is the write record's adds after a successful job, nothing after a failed one. Only the small
    task manifests are listed, never the table.
    """
    kept = {a.path for a in keep}
    deleted = []
    for meta in store.list(manifest_dir(spec.txid, write_id)):
        try:
            planned = json.loads(store.get(meta.path))["files"]
        except ObjectNotFoundError:
            continue
        for relative in planned:
            if encode_path(relative) in kept:
                continue
            key = f"{spec.table.table_path}/{relative}" if spec.table.table_path else relative
            store.delete(key)
            deleted.append(key)
    return deleted


# ---------------------------------------------------------------------------------------- executor side


class TaskWriter:
    """Writes one Spark task's Arrow batches as data files of the table (runs inside the executor).

    Rows are conformed to the table schema (lossless casts only, nullability enforced) and, for an overwrite
    with a condition, checked against it. Batches are buffered up to ``target_bytes`` and then written
    (one file per partition value). If the task fails, the files it wrote are deleted before re-raising.
    """

    def __init__(self, spec: WriteSpec, write_id: str, *, target_bytes: int = DEFAULT_TARGET_FILE_BYTES) -> None:
        self.spec = spec
        self.write_id = write_id
        self.target_bytes = target_bytes
        self.schema = normalize_schema(spec.table.schema)
        self.predicate: BoundPredicate | None = (
            parse_predicate(spec.where).bind(self.schema) if spec.where is not None else None
        )
        self.manifest = f"{manifest_dir(spec.txid, write_id)}/{uuid.uuid4().hex}.json"
        self.announced: list[str] = []

    def write(self, batches: Iterable[pa.RecordBatch]) -> TaskFiles:
        store = self.spec.table.open_store()
        written: list[Add] = []
        rows = 0
        pending: list[pa.RecordBatch] = []
        size = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                size += batch.nbytes
                if size >= self.target_bytes:
                    rows += self._flush(store, pending, written)
                    pending, size = [], 0
            if pending:
                rows += self._flush(store, pending, written)
        except (SchemaMismatchError, PredicateError) as exc:
            self._cleanup(store)
            with contextlib.suppress(StorageError):  # the task fails either way; only the error type is lost
                record_rejection(store, self.spec, self.write_id, exc)
            raise
        except BaseException:
            self._cleanup(store)
            raise
        return TaskFiles(tuple(json.dumps(a.to_json()["add"]) for a in written), rows)

    def _flush(self, store: ObjectStore, batches: Sequence[pa.RecordBatch], written: list[Add]) -> int:
        data = pa.Table.from_batches(batches)
        table = self.spec.table
        conformed = conform(data, self.schema, table=table.table_name)
        if self.predicate is not None:
            matches = self.predicate.matches(conformed)
            if not pc.all(matches).as_py():
                raise PredicateError(
                    f"data written to {table.table_name} does not all match the replace condition",
                    expression=self.spec.where,
                )
        # name every file first and announce the names in the task manifest, then write them
        check_data_columns(conformed, table.partition_columns, table=table.table_name)
        files = []
        for values, part in split_by_partition(conformed, table.partition_columns):
            pdir = partition_dir(list(values), values)  # (keyed by physical names)
            for offset in range(0, part.num_rows, TARGET_FILE_ROWS):
                name = data_file_name(file_tag(self.spec.txid, self.write_id))
                files.append((f"{pdir}/{name}" if pdir else name, part.slice(offset, TARGET_FILE_ROWS), values))
        self.announced.extend(rel for rel, _, _ in files)
        store.put(self.manifest, json.dumps({"files": self.announced}).encode())
        for relative, chunk, values in files:
            written.append(write_one_file(store, table.table_path, relative, chunk, values))
        return int(conformed.num_rows)

    def _cleanup(self, store: ObjectStore) -> None:
        """Delete every file this attempt announced (written or not: deleting a missing object is fine)."""
        table_path = self.spec.table.table_path
        for relative in self.announced:
            try:
                store.delete(f"{table_path}/{relative}" if table_path else relative)
            except StorageError:
                continue  # still listed in the task manifest: the driver removes it after the job
