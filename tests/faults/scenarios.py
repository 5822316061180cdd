"""The operations the fault campaign sweeps: a multi-table transfer, DDL in a transaction, roll-forward."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, ClassVar

import pyarrow as pa
import pytest

import txlake
from tests.faults.campaign import (
    ACCOUNTS,
    JOURNAL,
    Run,
    balances,
    connect,
    deltars_mismatches,
    setup_connect,
    wait_lease,
    wait_setup_lease,
)
from txlake.delta.actions import now_ms
from txlake.errors import SimulatedCrash
from txlake.storage import FaultRule
from txlake.txn import group
from txlake.txn.commit import Validation
from txlake.txn.intents import IntentMarker, marker_path
from txlake.txn.lease import Heartbeat, lease_path
from txlake.txn.reservations import RESERVATIONS_DIR, Reservation, post

BANK = ["bank.a", "bank.b", "bank.journal"]


def _accounts(ids: list[int], amounts: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "balance": pa.array(amounts, pa.int64())})


def _journal(ids: list[int], amounts: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array(amounts, pa.int64())})


def _transfer(tx: txlake.Transaction, journal_id: int) -> None:
    # two statements on one table: the second rewrites (and deletes) the first one's staged file
    tx.update("bank.a", set={"balance": "balance - 4"}, where="id = 1")
    tx.update("bank.a", set={"balance": "balance - 6"}, where="id = 1")
    tx.update("bank.b", set={"balance": "balance + 10"}, where="id = 1")
    tx.append("bank.journal", _journal([journal_id], [10]))


def _bank(uri: str, options: dict[str, str]) -> None:
    lake = connect(uri, options)
    lake.create_table("bank.a", ACCOUNTS)
    lake.create_table("bank.b", ACCOUNTS)
    lake.create_table("bank.journal", JOURNAL)
    with lake.transaction() as tx:
        tx.append("bank.a", _accounts([1, 2], [100, 5]))
        tx.append("bank.b", _accounts([1, 2], [100, 5]))


def _check_bank(lake: txlake.Lakehouse, transfers: dict[int, int]) -> tuple[dict[int, bool], list[str]]:
    """Which journal ids are visible; violations of conservation, all-or-nothing and delta-rs agreement."""
    a, b = balances(lake, "bank.a"), balances(lake, "bank.b")
    journal = [r["id"] for r in lake.read_arrow("bank.journal").to_pylist()]
    violations = []
    if a[1] + b[1] != 200 or a[2] != 5 or b[2] != 5:
        violations.append(f"balances broke: a={a} b={b}")
    done = (100 - a[1]) // 10
    visible = {jid: jid in journal for jid in transfers}
    if len(journal) != len(set(journal)):
        violations.append(f"a journal row appears twice: {journal}")
    if done != sum(1 for jid, amount in transfers.items() if amount and visible[jid]):
        violations.append(f"{done} transfer(s) in the balances but journal rows {journal}: not all-or-nothing")
    violations += deltars_mismatches(lake, BANK)
    return visible, violations


class Transfer:
    """Update two accounts and append a journal row in one serializable transaction."""

    name = "transfer"
    client: ClassVar[dict[str, Any]] = {}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _bank(uri, options)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction() as tx:
            run.txids.append(tx.txid)
            _transfer(tx, 1)

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            tx.append("bank.journal", _journal([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = _check_bank(lake, {1: 10, 100: 0})
        if not visible[100]:
            violations.append("the healthy client's commit is missing")
        return visible[1], violations


class ReservedTransfer(Transfer):
    """The transfer conflicts with a healthy client's rewrite of bank.a, is redone, reserves bank.a's file
    (``reserve_after=1``) and, racing, waits for an older rival reservation of the same file until that is
    withdrawn (after its second look). Reservations are advice: whatever their requests suffer, the outcome
    is that of the transfer alone."""

    name = "reserved"

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        lake.context.reserve_after = 1
        healthy = connect(lake.uri, dict(lake.store.storage_options))
        tx = lake.transaction()
        run.txids.append(tx.txid)
        _transfer(tx, 1)
        with healthy.transaction() as other:  # rewrites the file of bank.a the transfer rewrote: it is redone
            other.update("bank.a", set={"balance": "balance + 0"}, where="id = 2")
        snapshot = healthy.snapshot()
        files = frozenset(snapshot.delta_snapshot("bank.a").files)
        rival = Reservation("0" * 32, snapshot.entry("bank.a").id, files, 1, now_ms() + 60_000)
        post(healthy.store, rival)
        withdraw = FaultRule(
            "LIST", 2, "hook_after", path_contains=RESERVATIONS_DIR, hook=lambda: healthy.store.delete(rival.path)
        )
        lake.store.faults.add(withdraw)
        tx.commit()


class RollForwardHelper:
    """A transfer's owner dies after its claim; the faulty client is the helper that must roll it forward
    (its own append follows). Whatever the helper suffers, the transfer ends committed exactly once."""

    name = "rollforward"
    client: ClassVar[dict[str, Any]] = {}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _bank(uri, options)
        owner = setup_connect(uri, options)
        owner.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log/"))
        tx = owner.transaction()
        _transfer(tx, 1)
        with pytest.raises(SimulatedCrash):
            tx.commit()
        wait_setup_lease(uri)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction() as tx:
            run.txids.append(tx.txid)
            tx.append("bank.journal", _journal([2], [0]))

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            tx.append("bank.journal", _journal([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = _check_bank(lake, {1: 10, 2: 0, 100: 0})
        if not visible[1]:
            violations.append("the claimed transfer was not rolled forward")
        if not visible[100]:
            violations.append("the healthy client's commit is missing")
        return visible[2], violations


class CatalogChange:
    """Create a table and fill it, rename one, drop one, append to another: one transaction."""

    name = "ddl"
    client: ClassVar[dict[str, Any]] = {}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        lake = connect(uri, options)
        for name in ("ns.keep", "ns.old", "ns.gone"):
            lake.create_table(name, ACCOUNTS)
        with lake.transaction() as tx:
            for name in ("ns.keep", "ns.old", "ns.gone"):
                tx.append(name, _accounts([1], [1]))

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction() as tx:
            run.txids.append(tx.txid)
            tx.create_table("ns.new", ACCOUNTS)
            tx.append("ns.new", _accounts([7], [7]))
            tx.rename_table("ns.old", "ns.renamed")
            tx.drop_table("ns.gone")
            tx.append("ns.keep", _accounts([2], [2]))

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            tx.append("ns.keep", _accounts([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        names = lake.tables("ns")
        keep = sorted(balances(lake, "ns.keep"))
        applied = "ns.new" in names
        want = ["ns.keep", "ns.new", "ns.renamed"] if applied else ["ns.gone", "ns.keep", "ns.old"]
        violations = []
        if names != want:
            violations.append(f"catalog is {names}, expected {want}: not all-or-nothing")
        if keep != ([1, 2, 100] if applied else [1, 100]):
            violations.append(f"ns.keep holds ids {keep}; the catalog says applied={applied}")
        if applied and balances(lake, "ns.new") != {7: 7}:
            violations.append(f"ns.new holds {balances(lake, 'ns.new')}")
        violations += deltars_mismatches(lake, [n for n in names if n in want])
        return applied, violations


def _ids(lake: txlake.Lakehouse, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())


GROUP = ["grp.mine", "grp.theirs", "grp.member"]


def _group_tables(uri: str, options: dict[str, str]) -> None:
    lake = connect(uri, options)
    with lake.transaction() as tx:
        for name in GROUP:
            tx.create_table(name, ACCOUNTS)


def _group_violations(lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
    violations = []
    mine = _ids(lake, "grp.mine")
    if len(mine) != len(set(mine)):
        violations.append(f"a row appears twice: {mine}")
    if 100 not in _ids(lake, "grp.theirs"):
        violations.append("the healthy client's commit is missing")
    violations += deltars_mismatches(lake, GROUP)
    return 1 in mine, violations


class _GroupScenario:
    """What the group scenarios share: clients with group commit on, and the healthy client's append."""

    client: ClassVar[dict[str, Any]] = {"group_commit": True}

    def _append_mine(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction() as tx:
            run.txids.append(tx.txid)
            tx.append("grp.mine", _accounts([1], [1]))

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            tx.append("grp.theirs", _accounts([100], [0]))


class GroupMember(_GroupScenario):
    """Commit a blind append as a member of another client's group: after the faulty client's intent lands, a
    healthy client claims the version with the intent in it. Whatever the member suffers, it commits exactly when
    that version does, and what it was told agrees."""

    name = "group-member"

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _group_tables(uri, options)
        self.location = (uri, options)
        self.claimed: list[int] = []

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        def claim() -> None:
            other = connect(*self.location, group_commit=True)
            other.context.note_contention()
            with other.transaction() as tx:
                tx.append("grp.theirs", _accounts([2], [2]))
            assert tx.result is not None
            self.claimed.append(tx.result.version)

        lake.context.note_contention()
        lake.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains="_txlake/groups/", hook=claim))
        self._append_mine(lake, run)

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        applied, violations = _group_violations(lake, run)
        if self.claimed and 2 not in _ids(lake, "grp.theirs"):
            violations.append("the claimer was told it committed, but its row is missing")
        return applied, violations


