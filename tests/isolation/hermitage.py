"""A Hermitage harness: several open transactions driven step by step in one thread.

Nothing in txlake blocks (optimistic, lazy conflict detection), so every Hermitage case runs
deterministically in one thread with several transaction handles open at once
(``shared/research/isolation-tests.md`` §1 rule 2).

Setup of every case: ``test(id, value)`` with x = (1, 10) and y = (2, 20), in one of three layouts:

* ``one_file``: both rows in one Parquet file of ``h.test`` (one append);
* ``two_files``: the rows in two Parquet files of ``h.test`` (two appends);
* ``two_tables``: the multi-table (MT) variant, x in ``h.a`` and y in ``h.b``.

A case names its tables by label: ``A`` is where x lives and ``B`` where y lives (the same table in the
single-table layouts).

With ``deletion_vectors=True`` every table is a deletion-vector table as Spark leaves one: each initial file holds
every row twice and a plain writer's deletion vector deletes the second copies (the ``deletionVectors`` feature
turned on, then a DV update of every file, adopted). Every rewrite in a case is of a file with a DV, the per-file
statistics are those of the plain layout, and a rewrite that kept a deleted copy would show a row twice.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Literal

import pyarrow as pa
import pyroaring

from txlake import (
    CommitResult,
    ConcurrentTransactionError,
    ConflictError,
    Lakehouse,
    Transaction,
    TransactionClosedError,
)
from txlake.delta import DeltaTable
from txlake.delta.actions import Action, Protocol
from txlake.delta.dv import MAGIC, DeletionVectorDescriptor, z85_encode
from txlake.delta.files import read_file

Level = Literal["snapshot", "write_serializable", "serializable"]
Layout = Literal["one_file", "two_files", "two_tables"]
Label = Literal["A", "B"]
Expectation = Mapping[str, "bool | type[ConflictError] | tuple[type[ConflictError], ...]"]
"""Precision expectation: session name -> ``True`` (commits) or the ``ConflictError`` class(es) it may get."""

LEVELS: tuple[Level, ...] = ("snapshot", "write_serializable", "serializable")
LAYOUTS: tuple[Layout, ...] = ("one_file", "two_files", "two_tables")
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.int64())])
KEYS = {"x": 1, "y": 2}
INITIAL = {1: 10, 2: 20}
_TABLES: dict[Layout, dict[Label, str]] = {
    "one_file": {"A": "h.test", "B": "h.test"},
    "two_files": {"A": "h.test", "B": "h.test"},
    "two_tables": {"A": "h.a", "B": "h.b"},
}


class _Doomed:
    """What a statement returns once an eager conflict doomed its transaction: equal to anything.

    The catalogue allows a conflict at the statement as well as at commit (§1 rule 1); txlake detects
    lazily, so this only keeps the cases valid for an eager implementation.
    """

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return True

    def __add__(self, other: object) -> _Doomed:
        return self

    __radd__ = __add__

    def __repr__(self) -> str:
        return "<doomed>"


DOOMED = _Doomed()


def rows_table(rows: Mapping[int, int]) -> pa.Table:
    return pa.table({"id": list(rows), "value": list(rows.values())}, schema=SCHEMA)


class Session:
    """One transaction of a case, with Hermitage's operations on x, y and predicates."""

    def __init__(self, harness: Hermitage, name: str, tx: Transaction) -> None:
        self.h = harness
        self.name = name
        self.tx = tx
        self.error: ConflictError | None = None
        self.committed = False
        self.aborted = False
        self.result: CommitResult | None = None

    def __repr__(self) -> str:
        state = "committed" if self.committed else f"aborted({self.error!r})" if self.error else self.tx.status
        return f"{self.name}[{state}]"

    # ------------------------------------------------------------------------------------- reads

    def r(self, key: str) -> int | _Doomed | None:
        """``r x``: the value of row ``key`` (``None`` when this transaction sees no such row)."""
        if self.error is not None:
            return DOOMED
        ident = KEYS[key]
        try:
            data = self.tx.read_arrow(self.h.table(self.h.home[ident]), where=f"id = {ident}")
        except ConflictError as e:
            return self._doom(e)
        values = data.column("value").to_pylist()
        assert data.column("id").to_pylist() == [ident] * len(values), f"{self.name} r {key}: wrong rows {data}"
        assert len(values) <= 1, f"{self.name} r {key} sees {len(values)} rows: {values}"
        return values[0] if values else None

    def r_all(self) -> dict[int, int] | _Doomed:
        """``r *``: every row of every table, as ``{id: value}`` (each id must appear once)."""
        return self._rows(None)

    def pr(self, where: str) -> dict[int, int] | _Doomed:
        """``pr P``: the rows matching ``where``, over A ∪ B."""
        return self._rows(where)

    def _rows(self, where: str | None) -> dict[int, int] | _Doomed:
        if self.error is not None:
            return DOOMED
        try:
            parts = [(name, self.tx.read_arrow(name, where=where)) for name in self.h.tables]
        except ConflictError as e:
            return self._doom(e)
        return self.h.collect(parts, who=f"{self.name} read where {where}")

    # ------------------------------------------------------------------------------------ writes

    def w(self, key: str, value: int | str | _Doomed) -> None:
        """``w x=v``: ``UPDATE SET value = v WHERE id = k`` on the table holding ``key``."""
        ident = KEYS[key]
        self._write(
            lambda: self.tx.update(self.h.table(self.h.home[ident]), set={"value": str(value)}, where=f"id = {ident}")
        )

    def pupd(self, set_value: str, where: str | None = None, *, on: Iterable[Label] = ("A", "B")) -> None:
        """``pupd``: ``UPDATE SET value = set_value WHERE where`` on each table of ``on``."""
        for name in self.h.tables_of(on):
            self._write(partial(self.tx.update, name, set={"value": set_value}, where=where))

    def pdel(self, where: str, *, on: Iterable[Label] = ("A", "B")) -> None:
        """``pdel P``: ``DELETE WHERE where`` on each table of ``on``."""
        for name in self.h.tables_of(on):
            self._write(partial(self.tx.delete, name, where=where))

    def ins(self, label: Label, ident: int, value: int) -> None:
        """``ins (id, v)`` into the table labelled ``label``."""
        self.h.home[ident] = label
        self._write(lambda: self.tx.append(self.h.table(label), rows_table({ident: value})))

    def _write(self, statement: Callable[[], object]) -> None:
        if self.error is not None:
            return
        try:
            statement()
        except ConflictError as e:
            self._doom(e)

    # ---------------------------------------------------------------------------------- outcome

    def commit(self) -> bool:
        """``c``: True when the commit succeeded; a conflict is recorded (and its attributes checked)."""
        if self.error is not None:
            try:
                self.tx.commit()
            except (ConflictError, TransactionClosedError):
                return False
            raise AssertionError(f"{self.name} committed after a conflict at a statement: {self.error!r}")
        try:
            self.result = self.tx.commit()
        except ConflictError as e:
            self._doom(e)
            assert self.tx.status == "aborted"
            return False
        assert self.tx.status == "committed"
        self.committed = True
        return True

    def abort(self) -> None:
        """``a``: a deliberate abort."""
        self.tx.abort()
        self.aborted = True
        assert self.tx.status == "aborted"

    @property
    def wrote(self) -> bool:
        return self.committed and self.result is not None and not self.result.read_only

    def _doom(self, error: ConflictError) -> _Doomed:
        """Record a conflict and check its structured attributes (never its message)."""
        assert error.table in self.h.tables, f"{error!r}: table {error.table!r} is not one of {self.h.tables}"
        assert error.read_version == self.tx.read_version, f"{error!r}: read_version {error.read_version}"
        assert isinstance(error.winning_version, int), f"{error!r}: winning_version {error.winning_version!r}"
        self.error = error
        return DOOMED


