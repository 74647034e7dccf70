"""The fault suite's job: records its attempt's life as timestamps in ``OUT/<job>.<attempt>.<pid>``.

    python recorder.py OUT SECONDS

A tick (unix seconds) every 20 ms, then ``done``; the first and last ticks bound when the attempt
ran (a killed attempt stops ticking), so overlapping attempts of one job show in the files.
"""

import os
import sys
import time

out, seconds = sys.argv[1], float(sys.argv[2])
name = f"{os.environ['HORUS_JOB_ID']}.{os.environ['HORUS_ATTEMPT']}.{os.getpid()}"
fd = os.open(os.path.join(out, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
began = time.monotonic()
while True:
    os.write(fd, f"{time.time():.4f}\n".encode())
    if time.monotonic() - began >= seconds:
        break
    time.sleep(0.02)
os.write(fd, b"done\n")
