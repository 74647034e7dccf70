"""A worker that cannot reach its master says it keeps retrying, and how (issue 39): the first
warning names the backoff and when it is logged again, the repeats the tries so far; a real
``horus-worker`` pointed at a port nothing listens on is read for it."""

from __future__ import annotations

import asyncio
import pathlib
import sys

from tests.e2e.cluster import free_port
from worker.connection import retry_note


def test_the_notes_say_it_keeps_retrying_and_how() -> None:
    first = retry_note("h:1", "UNAVAILABLE: refused", False, 1, 0.0, 0.2, 5.0)
    assert first == (
        "cannot reach the master at h:1 (UNAVAILABLE: refused); retrying in 0.2 s, then with a "
        "backoff up to every 5 s until it answers (logged again once a minute)"
    )
    later = retry_note("h:1", "UNAVAILABLE: refused", False, 14, 61.4, 5.1, 5.0)
    assert later == (
        "still cannot reach the master at h:1 after 14 tries in 61 s (UNAVAILABLE: refused); "
        "retrying every 5 s at most, next in 5.1 s"
    )
    closed = retry_note("h:1", "the master ended the stream", True, 0, 0.0, 0.2, 5.0)
    assert closed == "stream to h:1 closed (the master ended the stream); reconnecting in 0.2 s"


async def test_a_worker_pointed_at_a_wrong_port_says_it_keeps_retrying(tmp_path: pathlib.Path) -> None:
    port = free_port()  # (nothing listens there)
    argv = ["-m", "worker.main", "--master", f"127.0.0.1:{port}", "--name", "w1", "--fake-gpus", "1"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, "--state-dir", str(tmp_path / "w"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = ""
    try:
        async with asyncio.timeout(60):
            while f"cannot reach the master at 127.0.0.1:{port}" not in seen:
                line = await proc.stderr.readline()
                assert line, seen
                seen = line.decode()
    finally:
        proc.terminate()
        await proc.wait()
    assert "retrying in" in seen and "backoff up to every 5 s until it answers" in seen, seen
    assert "WARNING" in seen
