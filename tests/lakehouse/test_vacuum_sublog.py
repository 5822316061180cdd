"""Vacuum reads the sublog directory names: files of a transaction recover aborted go without the 26-hour wait,
files of a transaction holding a lease stay (recover decides it)."""

from __future__ import annotations

import time
from datetime import timedelta

import pyarrow as pa

import txlake
from tests.services import StoreLocation


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def test_vacuum_deletes_a_recovered_transactions_files_early_and_keeps_a_leased_ones(
    any_store_uri: StoreLocation,
) -> None:
    lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options, lease_seconds=0.5)
    lake.create_table("n.t", "id bigint")
    dead_lake = txlake.connect(lake.uri, any_store_uri.storage_options, lease_seconds=0.5)
    dead = dead_lake.transaction(resumable=True)
    dead.append("n.t", _rows([1]))
    for handle in dead_lake.context.heartbeat.held():
        dead_lake.context.heartbeat.release(handle, delete=False)
    # alive throughout: a lease long enough that a heartbeat stalled on a loaded machine cannot let it lapse
    live_lake = txlake.connect(lake.uri, any_store_uri.storage_options, lease_seconds=10)
    live = live_lake.transaction(resumable=True)
    live.append("n.t", _rows([2]))
    time.sleep(0.6)
    table = lake.snapshot().entry("n.t").path.rstrip("/") + "/"
    dead_files = [m.path for m in lake.store.list(table) if dead.txid in m.path]
    live_files = [m.path for m in lake.store.list(table) if live.txid in m.path]
    assert dead_files and live_files

    report = lake.vacuum(timedelta(0), force=True)  # before recover: both hold a lease
    assert not report.deleted
    assert report.kept["of a transaction holding a lease (alive, or for `txlake recover` to decide)"] == 2

    recovered = lake.recover(guard=timedelta(hours=1), dry_run=False)  # aborted, files kept by the guard
    assert [t.action for t in recovered.transactions if t.txid == dead.txid] == ["pending"]
    report = lake.vacuum(timedelta(0), force=True)
    assert {f.path for f in report.deleted} == set(dead_files)  # no 26-hour wait for an aborted one
    assert all(lake.store.exists(p) for p in live_files)
    live.commit()
    assert lake.read_arrow("n.t")["id"].to_pylist() == [2]
