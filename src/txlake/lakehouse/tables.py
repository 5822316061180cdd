"""Delta snapshots of lakehouse tables at the versions the lakehouse maps them to (cached, incremental)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from txlake.delta.actions import Action
from txlake.delta.log import DeltaLog
from txlake.delta.snapshot import load_snapshot
from txlake.delta.state import Snapshot, SnapshotBuilder
from txlake.errors import CorruptLogError, TableNotFoundError, VersionNotFoundError
from txlake.lakehouse.records import TableEntry
from txlake.storage import ObjectStore


def missing_log_error(entry: TableEntry, log: DeltaLog) -> CorruptLogError:
    """The catalog names ``entry`` but its Delta log holds nothing: the lakehouse is damaged (the table's
    directory was deleted outside txlake), which is not the same as a table that does not exist."""
    return CorruptLogError(
        f"table {entry.name!r} is in the catalog but its Delta log {log.store.url(log.log_dir)} is empty or gone "
        "(deleted outside txlake?)",
        table=entry.name,
        path=log.log_dir,
    )


CommitKey = tuple[str, str, int]
"""A Delta commit in the cache: (table id, table path, Delta version). The id keeps the commits of a dropped
table apart from those of a new table at the same path (vacuum removes a dropped table's directory whole, and a
table created later under the same name gets the same path)."""


class SnapshotCache:
    """LRU of table snapshots by (table id, Delta version); newer versions are built incrementally."""

    def __init__(self, store: ObjectStore, capacity: int = 256) -> None:
        self.store = store
        self.capacity = capacity
        self._cache: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
        self._commits: OrderedDict[CommitKey, list[Action]] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, entry: TableEntry) -> DeltaLog:
        return DeltaLog(self.store, entry.path, name=entry.name)

    def get(self, entry: TableEntry, version: int) -> Snapshot:
        key = (entry.id, version)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
            older = [v for (tid, v) in self._cache if tid == entry.id and v < version]
            base = self._cache[(entry.id, max(older))] if older else None
        log = self.log(entry)
        if base is not None and version - base.version <= 200:
            versions = list(range(base.version + 1, version + 1))
            builder = SnapshotBuilder.from_snapshot(base)
            for v, actions in zip(versions, self.commits(entry, versions), strict=True):
                builder.apply(v, actions, None)
            snap = builder.finish()
        else:
            try:
                snap = load_snapshot(log, version)
            except TableNotFoundError as exc:
                raise missing_log_error(entry, log) from exc
            except VersionNotFoundError as exc:
                latest = log.latest_version()
                if latest is None or latest >= version:
                    raise  # cleaned up below a checkpoint: the version is really gone
                raise CorruptLogError(
                    f"the lakehouse maps {entry.name} to Delta version {version}, but its log ends at {latest} "
                    "(a commit deleted outside txlake?)",
                    table=entry.name,
                    version=version,
                ) from exc
        self.put(entry.id, snap)
        return snap

    def commits(self, entry: TableEntry, versions: list[int]) -> list[list[Action]]:
        """The actions of commits of ``entry`` (immutable, so cached)."""
        with self._lock:
            found = {v: self._commits[key] for v in versions if (key := (entry.id, entry.path, v)) in self._commits}
        missing = [v for v in versions if v not in found]
        if missing:
            fetched = self.log(entry).read_commits(missing)
            found.update(zip(missing, fetched, strict=True))
            with self._lock:
                for v, actions in zip(missing, fetched, strict=True):
                    self._commits[(entry.id, entry.path, v)] = actions
                while len(self._commits) > 4 * self.capacity:
                    self._commits.popitem(last=False)
        return [found[v] for v in versions]

    def remember(self, commits: Mapping[CommitKey, list[Action]]) -> None:
        """Cache Delta commits whose content is known without reading them ((table id, path, version) -> actions)."""
        with self._lock:
            self._commits.update(commits)
            while len(self._commits) > 4 * self.capacity:
                self._commits.popitem(last=False)

    def put(self, table_id: str, snap: Snapshot) -> None:
        with self._lock:
            self._cache[(table_id, snap.version)] = snap
            self._cache.move_to_end((table_id, snap.version))
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
