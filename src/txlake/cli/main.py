"""The ``txlake`` command line: argument parsing, dispatch, and one error line + hint per failure."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from txlake import __version__
from txlake.cli import demo, jvm
from txlake.cli.commands import add_commands
from txlake.cli.exit_codes import ExitCode, describe_failure, epilog
from txlake.cli.options import PUBLIC_OPTIONS, STORAGE_ENV, URI_ENV, SecretMasker, storage_option
from txlake.cli.suggest import did_you_mean

ENVIRONMENT = f"""environment:
  {URI_ENV:<22} lakehouse URI when --uri is not given (demo: default ./txlake-demo)
  {", ".join(STORAGE_ENV)}
                         storage options for s3:// lakehouses (--storage-option overrides; never printed)"""


class ArgumentsError(Exception):
    """argparse found bad arguments (reported by :func:`main` with exit code 2)."""

    def __init__(self, message: str, prog: str, usage: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of exiting, so :func:`main` prints the error its own way."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(_suggest_choice(message), self.prog, self.format_usage())


_INVALID_CHOICE = re.compile(
    r"^argument (?P<arg>[^:]+): invalid choice: '(?P<given>.*)' \(choose from (?P<choices>.*)\)$"
)


def _suggest_choice(message: str) -> str:
    """argparse's "invalid choice: 'tabels' (choose from ...)" as "unknown command 'tabels'; did you mean
    'tables'?" (the choices listed only when none is close)."""
    m = _INVALID_CHOICE.match(message)
    if m is None:
        return message
    listed = m.group("choices")
    choices = re.findall(r"'([^']*)'", listed) or [c.strip() for c in listed.split(",")]  # (newer Pythons: bare)
    given = m.group("given")
    close = did_you_mean(given, choices)
    what = "unknown command" if m.group("arg") == "COMMAND" else f"argument {m.group('arg')}: invalid choice"
    if close:
        return f"{what} {given!r}{close}"
    return f"{what} {given!r} (choose from {', '.join(choices)})"


def build_parser(*, workloads: bool = True) -> argparse.ArgumentParser:
    """The ``txlake`` parser; ``workloads=False`` leaves out the bench workloads' options.

    Importing :mod:`txlake.bench` costs a noticeable part of a command's start-up, so :func:`main` imports it
    only when the command line names ``bench``.
    """
    parser = Parser(
        prog="txlake",
        description="Multi-table ACID transactions over a lakehouse of plain Delta Lake tables.",
        epilog=f"{epilog()}\n\n{ENVIRONMENT}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"txlake {__version__}")
    parser.add_argument("--debug", action="store_true", help="show stack traces on errors (secrets masked)")
    parser.add_argument(
        "--uri", dest="global_uri", metavar="URI", help="lakehouse location, for the command (as its own --uri)"
    )
    parser.add_argument(
        "--storage-option",
        dest="global_storage_options",
        metavar="KEY=VALUE",
        type=storage_option,
        action="append",
        default=[],
        help="object store option for the command, repeatable (as its own --storage-option)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_commands(sub)
    demo_parser = sub.add_parser(
        "demo",
        help="concurrent bank transfers on a local lakehouse (the main job)",
        description="Create three bank tables, run concurrent transfers between accounts in multi-table "
        "transactions for --seconds, and check that the total never changes (also through time travel). "
        "Writes only into a new lakehouse or one an earlier demo made.",
    )
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(run=demo.run)
    bench = sub.add_parser("bench", help="run a benchmark workload (writes JSON + PNG)")
    if not workloads:
        return parser
    from txlake.bench import WORKLOADS  # here, not at the top: see the docstring

    bench_sub = bench.add_subparsers(dest="workload", metavar="WORKLOAD", required=True, parser_class=Parser)
    for name, workload in sorted(WORKLOADS.items()):
        wp = bench_sub.add_parser(name, help=workload.help)
        wp.add_argument("--out", default="bench-results", help="directory for the JSON and PNG results")
        workload.add_arguments(wp)
        wp.set_defaults(run=workload.run)
    return parser


_SECRET_KEY = re.compile(r"secret|token|password|credential|key", re.IGNORECASE)


def secret_pairs(words: Sequence[str]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` words of the command line whose key names a credential (masked even in usage errors)."""
    pairs: list[tuple[str, str]] = []
    for word in words:
        text = word.split("=", 1)[1] if word.startswith("--storage-option=") else word
        key, sep, value = text.partition("=")
        key = key.strip().lower()
        if sep and not key.startswith("-") and key not in PUBLIC_OPTIONS and _SECRET_KEY.search(key):
            pairs.append((key, value))
    return pairs


def _print_error(masker: SecretMasker, message: str, hint: str | None, detail: Sequence[str] = ()) -> None:
    sys.stderr.write(masker(f"error: {message}") + "\n")
    for line in detail:
        sys.stderr.write(masker(line) + "\n")
    if hint:
        sys.stderr.write(masker(f"hint: {hint}") + "\n")


def _quiet_broken_pipe() -> None:
    """Stdout's reader went away (``txlake log | head``): drop further output instead of failing at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def is_panic(exc: BaseException) -> bool:
    """A Rust panic in a native library (obstore): ``pyo3_runtime.PanicException`` derives from BaseException."""
    return type(exc).__name__ == "PanicException" and type(exc).__module__ == "pyo3_runtime"


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` names (``txlake bench commit``'s own), for its usage line."""
    for dest in ("command", "workload"):
        chosen = getattr(args, dest, None)
        subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if chosen is None or subparsers is None or chosen not in subparsers.choices:
            break
        parser = subparsers.choices[chosen]
    return parser


def _parse(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """``words`` parsed; leftover words are an error shown with the command's own usage, and the top-level
    ``--uri`` / ``--storage-option`` (``txlake --uri X tables``) go to the command."""
    args, extra = parser.parse_known_args(words)
    command = _command_parser(parser, args)
    if extra:
        raise ArgumentsError(f"unrecognized arguments: {' '.join(extra)}", command.prog, command.format_usage())
    global_uri, global_options = args.global_uri, args.global_storage_options
    del args.global_uri, args.global_storage_options
    if global_uri is None and not global_options:
        return args
    if args.command is None:
        raise ArgumentsError("no command given (the lakehouse options go with one)", parser.prog, parser.format_usage())
    if not hasattr(args, "uri"):
        raise ArgumentsError(
            f"--uri and --storage-option do not apply to `{command.prog}`", command.prog, command.format_usage()
        )
    if global_uri is not None:
        if getattr(args, "uri", None) not in (None, global_uri):
            raise ArgumentsError("--uri is given twice, with different values", command.prog, command.format_usage())
        args.uri = global_uri
    if global_options:
        args.storage_options = [*global_options, *getattr(args, "storage_options", [])]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``txlake`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    masker = SecretMasker.from_sources(secret_pairs(words), os.environ)
    parser = build_parser(workloads="bench" in words)
    try:
        args = _parse(parser, words)
    except ArgumentsError as exc:
        sys.stderr.write(masker(exc.usage))
        _print_error(masker, str(exc), f"see `{exc.prog} --help`")
        return ExitCode.USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else ExitCode.OK if exc.code is None else ExitCode.USAGE
    if args.command is None:
        parser.print_help()
        return ExitCode.OK
    debug = bool(getattr(args, "debug", False))
    if not debug:  # sqlglot warns on stderr about SQL it reads its own way; txlake's error says what is wrong
        logging.getLogger("sqlglot").setLevel(logging.ERROR)
    masker = SecretMasker.from_sources([*getattr(args, "storage_options", []), *secret_pairs(words)], os.environ)
    try:
        result: int = args.run(args)
        return result
    except BrokenPipeError:
        _quiet_broken_pipe()
        return ExitCode.OK
    except BaseException as exc:
        if not isinstance(exc, (Exception, KeyboardInterrupt)) and not is_panic(exc):
            raise  # SystemExit and the like
        failure = describe_failure(exc, args.command)
        if debug:
            sys.stderr.write(masker("".join(traceback.format_exception(exc))))
        _print_error(masker, failure.message, failure.hint, failure.detail)
        if failure.code is ExitCode.INTERRUPTED and jvm.started_here and argv is None:
            # The command's own process (argv None: the console script), interrupted while it had a JVM: py4j's
            # threads and connections may be mid-call, and the interpreter's shutdown could wait on them forever
            # (a second Ctrl-C would then print their tracebacks). Nothing is left to clean up: the JVM exits
            # when this process does.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(int(failure.code))
        return failure.code


if __name__ == "__main__":
    sys.exit(main())
