"""The live-file map of a snapshot: a column-wise base from a checkpoint plus the changes replayed after it.

A checkpoint can hold millions of add actions; building a frozen :class:`Add` for each one up front costs
more than reading the checkpoint. ``FileMap`` keeps the checkpoint's adds as columns and builds each
``Add`` on first access (memoized), like delta-rs keeps them as Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from txlake.delta.actions import Add
from txlake.delta.dv import DeletionVectorDescriptor


@dataclass(eq=False)
class ColumnarAdds:
    """Add actions stored column-wise (immutable after construction; ``built`` is a memo)."""

    path: Sequence[str]
    partition_values: Sequence[Any]
    size: Sequence[int | None]
    modification_time: Sequence[int | None]
    data_change: Sequence[bool | None]
    stats: Sequence[str | None]
    tags: Sequence[Any]
    deletion_vector: Sequence[DeletionVectorDescriptor | None] | None = None
    """Parsed descriptors (``None``: no file has a deletion vector)."""
    index: dict[str, int] = field(init=False)
    built: list[Add | None] = field(init=False)

    def __post_init__(self) -> None:
        self.index = dict(zip(self.path, range(len(self.path)), strict=True))
        self.built = [None] * len(self.path)

    def get(self, i: int) -> Add:
        add = self.built[i]
        if add is None:
            pv, tags, change = self.partition_values[i], self.tags[i], self.data_change[i]
            add = Add(
                self.path[i],
                dict(pv) if pv else {},
                self.size[i] or 0,
                self.modification_time[i] or 0,
                True if change is None else change,
                self.stats[i],
                dict(tags) if tags else None,
                self.deletion_vector[i] if self.deletion_vector is not None else None,
            )
            self.built[i] = add
        return add


class FileMap(MutableMapping[str, Add]):
    """path -> Add: a shared columnar base minus removed paths plus added/replaced files."""

    __slots__ = ("_base", "_changed", "_removed")

    def __init__(self, base: ColumnarAdds | None = None) -> None:
        self._base = base
        self._changed: dict[str, Add] = {}
        self._removed: set[str] = set()

    @classmethod
    def of(cls, files: Mapping[str, Add]) -> FileMap:
        out = cls()
        out._changed = dict(files)
        return out

    def copy(self) -> FileMap:
        """A copy sharing the immutable base (cheap: proportional to the changes only)."""
        other = FileMap(self._base)
        other._changed = dict(self._changed)
        other._removed = set(self._removed)
        return other

    def _base_index(self, path: str) -> int | None:
        if self._base is None or path in self._removed:
            return None
        return self._base.index.get(path)

    def __getitem__(self, path: str) -> Add:
        add = self._changed.get(path)
        if add is not None:
            return add
        i = self._base_index(path)
        if i is None:
            raise KeyError(path)
        assert self._base is not None
        return self._base.get(i)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        return path in self._changed or self._base_index(path) is not None

    def __setitem__(self, path: str, add: Add) -> None:
        self._changed[path] = add

    def __delitem__(self, path: str) -> None:
        found = self._changed.pop(path, None) is not None
        if self._base is not None and path in self._base.index and path not in self._removed:
            self._removed.add(path)
            found = True
        if not found:
            raise KeyError(path)

    def __iter__(self) -> Iterator[str]:
        if self._base is not None:
            for path in self._base.path:
                if path not in self._removed and path not in self._changed:
                    yield path
        yield from self._changed

    def __len__(self) -> int:
        base = 0
        if self._base is not None:
            shadowed = sum(1 for p in self._changed if p in self._base.index and p not in self._removed)
            base = len(self._base.path) - len(self._removed) - shadowed
        return base + len(self._changed)

    def __repr__(self) -> str:
        return f"FileMap({len(self)} files)"
