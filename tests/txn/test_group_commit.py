"""Group commit: a writer that lost a claim race posts its blind appends as an intent, and the next claimer
commits them in its own version (docs/protocol.md §3). Members commit or abort with that version, never twice,
and a crashed claimer's batch is rolled forward by a member."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.interop.deltars import sql_rows
from tests.services import StoreLocation
from tests.txn.conftest import ACCOUNTS, accounts
from tests.txn.groups import create_tables, grouping_lake, ids
from txlake.bench.commit import RequestRecorder
from txlake.delta.actions import Add, Metadata
from txlake.errors import ConflictError, InvalidArgumentTypeError, SimulatedCrash
from txlake.lakehouse.records import CreateNamespace, GlobalRecord, ReadSet, TableChange
from txlake.storage import FaultRule
from txlake.txn import commit, group

deltalake = pytest.importorskip("deltalake")

LEASE = 0.5


# ------------------------------------------------------------------------------------------- merge rules


def _add(name: str) -> Add:
    return Add(f"{name}.parquet", {}, 10, 1)


def _append(table: str, *files: str, base: int = 0) -> TableChange:
    return TableChange(table, table, base, tuple(_add(f) for f in files), "WRITE", blind_append=True)


def _record(txid: str, *changes: TableChange, version: int = 5, **kwargs: object) -> GlobalRecord:
    return GlobalRecord(version, txid, "txn", 4, "serializable", 0, 0, tuple(changes), **kwargs)  # type: ignore[arg-type]


LIVE = frozenset({"t1", "t2", "t3"})


def test_only_blind_appends_are_groupable() -> None:
    assert group.groupable(_record("a", _append("t1", "f")))
    assert not group.groupable(_record("a"))  # nothing to commit
    assert not group.groupable(_record("a", _append("t1", "f"), catalog=(CreateNamespace("ns"),)))
    reads = TableChange("t1", "t1", 0, (_add("f"),), "WRITE", blind_append=True, query_reads=ReadSet(("x > 1",)))
    assert not group.groupable(_record("a", reads))
    not_blind = TableChange("t1", "t1", 0, (_add("f"),), "WRITE", blind_append=False)
    assert not group.groupable(_record("a", not_blind))
    meta = TableChange("t1", "t1", 0, (Metadata("id", "{}", ()),), "WRITE", blind_append=True)
    assert not group.groupable(_record("a", meta))
    adopting = TableChange("t1", "t1", 3, (_add("f"),), "WRITE", blind_append=True, adopted_from=1)
    assert not group.groupable(_record("a", adopting))


def test_merge_appends_members_after_the_claimer() -> None:
    own = _record("own", _append("t1", "own", base=3))
    m1 = _record("m1", _append("t1", "m1", base=2), _append("t2", "m1b"))
    m2 = _record("m2", _append("t3", "m2"))
    merged = group.merge(own, [m1, m2], live_tables=LIVE)
    assert merged.members == ("m1", "m2")
    assert [c.table_id for c in merged.tables] == ["t1", "t2", "t3"]
    t1 = merged.table("t1")
    assert t1 is not None and [a.path for a in t1.actions] == ["own.parquet", "m1.parquet"]  # type: ignore[union-attr]
    assert t1.base_version == 2  # the lower base: publication re-checks every commit either one skipped
    assert merged.includes("m2") and merged.includes("own") and not merged.includes("other")
    assert GlobalRecord.from_bytes(merged.to_bytes()) == merged


def test_merge_leaves_out_what_could_conflict() -> None:
    ddl = _record("own", _append("t1", "own"), catalog=(CreateNamespace("ns"),))
    assert group.merge(ddl, [_record("m", _append("t2", "m"))], live_tables=LIVE).members == ()
    rewrite = TableChange("t1", "t1", 0, (_add("x"),), "UPDATE", blind_append=False, dml_reads=ReadSet(("id = 1",)))
    own = _record("own", rewrite)
    merged = group.merge(
        own, [_record("m1", _append("t1", "m1")), _record("m2", _append("t2", "m2"))], live_tables=LIVE
    )
    assert merged.members == ("m2",)  # the claimer rewrites t1: an append there was not validated against it
    gone = group.merge(_record("own", _append("t1", "o")), [_record("m", _append("t9", "m"))], live_tables=LIVE)
    assert gone.members == ()  # t9 is not a live table of the claimed state
    other_version = _record("m", _append("t2", "m"), version=6)
    assert group.merge(_record("own", _append("t1", "o")), [other_version], live_tables=LIVE).members == ()


def test_merge_caps_the_group() -> None:
    members = [_record(f"m{i:03d}", _append("t2", f"m{i}")) for i in range(group.MAX_MEMBERS + 5)]
    merged = group.merge(_record("own", _append("t1", "o")), members, live_tables=LIVE)
    assert len(merged.members) == group.MAX_MEMBERS


# --------------------------------------------------------------------------------------------- end to end


def _deltarsids(lake: txlake.Lakehouse, name: str, options: dict[str, str]) -> list[int]:
    dt = deltalake.DeltaTable(lake.table_location(name), storage_options=options or None)
    return sorted(int(v) for v in sql_rows(dt, "SELECT id FROM t")["id"].to_pylist())


def _after_intent(lake: txlake.Lakehouse, hook: object) -> None:
    """Run ``hook`` once ``lake``'s next group intent has landed (before it looks for the version's claim)."""
    lake.store.faults.add(FaultRule("PUT", 1, "hook_after", path_contains="_txlake/groups/", hook=hook))  # type: ignore[arg-type]


def test_a_member_commits_in_the_claimers_version(any_store_uri: StoreLocation) -> None:
    if any_store_uri.uri.startswith("memory"):
        pytest.skip("delta-rs reads no memory:// store")
    create_tables(any_store_uri, "g.mine", "g.theirs")
    member, claimer = grouping_lake(any_store_uri), grouping_lake(any_store_uri)
    claims: list[txlake.CommitResult] = []

    def claim() -> None:
        with claimer.transaction() as tx:
            tx.append("g.theirs", accounts([2], [20]))
        assert tx.result is not None
        claims.append(tx.result)

    _after_intent(member, claim)
    with member.transaction() as tx:
        tx.append("g.mine", accounts([1], [10]))
    assert tx.result is not None and tx.status == "committed"
    assert [c.version for c in claims] == [tx.result.version]  # one version commits both
    record = member.context.glog.read_record(tx.result.version)
    assert record.members == (tx.txid,) and record.txid != tx.txid
    reader = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    assert ids(reader, "g.mine") == [1] and ids(reader, "g.theirs") == [2]
    assert reader.transaction_status(tx.txid) == "committed"
    assert tx.result.table_versions == {reader.snapshot().entry("g.mine").id: reader.snapshot().table_version("g.mine")}
    assert _deltarsids(reader, "g.mine", any_store_uri.storage_options) == [1]


def test_a_member_reads_nothing_of_the_log_beyond_its_version(any_store_uri: StoreLocation) -> None:
    """Waiting for the versions before its own to be decided, a member walks the log up to its version only:
    it does not look for a version after it (every walk to the end finds nothing there, one GET per commit)."""
    create_tables(any_store_uri, "g.mine", "g.theirs")
    member, claimer = grouping_lake(any_store_uri), grouping_lake(any_store_uri)
    seen = _paced(member, [])

    def claim() -> None:
        with claimer.transaction() as tx:
            tx.append("g.theirs", accounts([2], [20]))

    _after_intent(member, claim)
    with member.transaction() as tx:
        tx.append("g.mine", accounts([1], [10]))
    assert tx.result is not None and member.context.glog.read_record(tx.result.version).members == (tx.txid,)
    after = f"_txlake/log/{tx.result.version + 1:020d}"
    assert not [p for (kind, p) in seen.take() if kind == "GET" and p.startswith(after)]


def _grouped_appends(
    member: txlake.Lakehouse,
    claimer: txlake.Lakehouse,
    table: str,
    rounds: int,
    rows: Callable[[int], pa.Table] = lambda i: accounts([i], [i]),
) -> None:
    """``rounds`` versions, each the claimer's append to g.theirs with the member's append of ``rows(i)`` to
    ``table``."""
    for i in range(1, rounds + 1):

        def claim(i: int = i) -> None:
            with claimer.transaction() as tx:
                tx.append("g.theirs", accounts([100 + i], [i]))

        _after_intent(member, claim)
        with member.transaction() as tx:
            tx.append(table, rows(i))
        assert tx.result is not None
        assert member.context.glog.read_record(tx.result.version).members == (tx.txid,)


def test_each_transaction_of_a_group_checkpoints_its_own_tables(any_store_uri: StoreLocation) -> None:
    """A member writes the Delta checkpoints its appends make due; the claimer never reads the member's table
    (loading it after every commit cost 16 writers on disjoint tables a quarter of their requests)."""
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    with lake.transaction() as tx:
        tx.create_table("g.mine", ACCOUNTS, properties={"delta.checkpointInterval": "3"})
        tx.create_table("g.theirs", ACCOUNTS, properties={"delta.checkpointInterval": "2"})
    member, claimer = grouping_lake(any_store_uri), grouping_lake(any_store_uri)
    mine = "/".join(member.table_location("g.mine").rstrip("/").rsplit("/", 2)[-2:]) + "/_delta_log/"
    theirs = "/".join(member.table_location("g.theirs").rstrip("/").rsplit("/", 2)[-2:]) + "/_delta_log/"
    recorder = RequestRecorder(what=str)  # counts by path
    claimer.store.faults = recorder
    _grouped_appends(member, claimer, "g.mine", 3)  # g.mine's and g.theirs's Delta versions 1, 2, 3
    assert not [path for kind, path in recorder.seen if kind != "PUT" and mine in path]  # it only publishes
    assert member.store.exists(f"{mine}{3:020d}.checkpoint.parquet")  # the member's
    assert not member.store.exists(f"{mine}{2:020d}.checkpoint.parquet")
    assert member.store.exists(f"{theirs}{2:020d}.checkpoint.parquet")  # the claimer's
    reader = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    assert ids(reader, "g.mine") == [1, 2, 3] and ids(reader, "g.theirs") == [101, 102, 103]


def test_a_members_registered_table_keeps_its_own_checkpoint_interval(tmp_path: Path) -> None:
    """A registered table's interval is only in its Delta configuration: the member, which has the table's
    snapshot, honours it (found by review: a claimer guessing from the catalog wrote none)."""
    location = tmp_path / "ext" / "t"
    deltalake.write_deltalake(
        str(location), pa.table({"id": pa.array([0], pa.int64())}), configuration={"delta.checkpointInterval": "2"}
    )
    loc = StoreLocation(tmp_path.as_uri(), {})
    lake = txlake.connect(loc.uri)
    lake.register_table("ext.t", "ext/t")
    with lake.transaction() as tx:
        tx.create_table("g.theirs", ACCOUNTS)
    member, claimer = grouping_lake(loc), grouping_lake(loc)
    _grouped_appends(member, claimer, "ext.t", 4, rows=lambda i: pa.table({"id": pa.array([i], pa.int64())}))
    checkpoints = sorted(p.name for p in (location / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == [f"{2:020d}.checkpoint.parquet", f"{4:020d}.checkpoint.parquet"]
    assert ids(txlake.connect(loc.uri), "ext.t") == [0, 1, 2, 3, 4]


def _paced(lake: txlake.Lakehouse, rules: list[FaultRule]) -> RequestRecorder:
    """Record ``lake``'s requests by path, with ``rules`` armed."""
    recorder = RequestRecorder(what=str)
    for rule in rules:
        recorder.add(rule)
    lake.store.faults = recorder
    return recorder


