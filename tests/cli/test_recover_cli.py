"""`txlake recover`: a dry run reports the dead transactions; --delete aborts them and deletes their files."""

from __future__ import annotations

import time

import txlake
from tests.cli.conftest import Txlake, accounts
from tests.cli.real import assert_clean_failure
from tests.cli.real import txlake as cli
from txlake.cli.exit_codes import ExitCode


def test_recover_from_the_command_line(bank: txlake.Lakehouse, txlake_cli: Txlake) -> None:
    dead_lake = txlake.connect(bank.uri, lease_seconds=0.5)
    dead = dead_lake.transaction(resumable=True)
    dead.append("bank.checking", accounts([7], ["dead"], [1]))
    for handle in dead_lake.context.heartbeat.held():  # the process dies: no more heartbeats
        dead_lake.context.heartbeat.release(handle, delete=False)
    staged = [m.path for m in bank.store.list("bank/checking/") if dead.txid in m.path]
    assert staged
    time.sleep(0.6)
    run = txlake_cli("recover", "--guard", "0", "--uri", bank.uri, "--json")
    doc = run.json()
    assert run.code == ExitCode.OK and doc["dry_run"] is True, run.err  # type: ignore[index]
    assert doc["by_action"] == {"aborted": 1} and doc["files_deleted"] == 1  # type: ignore[index]
    assert all(bank.store.exists(p) for p in staged)
    run = txlake_cli("recover", "--guard", "0", "--uri", bank.uri)
    assert run.code == ExitCode.OK and "would abort" in run.out and "txlake recover --delete" in run.out
    run = txlake_cli("recover", "--guard", "0", "--delete", "--uri", bank.uri)
    assert run.code == ExitCode.OK and "deleted 1 staged file(s)" in run.out, run.out
    assert not any(bank.store.exists(p) for p in staged)
    assert_clean_failure(cli("recover", "--guard", "soon", "--uri", bank.uri), ExitCode.USAGE)
