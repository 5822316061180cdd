"""The fault campaign: run one operation with a fault at every request it makes, then check the lakehouse.

A *scenario* prepares a fresh lakehouse (``setup``), runs the operation under test through a client whose
store has one armed :class:`~txlake.storage.FaultRule` (``act``), and says what the lakehouse must look like
afterwards (``check``). The campaign first runs the operation without faults to count its requests per kind
(``store.counters``), then, for every kind, every index up to that count and every action, runs one case:

1. the faulty client runs ``act``; what it saw is classified: ``ok`` (returned), ``unknown``
   (:class:`CommitStateUnknownError`), ``failed`` (any other :class:`TxlakeError`), ``crash``
   (:class:`SimulatedCrash`); anything else is a violation (an untyped error);
2. a second, healthy client commits a transaction of its own (it may have to wait out the faulty client's
   lease and roll its claim forward) -- it must succeed (progress);
3. a third client reads every table, in txlake and in delta-rs, and the scenario's checks run: all-or-nothing,
   a caller told ``ok`` sees its data, a caller told ``failed`` never does, an ``unknown``/``crash`` caller's
   :meth:`Lakehouse.transaction_status` agrees with what is visible, and both readers see the same rows.
"""

from __future__ import annotations

import copy
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

import txlake
from tests.interop.deltars import TableLocation, deltars_read_datafusion, rows
from txlake.errors import CommitStateUnknownError, LeaseLostError, SimulatedCrash, TxlakeError
from txlake.storage import FaultRule, RetryPolicy
from txlake.storage.counters import REQUEST_KINDS, RequestCounts, RequestKind
from txlake.storage.faults import FaultAction

LEASE = 0.2
S3_LEASE = 0.5
"""On SeaweedFS a renewal PUT can take over a tenth of a second while four cases and the other xdist worker load
the machine: 0.2 s leases were lost in setups (a claimer's lease ran out before its claim)."""
SETUP_LEASE_S3 = 1.5
"""On SeaweedFS, the lease of the clients a setup leaves for dead (a claimer crashed after its claim, a
transaction abandoned mid-way): they must still hold it when they claim, and with the campaign beside Spark
tests (load average ~14) a renewal starved for over half a second lost a 0.5 s lease in a setup."""
SETUP_LEASE_FILE = 1.0
"""The same on local disk: the clean-clone CI lost a 0.2 s setup lease there too (file:// ``recover``)."""
Locations = Callable[[str], tuple[str, dict[str, str]]]
"""A fresh empty location (URI, storage options) for each tag: where a campaign's cases run."""
SETUP_ATTEMPTS = 3
"""Setups of one case at most (:func:`set_up`)."""
HEALTHY_LEASE = 5.0
"""The healthy client's lease: a pessimistic healthy client lost its 0.6 s lease at load average 19."""
WORKERS = int(os.environ.get("TXLAKE_CAMPAIGN_WORKERS", "8"))
"""Cases run this many at a time, each on its own location with its own clients and its own copy of the
scenario: a case mostly sleeps (waiting out leases), so one at a time left the CPU idle 85% of the time. Measured
(the whole campaign, ``-n 2``, quiet machine): 4 at a time 661 s, 8 at a time 405 s; S3 ``recover`` alone used
60% of one core with 4 (169 s), 92% with 8 (101 s)."""
ACTIONS: tuple[str, ...] = ("fail", "transient", "crash_before", "crash_after", "outage")
"""``outage``: the request and every later one of the faulty client fail (a partition that does not heal)."""

ACCOUNTS = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
JOURNAL = pa.schema([("id", pa.int64()), ("amount", pa.int64())])


def lease_seconds(uri: str) -> float:
    """The lease of the campaign's clients on ``uri``'s store."""
    return S3_LEASE if uri.startswith("s3://") else LEASE


def connect(uri: str, options: dict[str, str], **kwargs: Any) -> txlake.Lakehouse:
    lake = txlake.connect(uri, options, **{"lease_seconds": lease_seconds(uri), **kwargs})
    lake.store.retry = RetryPolicy(max_retries=3, base_delay=0.002, max_delay=0.01)
    return lake


@dataclass
class Run:
    """What the faulty client did: how its call ended and which transactions it started."""

    caller: str = "ok"
    error: str = ""
    txids: list[str] = field(default_factory=list)
    unknown_version: int | None = None


