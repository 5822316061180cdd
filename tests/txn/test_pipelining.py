"""Pipelined claims: writers claim the next version while earlier ones still publish; a crashed claimer in the
middle is rolled forward by a helper, and every table's Delta commits follow the global order."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import ACCOUNTS, accounts
from txlake.delta.actions import CommitInfo
from txlake.errors import SimulatedCrash
from txlake.storage import FaultRule

deltalake = pytest.importorskip("deltalake")

WRITERS = 4
LEASE = 1.0


def _counter(snapshot: txlake.LakehouseSnapshot) -> int:
    return int(sum(snapshot.read_arrow("p.shared")["balance"].to_pylist()))


def test_pipelined_writers_with_a_crashed_claimer(any_store_uri: StoreLocation) -> None:
    uri, options = any_store_uri
    rounds = 6 if uri.startswith("s3") else 12
    setup = txlake.connect(uri, options, lease_seconds=LEASE)
    with setup.transaction() as tx:
        tx.create_table("p.shared", ACCOUNTS)
        tx.append("p.shared", accounts([0], [0]))
        for w in range(WRITERS + 1):
            tx.create_table(f"p.own{w}", ACCOUNTS)
    first = setup.version()
    started = threading.Barrier(WRITERS + 1)
    crashed = threading.Event()

    def writer(w: int) -> tuple[int, int]:
        lake = txlake.connect(uri, options, lease_seconds=LEASE)
        started.wait(timeout=60)
        increments = 0
        for i in range(rounds):

            def body(tx: txlake.Transaction, i: int = i) -> bool:
                tx.append(f"p.own{w}", accounts([i], [i]))
                if i % 3 == 0:  # a third of the transactions also increment the shared row
                    tx.update("p.shared", set={"balance": "balance + 1"}, where="id = 0")
                    return True
                return False

            increments += lake.run(body, isolation="write_serializable", retries=50)
            if i == 1:
                crashed.wait(timeout=60)  # the crash happens while everyone is mid-way
        return increments, len(lake.context.helped)

    def crasher() -> None:
        lake = txlake.connect(uri, options, lease_seconds=LEASE)
        lake.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log/"))

        def body(tx: txlake.Transaction) -> None:
            tx.append(f"p.own{WRITERS}", accounts([99], [99]))
            tx.update("p.shared", set={"balance": "balance + 1000"}, where="id = 0")

        started.wait(timeout=60)
        time.sleep(0.05)
        try:
            lake.run(body, isolation="write_serializable", retries=50)  # claims, then dies before publishing
        except SimulatedCrash:
            pass
        finally:
            crashed.set()

    with ThreadPoolExecutor(WRITERS + 1) as pool:
        crash = pool.submit(crasher)
        results = [f.result(timeout=300) for f in [pool.submit(writer, w) for w in range(WRITERS)]]
        crash.result(timeout=60)

    lake = txlake.connect(uri, options, lease_seconds=LEASE)
    latest = lake.snapshot()
    increments = sum(r[0] for r in results)
    assert sum(r[1] for r in results) >= 1  # somebody rolled the crashed claim forward
    assert _counter(latest) == increments + 1000  # the crashed claim was decidable: rolled forward
    for w in range(WRITERS):
        assert sorted(latest.read_arrow(f"p.own{w}")["id"].to_pylist()) == list(range(rounds))
    assert latest.read_arrow(f"p.own{WRITERS}")["id"].to_pylist() == [99]

    # every version is a consistent state: the shared counter never goes down, and each table's Delta
    # commits carry increasing global versions (the Delta order follows the lakehouse order)
    glog = lake.context.glog
    previous = -1
    overlapped = 0
    for g in range(first, latest.version + 1):
        value = _counter(lake.snapshot(g))
        assert value >= previous
        previous = value
        outcome = glog.read_outcome(g)
        nxt = glog.read_record(g + 1) if g < latest.version else None
        if outcome is not None and nxt is not None and nxt.timestamp_ms < outcome.timestamp_ms:
            overlapped += 1  # g+1 was claimed before g was decided: pipelined
    assert overlapped >= 1
    for name in ["p.shared", *(f"p.own{w}" for w in range(WRITERS + 1))]:
        log = lake.delta_log(name)
        versions = sorted(log.list().commits)
        assert versions == list(range(len(versions)))  # contiguous
        marks = []
        for actions in log.read_commits(versions):
            info = next(a for a in actions if isinstance(a, CommitInfo))
            if info.txlake is not None:
                marks.append(int(str(info.txlake["globalVersion"])))
        assert marks == sorted(marks), f"{name}: Delta commits out of global order {marks}"
        if lake.store.scheme != "memory":  # delta-rs has no memory:// store
            dt = deltalake.DeltaTable(lake.table_location(name), storage_options=options or None)
            assert dt.version() == latest.table_version(name)
