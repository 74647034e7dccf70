"""``horus-worker``: the daemon on every GPU host. It dials the master and runs what it is assigned.

    horus-worker --master HOST:PORT --name NAME [--fake-gpus N | --fake-gpus 4xV100]
                 [--sim-interference FILE] [--runtime process|docker] [--state-dir DIR]
                 [--join-token T] [--grace-s 30] [--metrics-listen HOST:PORT]
                 [--sharing timeslice|mps|hami] [--hami-lib PATH] [--mps-control PATH]

    horus-worker --slurm --master HOST:PORT [--slurm-warn-s 300] [--slurm-stop-s 60] ...   (a Slurm pilot)
    horus-worker --kubernetes [--node-name NAME] [--kubeconfig FILE] ...   (worker/k8s/cli.py)

Without ``--fake-gpus`` the GPUs come from NVML. SIGTERM or SIGINT stops the attempts gracefully,
sends their final updates and exits 0. ``--kubernetes`` runs the Kubernetes node agent instead: no
master, its node's pods on the apiserver (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import pathlib
import re
import shutil
import signal
import socket
import sys
from collections.abc import Callable

import grpc
from aiohttp import web

from horus_core import __version__
from horus_core.address import DEFAULT_PORT, split_addresses, with_port
from horus_core.model import DEFAULT_GRACE_S
from worker import slurm
from worker.agent import Agent, AgentConfig, SpeedOf
from worker.files import safe_name
from worker.gpu.base import GpuInfo, GpuProbe
from worker.gpu.faults import FaultFile
from worker.gpu.ground_truth import load_ground_truth
from worker.gpu.simulated import SimulatedProbe, parse_fake_gpus, simulated_gpus
from worker.metrics import RecordingProbe, WorkerCollector, serve_metrics
from worker.runtime.base import Runtime
from worker.runtime.process import ProcessRuntime
from worker.sharing import modes, mps_daemon
from worker.sharing.guard import SharingConfig
from worker.sharing.modes import Sharing
from worker.sharing.watchdog import DEFAULT_SLACK_MIB

log = logging.getLogger("horus.worker")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ADDR = re.compile(r"^[A-Za-z0-9._:%-]{1,255}$")  # a host name, IPv4 or IPv6 address (as the master checks)


class StartupError(Exception):
    pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="horus-worker", description=__doc__.splitlines()[0])
    p.add_argument(
        "--master",
        default=os.environ.get("HORUS_MASTER", ""),
        metavar="HOST[:PORT]",
        help="the master's worker endpoint, or several masters a:50051,b:50051 (default $HORUS_MASTER; "
        "no port: 50051)",
    )
    p.add_argument("--name", help="node name (default: the host name; with --slurm: slurm-JOBID)")
    p.add_argument(
        "--rack", default="", help="the rack (switch) of this node: gangs spread over nodes prefer one rack"
    )
    p.add_argument(
        "--fake-gpus",
        metavar="N|NxMODEL[,...]",
        help="simulated GPUs instead of NVML: 4 (V100s), 4xV100, 2xK80,2xH100",
    )
    p.add_argument(
        "--sim-interference",
        type=pathlib.Path,
        metavar="FILE",
        help="with --fake-gpus: real pair speeds that differ from the model, as JSON "
        '{"pairs": [{"a": TYPE, "b": TYPE, "speed_a": 0.3, "speed_b": 0.3, "gpu_type": "v100"}]} '
        "(speeds in (0, 1], gpu_type optional); the simulated jobs run at these speeds",
    )
    p.add_argument(
        "--fake-gpu-faults",
        type=pathlib.Path,
        metavar="FILE",
        help="with --fake-gpus: inject GPU faults by appending lines 'INDEX xid N' or 'INDEX ecc COUNT' "
        "to FILE (tests and demos of the master's quarantine, docs/nodes.md)",
    )
    p.add_argument(
        "--runtime",
        choices=("process", "docker"),
        default="process",
        help="run attempts as local processes (default) or Docker containers",
    )
    p.add_argument(
        "--state-dir",
        type=pathlib.Path,
        help="attempt logs and bookkeeping (default ~/.local/state/horus/worker-NAME)",
    )
    p.add_argument(
        "--join-token",
        default=os.environ.get("HORUS_JOIN_TOKEN", ""),
        help="the master's join token (default $HORUS_JOIN_TOKEN)",
    )
    p.add_argument(
        "--grace-s",
        type=float,
        default=DEFAULT_GRACE_S,
        help="SIGTERM → SIGKILL grace of a stop when the job gives none (default 30)",
    )
    p.add_argument("--tls-ca", type=pathlib.Path, help="CA bundle of the master's certificate (enables TLS)")
    p.add_argument("--tls-cert", type=pathlib.Path, help="this worker's client certificate (mutual TLS)")
    p.add_argument("--tls-key", type=pathlib.Path, help="the client certificate's private key")
    p.add_argument(
        "--allow-mount",
        action="append",
        default=[],
        metavar="PREFIX",
        help="docker: host path prefix jobs may mount (repeatable)",
    )
    p.add_argument("--docker-url", help="docker: engine address (default $DOCKER_HOST or the local socket)")
    p.add_argument("--docker-network", default="none", help="docker: network for containers (default none)")
    p.add_argument(
        "--docker-gang-network",
        default="host",
        help=(
            "docker: network for the parts of multi-node gangs, which must reach each other (default"
            " host: MASTER_ADDR is rank 0's --advertise-addr). On a user-defined network (a bridge on"
            " one host, an attachable overlay across hosts) the rank-0 container is given the alias"
            " horus-<job>-a<attempt>-r0 and every part's MASTER_ADDR is that alias"
        ),
    )
    p.add_argument(
        "--advertise-addr",
        default="",
        metavar="HOST",
        help="address other nodes reach this one at (a gang's MASTER_ADDR; default: what the master sees)",
    )
    p.add_argument("--metrics-listen", metavar="HOST:PORT", help="serve Prometheus /metrics here (no auth)")
    p.add_argument(
        "--sharing",
        choices=[m.value for m in Sharing],
        default=modes.DEFAULT.value,
        help="how jobs that share a GPU are held to their memory caps (docs/sharing.md): timeslice "
        "(default: CUDA time-slicing, the memory watchdog alone), mps (an MPS daemon per shared GPU, "
        "pinned memory limits and SM shares), hami (HAMi-core's limits, needs --hami-lib)",
    )
    p.add_argument(
        "--hami-lib", type=pathlib.Path, metavar="PATH", help="--sharing hami: HAMi-core's libvgpu.so"
    )
    p.add_argument(
        "--mps-control",
        default=mps_daemon.CONTROL,
        metavar="PATH",
        help="--sharing mps: the MPS control binary (default nvidia-cuda-mps-control on PATH)",
    )
    p.add_argument(
        "--memory-watch-s",
        type=float,
        default=0.5,
        metavar="S",
        help="the GPU memory watchdog reads every S seconds (at most 1; default 0.5)",
    )
    p.add_argument(
        "--memory-slack-mib",
        type=int,
        default=DEFAULT_SLACK_MIB,
        metavar="MIB",
        help=f"a job is stopped above its GPU memory cap plus this (default {DEFAULT_SLACK_MIB})",
    )
    p.add_argument(
        "--slurm",
        action="store_true",
        help="run as a Slurm pilot (horus-slurm up writes this): named slurm-$SLURM_JOB_ID, on the GPUs of "
        "$SLURM_JOB_GPUS only, tagged with the job, draining itself on SIGUSR1 (docs/slurm.md)",
    )
    p.add_argument(
        "--slurm-warn-s",
        type=float,
        default=300.0,
        metavar="S",
        help="--slurm: the warning signal comes S seconds before the walltime (sbatch --signal; default 300)",
    )
    p.add_argument(
        "--slurm-stop-s",
        type=float,
        default=60.0,
        metavar="S",
        help="--slurm: what still runs S seconds before the walltime is preempted and re-queued (default 60)",
    )
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument(
        "--kubernetes",
        action="store_true",
        help="run as the Kubernetes node agent instead (no master; see horus-worker --kubernetes --help)",
    )
    p.add_argument("--version", action="version", version=f"horus-worker {__version__}")
    args = p.parse_args(argv)
    if not args.master.strip():
        p.error(
            f"--master HOST[:PORT] is required (or set $HORUS_MASTER; the port defaults to {DEFAULT_PORT})"
        )
    args.master = _address(p, "--master", lambda: ",".join(split_addresses(args.master)))
    args.pilot = _pilot(p, args)
    if args.name is None:
        args.name = args.pilot.name if args.pilot is not None else socket.gethostname().split(".")[0]
    if args.metrics_listen:
        args.metrics_listen = _address(
            p, "--metrics-listen", lambda: with_port(args.metrics_listen, None, allow_zero=True)
        )
    if not _NAME.match(args.name):
        p.error(f"--name must be 1-63 letters, digits, '.', '_' or '-', got {args.name!r}")
    if args.advertise_addr and not _ADDR.match(args.advertise_addr):
        p.error(f"--advertise-addr must be a host name or address, got {args.advertise_addr!r}")
    if args.rack and not _NAME.match(args.rack):
        p.error(f"--rack must be 1-63 letters, digits, '.', '_' or '-', got {args.rack!r}")
    if args.sim_interference and not args.fake_gpus:
        p.error("--sim-interference needs --fake-gpus (it changes how simulated GPUs behave)")
    if args.fake_gpu_faults and not args.fake_gpus:
        p.error("--fake-gpu-faults needs --fake-gpus (it injects faults into simulated GPUs)")
    if args.grace_s < 0:
        p.error("--grace-s must not be negative")
    if not 0.05 <= args.memory_watch_s <= 1.0 or args.memory_slack_mib < 0:
        p.error("--memory-watch-s must be within [0.05, 1] and --memory-slack-mib not negative")
    if args.sharing == Sharing.HAMI.value and (args.hami_lib is None or not args.hami_lib.is_file()):
        p.error("--sharing hami needs --hami-lib PATH, HAMi-core's libvgpu.so as installed by the operator")
    if args.hami_lib is not None and args.sharing != Sharing.HAMI.value:
        p.error("--hami-lib goes with --sharing hami")
    if bool(args.tls_cert) != bool(args.tls_key) or (args.tls_cert and not args.tls_ca):
        p.error("--tls-cert and --tls-key go together, and need --tls-ca")
    return args


def _pilot(p: argparse.ArgumentParser, args: argparse.Namespace) -> slurm.Pilot | None:
    """--slurm: the Slurm job this worker runs in, or exit 2 saying what is wrong."""
    if not args.slurm:
        return None
    if not 0 <= args.slurm_stop_s < args.slurm_warn_s:
        p.error("expected 0 <= --slurm-stop-s < --slurm-warn-s")
    try:
        return slurm.pilot_from_env(os.environ, args.slurm_warn_s, args.slurm_stop_s)
    except ValueError as exc:
        p.error(f"--slurm: {exc}")


def _address(p: argparse.ArgumentParser, flag: str, parse: Callable[[], str]) -> str:
    """An address flag parsed (horus_core.address), or exit 2 naming the flag and what is wrong."""
    try:
        return parse()
    except ValueError as exc:
        p.error(f"{flag}: {exc}")


def default_state_dir(name: str) -> pathlib.Path:
    base = os.environ.get("XDG_STATE_HOME") or str(pathlib.Path.home() / ".local" / "state")
    return pathlib.Path(base) / "horus" / f"worker-{safe_name(name)}"


async def open_probe(
    args: argparse.Namespace, *, nvml: object = None, proc_root: pathlib.Path = pathlib.Path("/proc")
) -> tuple[GpuProbe, list[GpuInfo], SpeedOf | None]:
    """``--fake-gpus`` (and its simulation options) or NVML (``nvml``: a pynvml module, for tests)."""
    if args.fake_gpus:
        try:
            models = parse_fake_gpus(args.fake_gpus)
            truth = load_ground_truth(args.sim_interference) if args.sim_interference else []
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        faults = FaultFile(args.fake_gpu_faults) if args.fake_gpu_faults else None
        # (a pilot's simulated GPUs are its host's: two pilots on one node split one set)
        key = socket.gethostname().split(".")[0] if args.pilot is not None else args.name
        sim = SimulatedProbe(simulated_gpus(key, models), ground_truth=truth, faults=faults)
        if truth:
            log.info(
                "simulated GPUs follow %d ground-truth pair(s) from %s", len(truth), args.sim_interference
            )
        return sim, await sim.gpus(), sim.speed_of
    try:
        from worker.gpu.nvml import NvmlProbe

        probe = await NvmlProbe.open(nvml=nvml, proc_root=proc_root)
        gpus = await probe.gpus()
    except Exception as exc:
        raise StartupError(f"no NVIDIA GPU found (NVML: {exc}); use --fake-gpus N") from None
    if not gpus:
        await probe.close()
        raise StartupError("no NVIDIA GPU found (NVML sees none); use --fake-gpus N")
    return probe, gpus, None


async def pilot_probe(
    args: argparse.Namespace, probe: GpuProbe, gpus: list[GpuInfo]
) -> tuple[GpuProbe, list[GpuInfo]]:
    """--slurm: the probe kept to the GPUs Slurm gave the job."""
    if args.pilot is None or not args.pilot.gpu_indices:
        return probe, gpus
    try:
        mine = slurm.only(gpus, args.pilot.gpu_indices)
    except ValueError as exc:
        await probe.close()
        raise StartupError(f"--slurm: {exc}") from None
    return slurm.OnlyProbe(probe, mine), mine


async def open_runtime(args: argparse.Namespace, state_dir: pathlib.Path) -> Runtime:
    if args.runtime == "process":
        return ProcessRuntime(state_dir)
    try:
        from worker.runtime.docker import DockerRuntime

        return await DockerRuntime.open(
            args.name,
            url=args.docker_url,
            allow_mounts=args.allow_mount,
            network=args.docker_network,
            gang_network=args.docker_gang_network,
            orphan_grace_s=args.grace_s,
        )
    except Exception as exc:
        raise StartupError(f"--runtime docker: {exc}") from None


def credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    if not args.tls_ca:
        return None
    try:
        ca = args.tls_ca.read_bytes()
        key = args.tls_key.read_bytes() if args.tls_key else None
        cert = args.tls_cert.read_bytes() if args.tls_cert else None
    except OSError as exc:
        raise StartupError(f"cannot read TLS files: {exc}") from None
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def make_state_dir(args: argparse.Namespace) -> pathlib.Path:
    state_dir: pathlib.Path = args.state_dir or default_state_dir(args.name)
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StartupError(f"cannot use --state-dir {state_dir}: {exc}") from None
    return state_dir


def sharing_config(args: argparse.Namespace) -> SharingConfig:
    """--sharing and the watchdog's settings; mps needs its control binary (checked here)."""
    mode = Sharing(args.sharing)
    if mode is Sharing.MPS and shutil.which(args.mps_control) is None:
        raise StartupError(f"--sharing mps: {args.mps_control} not found (install the NVIDIA driver's MPS)")
    hami = args.hami_lib.resolve() if args.hami_lib is not None else None
    return SharingConfig(mode, args.memory_watch_s, args.memory_slack_mib, args.mps_control, hami)


