"""Transaction leases (txlake.txn.lease): held, renewed by the heartbeat, expired, taken over once."""

from __future__ import annotations

import time

import pytest

import txlake
from tests.services import StoreLocation
from txlake.storage import ObjectStore
from txlake.txn.lease import Heartbeat, lease_path, read_lease, take_over


def _store(location: StoreLocation) -> ObjectStore:
    return ObjectStore.from_uri(location.uri, location.storage_options)


def test_a_held_lease_is_renewed_and_read_by_others(any_store_uri: StoreLocation) -> None:
    store = _store(any_store_uri)
    beat = Heartbeat(store, lease_seconds=0.6)
    handle = beat.hold("t1", info={"isolation": "serializable"})
    first = read_lease(store, "t1")
    assert first is not None and first.epoch == 0 and first.info == {"isolation": "serializable"}
    time.sleep(0.9)  # several beats (every 0.2 s)
    later = read_lease(store, "t1")
    assert later is not None and later.expires_ms > first.expires_ms and not later.expired()
    handle.ensure()  # still safely held
    with pytest.raises(txlake.LeaseHeldError, match="is alive"):
        take_over(store, "t1", 0.6)
    beat.release(handle)
    assert read_lease(store, "t1") is None  # released: no lease left


def test_a_dead_holders_lease_expires_and_is_taken_over_once(any_store_uri: StoreLocation) -> None:
    store = _store(any_store_uri)
    dead = Heartbeat(store, lease_seconds=0.3)
    handle = dead.hold("t2")
    dead.release(handle, delete=False)  # as if the process died: no more beats, the object stays
    time.sleep(0.35)
    expired = read_lease(store, "t2")
    assert expired is not None and expired.expired()
    with pytest.raises(txlake.LeaseLostError, match="not renewed in time"):
        handle.ensure()
    taken = take_over(store, "t2", 5.0, owner="rescuer")
    assert (taken.epoch, taken.owner, taken.started_ms) == (1, "rescuer", expired.started_ms)
    assert read_lease(store, "t2") == taken
    with pytest.raises(txlake.LeaseHeldError):  # only one client takes it over
        take_over(store, "t2", 5.0)


def test_a_holder_learns_it_was_taken_over(any_store_uri: StoreLocation) -> None:
    store = _store(any_store_uri)
    beat = Heartbeat(store, lease_seconds=0.3)
    handle = beat.hold("t3")
    # a rescuer that decided the holder was dead (its clock, its reading) wrote the next epoch
    store.put_if_absent(lease_path("t3", 1), store.get(lease_path("t3", 0)))
    handle.renew(store)
    with pytest.raises(txlake.LeaseLostError, match="took the transaction over"):
        handle.ensure()
    beat.release(handle)
    assert read_lease(store, "t3") is not None  # a lost lease's holder deletes nothing


def test_a_lease_stays_alive_only_while_beats_get_through() -> None:
    location = StoreLocation(f"memory://{time.time_ns()}", {})
    store = _store(location)
    beat = Heartbeat(store, lease_seconds=0.3)
    handle = beat.hold("t4")
    time.sleep(0.5)
    handle.ensure()  # renewed by the thread meanwhile
    beat.release(handle)
    assert beat.held() == []
