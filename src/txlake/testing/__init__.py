"""Real services for tests, benchmarks and demos (a SeaweedFS S3 server); nothing here runs in production paths."""

from txlake.testing.seaweedfs import SeaweedFS, SeaweedFSError, weed_binary

__all__ = ["SeaweedFS", "SeaweedFSError", "weed_binary"]
