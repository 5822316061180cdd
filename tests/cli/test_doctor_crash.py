"""``txlake doctor`` after a real client process was killed mid-commit: what it reports, what --repair does.

The child connects to a local lakehouse, stages appends to both bank tables and commits; a fault hook kills
it (a real signal, no cleanup) at a chosen request: before its Delta commit of the second table, just before
it decides, or in the middle of the put of its outcome (it leaves the temporary ``<outcome>#1`` the local
object store writes first, as a kill between obstore's write and link does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import txlake
from tests.cli.conftest import Txlake, build_bank
from txlake.cli.doctor import run_doctor
from txlake.cli.exit_codes import ExitCode
from txlake.cli.output import Output
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import GlobalRecord

CHILD = """
import os, signal, sys, time
import pyarrow as pa
import txlake
from txlake.lakehouse.log import GlobalLog
from txlake.storage import FaultRule

uri, path_contains, nth, signame, lease, mid_put = sys.argv[1:]
schema = pa.schema([("id", pa.int64()), ("owner", pa.string()), ("balance", pa.int64())])
lake = txlake.connect(uri, lease_seconds=float(lease))


def published():
    return sum(lake.store.exists(lake.delta_log(n).commit_path(3)) for n in ("bank.checking", "bank.savings"))


def die():
    if path_contains == "_delta_log/":  # tables publish concurrently: let the earlier PUTs land first
        deadline = time.monotonic() + 10
        while published() < int(nth) - 1 and time.monotonic() < deadline:
            time.sleep(0.005)
    if mid_put == "1":  # the local store's first step of a put: the bytes go to <path>#1
        claimed = max(lake.context.glog.list().records)
        with open(lake.store.local_path(GlobalLog.outcome_path(claimed)) + "#1", "xb") as staged:
            staged.write(b'{"version": ' + str(claimed).encode() + b', "txn": "')  # cut short
    os.kill(os.getpid(), getattr(signal, signame))


tx = lake.transaction()
tx.append("bank.checking", pa.table({"id": [4], "owner": ["dan"], "balance": [10]}, schema=schema))
tx.append("bank.savings", pa.table({"id": [4], "owner": ["dan"], "balance": [5]}, schema=schema))
lake.store.faults.add(FaultRule("PUT", int(nth), "hook", path_contains=path_contains, hook=die))
tx.commit()
sys.exit(3)  # not reached: the hook kills the process
"""

LEASE = 0.5
CRASHED = 5  # build_bank ends at global version 4: the child claims 5
TABLES = ("bank.checking", "bank.savings")


def _kill_mid_commit(
    uri: str, path_contains: str, *, nth: int = 1, sig: str = "SIGTERM", lease: float = LEASE, mid_put: bool = False
) -> GlobalRecord:
    """Run the child until the hook kills it; returns the global record it claimed (undecided)."""
    argv = [sys.executable, "-c", CHILD, uri, path_contains, str(nth), sig, str(lease), "1" if mid_put else "0"]
    child = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert child.returncode == -getattr(signal, sig), child.stderr
    glog = GlobalLog(txlake.connect(uri).store)
    listing = glog.list()
    assert max(listing.records) == CRASHED and CRASHED not in listing.outcomes
    return glog.read_record(CRASHED)


def _wait_out_lease(record: GlobalRecord) -> None:
    time.sleep(max(0.0, record.lease_until_ms / 1000 - time.time()) + 0.05)


def _doctor(txlake_cli: Txlake, uri: str, *extra: str) -> tuple[int, dict[str, Any]]:
    run = txlake_cli("doctor", "--uri", uri, "--json", *extra)
    doc = run.json()
    assert isinstance(doc, dict)
    return run.code, doc


def _kinds(doc: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(f["check"], f["severity"], f["table"]) for f in doc["findings"]]


def _published(uri: str) -> list[str]:
    """The bank tables whose Delta log got the crashed transaction's commit (version 3)."""
    lake = txlake.connect(uri)
    return [name for name in TABLES if lake.store.exists(lake.delta_log(name).commit_path(3))]