class Scenario(Protocol):
    name: str
    client: dict[str, Any]
    """Keyword arguments of ``txlake.connect`` for the faulty client and the healthy ones (e.g. ``spark=``)."""

    def setup(self, uri: str, options: dict[str, str]) -> None: ...

    def act(self, lake: txlake.Lakehouse, run: Run) -> None: ...

    def second(self, lake: txlake.Lakehouse) -> None: ...

    def check(self, lake: txlake.Lakehouse, run: Run) -> tuple[bool, list[str]]:
        """(whether the faulty operation is visible, violations)."""
        ...


@dataclass(frozen=True)
class Case:
    kind: RequestKind
    nth: int
    action: str

    def rule(self) -> FaultRule:
        if self.action == "outage":
            return FaultRule(self.kind, self.nth, "fail", times=1_000_000)
        action: FaultAction = self.action  # type: ignore[assignment]
        return FaultRule(self.kind, self.nth, action)

    def __str__(self) -> str:
        return f"{self.kind}#{self.nth}:{self.action}"


@dataclass
class CaseResult:
    case: Case
    caller: str
    applied: bool
    violations: list[str]
    fired: bool = True


@dataclass
class CampaignReport:
    scenario: str
    backend: str
    counts: RequestCounts
    results: list[CaseResult] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return [f"{r.case}: {v}" for r in self.results for v in r.violations]

    def table(self) -> str:
        """Outcome per action: how the caller's call ended and whether the operation became visible."""
        tally: Counter[tuple[str, str, bool]] = Counter((r.case.action, r.caller, r.applied) for r in self.results)
        unfired = sum(not r.fired for r in self.results)
        lines = [
            f"{self.scenario} on {self.backend}: {len(self.results)} cases over {self.counts.as_dict()} requests, "
            f"{len(self.violations)} violations ({unfired} cases made fewer requests than counted: no fault)",
            f"{'action':<13}{'caller saw':<11}{'visible':<9}cases",
        ]
        for (action, caller, applied), n in sorted(tally.items()):
            lines.append(f"{action:<13}{caller:<11}{'yes' if applied else 'no':<9}{n}")
        return "\n".join(lines)


def _act(scenario: Scenario, lake: txlake.Lakehouse) -> Run:
    run = Run()
    try:
        scenario.act(lake, run)
    except CommitStateUnknownError as exc:
        run.caller, run.error, run.unknown_version = "unknown", str(exc), exc.version
    except TxlakeError as exc:
        run.caller, run.error = "failed", f"{type(exc).__name__}: {exc}"
    except SimulatedCrash as exc:
        run.caller, run.error = "crash", str(exc)
    except Exception as exc:
        run.caller, run.error = "untyped", f"{type(exc).__name__}: {exc}"
    return run


def count_requests(scenario: Scenario, location: tuple[str, dict[str, str]]) -> RequestCounts:
    """The requests ``act`` makes when nothing fails (what the campaign sweeps)."""
    uri, options = location
    scenario.setup(uri, options)
    lake = connect(uri, options, **scenario.client)
    with lake.store.counters.measure() as measured:
        run = _act(scenario, lake)
    if run.caller != "ok":
        raise AssertionError(f"{scenario.name} fails without faults: {run.error}")
    return measured.counts


def cases(counts: RequestCounts, actions: tuple[str, ...] = ACTIONS) -> Iterator[Case]:
    per_kind = counts.as_dict()
    for kind in REQUEST_KINDS:
        for nth in range(1, per_kind[kind] + 1):
            for action in actions:
                yield Case(kind, nth, action)


def set_up(scenario: Scenario, locations: Locations, tag: str) -> tuple[str, dict[str, str]]:
    """Run ``scenario``'s setup at ``locations(tag)``; at a fresh location again if a setup client lost its lease.

    On a machine loaded far beyond the CI's (campaign and history checker side by side, load average ~16), a
    heartbeat thread was starved longer than a 1.5 s setup lease: the protocol then refuses that client's claim
    (``LeaseLostError``), as it must. The setup is not what a case tests; its case is set up anew instead.
    """
    attempt = 0
    while True:
        uri, options = locations(tag if attempt == 0 else f"{tag}-setup{attempt}")
        try:
            scenario.setup(uri, options)
            return uri, options
        except LeaseLostError:
            attempt += 1
            if attempt == SETUP_ATTEMPTS:
                raise


