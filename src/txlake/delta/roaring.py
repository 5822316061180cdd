"""Decoding of Roaring bitmaps in their portable serialization: 32-bit bitmaps and the 64-bit extension.

Delta stores the row indexes a deletion vector deletes as a 64-bit Roaring bitmap ("RoaringBitmapArray",
PROTOCOL.md, Deletion Vector Format). The formats are those of the RoaringFormatSpec:

- 32-bit: a cookie (``12346``: no run containers, a container count follows; ``12347`` in the low 16 bits:
  the count minus one in the high 16 bits, then a bitset of which containers are runs), one (key, cardinality
  - 1) pair of u16 per container, a u32 offset per container (always without runs, with runs only from 4
  containers on), then the containers: an *array* (cardinality <= 4096 sorted u16), a *bitmap* (8 KiB, 2^16
  bits) or *runs* (a u16 count, then (start, length - 1) u16 pairs).
- 64-bit: a u64 bucket count, then per bucket its high 32 bits (u32) and a 32-bit bitmap of its low 32 bits.
- Delta's "native" array (an older RoaringBitmapArray format): a u32 count, then per high 32-bit key 0, 1, ...
  a u32 size and a 32-bit bitmap.

All integers are little-endian. Values come back as a sorted ``uint64`` NumPy array.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4
ARRAY_MAX_CARDINALITY = 4096
BITMAP_BYTES = 8192

U64Array = npt.NDArray[np.uint64]


class RoaringFormatError(ValueError):
    """The bytes are not a Roaring bitmap in the portable serialization (truncated, bad cookie, ...)."""


class _Reader:
    """A cursor over ``data`` that refuses to read past its end."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> int:
        """Advance by ``n`` bytes; returns where they start."""
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise RoaringFormatError(f"truncated Roaring bitmap: {n} bytes needed at {start}, {len(self.data)} in all")
        self.pos = start + n
        return start

    def u16s(self, n: int) -> npt.NDArray[np.uint16]:
        return np.frombuffer(self.data, dtype="<u2", count=n, offset=self.take(2 * n))

    def u32(self) -> int:
        value: int = struct.unpack_from("<I", self.data, self.take(4))[0]
        return value

    def u64(self) -> int:
        value: int = struct.unpack_from("<Q", self.data, self.take(8))[0]
        return value


def _runs(reader: _Reader) -> npt.NDArray[np.uint32]:
    count = int(reader.u16s(1)[0])
    pairs = reader.u16s(2 * count).astype(np.uint32).reshape(count, 2)
    starts, lengths = pairs[:, 0], pairs[:, 1] + 1
    if np.any(starts + lengths > 1 << 16):
        raise RoaringFormatError("a run container's run passes the end of its 16-bit block")
    if count == 0:
        return np.empty(0, dtype=np.uint32)
    # start_i + (0 .. length_i - 1) for every run, without a Python loop over the runs
    ends = np.cumsum(lengths)
    offsets = np.arange(int(ends[-1]), dtype=np.uint32) - np.repeat(ends - lengths, lengths).astype(np.uint32)
    return np.repeat(starts, lengths) + offsets


def _bitmap(reader: _Reader) -> npt.NDArray[np.uint32]:
    words = np.frombuffer(reader.data, dtype=np.uint8, count=BITMAP_BYTES, offset=reader.take(BITMAP_BYTES))
    return np.flatnonzero(np.unpackbits(words, bitorder="little")).astype(np.uint32)


def read_bitmap32(reader: _Reader) -> npt.NDArray[np.uint32]:
    """One 32-bit bitmap from ``reader``'s position on (which ends up just past it)."""
    cookie = reader.u32()
    if cookie & 0xFFFF == SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        flags = np.frombuffer(reader.data, dtype=np.uint8, count=(size + 7) // 8, offset=reader.take((size + 7) // 8))
        is_run = np.unpackbits(flags, bitorder="little")[:size].astype(bool)
    elif cookie == SERIAL_COOKIE_NO_RUNCONTAINER:
        size = reader.u32()
        is_run = np.zeros(size, dtype=bool)
    else:
        raise RoaringFormatError(f"not a portable Roaring bitmap (cookie {cookie})")
    header = reader.u16s(2 * size).astype(np.uint32).reshape(size, 2)
    keys, cardinalities = header[:, 0], header[:, 1] + 1
    if size > 1 and np.any(np.diff(keys.astype(np.int64)) <= 0):
        raise RoaringFormatError("container keys of a Roaring bitmap are not ascending")
    if cookie == SERIAL_COOKIE_NO_RUNCONTAINER or size >= NO_OFFSET_THRESHOLD:
        reader.take(4 * size)  # container offsets: the containers are read in order anyway
    parts = []
    for i in range(size):
        if is_run[i]:
            low = _runs(reader)
        elif cardinalities[i] <= ARRAY_MAX_CARDINALITY:
            low = reader.u16s(int(cardinalities[i])).astype(np.uint32)
        else:
            low = _bitmap(reader)
        if len(low) != cardinalities[i]:
            raise RoaringFormatError(f"container {i} holds {len(low)} values, its header says {cardinalities[i]}")
        parts.append((keys[i] << np.uint32(16)) | low)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint32)


