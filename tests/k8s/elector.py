"""A real process campaigning for a Lease with master.k8s.lease, for the leader election tests:
``python -m tests.k8s.elector KUBECONFIG NAMESPACE NAME IDENTITY OUT``. While it leads (its
fenced ``leading``), it appends ``IDENTITY WALLTIME`` to OUT every 50 ms; the test reads the file
to see who led when. SIGTERM is a clean exit (the lease is released)."""

from __future__ import annotations

import asyncio
import pathlib
import signal
import sys
import time
from typing import TextIO

from horus_core.kubeapi import Kube, load_kubeconfig
from master.k8s.lease import Elector


async def main(kubeconfig: str, namespace: str, name: str, identity: str, out: TextIO) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Kube(load_kubeconfig(pathlib.Path(kubeconfig)), "horus-k8s-test") as kube:
        elector = Elector(kube, namespace, name, identity)

        async def work() -> None:
            while True:
                if elector.leading:
                    out.write(f"{identity} {time.time():.3f}\n")
                    out.flush()
                await asyncio.sleep(0.05)

        await elector.run(stop, work)


if __name__ == "__main__":
    with open(sys.argv[5], "a", encoding="utf-8") as ticks:
        kubeconfig, namespace, name, identity = sys.argv[1:5]
        asyncio.run(main(kubeconfig, namespace, name, identity, ticks))
