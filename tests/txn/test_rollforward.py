"""A client that dies after claiming a global version is rolled forward by the next writer (I4, I6)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.errors import SimulatedCrash
from txlake.storage import FaultRule

LEASE = 0.5


def _crash_after_claim(location: StoreLocation, crash_at: str) -> tuple[txlake.Lakehouse, txlake.Transaction]:
    """Tables ``r.a`` and ``r.b``; a second client's transaction appending to both claims a version, then dies
    before the first PUT whose path contains ``crash_at``. A healthy client and the dead transaction."""
    lake = txlake.connect(location.uri, location.storage_options, lease_seconds=LEASE)
    lake.create_table("r.a", ACCOUNTS)
    lake.create_table("r.b", ACCOUNTS)
    doomed = txlake.connect(location.uri, location.storage_options, lease_seconds=LEASE)
    tx = doomed.transaction()
    tx.append("r.a", accounts([1], [10]))
    tx.append("r.b", accounts([1], [20]))
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains=crash_at))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    return lake, tx


@pytest.mark.parametrize("crash_at", ["_delta_log", ".outcome.json"])
def test_crash_after_claim_is_rolled_forward(any_store_uri: StoreLocation, crash_at: str) -> None:
    uri, options = any_store_uri
    # the client dies at its first Delta commit (crash_at=_delta_log) or just before deciding
    lake, _ = _crash_after_claim(any_store_uri, crash_at)
    claimed = lake.context.glog.tail()
    assert claimed.undecided == (claimed.state.version + 1,)
    assert lake.read_arrow("r.a").num_rows == 0  # undecided: invisible

    other = txlake.connect(uri, options, lease_seconds=LEASE)
    start = time.monotonic()
    with other.transaction() as t2:
        t2.append("r.a", accounts([2], [30]))
    waited = time.monotonic() - start
    assert other.context.helped == [claimed.latest_claimed]
    assert waited < LEASE + 10  # progress: delayed by about the lease, not forever
    assert rows(lake.read_arrow("r.a")) == [(1, 10), (2, 30)]
    assert rows(lake.read_arrow("r.b")) == [(1, 20)]
    outcome = lake.context.glog.read_outcome(claimed.latest_claimed)
    assert outcome is not None and outcome.committed


def test_crash_before_claim_leaves_nothing_visible(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("r.a", ACCOUNTS)
    doomed = txlake.connect(lake.uri)
    tx = doomed.transaction()
    tx.append("r.a", accounts([1], [10]))
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_txlake/log/"))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    v = lake.version()
    with lake.transaction() as t2:
        t2.append("r.a", accounts([2], [20]))
    assert lake.version() == v + 1
    assert rows(lake.read_arrow("r.a")) == [(2, 20)]
    assert lake.context.helped == []


def test_recover_rolls_forward_an_expired_claim(any_store_uri: StoreLocation) -> None:
    """A client died after its claim, before publishing: ``recover`` decides the version once its lease has
    expired (a dry run only says so), as the next writer would; the data is then visible everywhere."""
    uri, options = any_store_uri
    lake, tx = _crash_after_claim(any_store_uri, "_delta_log")
    claimed = lake.context.glog.tail().latest_claimed
    time.sleep(LEASE + 0.2)
    preview = lake.recover(dry_run=True)
    assert [(t.txid, t.action, t.version) for t in preview.transactions if t.txid == tx.txid] == [
        (tx.txid, "rolled_forward", claimed)
    ]
    assert lake.context.glog.read_outcome(claimed) is None  # a dry run decides nothing
    report = lake.recover(dry_run=False)
    done = [t for t in report.transactions if t.txid == tx.txid]
    assert [(t.action, t.version, t.status) for t in done] == [("rolled_forward", claimed, "committed")]
    fresh = txlake.connect(uri, options)
    assert rows(fresh.read_arrow("r.a")) == [(1, 10)] and rows(fresh.read_arrow("r.b")) == [(1, 20)]
    assert not [t for t in lake.recover(dry_run=False).transactions if t.txid == tx.txid]  # nothing left


def test_time_travel_past_a_dead_claim_waits_for_its_lease_and_rolls_it_forward(
    any_store_uri: StoreLocation, caplog: pytest.LogCaptureFixture
) -> None:
    """A time after a dead claimer's claim: the answer waits for its lease and rolls the claim forward (decided
    now, the claim is later than that time: the answer is the version before it, and stays so). A reader that
    cannot write (its PUTs fail) answers from the decided versions, with a warning."""
    lake, tx = _crash_after_claim(any_store_uri, ".outcome.json")
    after = datetime.now(UTC)
    claimed = lake.context.glog.tail().latest_claimed
    before = datetime.fromtimestamp(lake.context.glog.decided_at_ms(claimed - 1) / 1000, UTC)
    read_only = txlake.connect(any_store_uri.uri, any_store_uri.storage_options, lease_seconds=LEASE)
    read_only.store.faults.add(FaultRule("PUT", 1, "fail", times=10**6))
    assert read_only.version_at(before) == claimed - 1
    with caplog.at_level("WARNING", logger="txlake"):
        assert read_only.version_at(after) == claimed - 1
    assert "may change once they are decided" in caplog.text
    # rolled forward after its lease, the claim is decided after ``after``: the answer was right, and stays
    assert lake.version_at(after) == claimed - 1
    assert lake.transaction_status(tx.txid) == "committed"
    assert lake.snapshot(timestamp=after).read_arrow("r.b").num_rows == 0
    assert lake.version_at(datetime.now(UTC)) == claimed
    assert rows(lake.snapshot(timestamp=datetime.now(UTC)).read_arrow("r.b")) == [(1, 20)]