def run_case(scenario: Scenario, case: Case, locations: Locations, tag: str) -> CaseResult:
    uri, options = set_up(scenario, locations, tag)
    faulty = connect(uri, options, **scenario.client)
    faulty.store.faults.add(case.rule())
    run = _act(scenario, faulty)
    fired = faulty.store.faults.fired() > 0
    faulty.store.faults.clear()  # the faulty client is gone; its objects stay as it left them
    violations: list[str] = []
    if run.caller == "untyped":
        violations.append(f"untyped error: {run.error}")
    try:
        # the healthy client's own lease only has to outlive a starved heartbeat (it never dies): long. It waits
        # out the faulty client's lease, whose length that client wrote in its lease and its claim
        scenario.second(connect(uri, options, **{**scenario.client, "lease_seconds": HEALTHY_LEASE}))
    except Exception as exc:
        violations.append(f"a healthy client could not commit afterwards: {type(exc).__name__}: {exc}")
    reader = connect(uri, options)
    try:
        applied, found = scenario.check(reader, run)
    except Exception as exc:
        failure = f"reading failed: {type(exc).__name__}: {exc}"
        return CaseResult(case, run.caller, False, [*violations, failure], fired)
    violations += found
    if run.caller == "ok" and not applied:
        violations.append("the caller was told it committed, but its data is not visible")
    if run.caller == "failed" and applied:
        violations.append(f"the caller was told it failed ({run.error}), but its data became visible")
    if run.caller in ("unknown", "crash") and run.txids:
        status = reader.transaction_status(run.txids[-1], run.unknown_version)
        # a crash before the claim leaves a transaction no log entry names: "unknown" is its honest status
        allowed = {"committed"} if applied else {"aborted", "unknown"} if run.caller == "crash" else {"aborted"}
        if status not in allowed:
            violations.append(f"transaction_status says {status!r}, but the data is {'' if applied else 'not '}visible")
    return CaseResult(case, run.caller, applied, violations, fired)


def campaign(
    scenario: Scenario,
    locations: Locations,
    backend: str,
    *,
    actions: tuple[str, ...] = ACTIONS,
    kinds: tuple[RequestKind, ...] = REQUEST_KINDS,
    workers: int = WORKERS,
) -> CampaignReport:
    """Count ``scenario``'s requests, then run one case per (kind, index, action), ``workers`` at a time;
    ``locations(tag)`` gives a fresh empty location for each run."""
    counts = count_requests(copy.copy(scenario), locations("count"))
    report = CampaignReport(scenario.name, backend, counts)
    swept = [c for c in cases(counts, actions) if c.kind in kinds]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="campaign") as pool:
        # a scenario keeps what its setup made on itself (the dead transaction's id, ...): a copy per case
        futures = [
            pool.submit(run_case, copy.copy(scenario), case, locations, f"case{i}") for i, case in enumerate(swept)
        ]
        report.results = [future.result() for future in futures]
    return report


# ------------------------------------------------------------------------------------------- helpers


def balances(lake: txlake.Lakehouse, name: str) -> dict[int, int]:
    return {r["id"]: r["balance"] for r in lake.read_arrow(name).to_pylist()}


def deltars_mismatches(lake: txlake.Lakehouse, names: list[str]) -> list[str]:
    """Tables whose rows differ between txlake (latest lakehouse version) and delta-rs (latest Delta version)."""
    out = []
    snap = lake.snapshot()
    for name in names:
        entry = snap.entry(name)
        loc = TableLocation(lake.store, entry.path, lake.store.storage_options)
        theirs = deltars_read_datafusion(loc.deltars())
        ours = rows(snap.read_arrow(name))
        if theirs != ours:
            out.append(f"{name}: delta-rs reads {len(theirs)} rows {theirs[:3]}..., txlake {len(ours)} {ours[:3]}...")
    return out


def setup_lease_seconds(uri: str) -> float:
    """The lease of the clients a setup on ``uri``'s store leaves for dead."""
    return SETUP_LEASE_S3 if uri.startswith("s3://") else SETUP_LEASE_FILE


def setup_connect(uri: str, options: dict[str, str]) -> txlake.Lakehouse:
    """A client that a setup leaves for dead: its lease outlives a starved heartbeat until it is meant to die."""
    return connect(uri, options, lease_seconds=setup_lease_seconds(uri))


def wait_setup_lease(uri: str) -> None:
    """Until the lease of a client from :func:`setup_connect` that stopped renewing has expired."""
    time.sleep(setup_lease_seconds(uri) * 1.2)


def wait_lease(uri: str) -> None:
    """Until a lease a client on ``uri`` stopped renewing has expired."""
    time.sleep(lease_seconds(uri) * 1.2)