def test_a_writer_defers_to_the_smallest_intent_of_its_version(any_store_uri: StoreLocation) -> None:
    """Two writers posted intents for the same version and found it unclaimed: the one whose txid is larger
    waits for the other's claim (which takes it in) instead of reading the intents and racing to claim."""
    create_tables(any_store_uri, "g.a", "g.b")
    lakes = [grouping_lake(any_store_uri), grouping_lake(any_store_uri)]
    txs = [lake.transaction() for lake in lakes]
    txs[0].append("g.a", accounts([1], [10]))
    txs[1].append("g.b", accounts([2], [20]))
    (leader_lake, leader), (follower_lake, follower) = sorted(zip(lakes, txs, strict=True), key=lambda p: p[1].txid)
    version = leader_lake.snapshot().version + 1
    record_key = f"_txlake/log/{version:020d}.json"
    posted, listed, claimed = threading.Event(), threading.Event(), threading.Event()

    def after_the_follower_listed() -> None:
        if listed.is_set():
            assert claimed.wait(10)

    _paced(
        leader_lake,
        [
            FaultRule(
                "PUT", 1, "hook_after", path_contains="_txlake/groups/", hook=lambda: [posted.set(), listed.wait(10)]
            ),
            FaultRule("PUT", 1, "hook_after", path_contains=record_key, hook=claimed.set),
        ],
    )
    seen = _paced(
        follower_lake,
        [
            FaultRule("PUT", 1, "hook", path_contains="_txlake/groups/", hook=lambda: posted.wait(10)),
            FaultRule("LIST", 1, "hook_after", path_contains="_txlake/groups/", hook=listed.set),
            FaultRule("GET", 1, "hook", path_contains=record_key, times=100, hook=after_the_follower_listed),
        ],
    )
    with ThreadPoolExecutor(1) as pool:
        leading = pool.submit(leader.commit)
        result = follower.commit()
        led = leading.result(timeout=30)
    assert result.version == led.version == version
    record = follower_lake.context.glog.read_record(version)
    assert record.txid == leader.txid and record.members == (follower.txid,)
    follower_requests = seen.take()
    assert not [p for (kind, p) in follower_requests if kind == "GET" and "_txlake/groups/" in p]  # no intent read
    assert not [p for (kind, p) in follower_requests if kind == "PUT" and p.endswith(record_key)]  # no claim race
    reader = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    assert ids(reader, "g.a") == [1] and ids(reader, "g.b") == [2]


