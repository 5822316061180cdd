"""Every read command in both outputs: rich tables for people, ``--json`` for programs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import txlake
from tests.cli.conftest import Txlake
from txlake.cli.exit_codes import ExitCode
from txlake.delta import DeltaTable


def _json(run: Any) -> dict[str, Any]:
    doc = run.json()
    assert isinstance(doc, dict)
    return doc


def test_init_creates_once_and_accepts_existing_with_exist_ok(tmp_path: Path, txlake_cli: Txlake) -> None:
    target = tmp_path / "new"
    created = txlake_cli("init", str(target), "--json")
    assert created.code == ExitCode.OK
    assert _json(created) == {"uri": f"file://{target}", "version": 0, "created": True}
    assert txlake.connect(f"file://{target}", create=False).version() == 0

    again = txlake_cli("init", str(target))
    assert again.code == ExitCode.CONFLICT
    assert again.err.startswith("error: a lakehouse already exists")
    assert "hint: use --exist-ok" in again.err

    ok = txlake_cli("init", "--uri", f"file://{target}", "--exist-ok")
    assert ok.code == ExitCode.OK
    assert "already exists" in ok.out


def test_tables(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    run = txlake_cli("tables", "--uri", bank.uri, "--json")
    assert run.code == ExitCode.OK
    doc = _json(run)
    assert doc["version"] == bank.version() == 4
    by_name = {t["name"]: t for t in doc["tables"]}
    assert set(by_name) == {"bank.checking", "bank.savings"}
    assert by_name["bank.checking"]["rows"] == 3
    assert by_name["bank.checking"]["files"] == 1
    assert by_name["bank.savings"]["files"] == 2  # one per partition
    assert by_name["bank.savings"]["delta_version"] == 2
    assert by_name["bank.checking"]["location"] == bank.table_location("bank.checking")

    human = txlake_cli("tables", "--uri", bank.uri)
    assert human.code == ExitCode.OK
    assert "bank.checking" in human.out and "bank.savings" in human.out
    assert "lakehouse version 4" in human.out

    earlier = _json(txlake_cli("tables", "--uri", bank.uri, "--version", "1", "--json"))
    assert [t["name"] for t in earlier["tables"]] == ["bank.checking"]
    other_ns = _json(txlake_cli("tables", "--uri", bank.uri, "--namespace", "other", "--json"))
    assert other_ns["tables"] == []


def test_describe(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    doc = _json(txlake_cli("describe", "bank.savings", "--uri", bank.uri, "--json"))
    assert [(c["name"], c["type"], c["nullable"], c["partition"]) for c in doc["columns"]] == [
        ("id", "long", True, False),
        ("owner", "string", True, True),
        ("balance", "long", True, False),
    ]
    assert doc["partition_columns"] == ["owner"]
    assert doc["protocol"]["min_reader_version"] == 1
    assert doc["protocol"]["min_writer_version"] == 2
    assert doc["delta_version"] == doc["latest_delta_version"] == 2
    assert doc["lakehouse_version"] == 4
    assert doc["id"] == bank.snapshot().entry("bank.savings").id
    assert doc["files"] == 2 and doc["rows"] == 2 and doc["size_bytes"] > 0

    checking = _json(txlake_cli("describe", "bank.checking", "--uri", bank.uri, "--json"))
    assert checking["properties"] == {"team": "core"}
    assert checking["description"] == "checking accounts"

    human = txlake_cli("describe", "bank.checking", "--uri", bank.uri)
    assert human.code == ExitCode.OK
    for text in ("table bank.checking", "checking accounts", "reader 1, writer 2", "balance", "long", "team"):
        assert text in human.out


def test_table_history(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    doc = _json(txlake_cli("history", "bank.checking", "--uri", bank.uri, "--json"))
    commits = doc["commits"]
    assert [c["version"] for c in commits] == [2, 1, 0]  # newest first
    assert [c["operation"] for c in commits] == ["UPDATE", "WRITE", "CREATE TABLE"]
    assert [c["global_version"] for c in commits] == [4, 3, 1]
    assert all(c["in_lakehouse"] for c in commits)
    assert doc["mapped_version"] == 2

    limited = _json(txlake_cli("history", "bank.checking", "--uri", bank.uri, "--limit", "1", "--json"))
    assert [c["version"] for c in limited["commits"]] == [2]

    human = txlake_cli("history", "bank.checking", "--uri", bank.uri)
    assert human.code == ExitCode.OK
    assert "UPDATE" in human.out and "CREATE TABLE" in human.out


def test_table_history_marks_plain_writer_commits_not_adopted(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    entry = bank.snapshot().entry("bank.checking")
    DeltaTable(bank.store, entry.path).append(
        pa.table({"id": [9], "owner": ["zed"], "balance": [1]}, schema=bank.snapshot().schema("bank.checking"))
    )
    doc = _json(txlake_cli("history", "bank.checking", "--uri", bank.uri, "--json"))
    newest = doc["commits"][0]
    assert newest["version"] == 3 and newest["in_lakehouse"] is False and newest["global_version"] is None
    assert "not adopted" in txlake_cli("history", "bank.checking", "--uri", bank.uri).out


def test_lakehouse_history(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    doc = _json(txlake_cli("history", "--uri", bank.uri, "--json"))
    entries = doc["entries"]
    assert [e["version"] for e in entries] == [4, 3, 2, 1, 0]  # newest first
    assert all(e["status"] == "committed" for e in entries)
    assert entries[0]["isolation"] == "serializable"
    assert {t["table"] for t in entries[0]["tables"]} == {"bank.checking", "bank.savings"}
    assert [c["op"] for c in entries[3]["catalog"]] == ["create_namespace", "create_table"]

    human = txlake_cli("history", "--uri", bank.uri, "--limit", "2")
    assert human.code == ExitCode.OK
    assert "committed" in human.out and "newest first" in human.out
    assert "2 entries" in human.out


def test_log(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    doc = _json(txlake_cli("log", "--uri", bank.uri, "--json"))
    assert [e["version"] for e in doc["entries"]] == [0, 1, 2, 3, 4]  # oldest first
    assert doc["latest_version"] == doc["latest_claimed"] == 4
    assert doc["undecided"] == []
    transfer = doc["entries"][4]
    assert transfer["read_version"] == 3
    assert transfer["kind"] == "txn"
    assert {(t["table"], t["published_version"]) for t in transfer["tables"]} == {
        ("bank.checking", 2),
        ("bank.savings", 2),
    }
    assert transfer["reason"] is None

    window = _json(txlake_cli("log", "--uri", bank.uri, "--from", "2", "--limit", "2", "--json"))
    assert [e["version"] for e in window["entries"]] == [2, 3]
    newest = _json(txlake_cli("log", "--uri", bank.uri, "--limit", "1", "--json"))
    assert [e["version"] for e in newest["entries"]] == [4]

    human = txlake_cli("log", "--uri", bank.uri)
    assert human.code == ExitCode.OK
    assert "bank.checking→v2" in human.out
    assert "create_table bank.savings" in human.out


def test_log_names_tables_as_they_were_and_marks_renames(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    bank.rename_table("bank.savings", "bank.reserve")
    doc = _json(txlake_cli("log", "--uri", bank.uri, "--from", "4", "--json"))
    assert {t["table"] for t in doc["entries"][0]["tables"]} == {"bank.checking", "bank.savings"}
    rename = doc["entries"][1]["catalog"][0]
    assert (rename["op"], rename["name"], rename["new_name"]) == ("rename_table", "bank.savings", "bank.reserve")


def test_show(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    doc = _json(txlake_cli("show", "bank.checking", "--uri", bank.uri, "--json"))
    assert sorted((r["id"], r["balance"]) for r in doc["rows"]) == [(1, 70), (2, 50), (3, 7)]
    assert doc["matched"] == 3 and doc["truncated"] is False
    assert [c["type"] for c in doc["columns"]] == ["long", "string", "long"]

    picked = _json(
        txlake_cli(
            "show", "bank.checking", "--uri", bank.uri, "--where", "balance >= 50", "--columns", "id,balance", "--json"
        )
    )
    assert sorted((r["id"], r["balance"]) for r in picked["rows"]) == [(1, 70), (2, 50)]
    assert [c["name"] for c in picked["columns"]] == ["id", "balance"]

    before = _json(txlake_cli("show", "bank.checking", "--uri", bank.uri, "--version", "3", "--json"))
    assert sorted((r["id"], r["balance"]) for r in before["rows"]) == [(1, 100), (2, 50), (3, 7)]
    assert before["lakehouse_version"] == 3 and before["delta_version"] == 1

    limited = _json(txlake_cli("show", "bank.checking", "--uri", bank.uri, "--limit", "1", "--json"))
    assert len(limited["rows"]) == 1 and limited["matched"] == 3 and limited["truncated"] is True


def test_show_human_keeps_values_whole_in_a_pipe_and_right_aligns_numbers(
    bank: txlake.Lakehouse, txlake_cli: Txlake
) -> None:
    run = txlake_cli("show", "bank.checking", "--uri", bank.uri)  # (captured: not a terminal)
    assert run.code == ExitCode.OK
    assert "x" * 100 in run.out  # nothing is cut in a pipe or file
    assert "…" not in run.out
    assert "3 of 3 row(s)" in run.out
    lines = run.out.splitlines()
    header = next(line for line in lines if "balance" in line and "owner" in line)
    row = next(line for line in lines if "ann" in line)
    # right-aligned: the number ends where the header ends
    assert row.rstrip().endswith("70")
    assert row.index("70") + 2 == header.index("balance") + len("balance")


def test_uri_from_environment_and_relative_paths(
    bank: txlake.Lakehouse, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TXLAKE_URI", bank.uri)
    assert _json(txlake_cli("tables", "--json"))["uri"] == bank.uri
    monkeypatch.delenv("TXLAKE_URI")
    monkeypatch.chdir(tmp_path)
    assert _json(txlake_cli("tables", "--uri", "lake", "--json"))["uri"] == bank.uri
