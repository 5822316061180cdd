"""One worker process of the process-kill chaos test: serializable bank transfers until it is killed.

Run as ``python chaos_worker.py CONFIG INCARNATION OUTDIR`` (``tests/faults/test_chaos.py`` starts it and
SIGKILLs it at random moments). ``CONFIG`` is a JSON :class:`ChaosConfig`; ``INCARNATION`` names this
process (a restarted worker gets a new one, so transfer ids ``<incarnation>-<seq>`` stay unique).

Each transfer is one serializable transaction: read the source balance, move at most that much from the
source to the target account (possibly across ``bank.a``/``bank.b``), append a journal row. Conflicts are
retried with the same transfer id (a conflict is a definite abort). What the worker saw goes to ``OUTDIR``:

- ``ack.txt``: a transfer id per line, written (and fsynced) only after ``commit()`` returned;
- ``unknown.txt``: ``<transfer id> <txid> <version>`` for each :class:`txlake.CommitStateUnknownError`;
- ``events.txt``: ``start <id>`` before each transfer, ``conflict <id> <error class>``, ``skip <id>``
  (nothing to move: a read-only commit), ``helped <global version>`` (rolled forward another's claim).

The worker never stops by itself before ``ChaosConfig.until`` (a wall-clock safety net); with Linux it also
dies with the test process (``PR_SET_PDEATHSIG``). Any other exception ends it with a traceback on stderr,
which the test reports as a failure.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa

import txlake

ACK = "ack.txt"
UNKNOWN = "unknown.txt"
EVENTS = "events.txt"
TABLES = ("bank.a", "bank.b")
JOURNAL = "bank.journal"
ACCOUNT_SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
JOURNAL_SCHEMA = pa.schema(
    [("transfer_id", pa.string()), ("src", pa.int64()), ("dst", pa.int64()), ("amount", pa.int64())]
)
"""``src``/``dst`` are account numbers over both tables: see :func:`account`."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChaosConfig:
    """What every worker of one chaos run shares."""

    uri: str
    storage_options: dict[str, str]
    accounts: int
    """Accounts per table: account numbers ``0 .. 2 * accounts - 1``."""
    max_amount: int
    lease_seconds: float
    checkpoint_interval: int
    until: float
    """Wall-clock time (``time.time()``) after which a worker exits on its own (test process gone)."""
    parent: int
    """The pid of the test process; a worker whose parent is already another process exits at once."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ChaosConfig:
        return cls(**json.loads(text))


def account(number: int, accounts: int) -> tuple[str, int]:
    """The (table, id) of account ``number``: the first ``accounts`` in ``bank.a``, the others in ``bank.b``."""
    return TABLES[number // accounts], number % accounts


class Ledger:
    """An append-only text file written with one ``write`` per line (a kill never leaves half a line)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str, *, durable: bool = False) -> None:
        os.write(self._fd, (text + "\n").encode())
        if durable:
            os.fsync(self._fd)


def _die_with_parent(parent: int) -> None:
    """Make the kernel SIGKILL this process when the test process dies (Linux); exit if it already did."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(3)


def _move(tx: txlake.Transaction, cfg: ChaosConfig, transfer_id: str, src: int, dst: int, amount: int) -> int:
    """Stage one transfer in ``tx``: at most the source balance moves; returns the amount moved."""
    src_table, src_id = account(src, cfg.accounts)
    dst_table, dst_id = account(dst, cfg.accounts)
    balance = tx.read_arrow(src_table, where=f"id = {src_id}", columns=["balance"]).column("balance")
    assert len(balance) == 1, f"account {src} is {balance}"
    moved = min(amount, int(balance[0].as_py()))
    if moved <= 0:
        return 0
    tx.update(src_table, set={"balance": f"balance - {moved}"}, where=f"id = {src_id}")
    tx.update(dst_table, set={"balance": f"balance + {moved}"}, where=f"id = {dst_id}")
    row = {"transfer_id": [transfer_id], "src": [src], "dst": [dst], "amount": [moved]}
    tx.append(JOURNAL, pa.table(row, schema=JOURNAL_SCHEMA))
    return moved


def run(cfg: ChaosConfig, incarnation: str, out: Path) -> None:
    """Transfer until killed (or until ``cfg.until``)."""
    acks, unknowns, events = Ledger(out / ACK), Ledger(out / UNKNOWN), Ledger(out / EVENTS)
    lake = txlake.connect(
        cfg.uri,
        cfg.storage_options,
        create=False,
        lease_seconds=cfg.lease_seconds,
        checkpoint_interval=cfg.checkpoint_interval,
    )
    rng = random.Random()
    helped = 0
    seq = 0
    while time.time() < cfg.until:
        seq += 1
        transfer_id = f"{incarnation}-{seq}"
        src, dst = rng.sample(range(2 * cfg.accounts), 2)
        amount = rng.randint(1, cfg.max_amount)
        events.line(f"start {transfer_id}")
        attempt = 0
        while True:
            tx = lake.transaction("serializable")
            try:
                with tx:
                    moved = _move(tx, cfg, transfer_id, src, dst, amount)
            except txlake.ConflictError as exc:  # a definite abort: retry the same transfer on a new snapshot
                events.line(f"conflict {transfer_id} {type(exc).__name__}")
                attempt += 1
                time.sleep(rng.uniform(0, min(0.5, 0.01 * 2**attempt)))
                continue
            except txlake.CommitStateUnknownError as exc:  # may commit later (roll-forward) or never
                unknowns.line(f"{transfer_id} {exc.txid} {exc.version}", durable=True)
                break
            if moved:
                acks.line(transfer_id, durable=True)
            else:
                events.line(f"skip {transfer_id}")
            break
        for version in lake.context.helped[helped:]:
            events.line(f"helped {version}")
        helped = len(lake.context.helped)


def main(argv: list[str]) -> int:
    config_path, incarnation, out = argv
    cfg = ChaosConfig.from_json(Path(config_path).read_text())
    _die_with_parent(cfg.parent)
    run(cfg, incarnation, Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
