"""Error text of the object store in one line (obstore appends a multi-line ``Debug source:`` dump)."""

from __future__ import annotations

import re
from dataclasses import dataclass


def first_line(exc: BaseException) -> str:
    """``exc``'s message without obstore's multi-line ``Debug source:`` dump: its first line."""
    text = str(exc).split("\n\nDebug source:", 1)[0]
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


CREDENTIALS_HINT = (
    "give credentials in one of these ways: the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables "
    "(and AWS_SESSION_TOKEN for temporary ones); --storage-option aws_access_key_id=... --storage-option "
    "aws_secret_access_key=...; an IAM role of the machine (instance profile, ECS task role, or "
    "AWS_WEB_IDENTITY_TOKEN_FILE); or --storage-option aws_skip_signature=true for a public bucket"
)
ALLOW_HTTP_HINT = "set AWS_ALLOW_HTTP=true (or --storage-option aws_allow_http=true) to use an http:// endpoint"


@dataclass(frozen=True, slots=True)
class StorageProblem:
    """A failure of the object store recognised by its message: what to say instead, and what to do."""

    pattern: re.Pattern[str]
    problem: str
    hint: str


# First match wins. The messages come from obstore (object_store) and S3; they are matched only to explain them
# (the exit code is the class's), and the raw text stays available with --debug.
STORAGE_PROBLEMS: tuple[StorageProblem, ...] = (
    StorageProblem(
        re.compile(r"169\.254\.169\.254|169\.254\.170\.2|/latest/api/token|/meta-data/iam", re.IGNORECASE),
        "no AWS credentials found (none were given, and the instance metadata service has none)",
        CREDENTIALS_HINT,
    ),
    StorageProblem(
        re.compile(r"HTTP error: builder error|URL scheme is not allowed", re.IGNORECASE),
        "the endpoint is http:// but plain HTTP is not allowed",
        ALLOW_HTTP_HINT,
    ),
    StorageProblem(
        re.compile(r"InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|ExpiredToken|AuthorizationHeaderMalformed"),
        "the credentials were refused (unknown key, wrong secret or expired token)",
        CREDENTIALS_HINT,
    ),
    StorageProblem(
        re.compile(r"NoSuchBucket"),
        "the bucket does not exist",
        "check the bucket in the URI (s3://bucket/prefix) and the endpoint (AWS_ENDPOINT_URL)",
    ),
    StorageProblem(
        re.compile(r"AccessDenied|403 Forbidden|status(?: code)?: 403\b", re.IGNORECASE),
        "access denied (403): the credentials may not read or write there",
        "check that the credentials may use the bucket (its policy, the user's permissions); to use others, "
        + CREDENTIALS_HINT,
    ),
    StorageProblem(
        re.compile(r"dns error|failed to lookup address|Name or service not known", re.IGNORECASE),
        "the endpoint's host name cannot be resolved",
        "check AWS_ENDPOINT_URL / --storage-option aws_endpoint_url and AWS_REGION",
    ),
    StorageProblem(
        re.compile(r"connection refused|error trying to connect|tcp connect error", re.IGNORECASE),
        "the endpoint refused the connection (is the server running?)",
        "check AWS_ENDPOINT_URL / --storage-option aws_endpoint_url and that the server is up",
    ),
)


def storage_problem(exc: BaseException) -> StorageProblem | None:
    """The known storage problem ``exc`` reports (on its own message or the chain of causes), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        for problem in STORAGE_PROBLEMS:
            if problem.pattern.search(text):
                return problem
        current = current.__cause__ or current.__context__
    return None


def describe(exc: BaseException) -> str:
    """One line for a failed request: the known problem in plain words, else the store's first line."""
    problem = storage_problem(exc)
    return problem.problem if problem is not None else first_line(exc)
