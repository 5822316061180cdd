"""Tags: names for lakehouse versions (TreeCat's named snapshots), one object each under ``_txlake/tags/``.

A tag is written once with put-if-absent and never changes (``drop`` then ``tag`` again to move it): readers
that resolved a tag to a version keep reading the same state. Names are compared without regard to case, as
table names are; the object key is the lower-cased name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from txlake.errors import (
    CorruptLogError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
)
from txlake.lakehouse.log import ROOT
from txlake.storage import ObjectStore

TAGS_DIR = f"{ROOT}/tags"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True, slots=True)
class Tag:
    """A name for lakehouse version ``version``, created at ``created_ms`` (ms since the epoch)."""

    name: str
    version: int
    created_ms: int
    description: str = ""

    def to_bytes(self) -> bytes:
        doc = {"name": self.name, "version": self.version, "created": self.created_ms, "description": self.description}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> Tag:
        try:
            doc = json.loads(data)
            tag = cls(str(doc["name"]), int(doc["version"]), int(doc["created"]), str(doc.get("description", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"the tag object {path} is not a valid tag: {exc}", path=path) from exc
        if tag.version < 0:
            raise CorruptLogError(f"the tag object {path} names version {tag.version}", path=path)
        return tag


def tag_name_argument(name: object) -> str:
    """A tag name: 1-128 letters, digits, ``_``, ``.`` or ``-``, starting with a letter or digit."""
    if not isinstance(name, str):
        raise InvalidArgumentTypeError(
            f"a tag name must be a string such as 'v1.0', got {type(name).__name__} {name!r}", argument="name"
        )
    if not _NAME.match(name):
        raise InvalidArgumentError(
            f"invalid tag name {name!r}: 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit",
            argument="name",
        )
    return name


class TagStore:
    """Create, read, list and drop tags (one object per tag)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    @staticmethod
    def path(name: str) -> str:
        return f"{TAGS_DIR}/{name.lower()}.json"

    def create(self, tag: Tag) -> Tag:
        """Write ``tag``; :class:`TagAlreadyExistsError` if the name is taken (whichever version it names)."""
        try:
            self.store.put_if_absent(self.path(tag.name), tag.to_bytes())
        except ObjectAlreadyExistsError as exc:
            existing = self.get(tag.name)
            raise TagAlreadyExistsError(
                f"tag {existing.name!r} exists already (version {existing.version})",
                tag=existing.name,
                version=existing.version,
            ) from exc
        return tag

    def get(self, name: str) -> Tag:
        path = self.path(tag_name_argument(name))
        try:
            data = self.store.get(path)
        except ObjectNotFoundError as exc:
            known = ", ".join(t.name for t in self.list()) or "none"
            raise TagNotFoundError(f"no tag {name!r} (tags: {known})", tag=name) from exc
        return Tag.from_bytes(data, path=path)

    def list(self) -> list[Tag]:
        """Every tag, oldest version first (then by name)."""
        tags = []
        for meta in self.store.list(TAGS_DIR):
            if not meta.path.endswith(".json"):
                continue
            try:
                tags.append(Tag.from_bytes(self.store.get(meta.path), path=meta.path))
            except ObjectNotFoundError:  # dropped since the LIST
                continue
        return sorted(tags, key=lambda t: (t.version, t.name.lower()))

    def drop(self, name: str) -> Tag:
        """Delete the tag (the version it named and its data stay); :class:`TagNotFoundError` if absent."""
        tag = self.get(name)
        self.store.delete(self.path(tag.name))
        return tag
