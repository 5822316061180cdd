"""Concurrent transactions from threads: crossed commits, atomic visibility, the bank-transfer invariant."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts
from txlake.delta import DeltaTable
from txlake.delta.actions import CommitInfo
from txlake.errors import ConflictError

BANKS = ("bank.north", "bank.south", "bank.east")
ACCOUNTS_PER_BANK = 4
OPENING = 1000


def _value(table: pa.Table, key: int) -> int:
    match = [r["balance"] for r in table.to_pylist() if r["id"] == key]
    assert len(match) == 1, f"id {key} appears {len(match)} times"
    return int(match[0])


def test_crossed_concurrent_commits_exactly_one_wins(lake: txlake.Lakehouse) -> None:
    """E1: T1 writes A then B, T2 writes B then A; they commit together: exactly one commits."""
    lake.create_table("e1.a", ACCOUNTS)
    lake.create_table("e1.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("e1.a", accounts([1], [10]))
        tx.append("e1.b", accounts([2], [20]))
    rounds = 12 if lake.store.scheme == "s3" else 30
    for i in range(rounds):
        t1 = lake.transaction("snapshot", redo=False)  # (with redo the loser is redone: test_redo.py)
        t2 = lake.transaction("snapshot", redo=False)
        t1.update("e1.a", set={"balance": str(100 + i)}, where="id = 1")
        t1.update("e1.b", set={"balance": str(200 + i)}, where="id = 2")
        t2.update("e1.b", set={"balance": str(300 + i)}, where="id = 2")
        t2.update("e1.a", set={"balance": str(400 + i)}, where="id = 1")
        barrier = threading.Barrier(2)
        outcomes: dict[str, str] = {}

        def go(
            name: str,
            tx: txlake.Transaction,
            barrier: threading.Barrier = barrier,
            outcomes: dict[str, str] = outcomes,
        ) -> None:
            barrier.wait(timeout=30)
            try:
                tx.commit()
                outcomes[name] = "committed"
            except ConflictError:
                outcomes[name] = "aborted"

        threads = [threading.Thread(target=go, args=(n, t)) for n, t in (("t1", t1), ("t2", t2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(outcomes.values()) == ["aborted", "committed"], outcomes
        a = _value(lake.read_arrow("e1.a"), 1)
        b = _value(lake.read_arrow("e1.b"), 2)
        assert (a, b) in {(100 + i, 200 + i), (400 + i, 300 + i)}


def test_atomic_visibility_across_tables(local_lake: txlake.Lakehouse) -> None:
    """E2: readers never see a newer version of A with an older version of B."""
    lake = local_lake
    lake.create_table("e2.a", ACCOUNTS)
    lake.create_table("e2.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("e2.a", accounts([1], [0]))
        tx.append("e2.b", accounts([1], [0]))
    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                with lake.transaction() as tx:
                    a = _value(tx.read_arrow("e2.a"), 1)
                    b = _value(tx.read_arrow("e2.b"), 1)
                seen.append((a, b))
                snap = lake.snapshot()
                seen.append((_value(snap.read_arrow("e2.a"), 1), _value(snap.read_arrow("e2.b"), 1)))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    for i in range(1, 16):
        with lake.transaction() as tx:
            tx.update("e2.a", set={"balance": str(i)})
            tx.update("e2.b", set={"balance": str(i)})
    stop.set()
    for r in readers:
        r.join(timeout=60)
    assert not errors, errors
    assert seen and all(a == b for a, b in seen), [p for p in seen if p[0] != p[1]][:5]


def _open_bank(lake: txlake.Lakehouse) -> None:
    with lake.transaction() as tx:
        for bank in BANKS:
            tx.create_table(bank, ACCOUNTS)
            tx.append(bank, accounts(list(range(ACCOUNTS_PER_BANK)), [OPENING] * ACCOUNTS_PER_BANK))


def _transfer(lake: txlake.Lakehouse, rng: random.Random) -> None:
    src, dst = rng.sample(BANKS, 2)
    a, b = rng.randrange(ACCOUNTS_PER_BANK), rng.randrange(ACCOUNTS_PER_BANK)
    amount = rng.randint(1, 50)

    def body(tx: txlake.Transaction) -> None:
        balance = _value(tx.read_arrow(src, where=f"id = {a}"), a)
        if balance < amount:
            return
        tx.update(src, set={"balance": f"balance - {amount}"}, where=f"id = {a}")
        tx.update(dst, set={"balance": f"balance + {amount}"}, where=f"id = {b}")

    lake.run(body, isolation="serializable", retries=50)


def _total(snap: txlake.LakehouseSnapshot) -> int:
    return sum(sum(snap.read_arrow(bank).column("balance").to_pylist()) for bank in BANKS)


@pytest.mark.parametrize("workers", [3])
def test_bank_transfers_keep_the_total(lake: txlake.Lakehouse, workers: int) -> None:
    """Concurrent transfers across three tables; readers always see the same total; delta-rs agrees."""
    _open_bank(lake)
    expected = OPENING * ACCOUNTS_PER_BANK * len(BANKS)
    transfers = 8 if lake.store.scheme == "s3" else 15
    stop = threading.Event()
    totals: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            totals.append(_total(lake.snapshot()))

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(transfers):
            _transfer(lake, rng)

    watcher = threading.Thread(target=reader)
    watcher.start()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    stop.set()
    watcher.join(timeout=120)
    assert totals and set(totals) == {expected}
    assert _total(lake.snapshot()) == expected

    # every committed global version: the tables at their mapped Delta versions hold the total
    for g in range(lake.version() + 1):
        snap = lake.snapshot(g)
        if set(BANKS) <= set(snap.tables()):
            assert _total(snap) == expected, g
    # every Delta version of every table is txlake's, from a committed global version, and plain
    # readers of the Delta log see only committed data (no compensation commits were needed)
    glog = lake.context.glog
    for bank in BANKS:
        log = lake.delta_log(bank)
        table = DeltaTable(lake.store, log.path, name=bank)
        latest = table.latest_version()
        assert latest is not None
        for v in range(latest + 1):
            info = next(a for a in log.read_commit(v) if isinstance(a, CommitInfo))
            assert info.txlake is not None
            outcome = glog.read_outcome(int(info.txlake["globalVersion"]))
            assert outcome is not None and outcome.committed
            assert not info.txlake.get("compensates")


def test_bank_versions_read_by_deltars(local_lake: txlake.Lakehouse) -> None:
    """delta-rs reading each table at every Delta version sees only committed transfers."""
    deltalake = pytest.importorskip("deltalake")
    lake = local_lake
    _open_bank(lake)
    rng = random.Random(7)
    for _ in range(10):
        _transfer(lake, rng)
    expected = OPENING * ACCOUNTS_PER_BANK * len(BANKS)
    glog = lake.context.glog
    for g in range(lake.version() + 1):
        outcome = glog.read_outcome(g)
        state = lake.snapshot(g).state
        if outcome is None or not outcome.committed or not set(BANKS) <= set(state.table_names()):
            continue
        total = 0
        for bank in BANKS:
            entry = state.table_by_name(bank)
            assert entry is not None
            dt = deltalake.DeltaTable(lake.table_location(bank), version=state.table_versions[entry.id])
            for uri in dt.file_uris():
                total += sum(pq.read_table(uri.removeprefix("file://")).column("balance").to_pylist())
        assert total == expected, g
