"""Which statements a redo runs again, and which keep what they staged (docs/protocol.md, "Redo").

A redo rebuilds one table's staged state on a newer snapshot. Running every statement again is always
correct; a statement may instead keep its staged files when it would do exactly the same on the new state:

* every file it read (its candidates, its own earlier staged files included) is there, the same logical file
  ``(path, DV)``: the concurrent commits did not remove or change it, and no statement run again replaced it;
* no file it did not see may hold a row its conditions match: neither a file the concurrent commits added nor
  one a statement run again wrote differently (its min/max statistics and partition values are checked against
  each of the statement's conditions; a statement without a condition depends on every file).

Its reads are then the same rows, so its result is the same (statements take literals and sources the
application passed in; an application that read data in the transaction is never redone). :class:`FileChanges`
follows, statement by statement, how the new state differs from the state the first run saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from txlake.delta.actions import Add
from txlake.delta.state import Snapshot
from txlake.expr import FileStats
from txlake.txn.staging import FileKey, TableWork, file_key

if TYPE_CHECKING:
    from txlake.txn.sublog import StagedState, TableEffect


class RecordedStatement(Protocol):
    """What a redo knows of a statement: its effect and what it read."""

    @property
    def effect(self) -> TableEffect | None: ...

    @property
    def reads(self) -> tuple[FileKey, ...]: ...


def keepable(work: TableWork, snapshot: Snapshot, statements: Sequence[RecordedStatement]) -> bool:
    """Whether statements of ``work`` may be kept on ``snapshot`` at all: each one's effect is known, the table
    had a snapshot, its metadata (schema, partitioning, properties) and protocol are the same -- a statement run
    again checks them, one kept would not -- and no deletion vector was written (a DV changes a file in place).
    Otherwise the redo runs every statement again."""
    base = work.snapshot
    return (
        base is not None
        and not work.dv_files
        and base.metadata == snapshot.metadata  # schema, partitioning, properties (constraints, append-only...)
        and base.protocol == snapshot.protocol  # features a statement checks before it writes
        and all(s.effect is not None for s in statements)
    )


def changed_files(old: Snapshot | None, new: Snapshot) -> FileChanges:
    """How ``new``'s live files differ from ``old``'s (the concurrent commits a redo runs on top of)."""
    assert old is not None
    gone: set[FileKey] = set()
    fresh: dict[FileKey, Add] = {}
    for path, add in old.files.items():
        now = new.files.get(path)
        if now is None or file_key(now) != file_key(add):
            gone.add(file_key(add))
    for path, add in new.files.items():
        was = old.files.get(path)
        if was is None or file_key(was) != file_key(add):
            fresh[file_key(add)] = add
    return FileChanges(gone, fresh)


class FileChanges:
    """The live files of the first run's state that the new state lacks (``gone``) and those only the new
    state has (``fresh``), just before the next statement."""

    def __init__(self, gone: set[FileKey], fresh: dict[FileKey, Add]) -> None:
        self.gone = gone
        self.fresh = fresh
        self.unsure = False
        """Set when a change could not be followed: every later statement then runs again."""

    def affects(self, statement: RecordedStatement, work: TableWork) -> bool:
        """Whether ``statement`` might do something else on the new state than it did (it then runs again)."""
        effect = statement.effect
        if self.unsure or effect is None or effect.unremoved or effect.dv_files or effect.new_metadata is not None:
            return True
        if any(key in self.gone for key in statement.reads):
            return True
        if not self.fresh or not effect.dml_predicates:
            return False
        schema, parts = work.schema, work.partition_columns
        stats = [FileStats.from_add(a, schema, parts) for a in self.fresh.values()]
        for where in effect.dml_predicates:
            predicate = work.bind(where)
            if predicate is None or any(predicate.may_match(s) for s in stats):
                return True
        return False

    def redone(self, first: TableEffect, again: TableEffect, before: StagedState, work: TableWork) -> None:
        """A statement ran again: its first run's effect was ``first``, this run's ``again`` (from the staged
        state ``before``, on ``work``). Files only one of the two runs has become gone or fresh."""
        if again.dv_files or again.unremoved or first.unremoved:
            self.unsure = True
            return
        first_removed = {file_key(r) for r in first.removed} | {(p, None) for p in first.unstaged}
        again_removed = {file_key(r) for r in again.removed} | {file_key(before.staged[p]) for p in again.unstaged}
        for key in first_removed - again_removed:  # the first run removed it, this one kept it
            if key in self.gone:
                self.gone.discard(key)
                continue
            live = _live(work, key)
            if live is None:
                self.unsure = True
                return
            self.fresh[key] = live
        for key in again_removed - first_removed:  # this run removed a file the first one kept
            if self.fresh.pop(key, None) is None:
                self.gone.add(key)
        self.gone.update(file_key(a) for a in first.staged)
        self.fresh.update((file_key(a), a) for a in again.staged)


def _live(work: TableWork, key: FileKey) -> Add | None:
    path = key[0]
    add = work.added.get(path)
    if add is None and work.snapshot is not None and path not in work.removed:
        add = work.snapshot.files.get(path)
    return add if add is not None and file_key(add) == key else None
