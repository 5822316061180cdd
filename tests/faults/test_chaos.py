"""Process-kill chaos: worker processes doing serializable transfers are SIGKILLed at random and restarted.

``WORKERS`` real OS processes (``tests/faults/chaos_worker.py``) move money between accounts of ``bank.a``
and ``bank.b`` and journal every transfer in ``bank.journal``, one serializable transaction each, with a
short lease so that the claim of a killed worker is rolled forward by the others. Every 0.5-3 s the test
SIGKILLs a random worker (by the pid it started) and starts a new incarnation in its place. Afterwards a
fresh client settles the log (rolling forward what the last kills left) and checks:

1. durability: every transfer a worker acknowledged (``commit()`` returned) is in the journal;
2. exactly once: no transfer id appears twice, and every journal row is a transfer some worker started;
   a :class:`txlake.CommitStateUnknownError` transfer is in the journal iff ``transaction_status`` says
   committed;
3. atomicity and conservation at **every** global version after setup: both tables hold each account once,
   no balance is negative, the total is the opening total, a committed version moves one amount between
   two accounts and adds one journal row (an aborted one changes nothing), and those moves are exactly the
   journal's rows; at the latest version each balance is the opening plus credits minus debits;
4. delta-rs reads every table at its latest Delta version (the one the lakehouse maps it to) with the same
   rows as txlake;
5. ``txlake doctor --json`` (the real CLI, S3 settings from the environment) exits 0 with no error finding.

CI runs a bounded form on SeaweedFS and on ``file://``; ``pytest --long`` adds an hour-long run of each.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import txlake
from tests.faults.chaos_worker import (
    ACK,
    EVENTS,
    JOURNAL,
    TABLES,
    UNKNOWN,
    ChaosConfig,
    account,
)
from tests.interop.deltars import TableLocation, deltars_read_datafusion, rows
from tests.services import SeaweedFS

WORKER = Path(__file__).with_name("chaos_worker.py")
WORKERS = 3
ACCOUNTS = 4
"""Accounts per table, one data file each (a transfer conflicts only with transfers sharing an account)."""
OPENING = 100
MAX_AMOUNT = 60
"""Up to 60 of an opening 100: transfers often meet a short balance, which only serializable reads guard."""
LEASE = 1.0
CHECKPOINT_INTERVAL = 10
"""Global checkpoints (and, per table property, Delta checkpoints) every 10 versions: kills land in them too."""
KILL_GAP = (0.5, 3.0)
SECONDS = {"ci": {"s3": 15.0, "file": 8.0}, "long": {"s3": 3600.0, "file": 3600.0}}
FORMS = [
    pytest.param("ci"),
    pytest.param("long", marks=[pytest.mark.slow, pytest.mark.timeout(4 * 3600)]),
]


# ------------------------------------------------------------------------------------------- the workers


@dataclass
class Fleet:
    """The worker processes of one run: started, killed and restarted by the pids this test holds."""

    config: Path
    root: Path
    procs: dict[int, tuple[str, subprocess.Popen[bytes]]] = field(default_factory=dict)
    incarnations: list[str] = field(default_factory=list)
    kills: int = 0

    def start(self, slot: int) -> None:
        incarnation = f"w{slot}i{sum(1 for i in self.incarnations if i.startswith(f'w{slot}i'))}"
        out = self.root / incarnation
        out.mkdir()
        with (out / "stderr.txt").open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), str(self.config), incarnation, str(out)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self.incarnations.append(incarnation)
        self.procs[slot] = (incarnation, proc)

    def kill(self, slot: int) -> None:
        """SIGKILL the worker in ``slot`` (by its pid) and reap it."""
        _, proc = self.procs.pop(slot)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def check_alive(self) -> None:
        """Fail with its stderr if a worker ended by itself (only this test ends workers)."""
        for incarnation, proc in self.procs.values():
            code = proc.poll()
            if code is not None:
                stderr = (self.root / incarnation / "stderr.txt").read_text(errors="replace")
                raise AssertionError(f"worker {incarnation} exited by itself with {code}:\n{stderr[-4000:]}")

    def stop(self) -> None:
        """SIGKILL every worker still running (each by its pid)."""
        for slot in list(self.procs):
            self.kill(slot)


