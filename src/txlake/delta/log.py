"""The ``_delta_log`` directory of one table: listing, reading and writing commits (put-if-absent)."""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from txlake.delta.actions import Action, parse_commit, serialize_commit
from txlake.errors import (
    CorruptLogError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    VersionAlreadyExistsError,
)
from txlake.storage import ObjectMeta, ObjectStore
from txlake.storage.threads import map_concurrently

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_UUID_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)$")
SIDECARS = "_sidecars"
READ_CONCURRENCY = 16
BATCHES_PER_WORKER = 4


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


@dataclass(frozen=True, slots=True)
class CheckpointRef:
    """A checkpoint at ``version``: a classic one (one file, or ``parts`` files, complete when all parts exist)
    or a UUID-named V2 one (``n.checkpoint.<uuid>.json|parquet``, one file that may name sidecar files)."""

    version: int
    paths: tuple[str, ...]
    parts: int | None = None

    @property
    def complete(self) -> bool:
        return self.parts is None or len(self.paths) == self.parts

    @property
    def uuid_named(self) -> bool:
        return _UUID_CHECKPOINT.match(self.paths[0].rsplit("/", 1)[-1]) is not None

    @property
    def is_json(self) -> bool:
        return self.paths[0].endswith(".json")


@dataclass(frozen=True, slots=True)
class LastCheckpoint:
    version: int
    size: int | None = None
    parts: int | None = None