async def serve(args: argparse.Namespace, config: AgentConfig) -> None:
    state_dir = config.state_dir
    probe, gpus, speed_of = await open_probe(args)
    probe, gpus = await pilot_probe(args, probe, gpus)
    if args.pilot is not None:
        config = dataclasses.replace(config, slurm=await slurm.tag(args.pilot))
    try:
        runtime = await open_runtime(args, state_dir)
    except BaseException:
        await probe.close()
        raise
    metrics = None
    if args.metrics_listen:
        probe = RecordingProbe(probe)
        try:
            metrics = await start_metrics(args.name, gpus, probe, args.metrics_listen)
        except BaseException:
            await runtime.close()
            await probe.close()
            raise
    agent = Agent(config, gpus, probe, runtime, speed_of=speed_of)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, agent, sig)
    if args.pilot is not None:
        slurm.on_warning(agent, args.pilot)
    kind = "simulated" if args.fake_gpus else "NVML"
    models = ", ".join(sorted({g.model for g in gpus}))
    log.info(
        "horus-worker %s: %d GPU(s) (%s, %s), runtime %s, sharing %s, master %s, state %s",
        args.name,
        len(gpus),
        models,
        kind,
        runtime.name,
        config.sharing.mode.value,
        args.master,
        state_dir,
    )
    try:
        await agent.run()
    finally:
        if metrics is not None:
            await metrics.cleanup()
        await runtime.close()
        await probe.close()
    log.info("horus-worker %s stopped", args.name)


async def start_metrics(name: str, gpus: list[GpuInfo], probe: RecordingProbe, listen: str) -> web.AppRunner:
    try:
        runner, port = await serve_metrics(WorkerCollector(name, gpus, probe), listen)
    except OSError as exc:
        raise StartupError(str(exc)) from None
    print(f"horus-worker metrics on http://{listen.rpartition(':')[0]}:{port}/metrics", flush=True)
    return runner


def _on_signal(agent: Agent, sig: signal.Signals) -> None:
    log.info("%s: stopping attempts and shutting down", sig.name)
    agent.request_shutdown()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--kubernetes" in argv:
        from worker.k8s.cli import main as node_agent

        return node_agent(argv)
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("grpc").setLevel(logging.WARNING)
    try:
        config = AgentConfig(
            args.name,
            args.master,
            make_state_dir(args),
            args.join_token,
            args.grace_s,
            credentials(args),
            advertise_addr=args.advertise_addr,
            rack=args.rack,
            sharing=sharing_config(args),
        )
        asyncio.run(serve(args, config))
    except StartupError as exc:
        print(f"horus-worker: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
