"""``make``'s pip installs with progress: pip runs as it would, but instead of ``-q``'s silence (40
to 100 s on a fresh clone, longer for torch) or pip's whole log, a line per step (what it
collects, builds, installs) and, while pip says nothing, a line every 15 s saying it still works.
On a failure pip's last lines are shown; the exit status is pip's. Standard library only: it runs
before anything is installed.

    python scripts/pip_progress.py [pip install arguments ...]
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence

TICK_S = float(os.environ.get("HORUS_PIP_TICK_S", "15"))
KEEP = 40  # pip's last lines, shown when it fails
_STEPS = (
    (re.compile(r"^Collecting (\S+)"), "collecting {0}"),
    (re.compile(r"^\s*Downloading (\S+?)(?:-\d[^ ]*)? \(([^)]+)\)"), "downloading {0} ({1})"),
    (re.compile(r"^\s*Building (?:wheel|editable) for (\S+) \(.*\): started"), "building {0}"),
    (re.compile(r"^Installing collected packages: (.*)"), "installing {0}"),
    (re.compile(r"^Successfully installed (.*)"), "installed {0}"),
    (re.compile(r"^Would install (.*)"), "would install {0}"),
)


def step(line: str) -> str | None:
    """The progress line for one line of pip's output (None: not worth a line); warnings and
    errors pass as they are."""
    text = line.rstrip()
    if text.startswith(("ERROR", "WARNING", "error:")):
        return text
    for pattern, form in _STEPS:
        m = pattern.match(text)
        if m is not None:
            return "  " + form.format(*(_short(g) for g in m.groups()))
    return None


def _short(names: str, most: int = 6) -> str:
    """A long list of packages as its count and first few."""
    parts = names.split(", ") if ", " in names else names.split()
    if len(parts) <= most:
        return names
    return f"{len(parts)} packages: {' '.join(parts[:most])} ..."


def still(elapsed_s: float, last: str) -> str:
    """The line printed while pip is quiet."""
    doing = f" ({last.strip()})" if last else ""
    return f"  ... still installing after {elapsed_s:.0f} s{doing}"


def main(argv: Sequence[str]) -> int:
    cmd = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    start, last, tail = time.monotonic(), "", deque[str](maxlen=KEEP)
    while True:
        try:
            line = lines.get(timeout=TICK_S)
        except queue.Empty:
            print(still(time.monotonic() - start, last), flush=True)
            continue
        if line is None:
            break
        tail.append(line.rstrip())
        shown = step(line)
        if shown is not None:
            print(shown, flush=True)
            last = shown if shown.startswith("  ") else last
    code = proc.wait()
    if code:
        print(f"pip failed (exit {code}); its last lines:", *tail, sep="\n", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
