"""Reservations: a transaction redone again and again on a table asks racing writers to wait for its commit.

See :mod:`txlake.txn.reservations`: after ``reserve_after`` redos of a table in one commit the transaction
posts the files its statements read; a racing client whose record removes one of them waits until the
reservation is withdrawn (or for at most ``RESERVATION_WAIT``), then validates again. Advisory only: the
outcome of every transaction is what validation decides.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation
from txlake.delta.actions import now_ms
from txlake.storage import FaultRule
from txlake.txn import reservations, transaction
from txlake.txn.reservations import RESERVATIONS_DIR, Reservation, ReservationReader, reservation_path

ACCT = "app.acct"


def _lake(location: StoreLocation) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table(ACCT, "k bigint, v bigint")
    with lake.transaction() as tx:
        tx.append(ACCT, pa.table({"k": [1, 2], "v": [100, 200]}))
    return lake


def _client(location: StoreLocation, *, reserve_after: int | None = None) -> txlake.Lakehouse:
    """A client with reservations on (``reserve_after``: after how many redos of a table it reserves)."""
    lake = txlake.connect(location.uri, location.storage_options, create=False, reservations=True)
    assert lake.context.reserve_after == reservations.RESERVE_AFTER
    if reserve_after is not None:
        lake.context.reserve_after = reserve_after
    return lake


def _v(lake: txlake.Lakehouse, k: int) -> int:
    return int(lake.read_arrow(ACCT, where=f"k = {k}")["v"][0].as_py())


def _bump(lake: txlake.Lakehouse, amount: int) -> txlake.CommitResult:
    with lake.transaction() as tx:
        tx.update(ACCT, {"v": f"v + {amount}"}, "k = 1")
    assert tx.result is not None
    return tx.result


def _listed(lake: txlake.Lakehouse) -> list[str]:
    return [m.path for m in lake.store.list(RESERVATIONS_DIR)]


def _count(lake: txlake.Lakehouse, kind: str, path: str) -> list[int]:
    """A counter of ``kind`` requests on paths containing ``path`` (a hook that fires every time)."""
    seen = [0]

    def hook() -> None:
        seen[0] += 1

    lake.store.faults.add(FaultRule(kind, 1, "hook", path_contains=path, times=10**6, hook=hook))  # type: ignore[arg-type]
    return seen


def _acct_file(lake: txlake.Lakehouse) -> tuple[str, str]:
    snapshot = lake.snapshot()
    files = list(snapshot.delta_snapshot(ACCT).files)
    assert len(files) == 1
    return snapshot.entry(ACCT).id, files[0]


def test_reservation_round_trip_and_malformed_objects() -> None:
    r = Reservation("t" * 32, "table", frozenset({"a.parquet", "b.parquet"}), 5, 10)
    assert Reservation.from_bytes(r.to_bytes()) == r
    assert r.path == reservation_path("table", "t" * 32)
    for bad in (b"", b"{}", b"[1]", b'{"txid": 1, "tableId": "x", "files": 3, "since": 1, "until": 2}'):
        assert Reservation.from_bytes(bad) is None


def test_holder_commits_first_while_a_racing_writer_waits(any_store_uri: StoreLocation) -> None:
    """The holder is redone once more (reserve_after=1 makes its first redo reserve); a racing client that
    validated meanwhile would claim first -- it waits until the holder committed, then redoes on top."""
    _lake(any_store_uri)
    holder = _client(any_store_uri, reserve_after=1)
    racer = _client(any_store_uri)
    racer.context.note_contention()
    result: dict[str, txlake.CommitResult] = {}
    checked = threading.Event()
    racer.store.faults.add(FaultRule("LIST", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=checked.set))

    def race() -> None:
        result["racer"] = _bump(racer, 1000)

    thread = threading.Thread(target=race)

    def reserved() -> None:  # the holder's reservation landed: now the racer commits (or would)
        thread.start()
        assert checked.wait(30)
        time.sleep(0.3)  # a racer that did not wait would have claimed by now
        assert "racer" not in result

    holder.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=reserved))
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(racer, 10)  # the conflict that makes the holder redo
    outcome = tx.commit()
    thread.join(30)
    assert not thread.is_alive()
    assert outcome.redone == 1
    assert result["racer"].version > outcome.version
    assert result["racer"].redone >= 1
    assert _v(holder, 1) == 100 + 10 + 1 + 1000 and _v(holder, 2) == 200
    assert _listed(holder) == []  # withdrawn after the commit


def test_a_writer_about_to_redo_waits_for_the_holder_first(any_store_uri: StoreLocation) -> None:
    """A transaction whose redo would read a file another one reserves waits for that one's commit before it
    redoes, so it redoes once (on top of the holder), not once before the holder's commit and again after."""
    _lake(any_store_uri)
    holder = _client(any_store_uri, reserve_after=1)
    racer = _client(any_store_uri)
    other = _client(any_store_uri)
    racing = racer.transaction()
    racing.update(ACCT, {"v": "v + 1000"}, "k = 1")
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(other, 10)  # both conflict with it: the holder redoes first and reserves
    result: dict[str, txlake.CommitResult] = {}
    looked = threading.Event()
    racer.store.faults.add(FaultRule("LIST", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=looked.set))
    thread = threading.Thread(target=lambda: result.setdefault("racer", racing.commit()))

    def reserved() -> None:  # the holder's reservation landed, its claim not yet: the racer commits now
        thread.start()
        assert looked.wait(30)
        time.sleep(0.3)  # a racer that did not wait would have redone and claimed by now
        assert "racer" not in result

    holder.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=reserved))
    outcome = tx.commit()
    thread.join(30)
    assert not thread.is_alive()
    assert outcome.redone == 1
    assert result["racer"].version > outcome.version
    assert result["racer"].redone == 1  # once, after the holder's commit
    assert _v(holder, 1) == 100 + 10 + 1 + 1000 and _v(holder, 2) == 200
    assert _listed(holder) == []