def test_a_writer_claims_itself_when_the_leader_never_does(any_store_uri: StoreLocation) -> None:
    """The smallest intent of the version belongs to a writer that never claims (here: not an intent at all):
    the writer deferring to it looks for the claim a few times, then collects and claims itself."""
    create_tables(any_store_uri, "g.a")
    lake = grouping_lake(any_store_uri)
    version = lake.snapshot().version + 1
    lake.store.put(group.intent_path(version, "0" * 32), b"{}")  # sorts first; never merged
    seen = _paced(lake, [])
    with lake.transaction() as tx:
        tx.append("g.a", accounts([1], [10]))
    assert tx.result is not None and tx.result.version == version
    record_gets = [p for (kind, p) in seen.take().elements() if kind == "GET" and p.endswith(f"{version:020d}.json")]
    assert len(record_gets) >= 1 + commit.LEADER_POLLS  # after posting, then each look while deferring
    assert lake.context.glog.read_record(version).members == ()
    assert ids(txlake.connect(any_store_uri.uri, any_store_uri.storage_options), "g.a") == [1]


def test_a_member_of_an_aborted_group_never_appears(tmp_path: object) -> None:
    """A plain writer changes the member's table's schema before the claimer publishes: the whole version aborts,
    and the member is told so and never appears."""
    loc = StoreLocation(f"file://{tmp_path}", {})
    create_tables(loc, "g.mine", "g.theirs")
    member, claimer = grouping_lake(loc), grouping_lake(loc)
    location = member.table_location("g.mine")
    failures: list[BaseException] = []

    def plain_then_claim() -> None:
        wider = pa.table({"id": [7], "balance": [70], "note": ["plain"]})
        deltalake.write_deltalake(location, wider, mode="append", schema_mode="merge")
        try:
            with claimer.transaction() as tx:
                tx.append("g.theirs", accounts([2], [20]))
        except ConflictError as exc:
            failures.append(exc)

    _after_intent(member, plain_then_claim)
    tx = member.transaction()
    tx.append("g.mine", accounts([1], [10]))
    with pytest.raises(ConflictError, match="with this one in its group"):
        tx.commit()
    assert len(failures) == 1  # the claimer's version aborted too
    reader = txlake.connect(loc.uri)
    assert reader.transaction_status(tx.txid) == "aborted"
    assert 1 not in _deltarsids(reader, "g.mine", {})
    assert ids(reader, "g.theirs") == []
    # the table converges: the next writer conflicts with the plain commit, adopts it, and its retry commits
    reader.run(lambda again: again.append("g.mine", accounts([3], [30])))
    assert ids(reader, "g.mine") == [3, 7]