class GroupClaimer(_GroupScenario):
    """Claim a version with another client's group intent in it (posted before), then publish both: whatever
    the claimer suffers, the member's append is visible exactly when the claimer's is (one version)."""

    name = "group-claimer"

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _group_tables(uri, options)
        member = connect(uri, options)
        tx = member.transaction()
        tx.append("grp.member", _accounts([5], [5]))
        # what a writer that lost a claim race does: validate against the log, post the record as an intent
        view = member.context.glog.view()
        validation = Validation(tx)
        bases = validation.validate(view)
        record = validation.record(view, bases)
        assert group.groupable(record)
        group.post_intent(member.store, record)
        self.member = (tx.txid, record.version)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        lake.context.note_contention()
        self._append_mine(lake, run)

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        applied, violations = _group_violations(lake, run)
        txid, version = self.member
        member_visible = 5 in _ids(lake, "grp.member")
        record = lake.context.glog.read_record(version)
        included = record.includes(txid)
        status = lake.transaction_status(txid, version)
        if member_visible != (included and status == "committed"):
            violations.append(f"member visible={member_visible}, in version {version}={included}, status {status}")
        if included and record.includes(run.txids[-1]) and member_visible != applied:
            violations.append(f"one version, two fates: claimer visible={applied}, member visible={member_visible}")
        return applied, violations


