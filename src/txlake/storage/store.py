"""A small object-store interface over obstore with request counters, retries and fault injection.

Paths are relative to the store's root (the URI given to :meth:`ObjectStore.from_uri`) and use ``/``.
The only coordination primitive the rest of txlake relies on is :meth:`ObjectStore.put_if_absent`
(S3 ``If-None-Match: *``, an atomic hard link on local disk).
"""

from __future__ import annotations

import builtins
import errno
import logging
import os
import random
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    InvalidPathError,
    NotFoundError,
    NotSupportedError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import LocalStore, MemoryStore, S3Store

from txlake.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidObjectPathError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
    TransientStorageError,
)
from txlake.storage.counters import RequestCounters, RequestKind
from txlake.storage.faults import FaultInjector
from txlake.storage.local import local_directory_error, local_path_problem, os_errno
from txlake.storage.messages import describe
from txlake.storage.messages import first_line as _first_line

DIRECTORY_RACE_RETRIES = 3
"""Attempts again of a local PUT whose directory was removed while it was being created."""
_log = logging.getLogger(__name__)

T = TypeVar("T")
BULK_DELETE = 1000
"""Keys per bulk DELETE request (S3 DeleteObjects takes at most 1000)."""

_MEMORY_STORES: dict[str, MemoryStore] = {}
_MEMORY_LOCK = threading.Lock()

# Storage option names accepted (case-insensitive), delta-rs/object_store style, mapped to obstore config.
_S3_CONFIG_KEYS = {
    "aws_endpoint_url": "endpoint",
    "aws_endpoint": "endpoint",
    "endpoint_url": "endpoint",
    "endpoint": "endpoint",
    "aws_region": "region",
    "region": "region",
    "aws_access_key_id": "access_key_id",
    "access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "session_token": "session_token",
    "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
    "aws_skip_signature": "skip_signature",
}
_CLIENT_KEYS = {"aws_allow_http": "allow_http", "allow_http": "allow_http"}


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """What a HEAD or LIST returns about one object."""

    path: str
    size: int
    last_modified: datetime
    e_tag: str | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter for transient request failures."""

    max_retries: int = 5
    base_delay: float = 0.05
    max_delay: float = 2.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay, self.base_delay * (2**attempt)))


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _boolean(value: object, source: str) -> bool:
    """A boolean option: ``True``/``False`` or a string saying so (``true``, ``false``, ``1``, ``0``, ``yes``,
    ``no``, ``on``, ``off``, any case); anything else is refused rather than read as false."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in _TRUE | _FALSE:
        raise InvalidArgumentError(f"{source} must be true or false, got {value!r}", argument="storage_options")
    return word in _TRUE


_BOOLEAN_S3_KEYS = frozenset({"virtual_hosted_style_request", "skip_signature"})
_ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
"""Environment variables obstore reads the S3 endpoint from when no ``endpoint`` option is given."""


def _option_type_error(key: str, value: object, wanted: str) -> InvalidArgumentTypeError:
    return InvalidArgumentTypeError(
        f"storage option {key!r} must be {wanted}, got {type(value).__name__} {value!r}", argument="storage_options"
    )


