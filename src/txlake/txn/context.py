"""What a transaction needs from its lakehouse: storage, the global log, snapshot cache, settings."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from txlake.delta.checkpoint import write_checkpoint
from txlake.delta.log import DeltaLog
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import LakehouseState, TableEntry
from txlake.lakehouse.tables import SnapshotCache
from txlake.storage import ObjectStore
from txlake.txn.engine import DataEngine, NoDataEngineError
from txlake.txn.publish import publish

DELTA_CHECKPOINT_INTERVAL = 100
"""Default ``delta.checkpointInterval`` (delta-rs's default; Spark's is 10). A checkpoint rewrites every
live file of the table, so a small interval makes frequent small commits pay for it (measured: 10 costs
about 3x the commit time of a table without checkpoints). Tables may set the property themselves."""


@dataclass
class LakeContext:
    """Shared, thread-safe services of one connected lakehouse."""

    store: ObjectStore
    glog: GlobalLog
    snapshots: SnapshotCache
    lease_seconds: float = 30.0
    commit_timeout: float = 120.0
    checkpoint_interval: int = 100
    helped: list[int] = field(default_factory=list)
    engine: DataEngine | None = None
    """Optional data engine for DataFrame reads/writes (``txlake.spark.SparkEngine``); the Arrow path needs none."""

    def require_engine(self) -> DataEngine:
        if self.engine is None:
            raise NoDataEngineError("this needs a Spark session: connect with txlake.connect(uri, spark=spark)")
        return self.engine

    def latest_state(self) -> LakehouseState:
        """The newest decided lakehouse state (what a new transaction or snapshot reads)."""
        return self.glog.tail().state

    def settle(self, version: int) -> None:
        """Wait for the outcome of a claimed version; after its lease, finish it ourselves (roll-forward)."""
        record = self.glog.read_record(version)
        delay = 0.001
        while self.glog.read_outcome(version) is None:
            if time.time() * 1000 >= record.lease_until_ms:
                publish(self.store, self.glog, record)
                self.helped.append(version)
                return
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 0.01)

    def settled_state(self) -> LakehouseState:
        """The latest state with every claimed version decided (waiting for or helping undecided ones)."""
        while True:
            tail = self.glog.tail()
            if not tail.undecided:
                return tail.state
            for v in tail.undecided:
                self.settle(v)

    def probe_delta_latest(self, entry: TableEntry, mapped: int) -> int:
        """The table's newest Delta version, normally ``mapped`` (one HEAD); plain writers may be ahead."""
        log = DeltaLog(self.store, entry.path, name=entry.name)
        if not self.store.exists(log.commit_path(mapped + 1)):
            return mapped
        latest = log.list(from_version=mapped + 1).latest_commit
        return latest if latest is not None else mapped

    def table_path(self, namespace: str, short: str, table_id: str, *, taken: list[str]) -> str:
        """``<namespace>/<table>`` unless that location is used (a dropped table's files), then suffixed."""
        path = "/".join(namespace.split(".")) + "/" + short
        if path in taken or DeltaLog(self.store, path).exists():
            path = f"{path}-{table_id[:8]}"
        return path

    def after_commit(self, version: int) -> None:
        """Maintenance after a committed version: global checkpoint, Delta checkpoints of its tables."""
        state = self.glog.state_at(version)
        if self.checkpoint_interval and version % self.checkpoint_interval == 0:
            self.glog.write_checkpoint(state)
        outcome = self.glog.read_outcome(version)
        record = self.glog.read_record(version)
        if outcome is None:
            return
        for change in record.tables:
            delta_version = outcome.table_versions.get(change.table_id)
            entry = state.tables.get(change.table_id)
            if not change.writes or entry is None or not delta_version:
                continue
            interval = int(entry.properties.get("delta.checkpointInterval", DELTA_CHECKPOINT_INTERVAL))
            if interval > 0 and delta_version % interval == 0:
                snapshot = self.snapshots.get(entry, delta_version)
                write_checkpoint(DeltaLog(self.store, entry.path, name=entry.name), snapshot)