class PessimisticTransfer:
    """The transfer in pessimistic mode: intent markers are placed (LIST, put-if-absent, LIST) on each table
    before it is touched, a dead holder's marker found ahead on ``bank.a`` is deleted (its lease read and found
    expired), and every marker and the lease are deleted when the transaction ends. Whatever the faulty client
    suffers, a healthy pessimistic client gets through afterwards (the faulty one's markers are gone or expire
    with its lease) and the transfer is all-or-nothing."""

    name = "pessimistic"
    # transaction leases are renewed by a heartbeat thread every third of a lease: 0.2 s leaves a loaded machine
    # too little room (a late beat loses the lease, a LeaseLostError, which lake.run would retry)
    client: ClassVar[dict[str, Any]] = {"lease_seconds": 0.6}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _bank(uri, options)
        lake = connect(uri, options)
        # a holder that died holding bank.a: its lease is no longer renewed, its marker is still there
        dead = Heartbeat(lake.store, lease_seconds=0.05)
        handle = dead.hold("dead0", info={"concurrency": "pessimistic"})
        dead.release(handle, delete=False)
        table_id = lake.snapshot().entry("bank.a").id
        marker = IntentMarker("dead0", table_id, "bank.a", 0, lease_path("dead0", 0), (), 0)
        lake.store.put(marker_path(table_id, 0, "dead0"), marker.to_bytes())
        time.sleep(0.06)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        try:
            with lake.transaction(concurrency="pessimistic") as tx:
                run.txids.append(tx.txid)
                _transfer(tx, 1)
        except SimulatedCrash:
            # the process is gone: nobody renews its lease any more
            heartbeat = lake.context.heartbeat
            for handle in heartbeat.held():
                heartbeat.release(handle, delete=False)
            raise

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction(concurrency="pessimistic") as tx:
            tx.update("bank.a", set={"balance": "balance + 0"}, where="id = 2")
            tx.append("bank.journal", _journal([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = _check_bank(lake, {1: 10, 100: 0})
        if not visible[100]:
            violations.append("the healthy client's commit is missing")
        return visible[1], violations


# ------------------------------------------------------------------------- sublog, lease, resume, recover


def _die(lake: txlake.Lakehouse) -> None:
    """As if ``lake``'s process died: its heartbeat stops, its lease objects stay until they expire."""
    for handle in lake.context.heartbeat.held():
        lake.context.heartbeat.release(handle, delete=False)


def _claims_of(lake: txlake.Lakehouse, txid: str) -> list[int]:
    glog = lake.context.glog
    return [v for v in range(glog.tail().latest_claimed + 1) if glog.read_record(v).includes(txid)]


class ResumableTransfer(Transfer):
    """The transfer in a resumable transaction: faults hit the lease put and renewals, every sublog entry and the
    claim marker as well as the commit. A caller told "failed" never sees the transfer; a crashed one's is
    decided by its claim alone."""

    name = "resumable"

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        with lake.transaction(resumable=True) as tx:
            run.txids.append(tx.txid)
            _transfer(tx, 1)

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = super().check(lake, run)
        if run.txids and len(_claims_of(lake, run.txids[-1])) > 1:
            violations.append("the transaction claimed twice")
        return visible, violations


class ResumeCrashed:
    """A process stages the transfer in a resumable transaction and dies before its claim; the faulty client
    resumes it (lease takeover, sublog read, rebuild), adds a statement and commits. Whatever it suffers, the
    transfer appears all or nothing, at most once, and only if the resumer was not told it failed."""

    name = "resume"
    client: ClassVar[dict[str, Any]] = {}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _bank(uri, options)
        owner = setup_connect(uri, options)
        tx = owner.transaction(resumable=True)
        _transfer(tx, 1)
        _die(owner)
        self.txid = tx.txid
        wait_setup_lease(uri)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        run.txids.append(self.txid)
        tx = lake.resume(self.txid)
        with tx:
            tx.append("bank.journal", _journal([2], [0]))

    def second(self, lake: txlake.Lakehouse) -> None:
        with lake.transaction() as tx:
            tx.append("bank.journal", _journal([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = _check_bank(lake, {1: 10, 2: 0, 100: 0})
        if visible[1] != visible[2]:
            violations.append("the resumed statements and the added one did not commit together")
        if not visible[100]:
            violations.append("the healthy client's commit is missing")
        if len(_claims_of(lake, self.txid)) > 1:
            violations.append("the resumed transaction claimed twice")
        return visible[1], violations


class RecoverDead:
    """The faulty client runs ``recover(guard=0)`` over a transaction that died before its claim, one that
    died after its claim and one that is alive in another client. Whatever recover suffers: the dead one
    never appears, the claimed one commits exactly once, the live one commits afterwards with its files intact,
    and a later healthy recover finishes the job."""

    name = "recover"
    client: ClassVar[dict[str, Any]] = {}

    def setup(self, uri: str, options: dict[str, str]) -> None:
        _bank(uri, options)
        dead = setup_connect(uri, options)
        tx = dead.transaction(resumable=True)
        _transfer(tx, 1)
        self.dead = tx.txid
        claimer = setup_connect(uri, options)
        claimer.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains=".outcome.json"))
        claimed = claimer.transaction(resumable=True)
        claimed.append("bank.journal", _journal([3], [0]))
        with pytest.raises(SimulatedCrash):
            claimed.commit()
        self.claimed = claimed.txid
        _die(dead)
        _die(claimer)
        # a lease long enough that a stalled heartbeat thread on a loaded machine cannot let it lapse
        self.live_lake = txlake.connect(uri, options, lease_seconds=5.0)
        self.live = self.live_lake.transaction(resumable=True)
        self.live.append("bank.journal", _journal([4], [0]))
        wait_setup_lease(uri)

    def act(self, lake: txlake.Lakehouse, run: Run) -> None:
        lake.recover(guard=timedelta(0), dry_run=False)

    def second(self, lake: txlake.Lakehouse) -> None:
        self.live.commit()  # alive throughout: recover must have left its files alone
        with lake.transaction() as tx:
            tx.append("bank.journal", _journal([100], [0]))

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        visible, violations = _check_bank(lake, {1: 10, 3: 0, 4: 0, 100: 0})
        if visible[1]:
            violations.append("the dead transaction (never claimed) appeared")
        if not visible[3]:
            violations.append("the claimed transaction was not rolled forward")
        if not visible[4]:
            violations.append("the live transaction's commit is missing")
        if len(_claims_of(lake, self.claimed)) != 1:
            violations.append("the claimed transaction was claimed again")
        wait_lease(lake.uri)  # a fencing lease the faulty recover took stays alive for one lease
        report = connect(*self._location(lake)).recover(guard=timedelta(0), dry_run=False)
        if any(t.action not in ("aborted", "skipped", "rolled_forward") for t in report.transactions):
            violations.append(f"a healthy recover afterwards left {report.transactions}")
        left = {m.path.split("/")[2] for m in lake.store.list("_txlake/txns/")} - {self.dead}
        if left:
            violations.append(f"transaction directories left after recover: {left}")
        try:
            lake.resume(self.dead)
            violations.append("the dead transaction could be resumed after recover")
        except txlake.TransactionNotResumableError:
            pass
        return run.caller == "ok", violations

    @staticmethod
    def _location(lake: txlake.Lakehouse) -> tuple[str, dict[str, str]]:
        return lake.uri, dict(lake.store.storage_options)
