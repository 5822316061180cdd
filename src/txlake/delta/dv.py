"""Deletion vectors (Delta PROTOCOL.md, "Deletion Vectors"): descriptors, Z85, and the row indexes they delete.

A deletion vector (DV) marks rows of one data file as deleted without rewriting it. An ``add``/``remove``
action names its DV with a descriptor; the logical file is ``(path, DV unique id)``. The DV itself is a
"RoaringBitmapArray" (a magic number, then a 64-bit Roaring bitmap of row indexes), stored

- ``i``: inline in the descriptor, Z85-encoded;
- ``u``: in a file below the table root whose name derives from a UUID (Z85-encoded, after an optional
  directory prefix), at ``offset``;
- ``p``: in a file at an absolute path (a URI, encoded like ``add.path``), at ``offset``.

A DV file is a format version byte (``1``), then per DV: its size (u32, big-endian), the RoaringBitmapArray,
and a CRC-32 of it (u32, big-endian). A descriptor's ``offset`` points at the size.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from txlake.delta.roaring import U64Array, decode_bitmap64, decode_native_bitmap_array, encode_bitmap64

MAGIC = 1681511377
"""First four bytes (little-endian) of a RoaringBitmapArray in the portable format (the one writers use)."""
NATIVE_MAGIC = 1681511376
"""Magic number of Delta's older "native" RoaringBitmapArray format, which Delta's reader still reads."""
FILE_FORMAT_VERSION = 1
STORAGE_TYPES = frozenset({"u", "i", "p"})
UUID_Z85_LENGTH = 20

# ------------------------------------------------------------------------------------------------ Z85

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(Z85_ALPHABET)}


def z85_decode(text: str) -> bytes:
    """Bytes of a Z85 string (ZeroMQ RFC 32): every 5 characters are 4 bytes, big-endian base 85.

    Also reads the padded form of the Rust ``z85`` crate (delta-rs, delta-kernel-rs): a last group starting
    with ``k`` ``#`` (which no 32-bit group can, 84 * 85^4 > 2^32) stands for ``4 - k`` bytes, the value of
    its other characters. Delta's own writers pad with zero bytes instead (``sizeInBytes`` cuts them off).
    """
    if len(text) % 5:
        raise ValueError(f"a Z85 string has a multiple of 5 characters, not {len(text)}")
    out = bytearray()
    for i in range(0, len(text), 5):
        group = text[i : i + 5]
        missing = len(group) - len(group.lstrip("#")) if i + 5 == len(text) else 0
        if missing > 3:
            raise ValueError(f"Z85 group {group!r} is all padding")
        value = 0
        for c in group[missing:]:
            digit = _Z85_VALUE.get(c)
            if digit is None:
                raise ValueError(f"{c!r} is not a Z85 character")
            value = value * 85 + digit
        if value >= 1 << (8 * (4 - missing)):
            raise ValueError(f"Z85 group {group!r} is larger than {4 - missing} bytes")
        out += value.to_bytes(4 - missing, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Z85 text of ``data``, zero-padded to a multiple of 4 bytes (as Delta pads inline DVs)."""
    padded = data + b"\0" * (-len(data) % 4)
    chars: list[str] = []
    for i in range(0, len(padded), 4):
        value = int.from_bytes(padded[i : i + 4], "big")
        group = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            group.append(Z85_ALPHABET[digit])
        chars.extend(reversed(group))
    return "".join(chars)


# ----------------------------------------------------------------------------------------- descriptor


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"deletionVector.{name} is not a non-negative integer: {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """Where a DV is stored and how many rows it deletes (the ``deletionVector`` of an add or remove)."""

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DeletionVectorDescriptor:
        """Parse a descriptor (a JSON object or a checkpoint struct); :class:`ValueError` if malformed."""
        storage = d.get("storageType")
        if storage not in STORAGE_TYPES:
            raise ValueError(f"deletionVector.storageType must be one of u, i, p, not {storage!r}")
        where = d.get("pathOrInlineDv")
        if not isinstance(where, str):
            raise ValueError(f"deletionVector.pathOrInlineDv is not a string: {where!r}")
        if storage == "u" and len(where) < UUID_Z85_LENGTH:
            raise ValueError(f"deletionVector.pathOrInlineDv {where!r} is too short to hold a Z85 UUID")
        offset = d.get("offset")
        return cls(
            storage,
            where,
            _int(d.get("sizeInBytes"), "sizeInBytes"),
            _int(d.get("cardinality"), "cardinality"),
            None if offset is None else _int(offset, "offset"),
        )

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        if self.offset is not None:
            body["offset"] = self.offset
        body["sizeInBytes"] = self.size_in_bytes
        body["cardinality"] = self.cardinality
        return body

    @property
    def unique_id(self) -> str:
        """Identifies the DV of a data file: ``(path, unique_id)`` is the logical file."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        return self.storage_type == "i"

    def relative_path(self) -> str:
        """``[<prefix>/]deletion_vector_<uuid>.bin``, the file of a ``u`` DV relative to the table root."""
        if self.storage_type != "u":
            raise ValueError(f"a {self.storage_type!r} deletion vector has no path relative to the table")
        prefix = self.path_or_inline_dv[:-UUID_Z85_LENGTH]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(self.path_or_inline_dv[-UUID_Z85_LENGTH:]))}.bin"
        return f"{prefix}/{name}" if prefix else name


