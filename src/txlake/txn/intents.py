"""Pessimistic concurrency: intent markers that queue writers of a table instead of letting them abort.

A pessimistic transaction (``lake.transaction(concurrency="pessimistic")``) places an *intent marker* on every
table before it first reads or writes it: the object ``_txlake/intents/<table-id>/<seq:020d>-<txid>.json``
(never under ``_delta_log``: plain Delta clients do not see it). Markers are ordered by ``(seq, txid)``; the
holder of a marker proceeds once every earlier marker on the table is gone or belongs to a dead holder, so
the pessimistic transactions of a table run one after the other (strict two-phase locking at table
granularity), and a transaction that waited reads the table at the newest decided version: the one its
predecessors committed. See ``docs/protocol.md``, "Pessimistic mode", for the invariants and why they hold.

* **Placing** (LIST, put-if-absent, LIST): the next sequence number is one past the highest listed. A marker
  is *settled* when the LIST after its PUT shows no marker ordered after it; otherwise it is withdrawn and
  placed again at the end. This closes the race where a slow placer lands below a marker whose holder
  already proceeded (the sequence number it picked was freed meanwhile).
* **Liveness**: every holder holds its transaction's lease (:mod:`txlake.txn.lease`) *before* placing its
  first marker. A marker is dead when its holder's lease has expired, or when the holder has no lease and the
  marker is older than :data:`ORPHAN_GRACE_SECONDS` (it ended without deleting it). Whoever finds a dead
  marker deletes it.
* **Deadlocks**: a waiting holder publishes whom it waits for in its lease (``info["waits_for"]``) and
  follows those edges through the leases of the transactions ahead of it. A cycle makes its youngest member
  (latest lease start) raise :class:`~txlake.errors.DeadlockError`; the others keep waiting.
* **Release**: the markers are deleted when the transaction ends (committed, aborted, or claimed and left to
  roll-forward), before its lease; a crashed holder's expire with its lease.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from txlake.delta.actions import now_ms
from txlake.errors import (
    CorruptLogError,
    DeadlockError,
    IntentTimeoutError,
    InvalidArgumentError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    TxlakeError,
)
from txlake.lakehouse.log import LogView
from txlake.storage import ObjectMeta, ObjectStore
from txlake.txn.lease import Lease, LeaseHandle, lease_path, read_lease

if TYPE_CHECKING:
    from txlake.txn.context import LakeContext

Concurrency = Literal["optimistic", "pessimistic"]
CONCURRENCY_MODES: tuple[Concurrency, ...] = ("optimistic", "pessimistic")
INTENTS_DIR = "_txlake/intents"
ORPHAN_GRACE_SECONDS = 60.0
"""A marker whose holder has no lease is dead once it is this old (it ended, or a crash lost the delete)."""
POLL_FIRST_DELAY = 0.002
POLL_MAX_DELAY = 0.05
"""A waiting holder LISTs the table's markers again after 2 ms, backing off to 50 ms (with jitter)."""
DEADLOCK_CHECK_AFTER = 0.02
"""A holder looks for a waits-for cycle once it has waited this long (most waits end sooner)."""
DEADLOCK_CHECK_INTERVAL = 0.1
"""Then again at most this often (each look reads the leases along the waits-for edges)."""
DEADLOCK_CONFIRM = 0.2
"""A cycle counts only when seen again at least this long after it was first seen: an edge read from a lease
may be stale (its owner saw a marker that was withdrawn a moment later and has not polled since); a real cycle
persists until one of its members gives up."""

_RELEASED = threading.Condition()
"""Notified whenever a transaction of this process releases its markers: its waiters look again at once instead
of at their next poll (other processes' waiters poll)."""


def check_concurrency(concurrency: object) -> Concurrency:
    """``concurrency`` as a mode; :class:`InvalidArgumentError` for anything else."""
    if concurrency not in CONCURRENCY_MODES:
        raise InvalidArgumentError(
            f"concurrency must be one of {CONCURRENCY_MODES}, got {concurrency!r}", argument="concurrency"
        )
    return concurrency


def intents_dir(table_id: str) -> str:
    return f"{INTENTS_DIR}/{table_id}/"


def marker_path(table_id: str, seq: int, txid: str) -> str:
    return f"{INTENTS_DIR}/{table_id}/{seq:020d}-{txid}.json"


