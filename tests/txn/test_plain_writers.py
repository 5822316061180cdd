"""Plain Delta writers (delta-rs) on lakehouse tables: detected, conflict-checked, adopted."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, delete_with_deletion_vector, rows
from txlake.errors import ConflictError
from txlake.storage import FaultRule

deltalake = pytest.importorskip("deltalake")


def test_plain_append_is_adopted_by_sync_and_by_writers(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("p.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.t", accounts([1], [10]))
    location = lake.table_location("p.t")
    deltalake.write_deltalake(location, accounts([2], [20]), mode="append")
    # not adopted yet: lakehouse readers keep the mapped version
    assert rows(lake.read_arrow("p.t")) == [(1, 10)]
    with lake.transaction() as tx:
        tx.append("p.t", accounts([3], [30]))  # blind append: compatible, adopts the plain commit
    assert rows(lake.read_arrow("p.t")) == [(1, 10), (2, 20), (3, 30)]
    assert lake.snapshot().table_version("p.t") == 3

    deltalake.write_deltalake(location, accounts([4], [40]), mode="append")
    before = lake.version()
    lake.sync()
    assert lake.version() == before + 1
    assert rows(lake.read_arrow("p.t")) == [(1, 10), (2, 20), (3, 30), (4, 40)]
    lake.sync()  # nothing to adopt: no new version
    assert lake.version() == before + 1


def test_plain_delete_conflicts_with_txlake_update(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("p.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.t", accounts([1, 2], [10, 20]))
    tx = lake.transaction("snapshot")
    tx.update("p.t", set={"balance": "balance + 1"}, where="id = 1")
    deltalake.DeltaTable(lake.table_location("p.t")).delete("id = 2")
    with pytest.raises(ConflictError):
        tx.commit()
    # the plain writer's delete is intact and becomes visible once adopted
    lake.sync()
    assert rows(lake.read_arrow("p.t")) == [(1, 10)]


def test_deltars_reads_every_txlake_version(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    with lake.transaction() as tx:
        tx.create_table("p.t", ACCOUNTS)
        tx.append("p.t", accounts([1, 2, 3], [1, 2, 3]))
    with lake.transaction() as tx:
        tx.update("p.t", set={"balance": "balance * 2"}, where="id > 1")
    with lake.transaction() as tx:
        tx.delete("p.t", where="id = 1")
    expected = {0: [(1, 1), (2, 2), (3, 3)], 1: [(1, 1), (2, 4), (3, 6)], 2: [(2, 4), (3, 6)]}
    location = lake.table_location("p.t")
    for version, want in expected.items():
        dt = deltalake.DeltaTable(location, version=version)
        got = pa.concat_tables([pa.parquet.read_table(u.removeprefix("file://")) for u in dt.file_uris()])
        assert rows(got) == want
    # history() parses every commit (txlake writes no unknown action lines)
    assert [h["operation"] for h in deltalake.DeltaTable(location).history()] == ["DELETE", "UPDATE", "CREATE TABLE"]


def test_plain_writer_racing_publish_compatible(local_lake: txlake.Lakehouse) -> None:
    """A plain append lands exactly between our claim and our Delta commit: we publish one slot later."""
    lake = local_lake
    lake.create_table("p.t", ACCOUNTS)
    location = lake.table_location("p.t")
    racer = TxlakeFaultHook(lambda: deltalake.write_deltalake(location, accounts([2], [20]), mode="append"))
    lake.store.faults.add(racer.rule("p/t/_delta_log/"))
    with lake.transaction() as tx:
        tx.append("p.t", accounts([1], [10]))
    assert racer.fired
    assert tx.result is not None and tx.result.table_versions
    assert list(tx.result.table_versions.values()) == [2]  # 1 was taken by the plain writer
    assert rows(lake.read_arrow("p.t")) == [(1, 10), (2, 20)]


def test_publication_steps_over_many_plain_commits_with_one_snapshot_load(local_lake: txlake.Lakehouse) -> None:
    """Plain commits landing between our claim and our Delta commit are each read and conflict-checked, but
    the base snapshot (for our schema) is loaded once: a load per plain commit (a LIST and the log each time)
    let a plain writer committing every 10 ms keep txlake writers publishing forever."""
    from txlake.bench.commit import RequestRecorder
    from txlake.delta.actions import CommitInfo, Txn

    lake = local_lake
    lake.create_table("p.t", ACCOUNTS)
    log = txlake.connect(lake.uri).delta_log("p.t")  # another client: its requests are not counted below
    plain = 30

    def burst() -> None:
        for i in range(plain):
            log.write_commit(1 + i, [CommitInfo({"operation": "PLAIN"}), Txn("app", i, None)])

    racer = TxlakeFaultHook(burst)
    lake.store.faults.add(racer.rule("p/t/_delta_log/"))  # just before our Delta commit: after the claim
    with lake.transaction() as tx:
        tx.append("p.t", accounts([1], [10]))
        recorder = RequestRecorder()
        recorder.add(racer.rule("p/t/_delta_log/"))
        lake.store.faults = recorder
    assert racer.fired
    assert tx.result is not None and list(tx.result.table_versions.values()) == [plain + 1]
    seen = recorder.take()
    assert seen[("GET", "delta commit")] >= plain  # each plain commit is read once, to be checked
    assert seen[("LIST", "delta log listing")] <= 2, seen  # and the base snapshot loaded once, not 30 times
    assert rows(lake.read_arrow("p.t")) == [(1, 10)]
    assert lake.snapshot().table_version("p.t") == plain + 1


def test_plain_writer_racing_publish_incompatible_is_compensated(local_lake: txlake.Lakehouse) -> None:
    """An incompatible plain commit during publication aborts the transaction; published tables are undone."""
    lake = local_lake
    for name in ("p.a", "p.b"):
        lake.create_table(name, ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.a", accounts([1], [10]))
        tx.append("p.b", accounts([1], [10]))
    state = lake.snapshot().state
    first, second = sorted((state.table_by_name(n) for n in ("p.a", "p.b")), key=lambda e: e.id)  # type: ignore[union-attr]
    racer = TxlakeFaultHook(lambda: deltalake.DeltaTable(lake.store.url(second.path)).delete("id = 1"))
    lake.store.faults.add(racer.rule(f"{second.path}/_delta_log/"))  # just before the second table's commit
    tx = lake.transaction("snapshot")
    tx.update(first.name, set={"balance": "11"}, where="id = 1")
    tx.update(second.name, set={"balance": "11"}, where="id = 1")
    with pytest.raises(ConflictError) as raised:
        tx.commit()
    assert racer.fired
    assert raised.value.table == second.name and f" {second.name} " in str(raised.value)  # the name, not the path
    # the lakehouse never saw the transaction; the first table's Delta log holds it and its compensation
    assert rows(lake.read_arrow(first.name)) == [(1, 10)]
    dt = deltalake.DeltaTable(lake.store.url(first.path))
    assert [h["operation"] for h in dt.history()][:2] == ["TXLAKE COMPENSATE", "UPDATE"]
    got = pa.concat_tables([pa.parquet.read_table(u.removeprefix("file://")) for u in dt.file_uris()])
    assert rows(got) == [(1, 10)]
    assert lake.transaction_status(tx.txid) == "aborted"
    lake.sync()  # adopts the compensated pair on the first table and the plain delete on the second
    assert rows(lake.read_arrow(first.name)) == [(1, 10)]
    assert rows(lake.read_arrow(second.name)) == []


class TxlakeFaultHook:
    """Runs ``action`` once, just before the Nth matching PUT of the store it is armed on."""

    def __init__(self, action: Callable[[], object]) -> None:
        self.action = action
        self.fired = False

    def _run(self) -> None:
        self.fired = True
        self.action()

    def rule(self, path_contains: str, nth: int = 1) -> FaultRule:
        return FaultRule("PUT", nth, "hook", path_contains=path_contains, hook=self._run)


def test_txlake_writes_delta_checkpoints_plain_readers_use(local_lake: txlake.Lakehouse) -> None:
    lake = local_lake
    lake.create_table("p.t", ACCOUNTS, properties={"delta.checkpointInterval": "10"})
    for i in range(12):
        with lake.transaction() as tx:
            tx.append("p.t", accounts([i], [i]))
    log = lake.delta_log("p.t")
    hint = log.read_last_checkpoint()
    assert hint is not None and hint.version == 10
    # delta-rs loads from the checkpoint even when the commits it covers are gone
    for v in range(10):
        lake.store.delete(log.commit_path(v))
    dt = deltalake.DeltaTable(lake.table_location("p.t"))
    got = pa.concat_tables([pa.parquet.read_table(u.removeprefix("file://")) for u in dt.file_uris()])
    assert rows(got) == [(i, i) for i in range(12)]
    assert rows(txlake.connect(lake.uri).read_arrow("p.t")) == [(i, i) for i in range(12)]


def test_plain_writer_deletion_vectors_are_read_and_every_write_works(local_lake: txlake.Lakehouse) -> None:
    """A plain writer turns deletion vectors on and deletes rows with one (as Spark does): lakehouse readers drop
    those rows, delta-rs agrees, and every txlake write to the table commits (copy-on-write) with the rows it
    should leave, as delta-rs reads them too."""
    lake = local_lake
    lake.create_table("p.t", ACCOUNTS)
    lake.create_table("p.other", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.t", accounts(list(range(10)), list(range(10))))
    delete_with_deletion_vector(lake, "p.t", [2, 5])
    lake.sync()
    want = {i: i for i in range(10) if i not in (2, 5)}

    def deltars_rows() -> list[tuple[object, ...]]:
        dt = deltalake.DeltaTable(lake.table_location("p.t"))
        return rows(pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all()))

    assert rows(lake.read_arrow("p.t")) == deltars_rows() == sorted(want.items())
    writes: list[tuple[Callable[[txlake.Transaction], object], Callable[[dict[int, int]], None]]] = [
        (lambda tx: tx.append("p.t", accounts([20], [20])), lambda w: w.update({20: 20})),
        (lambda tx: tx.delete("p.t", where="id = 1"), lambda w: w.pop(1)),
        (lambda tx: tx.update("p.t", set={"balance": "0"}, where="id > 7"), lambda w: w.update({8: 0, 9: 0, 20: 0})),
        (
            lambda tx: tx.merge("p.t", accounts([2, 3], [22, 33]), on="t.id = s.id", when_matched_update="*"),
            lambda w: w.update({3: 33}),
        ),
        (lambda tx: tx.optimize("p.t"), lambda w: None),
        (lambda tx: tx.overwrite("p.t", accounts([1], [1])), lambda w: (w.clear(), w.update({1: 1}))),
    ]
    for write, expect in writes:
        with lake.transaction() as tx:
            assert rows(tx.read_arrow("p.t")) == sorted(want.items())
            tx.append("p.other", accounts([1], [1]))
            write(tx)
        expect(want)
        assert rows(lake.read_arrow("p.t")) == deltars_rows() == sorted(want.items())