def unique_id(dv: DeletionVectorDescriptor | None) -> str | None:
    """The DV part of a logical file's key (``None``: the file has no DV)."""
    return None if dv is None else dv.unique_id


# ------------------------------------------------------------------------------------------ the bytes


def inline_bytes(dv: DeletionVectorDescriptor) -> bytes:
    """The RoaringBitmapArray of an inline DV (Z85 pads it to 4 bytes; ``sizeInBytes`` is the real length)."""
    data = z85_decode(dv.path_or_inline_dv)
    if len(data) < dv.size_in_bytes:
        raise ValueError(f"inline deletion vector holds {len(data)} bytes, its sizeInBytes is {dv.size_in_bytes}")
    return data[: dv.size_in_bytes]


def file_range(dv: DeletionVectorDescriptor) -> tuple[int, int]:
    """The bytes ``[start, end)`` of a DV file that hold this DV: its size, data and checksum."""
    start = 1 if dv.offset is None else dv.offset  # one DV right after the version byte
    return start, start + 4 + dv.size_in_bytes + 4


def unframe(dv: DeletionVectorDescriptor, framed: bytes) -> bytes:
    """The RoaringBitmapArray inside a DV file's ``size | data | crc`` frame, checked against ``dv``."""
    if len(framed) != dv.size_in_bytes + 8:
        raise ValueError(f"deletion vector frame has {len(framed)} bytes, expected {dv.size_in_bytes + 8}")
    (size,) = struct.unpack_from(">I", framed, 0)
    if size != dv.size_in_bytes:
        raise ValueError(f"deletion vector size is {size} in the file, {dv.size_in_bytes} in the log")
    data = framed[4 : 4 + size]
    (checksum,) = struct.unpack_from(">I", framed, 4 + size)
    if zlib.crc32(data) != checksum:
        raise ValueError("deletion vector checksum mismatch")
    return data


def decode_roaring_bitmap_array(data: bytes) -> U64Array:
    """Row indexes (sorted ``uint64``) of a RoaringBitmapArray: a magic number (little-endian), then

    - portable format (:data:`MAGIC`, PROTOCOL.md): a 64-bit Roaring bitmap in the portable serialization;
    - native format (:data:`NATIVE_MAGIC`, Delta's ``RoaringBitmapArray``): a u32 count, then per high 32-bit
      key 0, 1, ... the u32 size and the serialization of a 32-bit bitmap of its low 32 bits.
    """
    if len(data) < 4:
        raise ValueError("deletion vector shorter than its magic number")
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic == MAGIC:
        return decode_bitmap64(data, 4)
    if magic == NATIVE_MAGIC:
        return decode_native_bitmap_array(data, 4)
    raise ValueError(f"deletion vector magic number is {magic}, expected {MAGIC} (or {NATIVE_MAGIC})")


def deleted_rows(dv: DeletionVectorDescriptor, data: bytes) -> U64Array:
    """The row indexes ``dv`` deletes, from its RoaringBitmapArray ``data``; checked against its cardinality."""
    rows = decode_roaring_bitmap_array(data)
    if len(rows) != dv.cardinality:
        raise ValueError(f"deletion vector holds {len(rows)} rows, its cardinality is {dv.cardinality}")
    return rows


def keep_mask(num_rows: int, deleted: U64Array) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """``True`` for every row of a file of ``num_rows`` rows that ``deleted`` does not delete."""
    if len(deleted) and int(deleted[-1]) >= num_rows:
        raise ValueError(f"deletion vector deletes row {int(deleted[-1])} of a file of {num_rows} rows")
    mask = np.ones(num_rows, dtype=bool)
    mask[deleted.astype(np.intp)] = False
    return mask


# ------------------------------------------------------------------------------------------ writing


def encode_roaring_bitmap_array(rows: U64Array) -> bytes:
    """A RoaringBitmapArray in the portable format: :data:`MAGIC`, then the 64-bit bitmap of ``rows``."""
    return struct.pack("<I", MAGIC) + encode_bitmap64(np.unique(rows.astype(np.uint64)))


def frame(data: bytes) -> bytes:
    """One DV of a DV file: its size (u32, big-endian), the bytes, their CRC-32 (big-endian)."""
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def new_file_descriptor(file_id: uuid.UUID, offset: int, data: bytes, cardinality: int) -> DeletionVectorDescriptor:
    """The descriptor of a DV stored at ``offset`` of ``deletion_vector_<file_id>.bin`` in the table root."""
    return DeletionVectorDescriptor("u", z85_encode(file_id.bytes), len(data), cardinality, offset)
