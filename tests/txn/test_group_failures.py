"""Group commit under failures (docs/protocol.md §3, found by adversarial review): once a transaction's intent
for version G is posted, only G's record may say it failed."""

from __future__ import annotations

import pytest

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import accounts
from tests.txn.groups import create_tables, grouping_lake, ids
from txlake.errors import CommitStateUnknownError, ConflictError, InjectedFaultError
from txlake.storage import FaultRule

deltalake = pytest.importorskip("deltalake")


@pytest.fixture
def loc(tmp_path: object) -> StoreLocation:
    return StoreLocation(f"file://{tmp_path}", {})


def test_claim_refused_after_intent_is_not_reported_as_failed(loc: StoreLocation) -> None:
    """The owner posted its intent for G, then its own claim of G is refused (a permanent storage error) and
    nobody has claimed G yet: the next claimer of G may still merge the intent, so the commit state is unknown
    -- it used to raise StorageError, and the "failed" transaction appeared a moment later."""
    create_tables(loc, "g.mine", "g.theirs")
    member, claimer = grouping_lake(loc), grouping_lake(loc)
    member.store.faults.add(FaultRule("PUT", 1, "fail", path_contains="_txlake/log/"))  # its claim of G
    tx = member.transaction()
    tx.append("g.mine", accounts([1], [10]))
    with pytest.raises(CommitStateUnknownError) as raised:
        tx.commit()
    assert tx.status == "unknown"
    with claimer.transaction() as other:  # claims G, merging the intent left behind
        other.append("g.theirs", accounts([2], [20]))
    reader = txlake.connect(loc.uri)
    assert ids(reader, "g.mine") == [1]
    assert reader.transaction_status(tx.txid, raised.value.version) == "committed"


def test_claim_refused_after_intent_when_another_claimed_without_it(loc: StoreLocation) -> None:
    """The same refusal, but G was claimed meanwhile by a client that did not take the intent in (it was not
    contended): G's record proves the transaction out, so the error is final and nothing of it ever appears."""
    create_tables(loc, "g.mine", "g.theirs")
    member = grouping_lake(loc)
    plain = txlake.connect(loc.uri)  # not contended: claims without looking at intents

    def claim_without_it_then_refuse() -> None:
        with plain.transaction() as other:
            other.append("g.theirs", accounts([2], [20]))
        raise InjectedFaultError("injected refusal of the claim", path="_txlake/log/", kind="PUT")

    member.store.faults.add(
        FaultRule("PUT", 1, "hook", path_contains="_txlake/log/", hook=claim_without_it_then_refuse)
    )
    tx = member.transaction()
    tx.append("g.mine", accounts([1], [10]))
    with pytest.raises(InjectedFaultError):
        tx.commit()
    assert tx.status == "aborted"
    again = grouping_lake(loc)  # a contended claimer of the next versions finds no intent of it to merge
    with again.transaction() as other:
        other.append("g.theirs", accounts([3], [30]))
    reader = txlake.connect(loc.uri)
    assert ids(reader, "g.mine") == [] and ids(reader, "g.theirs") == [2, 3]
    assert reader.transaction_status(tx.txid) != "committed"


def test_a_serializable_reader_is_never_grouped_past_a_change_it_read(loc: StoreLocation) -> None:
    """Holds (regression): a serializable transaction that read ``g.q`` and appends to ``g.x`` posts no intent
    (its read set makes it non-groupable); the claimer that updated ``g.q`` meanwhile makes it conflict."""
    create_tables(loc, "g.q", "g.x")
    seed = txlake.connect(loc.uri)
    with seed.transaction() as tx:
        tx.append("g.q", accounts([1], [10]))
    member, claimer = grouping_lake(loc), grouping_lake(loc)

    def update_q() -> None:
        with claimer.transaction() as other:
            other.update("g.q", {"balance": "balance + 1"}, where="id = 1")

    member.store.faults.add(FaultRule("PUT", 1, "hook", path_contains="_txlake/", hook=update_q))
    tx = member.transaction(isolation="serializable")
    total = sum(tx.read_arrow("g.q")["balance"].to_pylist())
    tx.append("g.x", accounts([2], [total]))
    with pytest.raises(ConflictError):
        tx.commit()
    reader = txlake.connect(loc.uri)
    assert ids(reader, "g.x") == []
    assert not any(m.path.startswith("_txlake/groups/") for m in reader.store.list("_txlake/groups/"))
