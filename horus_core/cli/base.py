"""What every command module shares: the handler type and small argument helpers."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from horus_core.cli.output import Output
from horus_core.client import HorusClient
from horus_core.model import JobState

# A command: runs against a connected client, prints through ``out``, returns the exit status.
Handler = Callable[[HorusClient, argparse.Namespace, Output], Awaitable[int]]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

ACTIVE_STATES = (JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING)


def add_command(
    sub: Subparsers, name: str, handler: Handler, common: argparse.ArgumentParser, help_text: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, parents=[common], help=help_text, description=help_text
    )
    parser.set_defaults(func=handler, interrupt_ok=False)
    return parser


def job_state(text: str) -> JobState:
    """argparse type: a job state name, any case."""
    try:
        return JobState[text.strip().upper()]
    except KeyError:
        names = ", ".join(s.name for s in JobState)
        raise argparse.ArgumentTypeError(f"unknown state {text!r} (choose from {names})") from None