def test_a_client_looks_when_racing_or_once_a_second(tmp_path: Path) -> None:
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    off = txlake.connect(location.uri, create=False)  # the default on local disk: reservations off
    off.context.note_contention()
    lists = _count(off, "LIST", RESERVATIONS_DIR)
    _bump(off, 1)
    assert lists[0] == 0
    lake = _client(location)
    lists = _count(lake, "LIST", RESERVATIONS_DIR)
    _bump(lake, 1)
    assert lists[0] == 1  # not racing, but it never looked: a client that keeps winning must see them
    _bump(lake, 1)
    assert lists[0] == 1  # looked within the last second
    lake.context.note_contention()
    _bump(lake, 1)
    assert lists[0] == 2  # racing: before every claim
    lake.context.lost_race_until = 0.0
    lake.context.reservations_due = 0.0  # as if a second had passed
    table_id, _ = _acct_file(lake)
    other = Reservation("c" * 32, table_id, frozenset({"another.parquet"}), now_ms(), now_ms() + 60_000)
    reservations.post(lake.store, other)
    _bump(lake, 1)
    assert lists[0] == 3
    _bump(lake, 1)
    assert lists[0] == 4  # it saw another transaction's reservation: it looks before every claim for a while
    assert _v(lake, 1) == 106
    with pytest.raises(txlake.InvalidArgumentTypeError):
        txlake.connect(location.uri, reservations="yes")  # type: ignore[arg-type]


def test_a_dead_holders_reservation_is_waited_out_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction, "RESERVATION_WAIT", 0.3)
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    lake = _client(location)
    table_id, path = _acct_file(lake)
    far = now_ms() + 3_600_000
    reservations.post(lake.store, Reservation("d" * 32, table_id, frozenset({path}), now_ms(), far))
    lists = _count(lake, "LIST", RESERVATIONS_DIR)  # (not racing: it looks because it never looked)
    began = time.monotonic()
    _bump(lake, 1)
    assert time.monotonic() - began >= 0.3
    assert lists[0] > 2  # it looked again and again, then went ahead
    assert _v(lake, 1) == 101
    # a reservation of another file, or of another table, or an expired one: no wait
    reservations.post(lake.store, Reservation("e" * 32, table_id, frozenset({"other.parquet"}), now_ms(), far))
    reservations.post(lake.store, Reservation("f" * 32, "elsewhere", frozenset({path}), now_ms(), far))
    _, path = _acct_file(lake)
    reservations.post(lake.store, Reservation("0" * 32, table_id, frozenset({path}), 0, now_ms() - 1))
    lake.context.note_contention()
    lists[0] = 0
    _bump(lake, 1)
    assert lists[0] == 1
    assert _v(lake, 1) == 102