def _number_option(key: str, value: object, convert: Callable[[str], float]) -> float:
    """``max_retries`` / ``retry_base_delay``: a number, or a string holding one (as on the command line)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _option_type_error(key, value, "a number")
    try:
        number = convert(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(
            f"storage option {key!r} must be a number, got {value!r}", argument="storage_options"
        ) from None
    if number < 0:
        message = f"storage option {key!r} must not be negative, got {value!r}"
        raise InvalidArgumentError(message, argument="storage_options")
    return number


def _split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    s3: dict[str, Any] = {}
    client: dict[str, Any] = {}
    ours: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise InvalidArgumentTypeError(
                f"storage option names must be strings, got {type(key).__name__} {key!r}", argument="storage_options"
            )
        low = key.lower()
        if low in _S3_CONFIG_KEYS:
            name = _S3_CONFIG_KEYS[low]
            if name in _BOOLEAN_S3_KEYS:
                if not isinstance(value, (bool, str)):
                    raise _option_type_error(key, value, "a boolean or a string")
                s3[name] = _boolean(value, f"storage option {key!r}")
            elif not isinstance(value, str):
                raise _option_type_error(key, value, "a string")
            else:
                s3[name] = value
        elif low in _CLIENT_KEYS:
            if not isinstance(value, (bool, str)):
                raise _option_type_error(key, value, "a boolean or a string")
            client[_CLIENT_KEYS[low]] = _boolean(value, f"storage option {key!r}")
        elif low == "max_retries":
            ours[low] = _number_option(key, value, int)
        elif low == "retry_base_delay":
            ours[low] = _number_option(key, value, float)
        else:
            raise InvalidArgumentError(f"unknown storage option {key!r}", argument="storage_options")
    return s3, client, ours


_ENDPOINT_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]*)?$")
_URL_CHARACTERS = re.compile(r"^[!#$%&-;=?-\[\]_a-z~]*$", re.IGNORECASE)
"""Characters a URL may hold unescaped (RFC 3986); anything else (spaces, ``%zz``, controls) makes obstore panic."""


def _check_endpoint(value: str, source: str) -> None:
    """An S3 endpoint is ``http://`` or ``https://`` with a host (obstore panics on anything else)."""
    detail = ""
    try:
        parts = urlsplit(value.strip())
        valid = (
            parts.scheme.lower() in {"http", "https"}
            and bool(parts.hostname)
            and _ENDPOINT_HOST.match(parts.netloc) is not None
            and _URL_CHARACTERS.match(value.strip()) is not None
            and re.search(r"%(?![0-9A-Fa-f]{2})", value) is None
        )
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        valid, detail = False, f" ({exc})"
    if not valid:
        raise InvalidArgumentError(
            f"{source} must be an http:// or https:// URL with a host, e.g. http://localhost:8333; got {value!r}"
            + detail,
            argument="storage_options",
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidArgumentError(
            f"{source} must name only the server (scheme, host and port, e.g. http://localhost:8333), got "
            f"{value!r}: the bucket and prefix go in the lakehouse URI (s3://bucket/prefix)",
            argument="storage_options",
        )


_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
"""What S3 bucket and region names consist of (obstore panics on a space, ``%`` or ``#`` in either)."""


def _check_s3_names(bucket: str, options: Mapping[str, Any]) -> None:
    """Bucket and region (the option, else obstore's environment variables) before obstore can panic on them."""
    if not 3 <= len(bucket) <= 63 or not _NAME.match(bucket):
        raise InvalidArgumentError(
            f"S3 bucket names have 3 to 63 letters, digits, '.', '-' or '_', got {bucket!r}", argument="uri"
        )
    given = [k for k in options if isinstance(k, str) and _S3_CONFIG_KEYS.get(k.lower()) == "region"]
    sources = [(f"storage option {k!r}", str(options[k])) for k in given[-1:]] or [
        (f"the {var} environment variable", os.environ[var])
        for var in ("AWS_REGION", "AWS_DEFAULT_REGION")
        if var in os.environ
    ]
    for source, region in sources:
        if not _NAME.match(region):
            raise InvalidArgumentError(
                f"{source} must be a region name such as us-east-1, got {region!r}", argument="storage_options"
            )


def _check_s3_endpoint(options: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """The endpoint obstore would use (the option, else its environment variables) before it can panic on it."""
    given = [key for key in options if isinstance(key, str) and _S3_CONFIG_KEYS.get(key.lower()) == "endpoint"]
    if given:
        _check_endpoint(str(options[given[-1]]), f"storage option {given[-1]!r}")
        return
    for var in _ENDPOINT_ENV:
        if var in environ:
            _check_endpoint(environ[var], f"the {var} environment variable")


@dataclass(frozen=True, slots=True)
class UriParts:
    """A store URI taken apart without URL parsing of local paths: ``/a#b`` is a directory named ``a#b``."""

    scheme: str
    """``file``, ``s3``, ``s3a``, ``memory``, ... (lower case); ``file`` for a plain absolute path."""
    netloc: str
    path: str
    """For ``file``: the absolute local path, literally; otherwise what follows the netloc (``/prefix``)."""


_SCHEME_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.DOTALL)
_SCHEME_ONLY = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<rest>.*)$", re.DOTALL)


