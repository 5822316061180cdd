"""Scan and write specs as data source option strings (Spark options are strings; specs can be large).

A spec travels driver -> JVM -> the Python worker that plans the read or write, so it is encoded as compact JSON,
zlib-compressed and base64-encoded. Decoding happens inside Spark's Python workers.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from txlake.delta.actions import Add
from txlake.txn.engine import ScanSpec, TableLocation, WriteSpec


def _location_json(loc: TableLocation) -> dict[str, Any]:
    return {
        "storeUri": loc.store_uri,
        "storageOptions": {k: str(v) for k, v in loc.storage_options.items()},
        "tablePath": loc.table_path,
        "tableName": loc.table_name,
        "schemaString": loc.schema_json,
        "partitionColumns": list(loc.partition_columns),
    }


def _location(doc: dict[str, Any]) -> TableLocation:
    return TableLocation(
        store_uri=doc["storeUri"],
        storage_options=dict(doc["storageOptions"]),
        table_path=doc["tablePath"],
        table_name=doc["tableName"],
        schema_json=doc["schemaString"],
        partition_columns=tuple(doc["partitionColumns"]),
    )


def _pack(doc: dict[str, Any]) -> str:
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def _unpack(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(zlib.decompress(base64.b64decode(text.encode("ascii"))))
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"not a txlake spec option: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("not a txlake spec option")
    return doc


def encode_scan(scan: ScanSpec) -> str:
    return _pack({"table": _location_json(scan.table), "files": [a.to_json()["add"] for a in scan.files]})


def decode_scan(text: str) -> ScanSpec:
    doc = _unpack(text)
    return ScanSpec(_location(doc["table"]), tuple(Add.from_json(f) for f in doc["files"]))


def encode_write(spec: WriteSpec) -> str:
    return _pack({"table": _location_json(spec.table), "txid": spec.txid, "where": spec.where})


def decode_write(text: str) -> WriteSpec:
    doc = _unpack(text)
    return WriteSpec(_location(doc["table"]), doc["txid"], doc.get("where"))