@dataclass(frozen=True, slots=True, order=True)
class MarkerKey:
    """A marker as a LIST names it: its place in the table's queue, and whose it is."""

    seq: int
    txid: str
    path: str
    placed_ms: int

    @classmethod
    def parse(cls, meta: ObjectMeta) -> MarkerKey | None:
        """The marker a listed object is, or ``None`` for anything else under the directory."""
        name = meta.path.rsplit("/", 1)[-1]
        stem, dot, ext = name.partition(".")
        seq, dash, txid = stem.partition("-")
        if ext != "json" or not dot or not dash or not seq.isdigit() or not txid:
            return None
        return cls(int(seq), txid, meta.path, int(meta.last_modified.timestamp() * 1000))


@dataclass(frozen=True, slots=True)
class IntentMarker:
    """What a marker holds, for people and tools reading it (the queue needs only its name)."""

    txid: str
    table_id: str
    table: str
    seq: int
    lease: str
    holds: tuple[str, ...]
    """The tables whose markers the transaction held when it placed this one (its earlier locks)."""
    placed_ms: int
    granularity: str = "table"

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "txid": self.txid,
                "tableId": self.table_id,
                "table": self.table,
                "seq": self.seq,
                "granularity": self.granularity,
                "lease": self.lease,
                "holds": list(self.holds),
                "placed": self.placed_ms,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> IntentMarker:
        try:
            d = json.loads(data)
            return cls(
                txid=str(d["txid"]),
                table_id=str(d["tableId"]),
                table=str(d["table"]),
                seq=int(d["seq"]),
                lease=str(d["lease"]),
                holds=tuple(str(t) for t in d.get("holds") or ()),
                placed_ms=int(d["placed"]),
                granularity=str(d.get("granularity", "table")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"{path} is not a txlake intent marker: {exc}") from exc


def list_markers(store: ObjectStore, table_id: str) -> list[MarkerKey]:
    """The table's markers in queue order (one LIST)."""
    keys = (MarkerKey.parse(meta) for meta in store.list(intents_dir(table_id)))
    return sorted(key for key in keys if key is not None)


def holder_dead(lease: Lease | None, marker: MarkerKey, *, at_ms: int | None = None) -> bool:
    """Whether ``marker``'s holder is gone: its lease expired, or it has none and the marker is old."""
    now = now_ms() if at_ms is None else at_ms
    if lease is None:
        return now - marker.placed_ms >= ORPHAN_GRACE_SECONDS * 1000
    return lease.expired(now)


class IntentQueue:
    """The intent markers one pessimistic transaction holds, and its waits for the markers ahead of them."""

    def __init__(
        self,
        store: ObjectStore,
        txid: str,
        hold_lease: Callable[..., LeaseHandle],
        *,
        timeout: float,
    ) -> None:
        self.store = store
        self.txid = txid
        self._hold_lease = hold_lease
        self.timeout = timeout
        self.held: dict[str, str] = {}
        """Table id -> path of this transaction's settled marker on it."""
        self._leases: dict[str, Lease | None] = {}
        self._waits_for: tuple[str, ...] = ()
        self._cycle_seen: tuple[frozenset[str], float] | None = None
        self._placed: set[str] = set()
        """Every marker path this transaction put (or may have put): all deleted when it ends."""
        self.waited = 0.0
        """Seconds spent waiting for markers ahead (for benchmarks and tests)."""

    # ------------------------------------------------------------------------------------------ acquire

    def acquire(self, table_id: str, table: str) -> None:
        """Place a marker on the table and wait until every earlier one is gone or dead.

        Raises :class:`DeadlockError` when this transaction is the youngest of a waits-for cycle and
        :class:`IntentTimeoutError` after ``timeout`` seconds; its marker on the table is withdrawn then (the
        others stay until the transaction ends).
        """
        if table_id in self.held:
            return
        lease = self._hold_lease(concurrency="pessimistic")  # before the first marker: a marker never outlives
        deadline = time.monotonic() + self.timeout  # its holder's lease
        while True:
            path, markers = self._place(table_id, table, lease)
            try:
                acquired = self._wait(table_id, table, path, markers, deadline)
            except Exception:  # a crash or an interrupt (BaseException) leaves the marker to expire with the lease
                with contextlib.suppress(TxlakeError):
                    self._delete(path)
                raise
            finally:
                if self._waits_for:
                    with contextlib.suppress(TxlakeError):
                        self._publish_waits(())
            if acquired:
                self.held[table_id] = path
                return
            lease.ensure()  # our marker was deleted as a dead holder's: LeaseLostError unless we still hold ours

    def _place(self, table_id: str, table: str, lease: LeaseHandle) -> tuple[str, list[MarkerKey]]:
        """Put a settled marker at the end of the table's queue; its path and the listing that settled it."""
        while True:
            markers = list_markers(self.store, table_id)
            seq = markers[-1].seq + 1 if markers else 0
            path = marker_path(table_id, seq, self.txid)
            marker = IntentMarker(
                txid=self.txid,
                table_id=table_id,
                table=table,
                seq=seq,
                lease=lease_path(self.txid, lease.lease.epoch),
                holds=tuple(self.held),
                placed_ms=now_ms(),
            )
            self._placed.add(path)  # deleted when the transaction ends, whatever happens from here on
            try:
                self.store.put_if_absent(path, marker.to_bytes())
            except ObjectAlreadyExistsError:
                continue  # our own earlier attempt whose answer was lost: not settled either, try again
            after = list_markers(self.store, table_id)
            if all((m.seq, m.txid) <= (seq, self.txid) for m in after):
                return path, after
            # someone placed after us before we saw ourselves: our number may be one that was freed below a
            # holder that already proceeded; withdraw and queue again at the end
            self._delete(path)
            time.sleep(random.uniform(0, POLL_FIRST_DELAY))

    def _wait(self, table_id: str, table: str, path: str, markers: list[MarkerKey], deadline: float) -> bool:
        """Wait until no live marker is ahead of ours: ``True``; ``False`` if ours was deleted meanwhile."""
        started = time.monotonic()
        next_check = started + DEADLOCK_CHECK_AFTER
        delay = POLL_FIRST_DELAY
        try:
            while True:
                mine = next((m for m in markers if m.path == path), None)
                if mine is None:
                    return False
                live = self._live([m for m in markers if m < mine])
                if not live:
                    return True
                holders = tuple(dict.fromkeys(m.txid for m in live))
                if holders != self._waits_for:
                    self._publish_waits(holders)
                now = time.monotonic()
                # holding no other marker, we are in no cycle that does not also exist without us (whoever
                # waits for us waits for those ahead of us too): leave it to the members that hold something
                if self.held and now >= next_check:
                    self._check_cycle(table, holders)
                    next_check = now + DEADLOCK_CHECK_INTERVAL
                if now >= deadline:
                    raise IntentTimeoutError(
                        f"transaction {self.txid} waited {self.timeout:.0f}s for the intent markers of "
                        f"{', '.join(holders)} on {table}",
                        table=table,
                        holders=holders,
                    )
                with _RELEASED:
                    woken = _RELEASED.wait(delay * random.uniform(0.5, 1.0))
                delay = POLL_FIRST_DELAY if woken else min(delay * 1.5, POLL_MAX_DELAY)
                markers = list_markers(self.store, table_id)
        finally:
            self.waited += time.monotonic() - started

    def _lease_of(self, txid: str, *, fresh: bool = False) -> Lease | None:
        """The holder's lease as last read; read again when asked, or when the one read has run out."""
        known = self._leases.get(txid)
        if fresh or txid not in self._leases or known is None or known.expired():
            known = read_lease(self.store, txid)
            self._leases[txid] = known
        return known

    def _live(self, ahead: Sequence[MarkerKey]) -> list[MarkerKey]:
        """The markers ahead whose holders are alive; dead holders' markers are deleted on the way."""
        live = []
        for marker in ahead:
            if marker.txid == self.txid:
                continue  # a withdrawn leftover of ours (deleted below)
            if holder_dead(self._lease_of(marker.txid), marker):
                with contextlib.suppress(ObjectNotFoundError):
                    self.store.delete(marker.path)
                continue
            live.append(marker)
        for marker in ahead:
            if marker.txid == self.txid:
                with contextlib.suppress(ObjectNotFoundError):
                    self.store.delete(marker.path)
        return live

    def _publish_waits(self, holders: tuple[str, ...]) -> None:
        self._waits_for = holders
        self._hold_lease(waits_for=list(holders))

    def _check_cycle(self, table: str, holders: Sequence[str]) -> None:
        """Follow waits-for edges from the holders ahead (fresh leases); a cycle back to us whose youngest
        member we are raises :class:`DeadlockError`."""
        mine = self._hold_lease().lease
        leases: dict[str, Lease] = {self.txid: mine}
        edges: dict[str, tuple[str, ...]] = {self.txid: tuple(holders)}
        frontier = list(holders)
        while frontier:
            txid = frontier.pop()
            if txid in leases:
                continue
            lease = self._lease_of(txid, fresh=True)
            if lease is None or lease.expired():
                continue
            leases[txid] = lease
            edges[txid] = tuple(str(t) for t in lease.info.get("waits_for") or ())
            frontier.extend(t for t in edges[txid] if t not in leases)
        cycle = _cycle_through(self.txid, edges)
        if cycle is None:
            self._cycle_seen = None
            return
        now = time.monotonic()
        members = frozenset(cycle)
        if self._cycle_seen is None or self._cycle_seen[0] != members:
            self._cycle_seen = (members, now)
            return
        if now - self._cycle_seen[1] < DEADLOCK_CONFIRM:
            return
        youngest = max(cycle, key=lambda t: (leases[t].started_ms, t))
        if youngest == self.txid:
            raise DeadlockError(
                f"transaction {self.txid} gives up its intent on {table}: it is the youngest of the waits-for "
                f"cycle {' -> '.join([*cycle, cycle[0]])}",
                cycle=cycle,
                table=table,
            )

    # ------------------------------------------------------------------------------------------ release

    def release(self) -> None:
        """Delete every marker this transaction placed (it ended: the others may go on). A delete that fails
        raises: the caller then leaves its lease to expire instead of deleting it, so the marker dies with it."""
        self.held.clear()
        try:
            for path in sorted(self._placed):
                self._delete(path)
        finally:
            with _RELEASED:
                _RELEASED.notify_all()

    def _delete(self, path: str) -> None:
        with contextlib.suppress(ObjectNotFoundError):
            self.store.delete(path)
        self._placed.discard(path)


def settled_view(ctx: LakeContext, table_ids: Sequence[str]) -> LogView:
    """The log once every claim in flight on these tables is decided (waited for, rolled forward after its
    lease) and every version below them too, so that the decided prefix holds them: what a holder that just
    acquired their markers reads them at. Claims on them come only from optimistic transactions, or from a
    pessimistic holder that ended with its version claimed but undecided."""
    view = ctx.view()
    claims = [
        p.record.version
        for p in view.pending
        if any((c := p.record.table(t)) is not None and c.moves_version for t in table_ids)
    ]
    if claims:
        ctx.await_prefix(max(claims))
        view = ctx.view()
    return view


def _cycle_through(start: str, edges: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
    """A waits-for cycle through ``start`` (its members in order, ``start`` first), or ``None``."""
    stack: list[tuple[str, tuple[str, ...]]] = [(start, (start,))]
    visited: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, ()):
            if nxt == start:
                return path
            if nxt not in visited and nxt in edges:
                visited.add(nxt)
                stack.append((nxt, (*path, nxt)))
    return None


def stale_markers(store: ObjectStore, objects: Sequence[ObjectMeta], *, at_ms: int) -> list[ObjectMeta]:
    """Of a listing, the intent markers whose holders are dead (for vacuum; one lease read per holder)."""
    leases: dict[str, Lease | None] = {}
    out = []
    for meta in objects:
        if not meta.path.startswith(INTENTS_DIR + "/"):
            continue
        key = MarkerKey.parse(meta)
        if key is None or at_ms - key.placed_ms < ORPHAN_GRACE_SECONDS * 1000:
            continue
        if key.txid not in leases:
            leases[key.txid] = read_lease(store, key.txid)
        if holder_dead(leases[key.txid], key, at_ms=at_ms):
            out.append(meta)
    return out


__all__ = [
    "CONCURRENCY_MODES",
    "INTENTS_DIR",
    "Concurrency",
    "IntentMarker",
    "IntentQueue",
    "MarkerKey",
    "check_concurrency",
    "holder_dead",
    "intents_dir",
    "list_markers",
    "marker_path",
    "settled_view",
    "stale_markers",
]