def test_a_crashed_claimers_batch_is_rolled_forward_by_its_member(any_store_uri: StoreLocation) -> None:
    """Writers keep committing in groups while one claimer dies between its claim and its publication with
    another writer's intent in its version: that member waits out the lease and publishes the batch."""
    if any_store_uri.uri.startswith("memory"):
        pytest.skip("delta-rs reads no memory:// store")
    writers = 3
    rounds = 4 if any_store_uri.uri.startswith("s3") else 8
    create_tables(any_store_uri, "g.member", "g.crashed", *(f"g.w{w}" for w in range(writers)))
    member = grouping_lake(any_store_uri, LEASE)
    crashed: list[BaseException] = []

    def crash_with_the_member_inside() -> None:
        doomed = grouping_lake(any_store_uri, LEASE)
        doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log/"))
        try:
            with doomed.transaction() as tx:
                tx.append("g.crashed", accounts([99], [99]))
        except SimulatedCrash as exc:
            crashed.append(exc)

    # the crash happens in the middle of the writers' run: they are held back while the member begins (so that
    # the doomed claimer takes exactly the version the member's intent names), and let go once it has crashed
    cond = threading.Condition()
    paused, active = False, 0

    def writer(w: int) -> int:
        nonlocal active
        lake = grouping_lake(any_store_uri, LEASE)
        for i in range(rounds):
            with cond:
                cond.wait_for(lambda: not paused, timeout=60)
                active += 1
            try:
                lake.context.note_contention()
                lake.run(lambda tx, i=i: tx.append(f"g.w{w}", accounts([i], [i])), retries=20)
            finally:
                with cond:
                    active -= 1
                    cond.notify_all()
        return len(lake.context.helped)

    def crash_then_resume() -> None:
        nonlocal paused
        crash_with_the_member_inside()
        with cond:
            paused = False
            cond.notify_all()

    with ThreadPoolExecutor(writers) as pool:
        futures = [pool.submit(writer, w) for w in range(writers)]
        with cond:
            cond.wait_for(lambda: active > 0, timeout=60)
            paused = True
            cond.wait_for(lambda: active == 0, timeout=60)
        _after_intent(member, crash_then_resume)
        member.context.note_contention()
        with member.transaction() as tx:
            tx.append("g.member", accounts([1], [10]))
        helped = [f.result(timeout=300) for f in futures]
    assert len(crashed) == 1
    assert tx.result is not None
    record = member.context.glog.read_record(tx.result.version)
    assert tx.txid in record.members and record.table(member.snapshot().entry("g.crashed").id) is not None
    assert tx.result.version in member.context.helped or sum(helped) >= 1  # somebody rolled it forward
    reader = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    assert ids(reader, "g.member") == [1] and ids(reader, "g.crashed") == [99]
    for w in range(writers):
        assert ids(reader, f"g.w{w}") == list(range(rounds))
        assert _deltarsids(reader, f"g.w{w}", any_store_uri.storage_options) == list(range(rounds))
    assert _deltarsids(reader, "g.member", any_store_uri.storage_options) == [1]


