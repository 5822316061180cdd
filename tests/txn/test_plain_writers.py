"""Plain Delta writers (delta-rs) on lakehouse tables: detected, conflict-checked, adopted."""

from __future__ import annotations

import pyarrow as pa
import pytest

import txlake
from tests.txn.conftest import ACCOUNTS, accounts, rows
from txlake.errors import ConflictError

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
