"""Why a local directory cannot be created or opened, in plain words (for ``file://`` stores and the CLI).

The local file system reports a bare ``OSError`` ("File name too long (os error 36)"); users are told what is
wrong with their path instead: a file where a directory must be, a name longer than the file system allows, a
read-only or virtual file system, a directory they may not write.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from txlake.errors import InvalidObjectPathError, StorageError
from txlake.storage.messages import first_line

_VIRTUAL_FILE_SYSTEMS = frozenset(
    {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs"}
)
_IN_THE_WAY = frozenset({errno.ENOTDIR, errno.ENAMETOOLONG, errno.EEXIST, errno.ELOOP})
"""Errors about the path itself (retrying or other permissions cannot help): :class:`InvalidObjectPathError`."""
NAME_MAX = 255
"""Longest file name (one path component, in bytes) of common Linux file systems, when it cannot be asked."""


def _mount_type(path: Path) -> str | None:
    """The file system type of the mount holding ``path`` (Linux ``/proc/mounts``), if it can be told."""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            entries = [line.split()[1:3] for line in mounts if len(line.split()) >= 3]
    except OSError:
        return None
    best: tuple[int, str] | None = None
    text = str(path)
    for mount, fstype in entries:
        inside = text == mount or text.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) > best[0]):
            best = (len(mount), fstype)
    return best[1] if best else None


def os_errno(exc: BaseException) -> int | None:
    """The ``errno`` of ``exc``; obstore's errors carry it only in their text (``... (os error 36)``)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    found = re.search(r"os error (\d+)", str(exc))
    return int(found.group(1)) if found else None


def _reason(exc: BaseException | None) -> str:
    """What went wrong, in one line: the ``errno``'s text (not Python's ``[Errno N] ...: 'path'``), else the
    first line of the message."""
    if exc is None:
        return "unknown reason"
    code = os_errno(exc)
    return os.strerror(code) if code is not None else first_line(exc)


def _too_long(path: Path, ancestor: Path) -> str:
    """Which component of ``path`` is too long (or that the whole path is)."""
    try:
        name_max = int(os.pathconf(ancestor, "PC_NAME_MAX"))
    except (OSError, ValueError):
        name_max = NAME_MAX
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            shown = part if len(part) <= 40 else part[:20] + "…" + part[-10:]
            return f"the name {shown!r} is {size} bytes long; the file system allows at most {name_max}"
    return f"the path is {len(os.fsencode(str(path)))} bytes long, more than the file system allows"


def _existing_ancestor(path: Path) -> Path:
    ancestor = path
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    return ancestor


def local_path_problem(path: Path, exc: BaseException | None = None, *, creating: bool = True) -> tuple[str, bool]:
    """Why a directory cannot be created (or opened) at ``path``, in plain words, and whether the path itself
    is at fault (a file in the way, a name too long: retrying or other permissions cannot help).

    Looks at the nearest existing ancestor without writing anything: a file where a directory must be, a
    directory this user may not write, a read-only or virtual file system.
    """
    code = os_errno(exc) if exc is not None else None
    ancestor = _existing_ancestor(path)
    if code == errno.ENAMETOOLONG:
        return _too_long(path, ancestor), True
    if ancestor.exists() and not ancestor.is_dir():
        return f"{'the path' if ancestor == path else ancestor} is a file, not a directory", True
    if not ancestor.exists():
        return f"{ancestor} is a broken symbolic link", True
    if creating:
        try:
            read_only = bool(os.statvfs(ancestor).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        if read_only:
            return f"{ancestor} is on a read-only file system", False
        fstype = _mount_type(ancestor)
        if fstype in _VIRTUAL_FILE_SYSTEMS:
            return f"{ancestor} is on a virtual file system ({fstype}) where directories cannot be created", False
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return f"no permission to create directories in {ancestor}", False
        return f"creating a directory in {ancestor} failed: {_reason(exc)}", code in _IN_THE_WAY
    return _reason(exc), code in _IN_THE_WAY


def local_directory_error(path: Path | str, exc: OSError | None = None, *, creating: bool = True) -> StorageError:
    """The storage error for a local directory that cannot be created (or opened): one line naming the path
    and the reason; :class:`InvalidObjectPathError` when the path itself is at fault, else :class:`StorageError`.
    """
    where = Path(path)
    problem, in_the_way = local_path_problem(where, exc, creating=creating)
    cls = InvalidObjectPathError if in_the_way else StorageError
    verb = "create" if creating else "open"
    kind = "PUT" if creating else "HEAD"
    return cls(f"cannot {verb} the local directory {where}: {problem}", path=str(where), kind=kind)