def test_intents_of_claimed_versions_are_cleaned_with_the_global_checkpoint(any_store_uri: StoreLocation) -> None:
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options, checkpoint_interval=4)
    lake.create_table("g.t", ACCOUNTS)  # version 1
    store = lake.store
    for version in (1, 2, 3, 5, 9):
        group.post_intent(store, _record(f"tx{version}", _append("t1", "f"), version=version))
    store.put(f"{group.GROUPS_DIR}/not-a-version/x.json", b"{}")
    assert group.clean(store, 2) == 2
    left = sorted(m.path.split("/")[-1] for m in store.list(group.GROUPS_DIR + "/"))
    assert left == ["tx3.json", "tx5.json", "tx9.json", "x.json"]
    for i in range(3):  # versions 2, 3, 4: the checkpoint at 4 cleans what was posted for versions up to 4
        with lake.transaction() as tx:
            tx.append("g.t", accounts([i], [i]))
    assert lake.version() == 4
    left = sorted(m.path.split("/")[-1] for m in store.list(group.GROUPS_DIR + "/"))
    assert left == ["tx5.json", "tx9.json", "x.json"]
    local = store.local_path(group.GROUPS_DIR)
    if local is not None:  # local disk: the cleaned versions' directories go too
        assert sorted(os.listdir(local)) == ["00000000000000000005", "00000000000000000009", "not-a-version"]