def _assert_rolled_forward(uri: str, txid: str, doc: dict[str, Any]) -> None:
    assert [(r["version"], r["txid"], r["status"]) for r in doc["repaired"]] == [(CRASHED, txid, "committed")]
    assert doc["lakehouse_version"] == CRASHED
    lake = txlake.connect(uri)
    assert lake.version() == CRASHED
    for name in TABLES:
        assert lake.read_arrow(name, where="id = 4").num_rows == 1, name


@pytest.mark.parametrize(
    ("point", "path_contains", "nth", "sig", "published"),
    [
        ("before deciding", ".outcome.json", 1, "SIGTERM", 2),
        ("before the second table's Delta commit", "_delta_log/", 2, "SIGKILL", 1),
    ],
)
def test_killed_after_publishing_is_explained_and_rolled_forward(
    tmp_path: Path, txlake_cli: Txlake, point: str, path_contains: str, nth: int, sig: str, published: int
) -> None:
    uri = f"file://{tmp_path}"
    build_bank(uri)
    record = _kill_mid_commit(uri, path_contains, nth=nth, sig=sig)
    tables = _published(uri)
    assert len(tables) == published, point
    _wait_out_lease(record)

    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.PROBLEMS
    assert _kinds(doc) == [("log.decided", "error", None)] + [("tables.mapped_version", "info", t) for t in tables]
    for finding in doc["findings"][1:]:
        assert finding["version"] == 3
        undecided = f"published by the undecided transaction {record.txid} at global version {CRASHED}"
        assert undecided in finding["message"]
        assert "plain Delta writers" not in finding["message"]
        assert "--repair" in finding["hint"] and "lease" in finding["hint"]

    code, repaired = _doctor(txlake_cli, uri, "--repair")
    assert code == ExitCode.OK, repaired["findings"]
    assert repaired["findings"] == [] and repaired["reclaimed"] == []
    _assert_rolled_forward(uri, record.txid, repaired)

    code, after = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK and after["findings"] == [] and after["repaired"] == []


def test_killed_within_its_lease_is_in_progress(tmp_path: Path, txlake_cli: Txlake) -> None:
    uri = f"file://{tmp_path}"
    build_bank(uri)
    record = _kill_mid_commit(uri, ".outcome.json", lease=600)
    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK  # the owner may still decide: not a problem yet
    assert _kinds(doc) == [("log.decided", "info", None)] + [("tables.mapped_version", "info", t) for t in TABLES]
    assert all(record.txid in f["message"] for f in doc["findings"])


def test_killed_mid_put_of_its_outcome_leaves_a_temporary_object(tmp_path: Path, txlake_cli: Txlake) -> None:
    uri = f"file://{tmp_path}"
    build_bank(uri)
    record = _kill_mid_commit(uri, ".outcome.json", sig="SIGKILL", mid_put=True)
    leftover = GlobalLog.outcome_path(CRASHED) + "#1"
    staged = tmp_path / leftover
    assert staged.is_file()
    _wait_out_lease(record)

    # not a log entry: the version stays undecided for readers and the log command
    log = txlake_cli("log", "--uri", uri, "--json").json()
    assert isinstance(log, dict) and log["undecided"] == [CRASHED]
    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.PROBLEMS
    assert ("storage.leftovers", "info", None) in _kinds(doc)  # just written: maybe a put still in flight
    assert next(f for f in doc["findings"] if f["check"] == "storage.leftovers")["path"] == leftover

    # --repair decides the version (the store stages that put at #2) but keeps the young temporary object
    code, repaired = _doctor(txlake_cli, uri, "--repair")
    assert code == ExitCode.OK, repaired["findings"]
    _assert_rolled_forward(uri, record.txid, repaired)
    assert repaired["reclaimed"] == []
    assert _kinds(repaired) == [("storage.leftovers", "info", None)]
    assert staged.is_file() and (tmp_path / GlobalLog.outcome_path(CRASHED)).is_file()

    # an hour later it is a reclaimable leftover: a warning, the lakehouse is healthy
    old = time.time() - 2 * 3600
    os.utime(staged, (old, old))
    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK and doc["healthy"] is True
    (finding,) = doc["findings"]
    assert (finding["check"], finding["severity"], finding["path"]) == ("storage.leftovers", "warning", leftover)
    assert "--repair" in finding["hint"]
    assert {c["name"]: c["status"] for c in doc["checks"]}["storage.leftovers"] == "warning"

    code, repaired = _doctor(txlake_cli, uri, "--repair")
    assert code == ExitCode.OK
    assert [r["path"] for r in repaired["reclaimed"]] == [leftover] and repaired["repaired"] == []
    assert repaired["findings"] == []
    assert not staged.exists() and (tmp_path / GlobalLog.outcome_path(CRASHED)).is_file()
    code, after = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK and after["findings"] == []
    assert txlake.connect(uri).read_arrow("bank.savings", where="id = 4").num_rows == 1