def delete_ghosts_with_deletion_vectors(lake: Lakehouse, name: str) -> None:
    """As a plain writer (Spark): turn on deletion vectors, then delete every row's second copy with a DV (two
    plain commits, not adopted)."""
    log = lake.delta_log(name)
    table = DeltaTable(lake.store, log.path)
    snap = table.snapshot()
    enable = dataclasses.replace(
        snap.metadata, configuration={**snap.metadata.configuration, "delta.enableDeletionVectors": "true"}
    )
    log.write_commit(snap.version + 1, [Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), enable])
    updates: list[Action] = []
    for add in snap.files.values():
        ids = read_file(lake.store, log.path, add, snap.schema, ()).column("id").to_pylist()
        ghosts = [i for i, ident in enumerate(ids) if ident in ids[:i]]
        bitmap = struct.pack("<I", MAGIC) + pyroaring.BitMap64(ghosts).serialize()
        dv = DeletionVectorDescriptor("i", z85_encode(bitmap), len(bitmap), len(ghosts))
        updates += [dataclasses.replace(add, deletion_vector=dv), add.remove()]
    log.write_commit(snap.version + 2, updates)


class Hermitage:
    """The lakehouse of one case: tables set up in a layout, sessions, and the final checks."""

    def __init__(
        self,
        lake: Lakehouse,
        level: Level,
        layout: Layout,
        *,
        deletion_vectors: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self.lake = lake
        self.level = level
        self.layout = layout
        self.deletion_vectors = deletion_vectors
        self.properties = properties
        self.home: dict[int, Label] = {1: "A", 2: "B"}
        self.sessions: dict[str, Session] = {}
        self._setup()

    @property
    def mt(self) -> bool:
        return self.layout == "two_tables"

    @property
    def tables(self) -> list[str]:
        return sorted(set(_TABLES[self.layout].values()))

    def table(self, label: Label) -> str:
        return _TABLES[self.layout][label]

    def tables_of(self, labels: Iterable[Label]) -> list[str]:
        return list(dict.fromkeys(self.table(label) for label in labels))

    def _setup(self) -> None:
        for name in self.tables:
            self.lake.create_table(name, SCHEMA, properties=self.properties)
        copies = 2 if self.deletion_vectors else 1  # a DV deletes the second copy of each row
        with self.lake.transaction(isolation="snapshot") as tx:
            if self.layout == "one_file":
                tx.append(self.table("A"), pa.concat_tables([rows_table(INITIAL)] * copies))
            else:
                tx.append(self.table("A"), pa.concat_tables([rows_table({1: INITIAL[1]})] * copies))
                tx.append(self.table("B"), pa.concat_tables([rows_table({2: INITIAL[2]})] * copies))
        if self.deletion_vectors:
            for name in self.tables:
                delete_ghosts_with_deletion_vectors(self.lake, name)
            self.lake.sync()
        snap = self.lake.snapshot()
        files = {name: len(snap.delta_snapshot(name).files) for name in self.tables}
        expected = {"one_file": {"h.test": 1}, "two_files": {"h.test": 2}, "two_tables": {"h.a": 1, "h.b": 1}}
        assert files == expected[self.layout], f"layout {self.layout} not set up: {files}"
        self.setup_version = self.lake.version()

    def begin(self, name: str) -> Session:
        """``BEGIN`` of a transaction at the harness's level (its snapshot is taken now, for all tables)."""
        # redo off: these cases check which commits conflict (tests/txn/test_redo.py checks what redo makes of them)
        session = Session(self, name, self.lake.transaction(isolation=self.level, redo=False))
        self.sessions[name] = session
        return session

    def collect(self, parts: Iterable[tuple[str, pa.Table]], *, who: str) -> dict[int, int]:
        """``{id: value}`` from per-table reads; every id appears once, and in its own table."""
        out: dict[int, int] = {}
        for name, data in parts:
            for row in data.to_pylist():
                ident = row["id"]
                assert ident not in out, f"{who}: id {ident} appears twice"
                home = self.home.get(ident)
                assert home is None or self.table(home) == name, f"{who}: id {ident} found in {name}"
                out[ident] = row["value"]
        return out

    # ---------------------------------------------------------------------------------- checks

    def state_at(self, version: int) -> dict[int, int]:
        snap = self.lake.snapshot(version)
        return self.collect(((name, snap.read_arrow(name)) for name in self.tables), who=f"version {version}")

    def fresh_state(self) -> dict[int, int]:
        """The latest state, read in a fresh read-only transaction (which must commit)."""
        tx = self.lake.transaction(isolation=self.level)
        state = self.collect(((name, tx.read_arrow(name)) for name in self.tables), who="fresh reader")
        assert tx.commit().read_only
        return state

    def check(
        self,
        states: Mapping[tuple[str, ...], Mapping[int, int]],
        *,
        forbidden: Iterable[tuple[str, ...]] = (),
    ) -> None:
        """Safety: the set of committed writers is allowed and every version shows exactly their writes.

        ``states`` maps each possible set of committed writers to the state they must leave; the state
        after each writer's commit version must be that of the writers committed up to it (all-or-nothing
        across tables, no intermediate or aborted writes, each row exactly once).
        """
        expected = {frozenset(k): dict(v) for k, v in states.items()}
        writers = sorted((s for s in self.sessions.values() if s.wrote), key=lambda s: s.result.version)  # type: ignore[union-attr]
        committed = frozenset(s.name for s in writers)
        for combo in forbidden:
            assert committed != frozenset(combo), f"{sorted(combo)} all committed under {self.level}: {self.sessions}"
        assert committed in expected, f"unexpected set of committed writers {sorted(committed)}: {self.sessions}"
        assert self.state_at(self.setup_version) == expected[frozenset()]
        done: list[str] = []
        for s in writers:
            assert s.result is not None
            assert self.state_at(s.result.version - 1) == expected[frozenset(done)], f"before {s.name}"
            done.append(s.name)
            assert self.state_at(s.result.version) == expected[frozenset(done)], f"after {s.name}"
        assert self.fresh_state() == expected[committed]

    def assert_outcomes(self, expectation: Expectation) -> None:
        """Precision: each named session commits, or fails with the named conflict class."""
        for name, want in expectation.items():
            s = self.sessions[name]
            if want is True:
                assert s.committed, f"{name} did not commit under {self.level} ({self.layout}): {s.error!r}"
                continue
            assert want is not False
            classes = want if isinstance(want, tuple) else (want,)
            names = "/".join(c.__name__ for c in classes)
            assert not s.committed, f"{name} committed under {self.level} ({self.layout}); expected {names}"
            assert isinstance(s.error, classes), f"{name}: expected {names}, got {s.error!r}"
            if not isinstance(s.error, ConcurrentTransactionError) and ConflictError not in classes:
                assert s.error.files, f"{name}: {s.error!r} names no files"
