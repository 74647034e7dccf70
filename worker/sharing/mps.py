"""When each GPU's MPS control daemon runs, as a pure book of the GPU's attempts (docs/sharing.md).

One daemon per GPU, started when the GPU first gets a second job (the job that starts then, and
every later one while it runs, is its client), quit when the GPU is idle (no attempt left on
it), restarted at once after a crash while attempts remain, its clients stopped and re-queued
(their server is gone). A job with several GPUs is never a client (a client reaches one daemon),
nor is one with its GPUs to itself. Each method returns the effects the shell
(:class:`worker.sharing.guard.SharingGuard`) carries out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[str, int]  # (job id, attempt)


@dataclass(frozen=True, slots=True)
class StartDaemon:
    gpu: str


@dataclass(frozen=True, slots=True)
class QuitDaemon:
    gpu: str


@dataclass(frozen=True, slots=True)
class StopClients:
    keys: tuple[Key, ...]
    reason: str


MpsEffect = StartDaemon | QuitDaemon | StopClients


@dataclass
class _Gpu:
    running: bool = False  # a daemon was started and has not exited since
    users: set[Key] = field(default_factory=set)  # every live attempt on the GPU
    clients: set[Key] = field(default_factory=set)  # those started as the daemon's clients


class MpsBook:
    def __init__(self) -> None:
        self._gpus: dict[str, _Gpu] = {}

    def _gpu(self, uuid: str) -> _Gpu:
        return self._gpus.setdefault(uuid, _Gpu())

    def starting(self, key: Key, gpus: tuple[str, ...], eligible: bool) -> tuple[bool, list[MpsEffect]]:
        """An attempt is about to start on ``gpus``: whether it is a client (then its GPU's
        daemon runs before it starts), and the effects. ``eligible``: one GPU, shared."""
        for uuid in gpus:
            self._gpu(uuid).users.add(key)
        if not eligible or len(gpus) != 1:
            return False, []
        gpu = self._gpu(gpus[0])
        if not gpu.running and len(gpu.users) < 2:
            return False, []
        gpu.clients.add(key)
        if gpu.running:
            return True, []
        gpu.running = True
        return True, [StartDaemon(gpus[0])]

    def ended(self, key: Key) -> list[MpsEffect]:
        """An attempt is over (or never started): quit the daemon of a GPU left idle."""
        out: list[MpsEffect] = []
        for uuid, gpu in self._gpus.items():
            if key in gpu.users:
                gpu.users.discard(key)
                gpu.clients.discard(key)
                if not gpu.users and gpu.running:
                    gpu.running = False
                    out.append(QuitDaemon(uuid))
        return out

    def crashed(self, uuid: str) -> list[MpsEffect]:
        """The daemon of ``uuid`` exited without being asked: its clients are stopped, and it is
        started again at once if attempts remain on the GPU."""
        gpu = self._gpus.get(uuid)
        if gpu is None or not gpu.running:
            return []
        out: list[MpsEffect] = []
        if gpu.clients:
            why = f"the MPS daemon of GPU {uuid} died; re-queued"
            out.append(StopClients(tuple(sorted(gpu.clients)), why))
            gpu.clients.clear()
        if gpu.users:
            out.append(StartDaemon(uuid))
        else:
            gpu.running = False
        return out

    def start_failed(self, uuid: str) -> list[MpsEffect]:
        """A daemon could not be started: its would-be clients run without it (time-sliced, held
        to their caps by the watchdog alone)."""
        gpu = self._gpus.get(uuid)
        if gpu is not None:
            gpu.running = False
            gpu.clients.clear()
        return []

    def is_client(self, key: Key) -> bool:
        return any(key in g.clients for g in self._gpus.values())

    def running(self) -> list[str]:
        """The GPUs whose daemon should be running now."""
        return sorted(u for u, g in self._gpus.items() if g.running)