def test_only_temporary_objects_of_log_entries_are_reported_and_deleted(tmp_path: Path, txlake_cli: Txlake) -> None:
    lake = build_bank(f"file://{tmp_path / 'lake'}")
    root = tmp_path / "lake"
    checking = lake.snapshot().entry("bank.checking").path
    leftovers = {
        f"{checking}/_delta_log/00000000000000000003.json#1": "bank.checking",
        "_txlake/_last_checkpoint#2": None,
    }
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    kept = [
        f"{checking}/_delta_log/00000000000000000003.json#x",  # not a temporary name
        f"{checking}/_delta_log/notes.txt#1",  # not a name a Delta writer writes
        f"{checking}/part-00000-stray.snappy.parquet#1",  # not in a log directory
        "_txlake/log/README#1",
        "other/_delta_log/00000000000000000000.json#1",  # not a catalog table
    ]
    old = time.time() - 2 * 3600
    for rel in [*leftovers, *kept]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
        os.utime(root / rel, (old, old))
    link = root / "_txlake/log/00000000000000000099.json#1"
    link.symlink_to(outside)  # a symlink is never followed nor deleted

    code, doc = _doctor(txlake_cli, lake.uri)
    assert code == ExitCode.OK
    assert {(f["path"], f["table"]) for f in doc["findings"]} == set(leftovers.items())
    assert {f["check"] for f in doc["findings"]} == {"storage.leftovers"}

    code, repaired = _doctor(txlake_cli, lake.uri, "--repair")
    assert code == ExitCode.OK and repaired["findings"] == []
    assert sorted(r["path"] for r in repaired["reclaimed"]) == sorted(leftovers)
    assert not any((root / rel).exists() for rel in leftovers)
    assert all((root / rel).exists() for rel in kept)
    assert link.is_symlink() and outside.exists()
    assert _doctor(txlake_cli, lake.uri) == (code, {**repaired, "reclaimed": []})


def test_repair_takes_a_shorter_guard_age(tmp_path: Path) -> None:
    lake = build_bank(f"file://{tmp_path}")
    staged = tmp_path / (GlobalLog.record_path(5) + "#1")  # a claim interrupted before its link
    staged.write_bytes(b"{")
    with Output(True).progress() as progress:
        young = run_doctor(lake, quick=True, repair_first=True, progress=progress)
        assert young.reclaimed == () and staged.exists()
        assert [(f.check, f.severity) for f in young.findings] == [("storage.leftovers", "info")]
        now = run_doctor(lake, quick=True, repair_first=True, progress=progress, leftover_min_age=0)
    assert [r.path for r in now.reclaimed] == [GlobalLog.record_path(5) + "#1"]
    assert now.findings == () and now.healthy and not staged.exists()
    assert lake.version() == 4
