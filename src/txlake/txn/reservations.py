"""Reservations: a transaction that keeps losing the same files to others asks them to wait for its commit.

Redo (docs/protocol.md §3) re-executes a conflicting statement on the newer snapshot; each redo opens a new
window between that snapshot and the claim. Under contention on a few hot files the same transaction can
lose that race again and again while others commit (measured: 80-140 statements redone for one transaction,
10-15 s latency, at 8 clients). A transaction whose statements on a table have been redone
:data:`RESERVE_AFTER` times in one commit therefore posts a *reservation*: one object
``_txlake/reservations/<table id>.<txid>.json`` naming the files of that table its statements read (rewrite
included), as of the snapshot it redid on. A writer that is racing (it lost a claim race or redid within the
last second, see :class:`~txlake.txn.context.LakeContext`) lists the reservations before each claim; if a
reservation of another transaction names a file its own record removes, it waits until the reservation is
withdrawn (the holder committed or gave up), then validates again -- and usually redoes on the holder's
commit. A writer about to redo waits the same way first, for reservations naming a file the redo may read,
so that it redoes once, after the holder's commit. A holder waits only for older reservations (``since``,
then txid), so waiting never forms a cycle.

Reservations are advisory: no invariant depends on them, every commit is validated as before. A failed PUT
only leaves the transaction without priority, a failed LIST lets the writer go ahead, a failed DELETE leaves
a reservation that expires (:data:`RESERVATION_TTL`). A writer waits at most :data:`RESERVATION_WAIT` per
commit for reservations (a crashed holder's included); vacuum deletes reservations older than an hour.
Plain Delta writers never see them.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from txlake.delta.actions import now_ms
from txlake.errors import TxlakeError
from txlake.lakehouse.log import ROOT
from txlake.storage import ObjectMeta, ObjectStore

RESERVATIONS_DIR = f"{ROOT}/reservations/"
RESERVE_AFTER = 2
"""A table whose statements were redone this many times in one commit is reserved for the next attempt."""
RESERVATION_TTL = 10.0
"""Seconds a reservation holds (by its holder's clock; each redo renews it)."""
RESERVATION_WAIT = 2.0
"""Longest a commit waits for reservations of others (all of them together) before it goes ahead."""
WHOLE_TABLE = "*"
"""In a reservation's files: every file of the table. A file's path changes with every rewrite, so a holder
still losing after :data:`WHOLE_AFTER` redos of a table reserves all of it: a writer that checked before the
holder's last renewal would otherwise replace the file it now reads, again and again."""
WHOLE_AFTER = 4
LOOK_INTERVAL = 1.0
"""A client that is not racing still looks at the reservations before a commit that replaces files when it
has not looked for this many seconds: a client that keeps winning never races, yet must see the reservations
of those it starves."""
POLL_FIRST = 0.005
POLL_MAX = 0.05


@dataclass(frozen=True, slots=True)
class Reservation:
    """Transaction ``txid`` asks racing writers not to replace ``files`` of table ``table_id`` before it commits."""

    txid: str
    table_id: str
    files: frozenset[str]
    since_ms: int
    """When the holder first reserved (in this commit): the older reservation goes first."""
    until_ms: int

    @property
    def path(self) -> str:
        return reservation_path(self.table_id, self.txid)

    @property
    def priority(self) -> tuple[int, str]:
        return (self.since_ms, self.txid)

    def to_bytes(self) -> bytes:
        doc = {
            "txid": self.txid,
            "tableId": self.table_id,
            "files": sorted(self.files),
            "since": self.since_ms,
            "until": self.until_ms,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Reservation | None:
        """The reservation, or ``None`` for a malformed object (ignored: reservations are only advice)."""
        try:
            d = json.loads(data)
            files = d["files"]
            if not isinstance(files, list):
                return None
            return cls(
                str(d["txid"]),
                str(d["tableId"]),
                frozenset(str(f) for f in files),
                int(d["since"]),
                int(d["until"]),
            )
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError, MemoryError):
            return None


def reservation_path(table_id: str, txid: str) -> str:
    return f"{RESERVATIONS_DIR}{table_id}.{txid}.json"


def post(store: ObjectStore, reservation: Reservation) -> bool:
    """Write (or renew) ``reservation``; ``False`` if the PUT failed (the transaction goes on without it)."""
    try:
        store.put(reservation.path, reservation.to_bytes())
    except TxlakeError:
        return False
    return True


def withdraw(store: ObjectStore, paths: Iterable[str]) -> None:
    """Delete reservations (best effort: one left behind expires)."""
    paths = list(paths)
    if not paths:
        return
    with contextlib.suppress(TxlakeError):
        store.delete_many(paths)


class ReservationReader:
    """Reads the live reservations of a lakehouse: one LIST, and one GET per reservation not read before.

    A reservation object is rewritten only by its holder; the cache is keyed by path, size and modification
    time, so a renewed one is read again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int, float, str | None], Reservation | None] = {}

    def live(self, store: ObjectStore, tables: Mapping[str, object]) -> list[Reservation]:
        """The unexpired reservations of the tables ``tables`` names (by id); ``[]`` if they cannot be listed.

        A reservation expires at its ``until``, and at the latest :data:`RESERVATION_TTL` after the store last
        wrote it (a holder whose clock runs ahead cannot make one last longer).
        """
        try:
            listed = store.list(RESERVATIONS_DIR)
        except TxlakeError:
            return []
        now = now_ms()
        out = []
        for meta in listed:
            table_id = _table_of(meta.path)
            if table_id is None or table_id not in tables:
                continue
            reservation = self._read(store, meta)
            written = int(meta.last_modified.timestamp() * 1000)
            expires = min(reservation.until_ms, written + int(RESERVATION_TTL * 1000)) if reservation else 0
            if reservation is not None and reservation.table_id == table_id and expires > now:
                out.append(reservation)
        return out

    def _read(self, store: ObjectStore, meta: ObjectMeta) -> Reservation | None:
        key = (meta.path, meta.size, meta.last_modified.timestamp(), meta.e_tag)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        try:
            reservation = Reservation.from_bytes(store.get(meta.path))
        except TxlakeError:  # withdrawn meanwhile, or unreadable now: not waited for
            return None
        if reservation is not None and reservation.path != meta.path:
            reservation = None
        with self._lock:
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[key] = reservation
        return reservation


def _table_of(path: str) -> str | None:
    name = path[len(RESERVATIONS_DIR) :] if path.startswith(RESERVATIONS_DIR) else ""
    table_id, dot, rest = name.partition(".")
    return table_id if dot and rest.endswith(".json") and "/" not in name else None


def blocking(
    reservations: Iterable[Reservation],
    removes: Mapping[str, frozenset[str]],
    *,
    txid: str,
    own: tuple[int, str] | None,
    ignore: frozenset[str] | set[str] = frozenset(),
) -> list[Reservation]:
    """Of ``reservations``, those a commit removing ``removes`` (files by table id) must wait for: another
    transaction's, naming a file it removes (or :data:`WHOLE_TABLE`), older than its own reservation (``own``)
    if it holds one, and not in ``ignore`` (paths waited out already)."""
    return [
        r
        for r in reservations
        if r.txid != txid
        and r.path not in ignore
        and (own is None or r.priority < own)
        and (removed := removes.get(r.table_id))
        and (WHOLE_TABLE in r.files or r.files & removed)
    ]


def pause(waited: int) -> None:
    """Sleep between two looks at the reservations (jittered, growing from 5 ms to 50 ms)."""
    time.sleep(min(POLL_MAX, POLL_FIRST * 1.5**waited) * random.uniform(0.5, 1.0))