def test_the_wait_budget_counts_the_looks_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an object store a look at the reservations (a LIST) takes as long as the pause between two: the
    budget counts both, so a slow LIST does not stretch a commit's wait (it counted only the pauses)."""
    monkeypatch.setattr(transaction, "RESERVATION_WAIT", 0.5)
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    lake = _client(location)
    table_id, path = _acct_file(lake)
    reservations.post(lake.store, Reservation("d" * 32, table_id, frozenset({path}), now_ms(), now_ms() + 60_000))
    lists = [0]

    def slow_list() -> None:
        lists[0] += 1
        time.sleep(0.1)

    lake.store.faults.add(FaultRule("LIST", 1, "hook", path_contains=RESERVATIONS_DIR, times=10**6, hook=slow_list))  # type: ignore[arg-type]
    _bump(lake, 1)
    assert 2 < lists[0] <= 7  # each look takes 0.1 s or more: at most 5 fit in 0.5 s, then one more to see
    assert _v(lake, 1) == 101


def _holder_facing_a_rival(location: StoreLocation, other: txlake.Lakehouse, since: int) -> int:
    """A holder's commit while a rival reservation (posted right after the holder's own, with ``since``)
    names the files it removes; how many times it listed the reservations."""
    holder = _client(location, reserve_after=1)
    table_id, _ = _acct_file(holder)
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(other, 10)
    rival_path = reservation_path(table_id, "9" * 32)

    def rival() -> None:
        own = Reservation.from_bytes(holder.store.get(reservation_path(table_id, tx.txid)))
        assert own is not None
        reservations.post(holder.store, Reservation("9" * 32, table_id, own.files, since, now_ms() + 60_000))

    holder.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=rival))
    lists = _count(holder, "LIST", RESERVATIONS_DIR)
    tx.commit()
    holder.store.delete(rival_path)
    return lists[0]


def test_a_holder_waits_only_for_older_reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction, "RESERVATION_WAIT", 0.3)
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    other = _client(location)
    # before its redo (nothing reserved yet) and before its claim (a younger rival: not waited for)
    assert _holder_facing_a_rival(location, other, now_ms() + 60_000) == 2
    assert _holder_facing_a_rival(location, other, 1) > 2  # older: waited for (here: out)
    assert _v(other, 1) == 100 + 2 * 11


def test_reservations_are_withdrawn_and_a_failed_put_changes_nothing(tmp_path: Path) -> None:
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    other = _client(location)
    holder = _client(location, reserve_after=1)
    # the reservation's PUT fails: the transaction commits all the same, without priority
    holder.store.faults.add(FaultRule("PUT", 1, "fail", path_contains=RESERVATIONS_DIR))
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(other, 10)
    assert tx.commit().redone == 1
    assert _listed(holder) == []
    # a commit that fails after reserving withdraws its reservation too
    holder.store.faults.clear()
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(other, 10)

    def conflict() -> None:  # a schema change: no redo resolves it
        with other.transaction() as change:
            change.alter_table(ACCT, add_columns="w bigint")

    holder.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=conflict))
    with pytest.raises(txlake.ConflictError):
        tx.commit()
    assert tx.status == "aborted"
    assert _listed(holder) == []
    assert _v(holder, 1) == 100 + 1 + 10 + 10


def test_reader_reads_each_reservation_once(tmp_path: Path) -> None:
    location = StoreLocation(tmp_path.as_uri(), {})
    lake = _lake(location)
    r = Reservation("a" * 32, "tid", frozenset({"x"}), 1, now_ms() + 60_000)
    reservations.post(lake.store, r)
    reservations.post(lake.store, Reservation("b" * 32, "tid", frozenset({"y"}), 1, now_ms() - 1))  # expired
    lake.store.put(RESERVATIONS_DIR + "tid.garbage.json", b"not json")
    lake.store.put(RESERVATIONS_DIR + "stray", b"{}")
    malformed = {
        "huge": b'{"txid": "x", "tableId": "tid", "files": ["a"], "since": 1, "until": 1e999}',
        "infinite": b'{"txid": "x", "tableId": "tid", "files": ["a"], "since": 1, "until": Infinity}',
        "deep": b"[" * 100_000,
        "files": b'{"txid": "x", "tableId": "tid", "files": "abc", "since": 1, "until": 2}',
    }
    for name, data in malformed.items():
        assert Reservation.from_bytes(data) is None, name
        lake.store.put(f"{RESERVATIONS_DIR}tid.{name}.json", data)
    reader = ReservationReader()
    gets = _count(lake, "GET", RESERVATIONS_DIR)
    assert reader.live(lake.store, {"tid": None}) == [r]
    assert reader.live(lake.store, {"tid": None}) == [r]
    assert gets[0] == 3 + len(malformed)  # every object once: the good, the expired, the malformed
    assert reader.live(lake.store, {"other": None}) == []
    lake.store.faults.add(FaultRule("LIST", 1, "fail", path_contains=RESERVATIONS_DIR))
    assert reader.live(lake.store, {"tid": None}) == []  # cannot list: nothing to wait for


