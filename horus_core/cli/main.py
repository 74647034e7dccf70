"""``hctl``: argument parsing, the connection, and the one place errors become exit codes.

Exit codes: 0 success; 1 failure (including an unreachable master, and ``wait`` for a job that
did not succeed); 2 bad input (usage errors and INVALID_ARGUMENT, whose message names the field);
124 ``wait --timeout`` ran out; 130 interrupted (Ctrl-C ends ``watch``, ``top`` and ``logs -f``
with 0).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from horus_core import __version__, errors
from horus_core.address import split_addresses
from horus_core.cli.output import FORMATS, TABLE, YAML, Output

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _modules() -> tuple[ModuleType, ...]:
    """The command modules: imported when a command is parsed, so that ``hctl --version``
    loads neither them nor the client (grpc, asyncio)."""
    from horus_core.cli import apply, cluster, describe, jobs, logs, pods, queues, submit, top, waiting

    return (cluster, jobs, submit, apply, waiting, logs, top, queues, describe, pods)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hctl",
        description="Command-line client of the Horus GPU cluster manager.",
        epilog="Options -o/--master/--token/--rpc-timeout may also follow the command.",
    )
    parser.add_argument("--version", action="version", version=f"hctl {__version__}")
    _global_options(parser, with_defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, with_defaults=False)
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for module in _modules():
        module.register(sub, common)
    _COMMANDS.clear()
    _COMMANDS.update(sub.choices)
    return parser


_COMMANDS: dict[str, argparse.ArgumentParser] = {}  # command -> its parser (the last one built)


def unknown_options(parser: argparse.ArgumentParser, cmd: str | None, extra: list[str]) -> None:
    """Exit 2 with the command's own usage and, for a misspelt option, the nearest ones."""
    command = _COMMANDS.get(cmd or "", parser)
    known = [s for action in command._actions for s in action.option_strings]
    hints = []
    for arg in extra:
        near = difflib.get_close_matches(arg.split("=", 1)[0], known, n=1) if arg.startswith("-") else []
        hints.append(f"{arg} (did you mean {near[0]}?)" if near else arg)
    command.error(f"unrecognized arguments: {' '.join(hints)}")


def _global_options(parser: argparse.ArgumentParser, *, with_defaults: bool) -> None:
    """On the main parser with real defaults; on every command with none, so that an option given
    after the command overrides the one before it and an absent one changes nothing."""

    from horus_core.client import DEFAULT_TARGET

    def default(value: object) -> object:
        return value if with_defaults else argparse.SUPPRESS

    parser.add_argument(
        "--master",
        metavar="HOST[:PORT]",
        default=default(os.environ.get("HORUS_MASTER") or DEFAULT_TARGET),
        help=f"master address, or several: a:50051,b:50051 (env HORUS_MASTER, default {DEFAULT_TARGET}; "
        "no port: 50051)",
    )
    parser.add_argument(
        "--token",
        default=default(os.environ.get("HORUS_TOKEN") or None),
        help="bearer token (env HORUS_TOKEN)",
    )
    for flag, env, what in (
        ("--tls-ca", "HORUS_TLS_CA", "CA of the master's certificate: use TLS"),
        ("--tls-cert", "HORUS_TLS_CERT", "client certificate for mutual TLS"),
        ("--tls-key", "HORUS_TLS_KEY", "the client certificate's key"),
    ):
        parser.add_argument(
            flag, metavar="PEM", default=default(os.environ.get(env) or None), help=f"{what} (env {env})"
        )
    parser.add_argument("-o", "--output", choices=FORMATS, default=default(TABLE), help="output format")
    parser.add_argument(
        "--rpc-timeout", type=float, default=default(10.0), metavar="SECONDS", help="deadline of each call"
    )


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split at the first ``--``: what follows is the job's command (``hctl submit``)."""
    if "--" in argv:
        i = list(argv).index("--")
        return list(argv[:i]), list(argv[i + 1 :])
    return list(argv), []


def main(argv: Sequence[str] | None = None) -> int:
    head, tail = split_command(sys.argv[1:] if argv is None else argv)
    if head == ["--version"]:  # (answered before the commands and the client are imported)
        print(f"hctl {__version__}")
        return EXIT_OK
    import asyncio

    parser = build_parser()
    args, extra = parser.parse_known_args(head)
    if extra:
        unknown_options(parser, getattr(args, "cmd", None), extra)
    if tail and args.cmd != "submit":
        parser.error("arguments after '--' are only taken by 'submit'")
    if args.output == YAML and args.cmd != "get":
        parser.error("-o yaml is only taken by 'get' (e.g. hctl get job ID -o yaml)")
    args.command_argv = tail
    if not getattr(args, "offline", False):
        try:
            args.master = ",".join(split_addresses(args.master))
        except ValueError as exc:
            parser.error(f"--master (or $HORUS_MASTER): {exc}")
    try:
        return asyncio.run(_run(args, Output(args.output)))
    except errors.HorusError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        return EXIT_OK if args.interrupt_ok else EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `hctl logs ID | head`
        _silence_stdout()
        return EXIT_OK


async def _run(args: argparse.Namespace, out: Output) -> int:
    if getattr(args, "offline", False):  # (hctl describe: no master)
        offline: int = await args.func(None, args, out)
        return offline

    from horus_core.client import HorusClient, tls_credentials

    creds = tls_credentials(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None
    async with HorusClient.connect(
        args.master, token=args.token, timeout=args.rpc_timeout, credentials=creds
    ) as client:
        code: int = await args.func(client, args, out)
        return code


def _fail(exc: errors.HorusError) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, errors.Unauthenticated):
        message += " (this master wants a token: --token TOKEN or the HORUS_TOKEN variable)"
    elif isinstance(exc, errors.PermissionDenied):
        message += " (the user of your token, --token or HORUS_TOKEN, may not do this)"
    print(f"hctl: error: {message}", file=sys.stderr)
    return EXIT_USAGE if isinstance(exc, errors.InvalidArgument) else EXIT_FAILURE


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
