"""The transaction sublog: what a running transaction staged, persisted so that another process can resume it
(``Lakehouse.resume``) or clean it up (``Lakehouse.recover``).

Layout under ``_txlake/txns/<txid>/`` (next to the lease, ``txn/lease.py``), every object JSON:

* ``header.json`` -- isolation, read version, redo flag, start time (put-if-absent: one per transaction);
* ``stmt-<n:06d>.json`` -- entry ``n`` (put-if-absent): one statement's logical form (operation, table, SQL
  predicate / SET expressions / merge clauses, and for Arrow or Spark data the *staged files* it produced as its
  source reference) and the physical effect on every table since entry ``n - 1``: files staged and unstaged,
  removes, deletion-vector files, read sets, schema changes. Folding the effects of entries ``0..n`` over the
  snapshots at the read version gives exactly the transaction's staged state after entry ``n``;
* ``claim-<G:020d>.json`` -- written before every claim of (or group intent for) version G: whoever takes the
  transaction over reads ``log/G.json`` to learn whether it claimed;
* ``aborted.json`` -- a tombstone written by ``recover`` after taking the lease over: the transaction will never
  commit; ``resume`` refuses it and vacuum may delete its files early.

A transaction writes a sublog only when it must be resumable or recognisably alive: ``resumable=True``
(an entry after every statement), once it is older than a third of the lease (the statement or claim after that
writes everything so far), or while it holds a lease for another reason (pessimistic intents). A short
transaction writes nothing here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from txlake.delta.actions import Add, Metadata, Remove, now_ms
from txlake.errors import CorruptLogError, ObjectNotFoundError
from txlake.lakehouse.records import Isolation
from txlake.storage import ObjectStore
from txlake.txn.lease import TXNS_DIR, txn_dir

if TYPE_CHECKING:
    from txlake.txn.staging import TableWork

FORMAT_VERSION = 1
LONG_TRANSACTION_FRACTION = 1 / 3
"""A transaction open longer than this share of ``lease_seconds`` starts writing its sublog (and holds a lease)."""
LONG_TRANSACTION_MIN_SECONDS = 5.0
"""...and never before this many seconds: with a short ``lease_seconds`` (tests, fast roll-forward) an ordinary
transaction would otherwise hold a lease whose heartbeat a busy machine can miss (``LeaseLostError``)."""
REPLAYABLE_METHODS = frozenset({"append", "overwrite", "delete", "update", "merge"})


def header_path(txid: str) -> str:
    return f"{txn_dir(txid)}header.json"


def entry_path(txid: str, seq: int) -> str:
    return f"{txn_dir(txid)}stmt-{seq:06d}.json"


def claim_path(txid: str, version: int) -> str:
    return f"{txn_dir(txid)}claim-{version:020d}.json"


def tombstone_path(txid: str) -> str:
    return f"{txn_dir(txid)}aborted.json"


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _loads(data: bytes, path: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise CorruptLogError(f"{path} is not a txlake sublog object: {exc}") from exc
    if not isinstance(value, dict):
        raise CorruptLogError(f"{path} is not a txlake sublog object")
    return value


# ------------------------------------------------------------------------------------------------ records


@dataclass(frozen=True, slots=True)
class SublogHeader:
    """What a resumer needs before any statement: where the transaction started and how it validates."""

    txid: str
    isolation: Isolation
    read_version: int
    redo: bool
    started_ms: int
    owner: str = ""

    def to_bytes(self) -> bytes:
        return _dumps(
            {
                "format": FORMAT_VERSION,
                "txid": self.txid,
                "isolation": self.isolation,
                "readVersion": self.read_version,
                "redo": self.redo,
                "started": self.started_ms,
                "owner": self.owner,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> SublogHeader:
        d = _loads(data, path)
        try:
            return cls(
                txid=str(d["txid"]),
                isolation=d["isolation"],
                read_version=int(d["readVersion"]),
                redo=bool(d["redo"]),
                started_ms=int(d["started"]),
                owner=str(d.get("owner") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptLogError(f"{path} is not a txlake sublog header: {exc}") from exc


@dataclass(frozen=True, slots=True)
class TableEffect:
    """The change of one table's staged state between two sublog entries (a physical effect)."""

    table_id: str
    path: str
    staged: tuple[Add, ...] = ()
    """Files now staged that were not (written by this transaction, or re-added)."""
    unstaged: tuple[str, ...] = ()
    """Paths of staged files no longer staged (dropped again by a later statement, or a redo)."""
    removed: tuple[Remove, ...] = ()
    """Removes of snapshot files."""
    unremoved: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    dml_predicates: tuple[str | None, ...] = ()
    dml_files: tuple[str, ...] = ()
    query_predicates: tuple[str | None, ...] = ()
    query_files: tuple[str, ...] = ()
    only_appends: bool = True
    dv_files: tuple[str, ...] = ()
    new_metadata: Metadata | None = None
    reset: bool = False
    """The table's staged state was rebuilt from scratch (a redo): apply onto an empty state."""

    def to_json(self) -> dict[str, Any]:
        return {
            "tableId": self.table_id,
            "path": self.path,
            "staged": [a.to_json()["add"] for a in self.staged],
            "unstaged": list(self.unstaged),
            "removed": [r.to_json()["remove"] for r in self.removed],
            "unremoved": list(self.unremoved),
            "operations": list(self.operations),
            "dmlPredicates": list(self.dml_predicates),
            "dmlFiles": list(self.dml_files),
            "queryPredicates": list(self.query_predicates),
            "queryFiles": list(self.query_files),
            "onlyAppends": self.only_appends,
            "dvFiles": list(self.dv_files),
            "newMetadata": None if self.new_metadata is None else self.new_metadata.to_json()["metaData"],
            "reset": self.reset,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableEffect:
        meta = d.get("newMetadata")
        return cls(
            table_id=str(d["tableId"]),
            path=str(d["path"]),
            staged=tuple(Add.from_json(a) for a in d.get("staged") or ()),
            unstaged=tuple(d.get("unstaged") or ()),
            removed=tuple(Remove.from_json(r) for r in d.get("removed") or ()),
            unremoved=tuple(d.get("unremoved") or ()),
            operations=tuple(d.get("operations") or ()),
            dml_predicates=tuple(d.get("dmlPredicates") or ()),
            dml_files=tuple(d.get("dmlFiles") or ()),
            query_predicates=tuple(d.get("queryPredicates") or ()),
            query_files=tuple(d.get("queryFiles") or ()),
            only_appends=bool(d.get("onlyAppends", True)),
            dv_files=tuple(d.get("dvFiles") or ()),
            new_metadata=None if meta is None else Metadata.from_json(meta),
            reset=bool(d.get("reset", False)),
        )


@dataclass(frozen=True, slots=True)
class StatementForm:
    """A statement's logical form: the method, its table and its arguments as JSON (SQL strings, mappings);
    data the application passed in (Arrow, Spark) is referenced by the files the statement staged."""

    method: str
    table: str
    table_id: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    source_files: tuple[str, ...] | None = None
    """Paths of the files holding the statement's data (``append``/``overwrite``), ``None`` when it has none."""
    replayable: bool = True
    """Whether a redo can re-execute it from this form alone (not a merge of an Arrow or Spark source, nor an
    overwrite with a condition and data)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "table": self.table,
            "tableId": self.table_id,
            "arguments": dict(self.arguments),
            "sourceFiles": None if self.source_files is None else list(self.source_files),
            "replayable": self.replayable,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StatementForm:
        source = d.get("sourceFiles")
        return cls(
            method=str(d["method"]),
            table=str(d["table"]),
            table_id=str(d["tableId"]),
            arguments=dict(d.get("arguments") or {}),
            source_files=None if source is None else tuple(source),
            replayable=bool(d.get("replayable", True)),
        )


@dataclass(frozen=True, slots=True)
class SublogEntry:
    """Entry ``seq``: a statement (or ``None``: a flush of other changes, e.g. a redo or a read) and the effects
    since the previous entry."""

    seq: int
    statement: StatementForm | None
    effects: tuple[TableEffect, ...] = ()
    read_data: bool = False
    resumable: bool = True
    """False once the transaction did something ``resume`` cannot rebuild (catalog changes, a created table)."""
    written_ms: int = 0

    def to_bytes(self) -> bytes:
        return _dumps(
            {
                "seq": self.seq,
                "statement": None if self.statement is None else self.statement.to_json(),
                "effects": [e.to_json() for e in self.effects],
                "readData": self.read_data,
                "resumable": self.resumable,
                "written": self.written_ms,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> SublogEntry:
        d = _loads(data, path)
        try:
            statement = d.get("statement")
            return cls(
                seq=int(d["seq"]),
                statement=None if statement is None else StatementForm.from_json(statement),
                effects=tuple(TableEffect.from_json(e) for e in d.get("effects") or ()),
                read_data=bool(d.get("readData", False)),
                resumable=bool(d.get("resumable", True)),
                written_ms=int(d.get("written") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptLogError(f"{path} is not a txlake sublog entry: {exc}") from exc


# ---------------------------------------------------------------------------------------------- staged state


@dataclass(frozen=True, slots=True)
class StagedState:
    """One table's staged state as the sublog sees it (a copy: later statements do not change it)."""

    table_id: str
    path: str
    staged: Mapping[str, Add] = field(default_factory=dict)
    removed: Mapping[str, Remove] = field(default_factory=dict)
    operations: tuple[str, ...] = ()
    dml_predicates: tuple[str | None, ...] = ()
    dml_files: frozenset[str] = frozenset()
    query_predicates: tuple[str | None, ...] = ()
    query_files: frozenset[str] = frozenset()
    only_appends: bool = True
    dv_files: tuple[str, ...] = ()
    new_metadata: Metadata | None = None
    generation: int = 0
    """Which TableWork object it was taken from (a redo replaces it: the next effect then resets)."""

    @classmethod
    def of(cls, work: TableWork) -> StagedState:
        return cls(
            table_id=work.entry.id,
            path=work.entry.path,
            staged=dict(work.added),
            removed=dict(work.removed),
            operations=tuple(work.operations),
            dml_predicates=tuple(work.dml_predicates),
            dml_files=frozenset(work.dml_files),
            query_predicates=tuple(work.query_predicates),
            query_files=frozenset(work.query_files),
            only_appends=work.only_appends,
            dv_files=tuple(work.dv_files),
            new_metadata=work.new_metadata,
            generation=id(work),
        )

    def effect_since(self, before: StagedState | None) -> TableEffect | None:
        """The effect that turns ``before`` into this state; ``None`` when nothing changed."""
        reset = before is not None and (before.generation != self.generation or not self._extends(before))
        base = StagedState(self.table_id, self.path) if before is None or reset else before
        n_ops, n_dml, n_query, n_dv = (
            len(base.operations),
            len(base.dml_predicates),
            len(base.query_predicates),
            len(base.dv_files),
        )
        effect = TableEffect(
            table_id=self.table_id,
            path=self.path,
            staged=tuple(a for p, a in self.staged.items() if base.staged.get(p) != a),
            unstaged=tuple(p for p in base.staged if p not in self.staged),
            removed=tuple(r for p, r in self.removed.items() if base.removed.get(p) != r),
            unremoved=tuple(p for p in base.removed if p not in self.removed),
            operations=self.operations[n_ops:],
            dml_predicates=self.dml_predicates[n_dml:],
            dml_files=tuple(sorted(self.dml_files - base.dml_files)),
            query_predicates=self.query_predicates[n_query:],
            query_files=tuple(sorted(self.query_files - base.query_files)),
            only_appends=self.only_appends,
            dv_files=self.dv_files[n_dv:],
            new_metadata=self.new_metadata if self.new_metadata != base.new_metadata else None,
            reset=reset,
        )
        unchanged = (
            not reset
            and not effect.staged
            and not effect.unstaged
            and not effect.removed
            and not effect.unremoved
            and not effect.operations
            and not effect.dml_predicates
            and not effect.dml_files
            and not effect.query_predicates
            and not effect.query_files
            and not effect.dv_files
            and effect.new_metadata is None
            and self.only_appends == base.only_appends
        )
        return None if unchanged else effect

    def _extends(self, before: StagedState) -> bool:
        """Whether this state grew from ``before`` (lists only grow within one TableWork)."""
        return (
            self.operations[: len(before.operations)] == before.operations
            and self.dml_predicates[: len(before.dml_predicates)] == before.dml_predicates
            and self.query_predicates[: len(before.query_predicates)] == before.query_predicates
            and self.dv_files[: len(before.dv_files)] == before.dv_files
            and before.dml_files <= self.dml_files
            and before.query_files <= self.query_files
        )

    def apply(self, effect: TableEffect) -> StagedState:
        """The state after ``effect`` (pure)."""
        base = StagedState(self.table_id, effect.path) if effect.reset else self
        staged = {p: a for p, a in base.staged.items() if p not in set(effect.unstaged)}
        staged.update((a.path, a) for a in effect.staged)
        removed = {p: r for p, r in base.removed.items() if p not in set(effect.unremoved)}
        removed.update((r.path, r) for r in effect.removed)
        return StagedState(
            table_id=self.table_id,
            path=effect.path,
            staged=staged,
            removed=removed,
            operations=base.operations + effect.operations,
            dml_predicates=base.dml_predicates + effect.dml_predicates,
            dml_files=base.dml_files | frozenset(effect.dml_files),
            query_predicates=base.query_predicates + effect.query_predicates,
            query_files=base.query_files | frozenset(effect.query_files),
            only_appends=effect.only_appends,
            dv_files=base.dv_files + effect.dv_files,
            new_metadata=effect.new_metadata if effect.new_metadata is not None else base.new_metadata,
        )

    def same_as(self, other: StagedState) -> bool:
        """Equal in everything a commit uses (``generation`` is this process's bookkeeping only)."""
        return _state_fields(self) == _state_fields(other)


def _state_fields(state: StagedState) -> tuple[Any, ...]:
    return (
        state.table_id,
        state.path,
        dict(state.staged),
        dict(state.removed),
        state.operations,
        state.dml_predicates,
        state.dml_files,
        state.query_predicates,
        state.query_files,
        state.only_appends,
        state.dv_files,
        state.new_metadata,
    )


def fold(entries: Iterable[SublogEntry]) -> dict[str, StagedState]:
    """Every table's staged state after ``entries`` (in order), from empty states."""
    states: dict[str, StagedState] = {}
    for entry in entries:
        for effect in entry.effects:
            state = states.get(effect.table_id) or StagedState(effect.table_id, effect.path)
            states[effect.table_id] = state.apply(effect)
    return states


# ------------------------------------------------------------------------------------------ logical forms


def statement_form(
    method: str,
    name: str,
    table_id: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    source_files: Sequence[str],
) -> StatementForm:
    """The logical form of ``method(name, *args, **kwargs)``: data arguments become ``source_files``."""
    arguments = dict(kwargs)
    positional = {
        "append": ("data",),
        "overwrite": ("data", "where"),
        "delete": ("where",),
        "update": ("set", "where"),
        "merge": ("source", "on"),
    }.get(method, ())
    arguments.update(zip(positional, args, strict=False))
    data = arguments.pop("data", None) if method in ("append", "overwrite") else None
    source = arguments.pop("source", None) if method == "merge" else None
    replayable = method in REPLAYABLE_METHODS
    files: tuple[str, ...] | None = None
    if method in ("append", "overwrite"):
        files = tuple(source_files)
        # an overwrite with a condition stages rewritten files and the data together: not told apart
        replayable = replayable and not (method == "overwrite" and arguments.get("where") is not None)
    if method == "merge":
        replayable = False  # the source rows are in no file of ours
        arguments["source"] = {"rows": _rows(source)}
    if data is not None:
        arguments["data"] = {"rows": _rows(data)}
    for key, value in list(arguments.items()):
        if not _json_ready(value):
            arguments[key] = repr(value)
            replayable = False
    return StatementForm(method, name, table_id, arguments, files, replayable)


def _rows(data: object) -> int | None:
    return int(data.num_rows) if isinstance(data, pa.Table) else None


def _json_ready(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# ------------------------------------------------------------------------------------------------ writing


class SublogWriter:
    """Writes one transaction's sublog as it runs (inactive, and free, until the transaction needs one)."""

    def __init__(self, store: ObjectStore, header: SublogHeader, *, synchronous: bool) -> None:
        self.store = store
        self.header = header
        self.synchronous = synchronous
        """``resumable=True``: an entry after every statement. Otherwise only once activated (long, leased)."""
        self.active = False
        self._seq = 0
        self._written: dict[str, StagedState] = {}
        self._pending: list[StatementForm] = []
        self._keys: list[str] = []
        self._claims: set[int] = set()

    @property
    def keys(self) -> list[str]:
        """Objects this writer put (deleted when the transaction ends)."""
        return list(self._keys)

    def due(self, age_seconds: float, lease_seconds: float, leased: bool) -> bool:
        """Whether the sublog must be written now."""
        long = age_seconds >= max(lease_seconds * LONG_TRANSACTION_FRACTION, LONG_TRANSACTION_MIN_SECONDS)
        return self.active or self.synchronous or leased or long

    def note(self, form: StatementForm) -> None:
        """A statement ran (its entry is written at the next flush)."""
        self._pending.append(form)

    def start(self) -> None:
        """Activate: put the header (once)."""
        if self.active:
            return
        key = header_path(self.header.txid)
        self.store.put_if_absent(key, self.header.to_bytes())
        self._keys.append(key)
        self.active = True

    def flush(self, works: Iterable[TableWork], *, read_data: bool, resumable: bool) -> None:
        """Write the pending statements and the effects since the last entry (nothing if nothing changed)."""
        self.start()
        effects: list[TableEffect] = []
        states: dict[str, StagedState] = {}
        for work in works:
            state = StagedState.of(work)
            states[state.table_id] = state
            effect = state.effect_since(self._written.get(state.table_id))
            if effect is not None:
                effects.append(effect)
        pending: list[StatementForm | None] = list(self._pending) or ([None] if effects else [])
        for i, form in enumerate(pending):
            last = i == len(pending) - 1
            entry = SublogEntry(
                self._seq,
                form,
                tuple(effects) if last else (),
                read_data=read_data,
                resumable=resumable,
                written_ms=now_ms(),
            )
            key = entry_path(self.header.txid, self._seq)
            self.store.put_if_absent(key, entry.to_bytes())
            self._keys.append(key)
            self._seq += 1
        self._pending = []
        self._written.update(states)

    def before_claim(self, version: int) -> None:
        """Tell a future resumer that this transaction may claim ``version`` (before the claim or intent)."""
        if version in self._claims:
            return
        key = claim_path(self.header.txid, version)
        self.store.put(key, _dumps({"version": version, "at": now_ms()}))
        self._keys.append(key)
        self._claims.add(version)

    def resume_from(self, seq: int, states: Mapping[str, StagedState], keys: Sequence[str]) -> None:
        """Continue a sublog another process wrote (``resume``): entries from ``seq`` on."""
        self.active = True
        self._seq = seq
        self._keys = list(keys)
        self._written = dict(states)

    def adopt_written(self, works: Iterable[TableWork]) -> None:
        """The rebuilt ``works`` are what the sublog holds (their ``generation`` changed, their content not)."""
        for work in works:
            self._written[work.entry.id] = StagedState.of(work)

    def delete(self) -> None:
        """Delete the objects this writer put (the transaction ended; best effort, callers handle errors)."""
        keys = [k for k in self._keys if not k.endswith("/aborted.json")]
        if keys:
            self.store.delete_many(keys)
        self._keys = []


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True, slots=True)
class Sublog:
    """A transaction's sublog as stored (one LIST, one GET per object)."""

    txid: str
    header: SublogHeader | None
    entries: tuple[SublogEntry, ...]
    claims: tuple[int, ...]
    aborted: bool
    keys: tuple[str, ...]
    """Every object under the transaction's directory (lease, Spark staging and all)."""
    newest_ms: int = 0
    """When its holder last wrote to it (the newest header, entry or claim marker): for guard ages."""
    aborted_ms: int = 0
    """When the tombstone was written (0: none)."""

    @property
    def resumable(self) -> bool:
        return all(e.resumable for e in self.entries)

    def staged_states(self) -> dict[str, StagedState]:
        return fold(self.entries)

    def files(self) -> list[tuple[str, str]]:
        """(table path, file path) of every data file any entry staged, plus deletion-vector keys as ("", key):
        the transaction's files that may exist (a file staged and unstaged again may have been deleted)."""
        out: dict[tuple[str, str], None] = {}
        for entry in self.entries:
            for effect in entry.effects:
                for add in effect.staged:
                    out[(effect.path, add.path)] = None
                for key in effect.dv_files:
                    out[("", key)] = None
        return list(out)


def read_sublog(store: ObjectStore, txid: str) -> Sublog:
    """Read ``txid``'s sublog (entries in order; a gap ends it: an entry not written is not there)."""
    metas = store.list(txn_dir(txid))
    header: SublogHeader | None = None
    entries: dict[int, SublogEntry] = {}
    claims: list[int] = []
    aborted = False
    for meta in metas:
        name = meta.path.rsplit("/", 1)[-1]
        if "/" in meta.path[len(txn_dir(txid)) :]:
            continue  # Spark staging below the directory
        try:
            if name == "header.json":
                header = SublogHeader.from_bytes(store.get(meta.path), path=meta.path)
            elif name.startswith("stmt-") and name.endswith(".json"):
                entry = SublogEntry.from_bytes(store.get(meta.path), path=meta.path)
                entries[entry.seq] = entry
            elif name.startswith("claim-") and name.endswith(".json"):
                claims.append(int(name[len("claim-") : -len(".json")]))
            elif name == "aborted.json":
                aborted = True
        except ObjectNotFoundError:
            continue  # deleted meanwhile (the transaction ended)
    ordered: list[SublogEntry] = []
    while len(ordered) in entries:
        ordered.append(entries[len(ordered)])
    written = [m for m in metas if m.path.rsplit("/", 1)[-1].startswith(("header", "stmt-", "claim-"))]
    newest = max((int(m.last_modified.timestamp() * 1000) for m in written), default=0)
    tombstone = max(
        (int(m.last_modified.timestamp() * 1000) for m in metas if m.path.endswith("/aborted.json")), default=0
    )
    keys = tuple(m.path for m in metas)
    return Sublog(txid, header, tuple(ordered), tuple(sorted(claims)), aborted, keys, newest, tombstone)


def list_transactions(store: ObjectStore) -> dict[str, list[str]]:
    """txid -> keys of every transaction directory under ``_txlake/txns/`` (one paginated LIST)."""
    out: dict[str, list[str]] = {}
    for meta in store.list(f"{TXNS_DIR}/"):
        rest = meta.path[len(TXNS_DIR) + 1 :]
        txid, _, _ = rest.partition("/")
        if txid:
            out.setdefault(txid, []).append(meta.path)
    return out


def write_tombstone(store: ObjectStore, txid: str, reason: str) -> None:
    """Mark ``txid`` aborted for good (after taking its lease over)."""
    store.put(tombstone_path(txid), _dumps({"txid": txid, "reason": reason, "at": now_ms()}))


def age_seconds(started_wall: float) -> float:
    return time.time() - started_wall


__all__ = [
    "LONG_TRANSACTION_FRACTION",
    "LONG_TRANSACTION_MIN_SECONDS",
    "StagedState",
    "StatementForm",
    "Sublog",
    "SublogEntry",
    "SublogHeader",
    "SublogWriter",
    "TableEffect",
    "claim_path",
    "entry_path",
    "fold",
    "header_path",
    "list_transactions",
    "read_sublog",
    "statement_form",
    "tombstone_path",
    "write_tombstone",
]
