"""Doctor checks of the lakehouse log: readable, contiguous, decided, replay equals checkpoints (I1); repair."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from txlake.cli.doctor.findings import Examination, RepairResult, ranges
from txlake.cli.output import timestamp
from txlake.errors import CorruptLogError, ObjectNotFoundError, TxlakeError, VersionNotFoundError
from txlake.lakehouse.log import ROOT, LogListing
from txlake.lakehouse.records import GlobalRecord, LakehouseState, Outcome, apply

ROLL_FORWARD_HINT = "run any write or `txlake doctor --repair` to roll forward"
_RESTORE_HINT = "restore the file from a backup; it was damaged outside txlake"
_CHECKPOINT_HINT = "delete the checkpoint file: checkpoints only speed up reads, readers then replay the log"
_LAST_CHECKPOINT_HINT = "harmless (it is only a hint); the next global checkpoint rewrites it"


@dataclass
class LogFacts:
    """What the global log holds: readable records and outcomes, and the state of its decided prefix."""

    claimed: set[int] = field(default_factory=set)
    records: dict[int, GlobalRecord] = field(default_factory=dict)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    state: LakehouseState = field(default_factory=lambda: LakehouseState(version=-1))
    start: int = 0
    """Where the log begins (a global checkpoint, once vacuum cleaned up the versions before it)."""


def repair(exam: Examination) -> list[RepairResult]:
    """Roll every undecided global version forward (waiting out live leases), oldest first."""
    listing = exam.glog.list()
    repaired = []
    for version in sorted(listing.records - listing.outcomes):
        try:
            exam.lake.context.settle(version)
            outcome = exam.glog.read_outcome(version)
        except TxlakeError as exc:
            exam.add(
                "log.decided",
                "error",
                f"could not roll global version {version} forward: {exc}",
                "restore the damaged log entry from a backup, then run `txlake doctor --repair` again",
                version=version,
            )
            continue
        if outcome is not None:
            repaired.append(RepairResult(version, outcome.txid, outcome.status))
    return repaired


def check_global_log(exam: Examination) -> LogFacts:
    """Read every record and outcome, report gaps, damage and undecided claims, then replay (I1)."""
    listing = exam.glog.list()
    facts = LogFacts(claimed=set(listing.records), start=listing.start)
    if not listing.records:
        exam.add("log.contiguous", "error", "the lakehouse log has no records", "check --uri", version=0)
        return facts
    _check_contiguous(exam, listing)
    _read_log(exam, listing, facts)
    _replay(exam, facts, listing.checkpoints, listing.start)
    return facts


def _check_contiguous(exam: Examination, listing: LogListing) -> None:
    gaps = sorted(set(range(listing.start, max(listing.records) + 1)) - listing.records)
    if listing.start:
        exam.add(
            "log.contiguous",
            "info",
            f"the lakehouse log starts at global checkpoint {listing.start}: vacuum cleaned up the versions before it",
            "nothing to do: those versions can no longer be read",
            version=listing.start,
        )
    if gaps:
        exam.add(
            "log.contiguous",
            "error",
            f"global version(s) {ranges(gaps)} are missing from the lakehouse log",
            "the log lost entries (deleted outside txlake?); restore them from a backup -- readers stop at the gap",
            version=gaps[0],
            path=exam.glog.record_path(gaps[0]),
        )
    for orphan in sorted(v for v in listing.outcomes - listing.records if v >= listing.start):
        exam.add(
            "log.contiguous",
            "error",
            f"global version {orphan} has an outcome but no record",
            "restore the record from a backup; an outcome alone cannot be replayed",
            version=orphan,
            path=exam.glog.outcome_path(orphan),
        )


def _read_log(exam: Examination, listing: LogListing, facts: LogFacts) -> None:
    glog = exam.glog

    def fetch(v: int) -> tuple[int, GlobalRecord | TxlakeError, Outcome | TxlakeError | None]:
        record: GlobalRecord | TxlakeError
        outcome: Outcome | TxlakeError | None = None
        try:
            record = glog.read_record(v)
        except (CorruptLogError, VersionNotFoundError) as exc:
            record = exc
        if v in listing.outcomes:
            try:
                outcome = glog.read_outcome(v)
            except CorruptLogError as exc:
                outcome = exc
        return v, record, outcome

    now = time.time() * 1000
    for v, record, outcome in exam.map("reading the global log", fetch, sorted(listing.records)):
        if isinstance(record, TxlakeError):
            exam.add(
                "log.readable",
                "error",
                f"global record {v} is unreadable: {record}",
                _RESTORE_HINT,
                version=v,
                path=glog.record_path(v),
            )
            continue
        facts.records[v] = record
        if isinstance(outcome, TxlakeError):
            exam.add(
                "log.readable",
                "error",
                f"outcome of global version {v} is unreadable: {outcome}",
                _RESTORE_HINT,
                version=v,
                path=glog.outcome_path(v),
            )
        elif outcome is not None and outcome.txid != record.txid:
            exam.add(
                "log.readable",
                "error",
                f"outcome of global version {v} names transaction {outcome.txid}, its record {record.txid}",
                "restore both files from a backup; one was replaced outside txlake",
                version=v,
                path=glog.outcome_path(v),
            )
        elif outcome is not None:
            facts.outcomes[v] = outcome
        elif now >= record.lease_until_ms:
            lease = timestamp(record.lease_until_ms)
            exam.add(
                "log.decided",
                "error",
                f"global version {v} (transaction {record.txid}) is undecided; its lease ended at "
                f"{lease.isoformat() if lease else '?'}",
                ROLL_FORWARD_HINT,
                version=v,
            )
        else:
            exam.add(
                "log.decided",
                "info",
                f"global version {v} (transaction {record.txid}) is being committed",
                "nothing to do: its owner decides it, or any writer once its lease ends",
                version=v,
            )


def _replay(exam: Examination, facts: LogFacts, checkpoints: set[int], start: int = 0) -> None:
    """Fold the decided prefix of the log (from the checkpoint it starts at, if it was cleaned up); I1: the
    state at each global checkpoint equals the checkpoint."""
    states: dict[int, LakehouseState] = {}
    state = LakehouseState(version=-1)
    if start:
        try:
            state = exam.glog.read_checkpoint(start)
        except (CorruptLogError, ObjectNotFoundError) as exc:
            exam.add(
                "I1.checkpoints",
                "error",
                f"global checkpoint {start}, where the cleaned-up log starts, is unreadable: {exc}",
                _CHECKPOINT_HINT,
                path=exam.glog.checkpoint_path(start),
            )
            return
        states[start] = state
    for v in sorted(r for r in facts.records if r > state.version):
        if v != state.version + 1 or v not in facts.outcomes:
            break
        try:
            state = apply(state, facts.records[v], facts.outcomes[v])
        except (CorruptLogError, KeyError) as exc:
            exam.add(
                "log.readable",
                "error",
                f"global version {v} cannot be applied to the state at {v - 1}: {exc}",
                _RESTORE_HINT,
                version=v,
                path=exam.glog.record_path(v),
            )
            break
        if v in checkpoints:
            states[v] = state
    facts.state = state
    for c in sorted(checkpoints):
        path = exam.glog.checkpoint_path(c)
        try:
            stored = exam.glog.read_checkpoint(c)
        except (CorruptLogError, ObjectNotFoundError) as exc:
            exam.add(
                "I1.checkpoints", "error", f"global checkpoint {c} is unreadable: {exc}", _CHECKPOINT_HINT, path=path
            )
            continue
        replayed = states.get(c)
        if replayed is None:
            exam.add(
                "I1.checkpoints",
                "warning",
                f"global checkpoint {c} lies beyond the decided prefix of the log (version {state.version})",
                "fix the log problems above first",
                version=c,
                path=path,
            )
        elif replayed != stored:
            differs = [
                name
                for name in ("namespaces", "tables", "table_versions", "timestamp_ms")
                if getattr(replayed, name) != getattr(stored, name)
            ]
            exam.add(
                "I1.checkpoints",
                "error",
                f"global checkpoint {c} differs from the replayed log in {', '.join(differs)}",
                _CHECKPOINT_HINT,
                version=c,
                path=path,
            )
    _check_last_checkpoint(exam, checkpoints)


def _check_last_checkpoint(exam: Examination, checkpoints: set[int]) -> None:
    path = f"{ROOT}/_last_checkpoint"
    try:
        hint = int(json.loads(exam.store.get(path))["version"])
    except ObjectNotFoundError:
        return
    except (ValueError, KeyError, TypeError):
        exam.add("I1.checkpoints", "warning", "_last_checkpoint is unreadable", _LAST_CHECKPOINT_HINT, path=path)
        return
    if hint not in checkpoints:
        exam.add(
            "I1.checkpoints",
            "warning",
            f"_last_checkpoint points at global checkpoint {hint}, which does not exist",
            _LAST_CHECKPOINT_HINT,
            path=path,
        )