def test_on_by_default_for_object_stores_only(any_store_uri: StoreLocation) -> None:
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    on = any_store_uri.uri.startswith("s3://")
    assert lake.context.reserve_after == (reservations.RESERVE_AFTER if on else 0)
    for setting in (True, False):
        chosen = txlake.connect(any_store_uri.uri, any_store_uri.storage_options, reservations=setting)
        assert chosen.context.reserve_after == (reservations.RESERVE_AFTER if setting else 0)


def test_a_reservation_lasts_at_most_its_ttl_after_it_was_written(tmp_path: Path) -> None:
    """A holder whose clock runs ahead (``until`` far off) cannot make a reservation outlive the TTL."""
    location = StoreLocation(tmp_path.as_uri(), {})
    lake = _lake(location)
    r = Reservation("a" * 32, "tid", frozenset({"x"}), 1, now_ms() + 3_600_000)
    reservations.post(lake.store, r)
    assert ReservationReader().live(lake.store, {"tid": None}) == [r]
    written = time.time() - reservations.RESERVATION_TTL - 1
    os.utime(tmp_path / r.path, (written, written))
    assert ReservationReader().live(lake.store, {"tid": None}) == []


def test_blocking_rules() -> None:
    mine = ("m" * 32, (5, "m" * 32))
    old = Reservation("a" * 32, "t", frozenset({"f1"}), 1, 10**15)
    young = Reservation("b" * 32, "t", frozenset({"f1"}), 9, 10**15)
    whole = Reservation("c" * 32, "t", frozenset({reservations.WHOLE_TABLE}), 2, 10**15)
    other_table = Reservation("d" * 32, "u", frozenset({"f1"}), 1, 10**15)
    every = [old, young, whole, other_table]

    def blocked(removes: dict[str, frozenset[str]], own: tuple[int, str] | None, **kw: object) -> set[str]:
        return {r.txid[0] for r in reservations.blocking(every, removes, txid=mine[0], own=own, **kw)}  # type: ignore[arg-type]

    assert blocked({"t": frozenset({"f1"})}, None) == {"a", "b", "c"}
    assert blocked({"t": frozenset({"f2"})}, None) == {"c"}  # the whole table: any file of it
    assert blocked({"t": frozenset({"f1"})}, mine[1]) == {"a", "c"}  # a holder waits only for older ones
    assert blocked({"t": frozenset({"f1"})}, None, ignore={old.path}) == {"b", "c"}
    assert blocked({"v": frozenset({"f1"})}, None) == set()
    assert reservations.blocking([old], {"t": frozenset({"f1"})}, txid=old.txid, own=None) == []  # its own


def test_a_holder_still_losing_reserves_the_whole_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reservations, "WHOLE_AFTER", 1)
    location = StoreLocation(tmp_path.as_uri(), {})
    _lake(location)
    holder = _client(location, reserve_after=1)
    other = _client(location)
    tx = holder.transaction()
    tx.update(ACCT, {"v": "v + 1"}, "k = 1")
    _bump(other, 10)
    posted: list[Reservation | None] = []
    table_id, _ = _acct_file(holder)

    def seen() -> None:
        posted.append(Reservation.from_bytes(holder.store.get(reservation_path(table_id, tx.txid))))

    holder.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains=RESERVATIONS_DIR, hook=seen))
    assert tx.commit().redone == 1
    assert len(posted) == 1 and posted[0] is not None and posted[0].files == {reservations.WHOLE_TABLE}
    assert _v(holder, 1) == 111