def test_group_commit_is_on_by_default_on_local_disk_and_off_in_memory(tmp_path: object) -> None:
    """Since 2026-11-29 local disk commits in groups too (losing a claim race a dozen times per commit at 16 writers
    cost more than the intents); ``memory://`` is one process."""
    assert txlake.connect(f"file://{tmp_path}").context.group_commit
    off = txlake.connect(f"file://{tmp_path}", group_commit=False)
    off.context.note_contention()
    assert off.context.racing and not off.context.contended  # turned off: a lost race only counts
    memory = txlake.connect("memory://")
    assert not memory.context.group_commit
    with pytest.raises(InvalidArgumentTypeError, match="group_commit"):
        txlake.connect(f"file://{tmp_path}", group_commit="yes")  # type: ignore[arg-type]


def test_group_commit_is_on_by_default_on_s3(s3_uri: str, s3_options: dict[str, str]) -> None:
    assert txlake.connect(s3_uri, s3_options).context.group_commit


def test_an_intent_older_than_an_hour_is_never_merged(tmp_path: object) -> None:
    """Vacuum deletes unreferenced files once 26 hours old; an intent posted long ago (its owner gone) is left
    out, so a claimer can never commit files vacuum may have deleted."""
    import dataclasses
    import time

    from txlake.lakehouse.ages import MAX_INTENT_AGE
    from txlake.storage import ObjectStore

    store = ObjectStore.from_uri(f"memory://{id(tmp_path)}")
    now = int(time.time() * 1000)
    stale = now - int(MAX_INTENT_AGE.total_seconds() * 1000) - 1000
    for txid, when in (("fresh", now), ("stale", stale)):
        record = dataclasses.replace(_record(txid, _append("t1", txid), version=7), timestamp_ms=when)
        group.post_intent(store, record)
    assert [r.txid for r in group.collect(store, 7, group.listed(store, 7), exclude="me")] == ["fresh"]
