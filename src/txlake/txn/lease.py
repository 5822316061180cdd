"""Transaction leases, kept alive by a heartbeat, and taken over when their holder is gone.

A transaction that other clients must be able to tell alive from dead (a long or resumable transaction, one
holding pessimistic intents) holds a *lease*: the object ``_txlake/txns/<txid>/lease-<epoch>.json``. Its
holder rewrites it every third of the lease duration (:class:`Heartbeat`, one daemon thread per connected
lakehouse), moving ``expires_ms`` forward. A holder that stops (crash, SIGKILL, a lost network) stops
renewing; once ``expires_ms`` has passed by the reader's clock, the lease is expired and the transaction dead.

Epochs make a takeover safe without compare-and-swap: whoever takes the transaction over (``resume``,
``recover``) put-if-absents ``lease-<epoch + 1>``, which succeeds for one client only. The previous holder
checks for that key before every renewal and stops acting once its last successful renewal has expired;
it must call :meth:`LeaseHandle.ensure` before any step that would make its work visible (a claim), so it
never acts after a takeover could have happened: a takeover waits for ``expires_ms`` and the holder stops
:data:`SAFETY_FRACTION` of a lease before it. As for claims in the global log, the argument assumes the clocks
of two clients disagree by less than that margin.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from txlake.delta.actions import now_ms
from txlake.errors import (
    CorruptLogError,
    LeaseHeldError,
    LeaseLostError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    SimulatedCrash,
    StorageError,
    TxlakeError,
)
from txlake.storage import ObjectStore

TXNS_DIR = "_txlake/txns"
RENEWALS_PER_LEASE = 3
"""The heartbeat renews a lease this many times per lease duration."""
SAFETY_FRACTION = 1 / 3
"""A holder stops acting this share of a lease before its last renewal expires (the room for clock skew and
for one renewal that failed)."""


def txn_dir(txid: str) -> str:
    """The directory of one transaction's sublog and lease (``_txlake/txns/<txid>/``)."""
    return f"{TXNS_DIR}/{txid}/"


def lease_path(txid: str, epoch: int) -> str:
    return f"{TXNS_DIR}/{txid}/lease-{epoch:06d}.json"


