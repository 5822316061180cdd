"""Which Delta protocol features txlake can read and write; everything else is refused by name."""

from __future__ import annotations

from collections.abc import Mapping

from txlake.delta.actions import Metadata, Protocol
from txlake.delta.colmap import mapping_mode
from txlake.delta.schema import schema_document
from txlake.errors import UnsupportedFeatureError

# variantType (and Spark 4.0's variantType-preview): variant columns are read as delta-rs reads them, an Arrow
# struct<metadata, value> of the encoded bytes (txlake.variant). Writing to a table with variant columns is refused:
# a value would need its encoding checked first. delta-rs declares variantType on tables it upgrades to (3, 7) even
# without variant columns; those are plain to write. variantShredding(-preview): a table whose writers may shred
# variants; each data file is checked as it is read (delta/files.py), unshredded ones read, shredded ones refused.
# deletionVectors: rows a DV deletes are dropped on read; writes rewrite a file with a DV without those rows and
# remove it by (path, DV) (docs/protocol.md, "Deletion vectors"). v2Checkpoint: V2 checkpoints (UUID-named, sidecars)
# are read; txlake's own checkpoints of such tables are classic-named V2-spec ones (delta/checkpoint.py).
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantShredding",
        "variantShredding-preview",
        "variantType",
        "variantType-preview",
    }
)
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "columnMapping",
        "deletionVectors",
        "invariants",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
    }
)
MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7


def _column_mapping(configuration: Mapping[str, str]) -> bool:
    """Whether the table maps columns (``ValueError`` for a mode txlake does not know)."""
    return mapping_mode(configuration) != "none"


def check_read_support(protocol: Protocol, metadata: Metadata, *, table: str | None = None) -> None:
    """Raise :class:`UnsupportedFeatureError` naming the first feature a read would get wrong."""
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"{table} needs reader version {protocol.min_reader_version}",
            table=table,
            feature=f"readerVersion{protocol.min_reader_version}",
        )
    if protocol.min_reader_version >= 3:
        for feature in protocol.reader_features or ():
            if feature not in SUPPORTED_READER_FEATURES:
                raise UnsupportedFeatureError(f"{table} uses reader feature {feature}", table=table, feature=feature)
    try:
        _column_mapping(metadata.configuration)
    except ValueError as exc:
        raise UnsupportedFeatureError(f"{table}: {exc}", table=table, feature="columnMapping") from exc


def _schema_has_key(schema_string: str, key_prefix: str) -> bool:
    def walk(node: object) -> bool:
        if isinstance(node, dict):
            meta = node.get("metadata")
            if isinstance(meta, dict) and any(k.startswith(key_prefix) for k in meta):
                return True
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    return walk(schema_document(schema_string))


_TYPE_KEYS = frozenset({"type", "elementType", "keyType", "valueType", "fields"})


def _schema_uses_type(schema_string: str, type_name: str) -> bool:
    def walk(node: object) -> bool:
        if isinstance(node, str):
            return node == type_name
        if isinstance(node, dict):
            return any(walk(v) for k, v in node.items() if k in _TYPE_KEYS)
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    return walk(schema_document(schema_string))


def protocol_for_new_table(schema_string: str, configuration: Mapping[str, str] | None = None) -> Protocol:
    """The least protocol a new table with this schema needs: (1, 2), (2, 5) with column mapping (as Spark
    creates it), or (3, 7) with the features (``timestampNtz``, ``columnMapping``).

    Raises:
        UnsupportedFeatureError: the schema has a variant column (``feature`` ``variantType``).
    """
    if _schema_uses_type(schema_string, "variant"):
        raise UnsupportedFeatureError("txlake does not write variant columns", feature="variantType")
    features = ["timestampNtz"] if _schema_uses_type(schema_string, "timestamp_ntz") else []
    mapped = _column_mapping(configuration or {})
    if mapped and not features:
        return Protocol(2, 5)
    if mapped:
        features.insert(0, "columnMapping")
    if features:
        return Protocol(3, 7, tuple(features), tuple(features))
    return Protocol(1, 2)


def with_deletion_vectors(protocol: Protocol, configuration: Mapping[str, str]) -> Protocol:
    """A new table's ``protocol`` with the ``deletionVectors`` feature when its properties turn DVs on
    (``delta.enableDeletionVectors=true``): reader version 3, writer version 7, the features (1, 2) implies kept."""
    if configuration.get("delta.enableDeletionVectors", "").lower() != "true":
        return protocol
    readers = tuple(protocol.reader_features or ())
    writers = tuple(protocol.writer_features or ("appendOnly", "invariants"))
    if protocol.min_reader_version == 2:  # (2, 5): column mapping, a feature of its own at (3, 7)
        readers, writers = ("columnMapping",), (*writers, "columnMapping")
    return Protocol(3, 7, (*readers, "deletionVectors"), (*writers, "deletionVectors"))


def check_write_support(protocol: Protocol, metadata: Metadata, *, table: str | None = None) -> None:
    """Raise :class:`UnsupportedFeatureError` if committing to this table could break its protocol."""
    check_read_support(protocol, metadata, table=table)
    v = protocol.min_writer_version
    if v > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(f"{table} needs writer version {v}", table=table, feature=f"writerVersion{v}")
    if v == 7:
        for feature in protocol.writer_features or ():
            if feature not in SUPPORTED_WRITER_FEATURES:
                raise UnsupportedFeatureError(f"{table} uses writer feature {feature}", table=table, feature=feature)
    if _schema_uses_type(metadata.schema_string, "variant"):
        raise UnsupportedFeatureError(
            f"{table} has variant columns, which txlake reads but does not write", table=table, feature="variantType"
        )
    config = metadata.configuration
    if v >= 2 and _schema_has_key(metadata.schema_string, "delta.invariants"):
        raise UnsupportedFeatureError(f"{table} has column invariants", table=table, feature="invariants")
    if v >= 3 and any(k.startswith("delta.constraints.") for k in config):
        raise UnsupportedFeatureError(f"{table} has CHECK constraints", table=table, feature="checkConstraints")
    if v >= 4 and config.get("delta.enableChangeDataFeed", "false").lower() == "true":
        raise UnsupportedFeatureError(f"{table} has change data feed on", table=table, feature="changeDataFeed")
    if v >= 4 and _schema_has_key(metadata.schema_string, "delta.generationExpression"):
        raise UnsupportedFeatureError(f"{table} has generated columns", table=table, feature="generatedColumns")
    if v >= 6 and _schema_has_key(metadata.schema_string, "delta.identity"):
        raise UnsupportedFeatureError(f"{table} has identity columns", table=table, feature="identityColumns")


def is_append_only(metadata: Metadata) -> bool:
    return metadata.configuration.get("delta.appendOnly", "false").lower() == "true"
