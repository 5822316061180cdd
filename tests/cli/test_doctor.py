"""``txlake doctor``: exit 0 on a healthy lakehouse; each kind of damage is one finding with a hint, exit 1."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from rich.console import Console

import txlake
from tests.cli.conftest import SCHEMA, Txlake, accounts, build_bank
from txlake.cli.doctor import CHECKS, ROLL_FORWARD_HINT, run_doctor
from txlake.cli.exit_codes import ExitCode
from txlake.cli.output import Output
from txlake.delta import DeltaTable, commit_info
from txlake.errors import ConflictError, SimulatedCrash
from txlake.lakehouse.log import GlobalLog
from txlake.storage import FaultRule


def _doctor(txlake_cli: Txlake, uri: str, *extra: str) -> tuple[int, dict[str, Any]]:
    run = txlake_cli("doctor", "--uri", uri, "--json", *extra)
    doc = run.json()
    assert isinstance(doc, dict)
    return run.code, doc


def _errors(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["severity"] == "error"]


def _status(doc: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in doc["checks"]}


def test_healthy_lakehouse(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.OK
    assert doc["healthy"] is True
    assert doc["findings"] == []
    assert [c["name"] for c in doc["checks"]] == [name for name, _ in CHECKS]
    assert set(_status(doc).values()) == {"ok"}
    assert doc["lakehouse_version"] == 4 and doc["tables"] == 2
    assert doc["delta_commits"] == 6 and doc["data_files"] == 3

    human = txlake_cli("doctor", "--uri", bank.uri)
    assert human.code == ExitCode.OK
    assert "healthy" in human.out and "✓ files.exist" in human.out

    quick_code, quick = _doctor(txlake_cli, bank.uri, "--quick")
    assert quick_code == ExitCode.OK
    assert _status(quick)["files.exist"] == "skipped" and quick["data_files"] is None


def test_healthy_with_checkpoints_plain_writers_drops_and_renames(tmp_path: Path, txlake_cli: Txlake) -> None:
    lake = build_bank(f"file://{tmp_path}", checkpoint_interval=2)
    lake.create_table("tmp.scratch", SCHEMA)
    lake.drop_table("tmp.scratch")
    lake.rename_table("bank.savings", "bank.reserve")
    entry = lake.snapshot().entry("bank.checking")
    DeltaTable(lake.store, entry.path).append(accounts([9], ["zed"], [1]))  # a plain writer, not adopted yet
    assert lake.context.glog.list().checkpoints  # I1 has something to compare
    code, doc = _doctor(txlake_cli, lake.uri)
    assert code == ExitCode.OK, doc["findings"]
    infos = [f for f in doc["findings"] if f["severity"] == "info"]
    assert [(f["check"], f["table"]) for f in infos] == [("tables.mapped_version", "bank.checking")]


def test_missing_data_file(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    snap = bank.snapshot()
    entry = snap.entry("bank.savings")
    victim = sorted(snap.delta_snapshot("bank.savings").files)[0]
    bank.store.delete(f"{entry.path}/{victim}")
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    assert doc["healthy"] is False
    (finding,) = _errors(doc)
    assert finding["check"] == "files.exist"
    assert finding["table"] == "bank.savings" and finding["path"] == victim
    assert "restore it from a backup" in finding["hint"]
    assert _status(doc)["files.exist"] == "failed"

    human = txlake_cli("doctor", "--uri", bank.uri)
    assert human.code == ExitCode.PROBLEMS
    line = next(line for line in human.out.splitlines() if line.startswith("ERROR"))
    assert "[files.exist]" in line and victim in line and "hint:" in line  # one line with its hint
    assert "1 problem(s) found" in human.out
    assert _doctor(txlake_cli, bank.uri, "--quick")[0] == ExitCode.OK  # --quick skips the file checks


def test_undecided_claim_past_its_lease_is_found_and_repaired(tmp_path: Path, txlake_cli: Txlake) -> None:
    uri = f"file://{tmp_path}"
    lake = build_bank(uri)
    doomed = txlake.connect(uri, lease_seconds=0.2)
    tx = doomed.transaction()
    tx.append("bank.checking", accounts([4], ["dan"], [10]))
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log"))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    time.sleep(0.3)

    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(doc)
    assert finding["check"] == "log.decided" and finding["version"] == 5
    assert finding["hint"] == ROLL_FORWARD_HINT
    assert doc["latest_claimed"] == 5 and doc["lakehouse_version"] == 4
    log = txlake_cli("log", "--uri", uri, "--json").json()
    assert isinstance(log, dict)
    assert log["undecided"] == [5]
    assert log["entries"][-1]["status"] == "undecided" and log["entries"][-1]["lease_expired"] is True
    assert "undecided (lease expired)" in txlake_cli("log", "--uri", uri).out

    code, repaired = _doctor(txlake_cli, uri, "--repair")
    assert code == ExitCode.OK, repaired["findings"]
    assert [(r["version"], r["status"]) for r in repaired["repaired"]] == [(5, "committed")]
    assert repaired["lakehouse_version"] == 5
    assert lake.read_arrow("bank.checking", where="id = 4").num_rows == 1
    assert _doctor(txlake_cli, uri)[0] == ExitCode.OK


def test_claim_within_its_lease_is_in_progress_not_a_problem(tmp_path: Path, txlake_cli: Txlake) -> None:
    uri = f"file://{tmp_path}"
    build_bank(uri)
    doomed = txlake.connect(uri, lease_seconds=600)
    tx = doomed.transaction()
    tx.append("bank.checking", accounts([4], ["dan"], [10]))
    doomed.store.faults.add(FaultRule("PUT", 1, "crash_before", path_contains="_delta_log"))
    with pytest.raises(SimulatedCrash):
        tx.commit()
    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK
    assert [(f["check"], f["severity"]) for f in doc["findings"]] == [("log.decided", "info")]


def _abort_by_a_racing_plain_delete(lake: txlake.Lakehouse) -> tuple[str, str]:
    """Global version 5 updates both bank tables; a plain writer deletes everything in the table published second
    just before its Delta commit, so 5 aborts and its commit on the first table is compensated; the failed
    transaction then adopts the plain delete (version 6), so that a retry would not meet it again.
    Returns the names of (first, second)."""
    snap = lake.snapshot()
    first, second = sorted((snap.entry(n) for n in ("bank.checking", "bank.savings")), key=lambda e: e.id)
    plain = DeltaTable(txlake.connect(lake.uri).store, second.path)  # another client: no fault rules

    def delete_everything() -> None:
        snap = plain.snapshot()
        plain.commit(snap.version + 1, [commit_info("DELETE"), *(a.remove() for a in snap.files.values())])

    just_before = FaultRule("PUT", 1, "hook", path_contains=f"{second.path}/_delta_log/", hook=delete_everything)
    lake.store.faults.add(just_before)
    tx = lake.transaction("snapshot")
    tx.update(first.name, set={"balance": "0"}, where="id = 1")
    tx.update(second.name, set={"balance": "0"}, where="id = 1")
    with pytest.raises(ConflictError):
        tx.commit()
    outcome = lake.context.glog.read_outcome(5)
    assert outcome is not None and outcome.status == "aborted"
    return first.name, second.name


def test_aborted_transactions_commit_and_its_compensation_are_told_apart(
    bank: txlake.Lakehouse, txlake_cli: Txlake
) -> None:
    first, second = _abort_by_a_racing_plain_delete(bank)
    txid = bank.context.glog.read_record(5).txid
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.OK, doc["findings"]
    by_table = {f["table"]: f for f in doc["findings"]}
    assert [(f["check"], f["severity"]) for f in doc["findings"]] == [("tables.mapped_version", "info")]
    aborted = by_table[first]
    assert aborted["version"] == 3
    assert f"aborted global version 5 (transaction {txid}) is undone by compensating commit 4" in aborted["message"]
    assert "plain Delta writers" not in aborted["message"]
    assert second not in by_table  # the plain delete was adopted

    bank.store.delete(bank.delta_log(first).commit_path(4))  # the compensation is lost: aborted data is visible
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(doc)
    assert (finding["check"], finding["table"], finding["version"]) == ("I3.txlake_commits", first, 3)
    assert "no compensating commit follows it" in finding["message"]
    assert [f["table"] for f in doc["findings"] if f["check"] == "tables.mapped_version"] == []


def test_corrupt_global_record(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    bank.store.put(GlobalLog.record_path(3), b"garbage")
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    checks = {f["check"] for f in _errors(doc)}
    assert "log.readable" in checks
    readable = next(f for f in _errors(doc) if f["check"] == "log.readable")
    assert readable["version"] == 3 and readable["path"] == GlobalLog.record_path(3)
    assert doc["lakehouse_version"] == 2  # the decided prefix the doctor could replay


def test_missing_global_record_is_a_gap(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    bank.store.delete(GlobalLog.record_path(2))
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    checks = {f["check"] for f in _errors(doc)}
    assert {"log.contiguous"} <= checks


def test_garbage_delta_commit(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.checking")
    bank.store.put(log.commit_path(1), b"not json at all\n")
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    by_check = {f["check"]: f for f in _errors(doc)}
    assert by_check["I2.commits"]["version"] == 1 and by_check["I2.commits"]["table"] == "bank.checking"
    assert "tables.readable" in by_check  # the mapped snapshot cannot be replayed either
    assert "I4.published" in by_check  # version 1 no longer holds the commit global version 3 published


def test_unknown_action_in_a_txlake_commit(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.checking")
    data = bank.store.get(log.commit_path(2)) + b'{"domainMetadata": {"domain": "x", "configuration": "{}"}}\n'
    bank.store.put(log.commit_path(2), data)
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(doc)
    assert finding["check"] == "I2.commits" and "domainMetadata" in finding["message"]


def test_txlake_commit_of_an_unknown_global_version(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.checking")
    stray = {"commitInfo": {"operation": "WRITE", "txlake": {"txn": "ghost", "globalVersion": 99}}}
    bank.store.put(log.commit_path(3), (json.dumps(stray) + "\n").encode())
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(doc)
    assert finding["check"] == "I3.txlake_commits" and finding["version"] == 3


def test_published_commit_deleted(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.savings")
    bank.store.delete(log.commit_path(1))
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    by_check = {f["check"]: f for f in _errors(doc)}
    assert by_check["delta.contiguous"]["version"] == 1
    assert by_check["I4.published"]["version"] == 1 and by_check["I4.published"]["table"] == "bank.savings"


def test_mapped_delta_version_missing(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    log = bank.delta_log("bank.savings")
    bank.store.delete(log.commit_path(2))
    code, doc = _doctor(txlake_cli, bank.uri)
    assert code == ExitCode.PROBLEMS
    checks = {f["check"] for f in _errors(doc)}
    assert {"tables.mapped_version", "I4.published"} <= checks


def test_checkpoint_that_differs_from_the_log(tmp_path: Path, txlake_cli: Txlake) -> None:
    lake = build_bank(f"file://{tmp_path}", checkpoint_interval=2)
    glog = lake.context.glog
    path = glog.checkpoint_path(2)
    doc = json.loads(lake.store.get(path))
    doc["tableVersions"] = {k: v + 5 for k, v in doc["tableVersions"].items()}
    lake.store.put(path, json.dumps(doc).encode())
    code, report = _doctor(txlake_cli, lake.uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(report)
    assert finding["check"] == "I1.checkpoints" and "table_versions" in finding["message"]
    assert finding["path"] == path


def test_progress_bar_is_drawn_on_a_terminal(bank: txlake.Lakehouse) -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    out = Output(False, console=terminal, stderr=terminal)
    with out.progress() as progress:
        report = run_doctor(bank, quick=False, repair_first=False, progress=progress)
    assert report.healthy and report.data_files == 3
    assert "checking data files" in screen.getvalue()
    assert Output(True).progress().disable  # never with --json


def test_reclaimable_files_are_reported_not_deleted(tmp_path: Path, txlake_cli: Txlake) -> None:
    uri = f"file://{tmp_path}"
    build_bank(uri)
    orphan = tmp_path / "bank" / "checking" / f"part-{'ab' * 16}-crashed.snappy.parquet"
    orphan.write_bytes(b"x" * 100)
    when = time.time() - 9 * 86400
    os.utime(orphan, (when, when))
    code, doc = _doctor(txlake_cli, uri)
    assert code == ExitCode.OK and doc["healthy"] is True
    (finding,) = [f for f in doc["findings"] if f["check"] == "storage.reclaimable"]
    assert finding["severity"] == "info" and finding["message"].startswith("1 file(s), 100 B,")
    assert "1 orphans" in finding["message"] and "txlake vacuum --delete" in finding["hint"]
    assert orphan.exists()
    code, doc = _doctor(txlake_cli, uri, "--quick")
    assert _status(doc)["storage.reclaimable"] == "skipped"


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_deletion_vector_file(tmp_path: Path, txlake_cli: Txlake, damage: str) -> None:
    """Doctor reads every deletion vector the mapped snapshots use, as reading the table would."""
    lake = txlake.connect(f"file://{tmp_path}")
    lake.create_table("s.t", "id long", properties={"delta.enableDeletionVectors": "true"})
    with lake.transaction() as tx:
        tx.append("s.t", pa.table({"id": list(range(100))}))
    with lake.transaction() as tx:
        tx.delete("s.t", where="id % 7 = 0")
    assert _doctor(txlake_cli, lake.uri)[0] == ExitCode.OK
    (dv,) = (tmp_path / "s" / "t").glob("deletion_vector_*.bin")
    if damage == "missing":
        dv.unlink()
    else:
        data = bytearray(dv.read_bytes())
        data[-1] ^= 0xFF  # the checksum no longer matches
        dv.write_bytes(bytes(data))
    code, doc = _doctor(txlake_cli, lake.uri)
    assert code == ExitCode.PROBLEMS
    (finding,) = _errors(doc)
    assert (finding["check"], finding["table"]) == ("files.exist", "s.t")
    if damage == "missing":
        assert finding["path"] == dv.name
    assert _doctor(txlake_cli, lake.uri, "--quick")[0] == ExitCode.OK