def _natural(value: object) -> int | None:
    """``value`` if it is a JSON integer >= 0 (not a bool, float or string), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_last_checkpoint(raw: bytes) -> LastCheckpoint | None:
    """Decode a ``_last_checkpoint`` document; ``None`` when it is empty, truncated or malformed.

    Only ``version`` (and the optional ``size``/``parts``) are read; a malformed optional field is dropped,
    a malformed version makes the whole hint unusable, so the caller falls back to listing the log.
    """
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # ValueError includes undecodable bytes
        return None
    if not isinstance(doc, dict):
        return None
    version = _natural(doc.get("version"))
    if version is None:
        return None
    parts = _natural(doc.get("parts"))
    return LastCheckpoint(version, _natural(doc.get("size")), parts if parts else None)


@dataclass
class LogListing:
    """What one LIST of ``_delta_log/`` found: commit files and checkpoints (classic or UUID-named) by version."""

    commits: dict[int, ObjectMeta] = field(default_factory=dict)
    checkpoints: dict[int, CheckpointRef] = field(default_factory=dict)

    @property
    def latest_commit(self) -> int | None:
        return max(self.commits) if self.commits else None

    @property
    def latest_version(self) -> int | None:
        """The newest commit, or the newest checkpoint of a log whose commits were all cleaned up."""
        if self.commits:
            return max(self.commits)
        return max(self.checkpoints) if self.checkpoints else None

    def best_checkpoint(self, at_or_below: int) -> CheckpointRef | None:
        usable = [c for v, c in self.checkpoints.items() if v <= at_or_below and c.complete]
        return max(usable, key=lambda c: c.version) if usable else None


class DeltaLog:
    """Read and append the log of the Delta table at ``path`` (relative to the store root)."""

    def __init__(self, store: ObjectStore, path: str, *, name: str | None = None) -> None:
        self.store = store
        self.path = path.strip("/")
        self.log_dir = f"{self.path}/_delta_log" if self.path else "_delta_log"
        self.name = name or self.path or store.uri

    def commit_path(self, version: int) -> str:
        return f"{self.log_dir}/{commit_name(version)}"

    # ------------------------------------------------------------------------------------------ listing

    def read_last_checkpoint(self) -> LastCheckpoint | None:
        """The ``_last_checkpoint`` hint, or ``None`` if absent or unreadable (it is only a hint)."""
        try:
            raw = self.store.get(f"{self.log_dir}/_last_checkpoint")
        except ObjectNotFoundError:
            return None
        return parse_last_checkpoint(raw)

    def list(self, *, from_version: int | None = None) -> LogListing:
        """One LIST of the log (from ``from_version`` on, checkpoint files of that version included)."""
        start_after = None
        if from_version is not None and from_version > 0:
            start_after = f"{self.log_dir}/{from_version - 1:020d}.json"
        listing = LogListing()
        # Keyed by (version, number of parts): writers may have checkpointed one version differently.
        parts: dict[tuple[int, int | None], list[str]] = {}
        prefix = f"{self.log_dir}/"
        for meta in self.store.list(self.log_dir, start_after=start_after):
            name = meta.path[len(prefix) :]
            if not meta.path.startswith(prefix) or "/" in name:
                continue  # only direct children count: not _delta_log/.tmp/..., _commits/..., _sidecars/...
            m = _COMMIT.match(name)
            if m:
                listing.commits[int(m.group(1))] = meta
                continue
            m = _CHECKPOINT.match(name)
            if m:
                total = int(m.group(3)) if m.group(3) else None
                parts.setdefault((int(m.group(1)), total), []).append(meta.path)
                continue
            m = _UUID_CHECKPOINT.match(name)
            if m:
                parts.setdefault((int(m.group(1)), None), []).append(meta.path)
        # One checkpoint per version: a complete one, a classic single file before a UUID-named one (writers
        # that race may leave several; any complete one holds the same state), by name among UUID-named ones.
        refs = [
            CheckpointRef(v, tuple(sorted(paths)), total)
            for (v, total), paths in parts.items()
            for paths in ([paths] if total is not None else [[p] for p in sorted(paths)])
        ]
        for ref in sorted(refs, key=lambda r: (not r.complete, r.uuid_named, r.paths), reverse=True):
            listing.checkpoints[ref.version] = ref  # the preferred one comes last
        return listing

    def exists(self) -> bool:
        """Whether the table has at least one commit or checkpoint."""
        listing = self.list()
        return bool(listing.commits or listing.checkpoints)

    def latest_version(self) -> int | None:
        """The newest version (as :func:`~txlake.delta.snapshot.load_snapshot` finds it), ``None`` without a table."""
        hint = self.read_last_checkpoint()
        listing = self.list(from_version=hint.version if hint else None)
        if hint and not listing.commits:
            listing = self.list()
        return listing.latest_version

    # ------------------------------------------------------------------------------------------ reading

    def read_commit(self, version: int) -> builtins.list[Action]:
        """The actions of one commit; :class:`CorruptLogError` if it is missing or malformed."""
        try:
            data = self.store.get(self.commit_path(version))
        except ObjectNotFoundError as exc:
            raise CorruptLogError(
                f"commit {version} of {self.name} is missing", table=self.name, version=version
            ) from exc
        return parse_commit(data, table=self.name, version=version)

    def read_commits(self, versions: Sequence[int]) -> builtins.list[builtins.list[Action]]:
        """Several commits, fetched concurrently, in the order given (the lowest failing version raises)."""
        if len(versions) <= 2:
            return [self.read_commit(v) for v in versions]
        workers = min(READ_CONCURRENCY, len(versions))
        # One task per batch of consecutive versions, not per version: a future per commit costs more
        # than a small local read. Several batches per worker keep the workers evenly loaded.
        size = -(-len(versions) // (workers * BATCHES_PER_WORKER))
        batches = [versions[i : i + size] for i in range(0, len(versions), size)]
        return [
            actions for batch in map_concurrently(self._read_batch, batches, max_workers=workers) for actions in batch
        ]

    def _read_batch(self, versions: Sequence[int]) -> builtins.list[builtins.list[Action]]:
        return [self.read_commit(v) for v in versions]

    # ------------------------------------------------------------------------------------------ writing

    def write_commit(self, version: int, actions: Iterable[Action]) -> None:
        """Put-if-absent the commit at ``version``; :class:`VersionAlreadyExistsError` if taken."""
        data = serialize_commit(actions)
        try:
            self.store.put_if_absent(self.commit_path(version), data)
        except ObjectAlreadyExistsError as exc:
            raise VersionAlreadyExistsError(
                f"version {version} of {self.name} already exists", table=self.name, version=version
            ) from exc

    def write_last_checkpoint(self, hint: LastCheckpoint, **extra: int) -> None:
        doc: dict[str, int] = {"version": hint.version}
        if hint.size is not None:
            doc["size"] = hint.size
        if hint.parts is not None:
            doc["parts"] = hint.parts
        doc.update(extra)
        self.store.put(f"{self.log_dir}/_last_checkpoint", json.dumps(doc).encode())
