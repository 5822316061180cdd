"""Where the lakehouse is and how to reach it: ``--uri``/``TXLAKE_URI``, storage options, secret masking."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import txlake
from txlake.cli.exit_codes import LakehouseNotFoundError, UsageError
from txlake.errors import TxlakeError, VersionNotFoundError
from txlake.storage.local import local_directory_error
from txlake.storage.store import local_root, split_uri

URI_ENV = "TXLAKE_URI"
STORAGE_ENV: Mapping[str, str] = {
    "AWS_ENDPOINT_URL": "aws_endpoint_url",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
    "AWS_REGION": "aws_region",
    "AWS_ALLOW_HTTP": "aws_allow_http",
}
"""Environment variables read as storage options (for ``s3://`` lakehouses), and the option each sets."""

# Storage options whose values may be shown; every other value is a credential and is never printed.
PUBLIC_OPTIONS = frozenset(
    {
        "aws_endpoint_url",
        "aws_endpoint",
        "endpoint_url",
        "endpoint",
        "aws_region",
        "region",
        "aws_allow_http",
        "allow_http",
        "aws_virtual_hosted_style_request",
        "aws_skip_signature",
        "max_retries",
        "retry_base_delay",
    }
)
MASK = "****"
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def storage_option(text: str) -> tuple[str, str]:
    """Parse one ``--storage-option KEY=VALUE`` (argparse ``type``; never echoes the value, it may be secret)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError("expected KEY=VALUE (e.g. aws_region=us-east-1)")
    return key.strip().lower(), value


def add_location_arguments(parser: argparse.ArgumentParser) -> None:
    """``--uri`` and ``--storage-option``: where the lakehouse is and how to reach it."""
    parser.add_argument(
        "--uri",
        help=f"lakehouse location: file:///dir, a local directory, s3://bucket/prefix, memory://name "
        f"(default: ${URI_ENV})",
    )
    parser.add_argument(
        "--storage-option",
        dest="storage_options",
        metavar="KEY=VALUE",
        type=storage_option,
        action="append",
        default=[],
        help="object store option, repeatable (e.g. aws_endpoint_url=http://localhost:8333); s3:// lakehouses "
        "also read AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, "
        "AWS_ALLOW_HTTP (flags win); values are never printed",
    )


@dataclass(frozen=True)
class Location:
    """A lakehouse URI and the storage options to open it with."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)

    def masked_options(self) -> dict[str, str]:
        """The storage options with every credential replaced by ``****`` (safe to print)."""
        userinfo = SecretMasker()
        return {k: (userinfo(v) if k in PUBLIC_OPTIONS else MASK) for k, v in sorted(self.storage_options.items())}


def normalize_uri(raw: str) -> str:
    """A URI the library accepts: local paths (relative too) become absolute ``file://`` URIs."""
    raw = raw.strip()
    if not raw:
        raise UsageError("the lakehouse URI is empty", hint=f"pass --uri or set {URI_ENV}")
    if "://" in raw:
        return raw
    parts = split_uri(raw)
    if parts.scheme == "file":  # file:/abs/dir, as Spark and Java print local paths
        if not parts.path.startswith("/"):
            raise UsageError(
                f"file: URIs name an absolute path (file:/abs/dir or file:///abs/dir), got {raw!r}",
                hint="pass the directory itself: a plain path, relative or absolute, is a local lakehouse",
            )
        return "file://" + parts.path
    if parts.scheme:  # s3:bucket and the like: a scheme without //
        raise UsageError(
            f"{parts.scheme}: URIs look like {parts.scheme}://..., got {raw!r}",
            hint=f"for a local directory whose name has a colon, write ./{raw}",
        )
    return "file://" + str(Path(raw).expanduser().resolve())


def storage_options_from(flags: Iterable[tuple[str, str]], environ: Mapping[str, str], uri: str) -> dict[str, str]:
    """Storage options: ``AWS_*`` environment variables (for ``s3://`` only), overridden by flags."""
    options: dict[str, str] = {}
    if split_uri(uri).scheme in {"s3", "s3a"}:
        options.update({opt: environ[var] for var, opt in STORAGE_ENV.items() if environ.get(var)})
    options.update(dict(flags))
    return options


def resolve_location(args: argparse.Namespace, environ: Mapping[str, str], *, uri: str | None = None) -> Location:
    """The lakehouse location of a command: ``uri``, else ``--uri``, else ``$TXLAKE_URI``; usage error if none."""
    raw = uri or getattr(args, "uri", None) or environ.get(URI_ENV)
    if not raw:
        raise UsageError(
            "no lakehouse given",
            hint=f"pass --uri URI (e.g. --uri ./lake or --uri s3://bucket/prefix) or set {URI_ENV}",
        )
    normalized = normalize_uri(raw)
    return Location(normalized, storage_options_from(getattr(args, "storage_options", None) or (), environ, normalized))


def _local_dir(uri: str) -> Path | None:
    root = local_root(uri)
    return Path(root) if root is not None else None


def open_lakehouse(location: Location) -> txlake.Lakehouse:
    """Connect to an existing lakehouse (never creates one, not even a local directory)."""
    local = _local_dir(location.uri)
    if local is not None:
        try:
            is_dir = local.is_dir()
        except OSError as exc:  # a name too long, a symbolic link loop: the path itself is wrong (exit 7)
            raise local_directory_error(local, exc, creating=False) from exc
        if not is_dir:
            what = "is a file, not a directory" if local.exists() else "does not exist"
            raise LakehouseNotFoundError(
                f"no lakehouse at {location.uri}: the path {what}",
                hint="check --uri / TXLAKE_URI, or create a lakehouse with `txlake init URI`",
            )
    try:
        return txlake.connect(location.uri, dict(location.storage_options), create=False)
    except VersionNotFoundError as exc:
        if exc.version != 0:
            raise
        memory = location.uri.startswith("memory://")
        raise LakehouseNotFoundError(
            f"no txlake lakehouse at {location.uri}",
            hint="a memory:// lakehouse exists only inside the process that made it (e.g. `txlake demo`)"
            if memory
            else "check --uri / TXLAKE_URI, or create a lakehouse with `txlake init URI`",
        ) from exc
    except ValueError as exc:
        if isinstance(exc, TxlakeError):
            raise
        raise UsageError(str(exc), hint="see `txlake --help` for URI forms and storage options") from exc


def create_lakehouse(location: Location) -> txlake.Lakehouse:
    """Connect, initializing an empty lakehouse at the location if it has none."""
    try:
        return txlake.connect(location.uri, dict(location.storage_options), create=True)
    except ValueError as exc:
        if isinstance(exc, TxlakeError):
            raise
        raise UsageError(str(exc), hint="see `txlake --help` for URI forms and storage options") from exc


class SecretMasker:
    """Replaces credential values (and ``user:password@`` in URIs) in any text the command line prints."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True)

    @classmethod
    def from_sources(cls, flags: Iterable[tuple[str, str]], environ: Mapping[str, str]) -> SecretMasker:
        """Mask every non-public value given by flags and every credential in the ``AWS_*`` environment."""
        secrets = [v for k, v in flags if k not in PUBLIC_OPTIONS]
        secrets += [environ[var] for var, opt in STORAGE_ENV.items() if opt not in PUBLIC_OPTIONS and environ.get(var)]
        return cls(secrets)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
