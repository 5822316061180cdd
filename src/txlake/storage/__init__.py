"""Object storage: one small interface over obstore (file://, s3://, memory://) with counters and faults."""

from txlake.storage.counters import RequestCounters, RequestCounts, RequestKind
from txlake.storage.faults import FaultInjector, FaultRule
from txlake.storage.store import ObjectMeta, ObjectStore, RetryPolicy

__all__ = [
    "FaultInjector",
    "FaultRule",
    "ObjectMeta",
    "ObjectStore",
    "RequestCounters",
    "RequestCounts",
    "RequestKind",
    "RetryPolicy",
]
