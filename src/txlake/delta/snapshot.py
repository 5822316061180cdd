"""Loading a table snapshot (latest, by version, by timestamp) from checkpoints and JSON commits; history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from txlake.delta.actions import CommitInfo
from txlake.delta.checkpoint import read_checkpoint
from txlake.delta.log import DeltaLog, LogListing
from txlake.delta.state import Snapshot, SnapshotBuilder
from txlake.errors import CorruptLogError, TableNotFoundError, VersionNotFoundError


def _mtime_ms(listing: LogListing, version: int) -> int | None:
    meta = listing.commits.get(version)
    return int(meta.last_modified.timestamp() * 1000) if meta else None


def load_snapshot(log: DeltaLog, version: int | None = None) -> Snapshot:
    """Replay the log up to ``version`` (latest when ``None``) from the newest usable checkpoint.

    Raises:
        TableNotFoundError: the log has no commits and no checkpoints.
        VersionNotFoundError: ``version`` is not in the log (too new, or cleaned up).
        CorruptLogError: a commit or checkpoint is malformed, or commits are missing (a gap).
        UnsupportedFeatureError: the table needs a reader feature txlake lacks.
    """
    hint = log.read_last_checkpoint()
    listing = log.list(from_version=hint.version if hint is not None else None)
    hinted = listing.checkpoints.get(hint.version) if hint is not None else None
    usable_hint = (
        hint is not None and hinted is not None and hinted.complete and (version is None or version >= hint.version)
    )
    partial = hint is not None and hint.version > 0  # that LIST started at the hinted version
    if partial and not usable_hint:
        listing = log.list()
    latest = listing.latest_version
    if latest is None:
        raise TableNotFoundError(f"no Delta table at {log.store.url(log.path)}", table=log.name)
    target = latest if version is None else version
    if version is not None and (version < 0 or version > latest):
        raise VersionNotFoundError(
            f"{log.name} has no version {version} (latest is {latest})", table=log.name, version=version
        )
    checkpoint = listing.best_checkpoint(target)
    if checkpoint is not None:
        replay = SnapshotBuilder.from_snapshot(read_checkpoint(log, checkpoint))
        replay.timestamp_ms = _mtime_ms(listing, checkpoint.version)
        start = checkpoint.version + 1
    else:
        if 0 not in listing.commits:
            earliest = min(listing.commits) if listing.commits else target
            raise VersionNotFoundError(
                f"{log.name} version {target} cannot be rebuilt: the log starts at {earliest} with no checkpoint",
                table=log.name,
                version=target,
            )
        replay = SnapshotBuilder(log.name)
        start = 0
    versions = list(range(start, target + 1))
    missing = [v for v in versions if v not in listing.commits]
    if missing:
        raise CorruptLogError(
            f"{log.name} log has a gap: commit {missing[0]} is missing", table=log.name, version=missing[0]
        )
    for v, actions in zip(versions, log.read_commits(versions), strict=True):
        replay.apply(v, actions, _mtime_ms(listing, v))
    return replay.finish()


@dataclass(frozen=True, slots=True)
class CommitEntry:
    """One entry of a table's history."""

    version: int
    timestamp_ms: int
    operation: str | None
    commit_info: Mapping[str, object]

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)


def commit_timestamps(log: DeltaLog) -> dict[int, int]:
    """Version -> commit timestamp (ms): the commit file's modification time, monotonized like Delta does."""
    listing = log.list()
    out: dict[int, int] = {}
    prev: int | None = None
    for v in sorted(listing.commits):
        ts = _mtime_ms(listing, v) or 0
        if prev is not None and ts <= prev:
            ts = prev + 1
        out[v] = ts
        prev = ts
    return out


def version_at(log: DeltaLog, timestamp: datetime) -> int:
    """The newest version committed at or before ``timestamp`` (Delta's time-travel-by-timestamp rule).

    The commit time is the modification time of the commit file, as Delta and delta-rs use when
    in-commit timestamps are not enabled.
    """
    if timestamp.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    ts = timestamp.timestamp() * 1000
    stamps = commit_timestamps(log)
    if not stamps:
        raise TableNotFoundError(f"no Delta table at {log.store.url(log.path)}", table=log.name)
    candidates = [v for v, t in stamps.items() if t <= ts]
    if not candidates:
        first = min(stamps)
        raise VersionNotFoundError(
            f"{log.name} has no version at or before {timestamp.isoformat()} (first commit at "
            f"{datetime.fromtimestamp(stamps[first] / 1000, tz=timestamp.tzinfo).isoformat()})",
            table=log.name,
        )
    return max(candidates)


def history(log: DeltaLog, limit: int | None = None) -> list[CommitEntry]:
    """Newest-first commit history with each commit's ``commitInfo``."""
    stamps = commit_timestamps(log)
    versions = sorted(stamps, reverse=True)[:limit]
    entries = []
    for v, actions in zip(versions, log.read_commits(versions), strict=True):
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        values = dict(info.values) if info else {}
        op = values.get("operation")
        entries.append(CommitEntry(v, stamps[v], str(op) if op is not None else None, values))
    return entries