def decode_bitmap32(data: bytes) -> npt.NDArray[np.uint32]:
    """The values of a serialized 32-bit Roaring bitmap (which must fill ``data`` exactly)."""
    reader = _Reader(data)
    values = read_bitmap32(reader)
    _at_end(reader)
    return values


def decode_bitmap64(data: bytes, offset: int = 0) -> U64Array:
    """The values of a serialized 64-bit Roaring bitmap starting at ``offset`` (which must end with ``data``)."""
    reader = _Reader(data, offset)
    buckets = reader.u64()
    parts: list[U64Array] = []
    previous = -1
    for _ in range(buckets):
        key = reader.u32()
        if key <= previous:
            raise RoaringFormatError("bucket keys of a 64-bit Roaring bitmap are not ascending")
        previous = key
        parts.append((np.uint64(key) << np.uint64(32)) | read_bitmap32(reader).astype(np.uint64))
    _at_end(reader)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def decode_native_bitmap_array(data: bytes, offset: int = 0) -> U64Array:
    """The values of Delta's "native" bitmap array from ``offset`` on: a u32 count of 32-bit bitmaps, then for
    each (its index is the high 32 bits of its values) its u32 size and its serialization."""
    reader = _Reader(data, offset)
    count = reader.u32()
    parts: list[U64Array] = []
    for key in range(count):
        size = reader.u32()
        end = reader.pos + size
        low = read_bitmap32(reader)
        if reader.pos != end:
            raise RoaringFormatError(
                f"bitmap {key} of a native bitmap array takes {reader.pos - end + size} bytes, not {size}"
            )
        parts.append((np.uint64(key) << np.uint64(32)) | low.astype(np.uint64))
    _at_end(reader)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _at_end(reader: _Reader) -> None:
    if reader.pos != len(reader.data):
        raise RoaringFormatError(f"{len(reader.data) - reader.pos} bytes after the end of the Roaring bitmap")


# ----------------------------------------------------------------------------------------------- encoding


def encode_bitmap32(values: npt.NDArray[np.uint32]) -> bytes:
    """The portable serialization of a 32-bit bitmap of ``values`` (sorted, distinct): array containers up to
    4096 values, bitmap containers above, no run containers (cookie ``12346``, container offsets included)."""
    keys = (values >> np.uint32(16)).astype(np.uint16)
    lows = (values & np.uint32(0xFFFF)).astype("<u2")
    unique, starts, counts = np.unique(keys, return_index=True, return_counts=True)
    size = len(unique)
    header = np.empty((size, 2), dtype="<u2")
    header[:, 0] = unique
    header[:, 1] = counts - 1
    containers: list[bytes] = []
    for start, count in zip(starts.tolist(), counts.tolist(), strict=True):
        low = lows[start : start + count]
        if count <= ARRAY_MAX_CARDINALITY:
            containers.append(low.tobytes())
        else:
            bits = np.zeros(1 << 16, dtype=bool)
            bits[low] = True
            containers.append(np.packbits(bits, bitorder="little").tobytes())
    position = 8 + 4 * size + 4 * size
    offsets = np.empty(size, dtype="<u4")
    for i, container in enumerate(containers):
        offsets[i] = position
        position += len(container)
    return b"".join(
        [struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, size), header.tobytes(), offsets.tobytes(), *containers]
    )


def encode_bitmap64(values: U64Array) -> bytes:
    """The portable serialization of a 64-bit bitmap of ``values`` (sorted, distinct): a u64 bucket count, then
    per high 32-bit key its u32 key and the 32-bit bitmap of the low halves."""
    highs = (values >> np.uint64(32)).astype(np.uint32)
    unique, starts, counts = np.unique(highs, return_index=True, return_counts=True)
    parts = [struct.pack("<Q", len(unique))]
    for key, start, count in zip(unique.tolist(), starts.tolist(), counts.tolist(), strict=True):
        low = (values[start : start + count] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parts.append(struct.pack("<I", key) + encode_bitmap32(low))
    return b"".join(parts)
