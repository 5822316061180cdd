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
from txlake.errors import ConflictError, SimulatedCrash
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
        # a longer lease than the writers': on a loaded machine they must still meet its claim undecided
        lake = txlake.connect(uri, options, lease_seconds=3 * LEASE)
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


# ------------------------------------------------------------------- found by adversarial review


def _two_tables(uri: str) -> tuple[txlake.Lakehouse, str, str]:
    lake = txlake.connect(uri, lease_seconds=2)
    lake.create_table("p.a", ACCOUNTS)
    lake.create_table("p.b", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.a", accounts([1], [10]))
        tx.append("p.b", accounts([1], [10]))
    snap = lake.snapshot()
    first, second = sorted(["p.a", "p.b"], key=lambda n: snap.entry(n).id)
    return lake, first, second


@pytest.mark.parametrize("compensation", ["delayed", "crashed"])
def test_a_claim_behind_an_aborted_one_never_publishes_on_its_uncompensated_commit(
    tmp_path: object, compensation: str
) -> None:
    """v aborts at publication (a plain delete races it on its second table) after publishing its first
    table; T, a blind append to that first table, is claimed behind v. T must not put its commit on top of
    v's commit before v's compensation, or T's version would show v's aborted update."""
    uri = f"file://{tmp_path}"
    lake, first, second = _two_tables(uri)
    snap = lake.snapshot()
    results: dict[str, object] = {}

    def append_behind() -> None:
        t = txlake.connect(uri, lease_seconds=2).transaction("snapshot")
        t.append(first, accounts([2], [20]))
        results["t"] = t.commit()

    behind = threading.Thread(target=append_behind)

    def race() -> None:  # just before v's commit on the second table: a plain delete, then T claims
        deltalake.DeltaTable(lake.store.url(snap.entry(second).path)).delete("id = 1")
        claimed = f"_txlake/log/{lake.version() + 2:020d}.json"
        behind.start()
        deadline = time.monotonic() + 30
        while not lake.store.exists(claimed) and time.monotonic() < deadline:
            time.sleep(0.01)

    first_log = f"{snap.entry(first).path}/_delta_log/"
    second_log = f"{snap.entry(second).path}/_delta_log/"
    lake.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=second_log, hook=race))
    if compensation == "crashed":  # v dies right after deciding aborted, before compensating
        lake.store.faults.add(FaultRule("PUT", 2, "crash_before", path_contains=first_log))
    else:
        lake.store.faults.add(FaultRule("PUT", 2, "hook", path_contains=first_log, hook=lambda: time.sleep(1.0)))
    v = lake.transaction("snapshot")
    v.update(first, set={"balance": "999"}, where="id = 1")
    v.update(second, set={"balance": "999"}, where="id = 1")
    with pytest.raises((ConflictError, SimulatedCrash)):
        v.commit()
    behind.join(timeout=60)
    fresh = txlake.connect(uri)
    assert fresh.transaction_status(v.txid) == "aborted"
    for g in range(snap.version, fresh.version() + 1):
        balances = dict(zip(*fresh.snapshot(g).read_arrow(first).to_pydict().values(), strict=True))
        assert balances.get(1) == 10, f"version {g} shows the aborted update: {balances}"
    dt = deltalake.DeltaTable(fresh.table_location(first))
    assert sorted(r["balance"] for r in dt.to_pyarrow_dataset().to_table().to_pylist()) == [10, 20]


def test_serializable_reads_meet_plain_commits_an_earlier_claim_absorbed(tmp_path: object) -> None:
    """T reads x (serializable) and writes y; P, claimed before T, appends to x, and a plain delete of T's row
    lands before P publishes: P absorbs it, so only T's publication can see the conflict."""
    uri = f"file://{tmp_path}"
    lake = txlake.connect(uri, lease_seconds=5)
    lake.create_table("p.x", ACCOUNTS)
    lake.create_table("p.y", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.x", accounts([1], [1]))
    x = lake.snapshot().entry("p.x")
    t = lake.transaction("serializable")
    assert t.read_arrow("p.x", where="id = 1").num_rows == 1
    t.append("p.y", accounts([1], [1]))
    outcome: dict[str, object] = {}

    def commit_t() -> None:
        try:
            outcome["t"] = t.commit()
        except ConflictError as exc:
            outcome["t"] = exc

    behind = threading.Thread(target=commit_t)

    def plain_then_t() -> None:  # P is claimed and about to publish x
        deltalake.DeltaTable(lake.store.url(x.path)).delete("id = 1")
        behind.start()
        claimed = f"_txlake/log/{lake.version() + 2:020d}.json"
        deadline = time.monotonic() + 30
        while not lake.store.exists(claimed) and time.monotonic() < deadline:
            time.sleep(0.01)

    p = txlake.connect(uri, lease_seconds=5)
    p.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=f"{x.path}/_delta_log/", hook=plain_then_t))
    with p.transaction("snapshot") as tx:
        tx.append("p.x", accounts([50], [50]))
    behind.join(timeout=60)
    assert isinstance(outcome["t"], ConflictError)


def test_creating_a_table_in_a_namespace_dropped_concurrently_conflicts(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_namespace("n")
    tx = lake.transaction("snapshot")
    tx.create_table("n.t", ACCOUNTS)
    lake.drop_namespace("n")
    with pytest.raises(ConflictError):
        tx.commit()
    assert lake.tables() == [] and lake.namespaces() == []


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_dropping_a_namespace_dropped_concurrently_conflicts(local_lake: txlake.Lakehouse, isolation: str) -> None:
    """Two drops of one namespace: the second conflicts, as does a drop of ``meta`` (stored as ``Meta``) after
    another client dropped ``Meta`` and created ``META`` (it would have dropped nothing, and reported success)."""
    lake = local_lake
    other = txlake.connect(lake.uri)
    lake.create_namespace("d")
    tx = lake.transaction(isolation)
    tx.drop_namespace("d")
    other.drop_namespace("d")
    with pytest.raises(ConflictError, match="dropped concurrently"):
        tx.commit()
    lake.create_namespace("Meta")
    tx = lake.transaction(isolation)
    tx.drop_namespace("meta")
    other.drop_namespace("Meta")
    other.create_namespace("META")
    with pytest.raises(ConflictError):
        tx.commit()
    assert lake.namespaces() == ["META"]