def split_uri(uri: str) -> UriParts:
    """Split a store URI literally: no ``?query`` or ``#fragment``, no percent-decoding.

    A plain absolute path is a local directory named exactly so; ``file://`` URIs are read the same way (as
    txlake writes them, and as Hadoop reads them), so ``file:///data/a#b`` is the directory ``/data/a#b``.
    """
    if uri.startswith("/"):
        return UriParts("file", "", uri)
    m = _SCHEME_URI.match(uri)
    if m is not None:
        scheme, rest = m.group("scheme").lower(), m.group("rest")
        netloc, sep, path = rest.partition("/")
        return UriParts(scheme, netloc, sep + path)
    m = _SCHEME_ONLY.match(uri)
    if m is not None and m.group("scheme").lower() == "file" and m.group("rest").startswith("/"):
        return UriParts("file", "", m.group("rest"))  # file:/abs/dir
    if m is not None and len(m.group("scheme")) > 1:  # (not a Windows drive letter)
        return UriParts(m.group("scheme").lower(), "", m.group("rest"))
    return UriParts("", "", uri)


def _is_dir(path: str) -> bool:
    """Whether ``path`` is a directory; a path that cannot even be looked up (a name too long) is an error."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise local_directory_error(path, exc, creating=False) from exc


def local_root(uri: str) -> str | None:
    """The local directory of a ``file://`` URI or plain absolute path (taken literally), else ``None``."""
    where = split_uri(uri)
    if where.scheme != "file" or where.netloc not in ("", "localhost") or not where.path.startswith("/"):
        return None
    return where.path


_URI_PATH_SAFE = "/!$&'()*+,;=:@~"
"""Characters left as they are in a URI's path by :meth:`ObjectStore.public_url` (besides letters, digits, ``-._``)."""

_PERMANENT_ERRORS = (
    NotFoundError,
    AlreadyExistsError,
    FileNotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
    PreconditionError,
    NotSupportedError,
    InvalidPathError,
)
# Matched against obstore's message and its debug dump ("inner: Status { status: 503", "HttpError { kind: Connect").
# Precise on purpose: every dump contains "retry_timeout: 30s", so a bare "timeout" marker matches any error.
_TRANSIENT_PATTERN = re.compile(
    r"status(?: code)?: (?:429|500|502|503|504)\b"
    r"|HttpError \{\s*kind: (?:Connect|Request|Timeout|Interrupted)\b"
    r"|timed out|connection (?:refused|reset|closed|aborted)|error sending request|slow ?down",
    re.IGNORECASE,
)


# The store refuses the path itself: local ENAMETOOLONG / ENOTDIR / EISDIR, S3 KeyTooLongError. Retrying cannot help.
_INVALID_PATH_PATTERN = re.compile(
    r"File name too long|os error (?:36|20|21)\b|Not a directory|Is a directory|KeyTooLong", re.IGNORECASE
)


def _is_invalid_path(exc: BaseException) -> bool:
    return isinstance(exc, InvalidPathError) or (
        isinstance(exc, BaseError) and _INVALID_PATH_PATTERN.search(str(exc)) is not None
    )


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, _PERMANENT_ERRORS):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return isinstance(exc, BaseError) and _TRANSIENT_PATTERN.search(str(exc)) is not None


_io_pid: int | None = None
"""The process whose requests started obstore's I/O runtime (local disk and S3; not ``memory://``)."""


def _check_not_forked(kind: RequestKind, url: str) -> None:
    """obstore's I/O runtime does not survive ``fork``: in a child forked after its parent made a request on
    local disk or S3, every such request (of any store, new ones too) waits forever. Fail at once instead.
    Called when this process is not the one known to run the runtime (its first request, or a fork)."""
    global _io_pid
    pid = os.getpid()
    if _io_pid is None:
        _io_pid = pid
    elif _io_pid != pid:
        raise StorageError(
            f"{kind} {url}: this process was forked after its parent used txlake on local disk or S3, and the "
            "object-store client cannot run in a forked child; start it with multiprocessing's 'spawn' (or "
            "'forkserver') start method, or use txlake in the parent only after the fork",
            path=url,
            kind=kind,
        )


