"""The Delta Lake protocol: actions, log, snapshot replay, checkpoints, data files (no lakehouse concepts)."""

from txlake.delta.actions import (
    Action,
    Add,
    Cdc,
    CommitInfo,
    Format,
    Metadata,
    OtherAction,
    Protocol,
    Remove,
    Txn,
    parse_commit,
    serialize_commit,
)
from txlake.delta.checkpoint import read_checkpoint, write_checkpoint
from txlake.delta.files import compute_stats, read_files, write_data_files
from txlake.delta.log import DeltaLog, LogListing
from txlake.delta.schema import conform, schema_from_json, schema_to_json
from txlake.delta.snapshot import CommitEntry, history, load_snapshot, version_at
from txlake.delta.state import Snapshot
from txlake.delta.table import DeltaTable, commit_info

__all__ = [
    "Action",
    "Add",
    "Cdc",
    "CommitEntry",
    "CommitInfo",
    "DeltaLog",
    "DeltaTable",
    "Format",
    "LogListing",
    "Metadata",
    "OtherAction",
    "Protocol",
    "Remove",
    "Snapshot",
    "Txn",
    "commit_info",
    "compute_stats",
    "conform",
    "history",
    "load_snapshot",
    "parse_commit",
    "read_checkpoint",
    "read_files",
    "schema_from_json",
    "schema_to_json",
    "serialize_commit",
    "version_at",
    "write_checkpoint",
    "write_data_files",
]