def default_owner() -> str:
    """Who holds a lease, for people reading it: ``host:pid:client``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Lease:
    """One epoch of a transaction's lease as stored."""

    txid: str
    epoch: int
    owner: str
    started_ms: int
    renewed_ms: int
    expires_ms: int
    info: Mapping[str, Any] = field(default_factory=dict)
    """What the holder wants others to know (isolation level, pessimistic or not, ...)."""

    def expired(self, at_ms: int | None = None) -> bool:
        """Whether the lease has run out by ``at_ms`` (now, by this client's clock)."""
        return (now_ms() if at_ms is None else at_ms) >= self.expires_ms

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "txid": self.txid,
                "epoch": self.epoch,
                "owner": self.owner,
                "started": self.started_ms,
                "renewed": self.renewed_ms,
                "expires": self.expires_ms,
                "info": dict(self.info),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> Lease:
        try:
            d = json.loads(data)
            return cls(
                txid=str(d["txid"]),
                epoch=int(d["epoch"]),
                owner=str(d["owner"]),
                started_ms=int(d["started"]),
                renewed_ms=int(d["renewed"]),
                expires_ms=int(d["expires"]),
                info=dict(d.get("info") or {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"{path} is not a txlake lease: {exc}") from exc


def read_lease(store: ObjectStore, txid: str) -> Lease | None:
    """The newest epoch of ``txid``'s lease (one LIST, one GET); ``None`` if it never held one or it ended."""
    for meta in sorted(store.list(txn_dir(txid)), key=lambda m: m.path, reverse=True):
        name = meta.path.rsplit("/", 1)[-1]
        if name.startswith("lease-") and name.endswith(".json"):
            try:
                return Lease.from_bytes(store.get(meta.path), path=meta.path)
            except ObjectNotFoundError:
                return read_lease(store, txid)  # released meanwhile, or a newer epoch replaced it
    return None


def take_over(store: ObjectStore, txid: str, lease_seconds: float, *, owner: str | None = None) -> Lease:
    """Become the holder of ``txid``'s expired lease (the next epoch); :class:`LeaseHeldError` if it is alive
    or another client took it over first. The caller then renews it with :meth:`Heartbeat.adopt`."""
    current = read_lease(store, txid)
    if current is not None and not current.expired():
        raise LeaseHeldError(
            f"transaction {txid} is alive: {current.owner} renewed its lease at {current.renewed_ms} "
            f"(it expires in {(current.expires_ms - now_ms()) / 1000:.1f} s)",
            lease=current,
        )
    now = now_ms()
    epoch = current.epoch + 1 if current is not None else 0
    lease = Lease(
        txid=txid,
        epoch=epoch,
        owner=owner or default_owner(),
        started_ms=current.started_ms if current is not None else now,
        renewed_ms=now,
        expires_ms=now + int(lease_seconds * 1000),
        info=current.info if current is not None else {},
    )
    try:
        store.put_if_absent(lease_path(txid, epoch), lease.to_bytes())
    except ObjectAlreadyExistsError as exc:
        raise LeaseHeldError(f"transaction {txid} was taken over by another client first") from exc
    return lease


class LeaseHandle:
    """A lease this client holds; renewed by its :class:`Heartbeat` until released."""

    def __init__(self, lease: Lease, lease_seconds: float, store: ObjectStore | None = None) -> None:
        self._store = store
        """Where :meth:`ensure` renews the lease itself when the heartbeat is late (``None``: it never does)."""
        self._lock = threading.Lock()
        self._renewing = threading.Lock()
        """Held for a whole renewal: a release waits for one in flight, so its PUT never recreates a deleted lease."""
        self._lease = lease
        self.lease_seconds = lease_seconds
        self.lost: str | None = None
        """Why the lease is lost (taken over, expired before a renewal got through), or ``None``."""
        self.released = False

    @property
    def lease(self) -> Lease:
        with self._lock:
            return self._lease

    @property
    def txid(self) -> str:
        return self._lease.txid

    def ensure(self, *, margin: float | None = None) -> None:
        """:class:`LeaseLostError` unless this client still safely holds the lease: not taken over, and its
        last renewal valid for ``margin`` seconds more (default :data:`SAFETY_FRACTION` of a lease)."""
        margin = self.lease_seconds * SAFETY_FRACTION if margin is None else margin
        with self._lock:
            lost, lease = self.lost, self._lease
        if lost is None and now_ms() + margin * 1000 >= lease.expires_ms and self._store is not None:
            # the heartbeat is late (a busy machine): renew here, before the lease expires
            try:
                self.renew(self._store)
            except TxlakeError as exc:
                raise LeaseLostError(f"transaction {lease.txid}'s lease could not be renewed in time: {exc}") from exc
            with self._lock:
                lost, lease = self.lost, self._lease
        if lost is not None:
            raise LeaseLostError(f"transaction {lease.txid} lost its lease: {lost}")
        if now_ms() + margin * 1000 >= lease.expires_ms:
            raise LeaseLostError(
                f"transaction {lease.txid}'s lease was not renewed in time (it expires at {lease.expires_ms}; "
                "the heartbeat could not reach the store): another client may take it over"
            )

    def renew(self, store: ObjectStore) -> None:
        """One heartbeat: check nobody took over, then move ``expires_ms`` forward (two requests)."""
        with self._renewing:
            self._renew(store)

    def _renew(self, store: ObjectStore) -> None:
        with self._lock:
            if self.released or self.lost is not None:
                return
            lease = self._lease
        if store.exists(lease_path(lease.txid, lease.epoch + 1)):
            self._lose("another client took the transaction over")
            return
        now = now_ms()
        if now >= lease.expires_ms:
            self._lose("the lease expired before the heartbeat renewed it")
            return
        renewed = replace(lease, renewed_ms=now, expires_ms=now + int(self.lease_seconds * 1000))
        store.put(lease_path(lease.txid, lease.epoch), renewed.to_bytes())
        if now_ms() >= lease.expires_ms:  # it landed after the old expiry: a taker may have read it expired
            self._lose("the lease expired while the heartbeat renewed it")
            return
        with self._lock:
            if not self.released and self.lost is None:
                self._lease = renewed

    def update_info(self, store: ObjectStore, **info: Any) -> None:
        """Add to what the lease tells others (written now, with a renewal)."""
        with self._lock:
            self._lease = replace(self._lease, info={**self._lease.info, **info})
        self.renew(store)

    def _lose(self, why: str) -> None:
        with self._lock:
            self.lost = why


class Heartbeat:
    """Renews the leases of this client's live transactions from one daemon thread (started on first use)."""

    def __init__(self, store: ObjectStore, lease_seconds: float) -> None:
        self.store = store
        self.lease_seconds = lease_seconds
        self._handles: dict[str, LeaseHandle] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.owner = default_owner()

    def hold(self, txid: str, *, info: Mapping[str, Any] | None = None) -> LeaseHandle:
        """Start holding a new lease for ``txid`` (epoch 0, put-if-absent) and keep renewing it."""
        now = now_ms()
        lease = Lease(txid, 0, self.owner, now, now, now + int(self.lease_seconds * 1000), dict(info or {}))
        try:
            self.store.put_if_absent(lease_path(txid, 0), lease.to_bytes())
        except ObjectAlreadyExistsError as exc:
            raise LeaseHeldError(f"transaction {txid} already holds a lease") from exc
        return self.adopt(lease)

    def adopt(self, lease: Lease) -> LeaseHandle:
        """Keep renewing a lease this client already wrote (``hold``, or :func:`take_over`)."""
        handle = LeaseHandle(lease, self.lease_seconds, self.store)
        with self._lock:
            self._handles[lease.txid] = handle
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="txlake-heartbeat", daemon=True)
                self._thread.start()
        return handle

    def release(self, handle: LeaseHandle, *, delete: bool = True) -> None:
        """Stop renewing ``handle``; delete its lease object (others then see no lease) unless told not to."""
        with handle._renewing, handle._lock:  # after any renewal in flight: none can follow
            handle.released = True
        with self._lock:
            if self._handles.get(handle.txid) is handle:
                del self._handles[handle.txid]
        if delete and handle.lost is None:
            with contextlib.suppress(ObjectNotFoundError):
                self.store.delete(lease_path(handle.txid, handle.lease.epoch))

    def held(self) -> list[LeaseHandle]:
        with self._lock:
            return list(self._handles.values())

    def _run(self) -> None:
        interval = self.lease_seconds / RENEWALS_PER_LEASE
        while True:
            self._wake.wait(interval)
            self._wake.clear()
            handles = self.held()
            for handle in handles:
                # a failed beat is retried by the next; if none gets through, the lease expires and ensure() says so
                try:
                    handle.renew(self.store)
                except (StorageError, OSError):
                    continue
                except SimulatedCrash:  # fault injection "crashed" the client here: it renews this lease no more
                    with self._lock:
                        if self._handles.get(handle.txid) is handle:
                            del self._handles[handle.txid]
            if not handles:
                with self._lock:
                    if not self._handles:
                        self._thread = None
                        return


__all__ = [
    "TXNS_DIR",
    "Heartbeat",
    "Lease",
    "LeaseHandle",
    "LeaseHeldError",
    "LeaseLostError",
    "default_owner",
    "lease_path",
    "read_lease",
    "take_over",
    "txn_dir",
]
