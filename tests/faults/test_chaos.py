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
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.faults.chaos_worker import (
    ACCOUNT_SCHEMA,
    ACK,
    EVENTS,
    JOURNAL,
    JOURNAL_SCHEMA,
    TABLES,
    UNKNOWN,
    ChaosConfig,
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
MIN_ACKED = 20
PROGRESS_GRACE = 120.0
SECONDS = {"ci": {"s3": 12.0, "file": 6.0}, "long": {"s3": 3600.0, "file": 3600.0}}
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
    self_exits: list[str] = field(default_factory=list)
    """Workers that ended other than by this test's SIGKILL, with their stderr."""

    def start(self, slot: int) -> None:
        """Start a new incarnation ``w<slot>i<n>`` of the worker in ``slot``."""
        incarnation = f"w{slot}i{len(self.incarnations)}"
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
        incarnation, proc = self.procs.pop(slot)
        self._signal(proc)
        self._reap(incarnation, proc)

    def stop(self) -> None:
        """SIGKILL every worker still running (each by its pid), then reap them all."""
        running = list(self.procs.values())
        self.procs.clear()
        for _, proc in running:
            self._signal(proc)
        for incarnation, proc in running:
            self._reap(incarnation, proc)

    def acknowledged(self) -> int:
        """Transfers acknowledged so far by all incarnations."""
        return sum(len(_lines(self.root / i / ACK)) for i in self.incarnations)

    def check_alive(self) -> None:
        """Fail with its stderr if a worker ended by itself (only this test ends workers)."""
        for slot, (incarnation, proc) in list(self.procs.items()):
            if proc.poll() is not None:
                del self.procs[slot]
                self._reap(incarnation, proc)
        assert not self.self_exits, "\n".join(self.self_exits)

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)

    def _reap(self, incarnation: str, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait(timeout=30)
        if code != -signal.SIGKILL:
            stderr = (self.root / incarnation / "stderr.txt").read_text(errors="replace")
            self.self_exits.append(f"worker {incarnation} exited by itself with {code}:\n{stderr[-4000:]}")


def run_fleet(config: ChaosConfig, root: Path, seconds: float, rng: random.Random) -> Fleet:
    """Run ``WORKERS`` workers for ``seconds``, killing and restarting a random one every ``KILL_GAP``.

    The run goes on past ``seconds`` until ``MIN_ACKED`` transfers are acknowledged (a loaded machine can
    take seconds to start a worker), and fails if that takes ``PROGRESS_GRACE`` more seconds.
    """
    config_path = root / "config.json"
    config_path.write_text(config.to_json())
    fleet = Fleet(config_path, root)
    try:
        for slot in range(WORKERS):
            fleet.start(slot)
        deadline = time.monotonic() + seconds
        while True:
            gap, left = rng.uniform(*KILL_GAP), deadline - time.monotonic()
            time.sleep(min(gap, left) if left > 0 else gap)
            fleet.check_alive()
            if time.monotonic() >= deadline and fleet.acknowledged() >= MIN_ACKED:
                break
            assert time.monotonic() < deadline + PROGRESS_GRACE, (
                f"only {fleet.acknowledged()} transfers acknowledged after {seconds + PROGRESS_GRACE:.0f}s"
            )
            slot = rng.randrange(WORKERS)
            fleet.kill(slot)
            fleet.kills += 1
            fleet.start(slot)
    finally:
        fleet.stop()
    return fleet


@dataclass(frozen=True)
class Unknown:
    transfer_id: str
    txid: str
    version: int | None


@dataclass
class WorkerLogs:
    """What all incarnations wrote: acknowledged, unknown, started and skipped transfers, conflicts, help."""

    acked: list[str] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    skipped: int = 0
    conflicts: Counter[str] = field(default_factory=Counter)
    helped: set[int] = field(default_factory=set)

    @classmethod
    def read(cls, root: Path, incarnations: list[str]) -> WorkerLogs:
        logs = cls()
        for incarnation in incarnations:
            out = root / incarnation
            logs.acked += _lines(out / ACK)
            for line in _lines(out / UNKNOWN):
                tid, txid, version = line.split(" ")
                logs.unknown.append(Unknown(tid, txid, None if version == "None" else int(version)))
            for line in _lines(out / EVENTS):
                kind, _, rest = line.partition(" ")
                if kind == "start":
                    logs.started.add(rest)
                elif kind == "skip":
                    logs.skipped += 1
                elif kind == "conflict":
                    logs.conflicts[rest.split(" ")[1]] += 1
                elif kind == "helped":
                    logs.helped.add(int(rest))
        return logs


def _lines(path: Path) -> list[str]:
    """The complete lines of a worker's file (none if it was killed before creating it)."""
    if not path.exists():
        return []
    return path.read_text().split("\n")[:-1]


# ----------------------------------------------------------------------------------------------- checks


def _balances(snap: txlake.LakehouseSnapshot) -> dict[int, int]:
    """Balance per account number over both tables; every account exactly once."""
    out: dict[int, int] = {}
    for t, name in enumerate(TABLES):
        records = snap.read_arrow(name).to_pylist()
        ids = sorted(r["id"] for r in records)
        assert ids == list(range(ACCOUNTS)), f"v{snap.version}: {name} holds account ids {ids}"
        out.update({t * ACCOUNTS + r["id"]: r["balance"] for r in records})
    return out


@dataclass
class History:
    """The global versions after setup: how they ended and the transfer each committed one made."""

    committed: int = 0
    aborted: int = 0
    moves: Counter[tuple[int, int, int]] = field(default_factory=Counter)


def settle(lake: txlake.Lakehouse) -> int:
    """Decide every claim the killed workers left (rolled forward once its lease expired); the latest version."""
    glog = lake.context.glog
    time.sleep(LEASE * 1.2)
    while (tail := glog.tail()).undecided:
        for version in tail.undecided:
            status = lake.transaction_status(glog.read_record(version).txid, version)
            assert status != "unknown", f"v{version} is undecided after its lease"
    return tail.state.version


def check_every_version(lake: txlake.Lakehouse, first: int, latest: int) -> History:
    """Check 3 at every global version from ``first`` (the setup) to ``latest``."""
    total = 2 * ACCOUNTS * OPENING
    history = History()
    before = lake.snapshot(first)
    prev, prev_journal = _balances(before), before.table_version(JOURNAL)
    assert prev == dict.fromkeys(range(2 * ACCOUNTS), OPENING)
    for g in range(first + 1, latest + 1):
        snap = lake.snapshot(g)
        now, journal = _balances(snap), snap.table_version(JOURNAL)
        assert sum(now.values()) == total, f"v{g}: total {sum(now.values())} != {total}: {now}"
        assert min(now.values()) >= 0, f"v{g}: a negative balance (no serializable guard): {now}"
        changed = {k: now[k] - prev[k] for k in now if now[k] != prev[k]}
        outcome = lake.context.glog.read_outcome(g)
        assert outcome is not None, f"v{g} undecided after settling"
        if outcome.committed:
            history.committed += 1
            debits = [k for k, d in changed.items() if d < 0]
            credits = [k for k, d in changed.items() if d > 0]
            assert len(debits) == 1 and len(credits) == 1, f"v{g} is not one transfer: {changed}"
            amount = changed[credits[0]]
            assert amount > 0, f"v{g}: {changed}"
            history.moves[(debits[0], credits[0], amount)] += 1
            assert journal == prev_journal + 1, f"v{g} moved {changed} with journal v{prev_journal} -> v{journal}"
        else:
            history.aborted += 1
            assert not changed and journal == prev_journal, f"aborted v{g} changed {changed}, journal v{journal}"
        prev, prev_journal = now, journal
    return history


def check_deltars(lake: txlake.Lakehouse, options: dict[str, str]) -> None:
    """Check 4: delta-rs reads each table at its latest Delta version with txlake's rows."""
    snap = lake.snapshot()
    for name in (*TABLES, JOURNAL):
        entry = snap.entry(name)
        dt = TableLocation(lake.store, entry.path, options).deltars()
        assert dt.version() == snap.table_version(name), f"{name}: delta-rs is at v{dt.version()}"
        assert deltars_read_datafusion(dt) == rows(snap.read_arrow(name)), f"{name}: delta-rs rows differ"


def run_doctor(uri: str, options: dict[str, str]) -> list[dict[str, object]]:
    """Check 5: the real ``txlake doctor --json`` (S3 settings from the environment) finds no error."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TXLAKE_"))}
    env.update(options)
    cli = Path(sys.executable).with_name("txlake")
    done = subprocess.run(
        [str(cli), "doctor", "--uri", uri, "--json"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"doctor exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    report = json.loads(done.stdout)
    findings: list[dict[str, object]] = report["findings"]
    assert report["healthy"] and not [f for f in findings if f["severity"] == "error"], findings
    assert all(f["check"] == "storage.leftovers" for f in findings), f"unexpected findings: {findings}"
    return findings


# ------------------------------------------------------------------------------------------------- a run


def setup_bank(uri: str, options: dict[str, str]) -> int:
    """Create the bank (one data file per account) and return the lakehouse version after setup."""
    lake = txlake.connect(uri, options, checkpoint_interval=CHECKPOINT_INTERVAL)
    properties = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}
    for name in TABLES:
        lake.create_table(name, ACCOUNT_SCHEMA, properties=properties)
    lake.create_table(JOURNAL, JOURNAL_SCHEMA, properties=properties)
    with lake.transaction() as tx:
        for name in TABLES:
            for i in range(ACCOUNTS):
                tx.append(name, pa.table({"id": [i], "balance": [OPENING]}, schema=ACCOUNT_SCHEMA))
    return lake.version()


def chaos(uri: str, options: dict[str, str], root: Path, seconds: float) -> None:
    """Set up, run the fleet under kills for ``seconds``, settle, check 1-5, print the figures."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    first = setup_bank(uri, options)
    config = ChaosConfig(
        uri=uri,
        storage_options=options,
        accounts=ACCOUNTS,
        max_amount=MAX_AMOUNT,
        lease_seconds=LEASE,
        checkpoint_interval=CHECKPOINT_INTERVAL,
        until=time.time() + seconds + 300,
        parent=os.getpid(),
    )
    started = time.monotonic()
    fleet = run_fleet(config, root, seconds, rng)
    ran = time.monotonic() - started
    assert not fleet.self_exits, "\n".join(fleet.self_exits)

    checked = time.monotonic()
    lake = txlake.connect(uri, options, create=False, lease_seconds=LEASE)
    latest = settle(lake)
    logs = WorkerLogs.read(root, fleet.incarnations)
    snap = lake.snapshot(latest)
    journal = snap.read_arrow(JOURNAL).to_pylist()
    ids = Counter(r["transfer_id"] for r in journal)

    # 1-2: durability, exactly once, no phantom rows, unknown outcomes agree with the journal
    lost = [t for t in logs.acked if t not in ids]
    assert not lost, f"{len(lost)} acknowledged transfers are not in the journal: {lost[:10]}"
    twice = [t for t, n in ids.items() if n > 1]
    assert not twice, f"journal rows appear twice: {twice[:10]}"
    assert len(logs.acked) == len(set(logs.acked)), "a worker acknowledged a transfer id twice"
    phantoms = [t for t in ids if t not in logs.started]
    assert not phantoms, f"journal rows no worker started: {phantoms[:10]}"
    unknown_committed = 0
    for u in logs.unknown:
        status = lake.transaction_status(u.txid, u.version)
        assert status != "unknown", f"{u}: still unknown after settling"
        assert (status == "committed") == (u.transfer_id in ids), f"{u}: status {status}, journal disagrees"
        unknown_committed += status == "committed"

    # 3: conservation and atomicity at every version; the journal explains the balances
    history = check_every_version(lake, first, latest)
    assert history.committed == len(journal), f"{history.committed} committed versions, {len(journal)} rows"
    assert history.moves == Counter((r["src"], r["dst"], r["amount"]) for r in journal)
    expected = dict.fromkeys(range(2 * ACCOUNTS), OPENING)
    for r in journal:
        expected[r["src"]] -= r["amount"]
        expected[r["dst"]] += r["amount"]
    assert _balances(snap) == expected, "the balances are not the opening plus the journal's transfers"

    # 4-5: delta-rs agrees, the doctor is clean
    check_deltars(lake, options)
    findings = run_doctor(uri, options)

    print(
        f"\nchaos {uri.split(':')[0]} seed={seed}: {ran:.1f}s, {len(fleet.incarnations)} incarnations, "
        f"{fleet.kills} kills (+{WORKERS} at the end); versions {first + 1}..{latest}: "
        f"{history.committed} committed, {history.aborted} aborted; "
        f"{len(logs.acked)} transfers acknowledged, {len(journal) - len(logs.acked)} committed unacknowledged, "
        f"{len(logs.unknown)} unknown ({unknown_committed} committed), {logs.skipped} skipped (no funds); "
        f"{sum(logs.conflicts.values())} conflicts retried {dict(logs.conflicts)}; "
        f"{len(logs.helped)} roll-forwards by workers, {len(lake.context.helped)} by the checker; "
        f"doctor: {[(f['severity'], f['path']) for f in findings]}; checks took {time.monotonic() - checked:.1f}s"
    )


def _seconds(request: pytest.FixtureRequest, form: str, backend: str) -> float:
    if form == "long" and not request.config.getoption("--long"):
        pytest.skip("the hour-long chaos run needs --long")
    return SECONDS[form][backend]


@pytest.mark.s3
@pytest.mark.parametrize("form", FORMS)
def test_chaos_s3(
    form: str, request: pytest.FixtureRequest, seaweedfs: SeaweedFS, s3_bucket: str, tmp_path: Path
) -> None:
    seconds = _seconds(request, form, "s3")
    (tmp_path / "workers").mkdir()
    chaos(f"s3://{s3_bucket}/lake", seaweedfs.storage_options(), tmp_path / "workers", seconds)


@pytest.mark.parametrize("form", FORMS)
def test_chaos_file(form: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    seconds = _seconds(request, form, "file")
    (tmp_path / "workers").mkdir()
    chaos((tmp_path / "lake").as_uri(), {}, tmp_path / "workers", seconds)