class ObjectStore:
    """get / head / list / put / put_if_absent / delete, counted per request kind.

    Create one with :meth:`from_uri`; it is safe to share between threads. ``counters`` counts requests
    per kind, ``faults`` holds fault-injection rules (tests), ``retry`` is the transient-failure policy.
    """

    def __init__(
        self,
        inner: Any,
        uri: str,
        *,
        retry: RetryPolicy | None = None,
        counters: RequestCounters | None = None,
        faults: FaultInjector | None = None,
        options: Mapping[str, Any] | None = None,
        key_prefix: str = "",
    ) -> None:
        self._inner = inner
        self._key_prefix = key_prefix.strip("/")  # only memory://name/sub: the inner store is memory://name
        self.uri = uri.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.counters = counters or RequestCounters()
        self.faults = faults or FaultInjector()
        self._options = dict(options or {})
        self._io = self.scheme != "memory"  # requests through obstore's I/O runtime (see _check_not_forked)

    # ----------------------------------------------------------------------------------- construction

    @classmethod
    def from_uri(
        cls, uri: str, storage_options: Mapping[str, Any] | None = None, *, must_exist: bool = False
    ) -> ObjectStore:
        """Open ``file:///abs/dir``, a plain absolute path, ``s3://bucket/prefix`` or ``memory://name``.

        Local paths are taken literally (:func:`split_uri`: ``/data/a#b`` is the directory ``a#b``). A local
        directory is created unless ``must_exist`` (then a missing one is :class:`ObjectNotFoundError`); one that
        cannot be is a :class:`StorageError` naming the path and why (:class:`InvalidObjectPathError` for a file
        in the way or a name too long). Storage options are checked first: an unknown one or an endpoint, region
        or bucket obstore cannot use is :class:`InvalidArgumentError`, a value of the wrong type
        :class:`InvalidArgumentTypeError`.
        """
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise InvalidArgumentTypeError(
                f"storage_options must be a mapping of option names to values, got {type(storage_options).__name__}",
                argument="storage_options",
            )
        options = dict(storage_options or {})
        where = split_uri(uri)
        scheme = where.scheme
        if "@" in where.netloc and scheme in {"file", "s3", "s3a"}:
            host = where.netloc.rpartition("@")[2]
            shown = f"{scheme}://****@{host}{where.path}"
            raise InvalidArgumentError(
                f"credentials in the URI ({shown}) are not accepted: give them as storage options "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or in the environment",
                argument="uri",
            )
        s3_cfg, client_cfg, ours = _split_options(options)
        default = RetryPolicy()
        retry = RetryPolicy(
            max_retries=int(ours.get("max_retries", default.max_retries)),
            base_delay=float(ours.get("retry_base_delay", default.base_delay)),
        )
        inner: Any
        key_prefix = ""
        if scheme in {"", "file"}:
            path = local_root(uri)
            if path is None:
                if scheme == "file" and where.netloc:
                    message = f"file:// URIs name a local path (file:///abs/dir), got host {where.netloc!r} in {uri!r}"
                else:
                    message = f"local lakehouse paths must be absolute, got {uri!r}"
                raise InvalidArgumentError(message, argument="uri")
            if must_exist and not _is_dir(path):
                raise ObjectNotFoundError(f"no directory {path}", path=path, kind="HEAD")
            try:
                inner = LocalStore(path, mkdir=True)
            except OSError as exc:  # a file in the way, a name too long, /proc, no permission: say which
                raise local_directory_error(path, exc) from exc
            norm = "file://" + path.rstrip("/")
        elif scheme == "memory":
            norm = uri.rstrip("/")
            key_prefix = where.path.strip("/")
            with _MEMORY_LOCK:
                inner = _MEMORY_STORES.setdefault(f"memory://{where.netloc}", MemoryStore())
        elif scheme in {"s3", "s3a"}:
            bucket = where.netloc
            _check_s3_names(bucket, options)
            _check_s3_endpoint(options, os.environ)
            prefix = where.path.strip("/")
            if "//" in prefix or prefix in {".", ".."} or "/./" in f"/{prefix}/" or "/../" in f"/{prefix}/":
                raise InvalidArgumentError(
                    f"S3 prefixes have no empty, '.' or '..' segments, got {where.path!r} in {uri!r}", argument="uri"
                )
            if "allow_http" not in client_cfg and "AWS_ALLOW_HTTP" in os.environ:
                # obstore reads endpoint and keys from the environment, but explicit client options (which we
                # always pass) replace its environment lookup for this one
                client_cfg["allow_http"] = _boolean(
                    os.environ["AWS_ALLOW_HTTP"], "the AWS_ALLOW_HTTP environment variable"
                )
            client_cfg.setdefault("timeout", timedelta(seconds=30))
            client_cfg.setdefault("connect_timeout", timedelta(seconds=5))
            inner = S3Store(
                bucket,
                prefix=prefix or None,
                config=s3_cfg,  # type: ignore[arg-type]
                client_options=client_cfg,  # type: ignore[arg-type]
                retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=30)},
            )
            norm = f"s3://{bucket}" + (f"/{prefix}" if prefix else "")
        else:
            raise InvalidArgumentError(
                f"unsupported storage scheme {scheme!r} in {uri!r} (use file://, s3://, memory://)", argument="uri"
            )
        return cls(inner, norm, retry=retry, options=options, key_prefix=key_prefix)

    @property
    def scheme(self) -> str:
        """``file``, ``s3`` or ``memory``."""
        return self.uri.split(":", 1)[0]  # "memory:" has no "//"

    @property
    def storage_options(self) -> dict[str, Any]:
        """The options this store was opened with (to reopen it elsewhere, e.g. in a Spark executor)."""
        return dict(self._options)

    def child(self, prefix: str) -> ObjectStore:
        """A store rooted at ``prefix`` below this one, sharing counters and fault rules."""
        sub = type(self).from_uri(self.url(prefix), self._options)
        sub.counters = self.counters
        sub.faults = self.faults
        sub.retry = self.retry
        return sub

    def url(self, path: str = "") -> str:
        """The absolute URI of ``path`` in this store."""
        return self.uri + ("/" + path.lstrip("/") if path else "")

    def public_url(self, path: str = "") -> str:
        """The URI other clients (delta-rs, Polars, DuckDB) open for ``path``: :meth:`url` with the characters
        URIs reserve (``#``, ``?``, ``%``, spaces, ...) percent-encoded. txlake itself reads paths literally."""
        local = self.local_path(path)
        if local is not None:
            return "file://" + quote(local, safe=_URI_PATH_SAFE)
        scheme, _, rest = self.url(path).partition("://")
        return f"{scheme}://{quote(rest, safe=_URI_PATH_SAFE)}"

    def local_path(self, path: str = "") -> str | None:
        """The filesystem path of ``path`` for ``file://`` stores, else ``None``."""
        if self.scheme != "file":
            return None
        return self.url(path)[len("file:") :].removeprefix("//") or "/"

    def remove_empty_dir(self, path: str) -> None:
        """On a local store, remove the directory ``path`` if it is empty; elsewhere (no directories) nothing.

        Deleting objects of a local store leaves their directories behind. This removes one that ends up
        empty (``os.rmdir``: a directory that still holds something, or that is gone, stays as it is); its
        parent is left alone. Best effort: an unexpected error is logged, never raised.
        """
        relative = path.strip("/")
        local = self.local_path(relative)
        if local is None or any(part in ("", ".", "..") for part in relative.split("/")):
            return  # (never the root itself, nor a path that leaves it)
        try:
            os.rmdir(local)
        except FileNotFoundError:
            return  # never created, or already removed
        except (OSError, ValueError) as exc:  # (ValueError: a NUL in the path)
            if getattr(exc, "errno", None) not in (errno.ENOTEMPTY, errno.EEXIST):  # (not empty: still in use)
                _log.warning("txlake: could not remove the empty directory %s: %s", local, exc)

    # ---------------------------------------------------------------------------------------- requests

    def _key(self, path: str) -> str:
        """The inner store's key for ``path`` (differs from ``path`` only for ``memory://name/sub``)."""
        if not self._key_prefix:
            return path
        return f"{self._key_prefix}/{path}" if path else self._key_prefix

    def _meta(self, raw: Mapping[str, Any]) -> ObjectMeta:
        meta = _meta(raw)
        if not self._key_prefix:
            return meta
        rel = meta.path[len(self._key_prefix) + 1 :]
        return ObjectMeta(path=rel, size=meta.size, last_modified=meta.last_modified, e_tag=meta.e_tag)

    def _request(
        self, kind: RequestKind, path: str, fn: Callable[[], T], *, retry: bool = True, keys: str | None = None
    ) -> T:
        """Run ``fn``, one request of ``kind`` on ``path``, with the retry policy and the armed faults.

        ``keys``: for a request on several keys (a bulk delete names its first), every key, one per line, for the
        fault rules to match against.
        """
        fault_path = path if keys is None else keys
        if self._io and _io_pid != os.getpid():
            _check_not_forked(kind, self.url(path))
        attempt = 0
        while True:
            self.counters.add(kind)
            try:
                self.faults.before(kind, fault_path)
                result = fn()
            except (NotFoundError, FileNotFoundError) as exc:
                raise ObjectNotFoundError(f"no object at {self.url(path)}", path=path, kind=kind) from exc
            except AlreadyExistsError as exc:
                raise ObjectAlreadyExistsError(
                    f"object already exists at {self.url(path)}", path=path, kind=kind
                ) from exc
            except TransientStorageError:
                if not retry or attempt >= self.retry.max_retries:
                    raise
                time.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            except BaseError as exc:
                if _is_invalid_path(exc):
                    raise InvalidObjectPathError(
                        f"{kind} {self.url(path)} failed: the store refuses this path: {_first_line(exc)}",
                        path=path,
                        kind=kind,
                    ) from exc
                if kind == "PUT" and attempt < DIRECTORY_RACE_RETRIES and self._directory_race(exc):
                    attempt += 1  # a directory on the way was removed as it was being created: create it again
                    continue
                if not _is_transient(exc):
                    raise StorageError(
                        f"{kind} {self.url(path)} failed: {self._describe(kind, path, exc)}", path=path, kind=kind
                    ) from exc
                if not retry or attempt >= self.retry.max_retries:
                    raise TransientStorageError(
                        f"{kind} {self.url(path)} failed after {attempt + 1} attempts: {describe(exc)}",
                        path=path,
                        kind=kind,
                    ) from exc
                time.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            self.faults.after(kind, fault_path)
            return result

    def _directory_race(self, exc: BaseException) -> bool:
        """Whether a local PUT failed because a directory it creates was removed meanwhile (a transaction's
        directory removed by :meth:`remove_empty_dir` as another client writes into it): ENOENT or EEXIST
        while the store's root is there."""
        root = self.local_path()
        return root is not None and os_errno(exc) in (errno.ENOENT, errno.EEXIST) and os.path.isdir(root)

    def _describe(self, kind: RequestKind, path: str, exc: BaseException) -> str:
        """Why a request failed, in one line; for a local directory, what is wrong with the path (read-only,
        virtual file system, no permission) rather than obstore's "Generic LocalFileSystem error"."""
        local = self.local_path(path)
        if local is not None and os_errno(exc) is not None:
            return local_path_problem(Path(local).parent, exc, creating=kind in {"PUT", "DELETE"})[0]
        return describe(exc)

    def get(self, path: str) -> bytes:
        """The object's bytes; :class:`ObjectNotFoundError` if absent."""
        return self._request("GET", path, lambda: bytes(obstore.get(self._inner, self._key(path)).bytes()))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object."""
        return self._request(
            "GET", path, lambda: bytes(obstore.get_range(self._inner, self._key(path), start=start, end=end))
        )

    def head(self, path: str) -> ObjectMeta:
        """Size and modification time; :class:`ObjectNotFoundError` if absent."""
        meta = self._request("HEAD", path, lambda: obstore.head(self._inner, self._key(path)))
        return self._meta(meta)

    def exists(self, path: str) -> bool:
        """Whether an object exists at ``path`` (one HEAD)."""
        try:
            self.head(path)
        except ObjectNotFoundError:
            return False
        return True

    def list(self, prefix: str, *, start_after: str | None = None) -> builtins.list[ObjectMeta]:
        """Objects under ``prefix`` (recursively), sorted by path, only those after ``start_after``.

        One LIST request is counted per page the store returns.
        """
        full = self._key(prefix.rstrip("/"))
        pfx = full + "/" if full else None
        offset = self._key(start_after) if start_after is not None else None

        def fetch() -> builtins.list[ObjectMeta]:
            out: builtins.list[ObjectMeta] = []
            pages = obstore.list(self._inner, pfx, offset=offset, chunk_size=1000)
            for i, page in enumerate(pages):
                if i:
                    self.counters.add("LIST")
                out.extend(self._meta(m) for m in page)
            return out

        try:
            result = self._request("LIST", prefix, fetch)
        except ObjectNotFoundError:
            return []
        if start_after is not None:
            result = [m for m in result if m.path > start_after]
        result.sort(key=lambda m: m.path)
        return result

    def list_dir(self, prefix: str) -> tuple[builtins.list[str], builtins.list[ObjectMeta]]:
        """One level below ``prefix``: (sub-prefixes, objects)."""
        full = self._key(prefix.rstrip("/"))
        pfx = full + "/" if full else None
        try:
            res = self._request("LIST", prefix, lambda: obstore.list_with_delimiter(self._inner, pfx))
        except ObjectNotFoundError:
            return [], []
        cut = len(self._key_prefix) + 1 if self._key_prefix else 0
        dirs = sorted(p.rstrip("/")[cut:] for p in res["common_prefixes"])
        objs = sorted((self._meta(m) for m in res["objects"]), key=lambda m: m.path)
        return dirs, objs

    def put(self, path: str, data: bytes) -> None:
        """Create or replace the object (never used for log entries)."""
        self._request("PUT", path, lambda: obstore.put(self._inner, self._key(path), data, mode="overwrite"))

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create the object atomically; :class:`ObjectAlreadyExistsError` if it exists.

        When a transient failure hides whether an earlier attempt landed, the object is read back: identical
        bytes mean our own attempt won. Callers therefore put contents that are unique to the writer (a
        transaction id), which txlake always does. If the attempts end without proof either way, the error
        raised is a :class:`TransientStorageError` (never a permanent one): the object may yet exist.
        """
        attempt = 0
        uncertain = False
        while True:
            try:
                self._request(
                    "PUT", path, lambda: obstore.put(self._inner, self._key(path), data, mode="create"), retry=False
                )
                return
            except ObjectAlreadyExistsError as exc:
                if not uncertain:
                    raise
                try:
                    if self._holds(path, data):
                        return
                except StorageError as unreadable:  # whose object it is cannot be told: not a permanent "no"
                    raise TransientStorageError(
                        f"PUT {self.url(path)}: an earlier attempt may have landed: {unreadable}", path=path, kind="PUT"
                    ) from exc
                raise
            except TransientStorageError:
                uncertain = True
                if attempt >= self.retry.max_retries:
                    if self._holds_quietly(path, data):
                        return
                    raise
                time.sleep(self.retry.delay(attempt))
                attempt += 1
            except StorageError as exc:
                if not uncertain:
                    raise  # the store refused this request: nothing was written by it
                if self._holds_quietly(path, data):
                    return
                raise TransientStorageError(
                    f"PUT {self.url(path)}: an earlier attempt may have landed: {exc}", path=path, kind="PUT"
                ) from exc

    def _holds_quietly(self, path: str, data: bytes) -> bool:
        """Whether the object holds ``data``; ``False`` when that cannot be read either."""
        try:
            return self._holds(path, data)
        except StorageError:
            return False

    def _holds(self, path: str, data: bytes) -> bool:
        try:
            return self.get(path) == data
        except ObjectNotFoundError:
            return False

    def delete(self, path: str) -> None:
        """Delete the object; deleting a missing object is not an error."""
        try:
            self._request("DELETE", path, lambda: obstore.delete(self._inner, self._key(path)))
        except ObjectNotFoundError:
            return

    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete objects in bulk (S3: one DeleteObjects request per 1000 keys); missing ones are no error.

        A failure may leave part of a batch in place (best effort: for cleanups that run again).
        """
        for start in range(0, len(paths), BULK_DELETE):
            batch = list(paths[start : start + BULK_DELETE])
            try:
                self._request(
                    "DELETE",
                    batch[0],
                    partial(obstore.delete, self._inner, [self._key(p) for p in batch]),
                    keys="\n".join(batch),
                )
            except ObjectNotFoundError:
                # a missing key ends a local store's batch where it stands (S3 reports none): the rest one by one
                for path in batch:
                    self.delete(path)

    def __repr__(self) -> str:
        return f"ObjectStore({self.uri!r})"


def delete_keys(keys: Iterable[tuple[ObjectStore, str]]) -> None:
    """Delete ``(store, key)`` pairs in bulk: one :meth:`ObjectStore.delete_many` per store."""
    by_store: dict[str, tuple[ObjectStore, list[str]]] = {}
    for store, key in keys:
        by_store.setdefault(store.uri, (store, []))[1].append(key)
    for store, batch in by_store.values():
        store.delete_many(batch)


def _meta(raw: Mapping[str, Any]) -> ObjectMeta:
    return ObjectMeta(
        path=str(raw["path"]),
        size=int(raw["size"]),
        last_modified=raw["last_modified"],
        e_tag=raw.get("e_tag"),
    )
